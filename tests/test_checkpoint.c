/*
 * test_checkpoint.c -- training checkpoints (src/io/checkpoint.c): bitwise
 * save/load round trip and bit-identical continuation, every single-byte
 * change and every truncation of a small checkpoint refused, wrong magic and
 * version, absurd sizes refused without allocating them, fallback to the
 * previous good checkpoint, retention, data identity, stale temporary files,
 * the non-finite testing hook (parameters untouched), and the memory of a
 * resume (the file is streamed into the model, never held whole).
 *
 * Files go to a fresh mkdtemp directory under /tmp, removed at the end.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "remat.h"
#include "remat_testing.h"
#include "core/core.h"
#include "core/endian.h"
#include "engine/model.h"
#include "io/io.h"
#include "harness.h"

static char root[64];

static void path_in(char *out, size_t n, const char *sub, const char *name)
{
    snprintf(out, n, "%s/%s%s%s", root, sub, name ? "/" : "", name ? name : "");
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) { perror(path); exit(2); }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) { perror(path); exit(2); }
    fclose(f);
}

static int exists(const char *path) { struct stat sb; return stat(path, &sb) == 0; }

static remat_model *make_model(const remat_config *c, const char *policy)
{
    remat_model *m = NULL;
    if (remat_model_create(c, 42, &m)) { fprintf(stderr, "create: %s\n", remat_errmsg()); exit(2); }
    remat_optim o;
    remat_optim_default(&o);
    o.lr = 2e-3f; o.weight_decay = 0.05f; o.grad_clip = 0.5f;
    if (remat_model_set_optim(m, &o) || remat_model_set_policy(m, policy)) exit(2);
    return m;
}

/* a 1-layer, 8-wide model (B2 T4) on the embedded task */
static remat_model *tiny_model(remat_config *c, remat_data **d)
{
    remat_config_default(c);
    c->n_layer = 1; c->n_embd = 8; c->n_head = 2; c->vocab = 64; c->seq = 4; c->max_seq = 4; c->batch = 2;
    if (remat_data_open(NULL, c->vocab, d)) exit(2);
    return make_model(c, NULL);
}

/* n training steps on d. */
static void train(remat_model *m, remat_data *d, int n)
{
    const remat_config *c = remat_model_config(m);
    size_t N = (size_t)c->batch * c->seq;
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    for (int s = 0; s < n; s++) {
        float loss;
        if (remat_data_next(d, REMAT_SPLIT_TRAIN, c->batch, c->seq, in, tg) || remat_model_step(m, in, tg, 1, &loss)) {
            fprintf(stderr, "train: %s\n", remat_errmsg());
            exit(2);
        }
    }
    free(in);
    free(tg);
}

