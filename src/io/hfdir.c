/*
 * hfdir.c -- Hugging Face model directories (REMAT_WEIGHTS_HF): config.json,
 * model.safetensors or model.safetensors.index.json and its shards, read
 * into a layout and written from a model.
 *
 * config.json is where Hugging Face's keys meet remat's named dimensions,
 * and this file is the one place that knows them: GPT2Config's (n_embd,
 * n_layer, n_head, n_positions, n_inner, activation_function,
 * layer_norm_epsilon) and LlamaConfig's (hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling,
 * hidden_act, attention_bias, mlp_bias, tie_word_embeddings), each with
 * transformers' default when absent or null (transformers'
 * configuration_gpt2.py and configuration_llama.py; PretrainedConfig ties
 * the embeddings unless told otherwise, LlamaConfig does not).  Mixtral's
 * and Qwen3-MoE's configs are LlamaConfig's keys plus their experts'
 * (configuration_mixtral.py: num_local_experts, num_experts_per_tok, the
 * experts' width intermediate_size, sliding_window null;
 * configuration_qwen3_moe.py: num_experts, num_experts_per_tok,
 * moe_intermediate_size, the q/k norms, decoder_sparse_step 1 and no
 * mlp_only_layers: every layer MoE), planned on the framework tables;
 * DeepSeek-V3's multi-latent attention and dense first layers are not
 * modelled, and refused by name.  Rope
 * scaling is Hugging Face's rope_scaling (rope_type, or the older "type"),
 * or transformers 5's rope_parameters (which holds rope_theta too).  What
 * remat's kernels do not compute is refused by name, never ignored.
 *
 * The index is save_pretrained's: {"metadata": {"total_size": bytes},
 * "weight_map": {tensor: shard file}}.  Every shard it names must exist and
 * be a valid safetensors file, every tensor must be in the shard the index
 * says and in no other; files of the directory the index does not name are
 * not read.  All JSON goes through Jansson (duplicate keys refused).
 *
 * Writing follows save_pretrained: shards of at most shard_bytes of tensor
 * data in the model's tensor order (huggingface_hub's
 * split_state_dict_into_shards: a tensor that would take a shard past the
 * limit starts the next one; one larger than the limit gets its own), named
 * model-%05d-of-%05d.safetensors, or model.safetensors when there is one.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/core.h"
#include "../engine/model.h"
#include "io.h"
#include "weights.h"

#define HF_CONFIG "config.json"
#define HF_SINGLE "model.safetensors"
#define HF_INDEX "model.safetensors.index.json"
#define HF_MAX_JSON ((size_t)64 << 20)   /* config.json and the index: a few KB in practice */
#define HF_MAX_SHARDS 99999              /* what the 5-digit shard names hold */

/* ---- config.json: reading ------------------------------------------------------ */

/* a setting remat computes one way only: refused by name otherwise */
static remat_status hf_unsupported(const remat_jobj *h, const char *key, const char *val, const char *why)
{
    return remat_fail(REMAT_ERR_FORMAT, "%s: %s%s %s is not supported: %s", h->src, h->where, key, val, why);
}

/* GPT2Config: a tied head, tanh GELU, LayerNorm's 1e-5, 4C MLP */
static remat_status gpt2_config(const remat_jobj *h, remat_config *c)
{
    remat_status st;
    int tie, scale, inv, inner;
    double eps;
    const char *act;
    if ((st = remat_jobj_int(h, "vocab_size", 50257, REMAT_MIN_VOCAB, REMAT_MAX_VOCAB, &c->vocab)) ||
        (st = remat_jobj_int(h, "n_positions", 1024, 1, REMAT_MAX_SEQ, &c->max_seq)) ||
        (st = remat_jobj_int(h, "n_embd", 768, 1, REMAT_MAX_EMBD, &c->n_embd)) ||
        (st = remat_jobj_int(h, "n_layer", 12, 1, REMAT_MAX_LAYERS, &c->n_layer)) ||
        (st = remat_jobj_int(h, "n_head", 12, 1, REMAT_MAX_EMBD, &c->n_head)) ||
        (st = remat_jobj_int(h, "n_inner", 4LL * c->n_embd, 1, 1 << 24, &inner)) ||
        (st = remat_jobj_str(h, "activation_function", "gelu_new", &act)) ||
        (st = remat_jobj_num(h, "layer_norm_epsilon", 1e-5, 0, 1, &eps)) ||
        (st = remat_jobj_bool(h, "tie_word_embeddings", 1, &tie)) || (st = remat_jobj_bool(h, "scale_attn_weights", 1, &scale)) ||
        (st = remat_jobj_bool(h, "scale_attn_by_inverse_layer_idx", 0, &inv)))
        return st;
    char v[48];
    if (inner != 4 * c->n_embd) {
        snprintf(v, sizeof v, "%d", inner);
        return hf_unsupported(h, "n_inner", v, "remat's GPT-2 MLP is 4 n_embd wide (n_inner null)");
    }
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
        return hf_unsupported(h, "activation_function", act, "remat's GPT-2 computes the tanh GELU (gelu_new)");
    if (eps != 1e-5) {
        snprintf(v, sizeof v, "%g", eps);
        return hf_unsupported(h, "layer_norm_epsilon", v, "remat's GPT-2 LayerNorm uses 1e-5");
    }
    if (!tie) return hf_unsupported(h, "tie_word_embeddings", "false", "remat's GPT-2 ties the LM head to wte");
    if (!scale) return hf_unsupported(h, "scale_attn_weights", "false", "remat scales the scores by 1/sqrt(head size)");
    if (inv) return hf_unsupported(h, "scale_attn_by_inverse_layer_idx", "true", "remat scales every layer alike");
    return REMAT_OK;
}

