/* cz_proc.c - see cz_proc.h. */
#include "cz_proc.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* VmHWM in bytes from /proc/self/status ("VmHWM:    12345 kB"); false when unreadable. */
static bool read_vmhwm(uint64_t *bytes)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (strncmp(line, "VmHWM:", 6) == 0 && sscanf(line + 6, "%llu kB", &kb) == 1) {
            *bytes = (uint64_t)kb * 1024;
            found = true;
        }
    }
    fclose(f);
    return found;
}

uint64_t cz_proc_peak_rss_bytes(void)
{
    uint64_t bytes;
    if (read_vmhwm(&bytes))
        return bytes;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}
