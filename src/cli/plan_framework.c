/*
 * plan_framework.c -- `remat plan --framework megatron|pytorch`: recomputation
 * for a training run on a GPU cluster, answered three ways (the fastest plan
 * that fits, the best Megatron-LM flags, the best torchtitan setting), each
 * with its predicted memory per GPU and iteration time (remat.h, "cluster
 * planning"; README, "Cluster planning").
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static const char *fw_name(const remat_config *c)
{
    return c->framework == REMAT_FRAMEWORK_MEGATRON ? "megatron" : "pytorch";
}

/* which table the answers come from: by architecture and, for Llama, the
 * attention backend */
static const char *fw_table(const remat_config *c)
{
    if (c->arch != REMAT_ARCH_LLAMA) return fw_name(c);
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->kv_lora_rank > 0)
        return "megatron-mla (multi-latent attention, TE FusedAttention, alltoall)";
    if (c->framework == REMAT_FRAMEWORK_PYTORCH && c->kv_lora_rank > 0)
        return "pytorch-mla (DeepseekV3ForCausalLM, eager attention, grouped_mm experts)";
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->n_experts > 0) return "megatron-moe (TE FusedAttention, alltoall)";
    if (c->framework == REMAT_FRAMEWORK_MEGATRON)
        return c->attention == REMAT_ATTENTION_FLASH ? "megatron-llama (TE FusedAttention)" : "megatron-llama (TE unfused attention)";
    if (c->n_experts > 0) return "pytorch-moe (eager attention, grouped_mm experts)";
    return c->attention == REMAT_ATTENTION_FLASH ? "pytorch-llama (SDPA flash)" : "pytorch-llama (eager attention)";
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

/* --framework pytorch: the layout and an answer's torchtitan setting (tt)
 * as torchtitan's own TOML keys into f.  The names are those of
 * torchtitan/config/job_config.py at pytorch/torchtitan commit
 * e347b1e5e6b6941d789d16d340145294d82dc71e, the last to read a TOML job
 * file (--job.config_file); later commits keep the same [section] field
 * names in Python's Trainer.Config and its --section.option flags
 * (torchtitan/config/configs.py at b5bcd76).  The data-parallel degree is
 * FSDP's shard degree with --distributed-optimizer (FSDP shards the
 * optimizer state and more), else DDP's replicate degree; torchtitan's
 * TP shards the norms' sequence as --sp does.  "selective" is per-op
 * selective checkpointing (selective_ac_option "op"). */
static void torchtitan_toml(FILE *f, const remat_config *c, const remat_cluster *cl, const char *tt)
{
    long G = cl->global_batch ? cl->global_batch : (long)c->batch * cl->dp;
    fprintf(f, "[parallelism]\ntensor_parallel_degree = %d\npipeline_parallel_degree = %d\n"
            "context_parallel_degree = %d\ndata_parallel_shard_degree = %d\ndata_parallel_replicate_degree = %d\n",
            remat_config_tp(c), cl->pp, remat_config_cp(c), cl->dist_optim ? cl->dp : 1, cl->dist_optim ? 1 : cl->dp);
    /* a pipeline splits each rank's local batch into its micro-batches;
     * without one, torchtitan accumulates gradients up to the global batch */
    long local = cl->pp > 1 && c->batch > 0 && cl->dp > 0 ? G / cl->dp : c->batch;
    if (cl->pp > 1)
        fprintf(f, "pipeline_parallel_schedule = \"%s\"\npipeline_parallel_microbatch_size = %d\n",
                cl->vpp > 1 ? "Interleaved1F1B" : "1F1B", c->batch);
    fprintf(f, "\n[activation_checkpoint]\nmode = \"%s\"\n", tt);
    if (!strcmp(tt, "selective")) fprintf(f, "selective_ac_option = \"op\"\n");
    fprintf(f, "\n[training]\nlocal_batch_size = %ld\nglobal_batch_size = %ld\nseq_len = %d\n", local, G, c->seq);
}

/* a row of the answers, under key (NULL in the rows array); null when the
 * answer does not exist.  mm: the parameter state per GPU, the same in
 * every row. */
static char *pytorch_str(const remat_config *c, const char *policy);
static void megatron_command(const remat_config *c, const char *args, const char *flags, char *buf, size_t n);
static void megatron_env_json(remat_jsonw *w, const remat_config *c, const char *flags);

/* ... pt: --framework pytorch's model chunk (its "pytorch" sentence), else NULL;
 * mg, args: --framework megatron's config and run arguments (each answer's
 * "env" and whole "command"), else NULL */
static void row_json(remat_jsonw *w, const char *key, const remat_cluster_row *r, const remat_cluster_memory *mm,
                     const remat_config *pt, const remat_config *mg, const char *args)
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
    if (mg && args && r->megatron_flags) {
        char cmd[3072];
        megatron_env_json(w, mg, r->megatron_flags);
        megatron_command(mg, args, r->megatron_flags, cmd, sizeof cmd);
        remat_jsonw_str(w, "command", cmd);
    }
    torchtitan_json(w, r->torchtitan);
    if (pt) {
        char *t = pytorch_str(pt, r->policy);
        remat_jsonw_str(w, "pytorch", t ? t : "");
        free(t);
    }
    /* per GPU: what total_bytes is made of, on the stage that peaks (a dense
     * prefix is planned stage by stage; else the first stage, mm's) */
    remat_jsonw_object(w, "memory");
    remat_jsonw_uint(w, "peak_stage", (uint64_t)r->peak_stage);
    remat_jsonw_uint(w, "weights", r->stage_params_bytes);
    remat_jsonw_uint(w, "gradients", r->stage_grads_bytes);
    remat_jsonw_uint(w, "optimizer", r->stage_optim_bytes);
    remat_jsonw_uint(w, "activations", r->peak_bytes);
    remat_jsonw_uint(w, "host", r->host_bytes);
    remat_jsonw_uint(w, "total", r->total_bytes);
    remat_jsonw_end(w);
    remat_jsonw_object(w, "moe");           /* the routed load of the figures above, and the plan at balance */
    remat_jsonw_num(w, "load", r->load);
    remat_jsonw_uint(w, "balanced_peak_bytes", r->balanced_peak_bytes);
    remat_jsonw_uint(w, "balanced_total_bytes", r->balanced_total_bytes);
    remat_jsonw_bool(w, "balanced_fits", r->balanced_fits);
    remat_jsonw_uint(w, "balanced_peak_stage", (uint64_t)r->balanced_peak_stage);
    remat_jsonw_end(w);
    remat_jsonw_object(w, "time_ms");       /* step_ms_pred in parts */
    remat_jsonw_num(w, "compute", r->compute_ms);
    remat_jsonw_num(w, "tp", r->tp_ms);
    remat_jsonw_num(w, "cp", r->cp_ms);
    remat_jsonw_num(w, "bubble", r->bubble_ms);
    remat_jsonw_num(w, "dp", r->dp_ms);
    remat_jsonw_num(w, "optimizer", r->optimizer_ms);
    remat_jsonw_num(w, "offload", r->offload_ms);
    remat_jsonw_num(w, "total", r->step_ms_pred);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
}

/* The overlap flags the time model assumes (remat_cluster_overlaps, the one
 * rule), appended at buf + *k. */
