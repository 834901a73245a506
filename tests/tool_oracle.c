/*
 * tool_oracle.c -- dumps what remat computes for one small model and one
 * batch, for the PyTorch oracles (tests/py_torch_oracle.py for GPT-2,
 * tests/py_llama_oracle.py for Llama) to check.  Uses only the public API.
 *
 *   tool_oracle OUTFILE L C NH V T B STEPS [policy|none [naive|flash [LMHEAD_ROWS [fp32|bf16]]]] [FLAGS]
 *
 * The optional kernel choices: --attention naive|flash and the LM head
 * chunked by LMHEAD_ROWS rows (0: full logits), as `remat train` takes them.
 * FLAGS (anywhere after OUTFILE) choose the architecture and its sizes;
 * each left out keeps the architecture's default (remat_config):
 *   --arch gpt2|llama  --kv-heads KV  --ffn-dim F  --head-dim hs
 *   --rope-theta X  --rope-llama3 FACTOR:LOW:HIGH:ORIGINAL_MAX_POS
 *   --norm-eps E  --tie 0|1  --dtype fp32|bf16
 *
 * The model: max_seq = T, dropout 0, seed 1234; AdamW lr 1e-3, betas
 * (0.9, 0.95), eps 1e-8, weight decay 0.1, clip 1.0.  The batch: inputs and
 * targets in [0, V) from a 32-bit LCG.
 *
 * OUTFILE, all little-endian, no text:
 *   int32   magic 0x4c43524f ("ORCL"), version 2
 *   int32   L C NH V Vp T B STEPS nparams ntensors
 *   int32   arch KV F hs tied rope_type rope_original_max_pos dtype
 *                                        the config as remat resolved it
 *   float64 rope_theta norm_eps rope_factor rope_low_freq rope_high_freq
 *   ntensors x  char name[16] (NUL-padded), int32 offset, shape[0],
 *           shape[1], shape[2], per_layer, decay  (remat_config_param_get)
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
 * Exit status: 0 on success, 1 on any remat or I/O error (with a message),
 * 2 on a bad command line.
 */
#include <stdarg.h>
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

/* a failure once OUTFILE is open: no half-written file is left behind */
static void fail_out(const char *what, const char *arg)
{
    fprintf(stderr, "tool_oracle: %s%s\n", what, arg);
    fclose(out);
    remove(outpath);
    exit(1);
}

static void put(const void *p, size_t size, size_t n)
{
    if (n && fwrite(p, size, n, out) != n) fail_out("writing failed: ", outpath);
}

static void put_i32(int32_t v) { put(&v, sizeof v, 1); }
static void put_f32(float v) { put(&v, sizeof v, 1); }

/* a bad command line: one line, exit 2 */
static void usage_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tool_oracle: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static int parse_int(const char *s, const char *name)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 1000000)
        usage_fail("%s must be an integer in [1, 1000000], got '%s'", name, s);
    return (int)v;
}

/* a finite double > 0, the whole of s */
static double parse_pos(const char *s, const char *name)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v > 0 && v < 1e300)) usage_fail("%s must be a number > 0, got '%s'", name, s);
    return v;
}

/* --rope-llama3 FACTOR:LOW:HIGH:ORIGINAL_MAX_POS */
static void parse_llama3(const char *s, remat_rope_scaling *r)
{
    char buf[128], *f[4], *save = NULL;
    int n = 0;
    if (strlen(s) >= sizeof buf) usage_fail("--rope-llama3 %s is too long", s);
    strcpy(buf, s);
    for (char *t = strtok_r(buf, ":", &save); t && n < 4; t = strtok_r(NULL, ":", &save)) f[n++] = t;
    if (n != 4 || strtok_r(NULL, ":", &save))
        usage_fail("--rope-llama3 takes FACTOR:LOW:HIGH:ORIGINAL_MAX_POS, got '%s'", s);
    r->type = REMAT_ROPE_LLAMA3;
    r->factor = parse_pos(f[0], "the llama3 factor");
    r->low_freq_factor = parse_pos(f[1], "the llama3 low_freq_factor");
    r->high_freq_factor = parse_pos(f[2], "the llama3 high_freq_factor");
    r->original_max_position = parse_int(f[3], "the llama3 original_max_position_embeddings");
}