/* ---- round trip and exact continuation ------------------------------------------ */
static void test_round_trip(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 2; c.n_embd = 16; c.n_head = 2; c.vocab = 64; c.seq = 8; c.max_seq = 10; c.batch = 2;
    c.dropout = 0.1f;
    c.attention = REMAT_ATTENTION_FLASH;
    c.lmhead_chunk = 5;
    remat_model *m = make_model(&c, "full,selective");
    remat_data *d = NULL;
    CHECK(!remat_data_open(NULL, c.vocab, &d), "open embedded: %s", remat_errmsg());
    train(m, d, 3);
    char dir[128];
    path_in(dir, sizeof dir, "rt", NULL);
    CHECK(!remat_checkpoint_save(m, d, NULL, 3, dir), "save: %s", remat_errmsg());

    remat_model *m2 = NULL;
    remat_data *d2 = NULL;
    remat_checkpoint_info *ci = calloc(1, sizeof *ci);
    remat_status st = remat_checkpoint_load(dir, NULL, &m2, &d2, ci);
    CHECK(st == REMAT_OK, "load: %s", remat_errmsg());
    if (st) { free(ci); remat_model_free(m); remat_data_free(d); return; }
    size_t bytes = m->nparams * sizeof(float);
    CHECK(m2->nparams == m->nparams && !memcmp(m2->params, m->params, bytes), "params differ after load");
    CHECK(!memcmp(m2->adam_m, m->adam_m, bytes), "AdamW m differs after load");
    CHECK(!memcmp(m2->adam_v, m->adam_v, bytes), "AdamW v differs after load");
    CHECK(m2->t == 3 && ci->opt_steps == 3 && ci->step == 3, "t %llu", (unsigned long long)m2->t);
    CHECK(m2->seed == 42 && ci->seed == 42, "seed");
    CHECK(!memcmp(&m2->cfg, &m->cfg, sizeof c), "config differs");
    CHECK(!memcmp(&m2->opt, &m->opt, sizeof m->opt), "optimizer settings differ");
    CHECK(!strcmp(remat_schedule_policy(remat_model_schedule(m2)), remat_schedule_policy(remat_model_schedule(m))),
          "policy %s", remat_schedule_policy(remat_model_schedule(m2)));
    for (int k = 0; k < 2; k++)
        CHECK(remat_data_position(d2, k) == remat_data_position(d, k) && ci->data_pos[k] == remat_data_position(d, k),
              "data position %d", k);
    CHECK(ci->data[0] == 0 && ci->warning[0] == 0, "embedded data, no warning: '%s' '%s'", ci->data, ci->warning);
    CHECK(strstr(ci->file, "ckpt-00000003.bin") != NULL, "file %s", ci->file);
    /* continuing both gives the same bits (dropout keys come from seed and t) */
    train(m, d, 3);
    train(m2, d2, 3);
    CHECK(remat_model_params_hash(m) == remat_model_params_hash(m2), "continuation differs after a round trip");
    CHECK(!memcmp(m2->adam_v, m->adam_v, bytes), "AdamW v differs after continuing");

    /* allocation failures at every allocation of a save and of a load: a clean status, outputs NULL */
    int nomem = 0, bad = 0;
    for (uint64_t k = 1; k < 200; k++) {
        remat_mem_fail_at(k);
        st = remat_checkpoint_save(m, d, NULL, 6, dir);
        remat_mem_fail_at(0);
        if (st == REMAT_ERR_NOMEM) { nomem++; continue; }
        if (st != REMAT_OK) bad++;
        break;
    }
    for (uint64_t k = 1; k < 200; k++) {
        remat_model *m3 = NULL;
        remat_data *d3 = NULL;
        remat_mem_fail_at(k);
        st = remat_checkpoint_load(dir, NULL, &m3, &d3, ci);
        remat_mem_fail_at(0);
        if (st == REMAT_ERR_NOMEM && !m3 && !d3) { nomem++; continue; }
        if (st != REMAT_OK || !m3 || !d3 || remat_model_params_hash(m3) != remat_model_params_hash(m)) bad++;
        remat_model_free(m3);
        remat_data_free(d3);
        break;
    }
    CHECK(bad == 0 && nomem >= 3, "allocation failures in save/load: %d bad outcomes, %d clean NOMEMs", bad, nomem);

    /* info only (no model, no data) */
    remat_checkpoint_info *c2 = calloc(1, sizeof *c2);
    CHECK(!remat_checkpoint_load(dir, "/no/such/file", NULL, NULL, c2) && c2->step == 6, "info-only load");
    /* other data is refused */
    remat_data *d3 = NULL;
    st = remat_checkpoint_load(dir, "/etc/hostname", NULL, &d3, c2);
    CHECK(st == REMAT_ERR_INVALID && !d3 && strstr(remat_errmsg(), "embedded"), "other data: %d %s", st,
          remat_errmsg());
    free(c2);
    free(ci);
    remat_model_free(m); remat_model_free(m2);
    remat_data_free(d); remat_data_free(d2);
}

/* A tiny checkpoint (L=1, C=4, V=2: 516 parameters, about 6 KiB) in memory. */
static unsigned char *tiny_checkpoint(size_t *n, const char *sub)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1; c.n_embd = 4; c.n_head = 1; c.vocab = 2; c.seq = 2; c.max_seq = 2; c.batch = 1;
    remat_model *m = make_model(&c, NULL);
    /* V = 2 needs token ids 0/1: a tiny llm.c shard (the data path also fills the string field) */
    unsigned char shard[1024 + 2 * 40];
    memset(shard, 0, sizeof shard);
    int hdr[3] = { 20240520, 1, 40 };
    for (int k = 0; k < 3; k++) remat_put_le32(shard + 4 * k, (uint32_t)hdr[k]);
    for (int i = 0; i < 40; i++) shard[1024 + 2 * i] = (unsigned char)(i % 3 == 0);
    char sp[128], dir[128], f[160];
    path_in(sp, sizeof sp, "tiny.bin", NULL);
    spit(sp, shard, sizeof shard);
    remat_data *d = NULL;
    if (remat_data_open(sp, c.vocab, &d)) { fprintf(stderr, "shard: %s\n", remat_errmsg()); exit(2); }
    train(m, d, 2);
    path_in(dir, sizeof dir, sub, NULL);
    if (remat_checkpoint_save(m, d, sp, 2, dir)) { fprintf(stderr, "save: %s\n", remat_errmsg()); exit(2); }
    snprintf(f, sizeof f, "%s/ckpt-00000002.bin", dir);
    remat_model_free(m);
    remat_data_free(d);
    return slurp(f, n);
}

