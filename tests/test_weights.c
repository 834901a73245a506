/*
 * test_weights.c -- llm.c checkpoints and safetensors (src/io/weights.c,
 * llmc.c, safetensors.c, hfnames.c):
 * bitwise round trips through both formats, the llm.c header fields, the
 * Conv1D transposition element by element, foreign files (llm.c's 128-row
 * padding, Hugging Face's "transformer." prefix and mask buffers, no
 * metadata), atomic saves, and a catalogue of corrupt files -- each refused
 * with REMAT_ERR_FORMAT and a message that names the problem -- plus every
 * single-byte corruption of both headers (no crash; ASan in test-sanitize).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "remat.h"
#include "core/endian.h"
#include <jansson.h>
#include "io/io.h"
#include "harness.h"

/* offset and shape of the model's parameter tensor `name` */
static size_t param_at(const remat_model *m, const char *name, int shape[3])
{
    remat_param_info pi;
    memset(&pi, 0, sizeof pi);
    int i = remat_config_param_find(remat_model_config(m), name);
    CHECK(i >= 0 && !remat_config_param_get(remat_model_config(m), i, &pi), "no parameter tensor %s", name);
    if (shape) memcpy(shape, pi.shape, sizeof pi.shape);
    return pi.offset;
}

static char dir[64];

static char *path_in(const char *name)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static int write_all(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* A model whose every parameter is distinct, so a misplaced or transposed
 * element shows; padded vocabulary rows stay zero (they are not stored). */
static remat_model *make_model(const remat_config *c)
{
    remat_model *m = NULL;
    if (remat_model_create(c, 7, &m)) return NULL;
    float *p = remat_model_params(m);
    size_t n = remat_model_num_params(m);
    uint32_t s = 99;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f + (float)i * 1e-7f;
    }
    /* the padded vocabulary rows (of the head too, when untied) */
    static const char *const vocab_params[] = { "wte", "lmheadw" };
    for (int k = 0; k < 2; k++) {
        int shape[3];
        if (remat_config_param_find(c, vocab_params[k]) < 0) continue;
        size_t off = param_at(m, vocab_params[k], shape);
        memset(p + off + (size_t)c->vocab * c->n_embd, 0, (size_t)(shape[0] - c->vocab) * c->n_embd * sizeof *p);
    }
    return m;
}

static int same_params(remat_model *a, remat_model *b)
{
    size_t n = remat_model_num_params(a);
    return n == remat_model_num_params(b) &&
           !memcmp(remat_model_params(a), remat_model_params(b), n * sizeof(float));
}

static void small_config(remat_config *c)
{
    remat_config_default(c);
    c->n_layer = 2;
    c->n_embd = 32;
    c->n_head = 4;
    c->vocab = 70;      /* padded to 128 */
    c->max_seq = 16;
    c->seq = 8;
    c->batch = 2;
}

/* Finds "name":{..."data_offsets":[b,e]} and "shape":[...] in a safetensors
 * header; returns 1 when found. */
static int st_find(const unsigned char *file, const char *name, uint64_t *begin, uint64_t *end, char *shape,
                   size_t shape_n)
{
    uint64_t N = remat_get_le64(file);
    char *hdr = malloc(N + 1);
    memcpy(hdr, file + 8, N);
    hdr[N] = 0;
    char key[128];
    snprintf(key, sizeof key, "\"%s\":{", name);
    char *e = strstr(hdr, key);
    int ok = 0;
    if (e) {
        char *close = strchr(e, '}');
        char *o = strstr(e, "\"data_offsets\":["), *s = strstr(e, "\"shape\":[");
        unsigned long long b, en;
        if (o && s && o < close && s < close && sscanf(o, "\"data_offsets\":[%llu,%llu]", &b, &en) == 2) {
            *begin = b + 8 + N;
            *end = en + 8 + N;
            size_t k = strcspn(s + 9, "]");
            snprintf(shape, shape_n, "%.*s", (int)k, s + 9);
            ok = 1;
        }
    }
    free(hdr);
    return ok;
}

static void test_round_trips(void)
{
    remat_config c;
    small_config(&c);
    remat_model *m = make_model(&c), *r = NULL;
    CHECK(m != NULL, "create: %s", remat_errmsg());
    if (!m) return;
    int C = c.n_embd, L = c.n_layer;

    /* llm.c */
    const char *pl = path_in("m.llmc.bin");
    remat_status st = remat_weights_save(m, pl, REMAT_WEIGHTS_LLMC);
    CHECK(st == REMAT_OK, "save llmc: %s", remat_errmsg());
    size_t n = 0;
    unsigned char *f = read_all(pl, &n);
    CHECK(f && n == 1024 + 4 * remat_model_num_params(m), "llmc file size %zu", n);
    if (f) {
        int32_t want[8] = {20240326, 3, 16, 70, 2, 4, 32, 128};
        for (int i = 0; i < 8; i++) CHECK((int32_t)remat_get_le32(f + 4 * i) == want[i], "llmc header[%d] = %d, want %d", i,
                                          (int)remat_get_le32(f + 4 * i), want[i]);
        int zero = 1;
        for (int i = 8; i < 256; i++) zero &= remat_get_le32(f + 4 * i) == 0;
        CHECK(zero, "llmc header ints 8..255 are zero");
        CHECK(!memcmp(f + 1024, remat_model_params(m), 4 * remat_model_num_params(m)), "llmc body = params");
    }
    remat_config base, shape;
    remat_config_default(&base);
    base.seq = 8;
    base.batch = 3;
    base.attention = REMAT_ATTENTION_FLASH;
    base.lmhead_chunk = 5;
    remat_weights_format fmt = REMAT_WEIGHTS_AUTO;
    memset(&shape, 0, sizeof shape);
    st = remat_weights_probe(pl, &shape, &fmt);
    CHECK(st == REMAT_OK && fmt == REMAT_WEIGHTS_LLMC && shape.n_layer == 2 && shape.n_embd == 32 &&
          shape.n_head == 4 && shape.vocab == 70 && shape.max_seq == 16, "probe llmc");
    st = remat_weights_load(pl, &base, 1, &r);
    CHECK(st == REMAT_OK && r, "load llmc: %s", remat_errmsg());
    if (r) {
        CHECK(same_params(m, r), "llmc round trip is bitwise");
        const remat_config *rc = remat_model_config(r);
        CHECK(rc->batch == 3 && rc->seq == 8 && rc->max_seq == 16 && rc->n_head == 4, "loaded config");
        CHECK(rc->attention == base.attention && rc->lmhead_chunk == base.lmhead_chunk, "options from base");
    }
    remat_model_free(r);
    r = NULL;
    free(f);

    /* safetensors */
    const char *ps = path_in("m.safetensors");
    st = remat_weights_save(m, ps, REMAT_WEIGHTS_SAFETENSORS);
    CHECK(st == REMAT_OK, "save safetensors: %s", remat_errmsg());
    f = read_all(ps, &n);
    CHECK(f != NULL, "read back");
    if (f) {
        uint64_t N = remat_get_le64(f);
        CHECK((8 + N) % 8 == 0 && f[8] == '{', "header length %llu aligned", (unsigned long long)N);
        size_t nstored = remat_model_num_params(m) - (size_t)(128 - 70) * C;   /* wte without padding */
        CHECK(n == 8 + N + 4 * nstored, "safetensors size %zu", n);
        uint64_t b, e;
        char shp[64];
        CHECK(st_find(f, "wte.weight", &b, &e, shp, sizeof shp) && !strcmp(shp, "70,32") && e - b == 70 * 32 * 4,
              "wte.weight is (V, C) unpadded: [%s]", shp);
        /* c_attn: file (C, 3C), remat qkvw (3C, C): qkvw[l][o][i] = file[i][o] */
        size_t off;
        int sh[3];
        off = param_at(m, "qkvw", sh);
        const float *P = remat_model_params(m);
        int bad = 0;
        CHECK(st_find(f, "h.1.attn.c_attn.weight", &b, &e, shp, sizeof shp) && !strcmp(shp, "32,96"),
              "c_attn shape [%s]", shp);
        for (int o = 0; o < 3 * C; o++)
            for (int i = 0; i < C; i++)
                bad += remat_get_lef32(f + b + 4 * ((size_t)i * 3 * C + o)) != P[off + (size_t)1 * 3 * C * C + (size_t)o * C + i];
        CHECK(bad == 0, "c_attn.weight is qkvw transposed (%d bad)", bad);
        /* mlp.c_proj: file (4C, C), remat fcprojw (C, 4C) */
        off = param_at(m, "fcprojw", sh);
        bad = 0;
        CHECK(st_find(f, "h.0.mlp.c_proj.weight", &b, &e, shp, sizeof shp) && !strcmp(shp, "128,32"),
              "mlp.c_proj shape [%s]", shp);
        for (int o = 0; o < C; o++)
            for (int i = 0; i < 4 * C; i++) bad += remat_get_lef32(f + b + 4 * ((size_t)i * C + o)) != P[off + (size_t)o * 4 * C + i];
        CHECK(bad == 0, "mlp.c_proj.weight is fcprojw transposed (%d bad)", bad);
        /* a vector: h.1.mlp.c_fc.bias (4C) = fcb[1] */
        off = param_at(m, "fcb", sh);
        CHECK(st_find(f, "h.1.mlp.c_fc.bias", &b, &e, shp, sizeof shp) && !strcmp(shp, "128") &&
              !memcmp(f + b, P + off + 4 * C, 4 * 4 * (size_t)C), "c_fc.bias");
        CHECK(strstr((const char *)f + 8, "\"n_head\":\"4\"") != NULL, "metadata records n_head");
    }
    memset(&shape, 0, sizeof shape);
    st = remat_weights_probe(ps, &shape, &fmt);
    CHECK(st == REMAT_OK && fmt == REMAT_WEIGHTS_SAFETENSORS && shape.n_layer == L && shape.n_embd == 32 &&
          shape.n_head == 4 && shape.vocab == 70 && shape.max_seq == 16, "probe safetensors: %s", remat_errmsg());
    st = remat_weights_load(ps, &base, 1, &r);
    CHECK(st == REMAT_OK && r, "load safetensors: %s", remat_errmsg());
    if (r) {
        CHECK(same_params(m, r), "safetensors round trip is bitwise");
        /* the loaded model computes what the original does */
        int in[24], tg[24];
        for (int i = 0; i < 24; i++) { in[i] = (i * 7) % 70; tg[i] = (i * 11 + 3) % 70; }
        remat_config c3 = c;
        c3.batch = 3;
        c3.attention = base.attention;
        c3.lmhead_chunk = base.lmhead_chunk;
        remat_model *m3 = NULL;
        remat_model_create(&c3, 1, &m3);
        if (m3) memcpy(remat_model_params(m3), remat_model_params(m), remat_model_num_params(m) * sizeof(float));
        float l1 = 0, l2 = -1;
        CHECK(m3 && !remat_model_eval(m3, in, tg, &l1, NULL) && !remat_model_eval(r, in, tg, &l2, NULL) && l1 == l2,
              "same loss after loading (%g vs %g)", (double)l1, (double)l2);
        CHECK(remat_model_step(r, in, tg, 1, &l2) == REMAT_OK, "a loaded model trains");
        remat_model_free(m3);
    }
    remat_model_free(r);
    r = NULL;

    /* seq beyond the file's positions */
    base.seq = 17;
    st = remat_weights_load(ps, &base, 1, &r);
    CHECK(st == REMAT_ERR_INVALID && !r && strstr(remat_errmsg(), "positions"), "seq > max_seq: %s", remat_errmsg());
    base.seq = 8;

    /* memory parsers agree with the file loaders */
    remat_config sh2;
    float *p2 = NULL;
    if (f) {
        st = remat_safetensors_parse(f, n, 0, &sh2, &p2);
        CHECK(st == REMAT_OK && p2 && !memcmp(p2, remat_model_params(m), remat_model_num_params(m) * 4),
              "remat_safetensors_parse: %s", remat_errmsg());
        free(p2);
    }
    free(f);
    f = read_all(pl, &n);
    if (f) {
        st = remat_llmc_parse(f, n, &sh2, &p2);
        CHECK(st == REMAT_OK && p2 && !memcmp(p2, remat_model_params(m), remat_model_num_params(m) * 4),
              "remat_llmc_parse: %s", remat_errmsg());
        free(p2);
    }
    free(f);
    remat_model_free(m);
}

