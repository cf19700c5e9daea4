/* cz_link.h - a host link (PCIe or C2C) between a GPU and host memory, as the simulator
 * models it: transfers are served first-come-first-served per direction, each taking the
 * link's latency plus bytes / bandwidth; a half-duplex link serves both directions from
 * one queue. The link is a pure timing model: it returns when a transfer started now will
 * complete, and remembers when each direction becomes free. */
#ifndef CZ_LINK_H
#define CZ_LINK_H

#include <stdbool.h>

typedef struct cz_link {
    double bw_Bps;       /* bytes per second, per direction */
    double latency_s;
    bool full_duplex;
    double free_at_s[2]; /* [0] host to device, [1] device to host */
    double busy_s[2];    /* total time each direction spent transferring */
    double bytes[2];
} cz_link;

void cz_link_init(cz_link *l, double bw_Bps, double latency_s, bool full_duplex);

/* A transfer of `bytes` in direction `to_host` submitted at now_s: returns the time it
 * completes and marks the direction busy until then. */
double cz_link_submit(cz_link *l, double now_s, double bytes, bool to_host);
/* A transfer of `bytes` submitted at now_s from the device of link `src` to the device of
 * link `dst` (a KV pull between GPUs, each link its device's network interface): it
 * starts when both the source's outgoing direction (to_host's) and the destination's
 * incoming one are free, takes the slower link's latency plus bytes over the smaller
 * bandwidth, and holds both until it completes; one link for both ends (a copy within a
 * device) holds its two directions. Returns when it completes. */
double cz_link_pair_submit(cz_link *src, cz_link *dst, double now_s, double bytes);
/* When such a transfer would complete, without submitting it. */
double cz_link_eta(const cz_link *l, double now_s, double bytes, bool to_host);

#endif
