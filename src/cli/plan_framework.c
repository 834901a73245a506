/*
 * plan_framework.c -- `remat plan --framework megatron|pytorch`: recomputation
 * for a training run on a GPU cluster, answered three ways (the fastest plan
 * that fits, the best Megatron-LM flags, the best torchtitan setting), each
 * with its predicted memory per GPU and iteration time (remat.h, "cluster
 * planning"; README, "Cluster planning").
 */
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static void help(void)
{
    printf(
"usage: remat plan --framework megatron|pytorch [--model NAME | config flags]\n"
"                  [--tp T] [--sp] [--pp P] [--interleave V] [--dp D] [--distributed-optimizer]\n"
"                  [--micro-batch b] [--global-batch G] [--device NAME] [--device-mem SIZE]\n"
"                  [--reserve F] [--dtype bf16|fp32] [--recompute POLICY]... [--explain]\n"
"                  [--maximize micro-batch|seq] [--json]\n\n"
"Plans activation recomputation for a run of Megatron-LM or PyTorch on GPUs,\n"
"without a GPU: the framework's saved tensors are a table that remat's simulator\n"
"and planner run on.  Three answers, each with its memory per GPU and iteration\n"
"time: the fastest plan that fits (any per-layer choice), the best that\n"
"Megatron-LM's --recompute-* flags express, the best of torchtitan's\n"
"activation_checkpoint settings.\n\n"
"  --framework megatron   Megatron-LM's GPT layer as Korthikanti et al. 2022 count it\n"
"                         (default --dtype bf16, --dropout 0.1: Megatron's defaults)\n"
"  --framework pytorch    what autograd saves for a plain PyTorch GPT-2 block\n"
"                         (default --dtype fp32, --dropout 0)\n"
"  --model NAME           22b 175b 530b 1t (Korthikanti Table 3), gpt2 gpt2-medium\n"
"                         gpt2-large gpt2-xl; later config flags override it\n"
"  --tp T, --sp           tensor parallelism over T GPUs; sequence parallelism\n"
"  --pp P, --interleave V pipeline stages; model chunks per stage (interleaved 1F1B)\n"
"  --dp D                 data-parallel replicas; --distributed-optimizer shards the\n"
"                         optimizer state over them\n"
"  --micro-batch b        sequences per micro-batch (same as --batch; default 1)\n"
"  --global-batch G       sequences per iteration (default b x D)\n"
"  --device NAME          a100-40gb a100-80gb h100-80gb h200-141gb (default a100-80gb)\n"
"  --device-mem SIZE      override the device's memory\n"
"  --reserve F            share of the memory kept back for the allocator, workspace and\n"
"                         communication buffers (default 0.05)\n"
"  --efficiency E         share of the peak FLOP/s matrix products reach (default %.3f,\n"
"                         fitted to Korthikanti et al.'s Table 5)\n"
"  --recompute POLICY     also predict POLICY on every model chunk (repeatable)\n"
"  --explain              what each answer does with each layer, as layer ranges\n"
"  --maximize micro-batch|seq  the largest micro-batch or sequence at which each\n"
"                         answer exists\n"
"  --json                 {\"framework\", \"memory\", \"model_flops\", \"optimal\",\n"
"                         \"best_megatron\", \"best_torchtitan\", \"rows\"} (README)\n", REMAT_CLUSTER_EFFICIENCY);
}

static const char *fw_name(const remat_config *c)
{
    return c->framework == REMAT_FRAMEWORK_MEGATRON ? "megatron" : "pytorch";
}

/* torchtitan's settings (torchtitan/distributed/activation_checkpoint.py,
 * torchtitan/trainer.py): the activation_checkpoint subcommand and its config class */
static void torchtitan_json(remat_jsonw *w, const char *tt)
{
    if (!tt) { remat_jsonw_null(w, "torchtitan"); return; }
    const char *cls = !strcmp(tt, "full") ? "FullAC.Config()" : !strcmp(tt, "selective") ? "SelectiveAC.Config()" : "None";
    char cli[96];
    snprintf(cli, sizeof cli, "activation_checkpoint:%s", tt);
    remat_jsonw_object(w, "torchtitan");
    remat_jsonw_str(w, "activation_checkpoint", tt);
    remat_jsonw_str(w, "cli", cli);
    remat_jsonw_str(w, "config", cls);
    remat_jsonw_end(w);
}

/* a row of the answers, under key (NULL in the rows array); null when the
 * answer does not exist */
