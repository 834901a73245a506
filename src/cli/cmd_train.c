/*
 * cmd_train.c -- `remat train`: the training loop, its per-step lines, the
 * memory breakdown and the JSON Lines summary (fields documented in README).
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "remat_testing.h"   /* --debug-nan: remat_model_debug_poison */
#include "progress.h"

typedef struct train_opts {
    remat_config cfg;
    remat_optim opt;
    long steps, eval_every, eval_batches, sample, threads;
    uint64_t seed;
    const char *data, *policy;
    int json, quiet, verify, vocab_set;
    uint64_t budget_total, budget_acts; /* --budget, --budget-activations as given */
    const char *save, *resume;          /* checkpoint directories */
    long save_every, nan_step;
    int skip_nonfinite, seed_set, lr_set, wd_set, clip_set;
    char nan_tensor[32];                /* --debug-nan: a parameter's name, or "loss" */
    remat_config given;                 /* config flags given (-1: not given) */
    const char *init_from;              /* --init-from: weights file or directory */
    uint64_t budget;                    /* --budget / --budget-activations (0: none) */
    int budget_act;
    const char *trace;                  /* --trace FILE */
    uint64_t trace_first, trace_last;   /* --trace-steps */
    int trace_steps_set, no_calibrate;
    const char *val_data;               /* --val-data */
    long micro_batch, zero;             /* --micro-batch (0: B/R), --zero (-1: 1 when R > 1) */
    long nan_rank;                      /* --debug-nan's rank */
    long fail_step, fail_n, fail_rank;  /* --debug-alloc-fail S:N:R */
} train_opts;

/* "A:B" or "A:B:C", whole numbers; 0 when malformed */
static int parse_ints(const char *v, long *a, long *b, long *c)
{
    char *end;
    *c = 0;
    *a = strtol(v, &end, 10);
    if (end == v || *end != ':') return 0;
    const char *p = end + 1;
    *b = strtol(p, &end, 10);
    if (end == p) return 0;
    if (!*end) return 1;
    if (*end != ':') return 0;
    p = end + 1;
    *c = strtol(p, &end, 10);
    return end != p && !*end;
}

/* --debug-nan STEP:TENSOR[:RANK], TENSOR a parameter name or "loss". */
static int parse_debug_nan(const char *flag, const char *v, void *field)
{
    train_opts *o = field;
    char *end, name[64] = "";
    long step = strtol(v, &end, 10);
    int ok = end != v && *end == ':' && step >= 1;
    o->nan_rank = 0;
    if (ok) {
        const char *t = end + 1, *colon = strchr(t, ':');
        size_t len = colon ? (size_t)(colon - t) : strlen(t);
        ok = len > 0 && len < sizeof name;
        if (ok) {
            memcpy(name, t, len);
            name[len] = 0;
        }
        if (ok && colon) {
            char *e2;
            o->nan_rank = strtol(colon + 1, &e2, 10);
            ok = e2 != colon + 1 && !*e2 && o->nan_rank >= 0;
        }
    }
    if (ok && !strcmp(name, "loss")) { o->nan_step = step; snprintf(o->nan_tensor, sizeof o->nan_tensor, "loss"); return 1; }
    if (ok) {   /* a parameter of either architecture (the model's own is resolved when poisoning) */
        for (int a = REMAT_ARCH_GPT2; a <= REMAT_ARCH_LLAMA; a++) {
            remat_config c;
            remat_config_default(&c);
            c.arch = (remat_arch)a;
            if (remat_config_param_find(&c, name) >= 0) {
                o->nan_step = step;
                snprintf(o->nan_tensor, sizeof o->nan_tensor, "%s", name);
                return 1;
            }
        }
    }
    cli_usage_error("train", "--debug-nan expects STEP:TENSOR[:RANK] with TENSOR a parameter name (wte, qkvw, ...) "
                    "or loss, got '%s'", v);
    return 0;
}

/* Flags given with --resume must agree with the checkpoint; 0 when one does not. */
static int check_resume_flags(const train_opts *o, const remat_checkpoint_info *ci)
{
    const remat_config *g = &o->given, *c = &ci->cfg;
    struct { const char *flag; int given, have; } ints[] = {
        {"--layers", g->n_layer, c->n_layer}, {"--dim", g->n_embd, c->n_embd}, {"--heads", g->n_head, c->n_head},
        {"--vocab", g->vocab, c->vocab}, {"--seq", g->seq, c->seq}, {"--max-seq", g->max_seq, c->max_seq},
        {"--batch", g->batch, c->batch}, {"--attention (0 naive, 1 flash)", g->attention, c->attention},
        {"--lmhead (chunk rows)", g->lmhead_chunk, c->lmhead_chunk}, {"--dtype (0 fp32, 1 bf16)", (int)g->dtype, (int)c->dtype},
        {"--arch (0 gpt2, 1 llama)", (int)g->arch, (int)c->arch},
        {"--kv-heads", g->n_kv_head, remat_config_kv_heads(c)}, {"--ffn-dim", g->ffn_dim, remat_config_ffn_dim(c)},
        {"--head-dim", g->head_dim, remat_config_head_dim(c)},
        {"--tie-embeddings", g->tie_embeddings, g->tie_embeddings == -1 ? -1 : remat_config_tied(c)},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (ints[k].given != -1 && ints[k].given != ints[k].have) {
            cli_error("%s %d contradicts the checkpoint %s (%d); the config comes from the checkpoint, drop the flag",
                      ints[k].flag, ints[k].given, ci->file, ints[k].have);
            return 0;
        }
    struct { const char *flag; int set; double given, have; } fl[] = {
        {"--dropout", g->dropout >= 0, g->dropout, c->dropout}, {"--lr", o->lr_set, o->opt.lr, ci->opt.lr},
        {"--wd", o->wd_set, o->opt.weight_decay, ci->opt.weight_decay},
        {"--clip", o->clip_set, o->opt.grad_clip, ci->opt.grad_clip},
    };
    for (size_t k = 0; k < sizeof fl / sizeof fl[0]; k++)
        if (fl[k].set && (float)fl[k].given != (float)fl[k].have) {
            cli_error("%s %g contradicts the checkpoint %s (%g); it comes from the checkpoint, drop the flag",
                      fl[k].flag, fl[k].given, ci->file, fl[k].have);
            return 0;
        }
    /* the architecture's doubles, compared as the config resolves them */
    struct { const char *flag; double given, have; } dl[] = {
        {"--rope-theta", g->rope_theta, remat_config_rope_theta(c)}, {"--norm-eps", g->norm_eps, remat_config_norm_eps(c)},
    };
    for (size_t k = 0; k < sizeof dl / sizeof dl[0]; k++)
        if (dl[k].given == dl[k].given && dl[k].given != dl[k].have) {   /* not given: NaN */
            cli_error("%s %g contradicts the checkpoint %s (%g); it comes from the checkpoint, drop the flag",
                      dl[k].flag, dl[k].given, ci->file, dl[k].have);
            return 0;
        }
    if (g->rope_scaling.type != (remat_rope_type)-1 && memcmp(&g->rope_scaling, &c->rope_scaling, sizeof c->rope_scaling)) {
        cli_error("--rope-scaling contradicts the checkpoint %s; it comes from the checkpoint, drop the flag", ci->file);
        return 0;
    }
    if (o->seed_set && o->seed != ci->seed) {
        cli_error("--seed %llu contradicts the checkpoint %s (seed %llu); drop the flag",
                  (unsigned long long)o->seed, ci->file, (unsigned long long)ci->seed);
        return 0;
    }
    if ((uint64_t)o->steps < ci->step) {
        cli_error("the checkpoint %s is at step %llu, past --steps %ld", ci->file, (unsigned long long)ci->step, o->steps);
        return 0;
    }
    return 1;
}

/* The data-parallel job this process is a rank of (one rank without mpirun). */
static remat_comm *g_comm;
static int g_rank, g_ranks;
/* How a data-parallel job reports a failure:
 *   - in the set-up (flags, data, model, resume), which makes no exchange, a
 *     rank that fails keeps its line (cli_defer_errors) and goes straight to
 *     the end of the set-up, where the ranks agree on who failed
 *     (setup_agree): the lowest failing rank prints its line -- tagged with
 *     its rank unless every rank failed alike, as with a bad flag -- and
 *     every rank exits with a failure;
 *   - in the steps, a failure every rank meets alike (a non-finite loss or
 *     gradient, rank 0 failing to write a checkpoint) is reported by rank 0
 *     and every rank exits as usual (g_collective);
 *   - any other failure in the steps is the rank's own: it reports it, tagged,
 *     and ends the job (remat_comm_abort), so that no rank waits forever in
 *     an exchange with it. */
static int g_collective;

/* The end of a data-parallel set-up (see above); 1 when every rank got
 * through it.  The job ends on a failed exchange. */
static int setup_agree(int failed)
{
    int first, count;
    cli_defer_errors(0);
    if (g_ranks == 1) return !failed;
    g_collective = 1;
    if (remat_comm_first_failure(g_comm, failed, &first, &count)) {
        cli_error("%s", remat_errmsg());
        remat_comm_abort(g_comm, 1);
        return 0;
    }
    if (first == g_rank) {
        const char *tag = cli_error_tag;
        if (count == g_ranks) cli_error_tag = "";   /* every rank alike: the flags' or the files' fault */
        cli_error("%s", cli_deferred_error()[0] ? cli_deferred_error() : "set-up failed");
        cli_error_tag = tag;
    }
    return first < 0;
}

/* cores this rank may use: those it may run on, at most its share of the
 * machine's (mpirun binds ranks to cores, or not, depending on its flags) */
static int default_threads(void)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    int share = (int)(online / remat_comm_local_size(g_comm));
    if (share < 1) share = 1;
    return mine < share ? mine : share;
}