/* rope_scaling (or rope_parameters): none, "default", or "llama3"; with
 * yarn_ok, also "yarn" (DeepSeek-V3's), read as none: the plans of the
 * framework tables that take it (multi-latent attention) do not depend on
 * RoPE's frequencies, and remat's engine does not run them */
static remat_status rope_config_y(const remat_jobj *top, remat_config *c, int yarn_ok)
{
    remat_status st;
    const json_t *rp = remat_jobj_val(top, "rope_parameters"), *rs = rp ? rp : remat_jobj_val(top, "rope_scaling");
    remat_jobj h = { rs, top->src, rp ? "rope_parameters." : "rope_scaling." };
    if ((st = remat_jobj_num(top, "rope_theta", 10000.0, 0, 1e12, &c->rope_theta))) return st;
    c->rope_scaling.type = REMAT_ROPE_DEFAULT;
    if (!rs) return REMAT_OK;
    if (!json_is_object(rs)) return remat_jobj_bad(top, rp ? "rope_parameters" : "rope_scaling", "an object or null", rs);
    if (rp && (st = remat_jobj_num(&h, "rope_theta", c->rope_theta, 0, 1e12, &c->rope_theta))) return st;
    const char *type;
    if ((st = remat_jobj_str(&h, "rope_type", NULL, &type))) return st;
    if (!type && (st = remat_jobj_str(&h, "type", NULL, &type))) return st;   /* the key's older name */
    if (!type) return remat_jobj_bad(&h, "rope_type", "a string", NULL);
    if (!strcmp(type, "default") || (yarn_ok && !strcmp(type, "yarn"))) return REMAT_OK;
    if (strcmp(type, "llama3"))
        return hf_unsupported(&h, "rope_type", type, "remat implements llama3 rope scaling (and none)");
    remat_rope_scaling *r = &c->rope_scaling;
    r->type = REMAT_ROPE_LLAMA3;
    static const char *const need[] = { "factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings" };
    for (int i = 0; i < 4; i++)
        if (!remat_jobj_val(&h, need[i])) return remat_jobj_bad(&h, need[i], "given for llama3 rope scaling", NULL);
    if ((st = remat_jobj_num(&h, "factor", 0, 0, 1e6, &r->factor)) ||
        (st = remat_jobj_num(&h, "low_freq_factor", 0, 0, 1e6, &r->low_freq_factor)) ||
        (st = remat_jobj_num(&h, "high_freq_factor", 0, 0, 1e6, &r->high_freq_factor)) ||
        (st = remat_jobj_int(&h, "original_max_position_embeddings", 0, 1, 1 << 24, &r->original_max_position)))
        return st;
    return REMAT_OK;
}

/* LlamaConfig: SwiGLU with SiLU, no biases (yarn_ok: rope_config_y's) */
static remat_status llama_config_y(const remat_jobj *h, remat_config *c, int yarn_ok)
{
    remat_status st;
    int ab, mb;
    const char *act;
    if ((st = remat_jobj_int(h, "vocab_size", 32000, REMAT_MIN_VOCAB, REMAT_MAX_VOCAB, &c->vocab)) ||
        (st = remat_jobj_int(h, "hidden_size", 4096, 1, REMAT_MAX_EMBD, &c->n_embd)) ||
        (st = remat_jobj_int(h, "intermediate_size", 11008, 1, 1 << 20, &c->ffn_dim)) ||
        (st = remat_jobj_int(h, "num_hidden_layers", 32, 1, REMAT_MAX_LAYERS, &c->n_layer)) ||
        (st = remat_jobj_int(h, "num_attention_heads", 32, 1, REMAT_MAX_EMBD, &c->n_head)) ||
        (st = remat_jobj_int(h, "num_key_value_heads", c->n_head, 1, REMAT_MAX_EMBD, &c->n_kv_head)) ||
        (st = remat_jobj_int(h, "head_dim", c->n_embd % c->n_head ? 0 : c->n_embd / c->n_head, 1, 65536, &c->head_dim)) ||
        (st = remat_jobj_int(h, "max_position_embeddings", 2048, 1, REMAT_MAX_SEQ, &c->max_seq)) ||
        (st = remat_jobj_num(h, "rms_norm_eps", 1e-6, 0, 1, &c->norm_eps)) ||
        (st = remat_jobj_bool(h, "tie_word_embeddings", 0, &c->tie_embeddings)) ||
        (st = remat_jobj_str(h, "hidden_act", "silu", &act)) || (st = remat_jobj_bool(h, "attention_bias", 0, &ab)) ||
        (st = remat_jobj_bool(h, "mlp_bias", 0, &mb)) || (st = rope_config_y(h, c, yarn_ok)))
        return st;
    if (!c->head_dim)   /* transformers' default hidden_size // heads needs them to divide */
        return remat_fail(REMAT_ERR_FORMAT, "%s: hidden_size %d is not divisible by num_attention_heads %d and head_dim "
                          "is not given", h->src, c->n_embd, c->n_head);
    if (strcmp(act, "silu")) return hf_unsupported(h, "hidden_act", act, "remat's SwiGLU MLP uses SiLU");
    if (ab) return hf_unsupported(h, "attention_bias", "true", "remat's Llama attention has no biases");
    if (mb) return hf_unsupported(h, "mlp_bias", "true", "remat's Llama MLP has no biases");
    return REMAT_OK;
}

