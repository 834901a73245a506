/*
 * cmd_plan.c -- `remat plan`: predicted memory and time of every named
 * policy and of the optimal plan for a budget; the Pareto front of memory
 * against time; the longest sequence (or largest batch) that fits.  Also
 * cli_plan_for_budget_parallel(), which `remat train --budget` uses.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

#define MAX_GIVEN CLI_MAX_POLICIES
static cli_policies given;    /* --recompute POLICY, in order */

/* the policies to show: those given, else the named ones (first:N at half
 * depth); names[i] points into static storage or into argv */
static int named_policies(const remat_config *c, const char **names, int max)
{
    static char firstn[32];
    if (given.n) {
        for (int i = 0; i < given.n && i < max; i++) names[i] = given.v[i];
        return given.n < max ? given.n : max;
    }
    static const char *fixed[] = { "none", "selective", "pointwise", "selective,pointwise", "full",
                                   "every:2", "every:2,selective", "sqrt", "revolve:3", "save:qkv+fch" };
    int n = 0;
    snprintf(firstn, sizeof firstn, "first:%d", c->n_layer / 2);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < max; i++) {
        names[n++] = fixed[i];
        if (i == 7 && c->n_layer / 2 > 0 && n < max) names[n++] = firstn;
    }
    return n;
}

/* The profile to use: --profile FILE, else the cached one of this config
 * and machine when present and valid, else the FLOP model calibrated by its
 * GEMM probe; none: NULL (the FLOP model's defaults).  Returns 0 and
 * reports when an explicit file cannot be used. */
static int pick_profile(const remat_config *c, const char *path, int none, int calibrate, remat_profile **out)
{
    *out = NULL;
    if (none) return 1;
    if (path) {
        if (remat_profile_load(c, path, out)) { cli_error("%s", remat_errmsg()); return 0; }
        return 1;
    }
    if (!calibrate) cli_cached_profile(c, out, NULL, 0);
    if (!*out && remat_profile_model(c, 1, out)) { cli_error("%s", remat_errmsg()); return 0; }
    return 1;
}

/* The data-parallel side of a plan (NULL: one rank, one micro-batch): the
 * rank's bytes besides activations, and the communication prediction. */
typedef struct plan_dp {
    remat_parallel par;
    remat_parallel_memory pm;
    double bw, lat;          /* --net-bw, --net-latency */
    double comm_ms;          /* their prediction, or -1 without --net-bw */
} plan_dp;

static void dp_text(const plan_dp *d)
{
    char b[6][32];
    const remat_parallel_memory *pm = &d->pm;
    printf("data parallel: %d rank%s, micro-batch %d, %d micro-batch%s per rank per step, ZeRO-%d\n", d->par.ranks,
           d->par.ranks > 1 ? "s" : "", d->par.micro_batch, pm->grad_accum, pm->grad_accum > 1 ? "es" : "", d->par.zero);
    printf("per rank: parameters %s, gradients %s, AdamW state %s, reduction buffers %s (%d partial-sum "
           "gradient%s), workspace %s\n", cli_fmt_bytes(pm->params_bytes, b[0], 32), cli_fmt_bytes(pm->grads_bytes, b[1], 32),
           cli_fmt_bytes(pm->optim_bytes, b[2], 32), cli_fmt_bytes(pm->reduce_bytes, b[3], 32), pm->tree_buffers,
           pm->tree_buffers == 1 ? "" : "s", cli_fmt_bytes(pm->workspace_bytes, b[4], 32));
    printf("communication per step: %s sent by each rank in %llu exchanges", cli_fmt_bytes(pm->comm_bytes, b[5], 32),
           (unsigned long long)pm->messages);
    if (d->comm_ms >= 0) printf("; predicted %.2f ms at %.4g B/s and %.3g s latency", d->comm_ms, d->bw, d->lat);
    printf("\n");
}