/* ---- every byte flip, every truncation, magic, version, absurd sizes ----------- */
static void test_corruption(void)
{
    size_t n;
    unsigned char *b = tiny_checkpoint(&n, "tiny");
    remat_ckpt_view v;
    CHECK(!remat_checkpoint_parse(b, n, 0, &v), "tiny parses: %s", remat_errmsg());
    CHECK(v.nparams == 516 && n == 256 + ((strlen(v.info.data) + 7) & ~(size_t)7) + 12 * 516 + 8,
          "tiny layout: %zu bytes, %llu params", n, (unsigned long long)v.nparams);
    CHECK(remat_checkpoint_checksum(b, n) == remat_hash_bytes(b, n - 8) || b[0] != 'R',
          "checksum is remat_hash_bytes of the body (little-endian host)");
    int missed = 0, missed_bit = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char o = b[i];
        b[i] = (unsigned char)(o ^ 0xff);
        if (remat_checkpoint_parse(b, n, 0, &v) != REMAT_ERR_FORMAT) missed++;
        b[i] = (unsigned char)(o ^ (1u << (i % 8)));
        if (remat_checkpoint_parse(b, n, 0, &v) != REMAT_ERR_FORMAT) missed_bit++;
        b[i] = o;
    }
    CHECK(missed == 0 && missed_bit == 0, "%d byte flips and %d bit flips of %zu bytes went undetected", missed,
          missed_bit, n);
    int trunc_missed = 0;
    for (size_t len = 0; len < n; len++)
        if (remat_checkpoint_parse(b, len, 0, &v) == REMAT_OK) trunc_missed++;
    CHECK(trunc_missed == 0, "%d truncations accepted", trunc_missed);
    unsigned char *big = malloc(n + 1);
    memcpy(big, b, n);
    big[n] = 0;
    CHECK(remat_checkpoint_parse(big, n + 1, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "trailing"),
          "trailing byte: %s", remat_errmsg());
    free(big);
    CHECK(remat_checkpoint_parse(b, 200, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "truncated"),
          "short: %s", remat_errmsg());
    CHECK(remat_checkpoint_parse(b, n - 100, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "truncated"),
          "truncated: %s", remat_errmsg());
    CHECK(remat_checkpoint_parse(NULL, 0, 0, &v) == REMAT_ERR_FORMAT, "empty");

    unsigned char *w = malloc(n);
    /* each edit is resealed, so the field checks (not the checksum) must catch it */
