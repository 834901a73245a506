/*
 * cmd_bench.c -- `remat bench`: recomputation policies side by side.
 *
 * Why it measures the way it does:
 *   - The machines this runs on change speed by about 2x for minutes at a
 *     time (shared cores, frequency scaling).  Timing policy A for a minute
 *     and then policy B compares two machines, not two policies.  So the
 *     policies run interleaved: in every round each policy runs one step, and
 *     the order rotates by one policy per round so that no policy always
 *     follows the same neighbour.  Reported times are medians over rounds,
 *     and a policy's cost relative to `none` is the median of its per-round
 *     ratios, which cancels the slow drift that both share within a round.
 *   - One model serves every policy: remat_model_set_policy swaps the
 *     schedule between steps.  All policies compute bit-identical values
 *     (tests/test_schedule), so the work of a step does not depend on which
 *     policy ran before, and one set of parameters, gradients and AdamW state
 *     (2 GiB for GPT-2 124M) is all the benchmark holds.
 *   - The GEMM yardstick is measured in every round too, in each precision
 *     benched, next to the steps it is compared with (the best of 3
 *     back-to-back calls through the same engine, so that one preempted call
 *     does not make the model look faster than the engine); gemm_gflops is
 *     the median of those probes.  With --dtype fp32,bf16 each precision has
 *     its own model and its own `none`: the ratios compare policies within a
 *     precision, and the rows of both precisions interleave in every round.
 *   - Peak RSS is a process-lifetime high-water mark (getrusage's
 *     ru_maxrss, /proc's VmHWM), so a figure per policy needs a process per
 *     policy: for each one the bench forks and execs itself (`remat bench
 *     --rss-child POLICY ...`, internal), and that fresh process creates the
 *     model, runs one step and reports its VmHWM.  Exec rather than a bare
 *     fork: the child starts with no OpenMP or BLAS thread pool inherited
 *     half-alive, and with none of the parent's pages.  The figure includes
 *     the binary and libraries (reported as rss_base_bytes: what the child
 *     held before creating the model).  --no-rss skips the children.
 *
 * Output: a table, or --json / --csv with the fields listed in --help.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "progress.h"

/* ---- flags ------------------------------------------------------------- */

typedef struct strlist {
    char **v;
    int n, cap;
} strlist;

static int strlist_add(strlist *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return 0;
    memcpy(c, s, len);
    c[len] = 0;
    l->v[l->n++] = c;
    return 1;
}

