/* cz_sweep_rows.c - see cz_sweep_rows.h. */
#include "cz_sweep_rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_json.h"
#include "cz_out.h"

void cz_sweep_rows_init(cz_sweep_rows *rows, uint64_t n)
{
    memset(rows, 0, sizeof *rows);
    rows->n = n;
    rows->text = cz_xcalloc(n ? n : 1, sizeof *rows->text);
}

void cz_sweep_rows_free(cz_sweep_rows *rows)
{
    for (uint64_t i = 0; i < rows->n; i++)
        free(rows->text[i]);
    free(rows->text);
    if (rows->partial)
        fclose(rows->partial);
    free(rows->partial_path);
    memset(rows, 0, sizeof *rows);
}

cz_status cz_sweep_rows_load(cz_sweep_rows *rows, const char *path, const char *flag,
                             cz_sweep_row_match match, const void *ctx, bool quiet,
                             uint64_t *kept, cz_err *err)
{
    *kept = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return CZ_OK;
        return cz_err_set(err, CZ_EIO, "%s: cannot read '%s' (%s)", flag, path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t no = 0;
    cz_status st = CZ_OK;
    while (st == CZ_OK && (len = getline(&line, &cap, f)) >= 0) {
        no++;
        if (no == 1) {
            size_t bom = cz_text_bom(line, (size_t)len);
            memmove(line, line + bom, (size_t)len - bom + 1);
            len -= (ssize_t)bom;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        char where[512];
        snprintf(where, sizeof where, "%s:%llu", path, (unsigned long long)no);
        const char *end = NULL;
        cJSON *row = (size_t)len == strlen(line) ? cJSON_ParseWithOpts(line, &end, true) : NULL;
        uint64_t pt = CZ_SWEEP_NO_POINT;
        const char *why = "not a complete JSON row (a write cut short?)";
        if (row && cJSON_IsObject(row))
            st = match(row, where, ctx, &pt, &why, err);
        cJSON_Delete(row);
        if (st != CZ_OK)
            break;
        if (pt == CZ_SWEEP_NO_POINT) {
            if (!quiet)
                fprintf(stderr, "sweep: %s: %s: dropped, its point runs again\n", where, why);
            continue;
        }
        CZ_ASSERT(pt < rows->n);
        if (rows->text[pt])
            continue; /* the same point again (in the output and the partial file) */
        rows->text[pt] = cz_xstrdup(line);
        rows->have++;
        (*kept)++;
    }
    if (st == CZ_OK && ferror(f))
        st = cz_err_set(err, CZ_EIO, "%s: cannot read '%s' (%s)", flag, path, strerror(errno));
    free(line);
    fclose(f);
    return st;
}

bool cz_sweep_rows_write(FILE *f, const void *ctx)
{
    const cz_sweep_rows *rows = ctx;
    for (uint64_t i = 0; i < rows->n; i++) {
        if (!rows->text[i])
            continue;
        if (fputs(rows->text[i], f) < 0 || fputc('\n', f) == EOF)
            return false;
    }
    return true;
}

cz_status cz_sweep_rows_start_partial(cz_sweep_rows *rows, const char *out_path,
                                      const char *flag, cz_err *err)
{
    CZ_ASSERT(!rows->partial);
    size_t n = strlen(out_path) + 64;
    char *path = cz_xmalloc(n), *tmp = cz_xmalloc(n);
    snprintf(path, n, "%s.partial", out_path);
    snprintf(tmp, n, "%s.partial.tmp%ld", out_path, (long)getpid());
    cz_out_clean_stale(path);
    FILE *f = fopen(tmp, "w");
    int e = 0;
    if (!f) {
        e = errno;
    } else {
        bool ok = cz_sweep_rows_write(f, rows);
        if (!ok)
            e = errno;
        if (fclose(f) != 0 && ok)
            e = errno, ok = false;
        if (ok && rename(tmp, path) != 0)
            e = errno, ok = false;
        if (!ok)
            unlink(tmp);
        f = ok ? fopen(path, "a") : NULL;
        if (ok && !f)
            e = errno;
    }
    free(tmp);
    if (!f) {
        cz_status st = cz_err_set(err, CZ_EIO, "%s: cannot write '%s' (%s)", flag, path,
                                  strerror(e ? e : EIO));
        free(path);
        return st;
    }
    rows->partial = f;
    rows->partial_path = path;
    return CZ_OK;
}

cz_status cz_sweep_rows_put(cz_sweep_rows *rows, uint64_t pt, char *text, cz_err *err)
{
    CZ_ASSERT(pt < rows->n && !rows->text[pt]);
    rows->text[pt] = text;
    rows->have++;
    if (!rows->partial)
        return CZ_OK;
    if (fputs(text, rows->partial) < 0 || fputc('\n', rows->partial) == EOF ||
        fflush(rows->partial) != 0)
        return cz_err_set(err, CZ_EIO, "cannot append to '%s' (%s)", rows->partial_path,
                          strerror(errno));
    return CZ_OK;
}

void cz_sweep_rows_drop_partial(cz_sweep_rows *rows)
{
    if (!rows->partial)
        return;
    fclose(rows->partial);
    rows->partial = NULL;
    unlink(rows->partial_path);
}