#define EDIT(off, bytes, len, expect_st, needle) do {                                               \
        memcpy(w, b, n);                                                                            \
        memcpy(w + (off), (bytes), (len));                                                          \
        remat_checkpoint_seal(w, n);                                                                \
        remat_status st_ = remat_checkpoint_parse(w, n, 0, &v);                                     \
        CHECK(st_ == (expect_st) && strstr(remat_errmsg(), needle), "edit at %d: status %d, '%s'",  \
              (int)(off), st_, remat_errmsg());                                                     \
    } while (0)
    EDIT(0, "REMATCKQ", 8, REMAT_ERR_FORMAT, "not a remat checkpoint");
    EDIT(8, "\x05\0\0\0", 4, REMAT_ERR_FORMAT, "version 5");
    /* version 1 had no data hash: its byte 168 is reserved */
    EDIT(8, "\x01\0\0\0", 4, REMAT_ERR_FORMAT, "reserved header byte 168");
    {   /* a version 1 file (no hash) still loads, with data_hash 0 */
        memcpy(w, b, n);
        memcpy(w + 8, "\x01\0\0\0", 4);
        memset(w + 168, 0, 8);
        remat_checkpoint_seal(w, n);
        CHECK(remat_checkpoint_parse(w, n, 0, &v) == REMAT_OK && v.info.data_hash == 0, "version 1: %s",
              remat_errmsg());
        CHECK(remat_checkpoint_parse(b, n, 0, &v) == REMAT_OK && v.info.data_hash != 0, "version 4 has the hash");
        /* version 3 had no architecture record: its bytes 200..203 are reserved */
        memcpy(w, b, n);
        memcpy(w + 8, "\x03\0\0\0", 4);
        remat_checkpoint_seal(w, n);
        CHECK(remat_checkpoint_parse(w, n, 0, &v) == REMAT_OK, "a version 3 file (gpt2) still loads: %s", remat_errmsg());
        w[200] = 72;
        remat_checkpoint_seal(w, n);
        CHECK(remat_checkpoint_parse(w, n, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "reserved header byte 200"),
              "version 3 with an architecture record: %s", remat_errmsg());
        /* version 2 had no dtype: its bytes 164..167 are reserved */
        memcpy(w, b, n);
        memcpy(w + 8, "\x02\0\0\0", 4);
        w[164] = 1;
        remat_checkpoint_seal(w, n);
        CHECK(remat_checkpoint_parse(w, n, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "reserved header byte 164"),
              "version 2 with a dtype: %s", remat_errmsg());
        EDIT(164, "\x07", 1, REMAT_ERR_FORMAT, "dtype must be fp32 or bf16");
        EDIT(166, "\x01", 1, REMAT_ERR_FORMAT, "dtype must be fp32 or bf16");
        EDIT(176, "\x01", 1, REMAT_ERR_FORMAT, "framework 1");           /* a planning-only table */
        EDIT(180, "\x01", 1, REMAT_ERR_FORMAT, "tensor, sequence and pipeline parallelism");   /* tp 2 */
    }
    /* the micro-batch must divide the batch; a validation path needs a data
     * path and must fit the file */
    EDIT(192, "\xff\xff\0\0", 4, REMAT_ERR_FORMAT, "micro-batch 65535");
    EDIT(196, "\x10\0\0\0", 4, REMAT_ERR_FORMAT, "header sizes disagree");
    EDIT(12, "\x00\x02\0\0", 4, REMAT_ERR_FORMAT, "header size");
    /* n_layer 4096, n_embd 65536: a config whose sizes overflow */
    EDIT(56, "\x00\x10\0\0\x00\x00\x01\x00", 8, REMAT_ERR_RANGE, "config");
    /* heads that do not divide dim */
    EDIT(64, "\x03\0\0\0", 4, REMAT_ERR_FORMAT, "config");
    /* nparams 2^62: the size computation overflows */
    EDIT(48, "\0\0\0\0\0\0\0\x40", 8, REMAT_ERR_FORMAT, "header sizes disagree");
    /* nparams one more (and file bytes to match): the config disagrees */
    {
        unsigned char e[16];
        uint64_t np = 517, fb = n + 12;
        remat_put_le64(e, fb);
        remat_put_le64(e + 8, np);
        memcpy(w, b, n);
        memcpy(w + 16, e, 8);
        memcpy(w + 48, e + 8, 8);
        CHECK(remat_checkpoint_parse(w, n, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), "truncated"),
              "nparams+1: %s", remat_errmsg());
    }
    EDIT(148, "\xff\xff\xff\xff", 4, REMAT_ERR_FORMAT, "data path");
    EDIT(144, "\x07\0\0\0", 4, REMAT_ERR_FORMAT, "data kind");
    EDIT(128, "\xff\xff\0\0\0\0\0\0", 8, REMAT_ERR_FORMAT, "position");
    EDIT(32, "\x09\0\0\0\0\0\0\0", 8, REMAT_ERR_FORMAT, "step counts");
    EDIT(88, "\0\0\x80\x7f", 4, REMAT_ERR_FORMAT, "optimizer");          /* lr = inf */
    EDIT(200, "\x01", 1, REMAT_ERR_FORMAT, "architecture record");
    EDIT(204, "\x01", 1, REMAT_ERR_FORMAT, "reserved");
    EDIT(256, "\0", 1, REMAT_ERR_FORMAT, "NUL");                         /* inside the data path */
    EDIT(n - 8 - 4, "\0\0\xc0\x7f", 4, REMAT_ERR_FORMAT, "AdamW v");     /* last v = NaN */
    EDIT(n - 8 - 4, "\0\0\x80\xbf", 4, REMAT_ERR_FORMAT, "non-negative"); /* last v = -1 */
