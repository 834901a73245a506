/*
 * tool_weights.c -- writes a small trained model's weights in llm.c or
 * safetensors format, loads the file back through remat_weights_load, and
 * dumps what the loaded model computes on one batch, for the safetensors
 * oracle (tests/py_safetensors_oracle.py) to check against a Hugging Face
 * layout GPT-2 in PyTorch.  Also makes the fuzz seed files.  Public API only.
 *
 *   tool_weights llmc|safetensors WEIGHTS L C NH V T B DUMP
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
 * Exit status 0, or 1 with a message on any error.
 */
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

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: tool_weights llmc|safetensors WEIGHTS L C NH V T B DUMP\n");
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