static void dp_json(remat_jsonw *w, const plan_dp *d)
{
    const remat_parallel_memory *pm = &d->pm;
    remat_jsonw_object(w, "parallel");
    remat_jsonw_int(w, "ranks", d->par.ranks);
    remat_jsonw_int(w, "micro_batch", d->par.micro_batch);
    remat_jsonw_int(w, "grad_accum", pm->grad_accum);
    remat_jsonw_int(w, "zero", d->par.zero);
    remat_jsonw_uint(w, "params_bytes", pm->params_bytes);
    remat_jsonw_uint(w, "grads_bytes", pm->grads_bytes);
    remat_jsonw_uint(w, "optim_bytes", pm->optim_bytes);
    remat_jsonw_uint(w, "reduce_bytes", pm->reduce_bytes);
    remat_jsonw_uint(w, "workspace_bytes", pm->workspace_bytes);
    remat_jsonw_uint(w, "static_bytes", pm->static_bytes);
    remat_jsonw_int(w, "tree_buffers", pm->tree_buffers);
    remat_jsonw_uint(w, "comm_bytes_per_step", pm->comm_bytes);
    remat_jsonw_uint(w, "messages_per_step", pm->messages);
    remat_jsonw_num(w, "comm_ms_pred", d->comm_ms >= 0 ? d->comm_ms : NAN);   /* null without --net-bw */
    remat_jsonw_end(w);
}

/* A row of a micro-batch config priced for a rank: its total is the
 * activation peak plus the rank's other bytes. */
static void dp_row(const plan_dp *dp, uint64_t budget, int act, remat_plan_row *r)
{
    if (!dp) return;
    r->total_bytes = r->peak_bytes + dp->pm.static_bytes;
    r->fits = !budget || (act ? r->peak_bytes : r->total_bytes) <= budget;
}

/* The fastest plan that fits budget: of c (pm NULL), or of one rank of a
 * data-parallel run (c its micro-batch config, pm the rank's bytes besides
 * activations).  A rank's budget pays for pm->static_bytes first, unless act;
 * its activations get the rest.  REMAT_ERR_BUDGET when nothing fits, another
 * status on error; err gets the message of either. */
static remat_status optimal_plan(const remat_config *c, const remat_profile *prof, uint64_t budget, int act,
                                 const remat_parallel_memory *pm, remat_plan_row *opt, char *err, size_t n)
{
    char b0[32], b9[32];
    remat_status st;
    if (pm && budget && !act && budget <= pm->static_bytes) {
        snprintf(err, n, "a rank holds %s besides activations (parameters, gradients, AdamW state, reduction "
                 "buffers); budget %s is below it", cli_fmt_bytes(pm->static_bytes, b0, sizeof b0),
                 cli_fmt_bytes(budget, b9, sizeof b9));
        return REMAT_ERR_BUDGET;
    }
    if (pm)
        st = remat_plan_optimal(c, prof, budget && !act ? budget - pm->static_bytes : budget, 1, opt);
    else
        st = remat_plan_optimal(c, prof, budget, act, opt);
    if (st) snprintf(err, n, "%s", remat_errmsg());
    return st;
}

/* cli_plan_q's callbacks for a model: q->ctx is the plan_dp (NULL: one rank) */
static void plan_head(const cli_plan_q *q, remat_jsonw *w, int pareto)
{
    const plan_dp *dp = q->ctx;
    char b1[32], b2[32];
    if (w) {
        remat_jsonw_uint(w, "budget_bytes", q->budget);
        if (dp) dp_json(w, dp);
        return;
    }
    cli_config_print(stdout, q->c);
    if (pareto) return;
    printf("cost model: %s\n", q->prof ? remat_profile_describe(q->prof) : "FLOP/byte model with default throughputs "
                                                                          "(run 'remat profile' to measure this machine)");
    if (dp) dp_text(dp);
    printf("parameters + gradients + AdamW state + workspace%s: %s", dp ? " + reduction (per rank)" : "",
           cli_fmt_bytes(dp ? dp->pm.static_bytes : remat_plan_static_bytes(q->c), b1, sizeof b1));
    if (q->budget) printf(" | budget: %s%s", cli_fmt_bytes(q->budget, b2, sizeof b2), q->act ? " of activations" : " in total");
}