#undef EDIT
    /* without the checksum, random edits are still refused or parsed safely */
    uint64_t r = 0x1234567;
    int accepted = 0;
    for (int k = 0; k < 20000; k++) {
        memcpy(w, b, n);
        for (int e = 0; e < 3; e++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            w[(r >> 33) % 256] = (unsigned char)(r >> 17);   /* the header */
        }
        if (!remat_checkpoint_parse(w, n, REMAT_CKPT_NO_CHECKSUM, &v)) accepted++;
    }
    CHECK(accepted < 20000, "random header edits: %d of 20000 accepted", accepted);

    /* through the loader: absurd dims in a small file are refused before any model allocation */
    char dir[128], f[200];
    path_in(dir, sizeof dir, "absurd", NULL);
    mkdir(dir, 0777);
    memcpy(w, b, n);
    const unsigned char huge[28] = { 48, 0, 0, 0, 0x40, 6, 0, 0, 25, 0, 0, 0, 0x51, 0xc4, 0, 0, 0, 4, 0, 0, 1, 0, 0, 0,
                                     0, 4, 0, 0 };   /* GPT-2 XL: L 48, C 1600, 25 heads, V 50257, T 1024 */
    memcpy(w + 56, huge, sizeof huge);
    {   /* nparams and file bytes consistent with the config: only the real length gives it away */
        remat_config xl;
        remat_config_default(&xl);
        xl.n_layer = 48; xl.n_embd = 1600; xl.n_head = 25; xl.vocab = 50257; xl.max_seq = 1024; xl.batch = 1;
        xl.seq = 1024;
        uint64_t np = remat_config_num_params(&xl), fb = 256 + ((uint64_t)(n - 256 - 8 - 12 * 516)) + 12 * np + 8;
        remat_put_le64(w + 16, fb);
        remat_put_le64(w + 48, np);
    }
    remat_checkpoint_seal(w, n);
    snprintf(f, sizeof f, "%s/ckpt-00000002.bin", dir);
    spit(f, w, n);
    uint64_t a0 = remat_mem_alloc_count();
    remat_model *m = NULL;
    remat_status st = remat_checkpoint_load(dir, NULL, &m, NULL, NULL);
    CHECK(st == REMAT_ERR_FORMAT && !m && strstr(remat_errmsg(), "no valid checkpoint"), "absurd dims: %d %s", st,
          remat_errmsg());
    CHECK(remat_mem_alloc_count() - a0 <= 3, "absurd dims: %llu allocations (listing, parse result, file buffer)",
          (unsigned long long)(remat_mem_alloc_count() - a0));
    free(w);
    free(b);
}