static void megatron_overlap_args(const remat_config *c, const remat_cluster *cl, char *buf, size_t n, size_t *k)
{
    unsigned ov = remat_cluster_overlaps(c, cl);
    static const struct { unsigned bit; const char *flag; } names[] = {
        { REMAT_OVERLAP_GRAD_REDUCE, " --overlap-grad-reduce" },
        { REMAT_OVERLAP_PARAM_GATHER, " --overlap-param-gather" },
        { REMAT_OVERLAP_TP_COMM, " --tp-comm-overlap" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((ov & names[i].bit) && *k < n) *k += (size_t)snprintf(buf + *k, n - *k, "%s", names[i].flag);
}

/* The environment Megatron-LM needs for this layout, as a prefix of the
 * command ("" none): megatron/training/arguments.py asserts
 * CUDA_DEVICE_MAX_CONNECTIONS=1 when T > 1 or CP > 1 (so that the
 * communication kernels are scheduled in issue order). */
static const char *megatron_env(const remat_config *c)
{
    return remat_config_tp(c) > 1 || remat_config_cp(c) > 1 ? "CUDA_DEVICE_MAX_CONNECTIONS=1 " : "";
}

/* An answer's own environment besides megatron_env's: with
 * --fine-grained-activation-offloading and TE >= 2.10,
 * megatron/training/arguments.py (line 1939 at d98e8a6) asserts
 * NVTE_CPU_OFFLOAD_V1=1, so that TE offloads activations and not weights
 * (older TE reads no such variable: it is harmless there). */
static int needs_cpu_offload_v1(const char *flags)
{
    return flags && strstr(flags, "--fine-grained-activation-offloading") != NULL;
}

/* An answer's whole Megatron-LM command into buf: its environment, the
 * run's arguments (megatron_args), its recompute and offload flags */
static void megatron_command(const remat_config *c, const char *args, const char *flags, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s", megatron_env(c), needs_cpu_offload_v1(flags) ? "NVTE_CPU_OFFLOAD_V1=1 " : "", args,
             flags && flags[0] ? " " : "", flags ? flags : "");
}

/* the same environment as a JSON object (name: value) */
static void megatron_env_json(remat_jsonw *w, const remat_config *c, const char *flags)
{
    remat_jsonw_object(w, "env");
    if (megatron_env(c)[0]) remat_jsonw_str(w, "CUDA_DEVICE_MAX_CONNECTIONS", "1");
    if (needs_cpu_offload_v1(flags)) remat_jsonw_str(w, "NVTE_CPU_OFFLOAD_V1", "1");
    remat_jsonw_end(w);
}

/* The Megatron-LM arguments of the run itself (besides the recompute flags
 * of each answer): the model, the parallelism, the batch, precision and
 * attention backend (megatron/training/arguments.py and the fields of
 * TransformerConfig at d98e8a6; the Llama names as in
 * examples/llama/train_llama3_8b_h100_fp8.sh). */
static void megatron_args(const remat_config *c, const remat_cluster *cl, char *buf, size_t n)
{
    long G = cl->global_batch ? cl->global_batch : (long)c->batch * cl->dp;
    size_t k = (size_t)snprintf(buf, n, "--num-layers %d --hidden-size %d --num-attention-heads %d --seq-length %d "
                                "--max-position-embeddings %d", c->n_layer, c->n_embd, c->n_head, c->seq, c->max_seq);
#define ADD(...) do { if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__); } while (0)
    if (c->arch == REMAT_ARCH_LLAMA) {
        ADD(" --ffn-hidden-size %d --swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear",
            remat_config_ffn_dim(c));
        if (remat_config_kv_heads(c) != c->n_head) ADD(" --group-query-attention --num-query-groups %d", remat_config_kv_heads(c));
        if (remat_config_head_dim(c) != c->n_embd / c->n_head) ADD(" --kv-channels %d", remat_config_head_dim(c));
        if (!remat_config_tied(c)) ADD(" --untie-embeddings-and-output-weights");
        /* the RoPE base (Megatron's --rotary-base is an int, default 10000) and Llama 3.1's
         * frequency scaling: Megatron exposes only the factor (default 8); megatron-core's
         * rope_utils fixes low 1, high 4 and the original 8192 positions, Hugging Face's values */
        ADD(" --rotary-base %.0f", remat_config_rope_theta(c));
        if (c->rope_scaling.type == REMAT_ROPE_LLAMA3) {
            ADD(" --use-rope-scaling");
            if (c->rope_scaling.factor != 8) ADD(" --rope-scaling-factor %g", c->rope_scaling.factor);
        }
        ADD(" --attention-backend %s", c->attention == REMAT_ATTENTION_FLASH ? "fused" : "unfused");
    }
    if (c->n_experts > 0) {      /* mixture of experts (issue 27): transformer_config.py's MoE fields */
        ADD(" --num-experts %d --moe-router-topk %d --moe-ffn-hidden-size %d", c->n_experts, c->moe_topk, c->moe_ffn_dim);
        if (c->moe_shared_dim) ADD(" --moe-shared-expert-intermediate-size %d", c->moe_shared_dim);
        ADD(" --expert-model-parallel-size %d --expert-tensor-parallel-size %d", c->ep > 1 ? c->ep : 1, remat_config_etp(c));
        ADD(" --moe-token-dispatcher-type alltoall --moe-grouped-gemm --moe-router-dtype fp32");
        /* DeepSeek-V3's routing (the MLA tables'): sigmoid scores with the expert bias and the
         * sequence-wise aux loss at 1e-4 (its technical report, 2412.19437, and
         * Megatron-MoE-ModelZoo's model_configs/benchmarking/DeepSeek-V3.yaml at 1b93710) */
        if (c->kv_lora_rank > 0)
            ADD(" --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
                " --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4");
        else
            ADD(" --moe-aux-loss-coeff 1e-3");
        if (c->moe_groups) ADD(" --moe-router-num-groups %d --moe-router-group-topk %d", c->moe_groups, c->moe_group_topk);
        if (c->moe_scaling > 0) ADD(" --moe-router-topk-scaling-factor %g", c->moe_scaling);
        /* a dense prefix: moe_layer_freq's list (transformer_config.py:556; the recipe's form) */
        if (c->moe_first_dense > 0)
            ADD(" --moe-layer-freq '([0]*%d+[1]*%d)'", c->moe_first_dense, c->n_layer - c->moe_first_dense);
        if (c->moe_capacity > 0) ADD(" --moe-expert-capacity-factor %g --moe-pad-expert-input-to-capacity", c->moe_capacity);
        if (c->qk_norm) ADD(" --qk-layernorm");
    }
    /* multi-latent attention (MLATransformerConfig, transformer_config.py:2006-2034); --qk-layernorm
     * builds its q and kv norms into the up projections (gpt_layer_specs.py:235-244: without it
     * the TE spec has none) */
    if (c->kv_lora_rank > 0)
        ADD(" --multi-latent-attention --q-lora-rank %d --kv-lora-rank %d --qk-head-dim %d --qk-pos-emb-head-dim %d"
            " --v-head-dim %d --qk-layernorm", c->q_lora_rank, c->kv_lora_rank, c->qk_nope_dim, c->qk_rope_dim,
            c->v_head_dim);
    ADD(" --attention-dropout %g --hidden-dropout %g", (double)c->dropout, (double)c->dropout);
    ADD(" --tensor-model-parallel-size %d%s --pipeline-model-parallel-size %d", remat_config_tp(c),
        c->sp ? " --sequence-parallel" : "", cl->pp);
    if (remat_config_cp(c) > 1) ADD(" --context-parallel-size %d", remat_config_cp(c));
    if (cl->vpp > 1) ADD(" --num-layers-per-virtual-pipeline-stage %d", c->n_layer / (cl->pp * cl->vpp));
    if (cl->first_layers) ADD(" --decoder-first-pipeline-num-layers %d", cl->first_layers);
    if (cl->last_layers) ADD(" --decoder-last-pipeline-num-layers %d", cl->last_layers);
    ADD(" --micro-batch-size %d --global-batch-size %ld%s%s%s", c->batch, G,
        cl->dist_optim ? " --use-distributed-optimizer" : "", c->dtype == REMAT_DTYPE_BF16 ? " --bf16" : "",
        cl->grad_reduce_bf16 ? " --grad-reduce-in-bf16" : "");
    megatron_overlap_args(c, cl, buf, n, &k);
#undef ADD
}

/* One unit per column of the text answers: times in milliseconds (to 0.1:
 * the parts of a step of seconds keep their size); bytes in GiB when the
 * largest total or host share shown is one, else MiB (the JSON has bytes
 * and ms). */
typedef struct fw_units { int gib; } fw_units;

static void units_add(fw_units *u, const remat_cluster_row *r)
{
    if (r->policy) u->gib |= r->total_bytes >= (1ULL << 30) || r->host_bytes >= (1ULL << 30);
}

static const char *fmt_t(const fw_units *u, double ms, char *buf, size_t n)
{
    (void)u;
    snprintf(buf, n, "%.1f ms", ms);
    return buf;
}

static const char *fmt_b(const fw_units *u, uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f %s", (double)b / (u->gib ? 1073741824.0 : 1048576.0), u->gib ? "GiB" : "MiB");
    return buf;
}

/* blocks l in [0, L) with kind[l] in set, as ranges ("0-3, 6"); a range
 * is cut after each block in cut (a segment's last) */
static void print_ranges(FILE *f, const char *kind, int L, const char *set, const char *cut)
{
    for (int l = 0, sep = 0; l < L; l++) {
        if (!strchr(set, kind[l])) continue;
        int e = l;
        while (!strchr(cut, kind[e]) && e + 1 < L && strchr(set, kind[e + 1])) e++;
        fprintf(f, e > l ? "%s%d-%d" : "%s%d", sep++ ? ", " : "", l, e);
        l = e;
    }
}

/* PyTorch's own terms for a plan of one model chunk: the blocks (or
 * segments of blocks) to wrap in torch.utils.checkpoint, those that keep
 * part of their tensors (a selective checkpoint: remat_torch applies such
 * plans), those whose tensors go to the host (torch.autograd.graph.save_on_cpu),
 * as one sentence into f (nothing when the policy cannot be compiled) */
static void pytorch_wrap(FILE *f, const remat_config *c, const char *policy)
{
    int L = c->n_layer, nt = remat_config_tensor_count(c);
    uint32_t outb = 0;
    remat_tensor_info ti;
    for (int t = 0; t < nt && t < 32 && !remat_tensor_get(c, t, &ti) && ti.per_layer; t++)
        if (ti.bytes) outb = 1u << t;    /* a block's last tensor: its output, the next block's input */
    remat_layer_info *li = calloc((size_t)L, sizeof *li);
    char *kind = malloc((size_t)L + 1);
    remat_schedule *s = NULL;
    if (!li || !kind || remat_schedule_create(c, policy, &s) || remat_schedule_layers(s, li)) {
        remat_schedule_free(s);
        free(li);
        free(kind);
        return;
    }
    remat_schedule_free(s);
    /* per layer: 'k' kept, 'w' re-run whole keeping only its output (a
     * segment's last block), 's' re-run keeping nothing (inside a segment),
     * 'p' part kept, 'o' on the host */
    int nk = 0, nw = 0, ns = 0, np = 0, no = 0;
    for (int l = 0; l < L; l++) {
        const remat_layer_info *x = &li[l];
        kind[l] = x->offloaded ? 'o' : !x->recomputed ? 'k' : (x->kept & ~outb) ? 'p' : x->kept ? 'w' : 's';
        nk += kind[l] == 'k'; nw += kind[l] == 'w'; ns += kind[l] == 's'; np += kind[l] == 'p'; no += kind[l] == 'o';
    }
    kind[L] = 0;
    free(li);
    if (nk == L) fprintf(f, "no checkpointing");
    else if (nw == L)
        fprintf(f, "every block in torch.utils.checkpoint: Hugging Face's model.gradient_checkpointing_enable("
               "gradient_checkpointing_kwargs={\"use_reentrant\": False})");
    else {
        const char *sep = "";
        if (nw && !ns) fprintf(f, "torch.utils.checkpoint (use_reentrant=False; checkpoint_wrapper) on blocks ");
        if (ns) fprintf(f, "torch.utils.checkpoint (use_reentrant=False) on the segments of blocks ");
        if (nw || ns) { print_ranges(f, kind, L, ns ? "ws" : "w", ns ? "w" : ""); sep = "; "; }
        if (np) {
            fprintf(f, "%sa selective checkpoint (create_selective_checkpoint_contexts; remat_torch.plan and .apply) "
                   "on blocks ", sep);
            print_ranges(f, kind, L, "p", "");
            sep = "; ";
        }
        if (no) {
            fprintf(f, "%storch.autograd.graph.save_on_cpu(pin_memory=True) around blocks ", sep);
            print_ranges(f, kind, L, "o", "");
        }
    }
    free(kind);
}

/* pytorch_wrap's sentence, malloc'd (NULL when out of memory) */
static char *pytorch_str(const remat_config *c, const char *policy)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return NULL;
    pytorch_wrap(f, c, policy);
    if (fclose(f)) { free(buf); return NULL; }
    return buf;
}

