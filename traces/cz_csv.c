/* cz_csv.c - the line scanner shared by the JSONL readers and the CSV scanner shared by
 * the BurstGPT and Azure readers: files are read a line at a time into one reused buffer
 * (a trace is never held whole by its scanner), rows are split in place into a reused
 * field array, and fields are converted with messages that name the file, the line and
 * the column. */
#include "cz_traces_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

cz_status cz__lines_open(cz__lines *ls, const char *path, cz_err *err)
{
    memset(ls, 0, sizeof *ls);
    ls->path = path;
    ls->f = fopen(path, "rb");
    if (!ls->f)
        return cz_err_open(err, path, errno);
    return CZ_OK;
}

void cz__lines_close(cz__lines *ls)
{
    if (ls->f)
        fclose(ls->f);
    free(ls->buf);
    ls->f = NULL;
    ls->buf = NULL;
    ls->cap = 0;
}

cz_status cz__lines_next(cz__lines *ls, char **out, cz_err *err)
{
    *out = NULL;
    for (;;) {
        errno = 0;
        ssize_t got = getline(&ls->buf, &ls->cap, ls->f);
        if (got < 0) {
            if (ferror(ls->f))
                return cz_err_set(err, CZ_EIO, "%s:%zu: read error", ls->path, ls->line + 1);
            return CZ_OK; /* the end of the file */
        }
        ls->line++;
        size_t len = (size_t)got;
        if (ls->line == 1) {
            size_t bom = cz_text_bom(ls->buf, len);
            memmove(ls->buf, ls->buf + bom, len - bom + 1);
            len -= bom;
        }
        const char *nul = memchr(ls->buf, '\0', len);
        if (nul)
            return cz_err_set(err, CZ_EFORMAT, "%s:%zu:%td: found a NUL byte, expected text",
                              ls->path, ls->line, nul - ls->buf + 1);
        if (len > 0 && ls->buf[len - 1] == '\n')
            ls->buf[--len] = '\0';
        if (len > 0 && ls->buf[len - 1] == '\r')
            ls->buf[--len] = '\0';
        for (const char *p = ls->buf; *p; p++) {
            if (!isspace((unsigned char)*p)) {
                *out = ls->buf;
                return CZ_OK;
            }
        }
    }
}

/* Splits `line` at commas into c->fields, unquoting quoted fields in place and trimming
 * spaces around unquoted ones. */
static cz_status split_row(cz__csv *c, char *line, cz_err *err)
{
    c->n_fields = 0;
    char *p = line;
    for (;;) {
        cz_grow((void **)&c->fields, &c->cap_fields, c->n_fields + 1, sizeof *c->fields);
        while (*p == ' ' || *p == '\t')
            p++;
        char *start = p;
        if (*p == '"') {
            char *out = start;
            p++;
            for (;;) {
                if (*p == '\0')
                    return cz_err_set(err, CZ_EFORMAT,
                                      "%s:%zu: field %zu: unterminated quoted field",
                                      c->lines.path, c->lines.line, c->n_fields + 1);
                if (*p == '"' && p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *out++ = *p++;
                }
            }
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p != ',' && *p != '\0')
                return cz_err_set(err, CZ_EFORMAT,
                                  "%s:%zu: field %zu: expected ',' after the closing quote",
                                  c->lines.path, c->lines.line, c->n_fields + 1);
            char sep = *p;
            *out = '\0';
            c->fields[c->n_fields++] = start;
            if (sep == '\0')
                return CZ_OK;
            p++;
            continue;
        }
        char *comma = strchr(p, ',');
        char *end = comma ? comma : p + strlen(p);
        char *trim = end;
        while (trim > start && (trim[-1] == ' ' || trim[-1] == '\t'))
            trim--;
        c->fields[c->n_fields++] = start;
        if (!comma) {
            *trim = '\0';
            return CZ_OK;
        }
        *trim = '\0';
        p = comma + 1;
    }
}