/* ---- fallback, retention, stale temporary files, refusals --------------------- */
static void test_directory(void)
{
    remat_config c;
    remat_data *d = NULL;
    remat_model *m = tiny_model(&c, &d);
    char dir[128], f[200], g[200];
    path_in(dir, sizeof dir, "ret", NULL);
    int count = -1;
    uint64_t newest = 99;
    CHECK(!remat_checkpoint_prepare(dir, &count, &newest) && count == 0 && newest == 0, "prepare a new dir");
    uint64_t h[7];
    for (int s = 1; s <= 5; s++) {
        train(m, d, 1);
        h[s] = remat_model_params_hash(m);
        CHECK(!remat_checkpoint_save(m, d, NULL, (uint64_t)s, dir), "save %d: %s", s, remat_errmsg());
    }
    snprintf(f, sizeof f, "%s/ckpt-00000004.bin", dir);
    snprintf(g, sizeof g, "%s/ckpt-00000005.bin", dir);
    CHECK(!remat_checkpoint_prepare(dir, &count, &newest) && count == 2 && newest == 5, "kept %d, newest %llu",
          count, (unsigned long long)newest);
    CHECK(exists(f) && exists(g), "the last two are kept");

    /* a kill between a save's rename and its pruning leaves a third file; a
     * resume that saves nothing more tidies it away */
    {
        char e[200];
        size_t ne;
        snprintf(e, sizeof e, "%s/ckpt-00000003.bin", dir);
        unsigned char *bf = slurp(f, &ne);
        spit(e, bf, ne);
        free(bf);
        remat_checkpoint_info *ti = calloc(1, sizeof *ti);
        CHECK(ti && !remat_checkpoint_load(dir, NULL, NULL, NULL, ti) && ti->step == 5, "info load");
        CHECK(!remat_checkpoint_tidy(dir, ti), "tidy: %s", remat_errmsg());
        CHECK(!exists(e) && exists(f) && exists(g), "tidy keeps the last two only");
        ti->step = 4;
        CHECK(remat_checkpoint_tidy(dir, ti) == REMAT_ERR_INVALID, "tidy refuses a file that is not the step's");
        CHECK(exists(f) && exists(g), "a refused tidy deletes nothing");
        free(ti);
    }

    /* newest corrupt: fall back with a warning */
    size_t n;
    unsigned char *b = slurp(g, &n);
    b[n / 2] ^= 0x40;
    spit(g, b, n);
    remat_model *m2 = NULL;
    remat_checkpoint_info *ci = calloc(1, sizeof *ci);
    remat_status st = remat_checkpoint_load(dir, NULL, &m2, NULL, ci);
    CHECK(st == REMAT_OK && ci->step == 4 && m2 && remat_model_params_hash(m2) == h[4], "fallback to 4: %d %s", st,
          remat_errmsg());
    CHECK(strstr(ci->warning, "ckpt-00000005.bin") && strstr(ci->warning, "checksum"), "warning: %s", ci->warning);
    remat_model_free(m2);
    /* a save replaces the corrupt one's role: keeps the new one and the newest valid older one */
    train(m, d, 1);
    h[6] = remat_model_params_hash(m);
    CHECK(!remat_checkpoint_save(m, d, NULL, 6, dir), "save 6");
    CHECK(exists(f) && !exists(g), "corrupt 5 removed, valid 4 kept");
    /* a file whose name disagrees with its step is not used */
    char x[200];
    snprintf(x, sizeof x, "%s/ckpt-00000009.bin", dir);
    unsigned char *b4 = slurp(f, &n);
    spit(x, b4, n);
    st = remat_checkpoint_load(dir, NULL, NULL, NULL, ci);
    CHECK(st == REMAT_OK && ci->step == 6 && strstr(ci->warning, "name says 9"), "renamed file: %s", ci->warning);
    unlink(x);
    /* a stale temporary file (dead writer) is ignored by load and removed by prepare/save */
    char x2[200];   /* in the shared writer's name, and in the older one */
    snprintf(x, sizeof x, "%s/ckpt-00000007.99999999.tmp", dir);
    snprintf(x2, sizeof x2, "%s/ckpt-00000007.bin.tmp.99999999", dir);
    spit(x, b4, n / 2);
    spit(x2, b4, n / 2);
    st = remat_checkpoint_load(dir, NULL, NULL, NULL, ci);
    CHECK(st == REMAT_OK && ci->step == 6 && !ci->warning[0], "stale tmp ignored");
    CHECK(!remat_checkpoint_prepare(dir, &count, NULL) && !exists(x) && !exists(x2) && count == 2,
          "stale tmps removed");
    /* every checkpoint corrupt */
    snprintf(g, sizeof g, "%s/ckpt-00000006.bin", dir);
    spit(g, b4, n - 1);
    b4[300] ^= 1;
    spit(f, b4, n);
    st = remat_checkpoint_load(dir, NULL, &m2, NULL, ci);
    CHECK(st == REMAT_ERR_FORMAT && !m2 && strstr(remat_errmsg(), "no valid checkpoint") &&
          strstr(remat_errmsg(), "truncated"), "all corrupt: %d %s", st, remat_errmsg());
    free(b4);
    free(b);
    /* no checkpoints, no directory, not a directory */
    char e[128];
    path_in(e, sizeof e, "emptydir", NULL);
    mkdir(e, 0777);
    CHECK(remat_checkpoint_load(e, NULL, NULL, NULL, NULL) == REMAT_ERR_IO && strstr(remat_errmsg(), "no checkpoint"),
          "empty dir: %s", remat_errmsg());
    path_in(e, sizeof e, "nodir", NULL);
    CHECK(remat_checkpoint_load(e, NULL, NULL, NULL, NULL) == REMAT_ERR_IO, "missing dir");
    path_in(e, sizeof e, "tiny.bin", NULL);   /* a file, not a directory */
    CHECK(remat_checkpoint_save(m, d, NULL, 6, e) == REMAT_ERR_IO && strstr(remat_errmsg(), "not a directory"),
          "save into a file: %s", remat_errmsg());
    CHECK(remat_checkpoint_prepare(e, NULL, NULL) == REMAT_ERR_IO, "prepare a file");
    path_in(e, sizeof e, "tiny.bin/sub", NULL);
    CHECK(remat_checkpoint_save(m, d, NULL, 6, e) == REMAT_ERR_IO && strstr(remat_errmsg(), "cannot create"),
          "save below a file: %s", remat_errmsg());
    CHECK(remat_checkpoint_save(m, d, NULL, 2, dir) == REMAT_ERR_INVALID, "step below the optimizer steps");
    free(ci);
    remat_model_free(m);
    remat_data_free(d);
}

