/*
 * cluster.c -- planning runs of Megatron-LM and PyTorch on GPU clusters:
 * pipeline and data parallelism around the simulated model chunk, the
 * weights/gradients/optimizer bytes per GPU, a time model per device, and
 * the three answers of `remat plan --framework ...` (the unconstrained
 * optimum, the best Megatron-LM flags, the best torchtitan setting).  The
 * model is stated in remat.h ("cluster planning"); the README has the
 * formulas and the device sources, and docs/cluster.md, "Iteration times
 * against the paper's Table 5", the comparison with Korthikanti et al. 2022.
 *
 * Memory comes from the simulator on the framework's tensor table
 * (table/frameworks.c), run on one model chunk for one micro-batch; this
 * file only multiplies it by the micro-batches in flight (Section 4.2.4 of
 * the paper) and adds the parameter state.  Time comes from the cost pass
 * (cost.c) with per-op times from the device profile filled here.
 */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"
#include "../kernels/bf16.h"
#include "../table/params.h"

#define GiB (1024.0 * 1024.0 * 1024.0)

/* The memory a GPU has for a run: what CUDA reports as its total (cudaMemGetInfo,
 * the "total capacity" of PyTorch's out-of-memory message, what its caching
 * allocator can ever hold; nvidia-smi's total is a little larger), not the
 * datasheet's figure, each from a public log of that GPU:
 *   - A100 40GB: 39.50 GiB (TianheWu/CoSeR issue 10, "one A100");
 *   - A100 80GB: 79.35 GiB (Instruction-Tuning-with-GPT-4/GPT-4-LLM issue 16, 2x A100 80G);
 *   - H100 80GB: 79.11 GiB (vllm-project/vllm issue 27508; other logs show
 *     79.10-79.21 by driver: the smallest kept; nvidia-smi shows 81559 MiB,
 *     79.65 GiB, which the allocator does not get);
 *   - H200: 139.81 GiB (sungwon-chae/arxiv_confi, etu_logging.md): the
 *     datasheet's "141GB" is about GiB, so 141e9 bytes was 8.5 GiB short;
 *   - GH200 96GB: 97280 MiB, 95.0 GiB (mredenti/PowerCapping,
 *     configuration/OpenCL_benchmark.md: OpenCL's global memory of "NVIDIA
 *     GH200 480GB", driver 555.42.06);
 *   - B200: 182631 MiB, 178.35 GiB (public 8x B200 logs found by content
 *     search, "total capacity of 178.36 GiB", and a device dump of "NVIDIA
 *     B200", "182631 MiB"; their repositories were not identified: check it).
 * What a run may use of it is remat_cluster_usable: this less the reserve. */
#define MIB (1024.0 * 1024.0)

/* Hopper's matrix-product efficiency: the share that makes remat's step
 * time of NVIDIA's Llama 3.1 8B BF16 recipe on one DGX H100 (TP 1, CP 2,
 * DP 4, micro-batch 1, global batch 128, seq 8192: 12.27 s a step,
 * github.com/NVIDIA/dgxc-benchmarking llama3.1/README.md at 741c886,
 * v25.04) exact: one node, no pipeline, no tensor parallelism, the
 * reduction over NVLink, so little but the compute is modelled.  The
 * recipe's other published rows (70B, 405B, the 8B on 128 GPUs) and
 * Megatron-LM's README table (images/model_table.png at 937571cf) are held
 * out: tests/test_frameworks.c recomputes the fit and prints each
 * (docs/cluster.md, "Hopper's efficiency").  0.727 before, fitted to that
 * README table's 1.7B-32B runs when the model charged their data-parallel
 * rings one NIC per GPU (see ctx_init_stage). */
#define H100_EFFICIENCY 0.584
#define XSTR_(x) #x
#define XSTR(x) XSTR_(x)
#define H100_EFF_TEXT XSTR(H100_EFFICIENCY) ", fitted to NVIDIA's Llama 3.1 8B BF16 recipe on 8 H100s (dgxc-benchmarking " \
    "v25.04, 12.27 s a step; docs/cluster.md)"
#define A100_EFF_TEXT XSTR(REMAT_CLUSTER_EFFICIENCY) ": Korthikanti et al. 2022 Table 5 (REMAT_CLUSTER_EFFICIENCY)"

/* Dense (no sparsity) bf16 tensor-core FLOP/s, HBM bandwidth, NVLink per
 * GPU and direction (half the bidirectional figure NVIDIA quotes), the
 * network per GPU of NVIDIA's DGX systems (one HDR 200 Gb/s or NDR 400 Gb/s
 * adapter per GPU), the host link per direction and the host memory per GPU
 * (a DGX's system memory over its 8 GPUs; GH200's own LPDDR5X), and the
 * GPUs that NVLink joins in a node.
 *
 * The host link is a measured rate of copies between pinned host memory and
 * the GPU, published, not the datasheet's (half its bidirectional PCIe Gen4
 * x16 64 GB/s, Gen5 x16 128 GB/s, NVLink-C2C 900 GB/s), which no copy
 * reaches; where the two directions were measured apart, the slower:
 *   A100 (Gen4): 25 GB/s -- nvbandwidth's host_to_device_memcpy_sm on an
 *     A100-SXM4-40GB, 25.13 GB/s at 512 MiB and 1 GiB buffers
 *     (NVIDIA/nvbandwidth#42); "25 GBps ... measured peak" of Gen4 x16
 *     (ZaidQureshi/bam#54);
 *   H100, H200 (Gen5): 53 GB/s -- on an H100 node, nvbandwidth's
 *     host_to_device_memcpy_ce 56.7-57.1 GB/s (NVIDIA/nvbandwidth#6, three of
 *     a VM's four GPUs; the fourth, 14.2, was misplaced) and
 *     device_to_host_memcpy_sm 52.8 GB/s on each of 8 (NVIDIA/nvbandwidth#24);
 *     H200 is on the same Gen5 x16, not measured here;
 *   GH200 (NVLink-C2C): 300 GB/s -- host to device 346 GB/s by copy engine
 *     (342 by SM), device to host about 15% slower (NVIDIA/nvbandwidth#23);
 *   B200 (Gen5 x16 to its Xeon hosts): H100's 53 GB/s; no B200 measurement
 *     was found.
 * --host-link GB/s replaces it. */
static const remat_device devices[] = {
    { "a100-40gb", (uint64_t)(39.50 * GiB), 312e12, 1555e9, 300e9, 25e9,
      "NVIDIA A100 datasheet (SXM4 40GB: 312 TFLOP/s bf16 dense, 1,555 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s: 25 GB/s measured, "
      "NVIDIA/nvbandwidth#42); "
      "DGX A100 (8x HDR 200 Gb/s, 1 TB system memory); 39.50 GiB as CUDA reports it (TianheWu/CoSeR#10); efficiency "
      A100_EFF_TEXT,
      25e9, (uint64_t)125e9, 8, REMAT_CLUSTER_EFFICIENCY },
    { "a100-80gb", (uint64_t)(79.35 * GiB), 312e12, 2039e9, 300e9, 25e9,
      "NVIDIA A100 datasheet (SXM4 80GB: 312 TFLOP/s bf16 dense, 2,039 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s: 25 GB/s measured, "
      "NVIDIA/nvbandwidth#42); "
      "DGX A100 640GB (8x HDR 200 Gb/s, 2 TB system memory); 79.35 GiB as CUDA reports it "
      "(Instruction-Tuning-with-GPT-4/GPT-4-LLM#16); efficiency "
      A100_EFF_TEXT, 25e9, (uint64_t)250e9, 8, REMAT_CLUSTER_EFFICIENCY },
    { "h100-80gb", (uint64_t)(79.11 * GiB), 989e12, 3350e9, 450e9, 50e9,
      "NVIDIA H100 datasheet (SXM5 80GB: 989 TFLOP/s bf16 dense, 3.35 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s: 53 GB/s measured, "
      "NVIDIA/nvbandwidth#6, #24); "
      "DGX H100 (8x NDR 400 Gb/s, 2 TB system memory); 79.11 GiB as CUDA reports it (vllm-project/vllm#27508); efficiency "
      H100_EFF_TEXT, 53e9, (uint64_t)250e9, 8, H100_EFFICIENCY },
    { "h200-141gb", (uint64_t)(139.81 * GiB), 989e12, 4800e9, 450e9, 50e9,
      "NVIDIA H200 datasheet (SXM 141GB: 989 TFLOP/s bf16 dense, 4.8 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s: H100's 53 GB/s "
      "measured); "
      "DGX H200 (8x NDR 400 Gb/s, 2 TB system memory); 139.81 GiB as CUDA reports it "
      "(sungwon-chae/arxiv_confi, etu_logging.md); efficiency H100's (the same GH100 compute; not measured on an H200): "
      H100_EFF_TEXT, 53e9, (uint64_t)250e9, 8, H100_EFFICIENCY },
    { "gh200-96gb", (uint64_t)(97280 * MIB), 989e12, 4000e9, 450e9, 50e9,
      "NVIDIA GH200 Grace Hopper Superchip datasheet (96GB HBM3: 4 TB/s, Hopper's 989 TFLOP/s bf16 dense, NVLink "
      "900 GB/s, NVLink-C2C 900 GB/s to 480 GB LPDDR5X: 300 GB/s measured, NVIDIA/nvbandwidth#23); 4 superchips a node (HPE Cray EX254n), NDR 400 Gb/s each; "
      "97280 MiB as the driver reports it (mredenti/PowerCapping, configuration/OpenCL_benchmark.md); efficiency "
      "H100's (the same GH100 compute; not measured on a GH200): " H100_EFF_TEXT, 300e9, (uint64_t)480e9, 4, H100_EFFICIENCY },
    { "b200-180gb", (uint64_t)(182631 * MIB), 2250e12, 8000e9, 900e9, 50e9,
      "NVIDIA HGX B200 (1,000 W: 2,250 TFLOP/s bf16 dense, half the 4,500 with sparsity); DGX B200 datasheet "
      "(8 GPUs: 1,440 GB HBM3e, 64 TB/s, NVLink 5 at 1.8 TB/s per GPU, 8x ConnectX-7 400 Gb/s, "
      "2 TB system memory, Xeon hosts on PCIe Gen5 x16: H100's 53 GB/s measured); 182631 MiB as CUDA reports it (public 8x B200 logs, "
      "their repositories not identified); efficiency A100's: no published bf16 B200 step times were found to "
      "fit; " A100_EFF_TEXT, 53e9, (uint64_t)250e9, 8, REMAT_CLUSTER_EFFICIENCY },
};

/* GPT-2 and Korthikanti's models, then Llama 3: dim, layers, heads and kv
 * heads are torchtitan's flavors (torchtitan/models/llama3/__init__.py at
 * b5bcd76: _1b .. _405b), the MLP width its compute_ffn_hidden_dim (2/3 of
 * 4C, times ffn_dim_multiplier 1.5, 1.0, 1.3, 1.3, 1.2, rounded up to
 * multiple_of 1024 or 4096), vocabulary 128256, 1B and 3B tied
 * (enable_weight_tying); RoPE theta 500000 with Llama 3.1's rope_scaling
 * (factor 8, or 32 for 3.2; 1, 4, 8192) and eps 1e-5 as Hugging Face's
 * meta-llama config.json files have them; s 8192, torchtitan's and
 * Megatron's Llama 3 recipes' training length. */
#define LLAMA3(name_, L, C, NH, F, tied, factor, src)                                                         \
    { .name = name_, .n_layer = L, .n_embd = C, .n_head = NH, .vocab = 128256, .seq = 8192, .source = src,    \
      .arch = REMAT_ARCH_LLAMA, .n_kv_head = 8, .ffn_dim = F, .tie_embeddings = tied, .rope_theta = 500000,   \
      .norm_eps = 1e-5, .rope_scaling = { REMAT_ROPE_LLAMA3, factor, 1, 4, 8192 } }
/* mixture of experts: every layer's MLP routed (Mixtral's and Qwen3's
 * decoder_sparse_step 1, no mlp_only_layers), no shared experts, Qwen3's
 * q_norm and k_norm (Qwen3MoeAttention); seq 4096,
 * the Megatron recipes' training length (Megatron-MoE-ModelZoo) */
#define MOE(name_, L, C, NH, KV, HS, V, s, theta, eps, E, K, MF, SF, QKN, src)                                \
    { .name = name_, .n_layer = L, .n_embd = C, .n_head = NH, .vocab = V, .seq = s, .source = src,            \
      .arch = REMAT_ARCH_LLAMA, .n_kv_head = KV, .head_dim = HS, .ffn_dim = MF, .rope_theta = theta,          \
      .norm_eps = eps, .n_experts = E, .moe_topk = K, .moe_ffn_dim = MF, .moe_shared_dim = SF, .qk_norm = QKN }
/* DeepSeek-V3 (deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json at
 * 9b4e978: 61 layers, dim 7168, 128 heads, inter_dim 18432 for the 3 dense
 * layers, 256 routed experts of moe_inter_dim 2048, 8 activated, 1 shared,
 * 8 expert groups with 4 limited, route_scale 2.5, sigmoid scores,
 * q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128, vocab
 * 129280; inference/model.py there: rope_theta 10000, RMSNorm eps 1e-6);
 * untied; seq 4096 (Megatron-MoE-ModelZoo's DeepSeek-V3 recipe) */
