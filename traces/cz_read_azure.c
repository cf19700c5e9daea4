/* cz_read_azure.c - Azure LLM inference trace 2023 CSV reader (Azure/AzurePublicDataset;
 * see traces/data/azure_llm_2023_conv/README.md).
 *
 * Columns by name: TIMESTAMP ("YYYY-MM-DD HH:MM:SS.fffffff", absolute wall clock),
 * ContextTokens (prompt), GeneratedTokens (output). Each row is a single-turn open-loop
 * session named "row-<line>". Timestamps are converted to integer seconds on the
 * proleptic Gregorian calendar (so day, month and year boundaries need no special case)
 * plus integer nanoseconds, and taken relative to the first row before becoming a double,
 * which keeps the 100 ns resolution of the source. */
#include "cz_traces_int.h"

#include <ctype.h>
#include <stdio.h>

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Reads exactly `n` digits at *p into *out and advances *p. */
static bool digits(const char **p, int n, int64_t *out)
{
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

/* Parses "YYYY-MM-DD HH:MM:SS[.f{1,9}]" into whole seconds since 1970-01-01 00:00:00
 * and nanoseconds within the second. */
static bool parse_timestamp(const char *s, int64_t *sec_out, int64_t *ns_out)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t y, mo, d, h, mi, sec, frac = 0;
    const char *p = s;
    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d) || *p++ != ' ' || !digits(&p, 2, &h) || *p++ != ':' ||
        !digits(&p, 2, &mi) || *p++ != ':' || !digits(&p, 2, &sec))
        return false;
    if (*p == '.') {
        p++;
        int n = 0;
        while (isdigit((unsigned char)*p) && n < 9) {
            frac = frac * 10 + (*p++ - '0');
            n++;
        }
        if (n == 0)
            return false;
        for (; n < 9; n++)
            frac *= 10;
    }
    if (*p != '\0' || mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 60)
        return false;
    int64_t dim = mdays[mo - 1] + (mo == 2 && is_leap(y));
    if (d < 1 || d > dim)
        return false;
    *sec_out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    *ns_out = frac;
    return true;
}

cz_status cz__azure_open(cz__rd *r, cz_workload *hdr, cz_err *err)
{
    cz_status st = cz__csv_open(&r->csv, r->path, err);
    if (st == CZ_OK && (st = cz__csv_column(&r->csv, "TIMESTAMP", true, &r->col[0], err)) == CZ_OK &&
        (st = cz__csv_column(&r->csv, "ContextTokens", true, &r->col[1], err)) == CZ_OK)
        st = cz__csv_column(&r->csv, "GeneratedTokens", true, &r->col[2], err);
    snprintf(hdr->source, sizeof hdr->source, "azure");
    hdr->arrivals_given = true;
    return st;
}

cz_status cz__azure_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err)
{
    cz__csv *c = &r->csv;
    cz_status st = cz__csv_next(c, more, err);
    if (st != CZ_OK || !*more)
        return st;
    int64_t sec, ns;
    const char *ts = cz__csv_field(c, r->col[0]);
    if (!parse_timestamp(ts, &sec, &ns))
        return cz_err_set(err, CZ_EFORMAT,
                          "%s:%zu: field 'TIMESTAMP': expected a date and time "
                          "'YYYY-MM-DD HH:MM:SS.fffffff', got '%s'",
                          r->path, c->lines.line, ts);
    uint32_t in_tokens, out_tokens;
    if ((st = cz__csv_u32(c, r->col[1], &in_tokens, err)) != CZ_OK ||
        (st = cz__csv_u32(c, r->col[2], &out_tokens, err)) != CZ_OK)
        return st;
    if (!r->have_first) {
        r->first_sec = sec;
        r->first_ns = ns;
        r->have_first = true;
    }
    char name[32];
    snprintf(name, sizeof name, "row-%zu", c->lines.line);
    cz_workload_begin_session(w, name, r->o.cls, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(w);
    t->arrival_s = (double)(sec - r->first_sec) + (double)(ns - r->first_ns) / 1e9;
    t->in_text_tokens = in_tokens;
    t->out_text_tokens = out_tokens;
    return CZ_OK;
}