/* ---- the memory of a resume, and corrupt parameters under the loader -------------- */

/* A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"), or -1. */
static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key));
    if (f) fclose(f);
    return v;
}

/* Resets the peak resident set size (VmHWM) to the current one (Linux >= 4.0). */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* A resume holds the model and a bounded buffer, not the file as well: the
 * model's allocator peaks at its state, and the process's resident memory
 * grows by about the model's state during the load (the file is 3/4 of the
 * state: holding it as well, as remat 0.1.0 did, shows). */
static void test_resume_memory(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 2; c.n_embd = 512; c.n_head = 8; c.vocab = 256; c.seq = c.max_seq = 16; c.batch = 1;
    remat_model *m = make_model(&c, NULL), *m2 = NULL;
    remat_data *d = NULL;
    if (remat_data_open(NULL, c.vocab, &d)) exit(2);
    char dir[128];
    path_in(dir, sizeof dir, "big", NULL);
    CHECK(!remat_checkpoint_save(m, d, NULL, 1, dir), "save: %s", remat_errmsg());
    uint64_t want = remat_model_params_hash(m);
    remat_model_free(m);
    remat_data_free(d);
    /* once to warm up (threads, the allocator's arenas), then measured */
    CHECK(!remat_checkpoint_load(dir, NULL, &m2, NULL, NULL), "load: %s", remat_errmsg());
    remat_model_free(m2);
    m2 = NULL;
    long rss0 = status_kib("VmRSS:");
    int can = reset_peak_rss() && rss0 > 0 && status_kib("VmHWM:") > 0;
    remat_status st = remat_checkpoint_load(dir, NULL, &m2, NULL, NULL);
    long hwm = status_kib("VmHWM:");
    CHECK(st == REMAT_OK && m2 && remat_model_params_hash(m2) == want, "load: %s", remat_errmsg());
    if (!m2) return;
    uint64_t state = m2->mem.live_total, slack = state / 8 + (16u << 20);
    CHECK(m2->mem.peak_total == state, "the model's allocator peaked at %llu bytes during the load, its state is %llu",
          (unsigned long long)m2->mem.peak_total, (unsigned long long)state);
    if (can) {
        uint64_t grew = hwm > rss0 ? (uint64_t)(hwm - rss0) * 1024 : 0;
        CHECK(grew <= state + slack, "resident memory grew by %llu bytes during the load; the model's state is %llu "
              "(allowed: state + %llu)", (unsigned long long)grew, (unsigned long long)state, (unsigned long long)slack);
        printf("resume: resident memory grew by %.1f MiB for a model state of %.1f MiB\n", grew / 1048576.0,
               state / 1048576.0);
    } else {
        TEST_SKIP("resume memory: the resident-memory check (cannot reset the peak RSS here: /proc/self/clear_refs)");
    }
    remat_model_free(m2);
}

/* A flipped byte in the parameters, or a NaN / negative AdamW v sealed
 * under a valid checksum: the loader refuses the file and falls back. */