static void strlist_free(strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Extra --policy values, kept until bench_run reads them. */
static strlist extra_policies;

/* --policy P: appended to extra_policies */
static int parse_policy(const char *flag, const char *v, void *field)
{
    if (!strlist_add(&extra_policies, v, strlen(v))) { cli_error("out of memory"); return 0; }
    return 1;
}

/* --dtype LIST: each precision benched against its own none */
static int parse_dtypes(const char *flag, const char *v, void *field)
{
    bench_opts *o = field;
    o->ndt = 0;
    for (const char *p = v; *p;) {
        size_t len = strcspn(p, ",");
        remat_dtype d;
        if (!cli_dtype_parse(p, len, &d)) { cli_error("%s expects fp32, bf16 or fp32,bf16, got '%s'", flag, v); return 0; }
        for (int k = 0; k < o->ndt; k++)
            if (o->dts[k] == d) { cli_error("%s names %s twice", flag, cli_dtype_name(d)); return 0; }
        if (o->ndt == BENCH_MAXDT) { cli_error("%s takes at most two precisions", flag); return 0; }
        o->dts[o->ndt++] = d;
        p += len;
        if (*p == ',' && !*++p) { cli_error("%s: empty item in '%s'", flag, v); return 0; }
    }
    if (!o->ndt) { cli_error("%s needs a value", flag); return 0; }
    o->cfg.dtype = o->dts[0];
    return 1;
}

#define O(field) offsetof(bench_opts, field)
static const cli_flag dtype_flag[] = {   /* before the config group's --dtype, which it replaces */
    {"--dtype", "LIST", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_dtypes,
     "fp32, bf16 or fp32,bf16: every policy in each precision (one\n"
     "model each, every (precision, policy) pair interleaved), each\n"
     "against its own none; rows carry dtype and gemm"},
};
static const cli_flag policy_flags[] = {
    {"--policies", "LIST", CLI_FLAG_STRING, O(policies), 0, 0, NULL, NULL,
     "policies separated by ',' (or by ';' when LIST contains one,\n"
     "so that combinations fit: 'none;full;every:2,selective')\n"
     "(default none,full,selective).  'all' = none, full, every:2,\n"
     "sqrt, first:L/2, selective, pointwise, save:qkv+fch,\n"
     "revolve:3, every:2,selective, every:2,selective,pointwise.\n"
     "`none` is always measured: it is the reference of every ratio;\n"
     "with --budget the planner's optimum is measured too (row 'optimal')."},
    {"--policy", "P", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_policy, "add one policy (repeatable; P may contain ',')"},
    CLI_FLAG_BUDGETS(bench_opts, budget, budget_act),
    {"--profile", "FILE", CLI_FLAG_STRING, O(profile), 0, 0, NULL, NULL,
     "planner profile from 'remat profile' (default: the cached\n"
     "profile of this config and machine, else the FLOP model\n"
     "calibrated by a GEMM probe)"},
};
static const cli_flag measure_flags[] = {
    {"--steps", "N", CLI_FLAG_LONG, O(steps), 1, 1000000, NULL, NULL, "timed rounds (default 10)"},
    {"--warmup", "N", CLI_FLAG_LONG, O(warmup), 0, 1000000, NULL, NULL, "untimed rounds (default 2)"},
    CLI_FLAG_THREADS(bench_opts, threads),
    CLI_FLAG_SEED(bench_opts, seed),
    {"--sgemm-n", "N", CLI_FLAG_LONG, O(sgemm_n), 16, 8192, NULL, NULL,
     "side of the GEMM probe run every round in each precision, best\n"
     "of 3 (default 1024)"},
    {"--no-rss", NULL, CLI_FLAG_SWITCH, O(no_rss), 0, 0, NULL, NULL, "skip the per-policy peak-RSS children"},
    {"--trace", "DIR", CLI_FLAG_STRING, O(trace_dir), 0, 0, NULL, NULL,
     "write each policy's timed rounds as a Chrome trace (Perfetto,\n"
     "chrome://tracing): DIR/NN-POLICY.json, one step per round"},
};
static const cli_flag output_flags[] = {
    CLI_FLAG_JSON(bench_opts, json,
                  "one JSON object: {\"rows\": [...], \"gemm_gflops\", \"front\",\n"
                  "\"config\", \"machine\", ...}; each row has policy, schedule,\n"
                  "step_ms_median, ratio_vs_none, tokens_per_s, act_peak_bytes,\n"
                  "act_peak_pred_bytes, act_stored_bytes, act_stored_pred_bytes,\n"
                  "act_workset_bytes, act_workset_pred_bytes, step_peak_bytes,\n"
                  "rss_peak_bytes, gflops, dtype, gemm, gemm_gflops, gemm_frac,\n"
                  "step_ms_pred, fits, step_ms; \"precisions\": per dtype its probe,\n"
                  "front and planner messages (the first dtype's also at the top)\n"
                  "(rss_peak_bytes: the peak RSS of a process of its own that creates\n"
                  "the model and runs one step of the policy; act_* bytes: measured,\n"
                  "*_pred: dry run)"),
    {"--csv", NULL, CLI_FLAG_SWITCH, O(csv), 0, 0, NULL, NULL, "the same row fields as CSV (step_ms omitted)"},
    {"--svg-pareto", "FILE", CLI_FLAG_STRING, O(svg_pareto), 0, 0, NULL, NULL,
     "plot activation peak vs step time, with the planner's front"},
    {"--svg-timeline", "FILE", CLI_FLAG_STRING, O(svg_timeline), 0, 0, NULL, NULL,
     "plot live activation bytes over one step, by tensor"},
    {"--timeline-policy", "P", CLI_FLAG_STRING, O(timeline_policy), 0, 0, NULL, NULL,
     "the policy of the timeline (default: the optimum with\n"
     "--budget, else the first policy other than none)"},
};
static const cli_flag out_flag[] = {
    {"--out", "DIR", CLI_FLAG_STRING, O(out_dir), 0, 0, NULL, NULL, "where report.html goes (created if missing)"},
};
#undef O

static int parse_flags(const char *cmd, int argc, char **argv, int allow_out, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_config_start(&o->cfg);
    o->steps = 10;
    o->warmup = 2;
    o->sgemm_n = 1024;
    o->seed = 1;
    o->argc = argc;
    o->argv = argv;
    strlist_free(&extra_policies);
    cli_flag_group groups[] = {
        { "policies:", CLI_FLAGS(policy_flags), o }, { "measurement:", CLI_FLAGS(measure_flags), o },
        { NULL, CLI_FLAGS(dtype_flag), o }, { "output:", CLI_FLAGS(output_flags), o },
        { NULL, CLI_FLAGS(out_flag), o }, cli_config_group(&o->cfg),
    };
    /* report: --out, and the bench's flags; bench: no --out */
    if (!allow_out) memmove(&groups[4], &groups[5], sizeof groups[0]);
    cli_command c = {
        cmd,
        allow_out ? "usage: remat report --out DIR [bench flags]\n\n"
                    "Runs 'remat bench' and writes DIR/report.html: one self-contained page with\n"
                    "the Pareto plot, the memory timeline, the table, the config and the machine.\n\n"
                  : "usage: remat bench [config flags] [--policies LIST|all] [--steps N] [flags]\n\n"
                    "Runs recomputation policies interleaved (every round runs each policy for\n"
                    "one training step) and reports, per policy, the median step time, its\n"
                    "ratio to `none` from the same rounds, tokens/s, predicted and measured\n"
                    "activation bytes, peak RSS, and achieved GFLOP/s against a GEMM\n"
                    "measured in the same rounds.  Config defaults: the small model of\n"
                    "'remat train', vocab 256.\n\n",
        "A progress line is shown on stderr when it is a terminal and --json is not set.\n",
        groups, allow_out ? 6 : 5, NULL, NULL, { 0 },
    };
    int r = cli_parse(&c, argc, argv);
    if (r <= 0) return r;
    if (!cli_budget_pick(cmd, o->budget, o->budget_act, &o->budget, &o->act_only)) return -1;
    if (o->json && o->csv) { cli_usage_error(cmd, "--json and --csv exclude each other"); return -1; }
    if (allow_out && !o->out_dir) { cli_usage_error(cmd, "--out DIR is required"); return -1; }
    if (!o->ndt) { o->ndt = 1; o->dts[0] = o->cfg.dtype; }
    o->rss = !o->no_rss;
    o->trace = o->trace_dir != NULL || allow_out;   /* the report summarises one step's trace */
    cli_config_default_max_seq(&o->cfg);
    return 1;
}

int bench_parse(const char *cmd, int argc, char **argv, int allow_out, bench_opts *o)
{
    int r = parse_flags(cmd, argc, argv, allow_out, o);
    if (r <= 0) strlist_free(&extra_policies);   /* nothing will run: release the --policy values */
    return r;
}

/* Splits the --policies value into names; expands `all`. */
static int policy_names(const bench_opts *o, strlist *out)
{
    const char *s = o->policies ? o->policies : "none,full,selective";
    int L = o->cfg.n_layer;
    if (!strcmp(s, "all")) {
        char first[32];
        snprintf(first, sizeof first, "first:%d", L / 2 > 0 ? L / 2 : 1);
        const char *all[] = { "none", "full", "every:2", "sqrt", first, "selective", "pointwise", "save:qkv+fch",
                              "revolve:3", "every:2,selective", "every:2,selective,pointwise" };
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            if (!strlist_add(out, all[k], strlen(all[k]))) return 0;
    } else {
        char sep = strchr(s, ';') ? ';' : ',';
        for (const char *p = s;;) {
            const char *e = strchr(p, sep);
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len > 0 && !strlist_add(out, p, len)) return 0;
            if (!e) break;
            p = e + 1;
        }
    }
    for (int i = 0; i < extra_policies.n; i++)
        if (!strlist_add(out, extra_policies.v[i], strlen(extra_policies.v[i]))) return 0;
    return 1;
}