#define DEEPSEEK(name_, L, C, NH, V, s, F, E, K, MF, SF, LQ, LKV, DN, DR, DV, ND, G, GK, SC, src)               \
    { .name = name_, .n_layer = L, .n_embd = C, .n_head = NH, .vocab = V, .seq = s, .source = src,            \
      .arch = REMAT_ARCH_LLAMA, .n_kv_head = NH, .ffn_dim = F, .rope_theta = 10000, .norm_eps = 1e-6,         \
      .n_experts = E, .moe_topk = K, .moe_ffn_dim = MF, .moe_shared_dim = SF, .q_lora_rank = LQ,              \
      .kv_lora_rank = LKV, .qk_nope_dim = DN, .qk_rope_dim = DR, .v_head_dim = DV, .moe_first_dense = ND,     \
      .moe_groups = G, .moe_group_topk = GK, .moe_scaling = SC }
#define GPT(name_, L, C, NH, V, s, src)                                                                        \
    { .name = name_, .n_layer = L, .n_embd = C, .n_head = NH, .vocab = V, .seq = s, .source = src, .arch = REMAT_ARCH_GPT2 }
static const remat_model_preset presets[] = {
    GPT("22b", 48, 6144, 64, 51200, 2048, "Korthikanti et al. 2022, Table 3"),
    GPT("175b", 96, 12288, 96, 51200, 2048, "Korthikanti et al. 2022, Table 3 (GPT-3)"),
    GPT("530b", 105, 20480, 128, 51200, 2048, "Korthikanti et al. 2022, Table 3 (MT-NLG)"),
    GPT("1t", 128, 25600, 160, 51200, 2048, "Korthikanti et al. 2022, Table 3"),
    GPT("gpt2", 12, 768, 12, 50257, 1024, "GPT-2 124M (Radford et al. 2019)"),
    GPT("gpt2-medium", 24, 1024, 16, 50257, 1024, "GPT-2 350M"),
    GPT("gpt2-large", 36, 1280, 20, 50257, 1024, "GPT-2 774M"),
    GPT("gpt2-xl", 48, 1600, 25, 50257, 1024, "GPT-2 1.5B"),
    LLAMA3("llama3-8b", 32, 4096, 32, 14336, 0, 8, "torchtitan llama3 8B; meta-llama/Llama-3.1-8B"),
    LLAMA3("llama3-70b", 80, 8192, 64, 28672, 0, 8, "torchtitan llama3 70B; meta-llama/Llama-3.1-70B"),
    LLAMA3("llama3-405b", 126, 16384, 128, 53248, 0, 8, "torchtitan llama3 405B; meta-llama/Llama-3.1-405B"),
    LLAMA3("llama3.2-1b", 16, 2048, 32, 8192, 1, 32, "torchtitan llama3 1B; meta-llama/Llama-3.2-1B"),
    LLAMA3("llama3.2-3b", 28, 3072, 24, 8192, 1, 32, "torchtitan llama3 3B; meta-llama/Llama-3.2-3B"),
    MOE("mixtral-8x7b", 32, 4096, 32, 8, 128, 32000, 4096, 1e6, 1e-5, 8, 2, 14336, 0, 0,
        "mistralai/Mixtral-8x7B-v0.1 config.json (MixtralConfig's defaults, transformers 5.18)"),
    MOE("mixtral-8x22b", 56, 6144, 48, 8, 128, 32000, 4096, 1e6, 1e-5, 8, 2, 16384, 0, 0,
        "mistralai/Mixtral-8x22B-v0.1 config.json"),
    MOE("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 151936, 4096, 1e6, 1e-6, 128, 8, 768, 0, 1,
        "Qwen/Qwen3-30B-A3B config.json (Qwen3MoeConfig's expert defaults, transformers 5.18)"),
    MOE("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 151936, 4096, 1e6, 1e-6, 128, 8, 1536, 0, 1,
        "Qwen/Qwen3-235B-A22B config.json"),
    DEEPSEEK("deepseek-v3", 61, 7168, 128, 129280, 4096, 18432, 256, 8, 2048, 2048, 1536, 512, 128, 64, 128, 3, 8, 4,
             2.5, "deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json at 9b4e978"),
};

void remat_model_preset_apply(const remat_model_preset *p, remat_config *c)
{
    c->n_layer = p->n_layer;
    c->n_embd = p->n_embd;
    c->n_head = p->n_head;
    c->vocab = p->vocab;
    c->seq = p->seq;
    c->arch = p->arch;
    c->n_kv_head = p->n_kv_head;
    c->ffn_dim = p->ffn_dim;
    c->head_dim = p->head_dim;
    c->tie_embeddings = p->tie_embeddings;
    c->rope_theta = p->rope_theta;
    c->norm_eps = p->norm_eps;
    c->rope_scaling = p->rope_scaling;
    c->n_experts = p->n_experts;
    c->moe_topk = p->moe_topk;
    c->moe_ffn_dim = p->moe_ffn_dim;
    c->moe_shared_dim = p->moe_shared_dim;
    c->qk_norm = p->qk_norm;
    c->q_lora_rank = p->q_lora_rank;
    c->kv_lora_rank = p->kv_lora_rank;
    c->qk_nope_dim = p->qk_nope_dim;
    c->qk_rope_dim = p->qk_rope_dim;
    c->v_head_dim = p->v_head_dim;
    c->moe_first_dense = p->moe_first_dense;
    c->moe_groups = p->moe_groups;
    c->moe_group_topk = p->moe_group_topk;
    c->moe_scaling = p->moe_scaling;
}

#define NDEV ((int)(sizeof devices / sizeof devices[0]))
#define NPRESET ((int)(sizeof presets / sizeof presets[0]))

int remat_device_count(void) { return NDEV; }
const remat_device *remat_device_get(int i) { return i >= 0 && i < NDEV ? &devices[i] : NULL; }
const remat_device *remat_device_find(const char *name)
{
    for (int i = 0; name && i < NDEV; i++)
        if (!strcmp(devices[i].name, name)) return &devices[i];
    return NULL;
}
int remat_model_preset_count(void) { return NPRESET; }
const remat_model_preset *remat_model_preset_get(int i) { return i >= 0 && i < NPRESET ? &presets[i] : NULL; }
const remat_model_preset *remat_model_preset_find(const char *name)
{
    for (int i = 0; name && i < NPRESET; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

void remat_cluster_default(remat_cluster *cl)
{
    memset(cl, 0, sizeof *cl);
    cl->pp = cl->vpp = cl->dp = 1;
    cl->dev = devices[1];
    cl->reserve = 0.05;
}

static long micro_per_replica(const remat_config *c, const remat_cluster *cl)
{
    long G = cl->global_batch ? cl->global_batch : (long)c->batch * cl->dp;
    return G / ((long)c->batch * cl->dp);
}

remat_status remat_cluster_check(const remat_config *c, const remat_cluster *cl)
{
    remat_status st;
    if (!c || !cl) return remat_fail(REMAT_ERR_INVALID, "cluster planning: NULL argument");
    if (c->framework != REMAT_FRAMEWORK_MEGATRON && c->framework != REMAT_FRAMEWORK_PYTORCH)
        return remat_fail(REMAT_ERR_INVALID, "cluster planning needs a framework table: --framework megatron or pytorch");
    if (c->stage != REMAT_STAGE_WHOLE)
        return remat_fail(REMAT_ERR_INVALID, "cluster planning takes the whole model (stage 0); the pipeline is --pp");
    if ((st = remat_config_check(c))) return st;
    if (cl->pp < 1 || cl->pp > 4096) return remat_fail(REMAT_ERR_INVALID, "--pp must be in [1, 4096], got %d", cl->pp);
    if (cl->vpp < 1 || cl->vpp > 4096) return remat_fail(REMAT_ERR_INVALID, "--interleave must be in [1, 4096], got %d", cl->vpp);
    if (cl->dp < 1 || cl->dp > (1 << 20)) return remat_fail(REMAT_ERR_INVALID, "--dp must be in [1, 1048576], got %d", cl->dp);
    if (cl->first_layers < 0 || cl->last_layers < 0 || ((cl->first_layers || cl->last_layers) && (cl->vpp > 1 || cl->pp < 2)))
        return remat_fail(REMAT_ERR_INVALID, "--first-stage-layers and --last-stage-layers need --pp 2 or more and no "
                          "--interleave");
    if (cl->first_layers || cl->last_layers) {
        int mid = cl->pp - (cl->first_layers > 0) - (cl->last_layers > 0);
        int rest = c->n_layer - cl->first_layers - cl->last_layers;
        if (rest < 0 || (mid == 0 ? rest != 0 : rest % mid || rest == 0))
            return remat_fail(REMAT_ERR_INVALID, "layers %d less the first stage's %d and the last's %d do not split "
                              "evenly over the other %d stages", c->n_layer, cl->first_layers, cl->last_layers, mid);
    } else if (c->n_layer % (cl->pp * cl->vpp)) {
        /* Megatron's uneven splits (--decoder-first/last-pipeline-num-layers)
         * are not modelled: every stage holds the same layers */
        char list[200];
        size_t k = 0;
        list[0] = 0;
        for (int p = 1; p <= c->n_layer && k < sizeof list - 8; p++)
            if (c->n_layer % (p * cl->vpp) == 0) k += (size_t)snprintf(list + k, sizeof list - k, " %d", p);
        return remat_fail(REMAT_ERR_INVALID, "layers %d do not split into --pp %d x --interleave %d model chunks; pick "
                          "sizes whose product divides the layers (--pp with --interleave %d:%s)", c->n_layer, cl->pp,
                          cl->vpp, cl->vpp, k ? list : " none");
    }
    if (c->n_experts > 0) {
        /* Megatron's expert grid (parallel_state.py, initialize_model_parallel):
         * the T x CP x D ranks of a stage regrouped as ETP x EP x expert-DP */
        long EP = c->ep > 1 ? c->ep : 1, ETP = remat_config_etp(c);
        if (((long)remat_config_tp(c) * remat_config_cp(c) * cl->dp) % (EP * ETP))
            return remat_fail(REMAT_ERR_INVALID, "--ep %ld x --etp %ld must divide a stage's tp x cp x dp = %ld GPUs "
                              "(Megatron carves the expert grid from them); raise --dp", EP, ETP,
                              (long)remat_config_tp(c) * remat_config_cp(c) * cl->dp);
    }
    if (c->moe_first_dense > 0 && cl->vpp > 1)
        return remat_fail(REMAT_ERR_INVALID, "a dense prefix (--moe-first-dense) is planned stage by stage without "
                          "--interleave (the interleaved schedule's chunks of dense and routed layers are not modelled)");
    if (cl->vpp > 1 && cl->pp < 2)
        return remat_fail(REMAT_ERR_INVALID, "--interleave %d needs pipeline parallelism (--pp 2 or more)", cl->vpp);
    if (cl->global_batch < 0 || cl->global_batch % ((long)c->batch * cl->dp))
        return remat_fail(REMAT_ERR_INVALID, "--global-batch %d is not a multiple of micro-batch %d x dp %d",
                          cl->global_batch, c->batch, cl->dp);
    long m = micro_per_replica(c, cl);
    if (cl->vpp > 1 && m % cl->pp)
        return remat_fail(REMAT_ERR_INVALID, "the interleaved schedule needs the micro-batches per replica (%ld) to be "
                          "a multiple of --pp %d; raise --global-batch", m, cl->pp);
    const remat_device *d = &cl->dev;
    if (!d->mem_bytes || !(d->flops > 0) || !(d->hbm_bps > 0) || !(d->link_bps > 0) || !(d->net_bps > 0) ||
        !isfinite(d->flops) || !isfinite(d->hbm_bps) || !isfinite(d->link_bps) || !isfinite(d->net_bps))
        return remat_fail(REMAT_ERR_INVALID, "the device's memory, FLOP/s and bandwidths must be positive");
    if (!(d->host_bps >= 0) || !isfinite(d->host_bps) || d->node_gpus < 1)
        return remat_fail(REMAT_ERR_INVALID, "the device's host link must be >= 0 bytes/s (0: none, no offload) and "
                          "its node at least 1 GPU");
    if (!(cl->efficiency >= 0 && cl->efficiency <= 1))
        return remat_fail(REMAT_ERR_INVALID, "efficiency must be in (0, 1], got %g", cl->efficiency);
    if (!(cl->reserve >= 0 && cl->reserve < 1))
        return remat_fail(REMAT_ERR_INVALID, "--reserve must be in [0, 1), got %g", cl->reserve);
    if (cl->grad_reduce_bf16 && (cl->grad_reduce_bf16 != 1 || c->dtype != REMAT_DTYPE_BF16 ||
                                 c->framework != REMAT_FRAMEWORK_MEGATRON))
        return remat_fail(REMAT_ERR_INVALID, "--grad-reduce-in-bf16 is Megatron-LM's, and needs --dtype bf16 "
                          "(arguments.py reads it only with --bf16: fp32 weights keep fp32 gradients)");
    return REMAT_OK;
}

/* The first stage's layers: L / P, or Megatron's uneven split's first
 * (--decoder-first-pipeline-num-layers), or with only the last stage's set,
 * the share of the others.  The first stage is the one planned: it holds
 * the most micro-batches in flight (Korthikanti 4.2.4). */
int remat_cluster_first_stage_layers(const remat_config *c, const remat_cluster *cl)
{
    if (cl->first_layers) return cl->first_layers;
    if (cl->last_layers) return (c->n_layer - cl->last_layers) / (cl->pp - 1);
    return c->n_layer / cl->pp;
}

/* ---- weights, gradients, optimizer ---------------------------------------- */

double remat_cluster_efficiency(const remat_cluster *cl)
{
    if (cl->efficiency > 0) return cl->efficiency;
    return cl->dev.efficiency > 0 ? cl->dev.efficiency : REMAT_CLUSTER_EFFICIENCY;
}

unsigned remat_cluster_overlaps(const remat_config *c, const remat_cluster *cl)
{
    unsigned m = 0;
    /* Megatron reduces the gradients (and the distributed optimizer
     * shards and gathers the weights) over the data- and context-parallel
     * ranks together: DistributedDataParallel's buffers take
     * intra_dp_cp_group, get_data_parallel_group(with_context_parallel=True)
     * (megatron/core/distributed/distributed_data_parallel.py,
     * param_and_grad_buffer.py at d98e8a6).  So with CP > 1 there is a
     * reduction to overlap even at D = 1 */
    if ((long)cl->dp * remat_config_cp(c) > 1) m |= REMAT_OVERLAP_GRAD_REDUCE;
    if ((long)cl->dp * remat_config_cp(c) > 1 && cl->dist_optim) m |= REMAT_OVERLAP_PARAM_GATHER;
    /* Transformer Engine's userbuffers: Megatron-LM's; PyTorch's
     * SequenceParallel has no such overlap by default */
    if (remat_config_tp(c) > 1 && c->sp && !cl->no_tp_comm_overlap && c->framework == REMAT_FRAMEWORK_MEGATRON)
        m |= REMAT_OVERLAP_TP_COMM;
    return m;
}

/* The layers of pipeline stage s (V = 1: the stage; interleaved: its first
 * model chunk, V of which are alike): [*first, *first + *n).  Megatron's
 * uneven split gives the first and the last stage their own counts and the
 * others the rest evenly (remat_cluster_check). */
static void stage_layers(const remat_config *c, const remat_cluster *cl, int s, int *first, int *n)
{
    int P = cl->pp, mid_stages = P - (cl->first_layers > 0) - (cl->last_layers > 0);
    int rest = c->n_layer - cl->first_layers - cl->last_layers;
    int mid = cl->first_layers || cl->last_layers ? (mid_stages ? rest / mid_stages : 0) : c->n_layer / (P * cl->vpp);
    int a = 0;
    for (int q = 0; q < s; q++) a += q == 0 && cl->first_layers ? cl->first_layers : mid;
    *first = a;
    *n = s == 0 && cl->first_layers ? cl->first_layers : s == P - 1 && cl->last_layers ? cl->last_layers : mid;
}

/* the dense-prefix layers among [first, first + n) */
static int dense_in(const remat_config *c, int first, int n)
{
    int d = c->moe_first_dense - first;
    return d < 0 ? 0 : d > n ? n : d;
}

/* 5.1.0's field sits in what was 5.0.0's tail padding: the size is 5.0.0's */
_Static_assert(sizeof(remat_cluster) == ((offsetof(remat_cluster, no_tp_comm_overlap) + sizeof(int) +
                                          _Alignof(remat_cluster) - 1) & ~(_Alignof(remat_cluster) - 1)),
               "remat_cluster.grad_reduce_bf16 grew the struct (an ABI break)");

/* Bytes of one gradient element: Megatron-LM's --bf16 keeps fp32 gradient
 * buffers (arguments.py:1204-1217 at d98e8a6 sets
 * accumulate_allreduce_grads_in_fp32; param_and_grad_buffer.py:924,
 * grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype) unless
 * --grad-reduce-in-bf16; fp32 weights have fp32 gradients */
static uint64_t grad_bytes(const remat_config *c, const remat_cluster *cl)
{
    return c->dtype == REMAT_DTYPE_BF16 && cl->grad_reduce_bf16 ? 2 : 4;
}

/* The parameter state of stage s's GPU: its layers' parameters
 * (remat_layer_params: a dense prefix's and the routed layers' apart), the
 * embedding on the first stage, the final norm and an untied output layer
 * on the last (with one stage, both), split by T but what every rank holds
 * whole (params.c).  *grad_copy (may be NULL) gets the fp32 copy of the
 * gradient shard that the optimizer step makes from bf16 gradients
 * (grad_reduce_bf16), after the activations are freed: Megatron's
 * distributed optimizer's shard_model_grad.float() (distrib_optimizer.py:2792
 * at d98e8a6), the other's main_grad.float() of every gradient
 * (optimizer.py:1097); with fp32 gradients .float() copies nothing */
static remat_status stage_memory(const remat_config *c, const remat_cluster *cl, int s, remat_cluster_memory *out,
                                      uint64_t *grad_copy)
{
    memset(out, 0, sizeof *out);
    remat_param_layout ly;
    remat_param_layout_of(c, &ly);
    const remat_param_table *pt = remat_params_of(c);
    uint64_t split = 0, whole = 0, T = (uint64_t)remat_config_tp(c);
    int a, n, nd = 0;
    stage_layers(c, cl, s, &a, &n);
    /* interleaved, the stage holds V model chunks of n layers, P chunks
     * apart (chunk v's first layer a + v P n): every one's parameters */
    for (int v = 0; v < cl->vpp; v++) nd += dense_in(c, a + v * cl->pp * n, n);
    n *= cl->vpp;
    for (int i = 0; i < ly.count; i++) {
        const remat_param_def *d = &pt->defs[i];
        if (d->per_layer || d->stage == RP_UNCOUNTED || (d->stage == RP_LAST && s < cl->pp - 1) ||
            (d->stage == RP_FIRST && s > 0))
            continue;
        if (d->replicated) whole += ly.numel[i];
        else split += ly.numel[i];
    }
    /* the layers; with experts the routed ones' weights are over EP x ETP
     * and their optimizer state over the expert-data-parallel ranks,
     * T CP D / (EP ETP) of them (Megatron's expert_data_parallel group,
     * parallel_state.py; PR #4687's division) */
    uint64_t xn = 0, XD = 1, EP = c->ep > 1 ? (uint64_t)c->ep : 1, ETP = (uint64_t)remat_config_etp(c);
    for (int kind = 0; kind < 2; kind++) {
        uint64_t cnt = kind ? (uint64_t)(n - nd) : (uint64_t)nd, ls, lw, lr;
        if (!cnt) continue;
        remat_layer_params(c, kind ? c->n_layer - 1 : 0, &ls, &lw, &lr);   /* the last layer: routed */
        split += cnt * ls;
        whole += cnt * lw;
        xn += cnt * lr / (EP * ETP);
    }
    if (c->n_experts > 0) XD = (uint64_t)T * (uint64_t)cl->dp * (uint64_t)remat_config_cp(c) / (EP * ETP);
    uint64_t pn = split / T + whole;
    out->params = pn + xn;
    /* the distributed optimizer shards over the data- and context-parallel
     * ranks together (Megatron's dp_cp group, param_and_grad_buffer.py) */
    uint64_t D = (uint64_t)cl->dp * (uint64_t)remat_config_cp(c);
    uint64_t w = c->dtype == REMAT_DTYPE_BF16 ? 2 : 4, o = c->dtype == REMAT_DTYPE_BF16 ? 12 : 8;
    uint64_t g = grad_bytes(c, cl);
    /* bf16: bf16 weights, fp32 gradients (bf16 with grad_reduce_bf16), fp32
     * main weights + 2 moments; fp32: fp32 weights and gradients, 2 moments */
    out->params_bytes = w * (pn + xn);
    out->grads_bytes = g * (pn + xn);
    out->optim_bytes = cl->dist_optim ? (o * pn + D - 1) / D + (o * xn + XD - 1) / XD : o * (pn + xn);
    if (grad_copy)
        *grad_copy = g == 4 ? 0 : cl->dist_optim ? (4 * pn + D - 1) / D + (4 * xn + XD - 1) / XD : 4 * (pn + xn);
    return REMAT_OK;
}

/* The most parameter state (weights, gradients, optimizer) any stage's GPU
 * holds: the first stage's, or with a dense prefix, planned stage by stage,
 * the largest stage's (the layout search's pruning: cl checked) */
uint64_t remat_cluster_state_max(const remat_config *c, const remat_cluster *cl)
{
    uint64_t most = 0;
    for (int s = 0; s < (c->moe_first_dense > 0 ? cl->pp : 1); s++) {
        remat_cluster_memory m;
        stage_memory(c, cl, s, &m, NULL);
        uint64_t b = m.params_bytes + m.grads_bytes + m.optim_bytes;
        if (b > most) most = b;
    }
    return most;
}

remat_status remat_cluster_memory_of(const remat_config *c, const remat_cluster *cl, remat_cluster_memory *out)
{
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_memory_of: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_cluster_check(c, cl))) return st;
    return stage_memory(c, cl, 0, out, NULL);
}

