/*
 * calib.c -- what `remat train`, `remat bench` and `remat plan` share about
 * traces and the cost model's cache: the --trace-steps flag, the cached
 * profile of a config (a corrupt or foreign one is named in one warning
 * line and ignored), and storing a run's times in that cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

int cli_trace_steps(const char *cmd, const char *v, uint64_t *first, uint64_t *last)
{
    char *end;
    uint64_t a, b;
    const char *colon = strchr(v, ':');
    errno = 0;
    if (*v < '1' || *v > '9') goto bad;
    a = strtoull(v, &end, 10);
    if (errno || end != (colon ? colon : v + strlen(v))) goto bad;
    if (!colon) b = a;
    else if (!colon[1]) b = UINT64_MAX;
    else {
        if (colon[1] < '1' || colon[1] > '9') goto bad;
        b = strtoull(colon + 1, &end, 10);
        if (errno || *end || b < a) goto bad;
    }
    *first = a;
    *last = b;
    return 1;
bad:
    cli_usage_error(cmd, "--trace-steps expects A:B with 1 <= A <= B (steps A to B), A (one step) or A: (A to the "
                    "end), got '%s'", v);
    return 0;
}

int cli_cached_profile(const remat_config *c, remat_profile **out, char *path, size_t n)
{
    char def[4096];
    *out = NULL;
    if (path && n) path[0] = 0;
    if (remat_profile_default_path(c, def, sizeof def)) return 0;
    if (path && n) snprintf(path, n, "%s", def);
    if (access(def, F_OK)) return 1;
    if (remat_profile_load(c, def, out)) {
        fprintf(stderr, "remat: warning: ignoring the cached profile: %s\n", remat_errmsg());
        *out = NULL;
    }
    return 1;
}

int cli_calibrate_cache(const remat_config *c, const remat_trace *t, const char *file, remat_profile *base,
                        remat_profile **out, char *path, size_t n)
{
    remat_profile *p = base;
    *out = NULL;
    if (base ? remat_profile_default_path(c, path, n) != REMAT_OK : !cli_cached_profile(c, &p, path, n)) {
        remat_profile_free(base);
        return cli_error("%s; set REMAT_CACHE to keep the run's times", remat_errmsg());
    }
    if (!p && remat_profile_model(c, 1, &p)) return cli_error("%s", remat_errmsg());
    remat_status st = t ? remat_profile_calibrate(p, t) : remat_profile_calibrate_file(p, file);
    if (st) {
        remat_profile_free(p);
        return t ? cli_error("%s", remat_errmsg()) : cli_input_error(st, "%s", remat_errmsg());   /* file: a flag's */
    }
    if (remat_profile_save(p, path)) {
        remat_profile_free(p);
        return cli_error("%s", remat_errmsg());
    }
    *out = p;
    return 0;
}