/* ---- small helpers ------------------------------------------------------- */

static void make_tokens(int *tok, size_t n, int vocab, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        tok[i] = (int)(x % (uint64_t)vocab);
    }
}

/* The 1-minute load average: how busy the machine was (these machines are
 * shared), or -1. */
static double load_avg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* The peak resident set of this process image (VmHWM), in bytes; falls
 * back to getrusage's ru_maxrss, which also counts the image before exec. */
static uint64_t peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kib;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) { fclose(f); return (uint64_t)kib * 1024u; }
        fclose(f);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;   /* Linux reports KiB */
}

/* `remat bench --rss-child POLICY [the bench's flags]` (internal): one
 * step of POLICY in a fresh process image; prints the peak RSS before the
 * model exists and after the step, in bytes. */
static int rss_child(int argc, char **argv)
{
    bench_opts o;
    if (argc < 3) return 2;
    const char *policy = argv[2];
    argv[2] = argv[0];   /* parse the flags after the policy */
    int p = bench_parse("bench", argc - 2, argv + 2, 0, &o);
    strlist_free(&extra_policies);   /* the child runs only `policy` */
    if (p <= 0) return 2;
    remat_set_threads((int)o.threads);
    uint64_t base = peak_rss_bytes();
    const remat_config *c = &o.cfg;
    size_t N = (size_t)c->batch * c->seq;
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    remat_model *m = NULL;
    float loss;
    int rc = 1;
    if (in && tg) {
        make_tokens(in, N, c->vocab, o.seed);
        make_tokens(tg, N, c->vocab, o.seed + 1);
        if (!remat_model_create(c, o.seed, &m) && !remat_model_set_policy(m, policy) &&
            !remat_model_step(m, in, tg, 1, &loss)) {
            printf("%llu %llu\n", (unsigned long long)base, (unsigned long long)peak_rss_bytes());
            rc = 0;
        } else cli_error("rss child: %s", m ? remat_model_error(m) : remat_errmsg());
    }
    remat_model_free(m);
    free(in); free(tg);
    return rc;
}

/* Runs one step of `policy` in a child process (fork + exec of this binary,
 * so that the child starts with no thread pools and its own memory) and
 * returns its peak RSS; *base gets what the child held before creating the
 * model.  0 when the child failed (e.g. killed for memory). */
static uint64_t rss_probe(const bench_opts *o, const char *policy, remat_dtype dt, uint64_t *base)
{
    /* the child gets this command's own flags (so every config flag means
     * the same to it), less --out and --trace, and then the row's precision
     * (a later --dtype wins); its parser is this one */
    char **args = calloc((size_t)o->argc + 8, sizeof *args);
    if (!args) return 0;
    int k = 0;
    args[k++] = "remat";
    args[k++] = "bench";
    args[k++] = "--rss-child";
    args[k++] = (char *)policy;
    for (int i = 1; i < o->argc; i++) {
        if (!strcmp(o->argv[i], "--out") || !strcmp(o->argv[i], "--trace")) { i++; continue; }
        args[k++] = o->argv[i];
    }
    args[k++] = "--dtype";
    args[k++] = (char *)cli_dtype_name(dt);
    args[k] = NULL;
    int fd[2];
    if (pipe(fd)) { free(args); return 0; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { close(fd[0]); close(fd[1]); free(args); return 0; }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    free(args);
    close(fd[1]);
    char buf[128];
    size_t got = 0;
    for (;;) {
        ssize_t nr = read(fd[0], buf + got, sizeof buf - 1 - got);
        if (nr < 0 && errno == EINTR) continue;
        if (nr <= 0) break;
        got += (size_t)nr;
        if (got == sizeof buf - 1) break;
    }
    buf[got] = 0;
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    unsigned long long b = 0, peak = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) || sscanf(buf, "%llu %llu", &b, &peak) != 2) return 0;
    if (base) *base = b;
    return peak;
}

void bench_result_free(bench_result *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->rows[i].name);
        free(r->rows[i].policy);
        free(r->rows[i].ms);
        remat_trace_free(r->rows[i].trace);
    }
    free(r->rows);
    for (int k = 0; k < BENCH_MAXDT; k++) {
        free(r->slot[k].gemm_round);
        remat_plan_rows_free(r->slot[k].front, r->slot[k].n_front);
    }
    memset(r, 0, sizeof *r);
}

/* Appends a row of precision slot; NULL on out of memory. */
static bench_row *add_row(bench_result *r, int slot, const char *name, const char *canon, long steps)
{
    bench_row *rows = realloc(r->rows, sizeof *rows * (size_t)(r->n + 1));
    if (!rows) return NULL;
    r->rows = rows;
    bench_row *w = &rows[r->n];
    memset(w, 0, sizeof *w);
    w->name = strdup(name);
    w->policy = strdup(canon);
    w->ms = calloc((size_t)steps, sizeof(double));
    w->slot = slot;
    w->step_ms_pred = -1;
    w->fits = 1;
    if (!w->name || !w->policy || !w->ms) { free(w->name); free(w->policy); free(w->ms); return NULL; }
    r->n++;
    return w;
}