/* The table's FLOPs of one micro-batch's step (remat_table_step_flops, exact
 * in 128 bits) times the micro-batches of an iteration, rounded once: the
 * nearest double to the exact count.  For GPT-2's framework tables that is
 * Appendix A's 72 G L s h^2 + 12 G L s^2 h + 6 G s h V. */
double remat_cluster_model_flops(const remat_config *c, const remat_cluster *cl)
{
    remat_u128 G = cl->global_batch ? (remat_u128)cl->global_batch : (remat_u128)c->batch * (remat_u128)cl->dp;
    return (double)(G / (remat_u128)c->batch * remat_table_step_flops(c));
}

/* ---- the evaluation context ----------------------------------------------- */

typedef struct ctx {
    remat_config chunk;       /* what is simulated: one model chunk, one micro-batch */
    remat_cluster cl;
    remat_profile prof;       /* the device's op times for chunk */
    const remat_table *tb;
    int P, V, T, CP, Lc;
    long m;                   /* micro-batches per replica per iteration */
    double seqs;              /* G: sequences per iteration */
    uint64_t f;               /* chunk micro-batches in flight on the first stage */
    uint64_t res_inflight;    /* resident bytes of the micro-batches in flight */
    double head_ms, head_flops;   /* P > 1: the LM head, on the last stage */
    double dp_ms, opt_ms;     /* per iteration: data-parallel reduction, optimizer step */
    double dp_rs_ms, dp_ag_ms;/* dp_ms in parts: gradient reduction, weight all-gather (distributed optimizer) */
    unsigned overlaps;        /* remat_cluster_overlaps */
    /* in prof's op times: the tensor-parallel collectives, the context-parallel
     * ring's exposed time */
    double tp_fwd[RT_MAXT], tp_bwd[RT_MAXT], cp_fwd[RT_MAXT], cp_bwd[RT_MAXT];
    double dtp_fwd[RT_MAXT], dtp_bwd[RT_MAXT];   /* the collectives of a dense prefix's layer */
    /* the pipeline stage this chunk is (a chain with a dense prefix is planned
     * stage by stage: stages_init below), the stages like it, whether it sends
     * its output on (all but the last stage) */
    int stage, mult, sends;
    int any_dense, any_routed;  /* the model has layers of a dense prefix, routed or uniform ones */
    remat_cluster_memory mem;
    uint64_t grad_copy;       /* the optimizer step's fp32 copy of bf16 gradients (stage_memory) */
    uint64_t usable;          /* device memory less the reserve */
    uint64_t host;            /* host memory per GPU for offloaded activations */
} ctx;

/* What context parallelism's ring adds to an attention op of entry d (its
 * compute ms fwd, bwd) that does not hide behind it: TE's
 * AttnFuncWithCPAndKVP2P runs cp steps, each computing the GPU's queries
 * against one K/V chunk while the next chunk comes from the ring neighbour
 * (forward: cp - 1 transfers of one chunk; backward: the chunk, then the
 * chunk with its gradient, cp - 2 times, then the last gradient alone);
 * over NVLink when the T x CP GPUs of a group fit one node, else the
 * network. */
static void cp_ring(const remat_config *c, const remat_cluster *cl, int t, double fwd, double bwd, double *cf,
                    double *cb)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    int CP = remat_config_cp(c), T = remat_config_tp(c);
    *cf = *cb = 0;
    if (CP < 2 || d->opc != RO_ATTENTION || !(d->flags & RT_F_CP)) return;
    remat_dims dm;
    remat_dims_of(c, &dm);
    double chunk = 2.0 * (double)dm.d[RD_B] * (double)dm.d[RD_T] / CP * (double)dm.d[RD_KV] / T *
                   (double)dm.d[RD_HS] * remat_dtype_bytes(c->dtype);
    double bw = (T * CP <= cl->dev.node_gpus ? cl->dev.link_bps : cl->dev.net_bps) / 1e3;   /* per ms */
    double sf = fwd / CP, sb = bwd / CP, t1 = chunk / bw;
    if (remat_tensor_cost(c, t)->fprod) *cf = (CP - 1) * (t1 > sf ? t1 - sf : 0);
    if (remat_tensor_cost(c, t)->bprod)
        *cb = 2 * (t1 > sb ? t1 - sb : 0) + (CP - 2) * (2 * t1 > sb ? 2 * t1 - sb : 0);
}

/* Fills p with the device model's op times for config c (milliseconds);
 * tp_fwd, tp_bwd, cp_fwd, cp_bwd (may be NULL) get the tensor-parallel
 * collectives' and the context-parallel ring's share. */
/* The device model's times of block `layer`'s ops (-1: a routed or uniform
 * layer's, and the globals) into fwd, bwd, and of them the tensor-parallel
 * collectives' and the context-parallel ring's share (tp_*, cp_*: may be
 * NULL). */
