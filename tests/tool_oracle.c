/*
 * tool_oracle.c -- dumps what remat computes for one small model and one
 * batch, for the PyTorch oracle (tests/py_torch_oracle.py) to check.
 * Uses only the public API.
 *
 *   tool_oracle OUTFILE L C NH V T B STEPS [policy|none [naive|flash [LMHEAD_ROWS]]]
 *
 * The optional kernel choices: --attention naive|flash and the LM head
 * chunked by LMHEAD_ROWS rows (0: full logits), as `remat train` takes them.
 *
 * The model: max_seq = T, dropout 0, seed 1234; AdamW lr 1e-3, betas
 * (0.9, 0.95), eps 1e-8, weight decay 0.1, clip 1.0.  The batch: inputs and
 * targets in [0, V) from a 32-bit LCG.
 *
 * OUTFILE, all little-endian, no text:
 *   int32   magic 0x4c43524f ("ORCL"), version 1
 *   int32   L C NH V Vp T B STEPS nparams ntensors(16)
 *   16 x    int32 offset, shape[0], shape[1], shape[2]  (remat_config_param_get)
 *   int32   inputs[B*T], targets[B*T]
 *   float32 params[nparams]              initial parameters, remat order
 *   float32 logits[B*T*Vp], eval_loss    remat_model_eval
 *   float32 grad_loss, grad_norm, grads[nparams]
 *                                        remat_model_step(update = 0)
 *   float32 losses[STEPS]                STEPS x remat_model_step(update = 1)
 *   float32 final_params[nparams]        after those steps
 *
 * remat_model_step advances the optimizer step counter even with
 * update = 0 (it also keys the dropout RNG), so the training steps run on a
 * second, freshly created model with the same seed: its first AdamW step is
 * step 1, as in torch.
 * Exit status: 0 on success, 1 on any remat or I/O error (with a message).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "remat.h"

#define SEED 1234

static const char *outpath;
static FILE *out;

static void die(const char *what, remat_status st, const remat_model *m)
{
    fprintf(stderr, "tool_oracle: %s failed: %s: %s\n", what, remat_status_str(st),
            m ? remat_model_error(m) : remat_errmsg());
    if (out) { fclose(out); remove(outpath); }
    exit(1);
}

static void put(const void *p, size_t size, size_t n)
{
    if (n && fwrite(p, size, n, out) != n) {
        fprintf(stderr, "tool_oracle: writing %s failed\n", outpath);
        fclose(out);
        remove(outpath);
        exit(1);
    }
}

static void put_i32(int32_t v) { put(&v, sizeof v, 1); }
static void put_f32(float v) { put(&v, sizeof v, 1); }

static int parse_int(const char *s, const char *name)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 1000000) {
        fprintf(stderr, "tool_oracle: %s must be an integer in [1, 1000000], got '%s'\n", name, s);
        exit(2);
    }
    return (int)v;
}

static remat_model *make_model(const remat_config *cfg, const char *policy)
{
    remat_model *m = NULL;
    remat_status st;
    remat_optim o;
    if ((st = remat_model_create(cfg, SEED, &m))) die("remat_model_create", st, NULL);
    remat_optim_default(&o);
    o.lr = 1e-3f;
    o.beta1 = 0.9f;
    o.beta2 = 0.95f;
    o.eps = 1e-8f;
    o.weight_decay = 0.1f;
    o.grad_clip = 1.0f;
    if ((st = remat_model_set_optim(m, &o))) die("remat_model_set_optim", st, m);
    if ((st = remat_model_set_policy(m, policy))) die("remat_model_set_policy", st, m);
    /* any recomputation must reproduce the first computation bit for bit */
    remat_model_set_verify(m, 1);
    return m;
}