/* Canonical form of a policy, or NULL (reported) when it does not compile. */
static char *canonical(const remat_config *cfg, const char *policy)
{
    remat_schedule *s = NULL;
    if (remat_schedule_create(cfg, policy, &s)) { cli_error("policy '%s': %s", policy, remat_errmsg()); return NULL; }
    char *c = strdup(remat_schedule_policy(s));
    remat_schedule_free(s);
    if (!c) cli_error("out of memory");
    return c;
}

static int find_row(const bench_result *r, int slot, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (r->rows[i].slot == slot && (!strcmp(r->rows[i].name, name) || !strcmp(r->rows[i].policy, name))) return i;
    return -1;
}

/* ---- the run ------------------------------------------------------------- */

/* The rows of one precision: `none` first (the reference), the requested
 * policies, the planner's optimum; its planner figures. */
static int slot_rows(const bench_opts *o, bench_result *r, int k, const strlist *names)
{
    bench_slot *sl = &r->slot[k];
    const remat_config *c = &sl->cfg;
    remat_profile *prof = NULL;
    remat_status st;
    int rc = 1;
    sl->none_idx = r->n;
    if (!add_row(r, k, "none", "none", o->steps)) { cli_error("out of memory"); return 1; }
    r->rows[sl->none_idx].implicit = 1;
    for (int i = 0; i < names->n; i++) {
        char *canon = canonical(c, names->v[i]);
        if (!canon) return 2;
        int dup = find_row(r, k, names->v[i]);
        if (dup == sl->none_idx && !strcmp(canon, "none")) r->rows[sl->none_idx].implicit = 0;
        else if (dup < 0 && !add_row(r, k, names->v[i], canon, o->steps)) { free(canon); cli_error("out of memory"); return 1; }
        free(canon);
    }
    /* the planner: predicted front, per-policy predicted time, the optimum */
    if (o->profile) {
        if ((st = remat_profile_load(c, o->profile, &prof))) { cli_error("--profile %s: %s", o->profile, remat_errmsg()); goto out; }
    } else {
        cli_cached_profile(c, &prof, NULL, 0);   /* a corrupt or foreign entry: one warning line, ignored */
        if (!prof && (st = remat_profile_model(c, 1, &prof))) {
            snprintf(sl->planner_err, sizeof sl->planner_err, "profile: %s", remat_errmsg());
            prof = NULL;
        }
    }
    snprintf(sl->profile_desc, sizeof sl->profile_desc, "%s", prof ? remat_profile_describe(prof) : "FLOP model");
    if (o->budget) {
        remat_plan_row best;
        if ((st = remat_plan_optimal(c, prof, o->budget, o->act_only, &best))) {
            snprintf(sl->optimal_err, sizeof sl->optimal_err, "%s", remat_errmsg());
        } else {
            char *canon = canonical(c, best.policy);
            remat_plan_row_clear(&best);
            if (!canon) goto out;
            bench_row *w = add_row(r, k, "optimal", canon, o->steps);
            free(canon);
            if (!w) { cli_error("out of memory"); goto out; }
            w->optimal = 1;
        }
    }
    if (!sl->planner_err[0] && (st = remat_plan_pareto(c, prof, &sl->front, &sl->n_front))) {
        snprintf(sl->planner_err, sizeof sl->planner_err, "pareto front: %s", remat_errmsg());
        sl->front = NULL;
        sl->n_front = 0;
    }
    for (int i = sl->none_idx; i < r->n; i++) {
        remat_plan_row pr;
        if (remat_plan_evaluate(c, prof, r->rows[i].policy, o->budget, o->act_only, &pr)) {
            if (!sl->planner_err[0])
                snprintf(sl->planner_err, sizeof sl->planner_err, "evaluate %s: %s", r->rows[i].name, remat_errmsg());
            continue;
        }
        r->rows[i].step_ms_pred = pr.step_ms_pred;
        r->rows[i].fits = pr.fits;
        remat_plan_row_clear(&pr);
    }
    rc = 0;
out:
    remat_profile_free(prof);
    return rc;
}