/* the experts of a Mixtral (qwen 0) or Qwen3-MoE (qwen 1) config, after llama_config */
static remat_status moe_config(const remat_jobj *h, int qwen, remat_config *c)
{
    remat_status st;
    const json_t *v;
    char buf[48];
    c->moe_ffn_dim = c->ffn_dim;   /* Mixtral's experts are intermediate_size wide */
    if ((st = remat_jobj_int(h, qwen ? "num_experts" : "num_local_experts", qwen ? 128 : 8, 1, 4096, &c->n_experts)) ||
        (st = remat_jobj_int(h, "num_experts_per_tok", qwen ? 8 : 2, 1, c->n_experts, &c->moe_topk)) ||
        (qwen && (st = remat_jobj_int(h, "moe_intermediate_size", 768, 1, 1 << 20, &c->moe_ffn_dim))))
        return st;
    c->qk_norm = qwen;
    if (!qwen) {
        if ((v = remat_jobj_val(h, "sliding_window"))) {
            remat_jobj_show(v, buf, sizeof buf);
            return hf_unsupported(h, "sliding_window", buf, "remat's attention is causal over the whole sequence");
        }
        return REMAT_OK;
    }
    int step, sw;
    if ((st = remat_jobj_int(h, "decoder_sparse_step", 1, 1, REMAT_MAX_LAYERS, &step)) ||
        (st = remat_jobj_bool(h, "use_sliding_window", 0, &sw)))
        return st;
    if (step != 1) {
        snprintf(buf, sizeof buf, "%d", step);
        return hf_unsupported(h, "decoder_sparse_step", buf, "remat plans every layer as MoE (dense layers between "
                              "are not modelled)");
    }
    if ((v = remat_jobj_val(h, "mlp_only_layers")) && !(json_is_array(v) && !json_array_size(v))) {
        remat_jobj_show(v, buf, sizeof buf);
        return hf_unsupported(h, "mlp_only_layers", buf, "remat plans every layer as MoE (dense layers are not "
                              "modelled)");
    }
    if (sw) return hf_unsupported(h, "use_sliding_window", "true", "remat's attention is causal over the whole sequence");
    return REMAT_OK;
}

/* DeepseekV3Config (transformers 5.18, models/deepseek_v3/configuration_deepseek_v3.py):
 * multi-latent attention, n_routed_experts of moe_intermediate_size after
 * first_k_dense_replace dense layers of intermediate_size, n_shared_experts
 * shared ones, group-limited sigmoid routing (noaux_tc: the bias-corrected
 * top-k), after llama_config_y.  What remat's MLA tables do not model is
 * refused by name: q without compression (q_lora_rank null), dense layers
 * between routed ones (moe_layer_freq above 1), another score function or
 * top-k method. */
static int qk_rope_odd(int d) { return d % 2 != 0; }

static remat_status deepseek_config(const remat_jobj *h, remat_config *c)
{
    remat_status st;
    const json_t *v;
    const char *sf, *tm;
    char buf[48];
    int shared, freq;
    if ((v = json_object_get(h->o, "q_lora_rank")) && json_is_null(v))   /* remat_jobj_val reads null as absent */
        return hf_unsupported(h, "q_lora_rank", "null", "remat's MLA tables compress q (DeepSeek-V3's 1536)");
    if ((st = remat_jobj_int(h, "q_lora_rank", 1536, 1, 65536, &c->q_lora_rank)) ||
        (st = remat_jobj_int(h, "kv_lora_rank", 512, 1, 65536, &c->kv_lora_rank)) ||
        (st = remat_jobj_int(h, "qk_nope_head_dim", 128, 1, 65536, &c->qk_nope_dim)) ||
        (st = remat_jobj_int(h, "qk_rope_head_dim", 64, 2, 65536, &c->qk_rope_dim)) ||
        (st = remat_jobj_int(h, "v_head_dim", 128, 1, 65536, &c->v_head_dim)) ||
        (st = remat_jobj_int(h, "n_routed_experts", 256, 1, 4096, &c->n_experts)) ||
        (st = remat_jobj_int(h, "num_experts_per_tok", 8, 1, c->n_experts, &c->moe_topk)) ||
        (st = remat_jobj_int(h, "moe_intermediate_size", 2048, 1, 1 << 20, &c->moe_ffn_dim)) ||
        (st = remat_jobj_int(h, "n_shared_experts", 1, 0, 64, &shared)) ||
        (st = remat_jobj_int(h, "first_k_dense_replace", 3, 0, REMAT_MAX_LAYERS, &c->moe_first_dense)) ||
        (st = remat_jobj_int(h, "n_group", 8, 1, 4096, &c->moe_groups)) ||
        (st = remat_jobj_int(h, "topk_group", 4, 1, 4096, &c->moe_group_topk)) ||
        (st = remat_jobj_num(h, "routed_scaling_factor", 2.5, 1e-6, 1e6, &c->moe_scaling)) ||
        (st = remat_jobj_int(h, "moe_layer_freq", 1, 1, REMAT_MAX_LAYERS, &freq)) ||
        (st = remat_jobj_str(h, "scoring_func", "sigmoid", &sf)) || (st = remat_jobj_str(h, "topk_method", "noaux_tc", &tm)))
        return st;
    if (qk_rope_odd(c->qk_rope_dim))
        return remat_jobj_bad(h, "qk_rope_head_dim", "even (RoPE rotates pairs)", remat_jobj_val(h, "qk_rope_head_dim"));
    if (freq != 1) {
        snprintf(buf, sizeof buf, "%d", freq);
        return hf_unsupported(h, "moe_layer_freq", buf, "remat plans a dense prefix and routed layers after it "
                              "(dense layers between are not modelled)");
    }
    if (c->n_experts % c->moe_groups || c->moe_group_topk > c->moe_groups)
        return remat_jobj_bad(h, "n_group", "dividing n_routed_experts, and topk_group at most it",
                              remat_jobj_val(h, "n_group"));
    if (strcmp(sf, "sigmoid")) return hf_unsupported(h, "scoring_func", sf, "remat's MLA tables route as DeepSeek-V3 (sigmoid)");
    if (strcmp(tm, "noaux_tc"))
        return hf_unsupported(h, "topk_method", tm, "remat's MLA tables route as DeepSeek-V3 (noaux_tc)");
    if (c->moe_first_dense >= c->n_layer) {
        snprintf(buf, sizeof buf, "%d", c->moe_first_dense);
        return hf_unsupported(h, "first_k_dense_replace", buf, "every layer dense: the MLA tables need routed layers");
    }
    c->moe_shared_dim = shared * c->moe_ffn_dim;
    c->head_dim = 0;         /* MLA's heads are the dimensions above (transformers sets head_dim to the rope part) */
    return REMAT_OK;
}