/* bfloat16 of x, rounded to nearest even (the test's own reference) */
static float ref_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* BF16 safetensors: written rounded to nearest even, read back widened
 * exactly, stable under a second round trip; llm.c files are float32 only
 * (bf16 writes refused, llm.c's bfloat16 version 5 refused by name). */
static void test_bf16_files(void)
{
    remat_config c;
    small_config(&c);
    remat_model *m = make_model(&c), *r = NULL, *r2 = NULL;
    CHECK(m != NULL, "create: %s", remat_errmsg());
    if (!m) return;
    size_t np = remat_model_num_params(m);
    float *P = remat_model_params(m);
    P[7] = 1.00390625f;            /* a tie: 1 + 2^-8 rounds to even (1.0) */
    P[8] = 1.01171875f;            /* a tie: 1 + 3*2^-8 rounds to even (1 + 2^-6) */
    P[9] = -3.3e-39f;              /* subnormal */
    const char *ps = path_in("m.bf16.safetensors");
    remat_status st = remat_weights_save_as(m, ps, REMAT_WEIGHTS_SAFETENSORS, REMAT_DTYPE_BF16);
    CHECK(st == REMAT_OK, "save bf16: %s", remat_errmsg());
    size_t n = 0;
    unsigned char *f = read_all(ps, &n);
    if (f) {
        uint64_t N = remat_get_le64(f);
        size_t nstored = np - (size_t)(128 - 70) * c.n_embd;
        CHECK(n == 8 + N + 2 * nstored, "bf16 file size %zu, want %zu", n, (size_t)(8 + N + 2 * nstored));
        CHECK(strstr((const char *)f + 8, "\"dtype\":\"F32\"") == NULL && strstr((const char *)f + 8, "\"dtype\":\"BF16\""),
              "every tensor is BF16");
        uint64_t b, e;
        char shp[64];
        CHECK(st_find(f, "wte.weight", &b, &e, shp, sizeof shp) && e - b == 70 * 32 * 2, "wte.weight holds 2-byte elements");
    }
    free(f);
    remat_config base;
    remat_config_default(&base);
    base.seq = 8;
    base.batch = 2;
    st = remat_weights_load(ps, &base, 1, &r);
    CHECK(st == REMAT_OK && r, "load bf16: %s", remat_errmsg());
    if (r) {
        const float *Q = remat_model_params(r);
        size_t bad = 0;
        for (size_t i = 0; i < np; i++) {
            float want = ref_bf16(P[i]);
            bad += memcmp(&want, Q + i, 4) != 0;
        }
        CHECK(bad == 0, "loaded = parameters rounded to bf16 (%zu differ)", bad);
        CHECK(Q[7] == 1.0f && Q[8] == 1.015625f && Q[9] < 0 && Q[9] > -4e-39f, "ties to even, subnormal kept (%g %g %g)",
              (double)Q[7], (double)Q[8], (double)Q[9]);
        const char *ps2 = path_in("m.bf16b.safetensors");
        CHECK(remat_weights_save_as(r, ps2, REMAT_WEIGHTS_SAFETENSORS, REMAT_DTYPE_BF16) == REMAT_OK, "save again");
        size_t n1, n2;
        unsigned char *f1 = read_all(ps, &n1), *f2 = read_all(ps2, &n2);
        CHECK(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1), "bf16 round trip is a fixed point");
        free(f1);
        free(f2);
        /* and as F32 it stays exactly what was loaded */
        const char *ps3 = path_in("m.wide.safetensors");
        CHECK(remat_weights_save_as(r, ps3, REMAT_WEIGHTS_SAFETENSORS, REMAT_DTYPE_FP32) == REMAT_OK, "save F32");
        CHECK(remat_weights_load(ps3, &base, 1, &r2) == REMAT_OK && r2 && same_params(r, r2), "bf16 -> F32 -> load");
        remat_model_free(r2);
    }
    remat_model_free(r);

    /* llm.c: float32 only */
    const char *pl = path_in("m.bf16.bin");
    st = remat_weights_save_as(m, pl, REMAT_WEIGHTS_LLMC, REMAT_DTYPE_BF16);
    CHECK(st == REMAT_ERR_INVALID && access(pl, F_OK) != 0, "bf16 llm.c write refused: %s", remat_errmsg());
    CHECK(remat_weights_save_as(m, ps, REMAT_WEIGHTS_SAFETENSORS, (remat_dtype)99) == REMAT_ERR_INVALID,
          "unknown dtype refused");
    CHECK(remat_weights_save(m, pl, REMAT_WEIGHTS_LLMC) == REMAT_OK, "save llmc");
    f = read_all(pl, &n);
    if (f) {
        remat_put_le32(f + 4, 5);
        remat_config sh;
        float *p = NULL;
        st = remat_llmc_parse(f, n, &sh, &p);
        CHECK(st == REMAT_ERR_FORMAT && !p && strstr(remat_errmsg(), "version 5") && strstr(remat_errmsg(), "bfloat16"),
              "llm.c version 5 refused by name: %s", remat_errmsg());
        free(p);
    }
    free(f);
    remat_model_free(m);
}

/* A file written by llm.c's scripts: vocabulary padded to 128 with junk
 * rows; remat keeps rows [0, V) and zero-pads to its own 64. */
static void test_llmc_foreign_padding(void)
{
    remat_config c;
    small_config(&c);
    c.vocab = 50;   /* remat pads to 64, llm.c to 128 */
    remat_model *m = make_model(&c), *r = NULL;
    if (!m) { CHECK(0, "create"); return; }
    size_t np = remat_model_num_params(m), C = (size_t)c.n_embd;
    size_t nf = np - 64 * C + 128 * C;
    unsigned char *b = calloc(1, 1024 + 4 * nf);
    int32_t h[8] = {20240326, 3, c.max_seq, 50, c.n_layer, c.n_head, c.n_embd, 128};
    memcpy(b, h, sizeof h);
    float *body = (float *)(b + 1024);
    const float *P = remat_model_params(m);
    memcpy(body, P, 50 * C * 4);
    for (size_t i = 50 * C; i < 128 * C; i++) body[i] = 123.0f;   /* junk padding */
    memcpy(body + 128 * C, P + 64 * C, (np - 64 * C) * 4);
    const char *path = path_in("pad128.bin");
    write_all(path, b, 1024 + 4 * nf);
    remat_config base;
    remat_config_default(&base);
    base.seq = 16;
    remat_status st = remat_weights_load(path, &base, 1, &r);
    CHECK(st == REMAT_OK && r && same_params(m, r), "llm.c file with Vp 128 loads into Vp 64: %s", remat_errmsg());
    remat_model_free(r);
    /* Vp < V is corrupt */
    h[7] = 40;
    memcpy(b, h, sizeof h);
    write_all(path, b, 1024 + 4 * nf);
    r = NULL;
    st = remat_weights_load(path, &base, 1, &r);
    CHECK(st == REMAT_ERR_FORMAT && !r, "Vp < V refused: %s", remat_errmsg());
    free(b);
    remat_model_free(m);
}

/* Replaces the first occurrence of find in the JSON header by repl (the data
 * region is kept; the header length is rewritten). */
static unsigned char *st_edit(const unsigned char *f, size_t n, const char *find, const char *repl,
                              const void *extra, size_t extra_n, size_t *outn)
{
    uint64_t N = remat_get_le64(f);
    char *hdr = malloc(N + 1);
    memcpy(hdr, f + 8, N);
    hdr[N] = 0;
    char *at = strstr(hdr, find);
    if (!at) { free(hdr); return NULL; }
    size_t fl = strlen(find), rl = strlen(repl), N2 = N - fl + rl;
    unsigned char *o = malloc(8 + N2 + (n - 8 - N) + extra_n);
    remat_put_le64(o, N2);
    size_t pre = (size_t)(at - hdr);
    memcpy(o + 8, hdr, pre);
    memcpy(o + 8 + pre, repl, rl);
    memcpy(o + 8 + pre + rl, at + fl, N - pre - fl);
    memcpy(o + 8 + N2, f + 8 + N, n - 8 - N);
    if (extra_n) memcpy(o + 8 + N2 + (n - 8 - N), extra, extra_n);
    *outn = 8 + N2 + (n - 8 - N) + extra_n;
    free(hdr);
    return o;
}

/* f with find replaced by repl is refused with FORMAT, no buffer, and a
 * one-line message holding msg */
static void expect_corrupt(const unsigned char *f, size_t n, const char *find, const char *repl, const char *msg,
                           const char *what, size_t k)
{
    size_t en;
    unsigned char *e = st_edit(f, n, find, repl, NULL, 0, &en);
    CHECK(e != NULL, "%s %zu: the edit applies", what, k);
    if (!e) return;
    remat_config sh;
    float *p = (float *)&en;
    remat_status st = remat_safetensors_parse(e, en, 0, &sh, &p);
    CHECK(st == REMAT_ERR_FORMAT && !p && strstr(remat_errmsg(), msg) && !strchr(remat_errmsg(), '\n'),
          "%s %zu (%s -> %s): status %d, message '%s' (want '%s')", what, k, find, repl, (int)st, remat_errmsg(), msg);
    free(p);
    free(e);
}