/* Refuses, before anything is allocated, a run whose predicted step peak
 * (activations + parameters + gradients + AdamW state + workspace, and with
 * data parallelism the reduction's buffers, for every rank on this machine)
 * exceeds the memory available to this process, naming the `remat plan
 * --budget` command that would fit.  1: go on (also when the figure is
 * unknown). */
static int fits_memory(const remat_config *c, const remat_parallel *par, const char *policy)
{
    uint64_t avail, minp;
    const char *src;
    remat_plan_row row;
    remat_parallel_memory pm;
    remat_config mc = *c;
    mc.batch = par->micro_batch;
    uint64_t local = (uint64_t)remat_comm_local_size(g_comm);
    if (!cli_available_memory(&avail, &src)) return 1;
    if (remat_parallel_memory_of(c, par, 0, &pm)) return 1;   /* reported where the layout is set up */
    if (remat_plan_evaluate(&mc, NULL, policy, 0, 0, &row)) return 1;   /* a bad policy is reported where it is installed */
    uint64_t need = (row.peak_bytes + pm.static_bytes) * local;
    remat_plan_row_clear(&row);
    if (need <= avail || remat_plan_min_peak(&mc, &minp)) return 1;
    char b1[32], b2[32], b3[32], cmd[640], who[96] = "";
    int dp = par->ranks > 1 || par->micro_batch != c->batch;
    int k = snprintf(cmd, sizeof cmd, "remat plan --budget %lluMiB --layers %d --dim %d --heads %d --vocab %d --seq %d "
                     "--max-seq %d --batch %d", (unsigned long long)(avail / local >> 20), c->n_layer, c->n_embd,
                     c->n_head, c->vocab, c->seq, c->max_seq, c->batch);
    if (dp) k += snprintf(cmd + k, sizeof cmd - (size_t)k, " --ranks %d --micro-batch %d --zero %d", par->ranks,
                          par->micro_batch, par->zero);
    if (c->dropout > 0) k += snprintf(cmd + k, sizeof cmd - (size_t)k, " --dropout %g", (double)c->dropout);
    if (c->attention == REMAT_ATTENTION_FLASH) k += snprintf(cmd + k, sizeof cmd - (size_t)k, " --attention flash");
    if (c->lmhead_chunk > 0) k += snprintf(cmd + k, sizeof cmd - (size_t)k, " --lmhead chunked:%d", c->lmhead_chunk);
    if (c->dtype != REMAT_DTYPE_FP32) snprintf(cmd + k, sizeof cmd - (size_t)k, " --dtype %s", cli_dtype_name(c->dtype));
    if (local > 1) snprintf(who, sizeof who, " (for the %llu ranks on this machine)", (unsigned long long)local);
    if ((pm.static_bytes + minp) * local <= avail)
        cli_error("the step would need %s at its peak%s (predicted for policy %s), more than the %s available (%s); "
                  "'%s' finds the fastest plan that fits (or give --budget auto)", cli_fmt_bytes(need, b1, sizeof b1),
                  who, policy ? policy : "none", cli_fmt_bytes(avail, b2, sizeof b2), src, cmd);
    else
        cli_error("the step would need %s at its peak%s (predicted for policy %s), more than the %s available (%s), "
                  "and no plan fits: the smallest is %s; reduce --seq or --%sbatch%s", cli_fmt_bytes(need, b1, sizeof b1),
                  who, policy ? policy : "none", cli_fmt_bytes(avail, b2, sizeof b2), src,
                  cli_fmt_bytes((pm.static_bytes + minp) * local, b3, sizeof b3), dp ? "micro-" : "",
                  c->attention == REMAT_ATTENTION_NAIVE ? ", or use --attention flash --lmhead chunked" : "");
    return 0;
}

/* Writes a checkpoint of the state after `step` steps (every rank takes
 * part); 0 (reported) on failure. */
static int save_ckpt(const train_opts *o, remat_model *m, remat_data *d, long step, long *last_saved)
{
    remat_status st = remat_checkpoint_save(m, d, o->data, (uint64_t)step, o->save);
    if (st) {
        /* rank 0 wrote (or failed to): its message is the one; an exchange
         * that failed is this rank's own */
        g_collective = st != REMAT_ERR_COMM;
        if (g_collective) cli_error_tag = "";
        if (!g_collective || g_rank == 0) cli_error("step %ld: checkpoint not saved: %s", step, remat_errmsg());
        return 0;
    }
    *last_saved = step;
    return 1;
}

/* --debug-alloc-fail STEP:N[:RANK] */
static int parse_alloc_fail(const char *flag, const char *v, void *field)
{
    train_opts *o = field;
    if (!parse_ints(v, &o->fail_step, &o->fail_n, &o->fail_rank) || o->fail_step < 1 || o->fail_n < 1 || o->fail_rank < 0) {
        cli_usage_error("train", "%s expects STEP:N[:RANK] (whole numbers, STEP and N >= 1), got '%s'", flag, v);
        return 0;
    }
    return 1;
}

static int parse_trace_steps(const char *flag, const char *v, void *field)
{
    train_opts *o = field;
    return cli_trace_steps("train", v, &o->trace_first, &o->trace_last);
}