static remat_status plan_optimal(const cli_plan_q *q, remat_plan_row *opt, char *err, size_t n)
{
    const plan_dp *dp = q->ctx;
    return optimal_plan(q->c, q->prof, q->budget, q->act, dp ? &dp->pm : NULL, opt, err, n);
}

static void plan_adjust(const cli_plan_q *q, remat_plan_row *r)
{
    dp_row(q->ctx, q->budget, q->act, r);
}

static int do_maximize(const remat_config *c, remat_plan_dim dim, uint64_t budget, int act, int json)
{
    const char *names[MAX_GIVEN];
    int nn = named_policies(c, names, MAX_GIVEN);
    const char *what = dim == REMAT_PLAN_SEQ ? "seq" : "batch";
    remat_plan_row *r = calloc(1, sizeof *r);
    if (!r) return cli_error("out of memory");
    char b1[32], b2[32];
    remat_jsonw *w = NULL;
    if (json) {
        if (!(w = cli_json_open(stdout, REMAT_JSONW_SPACED))) { remat_plan_rows_free(r, 1); return 1; }
        remat_jsonw_object(w, NULL);
        remat_jsonw_uint(w, "budget_bytes", budget);
        remat_jsonw_str(w, "dim", what);
        remat_jsonw_array(w, "rows");
    } else {
        cli_config_print(stdout, c);
        printf("largest %s that fits %s%s (max-seq follows seq; other fields fixed)\n\n", what,
               cli_fmt_bytes(budget, b1, sizeof b1), act ? " of activations" : " in total");
        printf("%-22s %9s %11s %11s\n", "policy", what, "act. peak", "total");
    }
    int rc = 0;
    for (int i = 0; i <= nn; i++) {
        const char *pol = i < nn ? names[i] : NULL;
        int best = 0;
        remat_status st = remat_plan_maximize(c, pol, dim, budget, act, &best, r);
        if (st && st != REMAT_ERR_BUDGET) {
            if (!pol || given.n) rc = cli_error("%s%s%s", pol ? pol : "", pol ? ": " : "", remat_errmsg());
            if (pol || !json) continue;   /* JSON: "optimal": null, the reason reported */
        }
        if (json) {
            if (!pol) remat_jsonw_end(w);   /* the rows */
            if (!pol && st) remat_jsonw_null(w, "optimal");
            else {
                remat_jsonw_object(w, pol ? NULL : "optimal");
                remat_jsonw_str(w, "policy", pol ? pol : r->policy);
                remat_jsonw_int(w, "max", best);
                remat_jsonw_uint(w, "peak_bytes", st ? 0 : r->peak_bytes);
                remat_jsonw_uint(w, "total_bytes", st ? 0 : r->total_bytes);
                remat_jsonw_end(w);
            }
            if (!pol) remat_jsonw_end(w);
        } else if (st) {
            printf("%-22.22s %9s %11s %11s\n", pol ? pol : "optimal", "none", "-", "-");
        } else {
            printf("%-22.22s %9d %11s %11s\n", pol ? pol : "optimal", best, cli_fmt_bytes(r->peak_bytes, b1, sizeof b1),
                   cli_fmt_bytes(r->total_bytes, b2, sizeof b2));
            if (!pol) printf("\noptimal plan at %s=%d: %s\n", what, best, r->policy);
        }
        remat_plan_row_clear(r);
    }
    remat_plan_rows_free(r, 1);
    if (json && cli_json_close(w)) rc = 1;
    return rc;
}

typedef struct plan_opts {
    uint64_t budget, budget_act;
    int json, csv, pareto, maximize, no_profile, calibrate, explain;
    long threads, ranks, micro, zero;
    double bw, lat;
    const char *profile, *calib_from, *table;
    cli_policies policies;   /* --recompute */
} plan_opts;