static void test_safetensors_variants(void)
{
    remat_config c;
    small_config(&c);
    c.n_embd = 64;      /* so that C/64 gives the heads when the file does not say */
    c.n_head = 1;
    remat_model *m = make_model(&c);
    if (!m) { CHECK(0, "create"); return; }
    char *buf = NULL;
    size_t n = 0;
    FILE *mf = open_memstream(&buf, &n);
    CHECK(remat_weights_write(mf, &c, remat_model_params(m), REMAT_WEIGHTS_SAFETENSORS, REMAT_DTYPE_FP32) == REMAT_OK, "write");
    fclose(mf);
    const unsigned char *f = (const unsigned char *)buf;
    size_t n1, n2, n3;
    remat_config sh;
    float *p = NULL;
    size_t np = remat_model_num_params(m);

    /* Hugging Face style: prefix, no metadata, a mask buffer */
    unsigned char *a = st_edit(f, n, "\"wte.weight\"", "\"transformer.wte.weight\"", NULL, 0, &n1);
    unsigned char *b2 = a ? st_edit(a, n1, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"1\"},", "{", NULL, 0,
                                    &n2) : NULL;
    uint64_t dsz = b2 ? n2 - 8 - remat_get_le64(b2) : 0;
    char ins[256];
    snprintf(ins, sizeof ins, "{\"h.0.attn.bias\":{\"dtype\":\"BOOL\",\"shape\":[1,1,4,4],\"data_offsets\":[%llu,%llu]},",
             (unsigned long long)dsz, (unsigned long long)dsz + 16);
    unsigned char mask[16] = {1};
    unsigned char *c3 = b2 ? st_edit(b2, n2, "{", ins, mask, sizeof mask, &n3) : NULL;
    CHECK(c3 != NULL, "edits apply");
    if (c3) {
        remat_status st = remat_safetensors_parse(c3, n3, 0, &sh, &p);
        CHECK(st == REMAT_OK && p && sh.n_head == 1 && sh.n_layer == 2 && !memcmp(p, remat_model_params(m), np * 4),
              "HF-style file (prefix, no metadata, attn.bias buffer): %s", remat_errmsg());
        free(p);
        p = NULL;
        st = remat_safetensors_parse(c3, n3, 2, &sh, &p);
        CHECK(st == REMAT_OK && sh.n_head == 2, "n_head hint used when the file has none");
        free(p);
        p = NULL;
        /* the same file under its own name, without metadata: C=64 -> 1 head */
        const char *path = path_in("hf.safetensors");
        write_all(path, c3, n3);
        remat_config base, shape;
        remat_config_default(&base);
        base.n_head = 0;
        base.seq = 4;
        remat_model *r = NULL;
        memset(&shape, 0, sizeof shape);
        st = remat_weights_probe(path, &shape, NULL);
        CHECK(st == REMAT_OK && shape.n_head == 0 && shape.n_embd == 64, "probe reports unrecorded heads as 0");
        st = remat_weights_load(path, &base, 1, &r);
        CHECK(st == REMAT_OK && r && remat_model_config(r)->n_head == 1, "heads default to C/64");
        remat_model_free(r);
    }
    free(a);
    free(b2);
    free(c3);

    /* the catalogue of corrupt files: (find, replace, expected message) */
    static const struct { const char *find, *repl, *msg; } bad[] = {
        {"\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "spans"},
        {"\"dtype\":\"F32\"", "\"dtype\":\"F99\"", "unknown dtype"},
        {"\"dtype\":\"F32\",\"shape\":[70,64]", "\"dtype\":\"I32\",\"shape\":[70,64]", "dtype I32"},
        {"\"shape\":[70,64]", "\"shape\":[64,70]", "wpe.weight has shape [16, 64], expected [16, 70]"},
        {"\"shape\":[70,64]", "\"shape\":[70,64,1]", "wte.weight has shape [70, 64, 1], expected a matrix"},
        {"\"shape\":[70,64]", "\"shape\":[070,64]", "invalid token"},
        {"\"shape\":[70,64]", "\"shape\":[70.0,64]", "whole number"},
        {"\"shape\":[70,64]", "\"shape\":[-70,64]", "unsigned integer"},
        {"\"shape\":[70,64]", "\"shape\":[99999999999999999999,64]", "too big integer"},
        {"\"data_offsets\":[0,", "\"data_offsets\":[4,", "spans"},
        {"\"h.0.ln_1.weight\"", "\"h.0.ln_1.bias\"", "duplicate object key"},
        {"\"h.0.ln_1.weight\"", "\"transformer.h.0.ln_1.bias\"", "twice"},
        {"\"h.1.ln_2.bias\"", "\"h.1.ln_3.bias\"", "unknown tensor"},
        {"\"h.1.ln_2.bias\"", "\"h.01.ln_2.bias\"", "unknown tensor"},
        {"\"h.1.ln_2.bias\"", "\"h.1.attn.bias\"", "missing tensor h.1.ln_2.bias"},
        {"\"ln_f.bias\"", "\"lm_head.weight\"", "missing tensor ln_f.bias"},
        {"\"h.1.ln_2.bias\"", "\"h.4096.ln_2.bias\"", "4096"},
        {"\"n_head\":\"1\"", "\"n_head\":\"0\"", "n_head"},
        {"\"n_head\":\"1\"", "\"n_head\":\"3\"", "divisible"},
        {"\"n_head\":\"1\"", "\"n_head\":1", "must be strings"},
        {"\"format\":\"pt\"", "\"n_head\":\"1\"", "duplicate object key near '\"n_head\"'"},
        {"\"__metadata__\"", "\"__metadata__\":{},\"__metadata__\"", "duplicate object key near '\"__metadata__\"'"},
        {"\"dtype\":\"F32\"", "\"dtype\":\"F32\",\"dtype\":\"F32\"", "duplicate object key near '\"dtype\"'"},
        {"\"dtype\":\"F32\"", "\"dtype\":\"F32\",\"extra\":1", "unknown field"},
        {"\"dtype\":\"F32\",", "", "needs dtype"},
        {"\"wte.weight\"", "\"wte\\u0000.weight\"", "NUL byte in object key"},
        {"\"pt\"", "\"p\\u0000t\"", "JSON_ALLOW_NUL"},
        {"\"wte.weight\"", "\"wte\\ud800.weight\"", "invalid Unicode"},
        {"\"wte.weight\"", "\"wte\\x.weight\"", "invalid escape"},
        {"\"wte.weight\"", "\"wte\xff.weight\"", "unable to decode byte 0xff"},
        {"\"wte.weight\"", "\"wte\n.weight\"", "unexpected newline"},
        {"{\"__metadata__\"", "[\"__metadata__\"", "']' expected"},
        {"\"format\"", "\"format", "':' expected"},
        {"}", "}}", "end of file expected"},
        {"\"data_offsets\":[0,", "\"data_offsets\":[0,1,", "too many elements"},
        /* a name with a newline, quoted in the message: still one line */
        {"\"h.1.ln_2.bias\"", "\"h.1.ln_2.bias\\n\"", "unknown tensor 'h.1.ln_2.bias?'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_corrupt(f, n, bad[k].find, bad[k].repl, bad[k].msg, "corrupt", k);
    /* offsets: overlap, gap, out of range, extra data */
    {
        size_t en;
        unsigned char *e;
        uint64_t N = remat_get_le64(f);
        char *hdr = malloc(N + 1);
        memcpy(hdr, f + 8, N);
        hdr[N] = 0;
        /* wpe is the second tensor: [17920, 22016] (wte 70*64*4 = 17920) */
        CHECK(strstr(hdr, "\"data_offsets\":[17920,22016]") != NULL, "wpe offsets as expected");
        free(hdr);
        static const struct { const char *repl, *msg; } off[] = {
            {"\"data_offsets\":[17916,22012]", "overlap"},
            {"\"data_offsets\":[17924,22020]", "gap"},
            {"\"data_offsets\":[22016,17920]", "outside"},
            {"\"data_offsets\":[17920,99999999999]", "outside"},
        };
        for (size_t k = 0; k < sizeof off / sizeof off[0]; k++) {
            e = st_edit(f, n, "\"data_offsets\":[17920,22016]", off[k].repl, NULL, 0, &en);
            remat_status st = e ? remat_safetensors_parse(e, en, 0, &sh, &p) : REMAT_OK;
            CHECK(st == REMAT_ERR_FORMAT && strstr(remat_errmsg(), off[k].msg), "offsets %s: %s", off[k].repl,
                  remat_errmsg());
            free(e);
        }
        unsigned char z[4] = {0};
        e = st_edit(f, n, "{", "{", z, 4, &en);
        remat_status st = e ? remat_safetensors_parse(e, en, 0, &sh, &p) : REMAT_OK;
        CHECK(st == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "extra bytes"), "trailing data: %s", remat_errmsg());
        free(e);
    }
    /* header lengths */
    {
        unsigned char *e = malloc(n);
        memcpy(e, f, n);
        remat_put_le64(e, n - 7);
        CHECK(remat_safetensors_parse(e, n, 0, &sh, &p) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "past the end"),
              "header length > file: %s", remat_errmsg());
        remat_put_le64(e, (uint64_t)100 * 1024 * 1024 + 1);
        CHECK(remat_safetensors_parse(e, n, 0, &sh, &p) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "limit"),
              "header length > 100 MB: %s", remat_errmsg());
        remat_put_le64(e, UINT64_MAX);
        CHECK(remat_safetensors_parse(e, n, 0, &sh, &p) == REMAT_ERR_FORMAT, "header length 2^64-1");
        remat_put_le64(e, 0);
        CHECK(remat_safetensors_parse(e, n, 0, &sh, &p) == REMAT_ERR_FORMAT, "header length 0");
        /* every truncation of the header region, and a few of the data */
        int crashless = 1;
        for (size_t k = 0; k < 8 + remat_get_le64(f) + 64; k += (k < 64 ? 1 : 7)) {
            remat_status st = remat_safetensors_parse(f, k, 0, &sh, &p);
            crashless &= st == REMAT_ERR_FORMAT && !p;
        }
        CHECK(crashless, "every truncation refused");
        /* every single-byte corruption of the header: no crash, and a
         * success only when the params still come out intact (a digit in
         * the metadata, a space, ...) */
        uint64_t N = remat_get_le64(f);
        int wrong = 0;
        for (size_t k = 0; k < 8 + N; k++)
            for (int v = 0; v < 3; v++) {
                memcpy(e, f, n);
                static const unsigned char vals[3] = { 0x00, 0x22, 0xff };
                if (e[k] == vals[v]) continue;
                e[k] = vals[v];
                p = NULL;
                remat_status st = remat_safetensors_parse(e, n, 0, &sh, &p);
                if (st == REMAT_OK) {
                    wrong += memcmp(p, remat_model_params(m), np * 4) != 0;
                    free(p);
                } else wrong += st != REMAT_ERR_FORMAT || p != NULL;
            }
        CHECK(wrong == 0, "single-byte header corruptions: %d accepted with wrong params or bad status", wrong);
        free(e);
    }
    free(buf);

    /* llm.c: header fields and sizes */
    buf = NULL;
    mf = open_memstream(&buf, &n);
    CHECK(remat_weights_write(mf, &c, remat_model_params(m), REMAT_WEIGHTS_LLMC, REMAT_DTYPE_FP32) == REMAT_OK, "write llmc");
    fclose(mf);
    unsigned char *e = malloc(n + 4);
    static const struct { int idx; int32_t val; const char *msg; } hb[] = {
        {0, 20240520, "bad magic"}, {1, 5, "version 5"}, {2, 0, "corrupt"}, {3, 1, "corrupt"}, {4, 0, "corrupt"},
        {5, 3, "divisible"}, {6, -1, "corrupt"}, {7, 64, "corrupt"}, {4, 3, "bytes, expected"},
        {6, 65536, "bytes, expected"}, {2, 1 << 30, "invalid"}, {4, 5000, "invalid"},
    };
    for (size_t k = 0; k < sizeof hb / sizeof hb[0]; k++) {
        memcpy(e, buf, n);
        memcpy(e + 4 * hb[k].idx, &hb[k].val, 4);
        p = NULL;
        remat_status st = remat_llmc_parse(e, n, &sh, &p);
        CHECK(st == REMAT_ERR_FORMAT && !p && strstr(remat_errmsg(), hb[k].msg), "llmc header[%d] = %d: '%s'",
              hb[k].idx, (int)hb[k].val, remat_errmsg());
    }
    memcpy(e, buf, n);
    CHECK(remat_llmc_parse(e, n - 1, &sh, &p) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "truncated"),
          "llmc truncated: %s", remat_errmsg());
    e[n] = 0;
    CHECK(remat_llmc_parse(e, n + 1, &sh, &p) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "extra"),
          "llmc trailing bytes: %s", remat_errmsg());
    CHECK(remat_llmc_parse(e, 1000, &sh, &p) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "shorter"),
          "llmc short header: %s", remat_errmsg());
    int wrong = 0;
    for (size_t k = 0; k < 32; k++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(e, buf, n);
            e[k] ^= (unsigned char)(1u << bit);
            p = NULL;
            remat_status st = remat_llmc_parse(e, n, &sh, &p);
            /* every header bit matters but V's: any V <= Vp is consistent */
            if (st == REMAT_OK) wrong += k < 12 || k >= 16 || !p;
            else wrong += st != REMAT_ERR_FORMAT || p != NULL;
            free(p);
        }
    CHECK(wrong == 0, "llmc header bit flips: %d not refused", wrong);
    free(e);
    free(buf);
    remat_model_free(m);
}

