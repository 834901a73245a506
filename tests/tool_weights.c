/*
 * tool_weights.c -- writes a small trained model's weights in llm.c or
 * safetensors format, loads the file back through remat_weights_load, and
 * dumps what the loaded model computes on one batch, for the safetensors
 * oracle (tests/py_safetensors_oracle.py) to check against a Hugging Face
 * layout GPT-2 in PyTorch.  Also makes the fuzz seed files.  Public API only.
 *
 *   tool_weights llmc|safetensors WEIGHTS L C NH V T B DUMP
 *   tool_weights hf-save DIR ARCH L C NH KV HS F V MAXT TIED DTYPE SHARD PARAMS
 *   tool_weights load PATH PARAMS
 *
 * The model: max_seq = T + 3 (so wpe has rows the batch never uses), seed
 * 1234, two AdamW steps (lr 1e-2) on an LCG batch so that biases and
 * LayerNorm weights are no longer 0 and 1.  The batch: inputs and targets
 * in [0, V) from a 32-bit LCG.
 *
 * DUMP, little-endian (DUMP may be /dev/null):
 *   int32   magic 0x54485357 ("WSHT"), version 1, B, T, V, Vp
 *   int32   inputs[B*T], targets[B*T]
 *   float32 logits[B*T*Vp], loss          remat_model_eval of the loaded model
 *
 * hf-save: a model of architecture ARCH (gpt2, llama; KV, HS, F 0 for the
 * architecture's default; TIED 0 or 1) with seed 1234's initialisation
 * moved by 0.01 sin(i) (no norm weight stays 1), written as a Hugging Face
 * directory (remat_weights_save_hf, DTYPE fp32 or bf16, SHARD bytes, 0 for
 * the default), loaded back (checked: the same parameters in fp32), and its
 * parameters dumped to PARAMS.  load: the parameters of the model that
 * remat_weights_load makes of a file or directory (base: the default
 * config, seq 1, n_head 0).
 *
 * PARAMS, little-endian:
 *   int32   magic 0x4d525052 ("RPRM"), version 1
 *   int32   arch, L, C, NH, KV, hs, F, V, maxT, tied, rope type, rope original_max_position
 *   float64 rope_theta, norm_eps, rope factor, low_freq_factor, high_freq_factor
 *   int32   count, then count x { char name[16], int64 offset, int64 numel, int32 shape[3] }
 *   int64   n, float32 params[n]
 * Exit status 0, or 1 with a message on any error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "remat.h"

static void die(const char *what, const remat_model *m)
{
    fprintf(stderr, "tool_weights: %s: %s\n", what, m ? remat_model_error(m) : remat_errmsg());
    exit(1);
}

static int num(const char *s, const char *name)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 100000) {
        fprintf(stderr, "tool_weights: %s must be a whole number in [1, 100000], got '%s'\n", name, s);
        exit(2);
    }
    return (int)v;
}

static void batch(int *in, int *tg, size_t n, int V, uint32_t seed)
{
    uint32_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        in[i] = (int)((s >> 8) % (uint32_t)V);
        s = s * 1664525u + 1013904223u;
        tg[i] = (int)((s >> 8) % (uint32_t)V);
    }
}

static int put_params(const char *path, remat_model *m)
{
    const remat_config *c = remat_model_config(m);
    FILE *f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "tool_weights: cannot open %s\n", path); return 1; }
    int32_t h[14] = { 0x4d525052, 1, (int32_t)c->arch, c->n_layer, c->n_embd, c->n_head, remat_config_kv_heads(c),
                      remat_config_head_dim(c), remat_config_ffn_dim(c), c->vocab, c->max_seq, remat_config_tied(c),
                      (int32_t)c->rope_scaling.type, c->rope_scaling.original_max_position };
    double d[5] = { remat_config_rope_theta(c), remat_config_norm_eps(c), c->rope_scaling.factor,
                    c->rope_scaling.low_freq_factor, c->rope_scaling.high_freq_factor };
    int32_t count = remat_config_param_count(c);
    int ok = fwrite(h, sizeof h, 1, f) == 1 && fwrite(d, sizeof d, 1, f) == 1 && fwrite(&count, 4, 1, f) == 1;
    for (int i = 0; ok && i < count; i++) {
        remat_param_info pi;
        char name[16] = { 0 };
        if (remat_config_param_get(c, i, &pi)) die("remat_config_param_get", NULL);
        snprintf(name, sizeof name, "%s", pi.name);
        int64_t on[2] = { (int64_t)pi.offset, (int64_t)pi.numel };
        int32_t sh[3] = { pi.shape[0], pi.shape[1], pi.shape[2] };
        ok = fwrite(name, 16, 1, f) == 1 && fwrite(on, sizeof on, 1, f) == 1 && fwrite(sh, sizeof sh, 1, f) == 1;
    }
    int64_t n = (int64_t)remat_model_num_params(m);
    ok = ok && fwrite(&n, 8, 1, f) == 1 && fwrite(remat_model_params(m), 4, (size_t)n, f) == (size_t)n;
    if (fclose(f) != 0 || !ok) { fprintf(stderr, "tool_weights: writing %s failed\n", path); return 1; }
    return 0;
}

static int cmd_load(char **argv)
{
    remat_config base;
    remat_config_default(&base);
    base.seq = 1;
    base.n_head = 0;
    remat_model *m = NULL;
    if (remat_weights_load(argv[2], &base, 1, &m)) die("remat_weights_load", NULL);
    int rc = put_params(argv[3], m);
    remat_model_free(m);
    return rc;
}

static int cmd_hf_save(char **argv)
{
    remat_config c;
    remat_config_default(&c);
    if (remat_arch_parse(argv[3], &c.arch)) die("--arch", NULL);
    c.n_layer = num(argv[4], "L");
    c.n_embd = num(argv[5], "C");
    c.n_head = num(argv[6], "NH");
    c.n_kv_head = strcmp(argv[7], "0") ? num(argv[7], "KV") : 0;
    c.head_dim = strcmp(argv[8], "0") ? num(argv[8], "HS") : 0;
    c.ffn_dim = strcmp(argv[9], "0") ? num(argv[9], "F") : 0;
    c.vocab = num(argv[10], "V");
    c.max_seq = num(argv[11], "MAXT");
    c.seq = 1;
    c.batch = 1;
    c.tie_embeddings = !strcmp(argv[12], "1");
    remat_dtype dt = !strcmp(argv[13], "bf16") ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
    unsigned long long shard = strtoull(argv[14], NULL, 10);
    remat_model *m = NULL, *r = NULL;
    if (remat_model_create(&c, 1234, &m)) die("remat_model_create", NULL);
    float *p = remat_model_params(m);
    for (int i = 0; i < remat_config_param_count(&c); i++) {
        remat_param_info pi;
        if (remat_config_param_get(&c, i, &pi)) die("remat_config_param_get", NULL);
        /* padded vocabulary rows stay zero: they are in no file */
        int vocab = !strcmp(pi.name, "wte") || !strcmp(pi.name, "lmheadw");
        size_t stored = vocab ? (size_t)c.vocab * (size_t)c.n_embd : pi.numel;
        for (size_t k = 0; k < stored; k++) p[pi.offset + k] += 0.01f * (float)sin((double)(pi.offset + k));
    }
    if (remat_weights_save_hf(m, argv[2], dt, shard)) die("remat_weights_save_hf", NULL);
    remat_config base;
    remat_config_default(&base);
    base.seq = 1;
    if (remat_weights_load(argv[2], &base, 1, &r)) die("remat_weights_load", NULL);
    if (dt == REMAT_DTYPE_FP32 && remat_model_params_hash(r) != remat_model_params_hash(m)) {
        fprintf(stderr, "tool_weights: the loaded parameters differ from the saved ones\n");
        return 1;
    }
    int rc = put_params(argv[15], m);
    remat_model_free(m);
    remat_model_free(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "load")) return cmd_load(argv);
    if (argc == 16 && !strcmp(argv[1], "hf-save")) return cmd_hf_save(argv);
    if (argc != 10) {
        fprintf(stderr, "usage: tool_weights llmc|safetensors WEIGHTS L C NH V T B DUMP\n"
                        "       tool_weights hf-save DIR ARCH L C NH KV HS F V MAXT TIED DTYPE SHARD PARAMS\n"
                        "       tool_weights load PATH PARAMS\n");
        return 2;
    }
    remat_weights_format fmt = !strcmp(argv[1], "llmc") ? REMAT_WEIGHTS_LLMC
                             : !strcmp(argv[1], "safetensors") ? REMAT_WEIGHTS_SAFETENSORS : REMAT_WEIGHTS_AUTO;
    if (fmt == REMAT_WEIGHTS_AUTO) { fprintf(stderr, "tool_weights: format is llmc or safetensors\n"); return 2; }
    remat_config c;
    remat_config_default(&c);
    c.n_layer = num(argv[3], "L");
    c.n_embd = num(argv[4], "C");
    c.n_head = num(argv[5], "NH");
    c.vocab = num(argv[6], "V");
    c.seq = num(argv[7], "T");
    c.max_seq = c.seq + 3;
    c.batch = num(argv[8], "B");
    c.dropout = 0.0f;
    remat_set_threads(2);
    size_t N = (size_t)c.batch * c.seq;
    int Vp = remat_config_padded_vocab(&c);
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    float *logits = malloc(N * (size_t)Vp * sizeof *logits);
    if (!in || !tg || !logits) { fprintf(stderr, "tool_weights: out of memory\n"); return 1; }

    remat_model *m = NULL, *r = NULL;
    if (remat_model_create(&c, 1234, &m)) die("remat_model_create", NULL);
    remat_optim o;
    remat_optim_default(&o);
    o.lr = 1e-2f;
    if (remat_model_set_optim(m, &o)) die("remat_model_set_optim", m);
    float loss;
    for (int s = 0; s < 2; s++) {
        batch(in, tg, N, c.vocab, 777u + (uint32_t)s);
        if (remat_model_step(m, in, tg, 1, &loss)) die("remat_model_step", m);
    }
    if (remat_weights_save(m, argv[2], fmt)) die("remat_weights_save", NULL);

    remat_config base = c;
    base.n_head = 0;   /* from the file */
    if (remat_weights_load(argv[2], &base, 1, &r)) die("remat_weights_load", NULL);
    if (remat_model_params_hash(r) != remat_model_params_hash(m)) {
        fprintf(stderr, "tool_weights: the loaded parameters differ from the saved ones\n");
        return 1;
    }
    batch(in, tg, N, c.vocab, 12345u);
    if (remat_model_eval(r, in, tg, &loss, logits)) die("remat_model_eval", r);

    FILE *f = fopen(argv[9], "wb");
    if (!f) { fprintf(stderr, "tool_weights: cannot open %s\n", argv[9]); return 1; }
    int32_t hdr[6] = { 0x54485357, 1, c.batch, c.seq, c.vocab, Vp };
    int ok = fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(in, sizeof *in, N, f) == N &&
             fwrite(tg, sizeof *tg, N, f) == N && fwrite(logits, sizeof *logits, N * (size_t)Vp, f) == N * (size_t)Vp &&
             fwrite(&loss, sizeof loss, 1, f) == 1;
    if (fclose(f) != 0 || !ok) { fprintf(stderr, "tool_weights: writing %s failed\n", argv[9]); return 1; }
    remat_model_free(m);
    remat_model_free(r);
    free(in);
    free(tg);
    free(logits);
    return 0;
}