static void test_corrupt_params(void)
{
    remat_config c;
    remat_data *d = NULL;
    remat_model *m = tiny_model(&c, &d), *m2 = NULL;
    char dir[128], f[200];
    path_in(dir, sizeof dir, "params", NULL);
    train(m, d, 1);
    uint64_t h1 = remat_model_params_hash(m);
    CHECK(!remat_checkpoint_save(m, d, NULL, 1, dir), "save 1");
    train(m, d, 1);
    CHECK(!remat_checkpoint_save(m, d, NULL, 2, dir), "save 2");
    snprintf(f, sizeof f, "%s/ckpt-00000002.bin", dir);
    size_t n;
    unsigned char *good = slurp(f, &n), *b = malloc(n);
    size_t np = m->nparams, params = n - 8 - 12 * np;   /* where the parameters start */
    remat_checkpoint_info *ci = calloc(1, sizeof *ci);
    static const struct { size_t off; int byte; float val; int seal; const char *why; } cases[] = {
        { 7 * 4 + 2, 0x10, 0, 0, "checksum" },                  /* a flipped byte in parameter 7 */
        { 0, 0, NAN, 1, "parameter 0 is nan" },                 /* sealed: only the float check sees it */
        { 4 * 5, 0, INFINITY, 1, "parameter 5 is inf" },
        { 4 * 3, 0, -1.0f, 1, "AdamW v 3 is -1" },              /* 8 * np bytes further, below */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(b, good, n);
        size_t at = params + cases[k].off + (k == 3 ? 8 * np : 0);
        if (cases[k].seal) {
            remat_put_lef32(b + at, cases[k].val);
            remat_checkpoint_seal(b, n);
        } else {
            b[at] ^= (unsigned char)cases[k].byte;
        }
        spit(f, b, n);
        remat_status st = remat_checkpoint_load(dir, NULL, &m2, NULL, ci);
        CHECK(st == REMAT_OK && m2 && ci->step == 1 && remat_model_params_hash(m2) == h1 &&
              strstr(ci->warning, "ckpt-00000002.bin") && strstr(ci->warning, cases[k].why),
              "case %zu: falls back to step 1 naming '%s': %d '%s'", k, cases[k].why, st, ci->warning);
        remat_model_free(m2);
        m2 = NULL;
        remat_ckpt_view v;
        CHECK(remat_checkpoint_parse(b, n, 0, &v) == REMAT_ERR_FORMAT && strstr(remat_errmsg(), cases[k].why),
              "case %zu: the in-memory parser says the same: %s", k, remat_errmsg());
    }
    free(ci);
    free(b);
    free(good);
    remat_model_free(m);
    remat_data_free(d);
}

/* ---- the non-finite hook ---------------------------------------------------------- */
static void test_poison(void)
{
    remat_config c;
    remat_data *d = NULL;
    remat_model *m = tiny_model(&c, &d);
    int in[8], tg[8];
    float loss;
    remat_data_next(d, REMAT_SPLIT_TRAIN, 2, 4, in, tg);
    uint64_t h0 = remat_model_params_hash(m);
    CHECK(!remat_model_debug_poison(m, remat_config_param_find(remat_model_config(m), "qkvw")), "poison qkvw");
    remat_status st = remat_model_step(m, in, tg, 1, &loss);
    CHECK(st == REMAT_ERR_NONFINITE && strstr(remat_model_error(m), "qkvw"), "gradient NaN: %d %s", st,
          remat_model_error(m));
    CHECK(remat_model_params_hash(m) == h0 && m->t == 0, "parameters and step untouched");
    CHECK(!remat_model_debug_poison(m, REMAT_POISON_LOSS), "poison loss");
    st = remat_model_step(m, in, tg, 1, &loss);
    CHECK(st == REMAT_ERR_NONFINITE && strstr(remat_model_error(m), "loss"), "loss NaN: %s", remat_model_error(m));
    CHECK(remat_model_params_hash(m) == h0 && m->t == 0, "parameters and step untouched (loss)");
    st = remat_model_step(m, in, tg, 1, &loss);
    CHECK(st == REMAT_OK && m->t == 1 && remat_model_params_hash(m) != h0, "one-shot: the next step trains");
    CHECK(remat_model_debug_poison(m, REMAT_POISON_LOSS + 1) == REMAT_ERR_INVALID &&
          remat_model_debug_poison(m, -1) == REMAT_ERR_INVALID &&
          remat_model_debug_poison(m, remat_config_param_count(remat_model_config(m))) == REMAT_ERR_INVALID &&
          remat_model_debug_poison(NULL, 0), "bad tensor");
    remat_model_free(m);
    remat_data_free(d);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/remat-ckpt-XXXXXX");
    if (!mkdtemp(root)) { perror("mkdtemp"); return 2; }
    remat_set_threads(1);   /* tiny models: threads only add contention */
    test_round_trip();
    test_corruption();
    test_directory();
    test_poison();
    test_resume_memory();
    test_corrupt_params();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return TEST_REPORT();
}
