/*
 * bench.h -- the engine behind `remat bench` and `remat report`, shared by
 * cmd_bench.c (flags, measurement, table / JSON / CSV), bench_plots.c (the
 * two SVG plots) and cmd_report.c (the HTML page).  CLI-internal.
 *
 * Method (why it is built this way is in cmd_bench.c's header):
 *   - one model, created once; each policy is installed with
 *     remat_model_set_policy before its step (policies are bit-identical, so
 *     the work per step does not depend on which ran before);
 *   - warm-up rounds, then `steps` rounds; in each round every policy runs
 *     one step (the start rotates by one policy per round) and one SGEMM
 *     probe runs;
 *   - medians over rounds; ratio_vs_none is the median of per-round ratios.
 */
#ifndef REMAT_CLI_BENCH_H
#define REMAT_CLI_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include "cli.h"

#define BENCH_MAXDT 2

typedef struct bench_opts {
    remat_config cfg;          /* cfg.dtype: the first of dts */
    int ndt;                   /* --dtype LIST: the precisions benched, each against its own none */
    remat_dtype dts[BENCH_MAXDT];
    const char *policies;      /* --policies (NULL: "none,full,selective") */
    long steps, warmup, threads, sgemm_n;
    uint64_t seed;
    uint64_t budget;           /* --budget or --budget-activations, 0 = none */
    uint64_t budget_act;       /* --budget-activations as given (budget has it after parsing) */
    int act_only;              /* --budget-activations: the budget is for the activation peak */
    const char *profile;       /* --profile FILE; NULL: the cached profile, else the calibrated FLOP model */
    int json, csv, rss;        /* rss: per-policy peak RSS in forked children */
    int no_rss;                /* --no-rss */
    const char *svg_pareto, *svg_timeline, *timeline_policy;
    const char *out_dir;       /* report only */
    const char *trace_dir;     /* --trace DIR: one trace file per policy */
    int trace;                 /* record the timed rounds (--trace, and the report) */
    int argc;                  /* the command line, for the report */
    char **argv;
} bench_opts;

typedef struct bench_row {
    char *name;                /* as asked for ("every:2,selective"), or "optimal" */
    int slot;                  /* its precision: r->slot[slot], o->dts[slot] */
    char *policy;              /* canonical policy string (a plan: for the optimum) */
    int implicit;              /* `none` added as the reference, not asked for */
    int optimal;               /* the planner's optimum for --budget */
    double *ms;                /* per round */
    double ms_median, ratio_vs_none, tokens_per_s, gflops, gemm_frac;   /* gemm_frac: of its precision's probe */
    double step_ms_pred;       /* planner (remat_plan_evaluate); < 0 unknown */
    int fits;                  /* planner: fits the budget (1 without one) */
    remat_sim sim;             /* predicted (dry run of the model's schedule) */
    remat_stats st;            /* measured, last step */
    uint64_t rss_peak;         /* bytes; 0 when not measured */
    remat_trace *trace;        /* its timed rounds, as steps 1..steps (o->trace) */
} bench_row;

/* what belongs to one precision of the bench */
typedef struct bench_slot {
    remat_config cfg;          /* o->cfg in this precision */
    int none_idx;              /* its `none` row, the reference of its ratios */
    double gemm_gflops;        /* median of the per-round GEMM probes in this precision */
    double *gemm_round;
    remat_plan_row *front;     /* planner's predicted Pareto front, or NULL */
    size_t n_front;
    char planner_err[512];     /* why the front / predictions are missing ("" if not) */
    char optimal_err[512];     /* why --budget has no optimum ("" if not) */
    char profile_desc[256];    /* the planner's time source (remat_profile_describe) */
} bench_slot;

typedef struct bench_result {
    bench_row *rows;
    int n, timeline_idx;
    int nslot;
    bench_slot slot[BENCH_MAXDT];
    uint64_t rss_base, rss_process;
    double elapsed_s;
    double load_start, load_end;   /* 1-minute load average (/proc/loadavg); < 0 unknown */
    char cpu[256];
} bench_result;

/* Parses bench flags (and --out, required, when allow_out).  Returns 1 to
 * run, 0 after --help was printed, -1 on a bad flag (reported; exit 2). */
int bench_parse(const char *cmd, int argc, char **argv, int allow_out, bench_opts *o);
/* Runs the benchmark; returns 0 or a CLI exit status (error reported). */
int bench_run(const bench_opts *o, bench_result *r);
void bench_result_free(bench_result *r);

void bench_print_table(FILE *f, const bench_opts *o, const bench_result *r);
/* 0, or 1 (reported) */
int bench_print_json(FILE *f, const bench_opts *o, const bench_result *r);
void bench_print_csv(FILE *f, const bench_opts *o, const bench_result *r);

/* The plots (bench_plots.c).  xml_decl: 1 for standalone files. 0 or an
 * exit status (error reported). */
int bench_svg_pareto(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl);
int bench_svg_timeline(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl);

/* Before the run: --trace DIR created, the --svg-* files' directories there
 * (the report's --out DIR is the report's own).  0, or 1 (reported). */
int bench_check_outputs(const bench_opts *o);
/* --trace DIR: each policy's trace as DIR/NN-NAME.json (DIR made by
 * bench_check_outputs).  0, or 1 (reported). */
int bench_write_traces(const bench_opts *o, const bench_result *r);

/* Writes path atomically: path.tmp.PID, fsync, rename, fsync of the
 * directory.  0, or 1 with the error reported. */
int cli_write_atomic(const char *path, const char *data, size_t len);
/* Runs fn into a memory buffer; *out is malloc'd and NUL-terminated. */
int bench_render(int (*fn)(FILE *, const bench_opts *, const bench_result *, int), const bench_opts *o,
                 const bench_result *r, int xml_decl, char **out, size_t *len);
/* Renders one SVG plot (fn, with its XML declaration) and writes it to path
 * atomically; 0, or the reported error's exit code. */
int bench_write_svg(const char *path, int (*fn)(FILE *, const bench_opts *, const bench_result *, int),
                    const bench_opts *o, const bench_result *r);

#endif