static const cli_choice maximize_choices[] = { {"seq", REMAT_PLAN_SEQ, 0}, {"batch", REMAT_PLAN_BATCH, 0}, {NULL, 0, 0} };

#define O(field) offsetof(plan_opts, field)
static const cli_flag flags[] = {
    CLI_FLAG_BUDGETS(plan_opts, budget, budget_act),
    {"--recompute", "POLICY", CLI_FLAG_CUSTOM, O(policies), 0, 0, NULL, cli_parse_policy,
     "predict POLICY instead of the named policies (repeatable)"},
    {"--pareto", NULL, CLI_FLAG_SWITCH, O(pareto), 0, 0, NULL, NULL, "the whole front of activation peak against time"},
    {"--maximize", "seq|batch", CLI_FLAG_CHOICE, O(maximize), 0, 0, maximize_choices, NULL,
     "the largest seq (max-seq follows) or batch that fits,\n"
     "per policy and for the optimal plan"},
    {"--profile", "FILE", CLI_FLAG_STRING, O(profile), 0, 0, NULL, NULL,
     "op times measured by 'remat profile' (default: the cached\n"
     "profile of this config and machine -- what 'remat profile'\n"
     "measured and what 'remat train' runs took -- else the FLOP\n"
     "model calibrated by a GEMM probe at this config's shapes)"},
    {"--calibrate-from", "TRACE", CLI_FLAG_STRING, O(calib_from), 0, 0, NULL, NULL,
     "price what the run of a trace ('remat train --trace') executed\n"
     "at what it took there, and keep those times in the cache"},
    {"--no-profile", NULL, CLI_FLAG_SWITCH, O(no_profile), 0, 0, NULL, NULL,
     "the FLOP/byte model with default speeds, nothing measured"},
    {"--calibrate", NULL, CLI_FLAG_SWITCH, O(calibrate), 0, 0, NULL, NULL,
     "the FLOP/byte model with its GEMM probe, even when a profile\n"
     "is cached"},
    CLI_FLAG_THREADS(plan_opts, threads),
    {"--explain", NULL, CLI_FLAG_SWITCH, O(explain), 0, 0, NULL, NULL, "what each policy does with each layer, as layer ranges"},
    CLI_FLAG_JSON(plan_opts, json, "machine-readable output (below)"),
    {"--csv", NULL, CLI_FLAG_SWITCH, O(csv), 0, 0, NULL, NULL, "the Pareto front as CSV (with --pareto)"},
    {"--table", "FILE", CLI_FLAG_STRING, O(table), 0, 0, NULL, NULL,
     "plan the chain of blocks a file describes instead (remat_torch.measure\n"
     "writes one): its own flags, 'remat plan --table FILE --help'"},
};
static const cli_flag dp_flags[] = {
    {"--ranks", "R", CLI_FLAG_LONG, O(ranks), 1, 1 << 20, NULL, NULL,
     "plan one rank of R (a power of two): the activations of one\n"
     "micro-batch, and the rank's parameters, gradients, AdamW state\n"
     "and the reduction's buffers"},
    {"--micro-batch", "b", CLI_FLAG_LONG, O(micro), 1, REMAT_MAX_BATCH, NULL, NULL,
     "sequences per forward/backward on a rank (default B/R)"},
    {"--zero", "Z", CLI_FLAG_LONG, O(zero), 0, 1, NULL, NULL, "1: the AdamW state sharded over the ranks (default for R > 1)"},
    {"--net-bw", "BYTES/s", CLI_FLAG_DOUBLE, O(bw), 1, 1e15, NULL, NULL,
     "with --net-latency S: predict the step's communication with an\n"
     "alpha-beta model (S + bytes/BW per exchange)"},
    {"--net-latency", "S", CLI_FLAG_DOUBLE, O(lat), 0, 10, NULL, NULL, "the exchanges' latency in seconds (with --net-bw)"},
};
#undef O