static const cli_choice nonfinite_choices[] = { {"stop", 0, 0}, {"skip", 1, 0}, {NULL, 0, 0} };

#define O(field) offsetof(train_opts, field)
static const cli_flag init_flags[] = {
    {"--init-from", "PATH", CLI_FLAG_STRING, O(init_from), 0, 0, NULL, NULL,
     "start from weights: an llm.c file (.bin), a safetensors file, or a\n"
     "Hugging Face model directory (config.json + model.safetensors or its\n"
     "index and shards; gpt2 or llama). The weights set the architecture and\n"
     "every size they hold (a directory: all of config.json's); a flag that\n"
     "contradicts them is refused"},
};
static const cli_flag training_flags[] = {
    {"--steps", "N", CLI_FLAG_LONG, O(steps), 0, 100000000, NULL, NULL, "optimizer steps (default 200; 0: none, the weights evaluated\n"
     "on the validation split as they are)"},
    {"--lr", "X", CLI_FLAG_FLOAT, O(opt.lr), 0, 10, NULL, NULL, "AdamW learning rate (default 1e-3)"},
    {"--wd", "X", CLI_FLAG_FLOAT, O(opt.weight_decay), 0, 0.999, NULL, NULL,
     "decoupled weight decay on 2-D weights (default 0.1)"},
    {"--clip", "X", CLI_FLAG_FLOAT, O(opt.grad_clip), 0, 1e9, NULL, NULL,
     "global gradient-norm clip, 0 disables (default 1.0)"},
    CLI_FLAG_SEED(train_opts, seed),
    CLI_FLAG_THREADS(train_opts, threads),
    {"--data", "PATH", CLI_FLAG_STRING, O(data), 0, 0, NULL, NULL,
     "text file (bytes), llm.c .bin shard, or a quoted glob of shards read in\n"
     "sorted order as one stream, e.g. 'fineweb_train_*.bin' (default: the\n"
     "embedded task); without --val-data its last 10% is the validation split"},
    {"--val-data", "PATH", CLI_FLAG_STRING, O(val_data), 0, 0, NULL, NULL,
     "a separate validation set (a file or a glob, as --data); the training\n"
     "data is then not split"},
    {"--eval-every", "N", CLI_FLAG_LONG, O(eval_every), 0, 100000000, NULL, NULL,
     "validation loss every N steps, 0 only at the end (default 50)"},
    {"--eval-batches", "N", CLI_FLAG_LONG, O(eval_batches), 1, 100000, NULL, NULL, "batches per validation (default 4)"},
    {"--sample", "N", CLI_FLAG_LONG, O(sample), 0, 1 << 20, NULL, NULL,
     "sample N tokens at the end for byte-level data (default 48)"},
};
static const cli_flag dp_flags[] = {
    {"--micro-batch", "b", CLI_FLAG_LONG, O(micro_batch), 1, REMAT_MAX_BATCH, NULL, NULL,
     "sequences per forward/backward on one rank (default B/R); each rank\n"
     "accumulates B/(b R) micro-batches; results are bitwise identical for\n"
     "any R that divides B/b (same --threads per rank)"},
    {"--zero", "Z", CLI_FLAG_LONG, O(zero), 0, 1, NULL, NULL,
     "1: shard the AdamW state over the ranks (ZeRO-1, the default for R > 1);\n"
     "0: every rank keeps all of it (the same bits either way)"},
};
static const cli_flag recompute_flags[] = {
    {"--recompute", "POLICY", CLI_FLAG_STRING, O(policy), 0, 0, NULL, NULL,
     "none, full, every:K, sqrt, first:N, selective, pointwise,\n"
     "save:A+B, revolve:S, or combinations such as every:2,selective"},
    {"--verify-recompute", NULL, CLI_FLAG_SWITCH, O(verify), 0, 0, NULL, NULL,
     "check every recomputed tensor bit for bit against its first computation"},
    CLI_FLAG_BUDGETS(train_opts, budget_total, budget_acts),
};
static const cli_flag ckpt_flags[] = {
    {"--save", "DIR", CLI_FLAG_STRING, O(save), 0, 0, NULL, NULL,
     "write checkpoints to DIR (created if missing; keeps the last 2 good ones)"},
    {"--save-every", "N", CLI_FLAG_LONG, O(save_every), 0, 100000000, NULL, NULL,
     "checkpoint every N steps (default 0: only at the end)"},
    {"--resume", "DIR", CLI_FLAG_STRING, O(resume), 0, 0, NULL, NULL,
     "continue the run in DIR from its newest valid checkpoint up to --steps;\n"
     "config, seed, optimizer and data come from the checkpoint (flags that\n"
     "contradict it are an error); saving continues in DIR unless --save"},
    {"--on-nonfinite", "M", CLI_FLAG_CHOICE, O(skip_nonfinite), 0, 0, nonfinite_choices, NULL,
     "stop (default) or skip: on a NaN/Inf loss or gradient, stop with the\n"
     "last good state checkpointed, or skip that step's update and go on"},
    {"--debug-nan", "S:T[:R]", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_debug_nan,
     "testing: make parameter T's gradient (e.g. qkvw) or the loss (T=loss)\n"
     "NaN at step S (on rank R, default 0)"},
    {"--debug-alloc-fail", "S:N[:R]", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_alloc_fail,
     "testing: the N-th allocation of step S fails (on rank R)"},
};
static const cli_flag time_flags[] = {
    {"--trace", "FILE", CLI_FLAG_STRING, O(trace), 0, 0, NULL, NULL,
     "write the steps as a Chrome trace (JSON for Perfetto or chrome://tracing):\n"
     "every instruction's time, kind, layer, tensor and FLOPs, and the live\n"
     "activation and step bytes as counter tracks"},
    {"--trace-steps", "A:B", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_trace_steps,
     "only steps A to B (also A, or A: to the end; default all)"},
    {"--no-calibrate", NULL, CLI_FLAG_SWITCH, O(no_calibrate), 0, 0, NULL, NULL,
     "do not store the run's instruction times in the cost model's cache\n"
     "(by default steps 2-17 are timed, and 'remat plan' and --budget then\n"
     "price what this run executed at what it took)"},
};
static const cli_flag output_flags[] = {
    CLI_FLAG_JSON(train_opts, json, "JSON Lines on stdout: one object per step, then a summary object"),
    {"--quiet", NULL, CLI_FLAG_SWITCH, O(quiet), 0, 0, NULL, NULL, "only the summary"},
};
#undef O