remat_status remat_hf_config_parse(const void *buf, size_t n, const char *src, remat_config *out)
{
    remat_status st;
    json_error_t je;
    remat_config c;
    memset(&c, 0, sizeof c);
    json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return remat_json_fail(src, "config.json", &je);
    remat_jobj h = { root, src, "" };
    const char *mt = NULL;
    if (!json_is_object(root)) { st = remat_fail(REMAT_ERR_FORMAT, "%s: not a JSON object", src); goto out; }
    if ((st = remat_jobj_str(&h, "model_type", NULL, &mt))) goto out;
    if (!mt) { st = remat_fail(REMAT_ERR_FORMAT, "%s: no model_type (remat reads gpt2 and llama)", src); goto out; }
    int moe = !strcmp(mt, "mixtral") ? 1 : !strcmp(mt, "qwen3_moe") ? 2 : !strcmp(mt, "deepseek_v3") ? 3 : 0;
    if (moe) c.arch = REMAT_ARCH_LLAMA;
    else if (remat_arch_parse(mt, &c.arch)) {
        st = remat_fail(REMAT_ERR_FORMAT, "%s: model_type '%.64s' is not one remat reads (gpt2, llama, mixtral, "
                        "qwen3_moe, deepseek_v3)", src, mt);
        goto out;
    }
    if ((st = c.arch == REMAT_ARCH_LLAMA ? llama_config_y(&h, &c, moe == 3) : gpt2_config(&h, &c))) goto out;
    if (moe == 3 && (st = deepseek_config(&h, &c))) goto out;
    if (moe && moe != 3 && (st = moe_config(&h, moe == 2, &c))) goto out;
    c.batch = 1;
    c.seq = 1;
    /* the dense part checked here; the experts with the framework that plans them (check_moe) */
    remat_config dense = c;
    dense.n_experts = dense.moe_topk = dense.moe_ffn_dim = dense.moe_shared_dim = dense.qk_norm = 0;
    dense.q_lora_rank = dense.kv_lora_rank = dense.qk_nope_dim = dense.qk_rope_dim = dense.v_head_dim = 0;
    dense.moe_first_dense = dense.moe_groups = dense.moe_group_topk = 0;
    dense.moe_scaling = 0;
    if ((st = remat_config_check(&dense))) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        st = remat_fail(REMAT_ERR_FORMAT, "%s: the model it describes is invalid: %s", src, msg);
        goto out;
    }
    *out = c;
out:
    json_decref(root);
    return st;
}

/* ---- config.json: writing ------------------------------------------------------ */

/* The fewest significant digits (%.Ng, as Jansson prints reals) that give
 * back every one of v[0, n) exactly, and enough to write the whole part of
 * each without an exponent (10000.0 rather than 1e4, as Python writes it). */
static int real_digits(const double *v, int n)
{
    int p = 1;
    for (int i = 0; i < n; i++) {
        double a = fabs(v[i]);
        int whole = a >= 1 && a < 1e16 ? 1 + (int)floor(log10(a)) : 1;
        if (whole > p) p = whole;
    }
    for (; p < 17; p++) {
        int all = 1;
        for (int i = 0; i < n && all; i++) {
            char b[40];
            snprintf(b, sizeof b, "%.*g", p, v[i]);
            all = strtod(b, NULL) == v[i];
        }
        if (all) return p;
    }
    return 17;
}

typedef struct hf_out { json_t *o; int ok; double reals[8]; int nreal; } hf_out;

static void put(hf_out *w, json_t *o, const char *key, json_t *v)
{
    w->ok = w->ok && v && !json_object_set_new(o, key, v);
}

static void put_real(hf_out *w, json_t *o, const char *key, double v)
{
    if (w->nreal < 8) w->reals[w->nreal++] = v;
    put(w, o, key, json_real(v));
}