static void test_files(void)
{
    remat_config c, base;
    small_config(&c);
    remat_config_default(&base);
    base.seq = 8;
    remat_model *m = make_model(&c), *r = (remat_model *)&c;
    if (!m) { CHECK(0, "create"); return; }
    remat_status st;
    CHECK(remat_weights_load(path_in("missing.bin"), &base, 1, &r) == REMAT_ERR_IO && !r, "missing file");
    r = (remat_model *)&c;
    CHECK(remat_weights_load(dir, &base, 1, &r) == REMAT_ERR_IO && !r, "a directory");
    const char *junk = path_in("junk.txt");
    write_all(junk, "hello world, not weights\n", 25);
    r = (remat_model *)&c;
    CHECK(remat_weights_load(junk, &base, 1, &r) == REMAT_ERR_FORMAT && !r && strstr(remat_errmsg(), "neither"),
          "junk: %s", remat_errmsg());
    write_all(junk, "", 0);
    CHECK(remat_weights_load(junk, &base, 1, &r) == REMAT_ERR_FORMAT && !r, "empty file");
    CHECK(remat_weights_save(m, path_in("x.bin"), REMAT_WEIGHTS_AUTO) == REMAT_ERR_INVALID, "save AUTO refused");
    CHECK(remat_weights_save(m, path_in("nodir/x.bin"), REMAT_WEIGHTS_LLMC) == REMAT_ERR_IO &&
          strstr(remat_errmsg(), "nodir/x.bin"), "unwritable: %s", remat_errmsg());
    /* a path through a regular file (ENOTDIR even for root) */
    char through[300];
    snprintf(through, sizeof through, "%s/x.safetensors", junk);
    CHECK(remat_weights_save(m, through, REMAT_WEIGHTS_SAFETENSORS) == REMAT_ERR_IO, "path through a file");
    /* overwrite keeps the final name whole; no temporary left behind */
    const char *pl = path_in("w.bin");
    st = remat_weights_save(m, pl, REMAT_WEIGHTS_LLMC);
    st |= remat_weights_save(m, pl, REMAT_WEIGHTS_SAFETENSORS);
    CHECK(st == REMAT_OK, "save twice");
    remat_weights_format fmt;
    remat_config shape;
    CHECK(remat_weights_probe(pl, &shape, &fmt) == REMAT_OK && fmt == REMAT_WEIGHTS_SAFETENSORS, "overwritten");
    /* the final name cannot be replaced by a file (it is a directory): the
     * temporary file is removed */
    const char *sub = path_in("sub");
    mkdir(sub, 0755);
    CHECK(remat_weights_save(m, sub, REMAT_WEIGHTS_LLMC) == REMAT_ERR_IO, "rename onto a directory fails");
    rmdir(sub);
    int tmps = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) tmps += strstr(de->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    CHECK(tmps == 0, "no temporary files left (%d)", tmps);
    remat_model_free(m);
}

static int exists(const char *path) { struct stat sb; return stat(path, &sb) == 0; }

/* Temporary files of killed writers (NAME.tmp.PID, process PID gone) are
 * deleted by the next writer of NAME; a live writer's file and other names
 * are left alone. */
static void test_stale_tmps(void)
{
    pid_t child = fork();
    if (child == 0) _exit(0);
    if (child < 0) { CHECK(0, "fork"); return; }
    waitpid(child, NULL, 0);   /* its pid now names no process */
    const char *names[] = {"w.bin", "t.txt"};
    for (int k = 0; k < 2; k++) {
        char dead[300], live[300], other[300];
        snprintf(dead, sizeof dead, "%s/%s.tmp.%ld", dir, names[k], (long)child);
        snprintf(live, sizeof live, "%s/%s.tmp.%ld", dir, names[k], (long)getppid());
        snprintf(other, sizeof other, "%s/%s.tmp.12x", dir, names[k]);
        write_all(dead, "half", 4);
        write_all(live, "half", 4);
        write_all(other, "half", 4);
        remat_status st;
        if (k == 0) {
            remat_config c;
            small_config(&c);
            remat_model *m = make_model(&c);
            st = m ? remat_weights_save(m, path_in(names[k]), REMAT_WEIGHTS_LLMC) : REMAT_ERR_NOMEM;
            remat_model_free(m);
        } else {
            st = remat_write_file_atomic(path_in(names[k]), "abc\n", 4);
            size_t n = 0;
            unsigned char *b = read_all(path_in(names[k]), &n);
            CHECK(b && n == 4 && !memcmp(b, "abc\n", 4), "atomic write: content");
            free(b);
        }
        CHECK(st == REMAT_OK, "%s: %s", names[k], remat_errmsg());
        CHECK(!exists(dead), "%s: a dead writer's temporary file is deleted", names[k]);
        CHECK(exists(live) && exists(other), "%s: a live writer's file and other names stay", names[k]);
        unlink(live);
        unlink(other);
    }
    CHECK(remat_write_file_atomic(path_in("nodir/t.txt"), "x", 1) == REMAT_ERR_IO && strstr(remat_errmsg(), "nodir"),
          "atomic write into a missing directory: %s", remat_errmsg());
    CHECK(remat_write_file_atomic(NULL, "x", 1) == REMAT_ERR_INVALID, "NULL path");
}

/* The parameter tables through the public API: GPT-2's 16 tensors in
 * llm.c's order, Llama's 8 (9 untied), each at the offset after the one
 * before, the whole vector covered; names found by name; out-of-range
 * indices refused. */
static void test_param_enum(void)
{
    static const char *const gpt2[] = { "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",
                                        "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb" };
    static const char *const llama[] = { "wte", "ln1w", "qkvw", "attprojw", "ln2w", "gateupw", "fcprojw", "lnfw",
                                         "lmheadw" };
    for (int k = 0; k < 3; k++) {
        remat_config c;
        remat_config_default(&c);
        c.n_layer = 2; c.n_embd = 8; c.n_head = 2; c.vocab = 16; c.seq = c.max_seq = 4; c.batch = 1;
        if (k) { c.arch = REMAT_ARCH_LLAMA; c.n_kv_head = 1; c.ffn_dim = 12; c.tie_embeddings = k == 2; }
        const char *const *names = k ? llama : gpt2;
        int want = k == 0 ? 16 : k == 1 ? 9 : 8;
        CHECK(remat_config_param_count(&c) == want, "arch %d: %d tensors, want %d", k, remat_config_param_count(&c), want);
        size_t next = 0;
        for (int i = 0; i < want; i++) {
            remat_param_info pi;
            CHECK(!remat_config_param_get(&c, i, &pi) && !strcmp(pi.name, names[i]) && pi.offset == next,
                  "arch %d tensor %d is %s at %zu, want %s at %zu", k, i, pi.name, pi.offset, names[i], next);
            CHECK(remat_config_param_find(&c, names[i]) == i, "find %s", names[i]);
            next = pi.offset + pi.numel;
        }
        CHECK(next == remat_config_num_params(&c), "arch %d: the tensors cover %zu of %llu parameters", k, next,
              (unsigned long long)remat_config_num_params(&c));
        remat_param_info pi;
        CHECK(remat_config_param_get(&c, want, &pi) == REMAT_ERR_INVALID && remat_config_param_get(&c, -1, &pi),
              "index %d is not a tensor", want);
        CHECK(remat_config_param_find(&c, k == 2 ? "lmheadw" : "nope") == -1, "no such tensor");
    }
    /* Llama's fused weights: qkvw ((NH + 2 KV) hs, C), gateupw (2F, C) */
    remat_config c;
    remat_config_default(&c);
    c.arch = REMAT_ARCH_LLAMA; c.n_layer = 3; c.n_embd = 8; c.n_head = 4; c.n_kv_head = 2; c.head_dim = 6;
    c.ffn_dim = 10; c.vocab = 16; c.seq = c.max_seq = 4; c.batch = 1;
    remat_param_info pi;
    CHECK(!remat_config_param_get(&c, remat_config_param_find(&c, "qkvw"), &pi) && pi.shape[0] == 3 &&
          pi.shape[1] == (4 + 2 * 2) * 6 && pi.shape[2] == 8 && pi.per_layer && pi.decay, "qkvw (L, (NH+2KV)hs, C)");
    CHECK(!remat_config_param_get(&c, remat_config_param_find(&c, "attprojw"), &pi) && pi.shape[1] == 8 &&
          pi.shape[2] == 4 * 6, "attprojw (L, C, NH hs)");
    CHECK(!remat_config_param_get(&c, remat_config_param_find(&c, "gateupw"), &pi) && pi.shape[1] == 20 &&
          pi.shape[2] == 8, "gateupw (L, 2F, C)");
    CHECK(!remat_config_param_get(&c, remat_config_param_find(&c, "ln1w"), &pi) && !pi.decay, "norm weights: no decay");
}

/* ---- Llama files, Hugging Face directories ------------------------------------ */

/* Llama's shapes worth testing: tied or not, KV key/value heads, head size
 * hs (0: C/NH), F 40, on small_config's L2 C32 NH4 V70 maxT16 */
static void llama_config(remat_config *c, int tied, int kv, int hs)
{
    small_config(c);
    c->arch = REMAT_ARCH_LLAMA;
    c->n_kv_head = kv;
    c->head_dim = hs;
    c->ffn_dim = 40;
    c->tie_embeddings = tied;
}

