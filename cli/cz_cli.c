/* cz_cli.c - the helpers every command shares (cz_cli.h): reporting an error with its exit
 * code, naming the --set argument a bad field came from, usage errors. */
#include <stdarg.h>
#include <stdio.h>
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
    int by = -1;
    for (int i = 0; i < n_overrides; i++)
        if (cz_json_set_covers(overrides[i], path))
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