static void layer_times(const remat_config *c, const remat_cluster *cl, double eff, int layer, double *fwd,
                        double *bwd, double *tp_fwd, double *tp_bwd, double *cp_fwd, double *cp_bwd)
{
    const remat_table *tb = remat_table_of(c);
    double F = cl->dev.flops * eff / 1e3, H = cl->dev.hbm_bps / 1e3, K = cl->dev.link_bps / 1e3;  /* per ms */
    int T = remat_config_tp(c);
    if (layer < 0) layer = c->n_layer - 1;    /* the chain's last block: remat_tensor_bytes's */
    /* a collective moves the full (unsharded) activation of the GPU's own
     * tokens (s / cp of them) that a column-parallel linear reads, or a
     * row-parallel one writes (s b h, or MLA's up projections' s b Lq and
     * s b Lkv): ring all-reduce 2(T-1)/T of it per GPU, all-gather and
     * reduce-scatter (T-1)/T each */
    double ring = T > 1 ? 2.0 * (T - 1) / T / K : 0;
    int tpo = (remat_cluster_overlaps(c, cl) & REMAT_OVERLAP_TP_COMM) != 0;
    /* the expert-parallel all-to-all (RT_F_A2A): the GPU's routed rows, all
     * but 1/EP of them to other GPUs, over NVLink when the T x EP GPUs it
     * spans (the EP group's ranks are T apart, Megatron's default order)
     * fit a node, else the network; the expert-TP gather and scatter ride
     * in it (counted once); none in a dense layer (no routed rows) */
    double a2a = 0;
    if (c->n_experts > 0 && (c->ep > 1 || remat_config_etp(c) > 1)) {
        remat_dims dm;
        remat_dims_at(c, layer, &dm);
        double bw = (double)T * (c->ep > 1 ? c->ep : 1) <= cl->dev.node_gpus ? K : cl->dev.net_bps / 1e3;
        double etp = remat_config_etp(c), rows = (double)dm.d[RD_R] / etp;    /* before the expert-TP gather */
        a2a = rows * c->n_embd * remat_dtype_bytes(c->dtype) * (c->ep > 1 ? (c->ep - 1.0) / c->ep : 0) / bw;
        a2a += (etp - 1) * rows * c->n_embd * remat_dtype_bytes(c->dtype) / K;   /* the gather, in the node */
    }
    for (int t = 0; t < tb->first_grad; t++) {
        const remat_tensor_def *d = &tb->defs[t];
        int lay = t < tb->nblock ? layer : -1;
        double out = (double)remat_tensor_bytes_at(c, t, lay);
        double in = remat_input_bytes_at(c, tb, d->fwd_in, lay), bin = remat_input_bytes_at(c, tb, d->bwd_in, lay);
        int gemm = (d->flags & RT_F_GEMM) != 0;
        /* matrix products are compute-bound; the rest streams its operands */
        fwd[t] = remat_tensor_flops_at(c, t, lay, 0) / F + (gemm ? 0 : (out + in) / H);
        bwd[t] = d->has_bwd ? remat_tensor_flops_at(c, t, lay, 1) / F + (gemm ? 0 : (2 * out + bin) / H) : 0;
        double cf = 0, cb = 0, rf, rb;
        cp_ring(c, cl, t, fwd[t], bwd[t], &rf, &rb);
        if (d->flags & (RT_F_COL | RT_F_ROW)) {
            /* the collective's activation, whole: the input a column-parallel
             * linear gathers, the output a row-parallel one reduces */
            int v = d->flags & RT_F_COL ? (d->fwd_in[0] == RT_X ? tb->nblock - 1 : d->fwd_in[0]) : t;
            uint64_t sh = c->sp && (tb->defs[v].flags & RT_F_SP) ? (uint64_t)T : 1;
            double ar = ring * (double)(remat_tensor_bytes_at(c, v, lay) * sh), half = ar / 2;
            if (d->flags & RT_F_COL) { cf = c->sp ? half : 0; cb = c->sp ? half : ar; }
            else { cf = c->sp ? half : ar; cb = c->sp ? half : 0; }
            if (!out) cf = cb = 0;    /* no shared experts: no product */
        }
        if (tpo && (d->flags & (RT_F_COL | RT_F_ROW))) {
            /* --tp-comm-overlap (Transformer Engine's userbuffers): the
             * sequence-parallel all-gather before a column-parallel product
             * and the reduce-scatter after a row-parallel one run in chunks
             * while the product computes its other chunks (forward and
             * dgrad), and the backward's all-gather and reduce-scatter run
             * beside its wgrad; only what outlasts the product is exposed */
            double gf = remat_tensor_flops_at(c, t, lay, 0) / F, gb = remat_tensor_flops_at(c, t, lay, 1) / F;
            cf = cf > gf ? cf - gf : 0;
            cb = cb > gb ? cb - gb : 0;
        }
        if (d->flags & RT_F_A2A) cf = cb = a2a;
        if (!d->has_bwd) cb = rb = 0;
        fwd[t] += cf + rf;
        bwd[t] += cb + rb;
        if (tp_fwd) { tp_fwd[t] = cf; tp_bwd[t] = cb; }
        if (cp_fwd) { cp_fwd[t] = rf; cp_bwd[t] = rb; }
    }
}

/* Fills p with the device model's op times for config c (milliseconds);
 * tp_fwd, tp_bwd, cp_fwd, cp_bwd (may be NULL) get the tensor-parallel
 * collectives' and the context-parallel ring's share; a chain with a dense
 * prefix gets its dense layers' times too (p->dense_*, and their collectives
 * in dtp_fwd, dtp_bwd: may be NULL). */
static void fill_device_profile(remat_profile *p, const remat_config *c, const remat_cluster *cl, double eff,
                                double *tp_fwd, double *tp_bwd, double *cp_fwd, double *cp_bwd, double *dtp_fwd,
                                double *dtp_bwd)
{
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->measured = 0;
    p->gflops = cl->dev.flops * eff / 1e9;
    p->other_gflops = p->gflops;
    p->gbps = cl->dev.hbm_bps / 1e9;
    p->threads = 1;
    p->host_bps = cl->dev.host_bps;
    layer_times(c, cl, eff, -1, p->fwd_ms, p->bwd_ms, tp_fwd, tp_bwd, cp_fwd, cp_bwd);
    if (c->moe_first_dense > 0) {
        double cf[RT_MAXT], cb[RT_MAXT];
        p->dense = 1;
        layer_times(c, cl, eff, 0, p->dense_fwd_ms, p->dense_bwd_ms, dtp_fwd, dtp_bwd, cf, cb);
    }
    memcpy(p->fwd_hot_ms, p->fwd_ms, sizeof p->fwd_ms);
    memcpy(p->bwd_hot_ms, p->bwd_ms, sizeof p->bwd_ms);
    snprintf(p->desc, sizeof p->desc, "%s: %.0f TFLOP/s x %.3f, HBM %.0f GB/s, link %.0f GB/s", cl->dev.name ? cl->dev.name : "device",
             cl->dev.flops / 1e12, eff, cl->dev.hbm_bps / 1e9, cl->dev.link_bps / 1e9);
}

/* The context of pipeline stage s's chunk.  One kind (staged 0): the first
 * stage, which holds the most micro-batches in flight (Korthikanti 4.2.4),
 * with the LM head's time on the last stage added to its own -- every stage
 * alike.  A chain with a dense prefix (staged 1): stage s as it is, its own
 * layers (dense ones first), parameters, micro-batches in flight under
 * 1F1B (P - s, or the m there are) and, on the last stage, the head in its
 * own schedule. */
static remat_status ctx_init_stage(ctx *x, const remat_config *c, const remat_cluster *cl, int s, int staged)
{
    remat_status st;
    memset(x, 0, sizeof *x);
    if ((st = remat_cluster_check(c, cl))) return st;
    if ((st = stage_memory(c, cl, s, &x->mem, &x->grad_copy))) return st;
    int first, n;
    stage_layers(c, cl, s, &first, &n);
    x->cl = *cl;
    x->P = cl->pp;
    x->V = cl->vpp;
    x->T = remat_config_tp(c);
    x->stage = s;
    x->mult = 1;
    x->any_dense = c->moe_first_dense > 0;
    x->any_routed = c->moe_first_dense < c->n_layer;
    x->sends = x->P > 1 && (!staged || s < x->P - 1);
    x->Lc = n;
    x->m = micro_per_replica(c, cl);
    x->seqs = (double)x->m * c->batch * cl->dp;
    x->chunk = *c;
    x->chunk.n_layer = x->Lc;
    x->chunk.moe_first_dense = dense_in(c, first, n);
    if (x->sends) x->chunk.stage = REMAT_STAGE_FIRST;
    x->tb = remat_table_of(c);
    double eff = remat_cluster_efficiency(cl);
    x->CP = remat_config_cp(c);
    fill_device_profile(&x->prof, &x->chunk, cl, eff, x->tp_fwd, x->tp_bwd, x->cp_fwd, x->cp_bwd, x->dtp_fwd,
                        x->dtp_bwd);
    /* micro-batches in flight on the stage (Korthikanti 4.2.4): 1F1B
     * holds P - s (fewer when there are fewer), the interleaved schedule
     * P (1 + (P-1)/(P V)), that is P V + P - 1 model chunks, on the first */
    uint64_t res = remat_table_resident_bytes(&x->chunk);
    if (x->V > 1) {
        x->f = (uint64_t)(x->P * x->V + x->P - 1);
        x->res_inflight = res * x->f / (uint64_t)x->V;
    } else {
        uint64_t inflight = (uint64_t)(x->P - s);
        x->f = inflight < (uint64_t)x->m ? inflight : (uint64_t)x->m;
        x->res_inflight = res * x->f;
    }
    if (x->P > 1 && !staged) {     /* the head runs on the last stage */
        remat_config whole = x->chunk;
        whole.stage = REMAT_STAGE_WHOLE;
        remat_profile hp;
        fill_device_profile(&hp, &whole, cl, eff, NULL, NULL, NULL, NULL, NULL, NULL);
        for (int i = 0; i < x->tb->nlmhead; i++) {
            x->head_ms += hp.fwd_ms[x->tb->lmhead[i]];
            x->head_flops += remat_tensor_fwd_flops(&whole, x->tb->lmhead[i]);
        }
        for (int i = 0; i < x->tb->nlmhead_bwd; i++) {
            x->head_ms += hp.bwd_ms[x->tb->lmhead_bwd[i]];
            x->head_flops += remat_tensor_bwd_flops(&whole, x->tb->lmhead_bwd[i]);
        }
    }
    /* data parallelism: the gradients (fp32, or bf16 with grad_reduce_bf16)
     * all-reduced (2(D-1)/D of them per GPU), or reduce-scattered and the
     * bf16 weights all-gathered with the distributed optimizer; the
     * optimizer streams its state once.  Under
     * context parallelism the D CP ranks of a stage's shard reduce together */
    double np = (double)x->mem.params, D = (double)cl->dp * x->CP;
    double wbytes = remat_dtype_bytes(c->dtype);
    /* Megatron's rank order tp-cp-ep-dp-pp: a stage's D CP ranks are the
     * T CP D consecutive ranks' every T-th, so NVLink joins them when those
     * fit a node.  Else the group has g = node_gpus / T ranks in each node,
     * each with its own NIC (one a GPU in the DGX presets), and NCCL spreads
     * its rings' channels over all g of them: a ring's bus bandwidth is the
     * node's g NICs together, up to NVLink's (NVIDIA/nccl#812: "8x200Gbit/s
     * IB cards and we measure 192GB/s AllReduce BusBW" on a DGX A100, eight
     * NICs' 25 GB/s; #412: more NICs, more bandwidth, "up to ... the NVLink
     * intra-node bandwidth").  With T = node_gpus, one NIC */
    double g = (double)(cl->dev.node_gpus / x->T > 1 ? cl->dev.node_gpus / x->T : 1);
    double dpbw = ((double)x->T * x->CP * cl->dp <= cl->dev.node_gpus ? cl->dev.link_bps
                                                                       : fmin(cl->dev.link_bps, g * cl->dev.net_bps)) / 1e3;
    if (D > 1) {
        double gb = (double)grad_bytes(c, cl);
        x->dp_rs_ms = (cl->dist_optim ? (D - 1) / D * gb * np : 2 * (D - 1) / D * gb * np) / dpbw;
        x->dp_ag_ms = cl->dist_optim ? (D - 1) / D * wbytes * np / dpbw : 0;
        x->dp_ms = x->dp_rs_ms + x->dp_ag_ms;
    }
    x->overlaps = remat_cluster_overlaps(c, cl);
    /* fp32 main weights, moments: read and written; gradients read (bf16
     * ones read, copied to fp32 and the copy read: 2 + 4 + 4) */
    double state = c->dtype == REMAT_DTYPE_BF16 ? (grad_bytes(c, cl) == 2 ? 34 : 28) : 24;
    x->opt_ms = (cl->dist_optim ? (state * np / D + wbytes * np) : (state + wbytes) * np) / (cl->dev.hbm_bps / 1e3);
    x->usable = remat_cluster_usable(cl);
    x->host = cl->host_mem ? cl->host_mem : cl->dev.host_mem_bytes;
    return REMAT_OK;
}

static remat_status ctx_init(ctx *x, const remat_config *c, const remat_cluster *cl)
{
    return ctx_init_stage(x, c, cl, 0, 0);
}

/* The stages to plan: one context per kind of stage (its layers, dense
 * layers, whether it is the last), the earliest of each kind (it holds the
 * most micro-batches in flight), its count in mult.  Without a dense prefix
 * one: the first stage, for every stage (ctx_init_stage's staged 0). */
#define MAX_KINDS 8
typedef struct stages { ctx *k; int n; } stages;

static void stages_free(stages *S)
{
    free(S->k);
    S->k = NULL;
    S->n = 0;
}