/* 1 to run, 0 after --help, -1 on a bad flag (reported) */
static int parse(int argc, char **argv, train_opts *o)
{
    cli_config_start(&o->cfg);
    remat_optim_default(&o->opt);
    o->opt.lr = 1e-3f;
    o->steps = 200; o->eval_every = 50; o->eval_batches = 4; o->sample = 48; o->threads = 0;
    o->seed = 1;
    o->zero = -1;
    cli_flag_group groups[] = {
        cli_config_group(&o->cfg), { NULL, CLI_FLAGS(init_flags), o }, { "training:", CLI_FLAGS(training_flags), o },
        { "data parallelism (mpirun -np R remat train ...; R a power of two; --batch B is the global\n"
          "batch: sequences per optimizer step over all ranks):", CLI_FLAGS(dp_flags), o },
        { "recomputation (--budget: run the fastest plan that fits, see 'remat plan'; without a budget\n"
          "a run whose predicted peak exceeds the available memory is refused before it allocates):",
          CLI_FLAGS(recompute_flags), o },
        { "checkpoints and numerical faults:", CLI_FLAGS(ckpt_flags), o }, { "time:", CLI_FLAGS(time_flags), o },
        { "output:", CLI_FLAGS(output_flags), o },
    };
    cli_command cmd = {
        "train",
        "usage: remat train [flags]\n\n"
        "Trains a GPT-2 or Llama model (--arch) under a memory budget.  With no flags\n"
        "it trains a small GPT-2 on the embedded arithmetic task (no files needed).\n\n",
        NULL, groups, (int)(sizeof groups / sizeof groups[0]), NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r;
    /* the config flags given, for --resume and --init-from to check (-1: not given) */
    memset(&o->given, 0xff, sizeof o->given);
    if (!cli_reapply(&cmd, 0, &o->given, argc, argv)) return -1;
    o->vocab_set = cli_given(&cmd, "--vocab");
    o->seed_set = cli_given(&cmd, "--seed");
    o->lr_set = cli_given(&cmd, "--lr");
    o->wd_set = cli_given(&cmd, "--wd");
    o->clip_set = cli_given(&cmd, "--clip");
    o->trace_steps_set = cli_given(&cmd, "--trace-steps");
    if (!cli_budget_pick("train", o->budget_total, o->budget_acts, &o->budget, &o->budget_act)) return -1;
    if (o->budget && o->policy) {
        cli_usage_error("train", "--budget chooses the policy; drop --recompute (or the budget)");
        return -1;
    }
    if (o->trace_steps_set && !o->trace) { cli_usage_error("train", "--trace-steps needs --trace FILE"); return -1; }
    if (!o->trace_steps_set) { o->trace_first = 1; o->trace_last = UINT64_MAX; }
    return 1;
}

static void print_escaped(FILE *f, const int *tok, int n)
{
    for (int i = 0; i < n; i++) {
        int c = tok[i];
        if (c == '\n') fputs("\\n", f);
        else if (c >= 32 && c < 127 && c != '\\') fputc(c, f);
        else fprintf(f, "\\x%02x", c & 0xff);
    }
}

/* The mean validation loss of nb batches.  On failure why gets the message
 * of the layer that failed: the data's (remat_errmsg) or the model's. */
static remat_status eval_val(remat_model *m, remat_data *d, const remat_config *c, long nb, int *in, int *tg,
                             double *out, char *why, size_t nwhy)
{
    remat_status st;
    double sum = 0;
    if ((st = remat_data_seek(d, REMAT_SPLIT_VAL, 0))) goto data_error;
    for (long k = 0; k < nb; k++) {
        float l;
        if ((st = remat_data_next(d, REMAT_SPLIT_VAL, c->batch, c->seq, in, tg))) goto data_error;
        if ((st = remat_model_eval(m, in, tg, &l, NULL))) {
            snprintf(why, nwhy, "%s", remat_model_error(m));
            return st;
        }
        sum += l;
    }
    *out = sum / (double)nb;
    return REMAT_OK;
data_error:
    snprintf(why, nwhy, "%s", remat_errmsg());
    return st;
}

/* whether t holds a step that completed (calibration reads only those) */
static int completed_steps(const remat_trace *t)
{
    remat_trace_step st;
    for (size_t k = 0; k < remat_trace_steps(t); k++)
        if (!remat_trace_step_get(t, k, &st) && st.ok) return 1;
    return 0;
}

/* --trace FILE: the steps of --trace-steps; 0 on success, else 1 (reported) */
static int write_trace(const train_opts *o, const remat_trace *t)
{
    remat_trace_step st;
    int any = 0;
    for (size_t k = 0; k < remat_trace_steps(t); k++)
        if (!remat_trace_step_get(t, k, &st) && st.step >= o->trace_first && st.step <= o->trace_last) any = 1;
    if (!any) return cli_error("--trace %s: no step in --trace-steps was run", o->trace);
    if (remat_trace_save(t, o->trace_first, o->trace_last, o->trace)) return cli_error("%s", remat_errmsg());
    return 0;
}

/* The times of the steps that completed, in order (a step skipped for a
 * non-finite value has none: its medians are of the others). */
typedef struct step_times {
    double *ms, *comm_ms, *reduce_ms;
    size_t n;
} step_times;

/* A run, from its set-up to its summary. */
typedef struct train_run {
    train_opts o;
    remat_config *c;                    /* &o.cfg */
    int lead;                           /* rank 0: prints, writes checkpoints and the trace */
    remat_checkpoint_info *ci;          /* --resume: the checkpoint */
    remat_data *data;
    remat_model *m;
    long start, last_saved, n_skipped;  /* steps before this run's first; the last saved; skipped ones */
    remat_profile *plan_prof;           /* --budget's, calibrated after the run */
    remat_profile *calib;               /* the cost model's cache entry this run wrote */
    char calib_path[4096];
    remat_trace *trace;                 /* --trace and calibration */
    int calibrate, trace_done;
    uint64_t cal_first, cal_last;       /* the steps timed for calibration */
    remat_jsonw *jw;                    /* --json: the JSON Lines on stdout */
    int dp;                             /* several ranks or micro-batches per step */
    size_t N;                           /* tokens per step: B x T */
    int *in, *tg;
    step_times dt;
    remat_sim sim;                      /* the schedule's prediction */
    const char *policy;                 /* canonical */
    float loss_first, loss_last;
    double val;
} train_run;

/* --resume: model, data and config from the checkpoint; 0, or the exit
 * status (reported). */
static int setup_resume(train_run *t)
{
    train_opts *o = &t->o;
    if (!(t->ci = malloc(sizeof *t->ci))) return cli_error("out of memory");
    remat_status st = remat_checkpoint_load_parallel(o->resume, o->data, o->val_data, g_comm, (int)o->micro_batch,
                                                     (int)o->zero, &t->m, &t->data, t->ci);
    if (st) return cli_input_error(st, "cannot resume from '%s': %s", o->resume, remat_errmsg());
    const remat_checkpoint_info *ci = t->ci;
    if (ci->warning[0] && t->lead) fprintf(stderr, "remat: warning: %s\n", ci->warning);
    if (!check_resume_flags(o, ci)) return 2;
    *t->c = ci->cfg;
    o->opt = ci->opt;
    o->seed = ci->seed;
    if (!o->data && ci->data[0]) o->data = ci->data;
    if (!o->val_data && ci->val_data[0]) o->val_data = ci->val_data;
    if (!o->save) o->save = o->resume;
    t->start = t->last_saved = (long)ci->step;
    if (o->budget) {
        remat_stats s0;
        remat_model_stats(t->m, &s0);
        remat_parallel par = { s0.ranks, s0.micro_batch, s0.zero };
        if (!cli_plan_for_budget_parallel(t->c, &par, o->budget, o->budget_act, o->json || o->quiet, &o->policy,
                                          &t->plan_prof))
            return 1;
    }
    if (o->policy && remat_model_set_policy(t->m, o->policy)) return cli_error("%s", remat_model_error(t->m)) + 1;
    return 0;
}

/* A new run: the config (from the flags, or the shape of --init-from's
 * file), the data, the model; 0, or the exit status (reported). */
static int setup_new(train_run *t)
{
    train_opts *o = &t->o;
    remat_config *c = t->c;
    int rc;
    if (o->init_from) {
        if ((rc = cli_init_shape(o->init_from, &o->given, c))) return rc;
        o->vocab_set = 1;   /* cli_init_shape set vocab and max_seq */
    }
    if (!o->vocab_set) c->vocab = remat_data_default_vocab(o->data);
    cli_config_default_max_seq(c);
    remat_parallel par = { g_ranks, (int)(o->micro_batch ? o->micro_batch : c->batch / g_ranks), (int)o->zero };
    if (par.micro_batch < 1) par.micro_batch = 1;
    if (par.zero < 0) par.zero = g_ranks > 1;
    if (cli_config_check(c)) return 2;
    if (remat_parallel_check(c, &par)) return cli_error("%s", remat_errmsg()) + 1;
    if (o->budget && !cli_plan_for_budget_parallel(c, &par, o->budget, o->budget_act, o->json || o->quiet, &o->policy,
                                                   &t->plan_prof))
        return 1;
    if (!fits_memory(c, &par, o->policy)) return 1;
    remat_status st = remat_data_open_val(o->data, o->val_data, c->vocab, &t->data);
    if (st == REMAT_ERR_FORMAT && o->init_from && strstr(remat_errmsg(), "not below the model vocabulary")) {
        /* the library's advice (--vocab N) is no choice here: the vocabulary is the weights' */
        const char *m = remat_errmsg(), *cut = strstr(m, "; ");
        return cli_input_error(st, "%.*s: the weights of '%s' have a vocabulary of %d, which cannot hold this data "
                               "(the vocabulary comes from the weights): use data tokenized for them",
                               cut ? (int)(cut - m) : (int)strlen(m), m, o->init_from, c->vocab);
    }
    if (st) return cli_input_error(st, "%s", remat_errmsg());
    if ((st = o->init_from ? remat_weights_load(o->init_from, c, o->seed, &t->m) : remat_model_create(c, o->seed, &t->m)))
        return cli_input_error(st, "%s", remat_errmsg());
    if (remat_model_set_parallel(t->m, g_comm, par.micro_batch, par.zero)) return cli_error("%s", remat_model_error(t->m));
    if (remat_model_set_optim(t->m, &o->opt)) return cli_error("%s", remat_model_error(t->m)) + 1;
    if (remat_model_set_policy(t->m, o->policy)) return cli_error("%s", remat_model_error(t->m)) + 1;
    return 0;
}

/* Everything a rank does before the ranks agree: flags that go together,
 * the model (resumed or new), the checkpoint directory, the trace's steps.
 * No exchange happens here (see g_collective).  0, or the exit status. */
static int setup(train_run *t)
{
    train_opts *o = &t->o;
    int rc;
    remat_set_threads(o->threads ? (int)o->threads : g_ranks > 1 ? default_threads() : 0);
    if (o->resume && o->init_from)
        return cli_usage_error("train", "--init-from starts a new run; --resume continues one: give one");
    if (o->val_data && !o->data && !o->resume)
        return cli_usage_error("train", "--val-data needs --data: the embedded task has its own validation split");
    if (o->trace && t->lead && cli_check_output("--trace", o->trace)) return 1;   /* written after the steps */
    if ((rc = o->resume ? setup_resume(t) : setup_new(t))) return rc;
    remat_model_set_verify(t->m, o->verify);
    if (o->save_every > 0 && !o->save) return cli_usage_error("train", "--save-every needs --save DIR (or --resume DIR)");
    if (o->save && t->lead) {   /* rank 0 writes the checkpoints */
        int count;
        uint64_t newest;
        if (remat_checkpoint_prepare(o->save, &count, &newest)) return cli_error("%s", remat_errmsg());
        if (o->resume && !strcmp(o->save, o->resume) && remat_checkpoint_tidy(o->save, t->ci))
            return cli_error("%s", remat_errmsg());
        if (!o->resume && count > 0)
            return cli_error("'%s' already holds checkpoints (newest: step %llu); continue them with --resume %s, or "
                             "save to an empty directory", o->save, (unsigned long long)newest, o->save) + 1;
    }
    if (o->trace && (o->trace_first > (uint64_t)o->steps || o->trace_last <= (uint64_t)t->start))
        return cli_usage_error("train", "--trace-steps %llu:%llu: this run has steps %ld to %ld",
                               (unsigned long long)o->trace_first, (unsigned long long)o->trace_last, t->start + 1,
                               o->steps);
    return 0;
}

/* After the set-up: every rank must read the same data (the model is
 * compared by the first step).  1 when they do. */
static int same_data(train_run *t)
{
    int same;
    if (g_ranks == 1) return 1;
    if (remat_comm_same(g_comm, remat_data_hash(t->data), &same)) { cli_error("%s", remat_errmsg()); return 0; }
    if (!same) {
        g_collective = 1;
        cli_error_tag = "";
        if (t->lead) cli_error("the ranks read different data (other files or contents): every rank must read the same");
    }
    return same;
}

/* The buffers of the steps, the schedule's prediction, the header lines,
 * the trace (--trace, calibration).  0, or 1 (reported). */
static int prepare_steps(train_run *t)
{
    const train_opts *o = &t->o;
    const remat_config *c = t->c;
    remat_stats st0;
    remat_model_stats(t->m, &st0);
    t->dp = st0.ranks > 1 || st0.grad_accum > 1;
    if (o->json && !(t->jw = cli_json_open(stdout, 0))) return 1;
    t->N = (size_t)c->batch * c->seq;
    t->in = malloc(t->N * sizeof *t->in);
    t->tg = malloc(t->N * sizeof *t->tg);
    size_t nsteps = (size_t)(o->steps > 0 ? o->steps : 1);
    t->dt.ms = malloc(sizeof(double) * nsteps);
    t->dt.comm_ms = malloc(sizeof(double) * nsteps);
    t->dt.reduce_ms = malloc(sizeof(double) * nsteps);
    if (!t->in || !t->tg || !t->dt.ms || !t->dt.comm_ms || !t->dt.reduce_ms) return cli_error("out of memory");
    if (remat_schedule_simulate(remat_model_schedule(t->m), &t->sim))
        return cli_error("cannot simulate the schedule: %s", remat_errmsg());
    t->policy = remat_schedule_policy(remat_model_schedule(t->m));
    if (!o->json && !o->quiet) {
        char b1[32], b2[32], b3[32];
        if (t->ci) printf("resumed from %s at step %ld\n", t->ci->file, t->start);
        cli_config_print(stdout, c);
        /* a CPU below AVX-512 runs bf16 products on fp32 copies: say so, it
         * is slower than fp32 there (docs/performance.md, the AVX2 machine) */
        int emu = c->dtype == REMAT_DTYPE_BF16 && !remat_gemm_bf16_native();
        printf("data: %s (%zu train / %zu val tokens%s%s) | policy: %s | threads: %d | gemm: %s%s%s%s\n",
               o->data ? o->data : "embedded arithmetic task", remat_data_tokens(t->data, REMAT_SPLIT_TRAIN),
               remat_data_tokens(t->data, REMAT_SPLIT_VAL), o->val_data ? ", val from " : "",
               o->val_data ? o->val_data : "", t->policy, remat_get_threads(), remat_gemm_name(remat_gemm_get()),
               emu ? " (oneDNN " : "", emu ? remat_gemm_isa() : "",
               emu ? " has no bf16 matmul: bf16 products run on fp32 copies, slower than --dtype fp32 here; "
                     "bf16 saves activation memory only)" : "");
        if (t->dp)
            printf("data parallel: %d rank%s x %d thread%s, micro-batch %d, %d micro-batch%s per rank per step, "
                   "ZeRO-%d\n", st0.ranks, st0.ranks > 1 ? "s" : "", remat_get_threads(),
                   remat_get_threads() > 1 ? "s" : "", st0.micro_batch, st0.grad_accum, st0.grad_accum > 1 ? "es" : "",
                   st0.zero);
        printf("predicted activations%s: stored %s, working set %s, peak %s; recompute %.1f%% of step FLOPs\n",
               t->dp ? " (one micro-batch)" : "", cli_fmt_bytes(t->sim.stored_bytes, b1, sizeof b1),
               cli_fmt_bytes(t->sim.workset_bytes, b2, sizeof b2), cli_fmt_bytes(t->sim.peak_bytes, b3, sizeof b3),
               t->sim.flops > 0 ? 100.0 * t->sim.recompute_flops / t->sim.flops : 0.0);
    }
    /* the steps timed: --trace's, and for the cost model steps 2 to 17 of this
     * process (the first pays for first touches; a run of one step gives it).
     * A data-parallel step is several schedule runs and exchanges, which the
     * cost model does not describe: no calibration then. */
    t->calibrate = !o->no_calibrate && o->steps > t->start && !t->dp;
    t->cal_first = o->steps - t->start > 1 ? (uint64_t)t->start + 2 : (uint64_t)t->start + 1;
    t->cal_last = t->cal_first + 15;
    if ((o->trace || t->calibrate) && remat_trace_create(&t->trace)) return cli_error("%s", remat_errmsg());
    return 0;
}

static void step_json(train_run *t, long s, float loss, double ms, double tps, const remat_stats *stt, int do_eval)
{
    remat_jsonw *w = t->jw;
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "type", "step");
    remat_jsonw_int(w, "step", s + 1);
    remat_jsonw_float(w, "loss", loss);
    remat_jsonw_num(w, "ms", ms);
    remat_jsonw_num(w, "tokens_per_s", tps);
    remat_jsonw_uint(w, "act_peak_bytes", stt->act_peak_bytes);
    if (t->dp) {
        remat_jsonw_num(w, "comm_ms", stt->comm_ms);
        remat_jsonw_num(w, "reduce_ms", stt->reduce_ms);
    }
    if (do_eval) remat_jsonw_num(w, "val_loss", t->val);
    remat_jsonw_end(w);
}