int cmd_plan(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)     /* a framework's table: planning for a GPU cluster */
        if (!strcmp(argv[i], "--framework") && strcmp(argv[i + 1], "remat")) return cli_plan_framework(argc, argv);
    for (int i = 1; i < argc; i++)         /* a table read from a file */
        if (!strcmp(argv[i], "--table")) return cli_plan_table(argc, argv);
    remat_config c;
    cli_config_start(&c);
    plan_opts o = { .maximize = -1, .zero = -1, .lat = -1 };
    cli_flag_group groups[] = {
        { "plan:", CLI_FLAGS(flags), &o },
        { "data parallelism (remat train under mpirun; --batch is then the global batch):", CLI_FLAGS(dp_flags), &o },
        cli_config_group(&c),
    };
    cli_command cmd = {
        "plan",
        "usage: remat plan [--budget SIZE | --budget-activations SIZE] [config flags] [--json]\n"
        "       remat plan --pareto [config flags] [--csv | --json]\n"
        "       remat plan --maximize seq|batch --budget SIZE [config flags] [--json]\n"
        "       remat plan --framework megatron|pytorch ... (a GPU cluster run: its own flags,\n"
        "                  'remat plan --framework megatron --help')\n"
        "       remat plan --table FILE.json ... (a chain of blocks a file describes, such as\n"
        "                  remat_torch.measure writes: 'remat plan --table F --help')\n\n"
        "Predicts, without running anything, the activation peak, stored bytes, working\n"
        "set, recomputation overhead and step time of every named recomputation policy,\n"
        "and finds the fastest schedule that fits the budget (exact dynamic programming\n"
        "over checkpoint segmentations and per-block keep-sets).  Memory comes from the\n"
        "schedule simulator, to the byte; time from the cost model.  The optimal plan is\n"
        "a policy string that 'remat train --recompute' accepts.\n\n",
        "JSON (--budget): {\"budget_bytes\", \"rows\": [{\"policy\", \"peak_bytes\", \"stored_bytes\",\n"
        "  \"workset_bytes\", \"overhead_pct\", \"step_ms_pred\", \"fits\"}], \"optimal\": {\"policy\",\n"
        "  \"peak_bytes\", \"step_ms_pred\"}} (rows: the named policies; optimal: null when\n"
        "  nothing fits, with the reason on stderr and exit status 1)\n",
        groups, 3, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    given = o.policies;
    uint64_t budget;
    int act;
    if (!cli_budget_pick("plan", o.budget, o.budget_act, &budget, &act)) return 2;
    int json = o.json, csv = o.csv, pareto = o.pareto, maximize = o.maximize, no_profile = o.no_profile;
    int calibrate = o.calibrate, explain = o.explain;
    long threads = o.threads, ranks = o.ranks, micro = o.micro, zero = o.zero;
    double bw = o.bw, lat = o.lat;
    const char *profile = o.profile, *calib_from = o.calib_from;
    if (pareto && given.n) return cli_usage_error("plan", "--pareto shows the planner's plans; drop --recompute");
    if (pareto && maximize >= 0) return cli_usage_error("plan", "--pareto and --maximize are separate questions; give one");
    if (maximize >= 0 && !budget) return cli_usage_error("plan", "--maximize needs --budget or --budget-activations");
    if (csv && (json || !pareto)) return cli_usage_error("plan", "--csv goes with --pareto (and not with --json)");
    if ((profile != NULL) + no_profile + calibrate + (calib_from != NULL) > 1)
        return cli_usage_error("plan", "give one of --profile, --no-profile, --calibrate and --calibrate-from");
    if ((bw > 0) != (lat >= 0)) return cli_usage_error("plan", "--net-bw and --net-latency go together");
    int dpmode = ranks || micro || zero >= 0 || bw > 0;
    if (dpmode && (pareto || maximize >= 0))
        return cli_usage_error("plan", "--ranks, --micro-batch, --zero and --net-bw plan a budget; not with --pareto "
                               "or --maximize");
    cli_config_default_max_seq(&c);
    remat_set_threads((int)threads);
    if (cli_config_check(&c)) return 2;
    if (maximize >= 0) return do_maximize(&c, maximize, budget, act, json);
    plan_dp dp;
    memset(&dp, 0, sizeof dp);
    if (dpmode) {
        int R = ranks ? (int)ranks : 1;
        dp.par = (remat_parallel){ R, micro ? (int)micro : (c.batch / R > 0 ? c.batch / R : 1),
                                   zero >= 0 ? (int)zero : R > 1 };
        if (remat_parallel_memory_of(&c, &dp.par, 0, &dp.pm)) return cli_error("%s", remat_errmsg()) + 1;
        dp.bw = bw;
        dp.lat = lat;
        dp.comm_ms = bw > 0 ? remat_parallel_comm_ms(&c, &dp.par, bw, lat) : -1;
        c.batch = dp.par.micro_batch;   /* the activations are one micro-batch's */
    }
    remat_profile *prof = NULL;
    char cache[4096];
    if (calib_from) {
        int crc = cli_calibrate_cache(&c, NULL, calib_from, NULL, &prof, cache, sizeof cache);
        if (crc) return crc;
        fprintf(stderr, "remat: the run times of %s are kept in %s\n", calib_from, cache);
    } else if (!pick_profile(&c, profile, no_profile, calibrate, &prof)) return 2;
    const char *names[MAX_GIVEN];
    cli_plan_q q = { &c, prof, budget, act, names, named_policies(&c, names, MAX_GIVEN), given.n > 0, NULL,
                     plan_head, plan_optimal, dpmode ? plan_adjust : NULL, dpmode ? &dp : NULL };
    int rc = pareto ? cli_plan_pareto(&q, json, csv) : cli_plan_budget(&q, json, explain);
    remat_profile_free(prof);
    return rc;
}

