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
    int shape[3];
    param_at(m, "wte", shape);
    memset(p + (size_t)c->vocab * c->n_embd, 0, (size_t)(shape[0] - c->vocab) * c->n_embd * sizeof *p);
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
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        size_t en;
        unsigned char *e = st_edit(f, n, bad[k].find, bad[k].repl, NULL, 0, &en);
        CHECK(e != NULL, "edit %zu applies", k);
        if (!e) continue;
        p = (float *)&en;
        remat_status st = remat_safetensors_parse(e, en, 0, &sh, &p);
        CHECK(st == REMAT_ERR_FORMAT && !p && strstr(remat_errmsg(), bad[k].msg) && !strchr(remat_errmsg(), '\n'),
              "corrupt %zu (%s -> %s): status %d, message '%s' (want '%s')", k, bad[k].find, bad[k].repl, (int)st,
              remat_errmsg(), bad[k].msg);
        free(p);
        free(e);
    }
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
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') unlink(path_in(de->d_name));
    if (d) closedir(d);
    rmdir(dir);
    return TEST_REPORT();
}