/* A step whose loss or gradient is not finite (the parameters untouched):
 * with --on-nonfinite skip the run goes on (1); else the last good state
 * is checkpointed (the data rewound to before this batch, pos0) and the
 * run stops (0, reported by rank 0: every rank meets it alike). */
static int nonfinite(train_run *t, long s, uint64_t pos0)
{
    const train_opts *o = &t->o;
    if (o->skip_nonfinite) {
        if (t->lead) fprintf(stderr, "remat: warning: step %ld: %s; step skipped, parameters not updated\n", s + 1,
                             remat_model_error(t->m));
        t->n_skipped++;
        if (t->jw) {
            remat_jsonw_object(t->jw, NULL);
            remat_jsonw_str(t->jw, "type", "step");
            remat_jsonw_int(t->jw, "step", s + 1);
            remat_jsonw_bool(t->jw, "skipped", 1);
            remat_jsonw_end(t->jw);
        }
        return 1;
    }
    char kept[200] = "";
    g_collective = 1;
    if (o->save && t->last_saved != s && !remat_data_seek(t->data, REMAT_SPLIT_TRAIN, pos0) &&
        !remat_checkpoint_save(t->m, t->data, o->data, (uint64_t)s, o->save))
        t->last_saved = s;
    if (o->save && t->last_saved >= 0)
        snprintf(kept, sizeof kept, "; the last good state (step %ld) is checkpointed in %.120s", t->last_saved, o->save);
    cli_error_tag = "";
    if (t->lead) cli_error("step %ld: %s; stopped (--on-nonfinite stop)%s", s + 1, remat_model_error(t->m), kept);
    return 0;
}