/* args: the Megatron-LM run's arguments, so that the answer's line is its
 * whole command (NULL: its recompute and offload flags alone) */
static void answer_text(const char *label, const remat_cluster_row *r, const remat_config *c, int explain,
                        const fw_units *u, const char *args)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], host[64] = "", more[96] = "";
    int pt = c->framework == REMAT_FRAMEWORK_PYTORCH;
    if (!r->policy) {
        printf("%-18s nothing fits\n", label);
        return;
    }
    if (r->host_bytes) snprintf(host, sizeof host, "  host %s", fmt_b(u, r->host_bytes, b1, sizeof b1));
    printf("%-18s %10s  activations %10s  total %10s%s%s\n", label, fmt_t(u, r->step_ms_pred, b1, sizeof b1),
           fmt_b(u, r->peak_bytes, b2, sizeof b2), fmt_b(u, r->total_bytes, b3, sizeof b3), host,
           r->fits ? "" : "  (does not fit)");
    if (c->n_experts > 0)       /* mixture of experts: the same plan at balance */
        printf("%18s routed load %gx balance: the figures above (%s); at balance: activations %s, total %s (%s)\n", "",
               r->load, r->fits ? "fits" : "does not fit", fmt_b(u, r->balanced_peak_bytes, b1, sizeof b1),
               fmt_b(u, r->balanced_total_bytes, b2, sizeof b2), r->balanced_fits ? "fits" : "does not fit");
    if (c->moe_first_dense > 0 && r->stage_params_bytes)    /* planned stage by stage: which stage's GPU peaks */
        printf("%18s peaks on pipeline stage %d (at balance: %d): weights %s, gradients %s, optimizer %s\n", "",
               r->peak_stage, r->balanced_peak_stage, fmt_b(u, r->stage_params_bytes, b1, sizeof b1),
               fmt_b(u, r->stage_grads_bytes, b2, sizeof b2), fmt_b(u, r->stage_optim_bytes, b3, sizeof b3));
    /* the parts that are not always there: the ring of context parallelism, offload not hidden */
    size_t k = 0;
    if (remat_config_cp(c) > 1) k += (size_t)snprintf(more + k, sizeof more - k, ", CP %s", fmt_t(u, r->cp_ms, b1, sizeof b1));
    if (r->host_bytes) snprintf(more + k, sizeof more - k, ", offload %s", fmt_t(u, r->offload_ms, b1, sizeof b1));
    printf("%18s time: compute %s, TP %s%s, bubble %s, DP %s, optimizer %s\n", "", fmt_t(u, r->compute_ms, b1, sizeof b1),
           fmt_t(u, r->tp_ms, b2, sizeof b2), more, fmt_t(u, r->bubble_ms, b3, sizeof b3), fmt_t(u, r->dp_ms, b4, sizeof b4),
           fmt_t(u, r->optimizer_ms, b5, sizeof b5));
    if (r->megatron_flags && !pt && args) {     /* one line, the whole command: nothing to paste from another */
        char cmd[3072];
        megatron_command(c, args, r->megatron_flags, cmd, sizeof cmd);
        printf("%18s Megatron-LM: %s\n", "", cmd);
    } else if (r->megatron_flags && !pt) {
        printf("%18s Megatron-LM: %s\n", "", r->megatron_flags[0] ? r->megatron_flags : "(no --recompute flags)");
        if (needs_cpu_offload_v1(r->megatron_flags))
            printf("%18s (with TE >= 2.10 also NVTE_CPU_OFFLOAD_V1=1 in the environment: megatron/training/arguments.py)\n", "");
    }
    if (r->torchtitan) printf("%18s torchtitan: activation_checkpoint:%s\n", "", r->torchtitan);
    if (pt) {
        printf("%18s PyTorch: ", "");
        pytorch_wrap(stdout, c, r->policy);
        printf("\n");
    }
    int mine = !r->torchtitan && (pt || !r->megatron_flags);   /* no framework flag says it: the plan itself */
    if (mine) printf("%18s remat policy: %s\n", "", r->policy);
    if (explain || mine) cli_explain(stdout, c, r->policy);
}

/* the framework's own flags (besides the config group) */
typedef struct fw_opts {
    uint64_t mem;               /* --device-mem; 0: the device's */
    double host_link;           /* --host-link, GB/s per GPU and direction (given: replaces the device's) */
    cli_policies given;         /* --recompute */
    int maximize, explain, json, pareto;
    int gpus, top;              /* --gpus: the layout search over that world; --top: how many it prints */
    unsigned fixed;             /* REMAT_SEARCH_FIX_*: the dimensions given */
} fw_opts;

static int parse_device(const char *flag, const char *v, void *field)
{
    const remat_device *dv = remat_device_find(v);
    if (!dv) {
        char list[256];
        cli_error("%s expects one of %s, got '%s' (or give --device-mem)", flag, cli_preset_names(1, list, sizeof list), v);
        return 0;
    }
    *(remat_device *)field = *dv;
    return 1;
}

static const cli_choice maximize_choices[] = {
    {"micro-batch", REMAT_CLUSTER_MICROBATCH, 0}, {"batch", REMAT_CLUSTER_MICROBATCH, 1}, {"seq", REMAT_CLUSTER_SEQ, 0},
    {NULL, 0, 0},
};