remat_status remat_hf_config_dump(const remat_config *c, remat_dtype dt, char **text)
{
    *text = NULL;
    if (c->n_experts)   /* the engine's models are dense: what is written is what it trains */
        return remat_fail(REMAT_ERR_INVALID, "a config.json is written for a dense model (experts: %d)", c->n_experts);
    hf_out w = { json_object(), 1, { 0 }, 0 };
    json_t *o = w.o;
    w.ok = o != NULL;
    if (c->arch == REMAT_ARCH_LLAMA) {
        put(&w, o, "architectures", json_pack("[s]", "LlamaForCausalLM"));
        put(&w, o, "model_type", json_string("llama"));
        put(&w, o, "vocab_size", json_integer(c->vocab));
        put(&w, o, "hidden_size", json_integer(c->n_embd));
        put(&w, o, "intermediate_size", json_integer(remat_config_ffn_dim(c)));
        put(&w, o, "num_hidden_layers", json_integer(c->n_layer));
        put(&w, o, "num_attention_heads", json_integer(c->n_head));
        put(&w, o, "num_key_value_heads", json_integer(remat_config_kv_heads(c)));
        put(&w, o, "head_dim", json_integer(remat_config_head_dim(c)));
        put(&w, o, "hidden_act", json_string("silu"));
        put(&w, o, "max_position_embeddings", json_integer(c->max_seq));
        put_real(&w, o, "rms_norm_eps", remat_config_norm_eps(c));
        put_real(&w, o, "rope_theta", remat_config_rope_theta(c));
        if (c->rope_scaling.type == REMAT_ROPE_LLAMA3) {
            json_t *r = json_object();
            put(&w, r, "rope_type", json_string("llama3"));
            put_real(&w, r, "factor", c->rope_scaling.factor);
            put_real(&w, r, "low_freq_factor", c->rope_scaling.low_freq_factor);
            put_real(&w, r, "high_freq_factor", c->rope_scaling.high_freq_factor);
            put(&w, r, "original_max_position_embeddings", json_integer(c->rope_scaling.original_max_position));
            put(&w, o, "rope_scaling", r);
        } else {
            put(&w, o, "rope_scaling", json_null());
        }
        put(&w, o, "tie_word_embeddings", json_boolean(remat_config_tied(c)));
        put(&w, o, "attention_bias", json_false());
        put(&w, o, "mlp_bias", json_false());
    } else {
        put(&w, o, "architectures", json_pack("[s]", "GPT2LMHeadModel"));
        put(&w, o, "model_type", json_string("gpt2"));
        put(&w, o, "vocab_size", json_integer(c->vocab));
        put(&w, o, "n_positions", json_integer(c->max_seq));
        put(&w, o, "n_embd", json_integer(c->n_embd));
        put(&w, o, "n_layer", json_integer(c->n_layer));
        put(&w, o, "n_head", json_integer(c->n_head));
        put(&w, o, "n_inner", json_null());
        put(&w, o, "activation_function", json_string("gelu_new"));
        put_real(&w, o, "layer_norm_epsilon", remat_config_norm_eps(c));
        put(&w, o, "tie_word_embeddings", json_true());
    }
    put(&w, o, "torch_dtype", json_string(dt == REMAT_DTYPE_BF16 ? "bfloat16" : "float32"));
    char *t = w.ok ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(real_digits(w.reals, w.nreal)))
                   : NULL;
    json_decref(o);
    if (!t) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing config.json");
    *text = t;
    return REMAT_OK;
}

/* ---- the index ------------------------------------------------------------------- */

void remat_hf_index_clear(remat_hf_index *ix)
{
    for (int i = 0; i < ix->nshard; i++) free(ix->shard[i]);
    free(ix->shard);
    for (size_t i = 0; i < ix->n; i++) free(ix->tensor[i]);
    free(ix->tensor);
    free(ix->in);
    memset(ix, 0, sizeof *ix);
}

/* a shard's name: a file of the directory itself */
static int shard_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 255 && s[0] != '.' && !strchr(s, '/');
}

typedef struct hf_entry { const char *tensor, *file; } hf_entry;
static int cmp_file(const void *a, const void *b)
{
    int c = strcmp(((const hf_entry *)a)->file, ((const hf_entry *)b)->file);
    return c ? c : strcmp(((const hf_entry *)a)->tensor, ((const hf_entry *)b)->tensor);
}