static remat_status stages_init(stages *S, const remat_config *c, const remat_cluster *cl)
{
    remat_status st;
    S->n = 0;
    if (!(S->k = remat_calloc(MAX_KINDS, sizeof *S->k))) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    if (c->moe_first_dense <= 0 || cl->pp < 2) {
        if ((st = ctx_init(&S->k[0], c, cl))) goto fail;
        S->n = 1;
        return REMAT_OK;
    }
    if ((st = remat_cluster_check(c, cl))) goto fail;
    int key[MAX_KINDS][3];
    for (int s = 0; s < cl->pp; s++) {
        int first, n, j;
        stage_layers(c, cl, s, &first, &n);
        int kk[3] = { n, dense_in(c, first, n), s == cl->pp - 1 };
        for (j = 0; j < S->n; j++)
            if (key[j][0] == kk[0] && key[j][1] == kk[1] && key[j][2] == kk[2]) break;
        if (j < S->n) { S->k[j].mult++; continue; }
        if (S->n == MAX_KINDS) {
            st = remat_fail(REMAT_ERR_INVALID, "more than %d kinds of pipeline stage (their layers, dense layers): not "
                            "modelled", MAX_KINDS);
            goto fail;
        }
        if ((st = ctx_init_stage(&S->k[S->n], c, cl, s, 1))) goto fail;
        memcpy(key[S->n], kk, sizeof kk);
        S->n++;
    }
    return REMAT_OK;
fail:
    stages_free(S);
    return st;
}

/* ---- one row ------------------------------------------------------------------ */

/* How a framework re-runs recomputed work.  remat recomputes only what the
 * backward reads; torch.utils.checkpoint and Megatron's CheckpointFunction
 * re-run the whole checkpointed region (per block: `region`), outputs
 * included; a region's cached outputs (torchtitan's per-op selective
 * checkpointing) are not re-run. */
typedef struct rerun { uint32_t region, cached, dregion; /* dregion: in a dense prefix's layer */ } rerun;

/* One chunk's time in the parts a row reports: the whole, and of it the
 * tensor-parallel collectives, the context-parallel ring and the offload
 * not hidden; FLOPs */
typedef struct parts { double ms, tp, cp, off, fl; } parts;

/* what the framework re-runs beyond the schedule's recomputation */
static remat_status rerun_extra(const ctx *x, const remat_schedule *s, rerun rr, parts *e)
{
    memset(e, 0, sizeof *e);
    if (!rr.region) return REMAT_OK;
    uint32_t *rec = remat_calloc((size_t)x->Lc, sizeof *rec);
    if (!rec) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE && s->ins[i].layer >= 0 && s->ins[i].tid < x->tb->nblock)
            rec[s->ins[i].layer] |= 1u << s->ins[i].tid;
    for (int l = 0; l < x->Lc; l++) {
        int dense = remat_layer_dense(&x->chunk, l);
        uint32_t region = dense && x->tb->dense_mods ? rr.dregion : rr.region;
        if (!(rec[l] & region)) continue;        /* the region was not recomputed in this block */
        uint32_t more = region & ~rec[l] & ~rr.cached;
        for (int t = 0; t < x->tb->nblock; t++)
            if (more & (1u << t)) {
                e->ms += dense ? x->prof.dense_fwd_ms[t] : x->prof.fwd_ms[t];
                e->tp += dense ? x->dtp_fwd[t] : x->tp_fwd[t];
                e->cp += dense ? 0 : x->cp_fwd[t];
                e->fl += remat_tensor_flops_at(&x->chunk, t, l, 0);
            }
    }
    free(rec);
    return REMAT_OK;
}

void remat_cluster_row_clear(remat_cluster_row *r)
{
    if (!r) return;
    free(r->policy);
    free(r->megatron_flags);
    memset(r, 0, sizeof *r);
}

/* schedule s costed (the cost pass's time of every instruction) and split */
static remat_status schedule_parts(const ctx *x, const remat_schedule *s, parts *out)
{
    memset(out, 0, sizeof *out);
    double *ms = remat_malloc((s->n ? s->n : 1) * sizeof *ms);
    if (!ms) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    remat_status st = remat_profile_check_offload(&x->prof, s);
    if (!st && (out->ms = remat_cost_schedule_times(&x->prof, s, ms, NULL)) < 0)
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory costing a schedule");
    for (size_t i = 0; i < s->n && !st; i++) {
        int k = s->ins[i].kind, t = s->ins[i].tid, dense = remat_layer_dense(&x->chunk, s->ins[i].layer);
        if (k == REMAT_I_FORWARD || k == REMAT_I_RECOMPUTE) {
            out->tp += dense ? x->dtp_fwd[t] : x->tp_fwd[t];
            out->cp += dense ? 0 : x->cp_fwd[t];
        } else if (k == REMAT_I_BACKWARD) {
            out->tp += dense ? x->dtp_bwd[t] : x->tp_bwd[t];
            out->cp += dense ? 0 : x->cp_bwd[t];
        }
        else if (k == REMAT_I_OFFLOAD || k == REMAT_I_RELOAD) out->off += ms[i];
    }
    out->fl = s->sim.flops;
    free(ms);
    return st;
}

/* A row from schedule s of one chunk, costed as b, plus what the
 * framework's re-running of whole regions adds (e). */
static remat_status fill_row(const ctx *x, const remat_schedule *s, const parts *b, const parts *e,
                             remat_cluster_row *out)
{
    memset(out, 0, sizeof *out);
    /* held for the backward when the forward ends: before the first backward
     * instruction; a chunk that sends its output on does not keep it */
    size_t fb = 0;
    while (fb < s->n && s->ins[fb].kind != REMAT_I_BACKWARD) fb++;
    uint64_t held = fb ? s->live_after[fb - 1] : 0;
    uint64_t xout = remat_tensor_bytes(&x->chunk, x->tb->nblock - 1);
    if (x->sends) held -= xout;
    out->layer_stored_bytes = (s->sim.stored_bytes - xout) / (uint64_t)x->Lc;
    out->stored_bytes = x->f * held + x->res_inflight;
    out->peak_bytes = (x->f - 1) * held + s->sim.peak_bytes + x->res_inflight;
    /* the optimizer step's fp32 gradient copy comes after the activations
     * are freed: the larger of the two */
    out->total_bytes = (out->peak_bytes > x->grad_copy ? out->peak_bytes : x->grad_copy) + x->mem.params_bytes +
                       x->mem.grads_bytes + x->mem.optim_bytes;
    out->peak_stage = x->stage;
    out->stage_params_bytes = x->mem.params_bytes;
    out->stage_grads_bytes = x->mem.grads_bytes;
    out->stage_optim_bytes = x->mem.optim_bytes;
    /* on the host: every micro-batch in flight has its forward's offloads there */
    out->host_bytes = x->f * s->sim.host_peak_bytes;
    out->fits = out->total_bytes <= x->usable && out->host_bytes <= x->host;
    /* the first stage's ops for every micro-batch, then the bubble, then the
     * data-parallel reduction and the optimizer step */
    double stage_ms = x->V * (b->ms + e->ms) + x->head_ms, tp = x->V * (b->tp + e->tp), cp = x->V * (b->cp + e->cp);
    double off = x->V * b->off;
    out->tp_ms = tp * (double)x->m;
    out->cp_ms = cp * (double)x->m;
    out->offload_ms = off * (double)x->m;
    out->compute_ms = (stage_ms - tp - cp - off) * (double)x->m;
    out->bubble_ms = stage_ms * (double)(x->P - 1) / x->V;
    /* Megatron's overlaps (remat_cluster_overlaps): with --overlap-grad-reduce
     * the gradient buckets reduce while the last micro-batch's backward runs
     * on, so only what exceeds that backward is exposed, and never less than
     * the last bucket's share, taken as one layer's (the first layer's
     * backward ends the step); with --overlap-param-gather the weights'
     * all-gather hides likewise behind the next iteration's first forward.
     * The backward is taken as 2/3 of a micro-batch's compute, the forward
     * 1/3 (the matrix products' 2:1) */
    double mb = stage_ms - tp - cp - off, layers = (double)x->Lc * x->V;
    double rs = x->dp_rs_ms, ag = x->dp_ag_ms;
    if (x->overlaps & REMAT_OVERLAP_GRAD_REDUCE) rs = fmax(rs - mb * 2 / 3, rs / layers);
    if (x->overlaps & REMAT_OVERLAP_PARAM_GATHER) ag = fmax(ag - mb / 3, ag / layers);
    out->dp_ms = rs + ag;
    out->optimizer_ms = x->opt_ms;
    out->step_ms_pred = stage_ms * ((double)x->m + (double)(x->P - 1) / x->V) + (out->dp_ms + x->opt_ms);
    out->hardware_flops = (double)x->T * x->CP * (x->seqs / x->chunk.batch) *
                          ((double)x->P * x->V * (b->fl + e->fl) + x->head_flops);
    if (!(out->policy = remat_strdup(remat_schedule_policy(s)))) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    return REMAT_OK;
}

/* The row of policy as the framework runs it (re-running the regions of
 * rr), and, when plain is not NULL, the same schedule as remat runs it
 * (recomputing only what the backward reads): one compile, one costing. */
static remat_status eval_row(const ctx *x, const char *policy, rerun rr, remat_cluster_row *out,
                             remat_cluster_row *plain)
{
    remat_schedule *s = NULL;
    remat_status st;
    parts b, e, none;
    memset(out, 0, sizeof *out);
    memset(&none, 0, sizeof none);
    if (plain) memset(plain, 0, sizeof *plain);
    if ((st = remat_schedule_create(&x->chunk, policy, &s))) return st;
    if (!(st = schedule_parts(x, s, &b)) && !(st = rerun_extra(x, s, rr, &e)) && !(st = fill_row(x, s, &b, &e, out)) &&
        plain)
        st = fill_row(x, s, &b, &none, plain);
    remat_schedule_free(s);
    if (st) {
        remat_cluster_row_clear(out);
        if (plain) remat_cluster_row_clear(plain);
    }
    return st;
}

/* Stage rows r[0..S->n) of one option made one row (a chain with a dense
 * prefix): the memory of the stage whose GPU holds the most, the time of the
 * slowest stage (its iteration: every stage runs m micro-batches and the
 * bubble at its pace), fitting when every stage fits; the policy is the
 * first stage's.  The rows' strings are moved or freed. */
static void combine_stages(const stages *S, remat_cluster_row *r, remat_cluster_row *out)
{
    int km = 0, kt = 0, fits = 1;
    double hw = 0;
    for (int k = 0; k < S->n; k++) {
        if (r[k].total_bytes > r[km].total_bytes) km = k;
        if (r[k].step_ms_pred > r[kt].step_ms_pred) kt = k;
        fits &= r[k].fits;
        hw += (double)S->k[k].mult * r[k].hardware_flops / S->k[k].P;   /* each kind's stages' share */
    }
    *out = r[kt];
    out->policy = r[0].policy;
    out->megatron_flags = NULL;
    r[0].policy = NULL;
    out->layer_stored_bytes = r[km].layer_stored_bytes;
    out->stored_bytes = r[km].stored_bytes;
    out->peak_bytes = r[km].peak_bytes;
    out->total_bytes = r[km].total_bytes;
    out->host_bytes = r[km].host_bytes;
    out->peak_stage = r[km].peak_stage;
    out->stage_params_bytes = r[km].stage_params_bytes;
    out->stage_grads_bytes = r[km].stage_grads_bytes;
    out->stage_optim_bytes = r[km].stage_optim_bytes;
    out->fits = fits;
    out->hardware_flops = hw;
    for (int k = 0; k < S->n; k++) remat_cluster_row_clear(&r[k]);
}

static void set_load(remat_cluster_row *r, double load, const remat_cluster_row *b);

/* cfg with its routed experts at balance (load 1, no capacity bound): what each
 * MoE answer is priced at beside its planned load */
static remat_config at_balance(const remat_config *cfg)
{
    remat_config bc = *cfg;
    bc.moe_load = 1;
    bc.moe_capacity = 0;
    return bc;
}

/* one policy on every model chunk, at cfg's routed load */
static remat_status evaluate_at(const remat_config *cfg, const remat_cluster *cl, const char *policy,
                                remat_cluster_row *out)
{
    stages S;
    remat_status st;
    memset(out, 0, sizeof *out);
    if ((st = stages_init(&S, cfg, cl))) return st;
    rerun none = { 0, 0, 0 };
    if (S.n == 1) {
        st = eval_row(&S.k[0], policy, none, out, NULL);
    } else {          /* the same policy on every stage */
        remat_cluster_row r[MAX_KINDS];
        memset(r, 0, sizeof r);
        for (int k = 0; k < S.n && !st; k++) st = eval_row(&S.k[k], policy, none, &r[k], NULL);
        if (st) for (int k = 0; k < S.n; k++) remat_cluster_row_clear(&r[k]);
        else combine_stages(&S, r, out);
    }
    stages_free(&S);
    return st;
}

remat_status remat_cluster_evaluate(const remat_config *cfg, const remat_cluster *cl, const char *policy,
                                    remat_cluster_row *out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_evaluate: out is NULL");
    remat_status st = evaluate_at(cfg, cl, policy, out);
    if (st) return st;
    if (cfg->n_experts <= 0) {          /* no routing: balance is the figures themselves */
        set_load(out, 1, out);
        return REMAT_OK;
    }
    /* mixture of experts: the same policy at balance too, as remat_cluster_plan's rows */
    remat_config bc = at_balance(cfg);
    remat_cluster_row b;
    if ((st = evaluate_at(&bc, cl, policy, &b))) {
        remat_cluster_row_clear(out);
        return st;
    }
    set_load(out, remat_config_moe_rank_load(cfg), &b);
    remat_cluster_row_clear(&b);
    return REMAT_OK;
}

/* ---- the framework options ---------------------------------------------------- */

/* "save:A+B+..." keeping exactly mask (the block output is always kept) */
static int save_policy(const ctx *x, uint32_t mask, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "save:");
    int any = 0;
    for (int t = 0; t < x->tb->nblock && k < n; t++)
        if (mask & (1u << t)) {
            k += (size_t)snprintf(buf + k, n - k, "%s%s", any ? "+" : "", x->tb->defs[t].name);
            any = 1;
        }
    if (!any) snprintf(buf, n, "full");
    return k < n;
}