static void row_json(remat_jsonw *w, const char *key, const remat_cluster_row *r)
{
    if (!r->policy) { remat_jsonw_null(w, key); return; }
    remat_jsonw_object(w, key);
    remat_jsonw_str(w, "policy", r->policy);
    remat_jsonw_uint(w, "layer_stored_bytes", r->layer_stored_bytes);
    remat_jsonw_uint(w, "stored_bytes", r->stored_bytes);
    remat_jsonw_uint(w, "peak_bytes", r->peak_bytes);
    remat_jsonw_uint(w, "total_bytes", r->total_bytes);
    remat_jsonw_num(w, "hardware_flops", r->hardware_flops);
    remat_jsonw_num(w, "step_ms_pred", r->step_ms_pred);
    remat_jsonw_bool(w, "fits", r->fits);
    remat_jsonw_str(w, "megatron_flags", r->megatron_flags);
    torchtitan_json(w, r->torchtitan);
    remat_jsonw_end(w);
}

static const char *fmt_s(double ms, char *buf, size_t n)
{
    if (ms >= 1000) snprintf(buf, n, "%.3f s", ms / 1000);
    else snprintf(buf, n, "%.2f ms", ms);
    return buf;
}

static void answer_text(const char *label, const remat_cluster_row *r, const remat_config *c, int explain)
{
    char b1[32], b2[32], b3[32];
    if (!r->policy) {
        printf("%-18s nothing fits\n", label);
        return;
    }
    printf("%-18s %10s  activations %10s  total %10s%s\n", label, fmt_s(r->step_ms_pred, b1, sizeof b1),
           cli_fmt_bytes(r->peak_bytes, b2, sizeof b2), cli_fmt_bytes(r->total_bytes, b3, sizeof b3),
           r->fits ? "" : "  (does not fit)");
    if (r->megatron_flags) printf("%18s Megatron-LM: %s\n", "", r->megatron_flags[0] ? r->megatron_flags : "(no --recompute flags)");
    if (r->torchtitan) printf("%18s torchtitan: activation_checkpoint:%s\n", "", r->torchtitan);
    if (!r->megatron_flags && !r->torchtitan) printf("%18s remat policy: %.200s%s\n", "", r->policy, strlen(r->policy) > 200 ? "..." : "");
    if (explain || (!r->megatron_flags && !r->torchtitan)) cli_explain(stdout, c, r->policy);
}

#define MAX_GIVEN 16

