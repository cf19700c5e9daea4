/* bench_stream.h - the machine's memory bandwidth as McCalpin's STREAM measures it, for
 * benchmarks that report a memory-bound kernel (a decode GEMV, paged attention) as a share
 * of what memory can deliver.
 *
 * Three arrays of 2^24 doubles (128 MiB each, far above any last-level cache), each
 * thread working on its own contiguous slice, which it also touched first; each figure
 * is the best of 10 runs. Bytes are counted as STREAM counts them (copy: 16 per element,
 * triad: 24; the write-allocate reads are not counted). */
#ifndef CZ_BENCH_STREAM_H
#define CZ_BENCH_STREAM_H

#include <stdint.h>

typedef struct cz_bench_stream {
    double copy_Bps;  /* c[i] = a[i] */
    double triad_Bps; /* a[i] = b[i] + s x c[i] */
} cz_bench_stream;

/* Runs copy and triad on `threads` threads (>= 1; a thread that cannot start aborts the
 * benchmark) and returns bytes per second of each. Takes about a second; allocates and
 * frees 384 MiB. */
cz_bench_stream cz_bench_stream_measure(uint32_t threads);

/* The triad's bytes per second alone (cz_bench_stream_measure(threads).triad_Bps). */
double cz_bench_stream_triad_Bps(uint32_t threads);

#endif