/* Megatron's --recompute-modules and torchtitan's selective AC are data in
 * the framework tables (RM_*: tensors.h): which tensors each module drops,
 * which region it re-runs, which op outputs torchtitan's SelectiveAC
 * (torchtitan/distributed/activation_checkpoint.py) saves. */

/* What an option is, whatever the chunk (a pipeline stage's policy is made
 * from it: cand_for) */
enum { CK_NONE, CK_SEL, CK_UNIFORM, CK_BLOCK, CK_SAC, CK_OFF };

typedef struct cand {
    char policy[1024];
    rerun rr;
    char megatron[200];        /* "" none needed */
    int has_megatron;
    const char *torchtitan;
    int selective;             /* 0: no recomputation flags; 1: --recompute-granularity selective
                                  (the modules `set`); -1: others (fine-grained offload not combined) */
    int set;
    uint32_t keep;             /* what it keeps (none, selective) */
    int ck, N;                 /* CK_*, and the layers of CK_UNIFORM and CK_BLOCK */
    int rec_layers;            /* the layers of the chunk whose region rr re-runs (0: none): cand_for */
} cand;

/* What the recompute modules of `set` drop, re-run and keep (the inputs of
 * their checkpoints that are otherwise not saved) in a layer of a dense
 * prefix (dense 1) or in the others */
static void set_masks(const ctx *x, int set, int dense, uint32_t *drop, uint32_t *region, uint32_t *keeps)
{
    *drop = *region = *keeps = 0;
    for (int i = 0; i < RM_NMODULES; i++)
        if (set & (1 << i)) {
            unsigned md, mr, mk = remat_module_keeps(i);
            remat_module_name(i, &md, &mr);
            *drop |= remat_table_mods_mask_kind(x->tb, md, dense);
            *region |= remat_table_mods_mask_kind(x->tb, mr, dense);
            if (mk) *keeps |= remat_table_mods_mask_kind(x->tb, mk, dense);
        }
}

static int save_policy(const ctx *x, uint32_t mask, char *buf, size_t n);

/* The chunk's dense layers where the table's modules treat them apart */
static int chunk_dense(const ctx *x)
{
    if (!x->tb->dense_mods) return 0;
    return x->chunk.moe_first_dense < x->Lc ? x->chunk.moe_first_dense : x->Lc;
}

/* Megatron's selective recomputation of the modules `set` on x's chunk:
 * save: of what a layer keeps, or, where a dense prefix's layers keep
 * otherwise than the routed ones, a plan: of one keep-set per block
 * (A tokens, all kept: schedule.h) with the union saved.  0: no room. */
static int sel_policy(const ctx *x, int set, cand *c)
{
    uint32_t keep = remat_keep_default(x->tb), dr, rr, kr, dd, rd, kd;
    set_masks(x, set, 0, &dr, &rr, &kr);
    set_masks(x, set, 1, &dd, &rd, &kd);
    uint32_t km = (keep & ~dr) | kr, kdn = (keep & ~dd) | kd;
    int nd = chunk_dense(x);
    c->rr.region = rr;
    c->rr.dregion = x->tb->dense_mods ? rd : rr;
    c->rr.cached = 0;
    c->keep = nd == x->Lc ? kdn : km;
    if (nd == 0 || nd == x->Lc || km == kdn) return save_policy(x, c->keep, c->policy, sizeof c->policy);
    char tail[600];
    if (!save_policy(x, km | kdn, tail, sizeof tail) || strncmp(tail, "save:", 5)) return 0;
    size_t k = (size_t)snprintf(c->policy, sizeof c->policy, "plan:");
    uint32_t out = 1u << (x->tb->nblock - 1);
    for (int l = 0; l < x->Lc && k < sizeof c->policy; l++)
        k += (size_t)snprintf(c->policy + k, sizeof c->policy - k, "%sA%x", l ? "." : "", (l < nd ? kdn : km) & ~out);
    if (k < sizeof c->policy) k += (size_t)snprintf(c->policy + k, sizeof c->policy - k, ",%s", tail);
    return k < sizeof c->policy;
}

/* src's option as x's chunk runs it, into dst: 0 when it cannot be said
 * there (no room; offload options are one chunk's) */
static int cand_for(const ctx *x, const cand *src, cand *dst)
{
    *dst = *src;
    uint32_t all = remat_keep_all(x->tb);
    /* the layers whose region re-runs (the layout search's bound,
     * remat_cluster_megatron_best): the first N with block, every layer of
     * the chunk with the others that recompute */
    dst->rec_layers = src->ck == CK_NONE ? 0 : src->ck == CK_BLOCK ? (src->N < x->Lc ? src->N : x->Lc) : x->Lc;
    switch (src->ck) {
    case CK_NONE: snprintf(dst->policy, sizeof dst->policy, "none"); return 1;
    case CK_SEL: return sel_policy(x, src->set, dst);
    case CK_UNIFORM:
        snprintf(dst->policy, sizeof dst->policy, src->N == 1 ? "full" : "every:%d", src->N);
        dst->rr.region = dst->rr.dregion = all;
        return 1;
    case CK_BLOCK:
        snprintf(dst->policy, sizeof dst->policy, "first:%d", src->N);
        dst->rr.region = dst->rr.dregion = all;
        return 1;
    case CK_SAC: {
        uint32_t saved = remat_table_mods_mask(x->tb, RM_SAC_SAVED);
        dst->rr.region = dst->rr.dregion = all;
        dst->rr.cached = saved;
        return save_policy(x, saved, dst->policy, sizeof dst->policy);
    }
    default: return 0;
    }
}

static int add_cand(cand **v, size_t *n, size_t *cap, const cand *c)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        cand *p = remat_realloc(*v, nc * sizeof *p);
        if (!p) return -1;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = *c;
    return 0;
}

/* elements of tensor t (its bytes over its element size): what the
 * frameworks' offload thresholds count */
static uint64_t tensor_elems(const remat_config *c, int t)
{
    int dt = remat_tensor_dtype(c, t);
    return remat_tensor_bytes(c, t) / (dt == REMAT_DTYPE_BF16 ? 2 : dt == REMAT_DTYPE_FP32 ? 4 : 1);
}

/* OFF_ALL: every tensor kept, whatever module saves it */
#define OFF_ALL UINT_MAX

/* ",offload:N:A+B(+input)": of keep, the tensors with an RF_* bit of mods
 * (OFF_ALL: all of them) of at least min elements, and the block input when
 * in_ok and it is that large; 0 when nothing would move */
static int offload_term(const ctx *x, uint32_t keep, unsigned mods, int in_ok, uint64_t min, int N, char *buf, size_t n)
{
    size_t k = strlen(buf);
    int any = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, ",offload:%d:", N);
    for (int t = 0; t < x->tb->nblock - 1 && k < n; t++)
        if ((keep & (1u << t)) && (mods == OFF_ALL || (x->tb->defs[t].omods & mods)) && remat_tensor_bytes(&x->chunk, t) &&
            tensor_elems(&x->chunk, t) >= min) {
            k += (size_t)snprintf(buf + k, n - k, "%s%s", any ? "+" : "", x->tb->defs[t].name);
            any = 1;
        }
    if (in_ok && tensor_elems(&x->chunk, x->tb->nblock - 1) >= min && k < n) {
        k += (size_t)snprintf(buf + k, n - k, "%sinput", any ? "+" : "");
        any = 1;
    }
    return any && k < n;
}

/* Megatron-LM's activation offload, for the tables that say which of its
 * modules save what (RF_*: Megatron-core under Transformer Engine), with a
 * host link; its documented constraints (transformer_config.py at d98e8a6)
 * are the options' bounds, so no flag Megatron refuses is offered:
 *   - --cpu-offloading-num-layers N (TE's CPU offloading of the first N
 *     layers, what they save of at least 256 Ki elements, cpu_offload.py):
 *     N < num_layers, no pipeline parallelism, no recomputation
 *     (__post_init__: "Currently there is no support for Pipeline
 *     parallelism with CPU offloading", "CPU offloading does not work when
 *     activation recomputation is enabled"); N at most L - 2, as TE warns
 *     that L - 1 cannot overlap;
 *   - --fine-grained-activation-offloading --offload-modules: what each
 *     module's context saves of at least min_offloaded_tensor_size (1 Mi
 *     elements), every layer but, with one stage, the last, whose groups
 *     the backward needs at once (fine_grained_activation_offload.py,
 *     should_bulk_offload); attn_proj only with core_attn; not with
 *     cpu_offloading; with no recomputation or with selective modules
 *     (core_attn recomputed leaves core_attn's tensors to its checkpoint,
 *     outside the offload context: attention.py); attn_norm and mlp_norm
 *     are IdentityOp under TE's fused norms and have nothing to move. */
static int offload_options(const ctx *x, cand **v, size_t *n, size_t *cap)
{
    int any = x->tb->x_omods != 0;
    for (int t = 0; t < x->tb->nblock; t++) any |= x->tb->defs[t].omods != 0;
    if (!any || !(x->prof.host_bps > 0)) return 0;
    uint32_t keep = remat_keep_default(x->tb);
    cand c;
    for (int N = 1; x->P == 1 && N <= x->Lc - 2; N++) {
        memset(&c, 0, sizeof c);
        snprintf(c.policy, sizeof c.policy, "none");
        if (!offload_term(x, keep, OFF_ALL, 1, 256 * 1024, N, c.policy, sizeof c.policy)) break;
        snprintf(c.megatron, sizeof c.megatron, "--cpu-offloading-num-layers %d", N);
        c.has_megatron = 1;
        c.selective = -1;
        c.ck = CK_OFF;
        if (add_cand(v, n, cap, &c)) return -1;
    }
    int N = x->P == 1 ? x->Lc - 1 : x->Lc;
    size_t nbase = *n;
    for (size_t b = 0; N >= 1 && b < nbase; b++) {
        cand basec = (*v)[b];          /* a copy: adding candidates moves the array */
        const cand *base = &basec;
        if (base->selective < 0 || !base->has_megatron) continue;
        int core_rec = 0;                            /* core_attn among the recompute modules */
        for (int i = 0; i < RM_NMODULES; i++) {
            unsigned md, mr;
            remat_module_name(i, &md, &mr);
            if ((base->set & (1 << i)) && (md & RM_CORE_ATTN)) core_rec = 1;
        }
        for (int set = 1; set < 1 << RF_NMODULES; set++) {
            unsigned mods = 0, bit;
            char names[120];
            size_t k = 0;
            names[0] = 0;
            for (int i = 0; i < RF_NMODULES; i++)
                if (set & (1 << i)) {
                    const char *name = remat_offload_module_name(i, &bit);
                    mods |= bit;
                    k += (size_t)snprintf(names + k, sizeof names - k, " %s", name);
                }
            if ((mods & RF_ATTN_PROJ) && !(mods & RF_CORE_ATTN)) continue;
            /* recomputed, core_attn moves nothing: the same as the set without it */
            if (core_rec && (mods & RF_CORE_ATTN) && !(mods & RF_ATTN_PROJ)) continue;
            unsigned moving = core_rec ? mods & ~(unsigned)RF_CORE_ATTN : mods;
            c = *base;
            if (!offload_term(x, base->keep, moving, (x->tb->x_omods & moving) != 0, 1024 * 1024, N, c.policy,
                              sizeof c.policy))
                continue;                            /* nothing of that size to move */
            snprintf(c.megatron + strlen(c.megatron), sizeof c.megatron - strlen(c.megatron),
                     "%s--fine-grained-activation-offloading --offload-modules%s", c.megatron[0] ? " " : "", names);
            c.torchtitan = NULL;
            c.selective = -1;
            c.ck = CK_OFF;
            if (add_cand(v, n, cap, &c)) return -1;
        }
    }
    return 0;
}

/* Option c on every stage of S (one: eval_row's), and with plain remat's
 * recomputation of the same keep-sets */
static remat_status eval_cand(const stages *S, const cand *c, remat_cluster_row *out, remat_cluster_row *plain)
{
    if (S->n == 1) return eval_row(&S->k[0], c->policy, c->rr, out, plain);
    remat_cluster_row r[MAX_KINDS], p[MAX_KINDS];
    remat_status st = REMAT_OK;
    int k = 0;
    memset(r, 0, sizeof r);
    memset(p, 0, sizeof p);
    for (; k < S->n && !st; k++) {
        cand ck;
        if (!cand_for(&S->k[k], c, &ck))
            st = remat_fail(REMAT_ERR_INVALID, "the option '%.100s' cannot be said for pipeline stage %d", c->policy,
                            S->k[k].stage);
        else
            st = eval_row(&S->k[k], ck.policy, ck.rr, &r[k], plain ? &p[k] : NULL);
    }
    if (st) {
        for (int q = 0; q < S->n; q++) { remat_cluster_row_clear(&r[q]); remat_cluster_row_clear(&p[q]); }
        return st;
    }
    combine_stages(S, r, out);
    if (plain) combine_stages(S, p, plain);
    return REMAT_OK;
}

/* The tensors of mask that hold bytes in a layer of the model's: a dense
 * prefix's (dense 1) or a routed or uniform one (0). */
static uint32_t held_mask_kind(const ctx *x, uint32_t mask, int dense)
{
    remat_config k = x->chunk;
    k.moe_first_dense = dense ? k.n_layer : 0;
    for (int t = 0; t < x->tb->nblock; t++)
        if ((mask & (1u << t)) && !remat_tensor_bytes(&k, t)) mask &= ~(1u << t);
    return mask;
}

/* 1 when module i of `set` drops nothing held that the set's others do not
 * drop already, in every kind of layer the model has */