remat_status remat_hf_index_parse(const void *buf, size_t n, const char *src, remat_hf_index *out)
{
    remat_status st = REMAT_OK;
    json_error_t je;
    hf_entry *e = NULL;
    remat_hf_index ix;
    memset(&ix, 0, sizeof ix);
    memset(out, 0, sizeof *out);
    json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return remat_json_fail(src, "index", &je);
    const json_t *meta = json_object_get(root, "metadata"), *map = json_object_get(root, "weight_map"),
                 *total = json_is_object(meta) ? json_object_get(meta, "total_size") : NULL;
    if (!json_is_object(root) || !json_is_object(map) || !json_object_size(map)) {
        st = remat_fail(REMAT_ERR_FORMAT, "%s: an index is an object with a non-empty \"weight_map\" object", src);
        goto out;
    }
    if ((meta && !json_is_object(meta) && !json_is_null(meta)) ||
        (total && (!json_is_integer(total) || json_integer_value(total) < 0))) {
        st = remat_fail(REMAT_ERR_FORMAT, "%s: the index's metadata must be an object and its total_size a whole "
                        "number of bytes", src);
        goto out;
    }
    ix.has_total = total != NULL;
    ix.total_size = total ? (uint64_t)json_integer_value(total) : 0;
    size_t m = json_object_size(map), k = 0;
    if (!(e = remat_malloc(m * sizeof *e)) || !(ix.tensor = remat_calloc(m, sizeof *ix.tensor)) ||
        !(ix.in = remat_malloc(m * sizeof *ix.in))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", src);
        goto out;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)map, key, v) {
        if (!json_is_string(v) || !shard_name_ok(json_string_value(v))) {
            char got[48];
            remat_jobj_show(v, got, sizeof got);
            st = remat_fail(REMAT_ERR_FORMAT, "%s: weight_map puts tensor %.200s in %s: a shard is named by a file "
                            "name of the directory", src, key, got);
            goto out;
        }
        e[k++] = (hf_entry){ key, json_string_value(v) };
    }
    /* shards in name order (model-00001-of-N first), tensors by name within */
    qsort(e, m, sizeof *e, cmp_file);
    for (k = 0; k < m; k++) {
        if (!k || strcmp(e[k].file, e[k - 1].file)) {
            if (ix.nshard == HF_MAX_SHARDS) {
                st = remat_fail(REMAT_ERR_FORMAT, "%s: more than %d shards", src, HF_MAX_SHARDS);
                goto out;
            }
            char **s = remat_realloc(ix.shard, ((size_t)ix.nshard + 1) * sizeof *s);
            if (!s || !(s[ix.nshard] = remat_strdup(e[k].file))) {
                if (s) ix.shard = s;
                st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", src);
                goto out;
            }
            ix.shard = s;
            ix.nshard++;
        }
        if (!(ix.tensor[k] = remat_strdup(e[k].tensor))) {
            st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", src);
            goto out;
        }
        ix.in[k] = ix.nshard - 1;
        ix.n = k + 1;
    }
    *out = ix;
    memset(&ix, 0, sizeof ix);
out:
    remat_hf_index_clear(&ix);
    free(e);
    json_decref(root);
    return st;
}

remat_status remat_hf_index_dump(const remat_hf_index *ix, char **text)
{
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    int ok = root && meta && map;
    *text = NULL;
    if (ok && ix->has_total) ok = !json_object_set_new(meta, "total_size", json_integer((json_int_t)ix->total_size));
    for (size_t i = 0; ok && i < ix->n; i++) ok = !json_object_set_new(map, ix->tensor[i], json_string(ix->shard[ix->in[i]]));
    ok = ok && !json_object_set_new(root, "metadata", meta);
    if (!ok) json_decref(meta);
    ok = ok && !json_object_set_new(root, "weight_map", map);
    if (!ok) json_decref(map);
    char *t = ok ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    if (!t) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing the index");
    *text = t;
    return REMAT_OK;
}

/* ---- reading a directory ------------------------------------------------------------ */

static remat_status join(char *buf, size_t n, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, n, "%s/%s", dir, name) >= n)
        return remat_fail(REMAT_ERR_INVALID, "path '%.200s/%s' is too long", dir, name);
    return REMAT_OK;
}

/* a JSON file of the directory, whole (NUL-terminated) */
static remat_status read_json_file(const char *path, char **buf, size_t *n)
{
    remat_status st = remat_read_file(path, HF_MAX_JSON, buf, n);
    if (st == REMAT_ERR_FORMAT)
        return remat_fail(REMAT_ERR_FORMAT, "'%s' is over %zu bytes; it is not a Hugging Face JSON file", path,
                          HF_MAX_JSON);
    return st;
}

remat_status remat_hf_config_read(const char *path, remat_config *out)
{
    char *buf = NULL;
    size_t n = 0;
    remat_status st = read_json_file(path, &buf, &n);
    if (!st) st = remat_hf_config_parse(buf, n, path, out);
    free(buf);
    return st;
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_tname(const void *a, const void *b)
{
    return strcmp((*(remat_st_tensor *const *)a)->name, (*(remat_st_tensor *const *)b)->name);
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const hf_entry *)a)->tensor, ((const hf_entry *)b)->tensor);
}

/* The index and the shards' headers agree tensor for tensor: both lists
 * sorted by name, walked side by side. */
static remat_status index_agrees(const remat_wlayout *ly, const remat_hf_index *ix, const char *ipath)
{
    remat_status st = REMAT_OK;
    remat_st_tensor **by = remat_malloc((ly->nt ? ly->nt : 1) * sizeof *by);
    hf_entry *e = remat_malloc(ix->n * sizeof *e);
    if (!by || !e) {
        free(by);
        free(e);
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", ipath);
    }
    for (size_t i = 0; i < ly->nt; i++) by[i] = &ly->t[i];
    qsort(by, ly->nt, sizeof *by, cmp_tname);
    for (size_t i = 0; i < ix->n; i++) e[i] = (hf_entry){ ix->tensor[i], ix->shard[ix->in[i]] };
    qsort(e, ix->n, sizeof *e, cmp_tensor);
    size_t a = 0, b = 0;
    while (!st && (a < ly->nt || b < ix->n)) {
        int c = a == ly->nt ? 1 : b == ix->n ? -1 : strcmp(by[a]->name, e[b].tensor);
        const char *in = a < ly->nt ? strrchr(ly->srcs[by[a]->src], '/') + 1 : "";
        if (c < 0)
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s of %s is not in the index's weight_map", ipath,
                            by[a]->name, in);
        else if (c > 0)
            st = remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor %.200s: the index puts it in %s, which does not "
                            "hold it", ipath, e[b].tensor, e[b].file);
        else if (strcmp(in, e[b].file))
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s is in %s, but the index puts it in %s", ipath,
                            by[a]->name, in, e[b].file);
        else { a++; b++; }
    }
    free(e);
    free(by);
    return st;
}

