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

double cz_link_pair_submit(cz_link *src, cz_link *dst, double now_s, double bytes)
{
    CZ_ASSERT(bytes >= 0 && src->full_duplex && dst->full_duplex);
    double start = now_s;
    if (src->free_at_s[1] > start)
        start = src->free_at_s[1];
    if (dst->free_at_s[0] > start)
        start = dst->free_at_s[0];
    double bw = src->bw_Bps < dst->bw_Bps ? src->bw_Bps : dst->bw_Bps;
    double lat = src->latency_s > dst->latency_s ? src->latency_s : dst->latency_s;
    double dur = lat + bytes / bw, done = start + dur;
    src->free_at_s[1] = dst->free_at_s[0] = done;
    src->busy_s[1] += dur;
    dst->busy_s[0] += dur;
    src->bytes[1] += bytes;
    dst->bytes[0] += bytes;
    return done;
}