/* Step s (0-based): the batch, the step (timed, traced when asked), its
 * line, the validation and the checkpoint due after it.  1 to go on, 0
 * when the run stops (reported). */
static int run_step(train_run *t, long s)
{
    const train_opts *o = &t->o;
    const remat_config *c = t->c;
    float loss;
    char why[512];
    uint64_t pos0 = remat_data_position(t->data, REMAT_SPLIT_TRAIN);
    if (remat_data_next(t->data, REMAT_SPLIT_TRAIN, c->batch, c->seq, t->in, t->tg)) { cli_error("%s", remat_errmsg()); return 0; }
    if (o->nan_step == s + 1 && o->nan_rank == g_rank)
        remat_model_debug_poison(t->m, !strcmp(o->nan_tensor, "loss") ? REMAT_POISON_LOSS
                                       : remat_config_param_find(remat_model_config(t->m), o->nan_tensor));
    if (o->fail_step == s + 1 && o->fail_rank == g_rank) remat_debug_fail_alloc((uint64_t)o->fail_n);
    uint64_t sn = (uint64_t)s + 1;
    int timed = (o->trace && sn >= o->trace_first && sn <= o->trace_last) ||
                (t->calibrate && sn >= t->cal_first && sn <= t->cal_last);
    remat_model_set_trace(t->m, timed ? t->trace : NULL, sn);
    double t0 = cli_now_ms();
    remat_status st = remat_model_step(t->m, t->in, t->tg, 1, &loss);
    double ms = cli_now_ms() - t0;
    if (o->fail_step == s + 1 && o->fail_rank == g_rank) remat_debug_fail_alloc(0);
    if (st == REMAT_ERR_NONFINITE && !nonfinite(t, s, pos0)) return 0;
    if (st && st != REMAT_ERR_NONFINITE) { cli_error("step %ld: %s", s + 1, remat_model_error(t->m)); return 0; }
    if (!st) {
        if (!t->dt.n) t->loss_first = loss;   /* of the first step that completed */
        t->loss_last = loss;
        remat_stats stt;
        remat_model_stats(t->m, &stt);
        t->dt.ms[t->dt.n] = ms;
        t->dt.comm_ms[t->dt.n] = stt.comm_ms;
        t->dt.reduce_ms[t->dt.n++] = stt.reduce_ms;
        int do_eval = (o->eval_every > 0 && (s + 1) % o->eval_every == 0) || s + 1 == o->steps;
        if (do_eval && eval_val(t->m, t->data, c, o->eval_batches, t->in, t->tg, &t->val, why, sizeof why)) {
            cli_error("validation: %s", why);
            return 0;
        }
        double tps = (double)t->N / (ms / 1000.0);
        if (t->jw) step_json(t, s, loss, ms, tps, &stt, do_eval);
        else if (!o->quiet) {
            printf("step %5ld/%ld | loss %.4f | %8.1f ms | %8.0f tok/s | act peak %.2f MiB", s + 1, o->steps,
                   (double)loss, ms, tps, stt.act_peak_bytes / 1048576.0);
            if (do_eval) printf(" | val %.4f", t->val);
            printf("\n");
        }
    }
    fflush(stdout);
    return !(o->save && o->save_every > 0 && (s + 1) % o->save_every == 0 &&
             !save_ckpt(o, t->m, t->data, s + 1, &t->last_saved));
}

/* The steps, then the last checkpoint, the trace and the run's times in
 * the cost model's cache.  0, or 1 (reported). */
