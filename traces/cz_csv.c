/* cz_csv.c - the line scanner shared by the JSONL readers and the CSV scanner shared by
 * the BurstGPT and Azure readers: files are read whole and cut in place, rows are split
 * into a reused field array, and fields are converted with messages that name the file,
 * the line and the column. */
#include "cz_traces_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

cz_status cz__lines_open(cz__lines *ls, const char *path, cz_err *err)
{
    memset(ls, 0, sizeof *ls);
    ls->path = path;
    cz_status st = cz_file_read_all(path, &ls->buf, NULL, err);
    if (st != CZ_OK)
        return st;
    ls->pos = ls->buf;
    return CZ_OK;
}

void cz__lines_close(cz__lines *ls)
{
    free(ls->buf);
    ls->buf = ls->pos = NULL;
}

char *cz__lines_next(cz__lines *ls)
{
    while (ls->pos && *ls->pos) {
        char *start = ls->pos;
        char *nl = strchr(start, '\n');
        if (nl) {
            *nl = '\0';
            ls->pos = nl + 1;
        } else {
            ls->pos = start + strlen(start);
        }
        ls->line++;
        size_t len = strlen(start);
        if (len > 0 && start[len - 1] == '\r')
            start[--len] = '\0';
        for (const char *p = start; *p; p++)
            if (!isspace((unsigned char)*p))
                return start;
    }
    return NULL;
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
    cz_status st = cz__lines_open(&c->lines, path, err);
    if (st != CZ_OK)
        return st;
    char *line = cz__lines_next(&c->lines);
    if (!line)
        return cz_err_set(err, CZ_EFORMAT, "%s: empty file, expected a CSV header line", path);
    st = split_row(c, line, err);
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
    char *line = cz__lines_next(&c->lines);
    *more = line != NULL;
    if (!line)
        return CZ_OK;
    cz_status st = split_row(c, line, err);
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