/* the architecture's fields agree (defaults resolved) */
static int same_arch(const remat_config *a, const remat_config *b)
{
    return a->arch == b->arch && a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head &&
           a->vocab == b->vocab && a->max_seq == b->max_seq && remat_config_kv_heads(a) == remat_config_kv_heads(b) &&
           remat_config_head_dim(a) == remat_config_head_dim(b) && remat_config_ffn_dim(a) == remat_config_ffn_dim(b) &&
           remat_config_tied(a) == remat_config_tied(b) && remat_config_rope_theta(a) == remat_config_rope_theta(b) &&
           remat_config_norm_eps(a) == remat_config_norm_eps(b) && a->rope_scaling.type == b->rope_scaling.type &&
           a->rope_scaling.factor == b->rope_scaling.factor &&
           a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor &&
           a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor &&
           a->rope_scaling.original_max_position == b->rope_scaling.original_max_position;
}

/* every parameter of r is m's rounded to bf16 */
static int params_are_bf16_of(remat_model *m, remat_model *r)
{
    size_t n = remat_model_num_params(m), bad = 0;
    const float *P = remat_model_params(m), *Q = remat_model_params(r);
    if (n != remat_model_num_params(r)) return 0;
    for (size_t i = 0; i < n; i++) {
        float want = ref_bf16(P[i]);
        bad += memcmp(&want, Q + i, 4) != 0;
    }
    return bad == 0;
}

/* Llama in a safetensors file: Hugging Face's names, each q/k/v and
 * gate/up piece holding its rows of remat's fused weight, lm_head only when
 * untied, the metadata; the probe; F32 and BF16 round trips; a file without
 * metadata and the caller's config (--arch llama and sizes); Llama's own
 * corruptions. */
static void test_llama_files(void)
{
    static const struct { int tied, kv, hs; } var[] = { {0, 2, 6}, {1, 1, 10}, {0, 4, 0} };
    for (size_t v = 0; v < sizeof var / sizeof var[0]; v++) {
        remat_config c;
        llama_config(&c, var[v].tied, var[v].kv, var[v].hs);
        remat_model *m = make_model(&c), *r = NULL;
        CHECK(m != NULL, "llama create: %s", remat_errmsg());
        if (!m) continue;
        int C = c.n_embd, NH = c.n_head, KV = remat_config_kv_heads(&c), hs = remat_config_head_dim(&c), F = 40,
            V = c.vocab;
        const char *ps = path_in("llama.safetensors");
        CHECK(remat_weights_save(m, ps, REMAT_WEIGHTS_SAFETENSORS) == REMAT_OK, "save llama: %s", remat_errmsg());
        size_t n = 0;
        unsigned char *f = read_all(ps, &n);
        const float *P = remat_model_params(m);
        CHECK(f != NULL, "read back");
        if (f) {
            /* name, remat's parameter, the layer, the first row in its slice, rows, cols (0: a vector) */
            const struct { const char *name, *param; int layer, row0, rows, cols; } t[] = {
                {"model.embed_tokens.weight", "wte", -1, 0, V, C},
                {"model.layers.1.input_layernorm.weight", "ln1w", 1, 0, C, 0},
                {"model.layers.1.self_attn.q_proj.weight", "qkvw", 1, 0, NH * hs, C},
                {"model.layers.1.self_attn.k_proj.weight", "qkvw", 1, NH * hs, KV * hs, C},
                {"model.layers.0.self_attn.v_proj.weight", "qkvw", 0, (NH + KV) * hs, KV * hs, C},
                {"model.layers.1.self_attn.o_proj.weight", "attprojw", 1, 0, C, NH * hs},
                {"model.layers.0.post_attention_layernorm.weight", "ln2w", 0, 0, C, 0},
                {"model.layers.1.mlp.gate_proj.weight", "gateupw", 1, 0, F, C},
                {"model.layers.1.mlp.up_proj.weight", "gateupw", 1, F, F, C},
                {"model.layers.0.mlp.down_proj.weight", "fcprojw", 0, 0, C, F},
                {"model.norm.weight", "lnfw", -1, 0, C, 0},
                {"lm_head.weight", "lmheadw", -1, 0, V, C},
            };
            for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
                uint64_t b = 0, e = 0;
                char shp[64] = "", want[64];
                int present = st_find(f, t[k].name, &b, &e, shp, sizeof shp);
                if (!strcmp(t[k].param, "lmheadw") && c.tie_embeddings) {
                    CHECK(!present, "variant %zu: a tied model has no lm_head.weight", v);
                    continue;
                }
                if (t[k].cols) snprintf(want, sizeof want, "%d,%d", t[k].rows, t[k].cols);
                else snprintf(want, sizeof want, "%d", t[k].rows);
                CHECK(present && !strcmp(shp, want), "variant %zu: %s has shape [%s], want [%s]", v, t[k].name, shp, want);
                if (!present) continue;
                int sh[3];
                size_t off = param_at(m, t[k].param, sh), cols = t[k].cols ? (size_t)t[k].cols : 1;
                if (t[k].layer >= 0) off += (size_t)t[k].layer * (size_t)sh[1] * (sh[2] ? (size_t)sh[2] : 1);
                off += (size_t)t[k].row0 * cols;
                CHECK(e - b == 4 * (uint64_t)t[k].rows * cols && !memcmp(f + b, P + off, e - b),
                      "variant %zu: %s holds rows [%d, %d) of %s", v, t[k].name, t[k].row0, t[k].row0 + t[k].rows,
                      t[k].param);
            }
            char meta[160];
            snprintf(meta, sizeof meta, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"%d\",\"n_kv_head\":\"%d\","
                     "\"head_dim\":\"%d\"},", NH, KV, hs);
            CHECK(!strncmp((const char *)f + 8, meta, strlen(meta)), "variant %zu: metadata %s", v, meta);

            /* the probe, the load */
            remat_config shape, base;
            remat_weights_format fmt = REMAT_WEIGHTS_AUTO;
            memset(&shape, 0, sizeof shape);
            CHECK(remat_weights_probe(ps, &shape, &fmt) == REMAT_OK && fmt == REMAT_WEIGHTS_SAFETENSORS &&
                  shape.arch == REMAT_ARCH_LLAMA && shape.n_layer == 2 && shape.n_embd == C && shape.n_head == NH &&
                  shape.n_kv_head == KV && shape.head_dim == hs && shape.ffn_dim == F && shape.vocab == V &&
                  shape.max_seq == 0 && shape.tie_embeddings == c.tie_embeddings,
                  "variant %zu: probe: %s", v, remat_errmsg());
            remat_config_default(&base);
            base.seq = 8;
            CHECK(remat_weights_load(ps, &base, 1, &r) == REMAT_OK && r && same_params(m, r),
                  "variant %zu: llama safetensors round trip is bitwise: %s", v, remat_errmsg());
            if (r) {
                remat_config want = c;
                want.max_seq = base.max_seq;   /* a Llama file has no positions: the caller's */
                CHECK(same_arch(remat_model_config(r), &want), "variant %zu: the loaded architecture", v);
            }
            remat_model_free(r);
            r = NULL;
            const char *p16 = path_in("llama16.safetensors");
            CHECK(remat_weights_save_as(m, p16, REMAT_WEIGHTS_SAFETENSORS, REMAT_DTYPE_BF16) == REMAT_OK &&
                  remat_weights_load(p16, &base, 1, &r) == REMAT_OK && params_are_bf16_of(m, r),
                  "variant %zu: llama BF16: %s", v, remat_errmsg());
            remat_model_free(r);
            r = NULL;

            /* without metadata, as Hugging Face writes it: the heads and
             * the rest of the architecture from the caller */
            size_t bn;
            unsigned char *bare = st_edit(f, n, meta, "{", NULL, 0, &bn);
            CHECK(bare != NULL, "strip the metadata");
            if (bare) {
                remat_config sh;
                float *q = NULL;
                CHECK(remat_safetensors_parse(bare, bn, NH, &sh, &q) == REMAT_OK && q &&
                      !memcmp(q, P, remat_model_num_params(m) * 4) && remat_config_kv_heads(&sh) == KV &&
                      remat_config_head_dim(&sh) == hs, "variant %zu: no metadata, heads given: %s", v, remat_errmsg());
                free(q);
                const char *pb = path_in("llama-bare.safetensors");
                write_all(pb, bare, bn);
                memset(&shape, 0, sizeof shape);
                CHECK(remat_weights_probe(pb, &shape, NULL) == REMAT_OK && shape.arch == REMAT_ARCH_LLAMA &&
                      shape.n_head == 0 && shape.n_kv_head == 0 && shape.head_dim == 0 && shape.ffn_dim == F &&
                      shape.n_embd == C, "variant %zu: probe without metadata: %s", v, remat_errmsg());
                remat_config lb;
                remat_config_default(&lb);
                lb.arch = REMAT_ARCH_LLAMA;
                lb.n_head = NH;
                lb.max_seq = 48;
                lb.seq = 8;
                lb.rope_theta = 500000.0;
                lb.norm_eps = 1e-5;
                lb.rope_scaling = (remat_rope_scaling){ REMAT_ROPE_LLAMA3, 8.0, 1.0, 4.0, 32 };
                CHECK(remat_weights_load(pb, &lb, 1, &r) == REMAT_OK && r && same_params(m, r),
                      "variant %zu: a bare Llama file with --arch llama and sizes: %s", v, remat_errmsg());
                if (r) {
                    remat_config want = c;
                    want.max_seq = 48;
                    want.rope_theta = lb.rope_theta;
                    want.norm_eps = lb.norm_eps;
                    want.rope_scaling = lb.rope_scaling;
                    CHECK(same_arch(remat_model_config(r), &want), "variant %zu: the caller's rope and norm settings", v);
                }
                remat_model_free(r);
                r = NULL;
                lb.n_head = 0;   /* C = 32: no C/64 guess */
                CHECK(remat_weights_load(pb, &lb, 1, &r) == REMAT_ERR_INVALID && !r &&
                      strstr(remat_errmsg(), "number of heads"), "variant %zu: heads unknown: %s", v, remat_errmsg());
                free(bare);
            }
            if (v == 0) {   /* KV 2, hs 6: k_proj (12, 32) */
                static const struct { const char *find, *repl, *msg; } bad[] = {
                    {"\"model.layers.0.mlp.up_proj.weight\"", "\"model.layers.0.mlp.upp_proj.weight\"",
                     "unknown tensor 'model.layers.0.mlp.upp_proj.weight' (not part of a llama model)"},
                    {"\"model.layers.1.mlp.up_proj.weight\"", "\"model.layers.1.self_attn.rotary_emb.inv_freq\"",
                     "missing tensor model.layers.1.mlp.up_proj.weight"},
                    {"\"model.layers.0.input_layernorm.weight\"", "\"model.layers.00.input_layernorm.weight\"",
                     "unknown tensor"},
                    {"\"model.layers.1.self_attn.k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[12,32]",
                     "\"model.layers.1.self_attn.k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[6,64]",
                     "tensor model.layers.1.self_attn.k_proj.weight has shape [6, 64], expected [12, 32]"},
                    {"\"n_kv_head\":\"2\"", "\"n_kv_head\":\"1\"", "has shape [12, 32], expected [6, 32]"},
                    {"\"model.layers.1.mlp.down_proj.weight\":{\"dtype\":\"F32\"",
                     "\"model.layers.1.mlp.down_proj.weight\":{\"dtype\":\"I32\"", "dtype I32"},
                    {"\"model.embed_tokens.weight\"", "\"transformer.wte.weight\"", "(not part of a gpt2 model)"},
                    {"\"model.embed_tokens.weight\"", "\"model.embed_token.weight\"", "no token embedding"},
                    {"\"model.norm.weight\"", "\"model.layers.2.input_layernorm.weight\"",
                     "missing tensor model.layers.2.self_attn.q_proj.weight"},
                };
                for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
                    expect_corrupt(f, n, bad[k].find, bad[k].repl, bad[k].msg, "llama corrupt", k);
                /* the rotary buffer of older checkpoints is skipped */
                size_t dsz = n - 8 - remat_get_le64(f), en;
                char ins[200];
                snprintf(ins, sizeof ins, "{\"model.layers.1.self_attn.rotary_emb.inv_freq\":{\"dtype\":\"F32\","
                         "\"shape\":[3],\"data_offsets\":[%llu,%llu]},", (unsigned long long)dsz,
                         (unsigned long long)dsz + 12);
                unsigned char z[12] = { 0 }, *e = st_edit(f, n, "{", ins, z, sizeof z, &en);
                remat_config sh;
                float *q = NULL;
                CHECK(e && remat_safetensors_parse(e, en, 0, &sh, &q) == REMAT_OK && q &&
                      !memcmp(q, P, remat_model_num_params(m) * 4), "inv_freq is skipped: %s", remat_errmsg());
                free(q);
                free(e);
            }
        }
        free(f);
        /* llm.c files are GPT-2's */
        CHECK(remat_weights_save(m, path_in("llama.bin"), REMAT_WEIGHTS_LLMC) == REMAT_ERR_INVALID &&
              strstr(remat_errmsg(), "GPT-2"), "llama as llm.c refused: %s", remat_errmsg());
        remat_model_free(m);
    }
}