static int run_steps(train_run *t)
{
    const train_opts *o = &t->o;
    cli_progress pg;   /* stderr; not with --json, nor when step lines go to the same terminal */
    cli_progress_init(&pg, t->lead && !o->json && (o->quiet || !cli_progress_stdout_is_tty()));
    for (long s = t->start; s < o->steps; s++) {
        char what[160];
        snprintf(what, sizeof what, "train (%.100s): step %ld/%ld", t->policy, s + 1, o->steps);
        cli_progress_update(&pg, what, s - t->start, o->steps - t->start);
        if (!run_step(t, s)) { cli_progress_clear(&pg); return 1; }
    }
    cli_progress_clear(&pg);
    remat_model_set_trace(t->m, NULL, 0);
    if (t->start >= o->steps) {   /* no step to run (--steps 0): the weights as loaded, evaluated */
        char why[512];
        if (eval_val(t->m, t->data, t->c, o->eval_batches, t->in, t->tg, &t->val, why, sizeof why))
            return cli_error("validation: %s", why);
    }
    if (o->save && t->last_saved != o->steps && !save_ckpt(o, t->m, t->data, o->steps, &t->last_saved)) return 1;
    t->trace_done = 1;
    if (o->trace && t->lead && write_trace(o, t->trace)) return 1;
    if (t->calibrate && completed_steps(t->trace)) {   /* none when every timed step was skipped */
        remat_profile *base = t->plan_prof;
        t->plan_prof = NULL;   /* taken over */
        if (cli_calibrate_cache(t->c, t->trace, NULL, base, &t->calib, t->calib_path, sizeof t->calib_path)) return 1;
    }
    if (t->n_skipped && !o->json && !o->quiet)
        printf("%ld step%s skipped (non-finite)\n", t->n_skipped, t->n_skipped > 1 ? "s" : "");
    return 0;
}

/* The summary's figures (over the steps that completed; none: every step
 * skipped, or none to run: NaN, null in JSON). */
typedef struct run_summary {
    remat_stats st;
    double med, comm_med, red_med, tps, rpct;
    char hash[32];
    /* --verify-recompute: the recomputed tensors of one micro-batch's
     * schedule, and how many the steps that completed checked bit for bit
     * against their first computation (the engine stops the run at the
     * first that differs) */
    uint64_t rec_per_micro, verified;
} run_summary;

static uint64_t recomputes_of(const remat_schedule *s)
{
    uint64_t n = 0;
    remat_instr_info in;
    for (size_t i = 0; i < remat_schedule_length(s); i++)
        n += !remat_schedule_instr(s, i, &in) && in.kind == REMAT_I_RECOMPUTE;
    return n;
}

static void summary_json(train_run *t, const run_summary *u)
{
    remat_jsonw *w = t->jw;
    const remat_config *c = t->c;
    const remat_stats *st = &u->st;
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "type", "summary");
    remat_jsonw_str(w, "policy", t->policy);
    remat_jsonw_int(w, "steps", t->o.steps);
    remat_jsonw_float(w, "loss_first", t->loss_first);
    remat_jsonw_float(w, "loss_last", t->loss_last);
    remat_jsonw_num(w, "val_loss", t->val);
    remat_jsonw_num(w, "step_ms_median", u->med);
    remat_jsonw_num(w, "tokens_per_s", u->tps);
    remat_jsonw_uint(w, "act_peak_bytes", st->act_peak_bytes);
    remat_jsonw_uint(w, "act_peak_pred_bytes", t->sim.peak_bytes);
    remat_jsonw_uint(w, "act_stored_bytes", st->act_stored_bytes);
    remat_jsonw_uint(w, "act_stored_pred_bytes", t->sim.stored_bytes);
    remat_jsonw_uint(w, "act_workset_bytes", st->act_workset_bytes);
    remat_jsonw_uint(w, "act_workset_pred_bytes", t->sim.workset_bytes);
    remat_jsonw_uint(w, "params_bytes", st->params_bytes);
    remat_jsonw_uint(w, "grads_bytes", st->grads_bytes);
    remat_jsonw_uint(w, "optim_bytes", st->optim_bytes);
    remat_jsonw_uint(w, "workspace_bytes", st->workspace_bytes);
    remat_jsonw_uint(w, "step_peak_bytes", st->step_peak_bytes);
    remat_jsonw_num(w, "flops_per_step", t->sim.flops * st->grad_accum);
    remat_jsonw_num(w, "recompute_pct", u->rpct);
    remat_jsonw_str(w, "params_hash", u->hash);
    if (t->o.verify) remat_jsonw_uint(w, "verified_recomputes", u->verified);
    else remat_jsonw_null(w, "verified_recomputes");
    remat_jsonw_int(w, "n_layer", c->n_layer);
    remat_jsonw_int(w, "n_embd", c->n_embd);
    remat_jsonw_int(w, "n_head", c->n_head);
    cli_json_arch(w, c);
    remat_jsonw_int(w, "vocab", c->vocab);
    remat_jsonw_int(w, "seq", c->seq);
    remat_jsonw_int(w, "batch", c->batch);
    remat_jsonw_int(w, "threads", remat_get_threads());
    remat_jsonw_str(w, "dtype", cli_dtype_name(c->dtype));
    remat_jsonw_str(w, "gemm", remat_gemm_name(remat_gemm_get()));
    remat_jsonw_bool(w, "bf16_native", remat_gemm_bf16_native());
    remat_jsonw_uint(w, "weights16_bytes", st->weights16_bytes);
    remat_jsonw_int(w, "calibrated_ops", remat_profile_run_ops(t->calib));
    remat_jsonw_int(w, "ranks", st->ranks);
    remat_jsonw_int(w, "micro_batch", st->micro_batch);
    remat_jsonw_int(w, "grad_accum", st->grad_accum);
    remat_jsonw_int(w, "zero", st->zero);
    remat_jsonw_uint(w, "reduce_bytes", st->reduce_bytes);
    remat_jsonw_uint(w, "comm_bytes_per_step", st->comm_bytes);
    remat_jsonw_num(w, "comm_ms_median", u->comm_med);
    remat_jsonw_num(w, "reduce_ms_median", u->red_med);
    remat_jsonw_end(w);
}