int cli_plan_framework(int argc, char **argv)
{
    remat_config c;
    remat_cluster cl;
    remat_config_default(&c);
    remat_cluster_default(&cl);
    c.max_seq = 0;
    int json = 0, explain = 0, maximize = -1, dtype_set = 0, dropout_set = 0, batch_set = 0, ngiven = 0;
    const char *given[MAX_GIVEN], *v;
    long x;
    double d;
    uint64_t mem = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { help(); return 0; }
        if (!strcmp(f, "--dtype")) dtype_set = 1;
        if (!strcmp(f, "--dropout")) dropout_set = 1;
        if (!strcmp(f, "--batch") || !strcmp(f, "--micro-batch")) batch_set = 1;
        if ((r = cli_config_flag(&c, argc, argv, &i)) < 0) return 2;
        if (r) continue;
        if (!strcmp(f, "--micro-batch")) {     /* Megatron's name for --batch */
            if (!(v = cli_value(argc, argv, &i)) || !cli_int(f, v, 1, 1 << 20, &x)) return 2;
            c.batch = (int)x;
        } else if (!strcmp(f, "--pp") || !strcmp(f, "--interleave") || !strcmp(f, "--dp") ||
                   !strcmp(f, "--global-batch")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_int(f, v, 1, 1 << 24, &x)) return 2;
            if (!strcmp(f, "--pp")) cl.pp = (int)x;
            else if (!strcmp(f, "--interleave")) cl.vpp = (int)x;
            else if (!strcmp(f, "--dp")) cl.dp = (int)x;
            else cl.global_batch = (int)x;
        } else if (!strcmp(f, "--distributed-optimizer")) cl.dist_optim = 1;
        else if (!strcmp(f, "--device")) {
            if (!(v = cli_value(argc, argv, &i))) return 2;
            const remat_device *dv = remat_device_find(v);
            if (!dv) {
                char list[256];
                cli_error("--device expects one of %s, got '%s' (or give --device-mem)",
                          cli_preset_names(1, list, sizeof list), v);
                return 2;
            }
            cl.dev = *dv;
        } else if (!strcmp(f, "--device-mem")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_bytes(f, v, &mem)) return 2;
            if (!mem) { cli_error("--device-mem must be positive"); return 2; }
        } else if (!strcmp(f, "--reserve")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_float(f, v, 0, 0.99, &d)) return 2;
            cl.reserve = d;
        } else if (!strcmp(f, "--efficiency")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_float(f, v, 0.001, 1, &d)) return 2;
            cl.efficiency = d;
        } else if (!strcmp(f, "--recompute")) {
            if (!(v = cli_value(argc, argv, &i))) return 2;
            if (ngiven == MAX_GIVEN) return cli_usage_error("plan", "at most %d --recompute policies", MAX_GIVEN);
            given[ngiven++] = v;
        } else if (!strcmp(f, "--maximize")) {
            if (!(v = cli_value(argc, argv, &i))) return 2;
            if (!strcmp(v, "micro-batch") || !strcmp(v, "batch")) maximize = REMAT_CLUSTER_MICROBATCH;
            else if (!strcmp(v, "seq")) maximize = REMAT_CLUSTER_SEQ;
            else { cli_error("--maximize expects micro-batch or seq, got '%s'", v); return 2; }
        } else if (!strcmp(f, "--explain")) explain = 1;
        else if (!strcmp(f, "--json")) json = 1;
        else if (!strcmp(f, "--budget") || !strcmp(f, "--budget-activations"))
            return cli_usage_error("plan", "with --framework the budget is the GPU's memory: give --device or --device-mem");
        else return cli_usage_error("plan", "unknown flag '%s' in framework mode", f);
    }
    if (mem) cl.dev.mem_bytes = mem;
    if (!dtype_set) c.dtype = c.framework == REMAT_FRAMEWORK_MEGATRON ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
    if (!dropout_set && c.framework == REMAT_FRAMEWORK_MEGATRON) c.dropout = 0.1f;
    if (!batch_set) c.batch = 1;
    cli_config_default_max_seq(&c);
    if (remat_cluster_check(&c, &cl)) return cli_error("%s", remat_errmsg()) + 1;

    remat_cluster_answer a;
    remat_cluster_row *gr = calloc(ngiven ? (size_t)ngiven : 1, sizeof *gr);
    if (!gr) return cli_error("out of memory");
    int best[3] = { 0, 0, 0 };
    remat_status st;
    if (maximize >= 0) {
        for (int w = 2; w >= 0; w--) {      /* the optimum last: its answer is the one shown */
            if ((st = remat_cluster_maximize(&c, &cl, (remat_cluster_dim)maximize, (remat_cluster_which)w, &best[w],
                                             w ? NULL : &a))) {
                free(gr);
                return cli_error("%s", remat_errmsg());
            }
        }
        if (best[0]) {
            if (maximize == REMAT_CLUSTER_SEQ) { c.seq = best[0]; if (c.max_seq < c.seq) c.max_seq = c.seq; }
            else { long m = (cl.global_batch ? cl.global_batch : (long)c.batch * cl.dp) / ((long)c.batch * cl.dp);
                   c.batch = best[0]; cl.global_batch = (int)(m * c.batch * cl.dp); }
        }
    } else if ((st = remat_cluster_plan(&c, &cl, &a))) {
        free(gr);
        return cli_error("%s", remat_errmsg());
    }
    for (int i = 0; i < ngiven; i++)
        if (remat_cluster_evaluate(&c, &cl, given[i], &gr[i])) {
            int rc = cli_error("--recompute %s: %s", given[i], remat_errmsg()) + 1;
            for (int j = 0; j < i; j++) remat_cluster_row_clear(&gr[j]);
            free(gr);
            remat_cluster_answer_clear(&a);
            return rc;
        }
    remat_cluster_memory mm;
    remat_cluster_memory_of(&c, &cl, &mm);
    double model_flops = remat_cluster_model_flops(&c, &cl);
    int rc = 1;
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "framework", fw_name(&c));
        remat_jsonw_object(w, "memory");
        remat_jsonw_uint(w, "params", mm.params);
        remat_jsonw_uint(w, "params_bytes", mm.params_bytes);
        remat_jsonw_uint(w, "grads_bytes", mm.grads_bytes);
        remat_jsonw_uint(w, "optim_bytes", mm.optim_bytes);
        remat_jsonw_end(w);
        remat_jsonw_num(w, "model_flops", model_flops);
        remat_jsonw_str(w, "device", cl.dev.name ? cl.dev.name : "");
        remat_jsonw_uint(w, "device_mem_bytes", cl.dev.mem_bytes);
        if (maximize >= 0) {
            remat_jsonw_object(w, "maximize");
            remat_jsonw_str(w, "dim", maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch");
            remat_jsonw_int(w, "optimal", best[0]);
            remat_jsonw_int(w, "best_megatron", best[1]);
            remat_jsonw_int(w, "best_torchtitan", best[2]);
            remat_jsonw_end(w);
        }
        row_json(w, "optimal", &a.optimal);
        row_json(w, "best_megatron", &a.best_megatron);
        row_json(w, "best_torchtitan", &a.best_torchtitan);
        remat_jsonw_array(w, "rows");
        for (int i = 0; i < ngiven; i++) row_json(w, NULL, &gr[i]);
        for (size_t i = 0; i < a.nrows; i++) row_json(w, NULL, &a.rows[i]);
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        if (cli_json_close(w)) goto out;
    } else {
        char b1[32], b2[32], b3[32], b4[32];
        long m = (cl.global_batch ? cl.global_batch : (long)c.batch * cl.dp) / ((long)c.batch * cl.dp);
        cli_config_print(stdout, &c);
        printf("cluster: %s, %s per GPU (%.0f%% kept back), %.0f TFLOP/s x %.3f | pp %d%s, dp %d%s | "
               "global batch %ld = micro-batch %d x %ld x dp %d\n",
               cl.dev.name ? cl.dev.name : "device", cli_fmt_bytes(cl.dev.mem_bytes, b1, sizeof b1), 100 * cl.reserve,
               cl.dev.flops / 1e12, cl.efficiency > 0 ? cl.efficiency : REMAT_CLUSTER_EFFICIENCY, cl.pp,
               cl.vpp > 1 ? ", interleaved" : "", cl.dp, cl.dist_optim ? " (distributed optimizer)" : "",
               m * c.batch * cl.dp, c.batch, m, cl.dp);
        printf("per GPU: %llu parameters: weights %s, gradients %s, optimizer %s | model FLOPs per iteration %.4g\n",
               (unsigned long long)mm.params, cli_fmt_bytes(mm.params_bytes, b2, sizeof b2),
               cli_fmt_bytes(mm.grads_bytes, b3, sizeof b3), cli_fmt_bytes(mm.optim_bytes, b4, sizeof b4), model_flops);
        if (maximize >= 0) {
            const char *what = maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch";
            printf("largest %s: optimal %d, Megatron-LM %d, torchtitan %d (answers below at %s %d)\n", what, best[0],
                   best[1], best[2], what, best[0]);
        }
        /* plans are per model chunk: each pipeline stage's L/(P V) layers */
        remat_config ch = c;
        ch.n_layer = c.n_layer / (cl.pp * cl.vpp);
        if (cl.pp > 1) {
            ch.stage = REMAT_STAGE_FIRST;
            printf("plans are per model chunk of %d layers (%d stages x %d chunk(s) each)\n", ch.n_layer, cl.pp,
                   cl.vpp);
        }
        printf("\n");
        answer_text("optimal", &a.optimal, &ch, explain);
        answer_text("best Megatron-LM", &a.best_megatron, &ch, explain);
        answer_text("best torchtitan", &a.best_torchtitan, &ch, explain);
        for (int i = 0; i < ngiven; i++) {
            printf("\n");
            answer_text(given[i], &gr[i], &ch, explain);
        }
        if (a.best_megatron.policy && a.optimal.policy && a.best_megatron.step_ms_pred > a.optimal.step_ms_pred)
            printf("\nMegatron-LM's flags cost %.1f%% over the optimum, torchtitan's %s\n\n",
                   100 * (a.best_megatron.step_ms_pred / a.optimal.step_ms_pred - 1),
                   a.best_torchtitan.policy ? (snprintf(b1, sizeof b1, "%.1f%%", 100 * (a.best_torchtitan.step_ms_pred /
                                                         a.optimal.step_ms_pred - 1)), b1) : "(nothing fits)");
    }
    rc = a.optimal.policy ? 0 : 1;
    if (!a.optimal.policy)   /* with --json too: the answers are null there, the reason is here */
        cli_error("nothing fits in %s per GPU; add GPUs (--tp, --pp), shorten --seq or --micro-batch, or use "
                  "--distributed-optimizer", cli_fmt_bytes(cl.dev.mem_bytes, (char[32]){0}, 32));
out:
    for (int i = 0; i < ngiven; i++) remat_cluster_row_clear(&gr[i]);
    free(gr);
    remat_cluster_answer_clear(&a);
    return rc;
}