static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(path);
}

static char *in_dir(const char *d, const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", d, name);
    return p;
}

/* the shard files model-*-of-*.safetensors of d */
static int count_shards(const char *d)
{
    int n = 0;
    DIR *dd = opendir(d);
    struct dirent *de;
    while (dd && (de = readdir(dd))) n += !strncmp(de->d_name, "model-", 6) && strstr(de->d_name, "-of-") != NULL;
    if (dd) closedir(dd);
    return n;
}

/* a safetensors file's header as JSON, and its data bytes */
static json_t *st_header_json(const char *path, uint64_t *data)
{
    size_t n = 0;
    unsigned char *f = read_all(path, &n);
    json_t *h = NULL;
    if (f && n >= 8) {
        uint64_t N = remat_get_le64(f);
        if (8 + N <= n) {
            h = json_loadb((const char *)f + 8, N, 0, NULL);
            *data = n - 8 - N;
        }
    }
    free(f);
    return h;
}

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = read_all(a, &na), *y = read_all(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* The index against the shards, independently of the reader: every tensor
 * of every shard in weight_map, pointing at its shard; total_size the data
 * bytes; a shard over the limit only when it holds a single tensor; each
 * shard but the last full enough that the next one's first tensor would not
 * have fit (save_pretrained's greedy split, without oversized tensors).
 * Returns the number of tensors. */
static size_t check_index(const char *d, uint64_t limit)
{
    json_t *ix = json_load_file(in_dir(d, "model.safetensors.index.json"), JSON_REJECT_DUPLICATES, NULL);
    json_t *map = json_object_get(ix, "weight_map");
    CHECK(json_is_object(map), "%s: the index has a weight_map", d);
    int N = count_shards(d);
    size_t tensors = 0;
    uint64_t total = 0, prev = 0;
    for (int k = 1; k <= N; k++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, N);
        uint64_t data = 0;
        json_t *h = st_header_json(in_dir(d, name), &data);
        CHECK(h != NULL, "%s is a safetensors file", name);
        if (!h) continue;
        const char *key;
        json_t *e;
        size_t nt = 0;
        uint64_t first = 0;
        json_object_foreach(h, key, e) {
            if (!strcmp(key, "__metadata__")) continue;
            const char *in = json_string_value(json_object_get(map, key));
            CHECK(in && !strcmp(in, name), "%s: %s is in %s, the index says %s", d, key, name, in ? in : "nothing");
            json_t *off = json_object_get(e, "data_offsets");
            if (!nt) first = (uint64_t)(json_integer_value(json_array_get(off, 1)) - json_integer_value(json_array_get(off, 0)));
            nt++;
        }
        CHECK(data <= limit || nt == 1, "%s: %llu data bytes over the %llu limit in %zu tensors", name,
              (unsigned long long)data, (unsigned long long)limit, nt);
        if (k > 1) CHECK(prev + first > limit, "%s: its first tensor (%llu bytes) would have fit in the shard before "
                         "(%llu)", name, (unsigned long long)first, (unsigned long long)prev);
        prev = data;
        tensors += nt;
        total += data;
        json_decref(h);
    }
    CHECK(json_object_size(map) == tensors, "%s: the index lists %zu tensors, the shards hold %zu", d,
          json_object_size(map), tensors);
    json_t *ts = json_object_get(json_object_get(ix, "metadata"), "total_size");
    CHECK(json_is_integer(ts) && (uint64_t)json_integer_value(ts) == total, "%s: total_size %lld, the shards hold %llu",
          d, (long long)json_integer_value(ts), (unsigned long long)total);
    json_decref(ix);
    return tensors;
}

/* Directories: GPT-2 and Llama (untied with KV < NH and hs != C/NH; tied
 * with llama3 rope scaling), F32 and BF16, in one file and in 3+ shards;
 * directory -> model -> directory -> model is bit for bit the same, file for
 * file; an export replaces what an earlier one of the other layout left. */
static void test_hf_dirs(void)
{
    remat_config cfgs[3];
    small_config(&cfgs[0]);
    llama_config(&cfgs[1], 0, 2, 6);
    llama_config(&cfgs[2], 1, 1, 8);
    cfgs[2].rope_theta = 500000.0;
    cfgs[2].norm_eps = 1e-5;
    cfgs[2].rope_scaling = (remat_rope_scaling){ REMAT_ROPE_LLAMA3, 8.0, 1.0, 4.0, 8 };
    remat_config base;
    remat_config_default(&base);
    base.seq = 8;
    const char *d1 = path_in("hf1"), *d2 = path_in("hf2");
    for (int k = 0; k < 3; k++) {
        remat_model *m = make_model(&cfgs[k]);
        CHECK(m != NULL, "create %d: %s", k, remat_errmsg());
        if (!m) continue;
        for (int dt = 0; dt < 2; dt++)
            for (int sharded = 0; sharded < 2; sharded++) {
                remat_dtype dtype = dt ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
                uint64_t limit = sharded ? 2500 >> dt : 0;   /* 2500 bytes: a few tensors a shard */
                remat_model *r1 = NULL, *r2 = NULL;
                rm_tree(d1);
                rm_tree(d2);
                remat_status st = remat_weights_save_hf(m, d1, dtype, limit);
                CHECK(st == REMAT_OK, "model %d dtype %d sharded %d: save: %s", k, dt, sharded, remat_errmsg());
                if (st) continue;
                int N = count_shards(d1);
                CHECK(sharded ? N >= 3 && !exists(in_dir(d1, "model.safetensors")) &&
                                exists(in_dir(d1, "model.safetensors.index.json"))
                              : N == 0 && exists(in_dir(d1, "model.safetensors")) &&
                                !exists(in_dir(d1, "model.safetensors.index.json")),
                      "model %d sharded %d: %d shards", k, sharded, N);
                if (sharded) check_index(d1, limit);
                size_t cn = 0;
                unsigned char *cj = read_all(in_dir(d1, "config.json"), &cn);
                remat_config cc;
                CHECK(cj && remat_hf_config_parse(cj, cn, "config.json", &cc) == REMAT_OK && same_arch(&cc, &cfgs[k]),
                      "model %d: config.json holds the architecture: %s", k, remat_errmsg());
                CHECK(cj && strstr((char *)cj, dt ? "\"torch_dtype\": \"bfloat16\"" : "\"torch_dtype\": \"float32\"") &&
                      cn && cj[cn - 1] == '\n', "model %d: torch_dtype, a final newline", k);
                free(cj);
                remat_config shape;
                remat_weights_format fmt = REMAT_WEIGHTS_AUTO;
                memset(&shape, 0, sizeof shape);
                CHECK(remat_weights_probe(d1, &shape, &fmt) == REMAT_OK && fmt == REMAT_WEIGHTS_HF &&
                      same_arch(&shape, &cfgs[k]), "model %d: probe: %s", k, remat_errmsg());
                CHECK(remat_weights_load(d1, &base, 1, &r1) == REMAT_OK && r1 &&
                      (dt ? params_are_bf16_of(m, r1) : same_params(m, r1)) &&
                      same_arch(remat_model_config(r1), &cfgs[k]), "model %d dtype %d sharded %d: load: %s", k, dt,
                      sharded, remat_errmsg());
                if (!r1) continue;
                CHECK(remat_weights_save_hf(r1, d2, dtype, limit) == REMAT_OK, "save again: %s", remat_errmsg());
                int files = 0, same = 1;
                DIR *dd = opendir(d1);
                struct dirent *de;
                while (dd && (de = readdir(dd)))
                    if (de->d_name[0] != '.') { files++; same &= same_file(in_dir(d1, de->d_name), in_dir(d2, de->d_name)); }
                if (dd) closedir(dd);
                CHECK(same && files == (sharded ? N + 2 : 2), "model %d dtype %d sharded %d: the second export is the "
                      "first, file for file (%d files)", k, dt, sharded, files);
                CHECK(remat_weights_load(d2, &base, 1, &r2) == REMAT_OK && r2 && same_params(r1, r2),
                      "directory -> model -> directory -> model: %s", remat_errmsg());
                remat_model_free(r1);
                remat_model_free(r2);
            }
        remat_model_free(m);
    }
    /* a shard exactly full: ln_1's weight and bias (C = 32: 128 bytes each)
     * share a 256-byte shard, as huggingface_hub fills one up to the limit */
    {
        remat_model *g = make_model(&cfgs[0]);
        rm_tree(d1);
        CHECK(g && remat_weights_save_hf(g, d1, REMAT_DTYPE_FP32, 256) == REMAT_OK && check_index(d1, 256) > 0,
              "a 256-byte limit: %s", remat_errmsg());
        json_t *ix = json_load_file(in_dir(d1, "model.safetensors.index.json"), 0, NULL);
        json_t *map = json_object_get(ix, "weight_map");
        const char *a = json_string_value(json_object_get(map, "h.0.ln_1.weight")),
                   *b = json_string_value(json_object_get(map, "h.0.ln_1.bias")),
                   *q = json_string_value(json_object_get(map, "h.0.attn.c_attn.bias"));
        CHECK(a && b && q && !strcmp(a, b) && strcmp(a, q), "ln_1's weight and bias fill one shard exactly (%s, %s)",
              a ? a : "-", b ? b : "-");
        json_decref(ix);
        remat_model_free(g);
    }
    /* the default shard size is Hugging Face's 5 GB, decimal */
    CHECK(REMAT_HF_SHARD_BYTES == 5000000000ULL, "5 GB");

    /* exports over earlier ones */
    remat_model *m = make_model(&cfgs[1]), *r = NULL;
    if (!m) { CHECK(0, "create"); return; }
    const char *d = path_in("hf-again");
    rm_tree(d);
    write_all(path_in("hf-again-parent-file"), "x", 1);
    CHECK(remat_weights_save_hf(m, in_dir(path_in("hf-again-parent-file"), "d"), REMAT_DTYPE_FP32, 0) == REMAT_ERR_IO &&
          !strchr(remat_errmsg(), '\n'), "a directory under a file: %s", remat_errmsg());
    CHECK(remat_weights_save_hf(m, in_dir(d, "a/b"), REMAT_DTYPE_FP32, 0) == REMAT_OK &&
          exists(in_dir(d, "a/b/config.json")), "missing parents are made: %s", remat_errmsg());
    CHECK(remat_weights_save_hf(m, d, REMAT_DTYPE_FP32, 2500) == REMAT_OK, "sharded");
    int N1 = count_shards(d);
    write_all(in_dir(d, "README.md"), "mine", 4);
    CHECK(remat_weights_save_hf(m, d, REMAT_DTYPE_FP32, 0) == REMAT_OK && count_shards(d) == 0 &&
          !exists(in_dir(d, "model.safetensors.index.json")) && exists(in_dir(d, "model.safetensors")),
          "one file replaces the shards and the index (%d shards left)", count_shards(d));
    CHECK(remat_weights_save_hf(m, d, REMAT_DTYPE_FP32, 2500) == REMAT_OK && count_shards(d) == N1 &&
          !exists(in_dir(d, "model.safetensors")), "shards replace the one file");
    CHECK(remat_weights_save_hf(m, d, REMAT_DTYPE_FP32, 6000) == REMAT_OK && count_shards(d) < N1 &&
          check_index(d, 6000) > 0, "fewer shards replace more (%d, %d before)", count_shards(d), N1);
    CHECK(exists(in_dir(d, "README.md")), "other files stay");
    CHECK(remat_weights_load(d, &base, 1, &r) == REMAT_OK && r && same_params(m, r), "and it loads: %s", remat_errmsg());
    remat_model_free(r);
    CHECK(remat_weights_save_hf(m, d, (remat_dtype)7, 0) == REMAT_ERR_INVALID && remat_weights_save_hf(NULL, d, 0, 0) &&
          remat_weights_save_hf(m, NULL, 0, 0) == REMAT_ERR_INVALID, "bad arguments");
    CHECK(remat_weights_save_hf(m, d, REMAT_DTYPE_FP32, 1) == REMAT_OK && check_index(d, 1) > 0,
          "a 1-byte limit: a shard per tensor");
    CHECK(remat_weights_save_as(m, d, REMAT_WEIGHTS_HF, REMAT_DTYPE_BF16) == REMAT_OK &&
          exists(in_dir(d, "model.safetensors")) && count_shards(d) == 0, "remat_weights_save_as(HF)");
    remat_model_free(m);
    rm_tree(d);
    rm_tree(d1);
    rm_tree(d2);
    unlink(path_in("hf-again-parent-file"));
}

/* dir/config.json with key set to v (NULL: removed) */
static void config_set(const char *dir, const char *key, json_t *v)
{
    const char *p = in_dir(dir, "config.json");
    json_t *o = json_load_file(p, 0, NULL);
    if (v) json_object_set_new(o, key, v);
    else json_object_del(o, key);
    json_dump_file(o, p, JSON_INDENT(2));
    json_decref(o);
}

static void copy_dir(const char *src, const char *dst)
{
    rm_tree(dst);
    mkdir(dst, 0755);
    DIR *dd = opendir(src);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        if (de->d_name[0] == '.') continue;
        size_t n = 0;
        unsigned char *b = read_all(in_dir(src, de->d_name), &n);
        if (b) write_all(in_dir(dst, de->d_name), b, n);
        free(b);
    }
    if (dd) closedir(dd);
}