#define STR_(x) #x
#define STR(x) STR_(x)
#define CL(field) offsetof(remat_cluster, field)
static const cli_flag cluster_flags[] = {
    {"--pp", "P", CLI_FLAG_INT, CL(pp), 1, 1 << 24, NULL, NULL, "pipeline stages"},
    {"--interleave", "V", CLI_FLAG_INT, CL(vpp), 1, 1 << 24, NULL, NULL, "model chunks per stage (interleaved 1F1B)"},
    {"--dp", "D", CLI_FLAG_INT, CL(dp), 1, 1 << 24, NULL, NULL, "data-parallel replicas"},
    {"--distributed-optimizer", NULL, CLI_FLAG_SWITCH, CL(dist_optim), 0, 0, NULL, NULL,
     "shard the optimizer state over the replicas"},
    {"--global-batch", "G", CLI_FLAG_INT, CL(global_batch), 1, 1 << 24, NULL, NULL, "sequences per iteration (default b x D)"},
    {"--device", "NAME", CLI_FLAG_CUSTOM, CL(dev), 0, 0, NULL, parse_device,
     "a GPU: the presets' names (fw_parse lists them; default a100-80gb)"},
    {"--reserve", "F", CLI_FLAG_DOUBLE, CL(reserve), 0, 0.99, NULL, NULL,
     "share of the GPU's memory kept back for the CUDA context, NCCL's\n"
     "buffers, TE's workspaces and fragmentation (default 0.05)"},
    {"--efficiency", "E", CLI_FLAG_DOUBLE, CL(efficiency), 0.001, 1, NULL, NULL,
     "share of the peak FLOP/s matrix products reach (default the device's: H100, H200,\n"
     "GH200 fitted to Megatron-LM's H100 table, the others Korthikanti's Table 5, README)"},
    {"--host-mem", "SIZE", CLI_FLAG_BYTES, CL(host_mem), 0, 0, NULL, NULL,
     "host memory per GPU that offloaded activations may take (default the\n"
     "device's: a DGX's system memory over its 8 GPUs, GH200's LPDDR5X)"},
    {"--first-stage-layers", "N", CLI_FLAG_INT, CL(first_layers), 1, REMAT_MAX_LAYERS, NULL, NULL,
     "an uneven pipeline: the first stage's layers (Megatron's\n"
     "--decoder-first-pipeline-num-layers; the first stage is the one planned)"},
    {"--last-stage-layers", "N", CLI_FLAG_INT, CL(last_layers), 1, REMAT_MAX_LAYERS, NULL, NULL,
     "the last stage's layers (--decoder-last-pipeline-num-layers)"},
    {"--no-tp-comm-overlap", NULL, CLI_FLAG_SWITCH, CL(no_tp_comm_overlap), 0, 0, NULL, NULL,
     "a run without Megatron's --tp-comm-overlap: the TP collectives charged in\n"
     "full (by default they hide behind their products where SP is on)"},
    {"--grad-reduce-in-bf16", NULL, CLI_FLAG_SWITCH, CL(grad_reduce_bf16), 0, 0, NULL, NULL,
     "Megatron-LM's --grad-reduce-in-bf16 (NeMo's performance recipes): bf16 gradients,\n"
     "2 bytes a parameter and half the data-parallel reduction (default fp32, --bf16's)"},
};
#undef CL
static const cli_flag micro_batch_flag[] = {   /* into the config: Megatron's name for --batch */
    {"--micro-batch", "b", CLI_FLAG_INT, offsetof(remat_config, batch), 1, REMAT_MAX_BATCH, NULL, NULL,
     "sequences per micro-batch (the same as --batch; default 1)"},
};
#define O(field) offsetof(fw_opts, field)
static const cli_flag fw_flags[] = {
    {"--device-mem", "SIZE", CLI_FLAG_BYTES, O(mem), 0, 0, NULL, NULL,
     "override the device's memory (what CUDA reports: torch.cuda.mem_get_info()[1])"},
    {"--host-link", "GB/s", CLI_FLAG_DOUBLE, O(host_link), 0, 1e4, NULL, NULL,
     "the offload bandwidth per GPU and direction, GB/s (default the device's\n"
     "host link; 0: no offload)"},
    {"--recompute", "POLICY", CLI_FLAG_CUSTOM, O(given), 0, 0, NULL, cli_parse_policy,
     "also predict POLICY on every model chunk (repeatable)"},
    {"--explain", NULL, CLI_FLAG_SWITCH, O(explain), 0, 0, NULL, NULL, "what each answer does with each layer, as layer ranges"},
    {"--pareto", NULL, CLI_FLAG_SWITCH, O(pareto), 0, 0, NULL, NULL,
     "the front of one model chunk's plans (keep, recompute or offload each\n"
     "layer), each priced per GPU: activations against iteration time"},
    {"--maximize", "micro-batch|seq", CLI_FLAG_CHOICE, O(maximize), 0, 0, maximize_choices, NULL,
     "the largest micro-batch or sequence at which each answer exists"},
    {"--gpus", "N", CLI_FLAG_INT, O(gpus), 1, 1 << 20, NULL, NULL,
     "search every layout of N GPUs Megatron-LM accepts (tp, cp, pp, its\n"
     "stages, interleave, dp, micro-batch, distributed optimizer, ep, etp),\n"
     "ranked by the time of its best Megatron-LM flags; --tp, --cp, --pp,\n"
     "--interleave, --dp, --micro-batch, --ep, --etp, --distributed-optimizer,\n"
     "--first/last-stage-layers given fix theirs (needs --global-batch)"},
    {"--top", "K", CLI_FLAG_INT, O(top), 1, 1000, NULL, NULL, "with --gpus: the layouts printed (default 5)"},
    CLI_FLAG_JSON(fw_opts, json, "{\"framework\", \"memory\", \"model_flops\", \"optimal\",\n"
                                 "\"best_megatron\", \"best_torchtitan\", \"rows\"}; with --gpus\n"
                                 "{\"search\", \"layouts\"} (README)"),
};
#undef O

static const char *unknown_flag(const char *flag)
{
    if (!strcmp(flag, "--budget") || !strcmp(flag, "--budget-activations"))
        return "with --framework the budget is the GPU's memory: give --device or --device-mem";
    return NULL;
}

/* Micro-batches per replica per iteration: G / (b D). */
static long micro_batches(const remat_config *c, const remat_cluster *cl)
{
    return (cl->global_batch ? cl->global_batch : (long)c->batch * cl->dp) / ((long)c->batch * cl->dp);
}

/* The help of flags whose meaning or default differs here from the CPU
 * trainer's (the config group's own help is remat train's) */
static const char *const fw_help[][2] = {
    {"--batch", "sequences per micro-batch (the same as --micro-batch; default 1)"},
    {"--dtype", "bf16 or fp32 (default bf16 for megatron, its --bf16; fp32 for pytorch)"},
    {"--dropout", "dropout on attention probabilities and residual branches (default 0.1\n"
                  "for megatron GPT-2, Megatron's default; 0 for megatron Llama, as its\n"
                  "Llama recipes set, and for pytorch)"},
    {"--attention", "naive ('unfused': the T x T probabilities stored) or flash (only the\n"
                    "logsumexp; default flash for megatron Llama, TE's fused attention; naive\n"
                    "otherwise: eager PyTorch)"},
    {"--gemm", "not used here: nothing runs (the CPU trainer's GEMM engine)"},
};

/* group g's flags into buf (max entries), with the help of fw_help's
 * flags and of --device (devices: the presets' names) replaced */
static cli_flag_group fw_group(cli_flag_group g, cli_flag *buf, size_t max, const char *devices)
{
    size_t n = g.n;
    if (n > max) return g;   /* every flag still parses; only its help is the trainer's (grow buf) */
    for (size_t i = 0; i < n; i++) {
        buf[i] = g.flags[i];
        for (size_t j = 0; j < sizeof fw_help / sizeof fw_help[0]; j++)
            if (!strcmp(buf[i].name, fw_help[j][0])) buf[i].help = fw_help[j][1];
        if (!strcmp(buf[i].name, "--device")) buf[i].help = devices;
    }
    g.flags = buf;
    g.n = n;
    return g;
}

/* The flags into c, cl and o, with the framework's defaults for what was
 * not given, checked.  1: run; 0: --help; else the exit status (reported). */