static void summary_text(train_run *t, const run_summary *u)
{
    const remat_stats *st = &u->st;
    char b1[32], b2[32], b3[32], b4[32];
    int ran = t->start < t->o.steps;   /* else evaluated only (run_steps) */
    if (ran)
        printf("\nloss %.4f -> %.4f (val %.4f) | median step %.1f ms, %.0f tok/s, %.2f GFLOP/s%s\n",
               (double)t->loss_first, (double)t->loss_last, t->val, u->med, u->tps,
               u->med > 0 ? t->sim.flops * st->grad_accum / (u->med * 1e6) : 0.0, st->ranks > 1 ? " per rank" : "");
    else
        printf("\nno step to run (--steps %ld): validation loss %.4f of the weights as they are (%ld batch%s)\n",
               t->o.steps, t->val, t->o.eval_batches, t->o.eval_batches == 1 ? "" : "es");
    printf("memory%s (bytes are exact, from the accounting allocator):\n", st->ranks > 1 ? " of rank 0" : "");
    printf("  parameters      %12s\n", cli_fmt_bytes(st->params_bytes, b1, sizeof b1));
    printf("  gradients       %12s\n", cli_fmt_bytes(st->grads_bytes, b1, sizeof b1));
    printf("  AdamW state     %12s%s\n", cli_fmt_bytes(st->optim_bytes, b1, sizeof b1),
           st->zero && st->ranks > 1 ? " (its slice: ZeRO-1)" : "");
    printf("  workspace       %12s\n", cli_fmt_bytes(st->workspace_bytes, b1, sizeof b1));
    if (st->weights16_bytes)
        printf("  bf16 weights    %12s (the copy the GEMMs read)\n", cli_fmt_bytes(st->weights16_bytes, b1, sizeof b1));
    if (t->dp)
        printf("  reduction       %12s (partial sums of the micro-batch tree, receive buffer, partials)\n",
               cli_fmt_bytes(st->reduce_bytes, b1, sizeof b1));
    if (!ran)
        printf("  activations     none measured: no step ran (predicted peak of a step %s)\n",
               cli_fmt_bytes(t->sim.peak_bytes, b4, sizeof b4));
    else
        printf("  activations     stored %s, working set %s, peak %s (predicted peak %s%s)\n",
               cli_fmt_bytes(st->act_stored_bytes, b1, sizeof b1), cli_fmt_bytes(st->act_workset_bytes, b2, sizeof b2),
               cli_fmt_bytes(st->act_peak_bytes, b3, sizeof b3), cli_fmt_bytes(t->sim.peak_bytes, b4, sizeof b4),
               st->act_peak_bytes == t->sim.peak_bytes ? ", exact" : ", MISMATCH");
    if (ran)
        printf("  step peak       %12s (everything live at the worst moment)\n",
               cli_fmt_bytes(st->step_peak_bytes, b1, sizeof b1));
    if (st->ranks > 1)
        printf("communication: %s sent per step, median %.1f ms in exchanges, %.1f ms adding gradients\n",
               cli_fmt_bytes(st->comm_bytes, b1, sizeof b1), u->comm_med, u->red_med);
    printf("  recompute       %.1f%% of step FLOPs | params_hash %.16s\n", u->rpct, u->hash);
    if (t->o.verify && !u->rec_per_micro)
        printf("verify-recompute: nothing to check: policy %s recomputes no tensor\n", t->policy);
    else if (t->o.verify)
        printf("verify-recompute: %llu recomputed tensors (%llu per micro-batch x %d per step x %zu steps), each bit "
               "for bit equal to its first computation\n", (unsigned long long)u->verified,
               (unsigned long long)u->rec_per_micro, st->grad_accum, t->dt.n);
    if (t->calib) {
        remat_plan_row pr = { 0 };
        remat_plan_evaluate(t->c, t->calib, t->policy, 0, 0, &pr);
        printf("cost model: the times of %d instruction kinds of this run, saved to %s (step %.1f ms as the "
               "planner now predicts it)\n", remat_profile_run_ops(t->calib), t->calib_path, pr.step_ms_pred);
        remat_plan_row_clear(&pr);
    }
    if (t->o.trace) printf("trace: %s\n", t->o.trace);
}

/* The summary: JSON (closing the JSON Lines) or text.  0, or 1 (reported). */
static int summary(train_run *t)
{
    run_summary u;
    const step_times *dt = &t->dt;
    remat_model_stats(t->m, &u.st);
    u.med = dt->n ? remat_median(dt->ms, dt->n) : NAN;
    u.comm_med = dt->n ? remat_median(dt->comm_ms, dt->n) : NAN;
    u.red_med = dt->n ? remat_median(dt->reduce_ms, dt->n) : NAN;
    u.tps = u.med > 0 ? (double)t->N / (u.med / 1000.0) : dt->n ? 0 : NAN;
    u.rpct = t->sim.flops > 0 ? 100.0 * t->sim.recompute_flops / t->sim.flops : 0;
    snprintf(u.hash, sizeof u.hash, "%016llx", (unsigned long long)remat_model_params_hash(t->m));
    u.rec_per_micro = recomputes_of(remat_model_schedule(t->m));
    u.verified = u.rec_per_micro * (uint64_t)(u.st.grad_accum > 0 ? u.st.grad_accum : 1) * dt->n;
    if (!t->jw) { summary_text(t, &u); return 0; }
    summary_json(t, &u);
    int rc = cli_json_close(t->jw);
    t->jw = NULL;
    return rc;
}

/* For byte-level data: a sample continuing the start of the validation
 * split.  0, or 1 (reported). */
static int sample(train_run *t)
{
    const train_opts *o = &t->o;
    const remat_config *c = t->c;
    if (o->sample <= 0 || !remat_data_is_bytes(t->data) || o->json || o->quiet || !t->lead) return 0;
    int T = c->seq, np = T / 4 > 0 ? (T / 4 < 16 ? T / 4 : 16) : 1;
    int nn = (int)(o->sample < T - np ? o->sample : T - np);
    if (nn <= 0) return 0;
    if (remat_data_seek(t->data, REMAT_SPLIT_VAL, 0) || remat_data_next(t->data, REMAT_SPLIT_VAL, c->batch, c->seq, t->in, t->tg))
        return cli_error("%s", remat_errmsg());
    int *gen = malloc(sizeof(int) * (size_t)nn);
    remat_status st = REMAT_OK;
    if (gen && !(st = remat_model_sample(t->m, t->in, np, nn, 0.5f, o->seed, gen))) {
        printf("sample: \"");
        print_escaped(stdout, t->in, np);
        printf("\" -> \"");
        print_escaped(stdout, gen, nn);
        printf("\"\n");
    }
    free(gen);
    return st ? cli_error("sample: %s", remat_model_error(t->m)) : 0;
}

static void run_free(train_run *t)
{
    free(t->in); free(t->tg); free(t->ci);
    free(t->dt.ms); free(t->dt.comm_ms); free(t->dt.reduce_ms);
    remat_trace_free(t->trace);
    remat_jsonw_free(t->jw);
    remat_profile_free(t->calib);
    remat_profile_free(t->plan_prof);
    remat_model_free(t->m);
    remat_data_free(t->data);
}

static int train(int argc, char **argv)
{
    train_run t;
    memset(&t, 0, sizeof t);
    t.c = &t.o.cfg;
    t.lead = g_rank == 0;
    t.last_saved = -1;
    t.loss_first = t.loss_last = NAN;
    t.val = NAN;
    if (g_ranks > 1) cli_defer_errors(1);
    int r = parse(argc, argv, &t.o);
    if (r == 0) { cli_defer_errors(0); return 0; }   /* --help */
    int rc = r < 0 ? 2 : setup(&t);
    if (!setup_agree(rc != 0) && !rc) rc = 1;   /* the ranks agree on who failed */
    if (!rc) {
        g_collective = 0;
        rc = !same_data(&t) || prepare_steps(&t) || run_steps(&t) || summary(&t) || sample(&t);
    }
    /* a run that stopped early still leaves the trace of what it ran */
    if (rc && !t.trace_done && t.o.trace && t.trace && t.lead && remat_trace_steps(t.trace)) write_trace(&t.o, t.trace);
    run_free(&t);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    if (remat_comm_create(NULL, NULL, &g_comm)) return cli_error("%s", remat_errmsg());
    g_rank = remat_comm_rank(g_comm);
    g_ranks = remat_comm_size(g_comm);
    static char tag[32];
    if (g_ranks > 1) {
        snprintf(tag, sizeof tag, "rank %d: ", g_rank);
        cli_error_tag = tag;
        /* one rank speaks on stdout: rank 0 */
        if (g_rank != 0 && !freopen("/dev/null", "w", stdout)) return cli_error("cannot silence stdout");
    }
    int rc = train(argc, argv);
    if (rc && g_ranks > 1 && !g_collective) {
        /* this rank's own failure: end every rank now rather than leave them
         * waiting in an exchange with it */
        fflush(stdout);
        fflush(stderr);
        remat_comm_abort(g_comm, rc);
    }
    remat_comm_free(g_comm);
    return rc;
}