/* dir is refused with status want, in one line holding msg, by the load
 * and the probe alike */
static void expect_refused(const char *dir, remat_status want, const char *msg, const char *what)
{
    remat_config base, sh;
    remat_config_default(&base);
    base.seq = 8;
    remat_model *m = (remat_model *)&base;
    remat_status st = remat_weights_load(dir, &base, 1, &m);
    CHECK(st == want && !m && strstr(remat_errmsg(), msg) && !strchr(remat_errmsg(), '\n'),
          "%s: status %d, '%s' (want %d, '%s')", what, (int)st, remat_errmsg(), (int)want, msg);
    memset(&sh, 0, sizeof sh);
    st = remat_weights_probe(dir, &sh, NULL);
    CHECK(st == want && strstr(remat_errmsg(), msg), "%s: probe: status %d, '%s'", what, (int)st, remat_errmsg());
}

static int loads(const char *dir)
{
    remat_config base;
    remat_config_default(&base);
    base.seq = 8;
    remat_model *m = NULL;
    remat_status st = remat_weights_load(dir, &base, 1, &m);
    remat_model_free(m);
    return st == REMAT_OK;
}

/* dir's index with tensor moved to shard file (NULL: removed) */
static void index_set(const char *dir, const char *tensor, const char *file)
{
    const char *p = in_dir(dir, "model.safetensors.index.json");
    json_t *o = json_load_file(p, 0, NULL), *map = json_object_get(o, "weight_map");
    if (file) json_object_set_new(map, tensor, json_string(file));
    else json_object_del(map, tensor);
    json_dump_file(o, p, JSON_INDENT(2));
    json_decref(o);
}

/* a key of config.json set to a JSON value (NULL: removed), and the refusal */
typedef struct key_case { const char *key, *json, *msg; } key_case;

/* each case on a fresh copy of dir src in d */
static void config_cases(const char *src, const char *d, const key_case *kc, size_t n, const char *what)
{
    for (size_t k = 0; k < n; k++) {
        copy_dir(src, d);
        config_set(d, kc[k].key, kc[k].json ? json_loads(kc[k].json, JSON_DECODE_ANY, NULL) : NULL);
        char w[128];
        snprintf(w, sizeof w, "%s config.json %s = %s", what, kc[k].key, kc[k].json ? kc[k].json : "(absent)");
        expect_refused(d, REMAT_ERR_FORMAT, kc[k].msg, w);
    }
}