int bench_run(const bench_opts *o, bench_result *r)
{
    const remat_config *c = &o->cfg;
    int rc = 1;
    strlist names = { 0 };
    remat_model *m[BENCH_MAXDT] = { NULL };
    int *in = NULL, *tg = NULL;
    double *ratio = NULL;
    remat_status st;
    cli_progress pg;
    double t_start = cli_now_ms();

    memset(r, 0, sizeof *r);
    r->timeline_idx = -1;
    remat_machine_cpu(r->cpu, sizeof r->cpu);
    r->load_start = load_avg();
    remat_set_threads((int)o->threads);
    cli_progress_init(&pg, !o->json);
    if ((rc = cli_config_check(c))) goto out;
    if (!policy_names(o, &names)) { cli_error("out of memory"); goto out; }
    r->nslot = o->ndt;
    for (int k = 0; k < r->nslot; k++) {
        r->slot[k].cfg = *c;
        r->slot[k].cfg.dtype = o->dts[k];
        /* refused here, before any child process would say it too */
        if ((st = remat_model_check(&r->slot[k].cfg))) { cli_error("%s", remat_errmsg()); rc = 2; goto out; }
        if ((rc = slot_rows(o, r, k, &names))) goto out;
        rc = 1;
    }

    /* the timeline's policy (of the first precision): asked for (added when
     * not benched), or a default */
    if (o->timeline_policy) {
        r->timeline_idx = find_row(r, 0, o->timeline_policy);
        if (r->timeline_idx < 0) {
            char *canon = canonical(c, o->timeline_policy);
            if (!canon) { rc = 2; goto out; }
            r->timeline_idx = find_row(r, 0, canon);
            if (r->timeline_idx < 0) {
                if (!add_row(r, 0, o->timeline_policy, canon, o->steps)) { free(canon); cli_error("out of memory"); goto out; }
                r->timeline_idx = r->n - 1;
            }
            free(canon);
        }
    } else {
        for (int i = 0; i < r->n; i++) if (r->rows[i].optimal && !r->rows[i].slot && r->timeline_idx < 0) r->timeline_idx = i;
        for (int i = 0; i < r->n && r->timeline_idx < 0; i++)
            if (!r->rows[i].slot && strcmp(r->rows[i].policy, "none")) r->timeline_idx = i;
        if (r->timeline_idx < 0) r->timeline_idx = 0;
    }

    size_t N = (size_t)c->batch * c->seq;
    in = malloc(N * sizeof *in);
    tg = malloc(N * sizeof *tg);
    ratio = calloc((size_t)o->steps, sizeof(double));
    if (!in || !tg || !ratio) { cli_error("out of memory"); goto out; }
    for (int k = 0; k < r->nslot; k++)
        if (!(r->slot[k].gemm_round = calloc((size_t)o->steps, sizeof(double)))) { cli_error("out of memory"); goto out; }
    make_tokens(in, N, c->vocab, o->seed);
    make_tokens(tg, N, c->vocab, o->seed + 1);

    /* peak RSS, one child process per (precision, policy) */
    if (o->rss) {
        for (int i = 0; i < r->n; i++) {
            char what[160];
            snprintf(what, sizeof what, "bench: peak RSS of %.100s, in a process of its own", r->rows[i].name);
            cli_progress_update(&pg, what, i, r->n);
            uint64_t base = 0;
            r->rows[i].rss_peak = rss_probe(o, r->rows[i].policy, o->dts[r->rows[i].slot], &base);
            if (base > r->rss_base) r->rss_base = base;
        }
    }

    for (int k = 0; k < r->nslot; k++)   /* one model per precision, every policy of it */
        if ((st = remat_model_create(&r->slot[k].cfg, o->seed, &m[k]))) { cli_error("%s", remat_errmsg()); goto out; }
    long P = r->n, total = (o->warmup + o->steps) * P;
    cli_progress_restart(&pg);
    for (long round = -o->warmup; round < o->steps; round++) {
        for (long k = 0; k < P; k++) {
            long p = (k + (round < 0 ? 0 : round)) % P;
            bench_row *w = &r->rows[p];
            remat_model *mm = m[w->slot];
            char what[200];
            snprintf(what, sizeof what, "bench: %s %ld/%ld, policy %.100s", round < 0 ? "warm-up round" : "round",
                     round < 0 ? round + o->warmup + 1 : round + 1, round < 0 ? o->warmup : o->steps, w->name);
            cli_progress_update(&pg, what, (round + o->warmup) * P + k, total);
            if ((st = remat_model_set_policy(mm, w->policy))) { cli_error("%s: %s", w->name, remat_model_error(mm)); goto out; }
            if (o->trace && round >= 0 && !w->trace && remat_trace_create(&w->trace)) { cli_error("%s", remat_errmsg()); goto out; }
            remat_model_set_trace(mm, o->trace && round >= 0 ? w->trace : NULL, (uint64_t)round + 1);
            float loss;
            double t0 = cli_now_ms();
            st = remat_model_step(mm, in, tg, 1, &loss);
            double dt = cli_now_ms() - t0;
            if (st) { cli_error("%s: %s", w->name, remat_model_error(mm)); goto out; }
            if (round >= 0) w->ms[round] = dt;
            remat_model_stats(mm, &w->st);
            if ((st = remat_schedule_simulate(remat_model_schedule(mm), &w->sim))) {
                cli_error("%s: cannot simulate the schedule: %s", w->name, remat_errmsg()); goto out;
            }
        }
        if (round >= 0)
            for (int k = 0; k < r->nslot; k++)
                r->slot[k].gemm_round[round] = remat_gemm_gflops((int)o->sgemm_n, 3, o->dts[k]);
    }
    cli_progress_clear(&pg);
    for (int k = 0; k < r->nslot; k++) remat_model_set_trace(m[k], NULL, 0);

    for (int k = 0; k < r->nslot; k++) r->slot[k].gemm_gflops = cli_median(r->slot[k].gemm_round, (int)o->steps);
    for (int i = 0; i < r->n; i++) {
        bench_row *w = &r->rows[i];
        const bench_slot *sl = &r->slot[w->slot];
        const bench_row *ref = &r->rows[sl->none_idx];
        w->ms_median = cli_median(w->ms, (int)o->steps);
        for (long s = 0; s < o->steps; s++) ratio[s] = ref->ms[s] > 0 ? w->ms[s] / ref->ms[s] : 0;
        w->ratio_vs_none = i == sl->none_idx ? 1.0 : cli_median(ratio, (int)o->steps);
        w->tokens_per_s = w->ms_median > 0 ? (double)N / (w->ms_median / 1000.0) : 0;
        w->gflops = w->ms_median > 0 ? w->st.flops / (w->ms_median * 1e6) : 0;
        w->gemm_frac = sl->gemm_gflops > 0 ? w->gflops / sl->gemm_gflops : 0;
    }
    r->rss_process = peak_rss_bytes();
    r->load_end = load_avg();
    r->elapsed_s = (cli_now_ms() - t_start) / 1000.0;
    rc = 0;
out:
    cli_progress_clear(&pg);
    strlist_free(&names);
    strlist_free(&extra_policies);
    for (int k = 0; k < BENCH_MAXDT; k++) remat_model_free(m[k]);
    free(in); free(tg); free(ratio);
    return rc;
}

/* ---- output ---------------------------------------------------------------- */

/* v, or null when it is not known */
static void json_num(remat_jsonw *w, const char *key, double v, int known) { remat_jsonw_num(w, key, known ? v : NAN); }

static void json_u64(remat_jsonw *w, const char *key, uint64_t v, int known)
{
    if (known) remat_jsonw_uint(w, key, v);
    else remat_jsonw_null(w, key);
}

/* s, or null when it is empty */
static void json_msg(remat_jsonw *w, const char *key, const char *s) { remat_jsonw_str(w, key, s[0] ? s : NULL); }

