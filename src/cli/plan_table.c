/*
 * plan_table.c -- `remat plan --table FILE.json`: plans a chain of blocks
 * that a file describes (remat.h, "tables read from files"; remat_torch
 * measures one for any torch model).  The budget is on kept bytes -- what
 * the framework holds for the backward when the forward ends -- as the
 * table's reserve turns it into the planner's activation budget.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

typedef struct table_opts {
    const char *table;
    uint64_t budget, budget_act;
    int json, pareto, explain;
    long threads;
    cli_policies policies;
} table_opts;

#define O(field) offsetof(table_opts, field)
static const cli_flag flags[] = {
    {"--table", "FILE", CLI_FLAG_STRING, O(table), 0, 0, NULL, NULL,
     "the chain to plan: a remat table (JSON, version 1; remat_torch.measure\n"
     "writes one), with the times it was measured at"},
    {"--budget", "SIZE", CLI_FLAG_BUDGET, O(budget), 0, 0, NULL, NULL,
     "kept bytes + the table's parameters, gradients and optimizer state\n"
     "(units B KiB MiB GiB TiB KB MB GB TB; auto: the memory available)"},
    {"--budget-activations", "SIZE", CLI_FLAG_BUDGET, O(budget_act), 0, 0, NULL, NULL,
     "kept bytes alone: what the framework holds for the backward when the\n"
     "forward ends"},
    {"--recompute", "POLICY", CLI_FLAG_CUSTOM, O(policies), 0, 0, NULL, cli_parse_policy,
     "predict POLICY instead of none, full, every:2 and sqrt (repeatable)"},
    {"--pareto", NULL, CLI_FLAG_SWITCH, O(pareto), 0, 0, NULL, NULL, "the whole front of the activation peak against time"},
    {"--explain", NULL, CLI_FLAG_SWITCH, O(explain), 0, 0, NULL, NULL, "what each policy does with each layer"},
    CLI_FLAG_THREADS(table_opts, threads),
    CLI_FLAG_JSON(table_opts, json, "machine-readable output (below)"),
};
#undef O

typedef struct tctx {
    remat_config c;
    remat_profile *prof;
    remat_table_info info;
    uint64_t budget;    /* of the planner: activations, or total with act 0; 0 none */
    int act;
} tctx;

static uint64_t kept_of(const tctx *t, const remat_plan_row *r)
{
    return (uint64_t)((int64_t)r->stored_bytes + t->info.outside_bytes);
}

static void row_json(remat_jsonw *w, const tctx *t, const remat_plan_row *r, const char *key)
{
    remat_jsonw_object(w, key);
    remat_jsonw_str(w, "policy", r->policy);
    remat_jsonw_uint(w, "kept_bytes", kept_of(t, r));
    remat_jsonw_uint(w, "peak_bytes", r->peak_bytes);
    remat_jsonw_uint(w, "stored_bytes", r->stored_bytes);
    remat_jsonw_num(w, "overhead_pct", r->overhead_pct);
    remat_jsonw_num(w, "step_ms_pred", r->step_ms_pred);
    remat_jsonw_bool(w, "fits", r->fits);
    remat_jsonw_end(w);
}

static void row_text(const tctx *t, const char *label, const remat_plan_row *r)
{
    char b1[32], b2[32];
    printf("%-22.22s %11s %11s %9.1f%% %11.3f  %s\n", label, cli_fmt_bytes(kept_of(t, r), b1, sizeof b1),
           cli_fmt_bytes(r->peak_bytes, b2, sizeof b2), r->overhead_pct, r->step_ms_pred, r->fits ? "yes" : "no");
}