static int fw_parse(int argc, char **argv, remat_config *c, remat_cluster *cl, fw_opts *o)
{
    cli_config_start(c);
    remat_cluster_default(cl);
    memset(o, 0, sizeof *o);
    o->maximize = -1;
    o->top = 5;
    static cli_flag cbuf[128], kbuf[64];
    static char devices[256];
    char names[200];
    snprintf(devices, sizeof devices, "a GPU: %s (default %s)", cli_preset_names(1, names, sizeof names), cl->dev.name);
    cli_flag_group cfg = cli_config_group(c), clu = { "cluster:", CLI_FLAGS(cluster_flags), cl };
    cli_flag_group groups[] = {
        fw_group(clu, kbuf, sizeof kbuf / sizeof kbuf[0], devices), { NULL, CLI_FLAGS(micro_batch_flag), c },
        { NULL, CLI_FLAGS(fw_flags), o }, fw_group(cfg, cbuf, sizeof cbuf / sizeof cbuf[0], devices),
    };
    cli_command cmd = {
        "plan",
        "usage: remat plan --framework megatron|pytorch [--model NAME | config flags]\n"
        "                  [--tp T] [--sp] [--cp CP] [--pp P] [--interleave V] [--dp D]\n"
        "                  [--distributed-optimizer] [--micro-batch b] [--global-batch G] [--device NAME]\n"
        "                  [--device-mem SIZE] [--host-link GB/s] [--host-mem SIZE] [--reserve F] [--dtype bf16|fp32]\n"
        "                  [--efficiency E] [--no-tp-comm-overlap]\n"
        "                  [--recompute POLICY]... [--explain] [--maximize micro-batch|seq] [--pareto]\n"
        "                  [--json]\n"
        "       remat plan --framework megatron [--model NAME | config flags] --gpus N --global-batch G\n"
        "                  [--top K] [any of the layout flags above, to fix them] [--device NAME] [--json]\n\n"
        "Plans activation recomputation for a run of Megatron-LM or PyTorch on GPUs,\n"
        "without a GPU: the framework's saved tensors are a table that remat's simulator\n"
        "and planner run on.  Three answers, each with its memory per GPU and iteration\n"
        "time: the fastest plan that fits (any per-layer choice), the best that\n"
        "Megatron-LM's --recompute-* flags express, the best of torchtitan's\n"
        "activation_checkpoint settings.  The world is tp x cp x pp x dp GPUs; a plan\n"
        "may also offload what a layer keeps to host memory (--host-mem bounds it).\n\n"
        "  --framework megatron   Megatron-LM's layer: GPT-2's as Korthikanti et al. 2022 count it,\n"
        "                         Llama's with Transformer Engine (default --dtype bf16; dropout\n"
        "                         0.1 for GPT-2, 0 for Llama: Megatron's defaults and recipes)\n"
        "  --framework pytorch    what autograd saves for a plain PyTorch GPT-2 block or Llama\n"
        "                         decoder layer (default --dtype fp32, --dropout 0); the answers\n"
        "                         say which blocks to wrap in torch.utils.checkpoint\n\n",
        NULL, groups, 4, unknown_flag, " in framework mode", { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    if (cli_given(&cmd, "--device-mem") && !o->mem) return cli_error("--device-mem must be positive") + 1;
    if (o->mem) cl->dev.mem_bytes = o->mem;
    if (cli_given(&cmd, "--host-link")) cl->dev.host_bps = o->host_link * 1e9;
    if (cli_given(&cmd, "--batch") && cli_given(&cmd, "--micro-batch"))
        return cli_usage_error("plan", "--batch and --micro-batch are one setting here (the micro-batch); give one");
    if (cli_given(&cmd, "--host-mem") && !cl->host_mem) cl->dev.host_mem_bytes = 0;   /* none: 0 is not "the device's" */
    if (!cli_given(&cmd, "--dtype")) c->dtype = c->framework == REMAT_FRAMEWORK_MEGATRON ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
    /* Megatron's defaults are dropout 0.1 and, for Llama, the fused attention
     * backends; its Llama recipe sets --attention-dropout 0.0 --hidden-dropout 0.0
     * (examples/llama/train_llama3_8b_h100_fp8.sh) */
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->arch == REMAT_ARCH_LLAMA) {
        if (!cli_given(&cmd, "--attention")) c->attention = REMAT_ATTENTION_FLASH;
    } else if (!cli_given(&cmd, "--dropout") && c->framework == REMAT_FRAMEWORK_MEGATRON) {
        c->dropout = 0.1f;
    }
    if (!cli_given(&cmd, "--batch") && !cli_given(&cmd, "--micro-batch")) c->batch = 1;
    cli_config_default_max_seq(c);
    /* the layout search runs sequence parallelism with every TP above 1
     * (remat_cluster_search): a --tp it fixes needs no --sp to pass the
     * check (mixture of experts refuses TP without SP) */
    if (o->gpus) c->sp = remat_config_tp(c) > 1;
    if (cli_config_check(c)) return 2;
    if (cli_given(&cmd, "--top") && !o->gpus) return cli_usage_error("plan", "--top ranks the layouts of --gpus N");
    if (o->gpus) {      /* the layout search: the dimensions given are fixed, the others searched */
        static const struct { const char *flag; unsigned bit; } dims[] = {
            {"--tp", REMAT_SEARCH_FIX_TP}, {"--cp", REMAT_SEARCH_FIX_CP}, {"--pp", REMAT_SEARCH_FIX_PP},
            {"--interleave", REMAT_SEARCH_FIX_VPP}, {"--dp", REMAT_SEARCH_FIX_DP},
            {"--micro-batch", REMAT_SEARCH_FIX_MICROBATCH}, {"--batch", REMAT_SEARCH_FIX_MICROBATCH},
            {"--ep", REMAT_SEARCH_FIX_EP}, {"--etp", REMAT_SEARCH_FIX_ETP},
            {"--distributed-optimizer", REMAT_SEARCH_FIX_DIST_OPTIM},
            {"--first-stage-layers", REMAT_SEARCH_FIX_STAGES}, {"--last-stage-layers", REMAT_SEARCH_FIX_STAGES},
        };
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
            if (cli_given(&cmd, dims[i].flag)) o->fixed |= dims[i].bit;
        if (c->framework != REMAT_FRAMEWORK_MEGATRON)
            return cli_usage_error("plan", "--gpus searches Megatron-LM's layouts: --framework megatron");
        if (!cli_given(&cmd, "--global-batch"))
            return cli_usage_error("plan", "--gpus needs --global-batch G: each layout's micro-batches follow from it");
        if (o->maximize >= 0 || o->pareto || o->given.n)
            return cli_usage_error("plan", "--gpus ranks layouts; --maximize, --pareto and --recompute are for one "
                                   "layout (give its --tp, --cp, --pp, --dp without --gpus)");
        return 1;
    }
    if (remat_cluster_check(c, cl)) return cli_error("%s", remat_errmsg()) + 1;
    return 1;
}

/* The three answers (at the largest micro-batch or seq with --maximize:
 * best[] for each, c and cl moved to the optimum's), and the --recompute
 * rows. */
typedef struct fw_answers {
    remat_cluster_answer a;
    remat_cluster_row *gr;      /* one per --recompute */
    int ngiven;
    remat_cluster_row *front;   /* --pareto */
    size_t nfront;
    int best[3];                /* --maximize: optimal, best Megatron-LM, best torchtitan */
} fw_answers;

static void fw_answers_clear(fw_answers *an)
{
    for (int i = 0; i < an->ngiven; i++) remat_cluster_row_clear(&an->gr[i]);
    free(an->gr);
    remat_cluster_rows_free(an->front, an->nfront);
    remat_cluster_answer_clear(&an->a);
}

/* 0, or the exit status (reported) */
static int fw_solve(remat_config *c, remat_cluster *cl, const fw_opts *o, fw_answers *an)
{
    memset(an, 0, sizeof *an);
    if (!(an->gr = calloc(o->given.n ? (size_t)o->given.n : 1, sizeof *an->gr))) return cli_error("out of memory");
    if (o->maximize >= 0) {
        for (int w = 2; w >= 0; w--)        /* the optimum last: its answer is the one shown */
            if (remat_cluster_maximize(c, cl, (remat_cluster_dim)o->maximize, (remat_cluster_which)w, &an->best[w],
                                       w ? NULL : &an->a))
                return cli_error("%s", remat_errmsg());
        if (an->best[0] && o->maximize == REMAT_CLUSTER_SEQ) {
            c->seq = an->best[0];
            if (c->max_seq < c->seq) c->max_seq = c->seq;
        } else if (an->best[0]) {
            long m = micro_batches(c, cl);
            c->batch = an->best[0];
            cl->global_batch = (int)(m * c->batch * cl->dp);
        }
    } else if (remat_cluster_plan(c, cl, &an->a)) {
        return cli_error("%s", remat_errmsg());
    }
    for (; an->ngiven < o->given.n; an->ngiven++)
        if (remat_cluster_evaluate(c, cl, o->given.v[an->ngiven], &an->gr[an->ngiven]))
            return cli_error("--recompute %s: %s", o->given.v[an->ngiven], remat_errmsg()) + 1;
    if (o->pareto && remat_cluster_pareto(c, cl, &an->front, &an->nfront)) return cli_error("%s", remat_errmsg());
    return 0;
}

/* plans are per model chunk: each pipeline stage's L/(P V) layers (the
 * first stage's, with a pipeline) */
static remat_config chunk_of(const remat_config *c, const remat_cluster *cl)
{
    /* plans are per model chunk: the first stage's layers (an uneven
     * pipeline's --first-stage-layers) over its V chunks */
    remat_config ch = *c;
    ch.n_layer = remat_cluster_first_stage_layers(c, cl) / cl->vpp;
    if (cl->pp > 1) ch.stage = REMAT_STAGE_FIRST;
    return ch;
}

/* 0, or 1 (reported) */
static int fw_json(const remat_config *c, const remat_cluster *cl, const fw_opts *o, const fw_answers *an,
                   const remat_cluster_memory *mm)
{
    remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "framework", fw_name(c));
    remat_jsonw_str(w, "table", fw_table(c));
    char args[2048] = "";
    const remat_config *mg = c->framework == REMAT_FRAMEWORK_MEGATRON ? c : NULL;
    if (mg) {
        megatron_args(c, cl, args, sizeof args);
        remat_jsonw_str(w, "megatron_args", args);
        remat_jsonw_str(w, "megatron_env", megatron_env(c));   /* the environment every answer's command starts with */
    }
    remat_jsonw_object(w, "memory");
    remat_jsonw_uint(w, "params", mm->params);
    remat_jsonw_uint(w, "params_bytes", mm->params_bytes);
    remat_jsonw_uint(w, "grads_bytes", mm->grads_bytes);
    remat_jsonw_uint(w, "optim_bytes", mm->optim_bytes);
    remat_jsonw_end(w);
    remat_jsonw_num(w, "model_flops", remat_cluster_model_flops(c, cl));
    remat_jsonw_str(w, "device", cl->dev.name ? cl->dev.name : "");
    remat_jsonw_uint(w, "device_mem_bytes", cl->dev.mem_bytes);
    remat_jsonw_bool(w, "grad_reduce_bf16", cl->grad_reduce_bf16);
    remat_jsonw_uint(w, "host_mem_bytes", cl->host_mem ? cl->host_mem : cl->dev.host_mem_bytes);
    remat_jsonw_num(w, "host_link_bps", cl->dev.host_bps);
    remat_jsonw_object(w, "world");          /* Megatron's: tp x cp x pp x dp */
    remat_jsonw_int(w, "gpus", (int64_t)remat_config_tp(c) * remat_config_cp(c) * cl->pp * cl->dp);
    remat_jsonw_int(w, "tp", remat_config_tp(c));
    remat_jsonw_int(w, "cp", remat_config_cp(c));
    remat_jsonw_int(w, "pp", cl->pp);
    remat_jsonw_int(w, "dp", cl->dp);
    remat_jsonw_end(w);
    if (o->maximize >= 0) {
        remat_jsonw_object(w, "maximize");
        remat_jsonw_str(w, "dim", o->maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch");
        remat_jsonw_int(w, "optimal", an->best[0]);
        remat_jsonw_int(w, "best_megatron", an->best[1]);
        remat_jsonw_int(w, "best_torchtitan", an->best[2]);
        remat_jsonw_end(w);
    }
    remat_config ch = chunk_of(c, cl);
    const remat_config *pt = c->framework == REMAT_FRAMEWORK_PYTORCH ? &ch : NULL;
    row_json(w, "optimal", &an->a.optimal, mm, pt, mg, args);
    if (pt) remat_jsonw_null(w, "best_megatron");   /* PyTorch has no Megatron-LM flags */
    else row_json(w, "best_megatron", &an->a.best_megatron, mm, pt, mg, args);
    row_json(w, "best_torchtitan", &an->a.best_torchtitan, mm, pt, mg, args);
    if (pt && an->a.best_torchtitan.torchtitan) {    /* the best torchtitan answer as its job file */
        char *toml = NULL;
        size_t nt = 0;
        FILE *f = open_memstream(&toml, &nt);
        if (f) { torchtitan_toml(f, c, cl, an->a.best_torchtitan.torchtitan); if (fclose(f)) { free(toml); toml = NULL; } }
        remat_jsonw_str(w, "torchtitan_toml", toml ? toml : "");
        free(toml);
    }
    remat_jsonw_array(w, "rows");
    for (int i = 0; i < an->ngiven; i++) row_json(w, NULL, &an->gr[i], mm, pt, mg, args);
    for (size_t i = 0; i < an->a.nrows; i++) row_json(w, NULL, &an->a.rows[i], mm, pt, mg, args);
    remat_jsonw_end(w);
    if (o->pareto) {
        remat_jsonw_array(w, "pareto");
        for (size_t i = 0; i < an->nfront; i++) row_json(w, NULL, &an->front[i], mm, pt, mg, args);
        remat_jsonw_end(w);
    }
    remat_jsonw_end(w);
    return cli_json_close(w);
}

/* --pareto: each point's memory and time per GPU, and what its plan does
 * with the chunk's layers */
static void front_text(const remat_config *ch, const fw_answers *an, const fw_units *u)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("\nthe front of one model chunk's plans (%zu points), per GPU:\n", an->nfront);
    printf("%11s %11s %11s %11s  %s\n", "time", "activations", "total", "host", "layers kept / recomputed / offloaded");
    remat_layer_info *li = calloc((size_t)ch->n_layer, sizeof *li);
    for (size_t i = 0; i < an->nfront && li; i++) {
        const remat_cluster_row *r = &an->front[i];
        remat_schedule *s = NULL;
        int kept = 0, rec = 0, off = 0;
        if (!remat_schedule_create(ch, r->policy, &s) && !remat_schedule_layers(s, li))
            for (int l = 0; l < ch->n_layer; l++) {
                rec += li[l].recomputed != 0;
                off += li[l].offloaded != 0;
                kept += !li[l].recomputed && !li[l].offloaded;
            }
        remat_schedule_free(s);
        printf("%11s %11s %11s %11s  %d / %d / %d%s\n", fmt_t(u, r->step_ms_pred, b1, sizeof b1),
               fmt_b(u, r->peak_bytes, b2, sizeof b2), fmt_b(u, r->total_bytes, b3, sizeof b3),
               fmt_b(u, r->host_bytes, b4, sizeof b4), kept, rec, off, r->fits ? "" : "  (does not fit)");
    }
    free(li);
}