/* remat train --budget (cli.h): optimal_plan for c, or for one rank of the
 * run when par is not one rank stepping the whole batch at once. */
int cli_plan_for_budget_parallel(const remat_config *c, const remat_parallel *par, uint64_t budget, int act_only,
                                 int quiet, const char **policy, remat_profile **prof_out)
{
    static remat_plan_row row;
    remat_parallel_memory pm;
    remat_config mc = *c;
    int alone = par->ranks == 1 && par->micro_batch == c->batch;
    *prof_out = NULL;
    if (*policy) {
        cli_usage_error("train", "--budget chooses the policy; drop --recompute (or the budget)");
        return 0;
    }
    if (!alone) {
        if (remat_parallel_memory_of(c, par, 0, &pm)) { cli_error("%s", remat_errmsg()); return 0; }
        mc.batch = par->micro_batch;   /* the activations are one micro-batch's */
    }
    remat_profile *prof = NULL;
    pick_profile(&mc, NULL, 0, 0, &prof);
    remat_plan_row_clear(&row);
    char err[600];
    remat_status st = optimal_plan(&mc, prof, budget, act_only, alone ? NULL : &pm, &row, err, sizeof err);
    if (st || !alone) remat_profile_free(prof);
    else *prof_out = prof;   /* the run calibrates it (cli_calibrate_cache) */
    if (st) { cli_error("%s", err); return 0; }
    char b1[32], b2[32], b3[32];
    if (!quiet)
        printf("budget %s%s: plan %s\n  predicted activation peak %s, total %s, step %.1f ms (%.1f%% recompute)\n",
               cli_fmt_bytes(budget, b1, sizeof b1), act_only ? " of activations" : "", row.policy,
               cli_fmt_bytes(row.peak_bytes, b2, sizeof b2),
               cli_fmt_bytes(alone ? row.total_bytes : row.peak_bytes + pm.static_bytes, b3, sizeof b3),
               row.step_ms_pred, row.overhead_pct);
    else
        fprintf(stderr, "remat: budget plan: %s\n", row.policy);
    *policy = row.policy;
    return 1;
}