static void header(const tctx *t, const char *path)
{
    char b1[32], b2[32], b3[32], b4[32];
    const remat_table_info *i = &t->info;
    int kinds = remat_table_block_kinds(&t->c);     /* blocks that differ: the largest's figures */
    printf("table: %s (%s): %d blocks, %s%s, output %s%s; kept outside the chain %s%lld B\n", i->name, path, i->blocks,
           kinds > 1 ? "of kinds that differ (below), saving up to " : "each saving ",
           cli_fmt_bytes(i->block_saved_bytes, b1, sizeof b1), kinds > 1 ? "up to " : "",
           cli_fmt_bytes(i->output_bytes, b2, sizeof b2),
           i->outside_bytes < 0 ? "-" : "", (long long)(i->outside_bytes < 0 ? -i->outside_bytes : i->outside_bytes));
    printf("cost model: %s\n", remat_profile_describe(t->prof));
    printf("parameters + gradients + optimizer state: %s | peak = kept + %s (one block's backward)",
           cli_fmt_bytes(i->static_bytes, b3, sizeof b3), cli_fmt_bytes(i->reserve_bytes, b4, sizeof b4));
}

static int do_budget(const tctx *t, const char *path, const cli_policies *given, uint64_t shown, int json, int explain)
{
    static const char *fixed[] = { "none", "full", "every:2", "sqrt" };
    const char *names[CLI_MAX_POLICIES];
    int nn = 0, rc = 0;
    if (given->n) for (int i = 0; i < given->n; i++) names[nn++] = given->v[i];
    else for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) names[nn++] = fixed[i];
    remat_plan_row rows[CLI_MAX_POLICIES], opt;
    memset(rows, 0, sizeof rows);
    memset(&opt, 0, sizeof opt);
    for (int i = 0; i < nn; i++)
        if (remat_plan_evaluate(&t->c, t->prof, names[i], t->budget, t->act, &rows[i])) {
            rc = cli_error("--recompute %s: %s", names[i], remat_errmsg()) + 1;
            goto out;
        }
    remat_status st = remat_plan_optimal(&t->c, t->prof, t->budget, t->act, &opt);
    char err[600];
    snprintf(err, sizeof err, "%s", remat_errmsg());
    if (st == REMAT_ERR_BUDGET) {     /* the minimum, in the budget's own terms */
        uint64_t minp = 0;
        char b1[32], b2[32];
        if (!remat_plan_min_peak(&t->c, &minp)) {
            uint64_t least = minp - t->info.reserve_bytes + (t->act ? 0 : t->info.static_bytes);
            snprintf(err, sizeof err, "budget %s is below the minimum %s (%s, with the least any plan keeps)",
                     cli_fmt_bytes(shown, b1, sizeof b1), cli_fmt_bytes(least, b2, sizeof b2),
                     t->act ? "kept bytes" : "kept bytes + parameters, gradients and optimizer state");
        }
    } else if (st) {
        rc = cli_error("%s", err);
        goto out;
    }
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "table", t->info.name);
        remat_jsonw_int(w, "blocks", t->info.blocks);
        remat_jsonw_uint(w, "budget_bytes", shown);
        remat_jsonw_bool(w, "budget_total", !t->act);
        remat_jsonw_int(w, "outside_bytes", t->info.outside_bytes);
        remat_jsonw_uint(w, "reserve_bytes", t->info.reserve_bytes);
        remat_jsonw_uint(w, "static_bytes", t->info.static_bytes);
        remat_jsonw_array(w, "rows");
        for (int i = 0; i < nn; i++) row_json(w, t, &rows[i], NULL);
        remat_jsonw_end(w);
        if (st) remat_jsonw_null(w, "optimal");
        else row_json(w, t, &opt, "optimal");
        remat_jsonw_end(w);
        if (cli_json_close(w)) rc = 1;
    } else {
        char b[32];
        header(t, path);
        if (shown) printf(" | budget: %s %s", cli_fmt_bytes(shown, b, sizeof b), t->act ? "kept" : "in total");
        printf("\n\n%-22s %11s %11s %10s %11s  %s\n", "policy", "kept", "act. peak", "overhead", "step ms", "fits");
        for (int i = 0; i < nn; i++) row_text(t, names[i], &rows[i]);
        if (!st) {
            row_text(t, "optimal (plan below)", &opt);
            printf("\noptimal plan: %s\n", opt.policy);
            cli_explain(stdout, &t->c, opt.policy);
        }
        for (int i = 0; explain && i < nn; i++) {
            printf("\n%s:\n", names[i]);
            cli_explain(stdout, &t->c, names[i]);
        }
    }
    if (st) rc = cli_error("%s", err);
