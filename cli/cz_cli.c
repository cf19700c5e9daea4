/* cz_cli.c - the helpers every command shares (cz_cli.h): reporting an error with its exit
 * code, naming the --set argument a bad field came from, usage errors, the HTTP client's
 * flags. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_json.h"
#include "cz_out.h"

int cz_cli_fail(const cz_err *err)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg[0] ? err->msg : cz_strerror(err->status));
    cz_out_final_names(msg, sizeof msg);
    fprintf(stderr, "cadenza: %s\n", msg);
    switch (err->status) {
    case CZ_EIO:
    case CZ_ENOMEM:
    case CZ_EDEVICE: return CZ_EXIT_FAIL;
    case CZ_EINTERNAL: return CZ_EXIT_INTERNAL;
    default: return CZ_EXIT_USAGE;
    }
}

void cz_cli_blame_set(cz_err *err, const char *cfg_where, const char *const *overrides,
                      int n_overrides, int n_user)
{
    const char *fw = err->field_where;
    size_t wl = strlen(cfg_where);
    if (!err->field_key[0] || strncmp(fw, cfg_where, wl) != 0)
        return;
    /* the field's dotted path in the config: "<cfg_where>: a.b" + key, or a top-level key */
    char path[CZ_ERR_WHERE_MAX + CZ_ERR_KEY_MAX];
    if (fw[wl] == '\0')
        snprintf(path, sizeof path, "%s", err->field_key);
    else if (fw[wl] == ':' && fw[wl + 1] == ' ')
        snprintf(path, sizeof path, "%s.%s", fw + wl + 2, err->field_key);
    else
        return;
    /* the override that set the field or a field inside it (--set a.b=1 makes an
     * unknown object 'a') */
    int by = -1;
    size_t pl = strlen(path);
    for (int i = 0; i < n_overrides; i++)
        if (cz_json_set_covers(overrides[i], path) ||
            (strncmp(overrides[i], path, pl) == 0 && overrides[i][pl] == '.'))
            by = i;
    if (by < 0 || by >= n_user)
        return;
    /* "<where>: field 'k': expected ..." becomes "--set a.k=v: field 'k': expected ..." */
    size_t fl = strlen(fw);
    if (strncmp(err->msg, fw, fl) == 0 && err->msg[fl] == ':' && err->msg[fl + 1] == ' ')
        memmove(err->msg, err->msg + fl + 2, strlen(err->msg + fl + 2) + 1);
    cz_err_prefix(err, "--set %s: ", overrides[by]);
}

int cz_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cadenza %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'cadenza %s --help'.\n", cmd);
    return CZ_EXIT_USAGE;
}

static const char *const http_valued[] = {"--endpoint",        "--model",           "--api-key",
                                          "--max-concurrency", "--request-timeout", "--api",
                                          "--tokenizer"};

bool cz_cli_http_valued(const char *flag)
{
    for (size_t k = 0; k < CZ_ARRAY_LEN(http_valued); k++)
        if (strcmp(flag, http_valued[k]) == 0)
            return true;
    return false;
}

int cz_cli_http_flag(const char *cmd, cz_cli_http *h, const char *flag, const char *v)
{
    cz_hclient_opts *o = &h->o;
    if (strcmp(flag, "--endpoint") == 0) {
        o->endpoint = v;
        return CZ_EXIT_OK;
    }
    h->others = true;
    if (strcmp(flag, "--no-events") == 0) {
        o->no_events = true;
    } else if (strcmp(flag, "--model") == 0) {
        o->model = v;
    } else if (strcmp(flag, "--api-key") == 0) {
        o->api_key = v;
    } else if (strcmp(flag, "--tokenizer") == 0) {
        o->tokenizer = v;
    } else if (strcmp(flag, "--api") == 0) {
        if (strcmp(v, "completions") != 0 && strcmp(v, "chat") != 0)
            return cz_cli_usage_error(cmd, "option '--api': expected completions or chat, got "
                                           "'%s'", v);
        o->api = strcmp(v, "chat") == 0 ? CZ_HAPI_CHAT : CZ_HAPI_COMPLETIONS;
    } else if (strcmp(flag, "--max-concurrency") == 0) {
        char *end;
        errno = 0;
        unsigned long c = strtoul(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || c == 0 || c > 1000000)
            return cz_cli_usage_error(cmd, "option '--max-concurrency': expected a count from 1 "
                                           "to 1000000, got '%s'", v);
        o->max_concurrency = (uint32_t)c;
    } else {
        CZ_ASSERT(strcmp(flag, "--request-timeout") == 0);
        char *end;
        errno = 0;
        double t = strtod(v, &end);
        if (errno || end == v || *end || !(t > 0) || t > 1e6)
            return cz_cli_usage_error(cmd, "option '--request-timeout': expected seconds above "
                                           "0, at most 1000000, got '%s'", v);
        o->timeout_s = t;
    }
    return CZ_EXIT_OK;
}

int cz_cli_http_finish(const char *cmd, cz_cli_http *h)
{
    cz_hclient_opts *o = &h->o;
    if (!o->endpoint && h->others)
        return cz_cli_usage_error(cmd, "--model, --api-key, --max-concurrency, "
                                       "--request-timeout, --no-events, --api and --tokenizer "
                                       "go with --endpoint");
    if (o->api == CZ_HAPI_CHAT && !o->tokenizer)
        return cz_cli_usage_error(cmd, "--api chat needs --tokenizer DIR, the folder of the "
                                       "served model's tokenizer.json: the messages' text is "
                                       "made to the workload's token counts under it");
    if (o->api != CZ_HAPI_CHAT && o->tokenizer)
        return cz_cli_usage_error(cmd, "--tokenizer goes with --api chat (completions prompts "
                                       "are token ids)");
    if (o->endpoint && !o->api_key)
        o->api_key = getenv("OPENAI_API_KEY");
    return CZ_EXIT_OK;
}