remat_status remat_hf_dir_layout(const char *dir, remat_wlayout *ly)
{
    remat_status st;
    char path[4096], ipath[4096];
    char *buf = NULL;
    size_t n = 0;
    remat_hf_index ix;
    memset(&ix, 0, sizeof ix);
    memset(ly, 0, sizeof *ly);
    ly->format = REMAT_WEIGHTS_HF;
    ly->fixed = 1;
    if ((st = join(path, sizeof path, dir, HF_CONFIG)) || (st = read_json_file(path, &buf, &n)) ||
        (st = remat_hf_config_parse(buf, n, path, &ly->shape)))
        goto out;
    free(buf);
    buf = NULL;
    if ((st = join(path, sizeof path, dir, HF_SINGLE)) || (st = join(ipath, sizeof ipath, dir, HF_INDEX))) goto out;
    int single = is_file(path);   /* preferred, as transformers prefers it */
    if (!single) {
        if (access(ipath, F_OK) != 0) {
            st = remat_fail(REMAT_ERR_IO, "%s holds neither %s nor %s", dir, HF_SINGLE, HF_INDEX);
            goto out;
        }
        if ((st = read_json_file(ipath, &buf, &n)) || (st = remat_hf_index_parse(buf, n, ipath, &ix))) goto out;
    }
    int ns = single ? 1 : ix.nshard;
    if (!(ly->srcs = remat_calloc((size_t)ns, sizeof *ly->srcs)) ||
        !(ly->srcsize = remat_calloc((size_t)ns, sizeof *ly->srcsize))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", dir);
        goto out;
    }
    for (int i = 0; i < ns; i++) {
        remat_wsrc s;
        if (!single && (st = join(path, sizeof path, dir, ix.shard[i]))) goto out;
        if (!(ly->srcs[i] = remat_strdup(path))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", dir); goto out; }
        ly->nsrc = i + 1;
        if ((st = remat_wsrc_open(path, &s))) {
            if (!single) {
                char msg[300];
                snprintf(msg, sizeof msg, "%s", remat_errmsg());
                st = remat_fail(st, "%s names shard %s, which cannot be read: %s", ipath, ix.shard[i], msg);
            }
            goto out;
        }
        ly->srcsize[i] = s.size;
        st = remat_st_read(&s, i, ly);
        fclose(s.f);
        if (st) goto out;
    }
    if ((st = remat_hf_names(ly, dir))) goto out;
    if (!single) st = index_agrees(ly, &ix, ipath);
out:
    free(buf);
    remat_hf_index_clear(&ix);
    if (st) remat_wlayout_clear(ly);
    return st;
}

/* ---- writing a directory -------------------------------------------------------------- */

/* model-NNNNN-of-MMMMM.safetensors: *of gets MMMMM */
static int shard_file(const char *name, long *of)
{
    static const char pre[] = "model-", mid[] = "-of-", suf[] = ".safetensors";
    if (strlen(name) != 6 + 5 + 4 + 5 + 12 || strncmp(name, pre, 6) || strncmp(name + 11, mid, 4) ||
        strcmp(name + 20, suf))
        return 0;
    for (int i = 0; i < 5; i++)
        if (name[6 + i] < '0' || name[6 + i] > '9' || name[15 + i] < '0' || name[15 + i] > '9') return 0;
    *of = strtol(name + 15, NULL, 10);
    return 1;
}

/* deletes dir/name when it exists */
static remat_status remove_stale(const char *dir, const char *name)
{
    char path[4096];
    remat_status st = join(path, sizeof path, dir, name);
    if (!st && unlink(path) != 0 && errno != ENOENT)
        st = remat_fail(REMAT_ERR_IO, "cannot remove the stale '%s': %s", path, strerror(errno));
    return st;
}

/* Which shard each of the n tensors goes to, as huggingface_hub's
 * split_state_dict_into_shards numbers them: a tensor over the limit is a
 * shard at once, the open shard gets its number when it closes.  Returns
 * the number of shards; *total gets the bytes. */
static int split_shards(const remat_st_out *o, size_t n, uint64_t es, uint64_t limit, int *shard_of, uint64_t *total)
{
    int next = 0, open = 0;
    size_t first = 0;   /* the open shard's first tensor */
    uint64_t cur = 0;
    *total = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t b = i < n ? es * o[i].shape[0] * (o[i].rank == 2 ? o[i].shape[1] : 1) : 0;
        if (i < n && b > limit) {
            shard_of[i] = next++;
            *total += b;
            continue;
        }
        if (open && (i == n || cur + b > limit)) {   /* close the open shard */
            for (size_t j = first; j < i; j++)
                if (shard_of[j] < 0) shard_of[j] = next;
            next++;
            open = 0;
            cur = 0;
        }
        if (i == n) break;
        if (!open) first = i;
        shard_of[i] = -1;
        open = 1;
        cur += b;
        *total += b;
    }
    return next;
}