out:
    for (int i = 0; i < nn; i++) remat_plan_row_clear(&rows[i]);
    remat_plan_row_clear(&opt);
    return rc;
}

static int do_pareto(const tctx *t, const char *path, int json)
{
    remat_plan_row *rows = NULL;
    size_t n = 0;
    if (remat_plan_pareto(&t->c, t->prof, &rows, &n)) return cli_error("%s", remat_errmsg());
    int rc = 0;
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_array(w, "rows");
        for (size_t i = 0; i < n; i++) row_json(w, t, &rows[i], NULL);
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        rc = cli_json_close(w);
    } else {
        header(t, path);
        printf("\nPareto front: %zu plans, activation peak against predicted step time\n\n", n);
        printf("%-22s %11s %11s %10s %11s  %s\n", "", "kept", "act. peak", "overhead", "step ms", "plan");
        for (size_t i = 0; i < n; i++) {
            char b1[32], b2[32];
            printf("%-22s %11s %11s %9.1f%% %11.3f  %s\n", "", cli_fmt_bytes(kept_of(t, &rows[i]), b1, sizeof b1),
                   cli_fmt_bytes(rows[i].peak_bytes, b2, sizeof b2), rows[i].overhead_pct, rows[i].step_ms_pred,
                   rows[i].policy);
        }
    }
    remat_plan_rows_free(rows, n);
    return rc;
}

int cli_plan_table(int argc, char **argv)
{
    table_opts o = { 0 };
    cli_flag_group groups[] = { { "plan a table:", CLI_FLAGS(flags), &o } };
    cli_command cmd = {
        "plan",
        "usage: remat plan --table FILE.json [--budget SIZE | --budget-activations SIZE] [--json]\n"
        "       remat plan --table FILE.json --pareto [--json]\n\n"
        "Plans the checkpointing of a chain of identical blocks that a file describes\n"
        "(what each block saves for the backward, its output, its forward and backward\n"
        "times: 'Using remat from PyTorch' in the README): the fastest plan whose kept\n"
        "bytes fit the budget, by the planner's dynamic program; the kept bytes and the\n"
        "overhead of every policy asked for.  A block is kept whole (no checkpoint),\n"
        "checkpointed (the framework re-runs it in the backward), or, with a selective\n"
        "table, keeps only its expensive or cheap saved tensors; segments checkpoint\n"
        "several blocks at once.\n\n",
        "JSON: {\"table\", \"blocks\", \"budget_bytes\", \"budget_total\", \"outside_bytes\",\n"
        "  \"reserve_bytes\", \"static_bytes\", \"rows\": [{\"policy\", \"kept_bytes\", \"peak_bytes\",\n"
        "  \"stored_bytes\", \"overhead_pct\", \"step_ms_pred\", \"fits\"}], \"optimal\": {the same} or\n"
        "  null when nothing fits (the reason on stderr, exit status 1)}\n",
        groups, 1, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    if (!o.table) return cli_usage_error("plan", "--table needs a FILE");
    uint64_t shown;
    tctx t;
    memset(&t, 0, sizeof t);
    if (!cli_budget_pick("plan", o.budget, o.budget_act, &shown, &t.act)) return 2;
    if (o.pareto && (shown || o.policies.n))
        return cli_usage_error("plan", "--pareto shows the planner's plans; drop --budget and --recompute");
    remat_set_threads((int)o.threads);
    if (remat_table_load(o.table, &t.c, &t.prof)) return cli_error("%s", remat_errmsg()) + 1;
    int rc = 1;
    if (remat_table_get_info(&t.c, &t.info)) { cli_error("%s", remat_errmsg()); goto out; }
    /* kept K (+ static) is a planner budget of K + reserve (+ static): see remat.h */
    t.budget = shown ? shown + t.info.reserve_bytes : 0;
    rc = o.pareto ? do_pareto(&t, o.table, o.json) : do_budget(&t, o.table, &o.policies, shown, o.json, o.explain);
out:
    remat_profile_free(t.prof);
    remat_table_unload(&t.c);
    return rc;
}