static int module_noop(const ctx *x, int set, int i)
{
    int kinds[2] = { x->any_routed, x->any_dense && x->tb->dense_mods };
    for (int dense = 0; dense < 2; dense++) {
        if (!kinds[dense]) continue;
        unsigned md, mr;
        remat_module_name(i, &md, &mr);
        uint32_t mine = held_mask_kind(x, remat_table_mods_mask_kind(x->tb, md, dense), dense), others = 0;
        for (int j = 0; j < RM_NMODULES; j++)
            if (j != i && (set & (1 << j))) {
                unsigned od, orr;
                remat_module_name(j, &od, &orr);
                others |= remat_table_mods_mask_kind(x->tb, od, dense);
            }
        if (mine & ~others) return 0;
    }
    return 1;
}

/* Every option of the two frameworks, as policies on one model chunk. */
static remat_status framework_options(const ctx *x, cand **out, size_t *n)
{
    cand *v = NULL, c;
    size_t cap = 0;
    *n = 0;
    uint32_t keep = remat_keep_default(x->tb);
    /* none: both frameworks */
    memset(&c, 0, sizeof c);
    snprintf(c.policy, sizeof c.policy, "none");
    c.has_megatron = 1;
    c.torchtitan = "none";
    c.keep = keep;
    c.ck = CK_NONE;
    if (add_cand(&v, n, &cap, &c)) goto nomem;
    /* selective: every non-empty set of modules */
    for (int set = 1; set < 1 << RM_NMODULES; set++) {
        memset(&c, 0, sizeof c);
        size_t k = (size_t)snprintf(c.megatron, sizeof c.megatron, "--recompute-granularity selective --recompute-modules");
        /* a module with nothing to drop here (TE fuses Llama's norms into the
         * linears; no shared experts; mlp where every layer is routed), or
         * nothing the set's others do not drop already (moe_act beside moe),
         * is left out */
        int noop = 0;
        for (int i = 0; i < RM_NMODULES; i++)
            if (set & (1 << i)) {
                unsigned md, mr;
                const char *name = remat_module_name(i, &md, &mr);
                noop |= module_noop(x, set, i);
                k += (size_t)snprintf(c.megatron + k, sizeof c.megatron - k, " %s", name);
            }
        c.ck = CK_SEL;
        c.set = set;
        if (noop || !cand_for(x, &c, &c)) continue;
        c.has_megatron = 1;
        c.selective = 1;
        if (add_cand(&v, n, &cap, &c)) goto nomem;
    }
    /* full, uniform: chunks of N layers; N = 1 is also torchtitan's FullAC */
    for (int N = 1; N <= x->Lc; N++) {
        memset(&c, 0, sizeof c);
        c.ck = CK_UNIFORM;
        c.N = N;
        cand_for(x, &c, &c);
        snprintf(c.megatron, sizeof c.megatron,
                 "--recompute-granularity full --recompute-method uniform --recompute-num-layers %d", N);
        c.has_megatron = 1;
        c.selective = -1;
        if (N == 1) c.torchtitan = "full";
        if (add_cand(&v, n, &cap, &c)) goto nomem;
    }
    /* full, block: the first N layers of each chunk */
    for (int N = 1; N < x->Lc; N++) {
        memset(&c, 0, sizeof c);
        c.ck = CK_BLOCK;
        c.N = N;
        cand_for(x, &c, &c);
        snprintf(c.megatron, sizeof c.megatron,
                 "--recompute-granularity full --recompute-method block --recompute-num-layers %d", N);
        c.has_megatron = 1;
        c.selective = -1;
        if (add_cand(&v, n, &cap, &c)) goto nomem;
    }
    /* torchtitan's per-op selective checkpointing of every block (the
     * whole block runs again, its saved ops from the cache) */
    memset(&c, 0, sizeof c);
    c.ck = CK_SAC;
    if (cand_for(x, &c, &c)) {
        c.torchtitan = "selective";
        c.selective = -1;
        if (add_cand(&v, n, &cap, &c)) goto nomem;
    }
    if (offload_options(x, &v, n, &cap)) goto nomem;
    *out = v;
    return REMAT_OK;
nomem:
    free(v);
    *n = 0;
    return remat_fail(REMAT_ERR_NOMEM, "out of memory");
}

void remat_cluster_answer_clear(remat_cluster_answer *a)
{
    if (!a) return;
    remat_cluster_row_clear(&a->optimal);
    remat_cluster_row_clear(&a->best_megatron);
    remat_cluster_row_clear(&a->best_torchtitan);
    for (size_t i = 0; i < a->nrows; i++) remat_cluster_row_clear(&a->rows[i]);
    free(a->rows);
    memset(a, 0, sizeof *a);
}

static remat_status row_copy(remat_cluster_row *dst, const remat_cluster_row *src)
{
    *dst = *src;
    dst->policy = src->policy ? remat_strdup(src->policy) : NULL;
    dst->megatron_flags = src->megatron_flags ? remat_strdup(src->megatron_flags) : NULL;
    if ((src->policy && !dst->policy) || (src->megatron_flags && !dst->megatron_flags)) {
        remat_cluster_row_clear(dst);
        return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    }
    return REMAT_OK;
}

/* a faster fitting row than best (ties: less on the host -- offload that
 * buys no time is not worth its link and host memory -- then less memory) */
static int better(const remat_cluster_row *r, const remat_cluster_row *best)
{
    if (!r->fits) return 0;
    if (!best->policy) return 1;
    if (r->step_ms_pred != best->step_ms_pred) return r->step_ms_pred < best->step_ms_pred;
    if (r->host_bytes != best->host_bytes) return r->host_bytes < best->host_bytes;
    return r->total_bytes < best->total_bytes;
}

/* What the planner may drop.  Its search is over every subset of the
 * droppable tensors; a MoE block has 16 or more (2^16 keep-sets, seconds),
 * so there, beyond 12, the tensors under 1/64 of the block's largest (norm
 * statistics, the router's indices and probabilities: bytes per token, not
 * per width) stay kept, and then the smallest until 12 are left to choose,
 * which costs the answer at most their bytes. */
static uint32_t planner_droppable(const ctx *x)
{
    const remat_table *tb = x->tb;
    uint64_t big = 0, by[RT_MAXT];
    int n = 0;
    for (int t = 0; t < tb->nblock - 1; t++) {
        by[t] = tb->defs[t].flags & RT_F_TRANSIENT ? 0 : remat_tensor_bytes(&x->chunk, t);
        if (by[t] > big) big = by[t];
        n += by[t] > 0;
    }
    if (n <= 12 || x->chunk.n_experts <= 0) return UINT32_MAX;
    uint32_t m = UINT32_MAX;
    for (int t = 0; t < tb->nblock - 1; t++)
        if (by[t] && by[t] * 64 < big) { m &= ~(1u << t); n--; }
    while (n > 12) {        /* still more: the smallest stay kept, 12 left to choose */
        int s = -1;
        for (int t = 0; t < tb->nblock - 1; t++)
            if ((m & (1u << t)) && by[t] && (s < 0 || by[t] < by[s])) s = t;
        m &= ~(1u << s);
        n--;
    }
    return m;
}

/* The unconstrained optimum: the planner's front of one chunk (activation
 * peak against time), each point priced with its micro-batches in flight.
 * With one in flight the front's budget is the exact constraint; with more,
 * the stored bytes of the others count too, and the fastest point that
 * fits is taken. */
static remat_status best_plan(const ctx *x, remat_cluster_row *best)
{
    remat_planner *pl = NULL;
    remat_status st;
    char *pol = remat_malloc(REMAT_POLICY_MAX);
    rerun none = { 0, 0, 0 };
    if (!pol) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    if ((st = remat_planner_create(&x->chunk, &x->prof, planner_droppable(x), &pl))) goto out;
    remat_planner_set_host(pl, x->host / x->f);    /* every micro-batch in flight has its offloads there */
    uint64_t fixed = x->mem.params_bytes + x->mem.grads_bytes + x->mem.optim_bytes + x->res_inflight;
    if (x->f == 1) {
        if (fixed >= x->usable) goto out;
        uint64_t act = x->usable - fixed;
        if (act < remat_planner_min_peak(pl)) goto out;
        if ((st = remat_planner_build_fronts(pl, act))) goto out;
        if ((st = remat_planner_best(pl, act, pol, REMAT_POLICY_MAX, NULL, NULL))) goto out;
        remat_cluster_row r;
        if ((st = eval_row(x, pol, none, &r, NULL))) goto out;
        if (better(&r, best)) { remat_cluster_row_clear(best); *best = r; }
        else remat_cluster_row_clear(&r);
        goto out;
    }
    if ((st = remat_planner_build_fronts(pl, 0))) goto out;
    size_t n = remat_planner_front_size(pl);
    for (size_t i = n; i-- > 0;) {           /* fastest first */
        uint64_t pk;
        double ms;
        remat_planner_front_point(pl, i, &pk, &ms);
        if (fixed + pk > x->usable) continue;  /* the chunk alone does not fit */
        if ((st = remat_planner_best(pl, pk, pol, REMAT_POLICY_MAX, NULL, NULL))) goto out;
        remat_cluster_row r;
        if ((st = eval_row(x, pol, none, &r, NULL))) goto out;
        int fits = r.fits;
        if (better(&r, best)) { remat_cluster_row_clear(best); *best = r; }
        else remat_cluster_row_clear(&r);
        if (fits) break;
    }
out:
    free(pol);
    remat_planner_free(pl);
    return st;
}

/* Mixture of experts: each row's plan again at balance (load 1), beside
 * its figures at the planned load (README, "Mixture of experts": the
 * answer says which of the two it fits).  The answers are copies of rows,
 * found by their flags; the optimum is a plan of its own. */
static void set_load(remat_cluster_row *r, double load, const remat_cluster_row *b)
{
    r->load = load;
    r->balanced_peak_bytes = b->peak_bytes;
    r->balanced_total_bytes = b->total_bytes;
    r->balanced_fits = b->fits;
    r->balanced_peak_stage = b->peak_stage;
}

static remat_status balanced_rows(const remat_config *cfg, const remat_cluster *cl, const cand *cs, int opt_cand,
                                  remat_cluster_answer *out)
{
    double load = remat_config_moe_rank_load(cfg);
    remat_cluster_row *ans[3] = { &out->optimal, &out->best_megatron, &out->best_torchtitan };
    if (cfg->n_experts <= 0) {
        for (size_t i = 0; i < out->nrows; i++) set_load(&out->rows[i], 1, &out->rows[i]);
        for (int a = 0; a < 3; a++) set_load(ans[a], 1, ans[a]);
        return REMAT_OK;
    }
    remat_config bc = at_balance(cfg);
    stages Sb;
    remat_status st;
    rerun none = { 0, 0, 0 };
    if ((st = stages_init(&Sb, &bc, cl))) return st;
    for (size_t i = 0; i < out->nrows; i++) {
        remat_cluster_row b, *r = &out->rows[i];
        if ((st = eval_cand(&Sb, &cs[i], &b, NULL))) goto out;
        set_load(r, load, &b);
        for (int a = 1; a < 3; a++)
            if (ans[a]->policy && !strcmp(ans[a]->policy, r->policy) && ans[a]->step_ms_pred == r->step_ms_pred &&
                (a == 2 ? ans[a]->torchtitan == r->torchtitan
                        : r->megatron_flags && ans[a]->megatron_flags && !strcmp(ans[a]->megatron_flags, r->megatron_flags)))
                set_load(ans[a], load, &b);
        remat_cluster_row_clear(&b);
    }
    if (out->optimal.policy) {
        remat_cluster_row b;
        if (opt_cand >= 0) {       /* an option with remat's recomputation, stage by stage */
            cand c = cs[opt_cand];
            c.rr = none;
            st = eval_cand(&Sb, &c, &b, NULL);
        } else {
            st = eval_row(&Sb.k[0], out->optimal.policy, none, &b, NULL);
        }
        if (st) goto out;
        set_load(&out->optimal, load, &b);
        remat_cluster_row_clear(&b);
    }
out:
    stages_free(&Sb);
    return st;
}

remat_status remat_cluster_plan(const remat_config *cfg, const remat_cluster *cl, remat_cluster_answer *out)
{
    stages S;
    remat_status st;
    cand *cs = NULL;
    size_t nc = 0;
    int opt_cand = -1;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_plan: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = stages_init(&S, cfg, cl))) return st;
    const ctx *x = &S.k[0];
    if ((st = framework_options(x, &cs, &nc))) goto out;
    out->rows = remat_calloc(nc ? nc : 1, sizeof *out->rows);
    if (!out->rows) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < nc; i++) {
        remat_cluster_row *r = &out->rows[out->nrows];
        /* mine: the same keep-set with remat's recomputation, a plan too */
        remat_cluster_row mine;
        if ((st = eval_cand(&S, &cs[i], r, &mine))) goto out;
        out->nrows++;
        if (better(&mine, &out->optimal)) {
            remat_cluster_row_clear(&out->optimal);
            out->optimal = mine;
            opt_cand = (int)i;
        } else {
            remat_cluster_row_clear(&mine);
        }
        if (cs[i].has_megatron && !(r->megatron_flags = remat_strdup(cs[i].megatron))) {
            st = remat_fail(REMAT_ERR_NOMEM, "out of memory");
            goto out;
        }
        r->torchtitan = cs[i].torchtitan;
        if (r->megatron_flags && better(r, &out->best_megatron)) {
            remat_cluster_row_clear(&out->best_megatron);
            if ((st = row_copy(&out->best_megatron, r))) goto out;
        }
        if (r->torchtitan && better(r, &out->best_torchtitan)) {
            remat_cluster_row_clear(&out->best_torchtitan);
            if ((st = row_copy(&out->best_torchtitan, r))) goto out;
        }
    }
    /* the planner's per-layer optimum is of a chain of one kind of block: a
     * chunk that mixes a dense prefix's layers with routed ones, or stages
     * of several kinds, take the best option with remat's recomputation */
    if (S.n == 1 && !(x->chunk.moe_first_dense > 0 && x->chunk.moe_first_dense < x->Lc)) {
        char *before = out->optimal.policy;
        if ((st = best_plan(x, &out->optimal))) goto out;
        if (out->optimal.policy != before) opt_cand = -1;
    }
    st = balanced_rows(cfg, cl, cs, opt_cand, out);
