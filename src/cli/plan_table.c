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
    uint64_t shown;     /* the budget given: kept bytes (+ static with act 0) */
    int act;
    const char *path;
} tctx;

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

/* cli_plan_q's callbacks for a table: q->ctx is the tctx */
static void table_head(const cli_plan_q *q, remat_jsonw *w, int pareto)
{
    const tctx *t = q->ctx;
    char b[32];
    if (w) {
        remat_jsonw_str(w, "table", t->info.name);
        remat_jsonw_int(w, "blocks", t->info.blocks);
        remat_jsonw_uint(w, "budget_bytes", t->shown);
        remat_jsonw_bool(w, "budget_total", !t->act);
        remat_jsonw_int(w, "outside_bytes", t->info.outside_bytes);
        remat_jsonw_uint(w, "reserve_bytes", t->info.reserve_bytes);
        remat_jsonw_uint(w, "static_bytes", t->info.static_bytes);
        return;
    }
    header(t, t->path);
    if (pareto) printf("\n");
    else if (t->shown) printf(" | budget: %s %s", cli_fmt_bytes(t->shown, b, sizeof b), t->act ? "kept" : "in total");
}

/* the kept budget the shown one means: kept alone, or with the static bytes */
static uint64_t kept_budget(const tctx *t)
{
    uint64_t st = t->act ? 0 : t->info.static_bytes;
    return t->shown > st ? t->shown - st : 0;
}

/* The optimum: remat_table_optimal's, the function remat_torch.plan(kept_budget=)
 * calls, so that both answer alike for the same budget (its refusal names
 * the minimum kept bytes); no budget: the planner's. */
static remat_status table_optimal(const cli_plan_q *q, remat_plan_row *opt, char *err, size_t n)
{
    const tctx *t = q->ctx;
    if (!t->shown) {
        remat_status st = remat_plan_optimal(&t->c, t->prof, t->budget, t->act, opt);
        snprintf(err, n, "%s", remat_errmsg());
        return st;
    }
    remat_table_row r;
    memset(&r, 0, sizeof r);
    remat_status st = remat_table_optimal(&t->c, t->prof, kept_budget(t), &r);
    snprintf(err, n, "%s", remat_errmsg());
    if (st) {
        remat_table_row_clear(&r);
        return st;
    }
    *opt = r.row;             /* its policy string moves to opt (remat_plan_rows_free) */
    return REMAT_OK;
}

/* a row fits when its kept bytes (remat_table_evaluate's) fit the kept budget */
static void table_adjust(const cli_plan_q *q, remat_plan_row *r)
{
    const tctx *t = q->ctx;
    if (!t->shown) return;
    remat_table_row tr;
    memset(&tr, 0, sizeof tr);
    r->fits = !remat_table_evaluate(&t->c, t->prof, r->policy, &tr) && tr.kept_bytes <= kept_budget(t);
    remat_table_row_clear(&tr);
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
        "  \"reserve_bytes\", \"static_bytes\", \"rows\": [{\"policy\", \"kept_bytes\", \"checkpoint_bytes\",\n"
        "  \"peak_bytes\", \"stored_bytes\", \"overhead_pct\", \"step_ms_pred\", \"fits\"}], \"optimal\": {the same} or\n"
        "  null when nothing fits (the reason on stderr, exit status 1)}\n",
        groups, 1, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    if (!o.table) return cli_usage_error("plan", "--table needs a FILE");
    tctx t;
    memset(&t, 0, sizeof t);
    t.path = o.table;
    if (!cli_budget_pick("plan", o.budget, o.budget_act, &t.shown, &t.act)) return 2;
    if (o.pareto && (t.shown || o.policies.n))
        return cli_usage_error("plan", "--pareto shows the planner's plans; drop --budget and --recompute");
    remat_set_threads((int)o.threads);
    if (remat_table_load(o.table, &t.c, &t.prof)) return cli_error("%s", remat_errmsg()) + 1;
    int rc = 1;
    if (remat_table_get_info(&t.c, &t.info)) { cli_error("%s", remat_errmsg()); goto out; }
    /* kept K (+ static) is a planner budget of K + reserve (+ static): see remat.h */
    t.budget = t.shown ? t.shown + t.info.reserve_bytes : 0;
    static const char *fixed[] = { "none", "full", "every:2", "sqrt" };
    int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    cli_plan_q q = { &t.c, t.prof, t.budget, t.act, o.policies.n ? o.policies.v : fixed,
                     o.policies.n ? o.policies.n : nfixed, o.policies.n > 0, &t.info, table_head, table_optimal, table_adjust, &t };
    rc = o.pareto ? cli_plan_pareto(&q, o.json, 0) : cli_plan_budget(&q, o.json, o.explain);
out:
    remat_profile_free(t.prof);
    remat_table_unload(&t.c);
    return rc;
}