int main(int argc, char **argv)
{
    if (argc < 9 || argc > 13) {
        fprintf(stderr, "usage: tool_oracle OUTFILE L C NH V T B STEPS [policy|none [naive|flash [LMHEAD_ROWS "
                "[fp32|bf16]]]]\n");
        return 2;
    }
    remat_config cfg;
    remat_config_default(&cfg);
    cfg.n_layer = parse_int(argv[2], "L");
    cfg.n_embd = parse_int(argv[3], "C");
    cfg.n_head = parse_int(argv[4], "NH");
    cfg.vocab = parse_int(argv[5], "V");
    cfg.seq = parse_int(argv[6], "T");
    cfg.max_seq = cfg.seq;
    cfg.batch = parse_int(argv[7], "B");
    cfg.dropout = 0.0f;
    int steps = parse_int(argv[8], "STEPS");
    const char *policy = argc >= 10 ? argv[9] : NULL;
    if (argc >= 11) {
        if (strcmp(argv[10], "naive") && strcmp(argv[10], "flash")) {
            fprintf(stderr, "tool_oracle: attention must be naive or flash, got '%s'\n", argv[10]);
            return 2;
        }
        cfg.attention = strcmp(argv[10], "flash") ? REMAT_ATTENTION_NAIVE : REMAT_ATTENTION_FLASH;
    }
    if (argc >= 12) cfg.lmhead_chunk = strcmp(argv[11], "0") ? parse_int(argv[11], "LMHEAD_ROWS") : 0;
    if (argc >= 13) {
        if (strcmp(argv[12], "fp32") && strcmp(argv[12], "bf16")) {
            fprintf(stderr, "tool_oracle: dtype must be fp32 or bf16, got '%s'\n", argv[12]);
            return 2;
        }
        cfg.dtype = strcmp(argv[12], "bf16") ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
    }
    remat_status st;
    if ((st = remat_config_check(&cfg))) die("remat_config_check", st, NULL);
    remat_set_threads(2);

    int B = cfg.batch, T = cfg.seq, V = cfg.vocab, Vp = remat_config_padded_vocab(&cfg);
    size_t N = (size_t)B * T;
    int *inputs = malloc(N * sizeof *inputs), *targets = malloc(N * sizeof *targets);
    float *logits = malloc(N * (size_t)Vp * sizeof *logits);
    float *losses = malloc((size_t)steps * sizeof *losses);
    if (!inputs || !targets || !logits || !losses) {
        fprintf(stderr, "tool_oracle: out of memory\n");
        return 1;
    }
    uint32_t lcg = 12345u;
    for (size_t i = 0; i < N; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        inputs[i] = (int)((lcg >> 8) % (uint32_t)V);
        lcg = lcg * 1664525u + 1013904223u;
        targets[i] = (int)((lcg >> 8) % (uint32_t)V);
    }

    remat_model *m = make_model(&cfg, policy);
    size_t np = remat_model_num_params(m);
    int ntensors = remat_config_param_count(&cfg);

    outpath = argv[1];
    out = fopen(outpath, "wb");
    if (!out) {
        fprintf(stderr, "tool_oracle: cannot open %s for writing\n", outpath);
        return 1;
    }
    put_i32(0x4c43524f);
    put_i32(1);
    int32_t hdr[10] = { cfg.n_layer, cfg.n_embd, cfg.n_head, V, Vp, T, B, steps, (int32_t)np, ntensors };
    put(hdr, sizeof hdr[0], 10);
    for (int i = 0; i < ntensors; i++) {
        remat_param_info pi;
        if ((st = remat_config_param_get(&cfg, i, &pi))) die("remat_config_param_get", st, m);
        put_i32((int32_t)pi.offset);
        put(pi.shape, sizeof pi.shape[0], 3);
    }
    put(inputs, sizeof *inputs, N);
    put(targets, sizeof *targets, N);
    put(remat_model_params(m), sizeof(float), np);

    float loss = 0;
    if ((st = remat_model_eval(m, inputs, targets, &loss, logits))) die("remat_model_eval", st, m);
    put(logits, sizeof *logits, N * (size_t)Vp);
    put_f32(loss);

    if ((st = remat_model_step(m, inputs, targets, 0, &loss))) die("remat_model_step(update=0)", st, m);
    remat_stats stats;
    remat_model_stats(m, &stats);
    put_f32(loss);
    put_f32(stats.grad_norm);
    put(remat_model_grads(m), sizeof(float), np);
    remat_model_free(m);

    /* fresh model: its AdamW step count starts at 1 */
    m = make_model(&cfg, policy);
    for (int s = 0; s < steps; s++)
        if ((st = remat_model_step(m, inputs, targets, 1, &losses[s]))) die("remat_model_step(update=1)", st, m);
    put(losses, sizeof *losses, (size_t)steps);
    put(remat_model_params(m), sizeof(float), np);
    remat_model_free(m);

    if (fclose(out)) {
        out = NULL;
        fprintf(stderr, "tool_oracle: closing %s failed\n", outpath);
        remove(outpath);
        return 1;
    }
    free(inputs);
    free(targets);
    free(logits);
    free(losses);
    return 0;
}