/* --framework pytorch: the layout's flags in PyTorch's terms (torchtitan
 * applies each: torchtitan/models/llama3/infra/parallelize.py) */
static void pytorch_layout(const remat_config *c, const remat_cluster *cl)
{
    printf("PyTorch: ");
    int k = 0;
    if (remat_config_tp(c) > 1)
        printf("%stp %d: torch.distributed.tensor.parallel (ColwiseParallel and RowwiseParallel on the projections%s)",
               k++ ? "; " : "", remat_config_tp(c), c->sp ? ", SequenceParallel on the norms and dropouts: --sp" : "");
    if (cl->pp > 1)
        printf("%spp %d: torch.distributed.pipelining (%s)", k++ ? "; " : "", cl->pp,
               cl->vpp > 1 ? "ScheduleInterleaved1F1B, --interleave's chunks per stage" : "Schedule1F1B");
    if (cl->dp > 1)
        printf("%sdp %d: DistributedDataParallel%s", k++ ? "; " : "", cl->dp,
               cl->dist_optim ? " with ZeroRedundancyOptimizer (--distributed-optimizer: the optimizer state sharded)" : "");
    if (!k) printf("one GPU");
    printf("; the plans below say which blocks to wrap (remat_torch plans and applies the same from a measured model)\n");
}

