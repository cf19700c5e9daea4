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

cz_status cz__read_azure(const char *path, const cz_trace_opts *o, cz_workload *w, cz_err *err)
{
    cz__csv c;
    int c_ts, c_in, c_out;
    int64_t first_sec = 0, first_ns = 0;
    bool have_first = false;
    cz_status st = cz__csv_open(&c, path, err);
    if (st == CZ_OK && (st = cz__csv_column(&c, "TIMESTAMP", true, &c_ts, err)) == CZ_OK &&
        (st = cz__csv_column(&c, "ContextTokens", true, &c_in, err)) == CZ_OK)
        st = cz__csv_column(&c, "GeneratedTokens", true, &c_out, err);
    snprintf(w->source, sizeof w->source, "azure");
    w->arrivals_given = true;
    while (st == CZ_OK) {
        bool more;
        if ((st = cz__csv_next(&c, &more, err)) != CZ_OK || !more)
            break;
        int64_t sec, ns;
        const char *ts = cz__csv_field(&c, c_ts);
        if (!parse_timestamp(ts, &sec, &ns)) {
            st = cz_err_set(err, CZ_EFORMAT,
                            "%s:%zu: field 'TIMESTAMP': expected a date and time "
                            "'YYYY-MM-DD HH:MM:SS.fffffff', got '%s'",
                            path, c.lines.line, ts);
            break;
        }
        uint32_t in_tokens, out_tokens;
        if ((st = cz__csv_u32(&c, c_in, &in_tokens, err)) != CZ_OK ||
            (st = cz__csv_u32(&c, c_out, &out_tokens, err)) != CZ_OK)
            break;
        if (!have_first) {
            first_sec = sec;
            first_ns = ns;
            have_first = true;
        }
        char name[32];
        snprintf(name, sizeof name, "row-%zu", c.lines.line);
        cz_workload_begin_session(w, name, o->cls, CZ_TIMING_OPEN);
        cz_turn *t = cz_workload_add_turn(w);
        t->arrival_s = (double)(sec - first_sec) + (double)(ns - first_ns) / 1e9;
        t->in_text_tokens = in_tokens;
        t->out_text_tokens = out_tokens;
    }
    cz__csv_close(&c);
    return st;
}