/* one precision's probe, planner front and planner messages */
static void json_slot(remat_jsonw *w, const bench_slot *sl)
{
    json_num(w, "gemm_gflops", sl->gemm_gflops, sl->gemm_gflops > 0);
    remat_jsonw_array(w, "front");
    for (size_t i = 0; i < sl->n_front; i++) {
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "policy", sl->front[i].policy);
        remat_jsonw_uint(w, "peak_bytes", sl->front[i].peak_bytes);
        remat_jsonw_num(w, "step_ms_pred", sl->front[i].step_ms_pred);
        remat_jsonw_end(w);
    }
    remat_jsonw_end(w);
    remat_jsonw_str(w, "planner_profile", sl->profile_desc);
    json_msg(w, "planner_error", sl->planner_err);
    json_msg(w, "optimal_error", sl->optimal_err);
}

static void json_row(remat_jsonw *w, const bench_opts *o, const bench_result *r, const bench_row *b)
{
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "policy", b->name);
    remat_jsonw_str(w, "schedule", b->policy);
    remat_jsonw_bool(w, "reference_only", b->implicit);
    remat_jsonw_bool(w, "optimal", b->optimal);
    remat_jsonw_num(w, "step_ms_median", b->ms_median);
    remat_jsonw_num(w, "ratio_vs_none", b->ratio_vs_none);
    remat_jsonw_num(w, "tokens_per_s", b->tokens_per_s);
    remat_jsonw_uint(w, "act_peak_bytes", b->st.act_peak_bytes);
    remat_jsonw_uint(w, "act_peak_pred_bytes", b->sim.peak_bytes);
    remat_jsonw_uint(w, "act_stored_bytes", b->st.act_stored_bytes);
    remat_jsonw_uint(w, "act_stored_pred_bytes", b->sim.stored_bytes);
    remat_jsonw_uint(w, "act_workset_bytes", b->st.act_workset_bytes);
    remat_jsonw_uint(w, "act_workset_pred_bytes", b->sim.workset_bytes);
    remat_jsonw_uint(w, "step_peak_bytes", b->st.step_peak_bytes);
    json_u64(w, "rss_peak_bytes", b->rss_peak, b->rss_peak > 0);
    remat_jsonw_num(w, "gflops", b->gflops);
    remat_jsonw_str(w, "dtype", cli_dtype_name(o->dts[b->slot]));
    remat_jsonw_str(w, "gemm", remat_gemm_name(remat_gemm_get()));
    json_num(w, "gemm_gflops", r->slot[b->slot].gemm_gflops, r->slot[b->slot].gemm_gflops > 0);
    json_num(w, "gemm_frac", b->gemm_frac, r->slot[b->slot].gemm_gflops > 0);
    remat_jsonw_num(w, "flops_per_step", b->st.flops);
    remat_jsonw_num(w, "recompute_pct", b->st.flops > 0 ? 100.0 * b->st.recompute_flops / b->st.flops : 0);
    json_num(w, "step_ms_pred", b->step_ms_pred, b->step_ms_pred >= 0);
    remat_jsonw_bool(w, "fits", b->fits);
    remat_jsonw_array(w, "step_ms");
    for (long s = 0; s < o->steps; s++) remat_jsonw_num(w, NULL, b->ms[s]);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
}

int bench_print_json(FILE *f, const bench_opts *o, const bench_result *r)
{
    const remat_config *c = &o->cfg;
    remat_jsonw *w = cli_json_open(f, 0);
    remat_jsonw_object(w, NULL);
    remat_jsonw_array(w, "rows");
    for (int i = 0; i < r->n; i++) json_row(w, o, r, &r->rows[i]);
    remat_jsonw_end(w);
    /* per precision; the first one's figures also at the top level */
    remat_jsonw_array(w, "precisions");
    for (int k = 0; k < r->nslot; k++) {
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "dtype", cli_dtype_name(o->dts[k]));
        json_slot(w, &r->slot[k]);
        remat_jsonw_end(w);
    }
    remat_jsonw_end(w);
    remat_jsonw_str(w, "gemm", remat_gemm_name(remat_gemm_get()));
    remat_jsonw_int(w, "gemm_n", o->sgemm_n);
    remat_jsonw_str(w, "gemm_isa", remat_gemm_isa());
    remat_jsonw_bool(w, "bf16_native", remat_gemm_bf16_native());
    json_slot(w, &r->slot[0]);
    remat_jsonw_str(w, "timeline_policy", r->timeline_idx >= 0 ? r->rows[r->timeline_idx].name : "");
    json_u64(w, "rss_base_bytes", r->rss_base, r->rss_base > 0);
    remat_jsonw_uint(w, "process_rss_peak_bytes", r->rss_process);
    remat_jsonw_num(w, "elapsed_s", r->elapsed_s);
    remat_jsonw_object(w, "config");
    remat_jsonw_int(w, "n_layer", c->n_layer);
    remat_jsonw_int(w, "n_embd", c->n_embd);
    remat_jsonw_int(w, "n_head", c->n_head);
    cli_json_arch(w, c);
    remat_jsonw_int(w, "vocab", c->vocab);
    remat_jsonw_int(w, "padded_vocab", remat_config_padded_vocab(c));
    remat_jsonw_int(w, "max_seq", c->max_seq);
    remat_jsonw_int(w, "seq", c->seq);
    remat_jsonw_int(w, "batch", c->batch);
    remat_jsonw_float(w, "dropout", c->dropout);
    remat_jsonw_uint(w, "params", remat_config_num_params(c));
    remat_jsonw_int(w, "steps", o->steps);
    remat_jsonw_int(w, "warmup", o->warmup);
    remat_jsonw_uint(w, "seed", o->seed);
    json_u64(w, "budget_bytes", o->budget, o->budget > 0);
    remat_jsonw_bool(w, "activations_only", o->act_only);
    remat_jsonw_end(w);
    struct utsname u;
    char os[300];
    int have_u = uname(&u) == 0;
    if (have_u) snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    remat_jsonw_object(w, "machine");
    remat_jsonw_str(w, "cpu", r->cpu);
    remat_jsonw_int(w, "cores", sysconf(_SC_NPROCESSORS_ONLN));
    remat_jsonw_int(w, "threads", remat_get_threads());
    remat_jsonw_str(w, "blas", remat_blas_info());
    remat_jsonw_str(w, "blas_core", remat_blas_core());
    remat_jsonw_str(w, "os", have_u ? os : NULL);
    json_num(w, "load_avg_start", r->load_start, r->load_start >= 0);
    json_num(w, "load_avg_end", r->load_end, r->load_end >= 0);
    remat_jsonw_str(w, "remat", remat_version());
    remat_jsonw_end(w);
    remat_jsonw_end(w);
    return cli_json_close(w);
}