cz_status cz__csv_open(cz__csv *c, const char *path, cz_err *err)
{
    memset(c, 0, sizeof *c);
    char *line = NULL;
    cz_status st = cz__lines_open(&c->lines, path, err);
    if (st == CZ_OK)
        st = cz__lines_next(&c->lines, &line, err);
    if (st != CZ_OK)
        return st;
    if (!line)
        return cz_err_set(err, CZ_EFORMAT, "%s: empty file, expected a CSV header line", path);
    c->header_line = cz_xstrdup(line); /* the row buffer is reused for every line */
    st = split_row(c, c->header_line, err);
    if (st != CZ_OK)
        return st;
    c->n_header = c->n_fields;
    c->header = cz_xmalloc(c->n_header * sizeof *c->header);
    memcpy(c->header, c->fields, c->n_header * sizeof *c->header);
    return CZ_OK;
}

void cz__csv_close(cz__csv *c)
{
    cz__lines_close(&c->lines);
    free(c->header);
    free(c->header_line);
    free(c->fields);
    memset(c, 0, sizeof *c);
}

cz_status cz__csv_column(const cz__csv *c, const char *name, bool required, int *idx,
                         cz_err *err)
{
    for (size_t i = 0; i < c->n_header; i++) {
        if (strcmp(c->header[i], name) == 0) {
            *idx = (int)i;
            return CZ_OK;
        }
    }
    *idx = -1;
    if (!required)
        return CZ_OK;
    char list[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < c->n_header && used + 1 < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", c->header[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return cz_err_set(err, CZ_EFORMAT, "%s:1: missing column '%s' (the header has %s)",
                      c->lines.path, name, list);
}

cz_status cz__csv_next(cz__csv *c, bool *more, cz_err *err)
{
    char *line;
    cz_status st = cz__lines_next(&c->lines, &line, err);
    *more = st == CZ_OK && line != NULL;
    if (!*more)
        return st;
    st = split_row(c, line, err);
    if (st != CZ_OK)
        return st;
    if (c->n_fields != c->n_header)
        return cz_err_set(err, CZ_EFORMAT, "%s:%zu: expected %zu fields as in the header, got %zu",
                          c->lines.path, c->lines.line, c->n_header, c->n_fields);
    return CZ_OK;
}

const char *cz__csv_field(const cz__csv *c, int idx)
{
    CZ_ASSERT(idx >= 0 && (size_t)idx < c->n_fields);
    return c->fields[idx];
}

cz_status cz__csv_u32(const cz__csv *c, int idx, uint32_t *out, cz_err *err)
{
    const char *s = cz__csv_field(c, idx);
    const char *p = s;
    uint64_t v = 0;
    bool ok = isdigit((unsigned char)*p);
    while (ok && isdigit((unsigned char)*p)) {
        v = v * 10 + (uint64_t)(*p++ - '0');
        ok = v <= UINT32_MAX;
    }
    if (ok && *p == '.') {
        p++;
        while (*p == '0')
            p++;
    }
    if (!ok || *p != '\0')
        return cz_err_set(err, CZ_EFORMAT,
                          "%s:%zu: field '%s': expected a non-negative integer below 2^32, "
                          "got '%s'",
                          c->lines.path, c->lines.line, c->header[idx], s);
    *out = (uint32_t)v;
    return CZ_OK;
}

cz_status cz__csv_num(const cz__csv *c, int idx, double *out, cz_err *err)
{
    const char *s = cz__csv_field(c, idx);
    char *end = NULL;
    double v = *s ? strtod(s, &end) : NAN;
    if (!*s || *end != '\0' || !isfinite(v) || v < 0.0)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s:%zu: field '%s': expected a non-negative number, got '%s'",
                          c->lines.path, c->lines.line, c->header[idx], s);
    *out = v;
    return CZ_OK;
}

cz_status cz__jsonl_parse(const char *line, const char *where, cJSON **out, cz_err *err)
{
    const char *end = NULL;
    *out = cJSON_ParseWithOpts(line, &end, 1);
    if (!*out)
        return cz_err_set(err, CZ_EFORMAT, "%s: not valid JSON (column %td)", where,
                          (end ? end : line) - line + 1);
    return CZ_OK;
}