static void fw_text(const remat_config *c, const remat_cluster *cl, const fw_opts *o, const fw_answers *an,
                    const remat_cluster_memory *mm)
{
    char b1[32], b2[32], b3[32], b4[32];
    const remat_cluster_answer *a = &an->a;
    long m = micro_batches(c, cl);
    cli_config_print(stdout, c);
    printf("cluster: %s, %s per GPU (%.0f%% kept back), %.0f TFLOP/s x %.3f | pp %d%s, dp %d%s | "
           "global batch %ld = micro-batch %d x %ld x dp %d\n",
           cl->dev.name ? cl->dev.name : "device", cli_fmt_bytes(cl->dev.mem_bytes, b1, sizeof b1), 100 * cl->reserve,
           cl->dev.flops / 1e12, remat_cluster_efficiency(cl), cl->pp,
           cl->vpp > 1 ? ", interleaved" : "", cl->dp,
           cl->dist_optim ? cl->grad_reduce_bf16 ? " (distributed optimizer, bf16 gradients)" : " (distributed optimizer)"
                          : cl->grad_reduce_bf16 ? " (bf16 gradients)" : "",
           m * c->batch * cl->dp, c->batch, m, cl->dp);
    printf("world: %ld GPUs = tp %d x cp %d x pp %d x dp %d | host link %.0f GB/s, host memory %s per GPU\n",
           (long)remat_config_tp(c) * remat_config_cp(c) * cl->pp * cl->dp, remat_config_tp(c), remat_config_cp(c), cl->pp,
           cl->dp, cl->dev.host_bps / 1e9, cli_fmt_bytes(cl->host_mem ? cl->host_mem : cl->dev.host_mem_bytes, b2, sizeof b2));
    fw_units u = { mm->optim_bytes >= (1ULL << 30) };
    units_add(&u, &a->optimal);
    units_add(&u, &a->best_megatron);
    units_add(&u, &a->best_torchtitan);
    for (int i = 0; i < an->ngiven; i++) units_add(&u, &an->gr[i]);
    for (size_t i = 0; o->pareto && i < an->nfront; i++) units_add(&u, &an->front[i]);
    printf("per GPU: %llu parameters: weights %s, gradients %s, optimizer %s | model FLOPs per iteration %.4g\n",
           (unsigned long long)mm->params, fmt_b(&u, mm->params_bytes, b2, sizeof b2),
           fmt_b(&u, mm->grads_bytes, b3, sizeof b3), fmt_b(&u, mm->optim_bytes, b4, sizeof b4),
           remat_cluster_model_flops(c, cl));
    if (c->framework == REMAT_FRAMEWORK_PYTORCH) pytorch_layout(c, cl);
    if (c->arch == REMAT_ARCH_LLAMA) printf("table: %s\n", fw_table(c));
    /* Llama's runs are whole: each answer's line below is its command */
    char args[2048] = "";
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->arch == REMAT_ARCH_LLAMA) megatron_args(c, cl, args, sizeof args);
    const char *run = args[0] ? args : NULL;
    if (o->maximize >= 0 && c->framework == REMAT_FRAMEWORK_PYTORCH)
        printf("largest %s: optimal %d, torchtitan %d (answers below at %s %d)\n",
               o->maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch", an->best[0], an->best[2],
               o->maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch", an->best[0]);
    else if (o->maximize >= 0) {
        const char *what = o->maximize == REMAT_CLUSTER_SEQ ? "seq" : "micro-batch";
        printf("largest %s: optimal %d, Megatron-LM %d, torchtitan %d (answers below at %s %d)\n", what, an->best[0],
               an->best[1], an->best[2], what, an->best[0]);
    }
    remat_config ch = chunk_of(c, cl);
    if (cl->pp > 1) {
        printf("plans are per model chunk of %d layers (%d stages x %d chunk(s) each)\n", ch.n_layer, cl->pp, cl->vpp);
    }
    printf("\n");
    int pt = c->framework == REMAT_FRAMEWORK_PYTORCH;   /* PyTorch has no Megatron-LM flags to offer */
    answer_text("optimal", &a->optimal, &ch, o->explain, &u, run);
    if (!pt) answer_text("best Megatron-LM", &a->best_megatron, &ch, o->explain, &u, run);
    answer_text("best torchtitan", &a->best_torchtitan, &ch, o->explain, &u, run);
    if (pt && a->best_torchtitan.torchtitan) {      /* torchtitan's answer in its own keys, apart */
        printf("\nbest torchtitan as torchtitan's TOML job config (its JobConfig's [section] keys):\n");
        torchtitan_toml(stdout, c, cl, a->best_torchtitan.torchtitan);
    }
    for (int i = 0; i < an->ngiven; i++) {
        printf("\n");
        answer_text(o->given.v[i], &an->gr[i], &ch, o->explain, &u, run);
    }
    if (pt && a->best_torchtitan.policy && a->optimal.policy && a->best_torchtitan.step_ms_pred > a->optimal.step_ms_pred)
        printf("\ntorchtitan's settings cost %.1f%% over the optimum\n\n",
               100 * (a->best_torchtitan.step_ms_pred / a->optimal.step_ms_pred - 1));
    if (!pt && a->best_megatron.policy && a->optimal.policy && a->best_megatron.step_ms_pred > a->optimal.step_ms_pred) {
        if (a->best_torchtitan.policy)
            snprintf(b1, sizeof b1, "%.1f%%", 100 * (a->best_torchtitan.step_ms_pred / a->optimal.step_ms_pred - 1));
        printf("\nMegatron-LM's flags cost %.1f%% over the optimum, torchtitan's %s\n\n",
               100 * (a->best_megatron.step_ms_pred / a->optimal.step_ms_pred - 1),
               a->best_torchtitan.policy ? b1 : "(nothing fits)");
    }
    if (o->pareto) front_text(&ch, an, &u);
}

/* ---- the layout search (--gpus) ---------------------------------------------------- */

static double gib(uint64_t b) { return (double)b / 1073741824.0; }

/* a layout in words: "tp 4 sp, cp 2, pp 4, interleave 5, dp 2, micro-batch 1,
 * distributed optimizer" */
static void layout_words(const remat_cluster_layout *l, char *buf, size_t n)
{
    const remat_config *c = &l->cfg;
    const remat_cluster *k = &l->cl;
    size_t m = (size_t)snprintf(buf, n, "tp %d%s, cp %d, pp %d", remat_config_tp(c), c->sp ? " (sp)" : "",
                                remat_config_cp(c), k->pp);
#define ADD(...) do { if (m < n) m += (size_t)snprintf(buf + m, n - m, __VA_ARGS__); } while (0)
    if (k->vpp > 1) ADD(" (interleave %d)", k->vpp);
    if (k->last_layers || k->first_layers)
        ADD(" (%d layers a stage, the last %d)", remat_cluster_first_stage_layers(c, k),
            k->last_layers ? k->last_layers : remat_cluster_first_stage_layers(c, k));
    ADD(", dp %d", k->dp);
    if (c->n_experts > 0) ADD(", ep %d, etp %d", c->ep > 1 ? c->ep : 1, remat_config_etp(c));
    ADD(", micro-batch %d x %ld a replica%s", c->batch, micro_batches(c, k), k->dist_optim ? ", distributed optimizer" : "");
#undef ADD
}

static void search_json(const remat_config *base, const remat_cluster *bcl, const fw_opts *o,
                        const remat_cluster_layout *v, size_t n, const remat_cluster_search_stats *sx, double secs)
{
    remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "framework", "megatron");
    remat_jsonw_str(w, "table", fw_table(base));
    remat_jsonw_str(w, "device", bcl->dev.name ? bcl->dev.name : "");
    remat_jsonw_uint(w, "device_mem_bytes", bcl->dev.mem_bytes);
    remat_jsonw_bool(w, "grad_reduce_bf16", bcl->grad_reduce_bf16);
    remat_jsonw_object(w, "search");
    remat_jsonw_int(w, "gpus", o->gpus);
    remat_jsonw_int(w, "global_batch", bcl->global_batch);
    remat_jsonw_int(w, "seq", base->seq);
    remat_jsonw_int(w, "top", o->top);
    remat_jsonw_array(w, "fixed");           /* the dimensions given, as remat_cluster_search's bits say them */
    static const char *const names[] = { "tp", "cp", "pp", "vpp", "dp", "micro_batch", "ep", "etp", "dist_optim", "stages" };
    for (int i = 0; i < 10; i++)
        if (o->fixed & (1u << i)) remat_jsonw_str(w, NULL, names[i]);
    remat_jsonw_end(w);
    remat_jsonw_uint(w, "layouts", sx->layouts);
    remat_jsonw_uint(w, "pruned", sx->pruned);
    remat_jsonw_uint(w, "priced", sx->priced);
    remat_jsonw_uint(w, "planned", sx->planned);
    remat_jsonw_num(w, "seconds", secs);
    remat_jsonw_end(w);
    remat_jsonw_array(w, "layouts");         /* fastest first by best_megatron's step_ms_pred */
    for (size_t i = 0; i < n; i++) {
        const remat_config *c = &v[i].cfg;
        const remat_cluster *k = &v[i].cl;
        remat_cluster_memory mm;
        remat_cluster_memory_of(c, k, &mm);
        char args[2048];
        megatron_args(c, k, args, sizeof args);
        remat_jsonw_object(w, NULL);
        remat_jsonw_int(w, "rank", (int64_t)i + 1);
        remat_jsonw_object(w, "world");
        remat_jsonw_int(w, "gpus", (int64_t)remat_config_tp(c) * remat_config_cp(c) * k->pp * k->dp);
        remat_jsonw_int(w, "tp", remat_config_tp(c));
        remat_jsonw_bool(w, "sp", c->sp);
        remat_jsonw_int(w, "cp", remat_config_cp(c));
        remat_jsonw_int(w, "pp", k->pp);
        remat_jsonw_int(w, "vpp", k->vpp);
        remat_jsonw_int(w, "first_stage_layers", remat_cluster_first_stage_layers(c, k));
        remat_jsonw_int(w, "last_stage_layers", k->last_layers ? k->last_layers : k->pp > 1 ? remat_cluster_first_stage_layers(c, k)
                                                                                            : c->n_layer);
        remat_jsonw_int(w, "dp", k->dp);
        remat_jsonw_int(w, "ep", c->ep > 1 ? c->ep : 1);
        remat_jsonw_int(w, "etp", c->n_experts > 0 ? remat_config_etp(c) : 1);
        remat_jsonw_int(w, "micro_batch", c->batch);
        remat_jsonw_int(w, "micro_batches", micro_batches(c, k));
        remat_jsonw_bool(w, "dist_optim", k->dist_optim);
        remat_jsonw_end(w);
        remat_jsonw_str(w, "megatron_args", args);
        remat_jsonw_str(w, "megatron_env", megatron_env(c));
        remat_jsonw_object(w, "memory");
        remat_jsonw_uint(w, "params", mm.params);
        remat_jsonw_uint(w, "params_bytes", mm.params_bytes);
        remat_jsonw_uint(w, "grads_bytes", mm.grads_bytes);
        remat_jsonw_uint(w, "optim_bytes", mm.optim_bytes);
        remat_jsonw_end(w);
        remat_jsonw_num(w, "model_flops", remat_cluster_model_flops(c, k));
        row_json(w, "best_megatron", &v[i].answer.best_megatron, &mm, NULL, c, args);
        row_json(w, "optimal", &v[i].answer.optimal, &mm, NULL, c, args);
        remat_jsonw_end(w);
    }
    remat_jsonw_end(w);
    remat_jsonw_end(w);
    cli_json_close(w);
}