/* The FLAGS (see the top): each takes one value. */
static void parse_flag(const char *flag, const char *val, remat_config *cfg)
{
    if (!strcmp(flag, "--arch")) {
        if (remat_arch_parse(val, &cfg->arch)) usage_fail("--arch must be gpt2 or llama, got '%s'", val);
    } else if (!strcmp(flag, "--kv-heads")) {
        cfg->n_kv_head = parse_int(val, "--kv-heads");
    } else if (!strcmp(flag, "--ffn-dim")) {
        cfg->ffn_dim = parse_int(val, "--ffn-dim");
    } else if (!strcmp(flag, "--head-dim")) {
        cfg->head_dim = parse_int(val, "--head-dim");
    } else if (!strcmp(flag, "--rope-theta")) {
        cfg->rope_theta = parse_pos(val, "--rope-theta");
    } else if (!strcmp(flag, "--rope-llama3")) {
        parse_llama3(val, &cfg->rope_scaling);
    } else if (!strcmp(flag, "--norm-eps")) {
        cfg->norm_eps = parse_pos(val, "--norm-eps");
    } else if (!strcmp(flag, "--tie")) {
        if (strcmp(val, "0") && strcmp(val, "1")) usage_fail("--tie must be 0 or 1, got '%s'", val);
        cfg->tie_embeddings = val[0] == '1';
    } else if (!strcmp(flag, "--dtype")) {
        if (strcmp(val, "fp32") && strcmp(val, "bf16")) usage_fail("--dtype must be fp32 or bf16, got '%s'", val);
        cfg->dtype = strcmp(val, "bf16") ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
    } else {
        usage_fail("unknown flag '%s' (see the top of tests/tool_oracle.c)", flag);
    }
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
    remat_config cfg;
    remat_config_default(&cfg);
    /* the flags out, the positional arguments (OUTFILE first) kept in order */
    const char *pos[13];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (i > 1 && !strncmp(argv[i], "--", 2)) {
            if (i + 1 >= argc) usage_fail("%s needs a value", argv[i]);
            parse_flag(argv[i], argv[i + 1], &cfg);
            i++;
        } else if (npos < 13) {
            pos[npos++] = argv[i];
        } else {
            usage_fail("too many arguments (at '%s')", argv[i]);
        }
    }
    if (npos < 8) {
        fprintf(stderr, "usage: tool_oracle OUTFILE L C NH V T B STEPS [policy|none [naive|flash [LMHEAD_ROWS "
                "[fp32|bf16]]]] [--arch gpt2|llama] [--kv-heads KV] [--ffn-dim F] [--head-dim hs] [--rope-theta X] "
                "[--rope-llama3 FACTOR:LOW:HIGH:ORIGINAL] [--norm-eps E] [--tie 0|1] [--dtype fp32|bf16]\n");
        return 2;
    }
    cfg.n_layer = parse_int(pos[1], "L");
    cfg.n_embd = parse_int(pos[2], "C");
    cfg.n_head = parse_int(pos[3], "NH");
    cfg.vocab = parse_int(pos[4], "V");
    cfg.seq = parse_int(pos[5], "T");
    cfg.max_seq = cfg.seq;
    cfg.batch = parse_int(pos[6], "B");
    cfg.dropout = 0.0f;
    int steps = parse_int(pos[7], "STEPS");
    const char *policy = npos >= 9 ? pos[8] : NULL;
    if (npos >= 10) {
        if (strcmp(pos[9], "naive") && strcmp(pos[9], "flash"))
            usage_fail("attention must be naive or flash, got '%s'", pos[9]);
        cfg.attention = strcmp(pos[9], "flash") ? REMAT_ATTENTION_NAIVE : REMAT_ATTENTION_FLASH;
    }
    if (npos >= 11) cfg.lmhead_chunk = strcmp(pos[10], "0") ? parse_int(pos[10], "LMHEAD_ROWS") : 0;
    if (npos >= 12) parse_flag("--dtype", pos[11], &cfg);
    if (npos >= 13) usage_fail("too many arguments (at '%s')", pos[12]);
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

    outpath = pos[0];
    out = fopen(outpath, "wb");
    if (!out) {
        fprintf(stderr, "tool_oracle: cannot open %s for writing\n", outpath);
        return 1;
    }
    put_i32(0x4c43524f);
    put_i32(2);
    int32_t hdr[10] = { cfg.n_layer, cfg.n_embd, cfg.n_head, V, Vp, T, B, steps, (int32_t)np, ntensors };
    put(hdr, sizeof hdr[0], 10);
    const remat_rope_scaling *rs = &cfg.rope_scaling;
    int32_t arch[8] = { (int32_t)cfg.arch, remat_config_kv_heads(&cfg), remat_config_ffn_dim(&cfg),
                        remat_config_head_dim(&cfg), remat_config_tied(&cfg), (int32_t)rs->type,
                        rs->original_max_position, (int32_t)cfg.dtype };
    put(arch, sizeof arch[0], 8);
    double reals[5] = { cfg.arch == REMAT_ARCH_LLAMA ? remat_config_rope_theta(&cfg) : 0, remat_config_norm_eps(&cfg),
                        rs->factor, rs->low_freq_factor, rs->high_freq_factor };
    put(reals, sizeof reals[0], 5);
    for (int i = 0; i < ntensors; i++) {
        remat_param_info pi;
        char name[16] = { 0 };
        if ((st = remat_config_param_get(&cfg, i, &pi))) die("remat_config_param_get", st, m);
        if (strlen(pi.name) >= sizeof name) fail_out("a parameter name longer than the file's 15 bytes: ", pi.name);
        memcpy(name, pi.name, strlen(pi.name));
        put(name, 1, sizeof name);
        put_i32((int32_t)pi.offset);
        put(pi.shape, sizeof pi.shape[0], 3);
        put_i32(pi.per_layer);
        put_i32(pi.decay);
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
