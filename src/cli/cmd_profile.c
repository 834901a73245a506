/*
 * cmd_profile.c -- `remat profile`: time every op of the activation table on
 * this machine for one config and cache the result, keyed by the config,
 * the CPU model and the thread count, for `remat plan` and
 * `remat train --budget`.
 */
#include <stddef.h>
#include <string.h>
#include "cli.h"

typedef struct profile_opts {
    long reps, threads;
    int json;
    const char *out;
} profile_opts;

#define O(field) offsetof(profile_opts, field)
static const cli_flag flags[] = {
    {"--reps", "N", CLI_FLAG_LONG, O(reps), 1, 1000, NULL, NULL, "timed rounds over all ops (default 5)"},
    CLI_FLAG_THREADS(profile_opts, threads),
    {"--out", "FILE", CLI_FLAG_STRING, O(out), 0, 0, NULL, NULL, "where the profile goes (default: the cache)"},
    CLI_FLAG_JSON(profile_opts, json,
                  "one JSON object: {\"path\", \"describe\", \"update_ms\", \"ops\": [{\"tensor\",\n"
                  "\"fwd_ms\", \"bwd_ms\", \"fwd_warm_ms\", \"bwd_warm_ms\"}], \"step_ms_pred\":\n"
                  "{\"none\", \"full\"}}"),
};
#undef O

int cmd_profile(int argc, char **argv)
{
    remat_config c;
    profile_opts o = { 5, 0, 0, NULL };
    cli_config_start(&c);
    cli_flag_group groups[] = { cli_config_group(&c), { "profile:", CLI_FLAGS(flags), &o } };
    cli_command cmd = {
        "profile",
        "usage: remat profile [config flags] [--reps N] [--threads N] [--out FILE] [--json]\n\n"
        "Times the forward and backward op of every activation tensor of the config in\n"
        "isolation with the real kernels (one block's buffers, the embedding and the LM\n"
        "head; never the whole model), with its inputs out of cache and in cache: one\n"
        "warm-up round, then N timed rounds over all ops (default 5), median; with one\n"
        "thread the thread's CPU time, else the wall clock.  The profile is written\n"
        "atomically to FILE, by default to the cache ($REMAT_CACHE, else\n"
        "~/.cache/remat/), where 'remat plan' and 'remat train --budget' find it for\n"
        "the same config, CPU and thread count (the run times 'remat train' stored\n"
        "there are kept).\n\n",
        NULL, groups, 2, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    long reps = o.reps, threads = o.threads;
    int json = o.json;
    const char *out = o.out;
    cli_config_default_max_seq(&c);
    remat_set_threads((int)threads);
    if (cli_config_check(&c)) return 2;
    char path[4096];
    if (!out) {
        if (remat_profile_default_path(&c, path, sizeof path)) return cli_error("%s; give --out FILE", remat_errmsg());
        out = path;
    }
    remat_profile *p = NULL;
    double t0 = cli_now_ms();
    if (remat_profile_measure(&c, (int)reps, &p)) return cli_error("%s", remat_errmsg());
    double took = cli_now_ms() - t0;
    if (out == path) {   /* the cache: keep what training runs measured (remat train) */
        remat_profile *old = NULL;
        cli_cached_profile(&c, &old, NULL, 0);
        if (old) remat_profile_copy_run(p, old);
        remat_profile_free(old);
    }
    if (remat_profile_save(p, out)) { remat_profile_free(p); return cli_error("%s", remat_errmsg()); }
    remat_plan_row none = { 0 }, full = { 0 };
    remat_plan_evaluate(&c, p, "none", 0, 0, &none);
    remat_plan_evaluate(&c, p, "full", 0, 0, &full);
    int n = remat_config_tensor_count(&c);
    int rc = 0;
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "path", out);
        remat_jsonw_str(w, "describe", remat_profile_describe(p));
        remat_jsonw_num(w, "update_ms", remat_profile_op_ms(p, -1, 0));
        remat_jsonw_array(w, "ops");
        for (int t = 0; t < n; t++) {
            remat_tensor_info ti;
            if (remat_tensor_get(&c, t, &ti) || ti.is_grad) continue;
            remat_jsonw_object(w, NULL);
            remat_jsonw_str(w, "tensor", ti.name);
            remat_jsonw_num(w, "fwd_ms", remat_profile_op_ms(p, t, 0));
            remat_jsonw_num(w, "bwd_ms", remat_profile_op_ms(p, t, 1));
            remat_jsonw_num(w, "fwd_warm_ms", remat_profile_op_warm_ms(p, t, 0));
            remat_jsonw_num(w, "bwd_warm_ms", remat_profile_op_warm_ms(p, t, 1));
            remat_jsonw_end(w);
        }
        remat_jsonw_end(w);
        remat_jsonw_object(w, "step_ms_pred");
        remat_jsonw_num(w, "none", none.step_ms_pred);
        remat_jsonw_num(w, "full", full.step_ms_pred);
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        rc = cli_json_close(w);
    } else {
        cli_config_print(stdout, &c);
        printf("%s; measured in %.1f s\n(ms; cold: inputs out of cache, warm: inputs just computed)\n\n"
               "%-10s %-32s %10s %10s %10s %10s\n", remat_profile_describe(p), took / 1000, "tensor", "op",
               "fwd cold", "fwd warm", "bwd cold", "bwd warm");
        for (int t = 0; t < n; t++) {
            remat_tensor_info ti;
            if (remat_tensor_get(&c, t, &ti) || ti.is_grad) continue;
            printf("%-10s %-32.32s %10.4f %10.4f %10.4f %10.4f\n", ti.name, ti.op, remat_profile_op_ms(p, t, 0),
                   remat_profile_op_warm_ms(p, t, 0), remat_profile_op_ms(p, t, 1), remat_profile_op_warm_ms(p, t, 1));
        }
        printf("%-10s %-34s %11.4f\n", "update", "global norm, clipping, AdamW", remat_profile_op_ms(p, -1, 0));
        printf("\npredicted step: %.2f ms with none, %.2f ms with full (per-block ops x %d layers)\nsaved to %s\n",
               none.step_ms_pred, full.step_ms_pred, c.n_layer, out);
    }
    remat_plan_row_clear(&none);
    remat_plan_row_clear(&full);
    remat_profile_free(p);
    return rc;
}