static void shard_name(char *buf, size_t n, int i, int nshard)
{
    if (nshard == 1) snprintf(buf, n, "%s", HF_SINGLE);
    else snprintf(buf, n, "model-%05d-of-%05d.safetensors", i + 1, nshard);
}

/* writes text to dir/name atomically */
static remat_status write_text(const char *dir, const char *name, const char *text)
{
    char path[4096];
    remat_status st = join(path, sizeof path, dir, name);
    if (st) return st;
    size_t len = strlen(text);
    char *b = remat_malloc(len + 2);
    if (!b) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path);
    memcpy(b, text, len);
    b[len] = '\n';   /* as transformers ends its JSON files */
    st = remat_write_file_atomic(path, b, len + 1);
    free(b);
    return st;
}

remat_status remat_weights_save_hf(const remat_model *m, const char *dir, remat_dtype dtype, uint64_t shard_bytes)
{
    remat_status st;
    remat_st_out *o = NULL, *part = NULL;
    int *shard_of = NULL;
    char *text = NULL, path[4096], name[64];
    char **names = NULL, **tensors = NULL;
    size_t n = 0;
    int nshard = 0;
    if (!m || !dir || !*dir) return remat_fail(REMAT_ERR_INVALID, "remat_weights_save_hf: NULL argument");
    if (dtype != REMAT_DTYPE_FP32 && dtype != REMAT_DTYPE_BF16)
        return remat_fail(REMAT_ERR_INVALID, "weights dtype must be fp32 or bf16, got %d", (int)dtype);
    if (!shard_bytes) shard_bytes = REMAT_HF_SHARD_BYTES;
    const remat_config *c = &m->cfg;
    if ((st = remat_hf_outputs(c, m->params, &o, &n))) return st;
    if (!(shard_of = remat_malloc((n ? n : 1) * sizeof *shard_of)) || !(part = remat_malloc((n ? n : 1) * sizeof *part))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", dir);
        goto out;
    }
    uint64_t total = 0;
    nshard = split_shards(o, n, remat_dtype_bytes(dtype), shard_bytes, shard_of, &total);
    if (nshard > HF_MAX_SHARDS) {
        st = remat_fail(REMAT_ERR_INVALID, "a shard size of %llu bytes makes %d shards, more than the %d that "
                        "model-NNNNN-of-NNNNN names hold", (unsigned long long)shard_bytes, nshard, HF_MAX_SHARDS);
        goto out;
    }
    if (remat_mkdirs(dir, 0)) {
        st = remat_fail(REMAT_ERR_IO, "cannot create the directory '%s': %s", dir, strerror(errno));
        goto out;
    }
    /* the shards, each atomically */
    for (int k = 0; k < nshard; k++) {
        size_t np = 0;
        for (size_t i = 0; i < n; i++)
            if (shard_of[i] == k) part[np++] = o[i];
        shard_name(name, sizeof name, k, nshard);
        remat_atomic_file a;
        if ((st = join(path, sizeof path, dir, name)) || (st = remat_atomic_begin(&a, path))) goto out;
        if ((st = remat_st_write(a.f, c, part, np, dtype))) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s", st == REMAT_ERR_IO ? strerror(errno) : remat_errmsg());
            remat_atomic_abort(&a);
            st = remat_fail(st, "cannot write '%s': %s", path, msg);
            goto out;
        }
        if ((st = remat_atomic_commit(&a))) goto out;
    }
    if ((st = remat_hf_config_dump(c, dtype, &text)) || (st = write_text(dir, HF_CONFIG, text))) goto out;
    free(text);
    text = NULL;
    /* the other layout's files would be read instead of (model.safetensors
     * first, as transformers reads it) or besides these */
    if (nshard > 1) {
        remat_hf_index ix;
        memset(&ix, 0, sizeof ix);
        if (!(names = remat_calloc((size_t)nshard, sizeof *names)) || !(tensors = remat_calloc(n, sizeof *tensors)) ||
            !(ix.in = remat_malloc(n * sizeof *ix.in))) {
            st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", dir);
            goto out;
        }
        for (int k = 0; k < nshard && !st; k++) {
            shard_name(name, sizeof name, k, nshard);
            if (!(names[k] = remat_strdup(name))) st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", dir);
        }
        for (size_t i = 0; i < n; i++) {
            tensors[i] = o[i].name;
            ix.in[i] = shard_of[i];
        }
        ix.shard = names;
        ix.nshard = nshard;
        ix.tensor = tensors;
        ix.n = n;
        ix.has_total = 1;
        ix.total_size = total;
        if (!st) st = remat_hf_index_dump(&ix, &text);
        free(ix.in);
        if (st || (st = remove_stale(dir, HF_SINGLE)) || (st = write_text(dir, HF_INDEX, text))) goto out;
    } else if ((st = remove_stale(dir, HF_INDEX))) {
        goto out;
    }
    /* shards of an earlier export with another count */
    DIR *d = opendir(dir);
    struct dirent *de;
    long of;
    while (d && !st && (de = readdir(d)))
        if (shard_file(de->d_name, &of) && (nshard == 1 || of != nshard)) st = remove_stale(dir, de->d_name);
    if (d) closedir(d);
out:
    for (int k = 0; names && k < nshard; k++) free(names[k]);
    free(names);
    free(tensors);
    free(text);
    free(shard_of);
    free(part);
    free(o);
    return st;
}
