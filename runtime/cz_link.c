/* cz_link.c - see cz_link.h. */
#include "cz_link.h"

#include "cz_base.h"

void cz_link_init(cz_link *l, double bw_Bps, double latency_s, bool full_duplex)
{
    CZ_ASSERT(bw_Bps > 0 && latency_s >= 0);
    *l = (cz_link){.bw_Bps = bw_Bps, .latency_s = latency_s, .full_duplex = full_duplex};
}

double cz_link_submit(cz_link *l, double now_s, double bytes, bool to_host)
{
    CZ_ASSERT(bytes >= 0);
    int dir = to_host ? 1 : 0;
    double free_at = l->free_at_s[dir];
    if (!l->full_duplex && l->free_at_s[1 - dir] > free_at)
        free_at = l->free_at_s[1 - dir];
    double start = now_s > free_at ? now_s : free_at;
    double dur = l->latency_s + bytes / l->bw_Bps;
    double done = start + dur;
    l->free_at_s[dir] = done;
    if (!l->full_duplex)
        l->free_at_s[1 - dir] = done;
    l->busy_s[dir] += dur;
    l->bytes[dir] += bytes;
    return done;
}

double cz_link_eta(const cz_link *l, double now_s, double bytes, bool to_host)
{
    cz_link copy = *l;
    return cz_link_submit(&copy, now_s, bytes, to_host);
}
