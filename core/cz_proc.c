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

/* The value of the first line of /proc/cpuinfo starting with `key` ("key\t: value"). */
static bool cpuinfo_value(const char *key, char *buf, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    size_t kl = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0 || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t len = strcspn(v, "\n");
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
            len--;
        if (len == 0)
            continue;
        if (len >= n)
            len = n - 1;
        memcpy(buf, v, len);
        buf[len] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

void cz_proc_cpu_model(char *buf, size_t n)
{
    if (n == 0)
        return;
    if (!cpuinfo_value("model name", buf, n) && !cpuinfo_value("Processor", buf, n) &&
        !cpuinfo_value("CPU part", buf, n))
        snprintf(buf, n, "unknown");
}
