/*
 * cli.h -- the remat command line.  It uses only the public API (remat.h);
 * this header is shared by the subcommand files.
 */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "remat.h"

/* Prints "remat: error: ..." (one line) to stderr and returns 1/2. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit status (README, "Exit status"): 2 when what was given cannot be
 * used -- a flag, a value, or a file a flag names (missing, unreadable,
 * malformed) -- and 1 when a run fails.  Prints like cli_error for a
 * failure to read an input whose status is st: 2 for a bad argument, file
 * or value (INVALID, IO, FORMAT, RANGE, POLICY), else 1 (out of memory, ...). */
int cli_input_error(remat_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called first by both (NULL when unset): a progress line on stderr uses it
 * to blank itself, so that the error starts on a clean line. */
extern void (*cli_error_hook)(void);
/* Data-parallel runs: cli_error_tag (e.g. "rank 1: ") follows "remat:
 * error: " (default "").  While errors are deferred (cli_defer_errors(1):
 * a rank's set-up, before the ranks agree on who failed) both keep the
 * first message (without "remat: error: ") instead of printing it;
 * cli_deferred_error returns it ("" when none). */
extern const char *cli_error_tag;
void cli_defer_errors(int on);
const char *cli_deferred_error(void);

/* Strict number parsing for flag values; on error prints and returns 0. */
int cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_float(const char *flag, const char *s, double lo, double hi, double *out);
int cli_u64(const char *flag, const char *s, uint64_t *out);
/* Byte sizes with units: B KiB MiB GiB TiB KB MB GB TB (e.g. "2GiB", "512MB"). */
int cli_bytes(const char *flag, const char *s, uint64_t *out);
/* The memory this process may use (remat_memory_available; the environment
 * variable REMAT_MEM_AVAILABLE=SIZE stands in for it, for tests); 0 on error
 * (reported). */
int cli_available_memory(uint64_t *bytes, const char **source);
/* "a, b, c": the names of the device presets (devices 1) or model presets (0), into buf */
const char *cli_preset_names(int devices, char *buf, size_t n);
/* A --budget value: a size, or "auto" for cli_available_memory. */
int cli_budget(const char *flag, const char *s, uint64_t *out);
/* A precision's name: "fp32" or "bf16". */
const char *cli_dtype_name(remat_dtype d);
/* The precision named by the first len bytes of s (cli_dtype_name's
 * names) into *out; 0 when they name none (not reported: each flag says
 * what it takes). */
int cli_dtype_parse(const char *s, size_t len, remat_dtype *out);

/* ---- flags (args.c) ---------------------------------------------------------
 * Each command parses its flags from tables of cli_flag, in groups, and
 * its --help is generated from the same tables: what a command accepts and
 * what its help lists are one list.  A flag several commands take is
 * declared once: the config group (cli_config_group: the model and step
 * shape, GEMM engine and precision, the framework table), and the
 * CLI_FLAG_* entries below.  A group's flags write into one struct (base),
 * each into the field at its offset. */
typedef enum cli_flag_kind {
    CLI_FLAG_SWITCH,   /* no value: the int field becomes 1 */
    CLI_FLAG_INT,      /* a whole number in [lo, hi] into an int field */
    CLI_FLAG_LONG,     /* ... into a long field */
    CLI_FLAG_U64,      /* a non-negative whole number into a uint64_t field */
    CLI_FLAG_FLOAT,    /* a number in [lo, hi] into a float field */
    CLI_FLAG_DOUBLE,   /* ... into a double field */
    CLI_FLAG_BYTES,    /* a size with units (cli_bytes) into a uint64_t field */
    CLI_FLAG_BUDGET,   /* a size or auto (cli_budget), more than 0, into a uint64_t field */
    CLI_FLAG_STRING,   /* the value itself (it points into argv) into a const char * field */
    CLI_FLAG_CHOICE,   /* one of choices: its value into an int (or enum) field */
    CLI_FLAG_CUSTOM    /* parse(flag, value, field) */
} cli_flag_kind;

/* a CHOICE's name and value; an alias is accepted but not listed */
typedef struct cli_choice { const char *name; int value, alias; } cli_choice;

typedef struct cli_flag {
    const char *name;            /* "--layers" */
    const char *arg;             /* the value's name in the help ("N"); NULL: the flag takes none */
    cli_flag_kind kind;
    size_t off;                  /* the field's offset in the group's struct */
    double lo, hi;               /* INT, LONG, FLOAT, DOUBLE: the range */
    const cli_choice *choices;   /* CHOICE: ended by a NULL name */
    /* CUSTOM: parses value into field (base + off); 1, or 0 (reported) */
    int (*parse)(const char *flag, const char *value, void *field);
    const char *help;            /* '\n' goes on at the help's column */
} cli_flag;

typedef struct cli_flag_group {
    const char *title;           /* the help's heading ("training:"), or NULL */
    const cli_flag *flags;
    size_t n;
    void *base;                  /* the struct the fields are in */
} cli_flag_group;
#define CLI_FLAGS(table) (table), (sizeof (table) / sizeof (table)[0])

#define CLI_MAX_GROUPS 8
typedef struct cli_command {
    const char *name;            /* "train": errors say "(see 'remat train --help')" */
    const char *usage;           /* the help before the flags */
    const char *notes;           /* the help after them (NULL: none) */
    cli_flag_group *groups;      /* a flag in two groups is the first group's */
    int ngroups;
    /* a flag no group has: a better message than "unknown flag", or NULL */
    const char *(*unknown)(const char *flag);
    const char *unknown_suffix;  /* added to "unknown flag 'F'" (NULL: nothing) */
    uint64_t given[CLI_MAX_GROUPS];   /* out: bit k of given[g]: groups[g].flags[k] was given */
} cli_command;

/* Parses argv[1..argc) into the groups' fields, in order (a later flag
 * wins).  1: run; 0: --help (or -h) was given and the help printed; -1: a
 * bad flag or value (reported in one line; the command exits 2).  Every
 * name is checked before --help is looked at: an unknown flag is an error
 * even beside it, so `remat CMD --help FLAG` tells whether CMD takes FLAG. */
int cli_parse(cli_command *cmd, int argc, char **argv);
/* The usage, every flag of the groups under their titles, the notes. */
void cli_help(FILE *f, const cli_command *cmd);
/* Whether flag was given to the last cli_parse. */
int cli_given(const cli_command *cmd, const char *flag);
/* Applies the flags of group g that argv gives (argv as cli_parse took it)
 * again, into base: a second struct of the group's type.  1, or 0 (reported). */
int cli_reapply(const cli_command *cmd, int g, void *base, int argc, char **argv);

/* The config group, into c.  Start c with cli_config_start (the library's
 * defaults, max_seq 0, which no flag gives) and end with
 * cli_config_default_max_seq (--max-seq defaults to --seq). */
cli_flag_group cli_config_group(remat_config *c);
void cli_config_start(remat_config *c);
void cli_config_default_max_seq(remat_config *c);
/* One config flag argv[*i] (consuming its value) into c: 1, 0 when it is
 * none of them, -1 on a bad value (reported).  For the config fuzzer. */
int cli_config_flag(remat_config *c, int argc, char **argv, int *i);
/* The value of flag argv[*i], advancing *i; NULL (reported) if missing. */
const char *cli_value(int argc, char **argv, int *i);

/* CUSTOM parsers shared by several commands: a precision's name into a
 * remat_dtype; a policy appended to a cli_policies (--recompute, repeatable) */
int cli_parse_dtype(const char *flag, const char *value, void *field);
#define CLI_MAX_POLICIES 16
typedef struct cli_policies { const char *v[CLI_MAX_POLICIES]; int n; } cli_policies;
int cli_parse_policy(const char *flag, const char *value, void *field);

/* Entries of flags several commands take: declared once here, into a field
 * of the command's own struct.  --budget and --budget-activations: a total
 * and an activation budget (each > 0, or auto); cli_budget_pick chooses. */
#define CLI_FLAG_THREADS(type, field)                                                                     \
    {"--threads", "N", CLI_FLAG_LONG, offsetof(type, field), 0, 1024, NULL, NULL,                         \
     "threads for the kernels and the BLAS (default: all cores; under mpirun\n"                          \
     "remat train divides them among the ranks of each machine)"}
#define CLI_FLAG_JSON(type, field, help) {"--json", NULL, CLI_FLAG_SWITCH, offsetof(type, field), 0, 0, NULL, NULL, help}
#define CLI_FLAG_SEED(type, field)                                                                        \
    {"--seed", "N", CLI_FLAG_U64, offsetof(type, field), 0, 0, NULL, NULL,                                \
     "initialisation and dropout seed (default 1)"}
#define CLI_FLAG_BUDGETS(type, total, act)                                                                \
    {"--budget", "SIZE", CLI_FLAG_BUDGET, offsetof(type, total), 0, 0, NULL, NULL,                        \
     "total memory: parameters + gradients + AdamW state + workspace +\n"                                \
     "activations (units B KiB MiB GiB TiB KB MB GB TB, e.g. 2GiB); auto: the\n"                        \
     "memory available to this process (MemAvailable, or the cgroup's\n"                                 \
     "memory.max when lower)"},                                                                          \
    {"--budget-activations", "SIZE", CLI_FLAG_BUDGET, offsetof(type, act), 0, 0, NULL, NULL,             \
     "the activation peak alone (a size, or auto)"}
/* The budget the two flags give: *budget (0: none) and *act (1: of the
 * activations); 1, or 0 (reported, a usage error of cmd) when both were given. */
int cli_budget_pick(const char *cmd, uint64_t total, uint64_t act_budget, uint64_t *budget, int *act);

/* remat_config_check(c): 0, or 2 (reported: a size that overflows names the
 * longest seq the sizes allow at c's batch). */
int cli_config_check(const remat_config *c);
void cli_config_print(FILE *f, const remat_config *c);
/* the architecture's fields of c into an open JSON object: arch, n_kv_head,
 * head_dim, ffn_dim, tie_embeddings (and rope_theta, norm_eps for llama) */
void cli_json_arch(remat_jsonw *w, const remat_config *c);
/* The --json output of every command goes through one JSON writer
 * (remat_jsonw, remat.h): a writer on f (flags as remat_jsonw_create's),
 * or NULL (reported) when it cannot be made. */
remat_jsonw *cli_json_open(FILE *f, unsigned flags);
/* Finishes and frees w; 0, or 1 (reported) when what was written is not
 * whole.  w NULL (cli_json_open failed, reported): 1. */
int cli_json_close(remat_jsonw *w);
/* "12.3 MiB" style formatting into buf */
const char *cli_fmt_bytes(uint64_t b, char *buf, size_t n);
double cli_now_ms(void);
/* remat_median of a copy of x[0..n) (x is left as it is) */
double cli_median(const double *x, int n);

int cmd_train(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
/* planner commands */
int cmd_plan(int argc, char **argv);
int cmd_profile(int argc, char **argv);
/* ---- the plan printer (plan_print.c) ----------------------------------------
 * `remat plan` (a model) and `remat plan --table` (a chain a file describes)
 * ask the planner the same questions and print the answers through one
 * printer.  Prints what `policy` does with each layer of c, as ranges of
 * layers treated alike (remat_plan_explain).  0, or 1 (reported) on a bad
 * policy. */
int cli_explain(FILE *f, const remat_config *c, const char *policy);
/* A question to the planner: c priced with prof, at budget. */
typedef struct cli_plan_q cli_plan_q;
struct cli_plan_q {
    const remat_config *c;
    const remat_profile *prof;
    uint64_t budget;                /* the planner's (remat_plan_evaluate's); 0: none */
    int act;                        /* 1: budget is of the activations alone */
    const char *const *names;       /* the policies to show, nn of them */
    int nn;
    int given;                      /* names are --recompute's: one the planner refuses is an error, else left out */
    /* NULL: a model's rows (peak, stored, working set, total; step ms to
     * 0.01).  A table's chain: its kept bytes (remat_table_evaluate's) and
     * peak, step ms to 0.001, and the optimum's whole row in JSON. */
    const remat_table_info *table;
    /* The command's header: w NULL, the text before the budget rows
     * (without the last newline; pareto: before the front, with it); else
     * members of the JSON object before "rows" (budget only). */
    void (*head)(const cli_plan_q *q, remat_jsonw *w, int pareto);
    /* The fastest plan that fits: REMAT_OK, REMAT_ERR_BUDGET when nothing
     * does, another status on error; err gets the message of either. */
    remat_status (*optimal)(const cli_plan_q *q, remat_plan_row *opt, char *err, size_t n);
    void (*adjust)(const cli_plan_q *q, remat_plan_row *r);   /* each row after it is priced, or NULL */
    const void *ctx;                /* the command's own, for the callbacks */
};
/* The rows of q's policies and the optimal plan for its budget, with each
 * policy's layers when explain; 0, 1 when nothing fits or on error, 2 for a
 * --recompute the planner refuses (reported). */
int cli_plan_budget(const cli_plan_q *q, int json, int explain);
/* The planner's front of activation peak against step time (csv: as CSV;
 * models only).  0, or 1 (reported). */
int cli_plan_pareto(const cli_plan_q *q, int json, int csv);
/* remat plan --framework megatron|pytorch (plan_framework.c) */
int cli_plan_framework(int argc, char **argv);
/* remat plan --table FILE.json (plan_table.c) */
int cli_plan_table(int argc, char **argv);
/* remat train --budget: the optimal plan for one rank of the run (par; c->batch
 * the global batch; one rank stepping the whole batch: for c as `remat plan
 * --budget` gives it, else as `remat plan --ranks --micro-batch --zero`
 * does), printed (to stderr when quiet); *policy (must be NULL: no
 * --recompute) is set to it.  *prof gets the profile it was priced with when
 * that is c's (the cached one, else the FLOP model with its GEMM probe; the
 * caller frees it), else NULL.  1 on success, 0 when nothing fits (reported:
 * the minimum budget and what dominates). */
int cli_plan_for_budget_parallel(const remat_config *c, const remat_parallel *par, uint64_t budget, int act_only,
                                 int quiet, const char **policy, remat_profile **prof);
/* traces and the cost model's cache (calib.c) */
/* --trace-steps A:B (1 <= A <= B), A (one step) or A: (to the end); 0
 * (reported: one usage line) when malformed. */
int cli_trace_steps(const char *cmd, const char *v, uint64_t *first, uint64_t *last);
/* cfg's profile from the cache: *out (NULL when there is none, or when it
 * is corrupt or of another machine: then one warning line).  path gets the
 * cache file's name (may be NULL).  0 when there is no cache (neither
 * REMAT_CACHE nor HOME), message in remat_errmsg(). */
int cli_cached_profile(const remat_config *c, remat_profile **out, char *path, size_t n);
/* Calibrates cfg's profile with trace t, or with the trace file `file` when
 * t is NULL, and writes it back to the cache (its name into path).  The
 * profile: base when not NULL (taken over; c's profile as read from the
 * cache, else made, a moment ago: no second GEMM probe), else the cached
 * one, else the FLOP model with its GEMM probe.  *out gets it.  0 on
 * success, else the exit status (reported: 2 for a trace file that cannot
 * be read or is malformed, cli_input_error). */
int cli_calibrate_cache(const remat_config *c, const remat_trace *t, const char *file, remat_profile *base,
                        remat_profile **out, char *path, size_t n);
/* outputs written at a command's end, prepared before it runs (outputs.c):
 * mkdir -p DIR, named as flag in errors; 0, or 1 (reported) */
int cli_mkdirs(const char *flag, const char *dir);
/* Whether FILE (the value of flag) can be written: its directory exists and
 * is writable, and FILE is not a directory.  0, or 1 (reported). */
int cli_check_output(const char *flag, const char *path);
/* bench and report commands */
int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);
/* checkpoint and weight commands */
int cmd_export(int argc, char **argv);
/* remat train --init-from FILE: the model shape from a weights file into c
 * (layers, dim, vocab, max_seq; heads from the file, else --heads, else
 * dim/64; seq capped at max_seq unless given).  given: the config flags given
 * (-1: not given); a contradicting one is an error.  0 on success, else the
 * exit code (reported). */
int cli_init_shape(const char *path, const remat_config *given, remat_config *c);

#endif