out:
    free(cs);
    stages_free(&S);
    if (st) remat_cluster_answer_clear(out);
    return st;
}

/* The fastest row that Megatron-LM's flags express for this layout (best->policy
 * NULL: none fits): remat_cluster_plan's best_megatron, the same options priced
 * the same way (stage by stage with a dense prefix), without the optimum's
 * planner, torchtitan's rows and the balanced figures -- the layout search's
 * inner step (cluster_search.c).
 *
 * With a cutoff, an option whose time is bound to exceed it is not priced
 * (best->policy NULL when no option can be at most the cutoff).  The bound:
 * the time with no recomputation (the first option), plus what re-running
 * its region costs at the least -- the region's forward ops (fwd_ms, their
 * collectives inside) in each layer it re-runs (cand_for's rec_layers), V
 * chunks a micro-batch; the stage's time grows by that for m + (P-1)/V
 * micro-batches, of which the overlaps of the data-parallel reduction hide
 * at most one (fill_row).  With a dense prefix, planned stage by stage, the
 * iteration is the slowest stage's: the bound is that of the stage slowest
 * with no recomputation, and counts only its routed layers' re-runs (a
 * chunk's dense layers come first; theirs re-run other regions at other
 * times, taken as 0).  *violated is set when an option priced comes out
 * below its bound (the bound is then wrong: the caller prices everything). */
remat_status remat_cluster_megatron_best(const remat_config *cfg, const remat_cluster *cl, double cutoff,
                                         remat_cluster_row *best, int *violated)
{
    stages S;
    remat_status st;
    cand *cs = NULL;
    size_t nc = 0;
    double none_ms = -1;
    memset(best, 0, sizeof *best);
    *violated = 0;
    if ((st = stages_init(&S, cfg, cl))) return st;
    const ctx *x = &S.k[0];
    if ((st = framework_options(x, &cs, &nc))) goto out;
    /* the stage whose time with no recomputation is the longest (the
     * iteration's, combine_stages): the bound is its own */
    int kt = 0;
    if (S.n > 1) {
        double most = -1;
        rerun none = { 0, 0, 0 };
        for (int k = 0; k < S.n && !st; k++) {
            remat_cluster_row r;
            if ((st = eval_row(&S.k[k], "none", none, &r, NULL))) break;
            if (r.step_ms_pred > most) { most = r.step_ms_pred; kt = k; }
            remat_cluster_row_clear(&r);
        }
        if (st) goto out;
    }
    const ctx *xt = &S.k[kt];
    double runs = (double)x->m - 1 + (double)(x->P - 1) / x->V;
    for (size_t i = 0; i < nc && !st; i++) {
        if (!cs[i].has_megatron) continue;
        double lb = 0;
        cand ck = cs[i];
        if (none_ms >= 0 && runs > 0 && (S.n == 1 || cand_for(xt, &cs[i], &ck))) {
            /* the routed (or uniform) layers it re-runs: a chunk's dense
             * prefix comes first, and the re-run layers are its first
             * rec_layers; the dense ones' re-runs (other regions, other
             * times) count as 0 */
            int nd = xt->chunk.moe_first_dense < xt->Lc ? xt->chunk.moe_first_dense : xt->Lc;
            int routed = ck.rec_layers > nd ? ck.rec_layers - nd : 0;
            double layer = 0;
            for (int t = 0; t < xt->tb->nblock; t++)
                if ((ck.rr.region & ~ck.rr.cached) & (1u << t)) layer += xt->prof.fwd_ms[t];
            lb = none_ms + xt->V * routed * layer * runs;
            if (lb * (1 - 1e-9) > cutoff) continue;
        }
        remat_cluster_row r;
        if ((st = eval_cand(&S, &cs[i], &r, NULL))) break;
        if (none_ms < 0 && cs[i].ck == CK_NONE) none_ms = r.step_ms_pred;
        if (r.step_ms_pred < lb * (1 - 1e-9)) *violated = 1;
        if (better(&r, best)) {
            if (!(r.megatron_flags = remat_strdup(cs[i].megatron))) {
                remat_cluster_row_clear(&r);
                st = remat_fail(REMAT_ERR_NOMEM, "out of memory");
                break;
            }
            remat_cluster_row_clear(best);
            *best = r;
        } else {
            remat_cluster_row_clear(&r);
        }
    }
out:
    free(cs);
    stages_free(&S);
    if (st) remat_cluster_row_clear(best);
    return st;
}

/* Megatron-LM's full recomputation of every layer (--recompute-granularity
 * full --recompute-method uniform --recompute-num-layers 1), priced as
 * Megatron runs it and as remat_cluster_plan prices that option (stage by
 * stage with a dense prefix): where it fits, its time bounds the layout's
 * best flags from above (the layout search's cutoff). */
remat_status remat_cluster_megatron_full(const remat_config *cfg, const remat_cluster *cl, remat_cluster_row *out)
{
    stages S;
    remat_status st;
    cand c;
    memset(out, 0, sizeof *out);
    if ((st = stages_init(&S, cfg, cl))) return st;
    memset(&c, 0, sizeof c);
    c.ck = CK_UNIFORM;
    c.N = 1;
    cand_for(&S.k[0], &c, &c);
    st = eval_cand(&S, &c, out, NULL);
    stages_free(&S);
    return st;
}

/* Device memory less the reserve: what a plan's total must fit in. */
uint64_t remat_cluster_usable(const remat_cluster *cl)
{
    return (uint64_t)((double)cl->dev.mem_bytes * (1 - cl->reserve));
}

/* ---- the front ---------------------------------------------------------------------- */

void remat_cluster_rows_free(remat_cluster_row *rows, size_t n)
{
    if (!rows) return;
    for (size_t i = 0; i < n; i++) remat_cluster_row_clear(&rows[i]);
    free(rows);
}

static int cmp_cluster_row(const void *a, const void *b)
{
    const remat_cluster_row *x = a, *y = b;
    if (x->peak_bytes != y->peak_bytes) return x->peak_bytes < y->peak_bytes ? -1 : 1;
    return (x->step_ms_pred > y->step_ms_pred) - (x->step_ms_pred < y->step_ms_pred);
}

remat_status remat_cluster_pareto(const remat_config *cfg, const remat_cluster *cl, remat_cluster_row **rows, size_t *n)
{
    ctx x;
    remat_planner *pl = NULL;
    remat_cluster_row *r = NULL;
    char *pol = NULL;
    size_t m = 0, k = 0;
    remat_status st;
    rerun none = { 0, 0, 0 };
    if (!rows || !n) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_pareto: NULL argument");
    *rows = NULL;
    *n = 0;
    if ((st = ctx_init(&x, cfg, cl))) return st;
    if (cfg->moe_first_dense > 0)
        return remat_fail(REMAT_ERR_INVALID, "--pareto is one model chunk's front of the planner's per-layer plans: "
                          "not for a chain with a dense prefix (--moe-first-dense), planned stage by stage");
    if (!(pol = remat_malloc(REMAT_POLICY_MAX))) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    if ((st = remat_planner_create(&x.chunk, &x.prof, planner_droppable(&x), &pl))) goto out;
    remat_planner_set_host(pl, x.host / x.f);
    if ((st = remat_planner_build_fronts(pl, 0))) goto out;
    size_t np = remat_planner_front_size(pl);
    if (!(r = remat_calloc(np ? np : 1, sizeof *r))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    for (; m < np; m++) {
        uint64_t pk;
        remat_planner_front_point(pl, m, &pk, NULL);
        if ((st = remat_planner_best(pl, pk, pol, REMAT_POLICY_MAX, NULL, NULL)) ||
            (st = eval_row(&x, pol, none, &r[m], NULL)))
            goto out;
    }
    qsort(r, m, sizeof *r, cmp_cluster_row);
    for (size_t i = 0; i < m; i++)
        if (!k || (r[i].peak_bytes > r[k - 1].peak_bytes && r[i].step_ms_pred < r[k - 1].step_ms_pred)) {
            if (k != i) { r[k] = r[i]; memset(&r[i], 0, sizeof r[i]); }
            k++;
        } else {
            remat_cluster_row_clear(&r[i]);
        }
    *rows = r;
    *n = k;
    r = NULL;
    m = 0;
out:
    remat_cluster_rows_free(r, m);
    remat_planner_free(pl);
    free(pol);
    return st;
}

/* ---- maximize ------------------------------------------------------------------- */

static void set_dim(remat_config *c, remat_cluster *cl, const remat_config *base, const remat_cluster *bcl, int dim,
                    int v)
{
    *c = *base;
    *cl = *bcl;
    if (dim == REMAT_CLUSTER_SEQ) {
        c->seq = v;
        if (c->max_seq < v) c->max_seq = v;
    } else {
        long m = micro_per_replica(base, bcl);
        c->batch = v;
        cl->global_batch = (int)(m * v * bcl->dp);
    }
}

/* Does answer `which` exist at this size?  *ok 1 or 0.  The framework's
 * options are tried (with its recomputation, or for the optimum with
 * remat's), stopping at the first that fits; for the optimum, then the
 * plan of the smallest peak.  With keep, the whole answer goes there. */
static remat_status exists_at(const remat_config *c, const remat_cluster *cl, int which, int *ok,
                              remat_cluster_answer *keep)
{
    ctx x;
    cand *cs = NULL;
    size_t nc = 0;
    remat_status st;
    *ok = 0;
    if (remat_cluster_check(c, cl)) return REMAT_OK;     /* sizes out of range: does not fit */
    if (keep) {
        remat_cluster_answer a;
        if ((st = remat_cluster_plan(c, cl, &a))) return st;
        const remat_cluster_row *r = which == REMAT_CLUSTER_MEGATRON ? &a.best_megatron
                                   : which == REMAT_CLUSTER_TORCHTITAN ? &a.best_torchtitan : &a.optimal;
        *ok = r->policy != NULL;
        remat_cluster_answer_clear(keep);
        *keep = a;
        return REMAT_OK;
    }
    if ((st = ctx_init(&x, c, cl)) || (st = framework_options(&x, &cs, &nc))) return st;
    rerun none = { 0, 0, 0 };
    for (size_t i = 0; i < nc && !*ok && !st; i++) {
        if ((which == REMAT_CLUSTER_MEGATRON && !cs[i].has_megatron) ||
            (which == REMAT_CLUSTER_TORCHTITAN && !cs[i].torchtitan)) continue;
        remat_cluster_row r;
        if ((st = eval_row(&x, cs[i].policy, which == REMAT_CLUSTER_OPTIMAL ? none : cs[i].rr, &r, NULL))) break;
        *ok = r.fits;
        remat_cluster_row_clear(&r);
    }
    free(cs);
    if (st || *ok || which != REMAT_CLUSTER_OPTIMAL) return st;
    remat_cluster_row best;
    memset(&best, 0, sizeof best);
    if ((st = best_plan(&x, &best))) return st;
    *ok = best.policy != NULL;
    remat_cluster_row_clear(&best);
    return REMAT_OK;
}

typedef struct maxarg { const remat_config *cfg; const remat_cluster *cl; int dim, which, step; } maxarg;

static remat_status exists_dim(void *arg, int v, int *ok)
{
    const maxarg *a = arg;
    remat_config c;
    remat_cluster k;
    set_dim(&c, &k, a->cfg, a->cl, a->dim, v * a->step);
    return exists_at(&c, &k, a->which, ok, NULL);
}

remat_status remat_cluster_maximize(const remat_config *cfg, const remat_cluster *cl, remat_cluster_dim dim,
                                    remat_cluster_which which, int *best, remat_cluster_answer *out)
{
    remat_status st;
    remat_config c;
    remat_cluster k;
    if (!best) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_maximize: best is NULL");
    *best = 0;
    if (out) memset(out, 0, sizeof *out);
    if ((st = remat_cluster_check(cfg, cl))) return st;
    if (dim != REMAT_CLUSTER_MICROBATCH && dim != REMAT_CLUSTER_SEQ)
        return remat_fail(REMAT_ERR_INVALID, "maximize: dimension must be micro-batch or seq");
    if (which < REMAT_CLUSTER_OPTIMAL || which > REMAT_CLUSTER_TORCHTITAN)
        return remat_fail(REMAT_ERR_INVALID, "maximize: which must be optimal, megatron or torchtitan");
    /* seq moves in steps that keep it divisible: by T under sequence
     * parallelism, by 2 CP under context parallelism (two chunks a GPU), and
     * then each GPU's s/CP by T */
    int T = remat_config_tp(cfg), CP = remat_config_cp(cfg), step = 1;
    if (dim == REMAT_CLUSTER_SEQ) {
        int per = cfg->sp ? (T % 2 ? 2 * T : T) : 2;       /* what s/CP must be a multiple of */
        step = CP > 1 ? CP * per : cfg->sp ? T : 1;
    }
    const int limit = 1 << 20;
    int ok;
    set_dim(&c, &k, cfg, cl, dim, step);
    if ((st = exists_at(&c, &k, which, &ok, NULL))) return st;
    if (!ok) return REMAT_OK;
    maxarg ma = { cfg, cl, dim, which, step };     /* searched in steps */
    if ((st = remat_search_largest(limit / step, exists_dim, &ma, best))) return st;
    *best *= step;
    if (out) {
        set_dim(&c, &k, cfg, cl, dim, *best);
        if ((st = exists_at(&c, &k, which, &ok, out))) return st;
    }
    return REMAT_OK;
}
