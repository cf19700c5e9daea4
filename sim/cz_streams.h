/* cz_streams.h - steps sharing one GPU and its host thread on separate device streams, as
 * the simulator models VoxServe's asynchronous pipeline (VoxServe, section
 * 3.2.2 and Figure 5); the contention factor is the one of Nova's co-running steps
 * (Nova, section III-B2; runtime/cz_xstage.c).
 *
 * Each stream has at most one step in flight. A step has a host phase (the per-step work
 * on the CPU: scheduling, launches, sampling; the cost model's step_overhead_s) and then a
 * GPU phase (the roofline's time of its kernels), each given as its seconds alone. The
 * host phases of the steps in flight share the one host thread (each at 1 / k of its
 * speed with k of them in it); their GPU phases share the GPU: with k of them on it each
 * progresses at 1 / (1 + (k - 1)(c - 1)) of its speed alone, c being the contention factor
 * `corun_slowdown` (>= 1): c = 1 overlaps co-running kernels for free, c = 2 time-shares
 * the GPU with no gain (each at half speed), more than 2 loses throughput to interference.
 * So one stream's host work overlaps another's kernels, which is what removes the bubbles
 * of a synchronous loop.
 *
 * The driver posts an event at each step's next phase boundary (cz_streams_next_s); when a
 * step enters or leaves a phase every boundary moves, so the driver re-posts them all and
 * tells stale events apart by the epoch, which every change advances.
 *
 * A pure timing model: it reads no clock, allocates only in cz_streams_init, and a change
 * costs O(streams). */
#ifndef CZ_STREAMS_H
#define CZ_STREAMS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cz_streams {
    uint32_t n;          /* streams */
    double corun;        /* c: the GPU's contention factor */
    double *host_left_s; /* per stream: host work left of its step, in seconds alone */
    double *gpu_left_s;  /* per stream: GPU work left, in seconds alone */
    uint8_t *phase;      /* per stream: 0 idle, 1 host phase, 2 GPU phase */
    uint32_t on_host;    /* steps in their host phase */
    uint32_t on_gpu;     /* steps in their GPU phase */
    uint32_t inflight;   /* steps in flight */
    double at_s;         /* time the work left was last brought up to date */
    uint64_t epoch;      /* advanced by every change */
} cz_streams;

/* `n` >= 1 idle streams with contention factor corun_slowdown >= 1 (asserted). */
void cz_streams_init(cz_streams *s, uint32_t n, double corun_slowdown);
void cz_streams_free(cz_streams *s);

/* How many times its time alone a GPU phase takes while `k` are on the GPU:
 * 1 + (k - 1)(c - 1), and 1 for k <= 1. */
double cz_streams_slowdown(const cz_streams *s, uint32_t k);

/* Starts a step on idle stream i at now_s (>= the last change, asserted): host_s >= 0
 * seconds on the host, then gpu_s >= 0 on the GPU. */
void cz_streams_start(cz_streams *s, uint32_t i, double now_s, double host_s, double gpu_s);

/* When the current phase of busy stream i ends if nothing changes before. */
double cz_streams_next_s(const cz_streams *s, uint32_t i);

/* Busy stream i reached its phase boundary at now_s (the time cz_streams_next_s gave it):
 * from the host phase it moves to the GPU phase and false is returned; a step whose GPU
 * phase (or whole step) is over ends and true is returned, the stream idle again. */
bool cz_streams_boundary(cz_streams *s, uint32_t i, double now_s);

#endif