static void csv_str(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) { if (*s == '"') fputc('"', f); fputc(*s, f); }
    fputc('"', f);
}

void bench_print_csv(FILE *f, const bench_opts *o, const bench_result *r)
{
    fputs("policy,schedule,reference_only,optimal,step_ms_median,ratio_vs_none,tokens_per_s,act_peak_bytes,"
          "act_peak_pred_bytes,act_stored_bytes,act_stored_pred_bytes,act_workset_bytes,act_workset_pred_bytes,"
          "step_peak_bytes,rss_peak_bytes,gflops,gemm_frac,gemm_gflops,flops_per_step,recompute_pct,"
          "step_ms_pred,fits,dtype,gemm\n", f);
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        csv_str(f, w->name);
        fputc(',', f);
        csv_str(f, w->policy);
        fprintf(f, ",%d,%d,%.4f,%.4f,%.1f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,", w->implicit, w->optimal,
                w->ms_median, w->ratio_vs_none, w->tokens_per_s, (unsigned long long)w->st.act_peak_bytes,
                (unsigned long long)w->sim.peak_bytes, (unsigned long long)w->st.act_stored_bytes,
                (unsigned long long)w->sim.stored_bytes, (unsigned long long)w->st.act_workset_bytes,
                (unsigned long long)w->sim.workset_bytes, (unsigned long long)w->st.step_peak_bytes);
        if (w->rss_peak) fprintf(f, "%llu", (unsigned long long)w->rss_peak);
        double g = r->slot[w->slot].gemm_gflops;
        fprintf(f, ",%.6g,", w->gflops);
        if (g > 0) fprintf(f, "%.6g", w->gemm_frac);
        fprintf(f, ",%.6g,%.0f,%.4f,", g, w->st.flops, w->st.flops > 0 ? 100.0 * w->st.recompute_flops / w->st.flops : 0.0);
        if (w->step_ms_pred >= 0) fprintf(f, "%.4f", w->step_ms_pred);
        fprintf(f, ",%d,%s,%s\n", w->fits, cli_dtype_name(o->dts[w->slot]), remat_gemm_name(remat_gemm_get()));
    }
}

static const char *mib(uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f", b / 1048576.0);
    return buf;
}

void bench_print_table(FILE *f, const bench_opts *o, const bench_result *r)
{
    char b[8][32];
    cli_config_print(f, &o->cfg);
    fprintf(f, "bench: %ld interleaved rounds after %ld warm-up, %d thread(s), %s | GEMM engine %s, %ld^3 probe (median "
               "of the rounds):", o->steps, o->warmup, remat_get_threads(), r->cpu, remat_gemm_name(remat_gemm_get()),
            o->sgemm_n);
    for (int k = 0; k < r->nslot; k++) fprintf(f, " %s %.1f GFLOP/s", cli_dtype_name(o->dts[k]), r->slot[k].gemm_gflops);
    if (*remat_gemm_isa())
        fprintf(f, " | oneDNN ISA %s%s", remat_gemm_isa(),
                remat_gemm_bf16_native() ? "" : " (no bf16 matmul: bf16 products on fp32 copies)");
    fprintf(f, " | load average %.1f -> %.1f on %ld cores\n", r->load_start, r->load_end, sysconf(_SC_NPROCESSORS_ONLN));
    int wname = 6;
    for (int i = 0; i < r->n; i++) {
        int l = (int)strlen(r->rows[i].name) + (r->nslot > 1 ? 5 : 0);
        if (l > wname) wname = l > 40 ? 40 : l;
    }
    fprintf(f, "\n%-*s %9s %7s %9s %10s %10s %9s %9s %9s %8s %6s %8s\n", wname, "policy", "ms/step", "x none",
            "tok/s", "act peak", "predicted", "stored", "workset", "RSS peak", "GFLOP/s", "%GEMM", "pred ms");
    fprintf(f, "%-*s %9s %7s %9s %10s %10s %9s %9s %9s %8s %6s %8s\n", wname, "", "(median)", "", "", "MiB", "MiB",
            "MiB", "MiB", "MiB", "", "", "");
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        char rss[32], pred[32];
        if (w->rss_peak) mib(w->rss_peak, rss, sizeof rss); else snprintf(rss, sizeof rss, "-");
        if (w->step_ms_pred >= 0) snprintf(pred, sizeof pred, "%.1f", w->step_ms_pred); else snprintf(pred, sizeof pred, "-");
        char nm[64];
        if (r->nslot > 1) snprintf(nm, sizeof nm, "%s %s", cli_dtype_name(o->dts[w->slot]), w->name);
        else snprintf(nm, sizeof nm, "%s", w->name);
        fprintf(f, "%-*.*s %9.1f %7.3f %9.0f %10s %10s%s %8s %9s %9s %8.2f %5.1f%% %8s\n", wname, wname, nm,
                w->ms_median, w->ratio_vs_none, w->tokens_per_s, mib(w->st.act_peak_bytes, b[0], sizeof b[0]),
                mib(w->sim.peak_bytes, b[1], sizeof b[1]), w->sim.peak_bytes == w->st.act_peak_bytes ? " " : "!",
                mib(w->st.act_stored_bytes, b[2], sizeof b[2]), mib(w->st.act_workset_bytes, b[3], sizeof b[3]), rss,
                w->gflops, 100.0 * w->gemm_frac, pred);
    }
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        if (w->optimal || strcmp(w->name, w->policy))
            fprintf(f, "  %s = %s\n", w->name, w->policy);
    }
    int mismatch = 0;
    for (int i = 0; i < r->n; i++) mismatch |= r->rows[i].sim.peak_bytes != r->rows[i].st.act_peak_bytes;
    fprintf(f, "\nactivation bytes are exact (accounting allocator); predicted = dry run of the schedule%s\n",
            mismatch ? "; '!' marks a MISMATCH between predicted and measured" : " (all equal to measured)");
    if (r->rss_base)
        fprintf(f, "RSS peak: each policy in a process of its own (model + one step); %s MiB of it is the "
                   "process before the model\n", mib(r->rss_base, b[4], sizeof b[4]));
    if (r->rows[r->slot[0].none_idx].implicit)
        fprintf(f, "none was measured as the reference of 'x none'%s\n", r->nslot > 1 ? " (in each precision)" : "");
    for (int k = 0; k < r->nslot; k++) {
        const bench_slot *sl = &r->slot[k];
        const char *in = r->nslot > 1 ? cli_dtype_name(o->dts[k]) : "";
        if (o->budget) {
            cli_fmt_bytes(o->budget, b[5], sizeof b[5]);
            if (sl->optimal_err[0])
                fprintf(f, "%s%sbudget %s%s: no optimum: %s\n", in, *in ? " " : "", b[5], o->act_only ? " (activations)" : "",
                        sl->optimal_err);
            else fprintf(f, "%s%sbudget %s%s: 'optimal' is the planner's fastest schedule that fits\n", in, *in ? " " : "",
                         b[5], o->act_only ? " (activations)" : "");
        }
        fprintf(f, "%s%splanner ('pred ms'): %s\n", in, *in ? " " : "", sl->profile_desc);
        if (sl->planner_err[0]) fprintf(f, "%s%splanner predictions incomplete: %s\n", in, *in ? " " : "", sl->planner_err);
        else if (sl->n_front)
            fprintf(f, "%s%splanner front: %zu schedules from %s MiB at %.1f ms to %s MiB at %.1f ms (predicted)\n", in,
                    *in ? " " : "", sl->n_front, mib(sl->front[0].peak_bytes, b[6], sizeof b[6]), sl->front[0].step_ms_pred,
                    mib(sl->front[sl->n_front - 1].peak_bytes, b[7], sizeof b[7]), sl->front[sl->n_front - 1].step_ms_pred);
    }
}