static void search_text(const remat_config *base, const remat_cluster *bcl, const fw_opts *o,
                        const remat_cluster_layout *v, size_t n, const remat_cluster_search_stats *sx, double secs)
{
    char b1[32], b2[32];
    cli_config_print(stdout, n ? &v[0].cfg : base);
    fw_units u = { 1 };
    printf("search: %d GPUs of %s, %s each (%s usable: %.0f%% kept back), seq %d, global batch %d%s%s\n", o->gpus,
           bcl->dev.name ? bcl->dev.name : "device", cli_fmt_bytes(bcl->dev.mem_bytes, b1, sizeof b1),
           fmt_b(&u, remat_cluster_usable(bcl), b2, sizeof b2), 100 * bcl->reserve, base->seq, bcl->global_batch,
           bcl->grad_reduce_bf16 ? ", bf16 gradients" : "", o->fixed ? " (the dimensions given fixed)" : "");
    printf("searched %llu layouts Megatron-LM accepts in %.2f s: %llu pruned (their weights, gradients and optimizer "
           "state alone do not fit), priced %llu layouts with no recomputation (a bound on each, and the answer where it "
           "fits), planned %llu (every Megatron-LM option that could beat the top)\n", (unsigned long long)sx->layouts,
           secs, (unsigned long long)sx->pruned, (unsigned long long)sx->priced, (unsigned long long)sx->planned);
    if (!n) return;
    printf("\nthe %zu fastest by their best Megatron-LM flags (iteration in ms; memory per GPU in GiB, of the stage that holds the most):\n", n);
    printf("%4s %3s %3s %4s %4s %5s %4s %4s %4s %4s %11s %8s %8s %8s %8s %8s %8s\n", "rank", "tp", "cp", "pp", "vpp",
           "dp", "ep", "etp", "mbs", "dopt", "iteration", "weights", "grads", "optim", "activ", "host", "total");
    int uneven = 0;
    for (size_t i = 0; i < n; i++) {
        const remat_config *c = &v[i].cfg;
        const remat_cluster *k = &v[i].cl;
        const remat_cluster_row *r = &v[i].answer.best_megatron;
        char pp[16];
        snprintf(pp, sizeof pp, k->last_layers || k->first_layers ? "%d*" : "%d", k->pp);
        uneven |= k->last_layers || k->first_layers;
        printf("%4zu %3d %3d %4s %4d %5d %4d %4d %4d %4s %11.1f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", i + 1,
               remat_config_tp(c), remat_config_cp(c), pp, k->vpp, k->dp, c->ep > 1 ? c->ep : 1,
               c->n_experts > 0 ? remat_config_etp(c) : 1, c->batch, k->dist_optim ? "yes" : "no", r->step_ms_pred,
               gib(r->stage_params_bytes), gib(r->stage_grads_bytes), gib(r->stage_optim_bytes), gib(r->peak_bytes),
               gib(r->host_bytes), gib(r->total_bytes));
    }
    if (uneven) printf("(pp N*: an uneven split, every stage but the last the same; the layout's line below says it)\n");
    for (size_t i = 0; i < n; i++) {
        const remat_config *c = &v[i].cfg;
        const remat_cluster *k = &v[i].cl;
        const remat_cluster_answer *a = &v[i].answer;
        char words[256], args[2048];
        layout_words(&v[i], words, sizeof words);
        megatron_args(c, k, args, sizeof args);
        remat_config ch = chunk_of(c, k);
        printf("\n#%zu  %s\n", i + 1, words);
        remat_cluster_row mg = a->best_megatron, opt = a->optimal;    /* the Megatron-LM answers alone */
        mg.torchtitan = opt.torchtitan = NULL;
        answer_text("best Megatron-LM", &mg, &ch, o->explain, &u, c->arch == REMAT_ARCH_LLAMA ? args : NULL);
        if (opt.policy && opt.step_ms_pred < mg.step_ms_pred) {
            opt.megatron_flags = NULL;      /* what no Megatron-LM flag says: remat's own plan */
            answer_text("remat's optimum", &opt, &ch, o->explain, &u, NULL);
        }
    }
    printf("\n");
}

/* 0, or the exit status (reported) */
static int search_run(const remat_config *c, const remat_cluster *cl, const fw_opts *o)
{
    remat_cluster_layout *v = NULL;
    size_t n = 0;
    remat_cluster_search_stats sx;
    double t0 = cli_now_ms();
    remat_status st = remat_cluster_search(c, cl, o->gpus, o->fixed, o->top, &v, &n, &sx);
    double secs = (cli_now_ms() - t0) / 1000;
    if (st) return cli_error("%s", remat_errmsg()) + (st == REMAT_ERR_INVALID);
    if (o->json) search_json(c, cl, o, v, n, &sx, secs);
    else search_text(c, cl, o, v, n, &sx, secs);
    remat_cluster_layouts_free(v, n);
    if (!n) {
        char b[32];
        return cli_error("no layout of %d GPUs fits in %s per GPU (%llu layouts priced); add GPUs, shorten --seq%s",
                         o->gpus, cli_fmt_bytes(remat_cluster_usable(cl), b, sizeof b), (unsigned long long)sx.priced,
                         o->fixed ? ", or fix fewer dimensions" : "");
    }
    return 0;
}

int cli_plan_framework(int argc, char **argv)
{
    remat_config c;
    remat_cluster cl;
    fw_opts o;
    fw_answers an;
    int rc = fw_parse(argc, argv, &c, &cl, &o);
    if (rc != 1) return rc;
    if (o.gpus) return search_run(&c, &cl, &o);
    if ((rc = fw_solve(&c, &cl, &o, &an))) { fw_answers_clear(&an); return rc; }
    remat_cluster_memory mm;
    remat_cluster_memory_of(&c, &cl, &mm);
    if (o.json) rc = fw_json(&c, &cl, &o, &an, &mm);
    else fw_text(&c, &cl, &o, &an, &mm);
    if (!rc && !an.a.optimal.policy) {   /* with --json too: the answers are null there, the reason is here */
        char b[32];
        rc = cli_error("nothing fits in %s per GPU; add GPUs (--tp, --pp), shorten --seq or --micro-batch%s",
                       cli_fmt_bytes(cl.dev.mem_bytes, b, sizeof b),
                       cl.dist_optim ? "" : (long)cl.dp * remat_config_cp(&c) > 1 ? ", or use --distributed-optimizer"
                                                      : ", or use --distributed-optimizer with --dp");
    }
    fw_answers_clear(&an);
    return rc;
}
