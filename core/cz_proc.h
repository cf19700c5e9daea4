/* cz_proc.h - facts about the running process and its machine for run statistics (the
 * CLI's run line, the benchmarks, a profile's description of the machine). */
#ifndef CZ_PROC_H
#define CZ_PROC_H

#include <stddef.h>
#include <stdint.h>

/* Peak resident set size of this process, in bytes: VmHWM from /proc/self/status, which
 * starts afresh at exec. Where that cannot be read (no procfs), getrusage's ru_maxrss,
 * which on Linux survives exec, so a process started by a larger one reports that
 * parent's peak when it is the larger. 0 when neither is available. */
uint64_t cz_proc_peak_rss_bytes(void);

/* The CPU's model name into buf (n > 0 bytes, always terminated): the first "model name"
 * line of /proc/cpuinfo (x86), else its "Processor" or "CPU part" line (Arm), else
 * "unknown". */
void cz_proc_cpu_model(char *buf, size_t n);

#endif