/* ---- files ----------------------------------------------------------------- */

int cli_write_atomic(const char *path, const char *data, size_t len)
{
    if (remat_write_file_atomic(path, data, len)) return cli_error("%s", remat_errmsg());
    return 0;
}

int bench_render(int (*fn)(FILE *, const bench_opts *, const bench_result *, int), const bench_opts *o,
                 const bench_result *r, int xml_decl, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = open_memstream(out, len);
    if (!f) return cli_error("out of memory");
    int rc = fn(f, o, r, xml_decl);
    if (fclose(f) || rc) { free(*out); *out = NULL; return rc ? rc : cli_error("out of memory"); }
    return 0;
}

int bench_write_svg(const char *path, int (*fn)(FILE *, const bench_opts *, const bench_result *, int),
                    const bench_opts *o, const bench_result *r)
{
    char *buf;
    size_t len;
    int rc = bench_render(fn, o, r, 1, &buf, &len);
    if (!rc) rc = cli_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

int bench_check_outputs(const bench_opts *o)
{
    if (o->svg_pareto && cli_check_output("--svg-pareto", o->svg_pareto)) return 1;
    if (o->svg_timeline && cli_check_output("--svg-timeline", o->svg_timeline)) return 1;
    if (o->trace_dir && cli_mkdirs("--trace", o->trace_dir)) return 1;
    return 0;
}

int bench_write_traces(const bench_opts *o, const bench_result *r)
{
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        char name[96], path[4200];
        size_t k = 0;
        /* a file name from the policy's: letters and digits kept, the rest '_' */
        for (const char *c = w->name; *c && k + 1 < sizeof name; c++)
            name[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_';
        name[k] = 0;
        if (snprintf(path, sizeof path, "%s/%02d-%s%s%s.json", o->trace_dir, i + 1,
                     r->nslot > 1 ? cli_dtype_name(o->dts[w->slot]) : "", r->nslot > 1 ? "-" : "", name) >= (int)sizeof path)
            return cli_error("--trace: path too long");
        if (w->trace && remat_trace_save(w->trace, 1, (uint64_t)o->steps, path)) return cli_error("%s", remat_errmsg());
    }
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o;
    bench_result r;
    if (argc >= 2 && !strcmp(argv[1], "--rss-child")) return rss_child(argc, argv);
    int p = bench_parse("bench", argc, argv, 0, &o);
    if (p <= 0) return p < 0 ? 2 : 0;
    if (bench_check_outputs(&o)) return 1;
    int rc = bench_run(&o, &r);
    if (rc) { bench_result_free(&r); return rc; }
    if (o.json && (rc = bench_print_json(stdout, &o, &r))) goto out;
    if (o.csv) bench_print_csv(stdout, &o, &r);
    else if (!o.json) bench_print_table(stdout, &o, &r);
    fflush(stdout);
    if (o.svg_pareto && (rc = bench_write_svg(o.svg_pareto, bench_svg_pareto, &o, &r))) goto out;
    if (o.svg_timeline && (rc = bench_write_svg(o.svg_timeline, bench_svg_timeline, &o, &r))) goto out;
    if (o.trace_dir && (rc = bench_write_traces(&o, &r))) goto out;
out:
    bench_result_free(&r);
    return rc;
}