/* Every bad directory refused in one line that names the problem. */
static void test_hf_refusals(void)
{
    remat_config c, g;
    llama_config(&c, 0, 2, 6);   /* untied, KV < NH */
    small_config(&g);
    remat_model *m = make_model(&c), *mg = make_model(&g);
    const char *good = path_in("hf-good"), *gpt = path_in("hf-gpt2"), *d = path_in("hf-bad");
    rm_tree(good);
    rm_tree(gpt);
    CHECK(m && mg && remat_weights_save_hf(m, good, REMAT_DTYPE_FP32, 2500) == REMAT_OK &&
          remat_weights_save_hf(mg, gpt, REMAT_DTYPE_FP32, 0) == REMAT_OK && count_shards(good) >= 3 && loads(good) &&
          loads(gpt), "fixtures: %s", remat_errmsg());
    remat_model_free(m);
    remat_model_free(mg);
    char shard1[64], shard2[64];
    snprintf(shard1, sizeof shard1, "model-00001-of-%05d.safetensors", count_shards(good));
    snprintf(shard2, sizeof shard2, "model-00002-of-%05d.safetensors", count_shards(good));

    /* config.json */
    copy_dir(good, d);
    unlink(in_dir(d, "config.json"));
    expect_refused(d, REMAT_ERR_IO, "config.json", "no config.json");
    copy_dir(good, d);
    write_all(in_dir(d, "config.json"), "{\"model_type\": ", 15);
    expect_refused(d, REMAT_ERR_FORMAT, "config.json: malformed config.json", "config.json not JSON");
    static const key_case keys[] = {
        {"model_type", "\"mistral\"", "model_type 'mistral' is not one remat reads (gpt2, llama, mixtral, qwen3_moe, deepseek_v3)"},
        {"model_type", NULL, "no model_type"},
        {"model_type", "3", "model_type must be a string, got 3"},
        {"rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2.0}", "rope_scaling.rope_type linear is not supported"},
        {"rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}", "rope_type dynamic is not supported"},
        {"rope_scaling", "{\"type\": \"yarn\", \"factor\": 4.0}", "rope_type yarn is not supported"},
        {"rope_scaling", "{\"factor\": 4.0}", "rope_scaling.rope_type must be a string"},
        {"rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"high_freq_factor\": 4.0, "
                         "\"original_max_position_embeddings\": 8192}", "low_freq_factor must be given for llama3"},
        {"rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, \"high_freq_factor\": "
                         "1.0, \"original_max_position_embeddings\": 8192}", "llama3 rope scaling needs"},
        {"rope_scaling", "\"llama3\"", "rope_scaling must be an object or null"},
        {"rope_parameters", "{\"rope_type\": \"longrope\", \"rope_theta\": 10000.0}",
         "rope_parameters.rope_type longrope is not supported"},
        {"num_key_value_heads", "3", "heads 4 are not divisible by kv heads 3"},
        {"num_attention_heads", "\"4\"", "num_attention_heads must be a whole number in [1, 65536], got \"4\""},
        {"num_hidden_layers", "5000", "num_hidden_layers must be a whole number in [1, 4096], got 5000"},
        {"rms_norm_eps", "-1e-6", "rms_norm_eps must be a number in (0, 1]"},
        {"attention_bias", "true", "attention_bias true is not supported"},
        {"mlp_bias", "true", "mlp_bias true is not supported"},
        {"hidden_act", "\"gelu\"", "hidden_act gelu is not supported"},
        {"hidden_act", "\"gelu\\ntanh\"", "hidden_act gelu?tanh is not supported"},
        {"tie_word_embeddings", "1", "tie_word_embeddings must be true or false, got 1"},
        {"num_hidden_layers", "3", "missing tensor model.layers.2.input_layernorm.weight"},
        {"num_hidden_layers", "1", "is in block 1, but the model has 1 blocks"},
        {"intermediate_size", "41", "tensor model.layers.0.mlp.gate_proj.weight has shape [40, 32], expected [41, 32]"},
        {"head_dim", "4", "__metadata__ (n_head 4, n_kv_head 2, head_dim 6) contradicts the model's 4 heads, 2 "
                          "key/value heads and head size 4"},
        {"head_dim", "null", "contradicts the model's 4 heads, 2 key/value heads and head size 8"},
        {"vocab_size", "71", "has shape [70, 32], expected [71, 32]"},
        {"hidden_size", "30", "tensor model.embed_tokens.weight has shape [70, 32], expected [70, 30]"},
    };
    config_cases(good, d, keys, sizeof keys / sizeof keys[0], "llama");
    copy_dir(good, d);
    config_set(d, "hidden_size", json_integer(30));
    config_set(d, "head_dim", NULL);
    expect_refused(d, REMAT_ERR_FORMAT, "hidden_size 30 is not divisible by num_attention_heads 4 and head_dim is not "
                   "given", "hidden_size 30, no head_dim");
    static const key_case gkeys[] = {
        {"n_inner", "160", "n_inner 160 is not supported"},
        {"activation_function", "\"relu\"", "activation_function relu is not supported"},
        {"layer_norm_epsilon", "1e-6", "layer_norm_epsilon 1e-06 is not supported"},
        {"tie_word_embeddings", "false", "tie_word_embeddings false is not supported"},
        {"scale_attn_by_inverse_layer_idx", "true", "scale_attn_by_inverse_layer_idx true is not supported"},
        {"n_positions", "17", "wpe.weight has shape [16, 32], expected [17, 32]"},
        {"n_head", "3", "dim 32 is not divisible by heads 3"},
    };
    config_cases(gpt, d, gkeys, sizeof gkeys / sizeof gkeys[0], "gpt2");
    /* transformers' defaults: an untied Llama unless told; a tied config
     * reads an untied directory as transformers does, lm_head ignored */
    copy_dir(good, d);
    config_set(d, "tie_word_embeddings", NULL);
    CHECK(loads(d), "tie_word_embeddings absent: false, as LlamaConfig");
    config_set(d, "tie_word_embeddings", json_true());
    CHECK(loads(d), "tied config, lm_head.weight present: ignored");
    copy_dir(gpt, d);
    config_set(d, "n_inner", NULL);
    config_set(d, "activation_function", json_string("gelu_pytorch_tanh"));
    CHECK(loads(d), "gpt2: n_inner absent, gelu_pytorch_tanh (the same tanh GELU)");

    /* the weights files */
    copy_dir(good, d);
    unlink(in_dir(d, "model.safetensors.index.json"));
    expect_refused(d, REMAT_ERR_IO, "holds neither model.safetensors nor model.safetensors.index.json", "no weights");
    copy_dir(good, d);
    unlink(in_dir(d, shard2));
    expect_refused(d, REMAT_ERR_IO, "names shard model-00002-of-", "a shard missing");
    copy_dir(good, d);
    {   /* shard 1's tensors in shard 2 too */
        size_t n = 0;
        unsigned char *b = read_all(in_dir(d, shard1), &n);
        write_all(in_dir(d, shard2), b, n);
        free(b);
    }
    expect_refused(d, REMAT_ERR_FORMAT, "is in two files", "a tensor in two shards");
    copy_dir(good, d);
    write_all(in_dir(d, "model-00009-of-00099.safetensors"), "junk", 4);
    CHECK(loads(d), "a file the index does not name is not read");
    copy_dir(good, d);
    index_set(d, "model.norm.weight", shard1);
    expect_refused(d, REMAT_ERR_FORMAT, "tensor model.norm.weight is in", "the index puts a tensor in the wrong shard");
    copy_dir(good, d);
    index_set(d, "model.norm.weight", NULL);
    expect_refused(d, REMAT_ERR_FORMAT, "tensor model.norm.weight of", "a tensor the index does not list");
    copy_dir(good, d);
    index_set(d, "model.layers.7.mlp.up_proj.weight", shard1);
    expect_refused(d, REMAT_ERR_FORMAT, "missing tensor model.layers.7.mlp.up_proj.weight: the index puts it in",
                   "the index lists a tensor no shard holds");
    copy_dir(good, d);
    index_set(d, "model.norm.weight", "../hf-good/model.safetensors");
    expect_refused(d, REMAT_ERR_FORMAT, "a shard is named by a file name of the directory", "a shard outside");
    copy_dir(good, d);
    write_all(in_dir(d, "model.safetensors.index.json"), "{\"weight_map\": {}}", 18);
    expect_refused(d, REMAT_ERR_FORMAT, "non-empty \"weight_map\"", "an empty index");
    copy_dir(good, d);
    write_all(in_dir(d, "model.safetensors.index.json"), "{\"weight_map\": ", 15);
    expect_refused(d, REMAT_ERR_FORMAT, "malformed index", "an index that is not JSON");
    copy_dir(good, d);
    {
        size_t n = 0;
        unsigned char *b = read_all(in_dir(d, shard2), &n);
        write_all(in_dir(d, shard2), b, n - 4);
        free(b);
    }
    expect_refused(d, REMAT_ERR_FORMAT, shard2, "a truncated shard (named)");
    copy_dir(gpt, d);
    {   /* a missing tensor in the single file: rename it in the header */
        size_t n = 0, en;
        unsigned char *b = read_all(in_dir(d, "model.safetensors"), &n);
        unsigned char *e = b ? st_edit(b, n, "\"h.1.mlp.c_fc.bias\"", "\"h.1.attn.bias\"", NULL, 0, &en) : NULL;
        if (e) write_all(in_dir(d, "model.safetensors"), e, en);
        free(b);
        free(e);
    }
    expect_refused(d, REMAT_ERR_FORMAT, "missing tensor h.1.mlp.c_fc.bias", "a missing tensor");
    /* a hub cache snapshot: every file a symbolic link to a blob */
    rm_tree(d);
    mkdir(d, 0755);
    DIR *gd = opendir(good);
    struct dirent *ge;
    while (gd && (ge = readdir(gd)))
        if (ge->d_name[0] != '.') {
            char target[512];
            snprintf(target, sizeof target, "../hf-good/%s", ge->d_name);
            CHECK(symlink(target, in_dir(d, ge->d_name)) == 0, "symlink %s", ge->d_name);
        }
    if (gd) closedir(gd);
    CHECK(loads(d), "a directory of symbolic links (Hugging Face's cache) loads: %s", remat_errmsg());
    copy_dir(good, d);
    CHECK(loads(d), "the good one still loads");
    rm_tree(d);
    rm_tree(good);
    rm_tree(gpt);
}

/* config.json by itself: transformers' defaults, both rope spellings, and
 * an exact round trip of every number. */
static void test_hf_config(void)
{
    remat_config c;
    const char *t = "{\"model_type\": \"llama\"}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && c.arch == REMAT_ARCH_LLAMA &&
          c.vocab == 32000 && c.n_embd == 4096 && c.ffn_dim == 11008 && c.n_layer == 32 && c.n_head == 32 &&
          c.n_kv_head == 32 && c.head_dim == 128 && c.max_seq == 2048 && c.norm_eps == 1e-6 && c.rope_theta == 10000.0 &&
          !c.rope_scaling.type && !remat_config_tied(&c), "LlamaConfig's defaults: %s", remat_errmsg());
    t = "{\"model_type\": \"gpt2\"}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && c.arch == REMAT_ARCH_GPT2 &&
          c.vocab == 50257 && c.n_embd == 768 && c.n_layer == 12 && c.n_head == 12 && c.max_seq == 1024 &&
          remat_config_tied(&c) && remat_config_ffn_dim(&c) == 3072, "GPT2Config's defaults: %s", remat_errmsg());
    /* Llama 3.2 1B's config.json, as published */
    t = "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 128000, \"eos_token_id\": 128001, \"head_dim\": 64, \"hidden_act\": \"silu\", "
        "\"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
        "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", "
        "\"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, "
        "\"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, "
        "\"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
        "\"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", "
        "\"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true, \"vocab_size\": 128256}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && c.n_kv_head == 8 && c.head_dim == 64 &&
          c.max_seq == 131072 && c.rope_theta == 500000.0 && c.norm_eps == 1e-5 &&
          c.rope_scaling.type == REMAT_ROPE_LLAMA3 && c.rope_scaling.factor == 32.0 &&
          c.rope_scaling.low_freq_factor == 1.0 && c.rope_scaling.high_freq_factor == 4.0 &&
          c.rope_scaling.original_max_position == 8192 && remat_config_tied(&c), "Llama 3.2 1B: %s", remat_errmsg());
    /* the older "type", transformers 5's rope_parameters (with rope_theta), "default" */
    t = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"rope_scaling\": {\"type\": "
        "\"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
        "\"original_max_position_embeddings\": 64}}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && c.rope_scaling.type == REMAT_ROPE_LLAMA3 &&
          c.head_dim == 16, "rope_scaling's older key 'type': %s", remat_errmsg());
    t = "{\"model_type\": \"llama\", \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 250000.0, "
        "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && c.rope_scaling.type == REMAT_ROPE_LLAMA3 &&
          c.rope_theta == 250000.0, "rope_parameters: %s", remat_errmsg());
    t = "{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"default\"}, \"num_key_value_heads\": null, "
        "\"head_dim\": null}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_OK && !c.rope_scaling.type && c.n_kv_head == 32 &&
          c.head_dim == 128, "rope_type default, nulls: %s", remat_errmsg());
    t = "{\"model_type\": \"llama\", \"model_type\": \"gpt2\"}";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "duplicate"),
          "duplicate keys: %s", remat_errmsg());
    t = "[1]";
    CHECK(remat_hf_config_parse(t, strlen(t), "c.json", &c) == REMAT_ERR_FORMAT, "not an object");

    /* every number back exactly, with the fewest digits */
    remat_config r[3];
    llama_config(&r[0], 0, 2, 6);
    r[0].rope_theta = 123456.789;
    r[0].norm_eps = 0.1 + 0.2;   /* 0.30000000000000004: 17 digits */
    r[0].rope_scaling = (remat_rope_scaling){ REMAT_ROPE_LLAMA3, 10.0 / 3.0, 1e-3, 4.000000000000001, 8192 };
    llama_config(&r[1], 1, 1, 0);
    r[1].norm_eps = 1e-5;
    small_config(&r[2]);
    for (int k = 0; k < 3; k++) {
        char *txt = NULL;
        remat_config back;
        CHECK(remat_hf_config_dump(&r[k], REMAT_DTYPE_FP32, &txt) == REMAT_OK && txt &&
              remat_hf_config_parse(txt, strlen(txt), "c.json", &back) == REMAT_OK && same_arch(&back, &r[k]),
              "config %d: dump, parse: the same: %s", k, remat_errmsg());
        if (k == 1) CHECK(txt && strstr(txt, "\"rms_norm_eps\": 1e-5,") && strstr(txt, "\"rope_theta\": 10000.0,") &&
                          strstr(txt, "\"rope_scaling\": null"), "short numbers: %s", txt ? txt : "");
        if (k == 2) CHECK(txt && strstr(txt, "\"n_inner\": null") && strstr(txt, "\"layer_norm_epsilon\": 1e-5") &&
                          strstr(txt, "\"model_type\": \"gpt2\""), "gpt2 keys: %s", txt ? txt : "");
        free(txt);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/remat-test-weights-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    remat_set_threads(1);
    test_param_enum();
    test_round_trips();
    test_bf16_files();
    test_llmc_foreign_padding();
    test_safetensors_variants();
    test_files();
    test_stale_tmps();
    test_llama_files();
    test_hf_config();
    test_hf_dirs();
    test_hf_refusals();
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') unlink(path_in(de->d_name));
    if (d) closedir(d);
    rmdir(dir);
    return TEST_REPORT();
}
