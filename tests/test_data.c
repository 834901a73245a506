/*
 * test_data.c -- the data sources (src/data/data.c): the embedded arithmetic
 * task, byte text files and llm.c shards; the 90/10 split, batches with
 * wrap-around, seek/position, every rejection of a malformed file, and
 * allocation-failure injection on each open path.
 *
 * Files are written to a fresh mkdtemp directory under /tmp, removed at the
 * end.
 */
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "remat.h"
#include "core/core.h"
#include "core/endian.h"
#include "harness.h"

static char dir[64];
static char paths[32][128];
static int npaths;

/* Writes n bytes to dir/name; returns the path (valid until exit). */
static const char *write_file(const char *name, const void *bytes, size_t n)
{
    char *p = paths[npaths++];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(2); }
    if (n && fwrite(bytes, 1, n, f) != n) { perror(p); exit(2); }
    fclose(f);
    return p;
}

/* An llm.c shard of `have` tokens whose header says `claimed`, plus `extra`
 * trailing bytes. */
static const char *write_shard(const char *name, uint32_t magic, uint32_t version,
                               int32_t claimed, const uint16_t *tok, size_t have, size_t extra)
{
    size_t n = 1024 + 2 * have + extra;
    unsigned char *b = calloc(1, n);
    remat_put_le32(b, magic);
    remat_put_le32(b + 4, version);
    remat_put_le32(b + 8, (uint32_t)claimed);
    for (size_t i = 0; i < have; i++) remat_put_le16(b + 1024 + 2 * i, tok[i]);
    memset(b + 1024 + 2 * have, 0xab, extra);
    const char *p = write_file(name, b, n);
    free(b);
    return p;
}

/* The whole split, token by token, read with one B=1 batch from position 0
 * (inputs give tokens 0..n-2, the last target token n-1).  Restores the
 * split's position. */
static int *read_split(remat_data *d, int split)
{
    size_t n = remat_data_tokens(d, split);
    uint64_t saved = remat_data_position(d, split);
    int *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    remat_data_seek(d, split, 0);
    remat_status st = remat_data_next(d, split, 1, (int)(n - 1), in, tg);
    CHECK(st == REMAT_OK, "read_split: %s", remat_errmsg());
    in[n - 1] = tg[n - 2];
    free(tg);
    remat_data_seek(d, split, saved);
    return in;
}

/* Parses "a+b=c\n" lines covering all n tokens; returns the number of lines,
 * or -1 (and reports) at the first malformed line or wrong sum. */
static long check_arith(const int *t, size_t n, const char *what)
{
    long lines = 0;
    size_t i = 0;
    while (i < n) {
        long v[3] = {0, 0, 0};
        const char sep[3] = {'+', '=', '\n'};
        for (int k = 0; k < 3; k++) {
            size_t s = i;
            while (i < n && t[i] >= '0' && t[i] <= '9') v[k] = v[k] * 10 + (t[i++] - '0');
            int digits = (int)(i - s);
            int ok = digits >= 1 && digits <= (k == 2 ? 4 : 3) && (digits == 1 || t[s] != '0') &&
                     i < n && t[i] == sep[k];
            if (!ok) {
                CHECK(0, "%s: line %ld malformed at token %zu", what, lines, i);
                return -1;
            }
            i++;
        }
        if (v[0] > 999 || v[1] > 999 || v[0] + v[1] != v[2]) {
            CHECK(0, "%s: line %ld: %ld+%ld=%ld", what, lines, v[0], v[1], v[2]);
            return -1;
        }
        lines++;
    }
    return lines;
}

static void test_embedded(void)
{
    remat_data *d = NULL, *e = NULL;
    CHECK(remat_data_default_vocab(NULL) == 256, "default vocab of the embedded task");
    remat_status st = remat_data_open(NULL, 256, &d);
    CHECK(st == REMAT_OK && d, "open embedded: %s", remat_errmsg());
    if (!d) return;
    CHECK(remat_data_is_bytes(d) == 1, "embedded is bytes");
    size_t ntr = remat_data_tokens(d, REMAT_SPLIT_TRAIN), nva = remat_data_tokens(d, REMAT_SPLIT_VAL);
    CHECK(ntr >= (1u << 20) && ntr < (1u << 20) + 16, "train size %zu ~ 1 MiB", ntr);
    CHECK(nva >= (100u << 10) && nva < (100u << 10) + 16, "val size %zu ~ 100 KiB", nva);
    CHECK(remat_data_tokens(d, 2) == 0 && remat_data_tokens(NULL, 0) == 0, "bad split: 0 tokens");

    int *tr = read_split(d, REMAT_SPLIT_TRAIN), *va = read_split(d, REMAT_SPLIT_VAL);
    long ltr = check_arith(tr, ntr, "train"), lva = check_arith(va, nva, "val");
    CHECK(ltr > 70000 && lva > 7000, "line counts %ld %ld", ltr, lva);
    CHECK(memcmp(tr, va, 64 * sizeof *tr) != 0, "val differs from train");

    /* Pinned: the generator is pure integer arithmetic, so these are the
     * same on every machine.  A change here changes every embedded run. */
    unsigned char *bytes = malloc(ntr);
    for (size_t i = 0; i < ntr; i++) bytes[i] = (unsigned char)tr[i];
    uint64_t h = remat_hash_bytes(bytes, ntr);
    char first[32] = {0};
    for (int i = 0; i < 31 && tr[i] != '\n'; i++) first[i] = (char)tr[i];
    printf("embedded: train %zu bytes (%ld lines), val %zu bytes (%ld lines), "
           "first line \"%s\", train hash %016llx\n", ntr, ltr, nva, lva, first,
           (unsigned long long)h);
    CHECK(ntr == 1048578 && nva == 102412, "pinned sizes: %zu %zu", ntr, nva);
    CHECK(strcmp(first, "537+679=1216") == 0, "pinned first line \"%s\"", first);
    CHECK(h == 0x5a7e82fa6fd7f057ULL, "pinned train hash %016llx", (unsigned long long)h);
    /* the data hash (checkpoints record it) covers the buffer's slack too:
     * pinned, so that slack is never left undefined */
    CHECK(remat_data_hash(d) == 0x505bed862f99b9f0ULL, "pinned data hash %016llx",
          (unsigned long long)remat_data_hash(d));
    free(bytes);

    /* Determinism, the shift by one, and rows tiling the split. */
    st = remat_data_open(NULL, 256, &e);
    CHECK(st == REMAT_OK && e, "second open: %s", remat_errmsg());
    enum { B = 4, T = 64 };
    int in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    int same = 1, shifted = 1, tiled = 1, matches = 1;
    for (int step = 0; step < 5 && e; step++) {
        remat_data_next(d, REMAT_SPLIT_TRAIN, B, T, in1, tg1);
        remat_data_next(e, REMAT_SPLIT_TRAIN, B, T, in2, tg2);
        same &= !memcmp(in1, in2, sizeof in1) && !memcmp(tg1, tg2, sizeof tg1);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t + 1 < T; t++) shifted &= in1[b * T + t + 1] == tg1[b * T + t];
            if (b + 1 < B) tiled &= in1[(b + 1) * T] == tg1[b * T + T - 1];
            for (int t = 0; t < T; t++) {
                size_t p = ((size_t)(step * B + b) * T + t) % ntr;
                matches &= in1[b * T + t] == tr[p] && tg1[b * T + t] == tr[(p + 1) % ntr];
            }
        }
    }
    CHECK(same, "two opens give identical batches");
    CHECK(shifted, "targets are inputs shifted by one");
    CHECK(tiled, "row b+1 starts where row b's targets end");
    CHECK(matches, "batches are the split read sequentially");
    CHECK(remat_data_position(d, REMAT_SPLIT_TRAIN) == 5 * B * T, "position advanced by B*T per batch");

    /* Wrap-around at the end of the validation split. */
    st = remat_data_seek(d, REMAT_SPLIT_VAL, nva - 3);
    CHECK(st == REMAT_OK, "seek near the end: %s", remat_errmsg());
    int win[5], wtg[5];
    remat_data_next(d, REMAT_SPLIT_VAL, 1, 5, win, wtg);
    int want[6] = {va[nva - 3], va[nva - 2], va[nva - 1], va[0], va[1], va[2]};
    int wrap_ok = 1;
    for (int t = 0; t < 5; t++) wrap_ok &= win[t] == want[t] && wtg[t] == want[t + 1];
    CHECK(wrap_ok, "val batch wraps from the last token to the first");
    CHECK(remat_data_position(d, REMAT_SPLIT_VAL) == 2, "position after wrap: %llu",
          (unsigned long long)remat_data_position(d, REMAT_SPLIT_VAL));
    CHECK(remat_data_position(d, REMAT_SPLIT_TRAIN) == 5 * B * T, "val reads leave train alone");

    /* A vocabulary too small for '=' (61). */
    remat_data *x = (remat_data *)&st;
    st = remat_data_open(NULL, 50, &x);
    CHECK(st == REMAT_ERR_FORMAT && !x, "embedded with vocab 50: %d", (int)st);
    CHECK(strstr(remat_errmsg(), "--vocab") != NULL, "message suggests --vocab: %s", remat_errmsg());

    free(tr);
    free(va);
    remat_data_free(d);
    remat_data_free(e);
}

static void test_text(void)
{
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 7 + 3);
    const char *p = write_file("text.txt", buf, sizeof buf);
    CHECK(remat_data_default_vocab(p) == 256, "text default vocab");
    remat_data *d = NULL;
    remat_status st = remat_data_open(p, 256, &d);
    CHECK(st == REMAT_OK && d, "open text: %s", remat_errmsg());
    if (!d) return;
    CHECK(remat_data_is_bytes(d), "text is bytes");
    CHECK(remat_data_tokens(d, REMAT_SPLIT_TRAIN) == 900 && remat_data_tokens(d, REMAT_SPLIT_VAL) == 100,
          "90/10 split: %zu %zu", remat_data_tokens(d, 0), remat_data_tokens(d, 1));
    int *tr = read_split(d, REMAT_SPLIT_TRAIN), *va = read_split(d, REMAT_SPLIT_VAL);
    int ok = 1;
    for (int i = 0; i < 900; i++) ok &= tr[i] == buf[i];
    for (int i = 0; i < 100; i++) ok &= va[i] == buf[900 + i];
    CHECK(ok, "text bytes round trip through both splits");

    /* T longer than the split: wraps several times. */
    int in[350], tg[350];
    st = remat_data_next(d, REMAT_SPLIT_VAL, 1, 350, in, tg);
    CHECK(st == REMAT_OK, "T > split length: %s", remat_errmsg());
    ok = 1;
    for (int t = 0; t < 350; t++) ok &= in[t] == buf[900 + t % 100] && tg[t] == buf[900 + (t + 1) % 100];
    CHECK(ok, "T > split length wraps modulo the split");
    CHECK(remat_data_position(d, REMAT_SPLIT_VAL) == 50, "position after T=350 on 100: %llu",
          (unsigned long long)remat_data_position(d, REMAT_SPLIT_VAL));

    /* seek / position round trip, and rejections. */
    st = remat_data_seek(d, REMAT_SPLIT_TRAIN, 123);
    CHECK(st == REMAT_OK && remat_data_position(d, REMAT_SPLIT_TRAIN) == 123, "seek 123");
    int in2[2 * 8], tg2[2 * 8];
    remat_data_next(d, REMAT_SPLIT_TRAIN, 2, 8, in2, tg2);
    CHECK(in2[0] == buf[123] && in2[8] == buf[131] && tg2[15] == buf[139], "batch after seek");
    CHECK(remat_data_position(d, REMAT_SPLIT_TRAIN) == 139, "position after seek + batch");
    st = remat_data_seek(d, REMAT_SPLIT_TRAIN, 900);
    CHECK(st == REMAT_ERR_RANGE, "seek to the split length: %d", (int)st);
    st = remat_data_seek(d, REMAT_SPLIT_VAL, 100);
    CHECK(st == REMAT_ERR_RANGE, "seek past val: %d", (int)st);
    CHECK(remat_data_seek(d, 2, 0) == REMAT_ERR_INVALID, "seek bad split");
    CHECK(remat_data_position(d, REMAT_SPLIT_TRAIN) == 139, "failed seek leaves the position");
    CHECK(remat_data_seek(d, REMAT_SPLIT_TRAIN, 899) == REMAT_OK, "seek to the last token");
    CHECK(remat_data_next(d, 0, 0, 8, in2, tg2) == REMAT_ERR_INVALID, "B = 0 rejected");
    CHECK(remat_data_next(d, 0, 1, 0, in2, tg2) == REMAT_ERR_INVALID, "T = 0 rejected");
    CHECK(remat_data_next(d, 2, 1, 8, in2, tg2) == REMAT_ERR_INVALID, "split 2 rejected");
    CHECK(remat_data_next(d, 0, 1, 8, NULL, tg2) == REMAT_ERR_INVALID, "NULL inputs rejected");
    CHECK(remat_data_next(NULL, 0, 1, 8, in2, tg2) == REMAT_ERR_INVALID, "NULL data rejected");
    free(tr);
    free(va);
    remat_data_free(d);

    /* Bytes at or above a small vocabulary. */
    remat_data *x = (remat_data *)&st;
    st = remat_data_open(p, 100, &x);
    CHECK(st == REMAT_ERR_FORMAT && !x, "text with vocab 100: %d", (int)st);
    /* buf[i] = 7i + 3: byte 14 (101) is the first >= 100. */
    CHECK(strstr(remat_errmsg(), "byte 14 is 101") && strstr(remat_errmsg(), "--vocab 256"),
          "message names byte 14 and --vocab 256: %s", remat_errmsg());

    /* Too small to split: 0, 1, 3 bytes; 4 is the minimum (2 + 2). */
    const char *e0 = write_file("empty.txt", "", 0);
    const char *e1 = write_file("one.txt", "x", 1);
    const char *e3 = write_file("three.txt", "abc", 3);
    const char *e4 = write_file("four.txt", "abcd", 4);
    x = (remat_data *)&st;
    CHECK(remat_data_open(e0, 256, &x) == REMAT_ERR_FORMAT && !x, "empty file rejected");
    CHECK(strstr(remat_errmsg(), "empty") != NULL, "empty message: %s", remat_errmsg());
    CHECK(remat_data_open(e1, 256, &x) == REMAT_ERR_FORMAT && !x, "1-byte file rejected");
    CHECK(remat_data_open(e3, 256, &x) == REMAT_ERR_FORMAT && !x, "3-byte file rejected");
    CHECK(strstr(remat_errmsg(), "too few") != NULL, "3-byte message: %s", remat_errmsg());
    CHECK(remat_data_open(e4, 256, &x) == REMAT_OK && x, "4-byte file: %s", remat_errmsg());
    CHECK(remat_data_tokens(x, 0) == 2 && remat_data_tokens(x, 1) == 2, "4 bytes split 2/2");
    if (x) {
        int i4[3], t4[3];
        remat_data_seek(x, REMAT_SPLIT_VAL, 1);
        remat_data_next(x, REMAT_SPLIT_VAL, 1, 3, i4, t4);
        CHECK(i4[0] == 'd' && i4[1] == 'c' && i4[2] == 'd' && t4[2] == 'c', "2-token split wraps");
    }
    remat_data_free(x);
}

static void test_shard(void)
{
    uint16_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (uint16_t)((i * 12345u + 7) % 50257u);
    const char *p = write_shard("good.bin", 20240520, 1, 40, tok, 40, 0);
    CHECK(remat_data_default_vocab(p) == 50257, "shard default vocab");
    remat_data *d = NULL;
    remat_status st = remat_data_open(p, 50257, &d);
    CHECK(st == REMAT_OK && d, "open shard: %s", remat_errmsg());
    if (d) {
        CHECK(!remat_data_is_bytes(d), "shard is not bytes");
        CHECK(remat_data_tokens(d, 0) == 36 && remat_data_tokens(d, 1) == 4, "shard split 36/4");
        int *tr = read_split(d, 0), *va = read_split(d, 1);
        int ok = 1;
        for (int i = 0; i < 36; i++) ok &= tr[i] == tok[i];
        for (int i = 0; i < 4; i++) ok &= va[i] == tok[36 + i];
        CHECK(ok, "shard tokens read back exactly");
        free(tr);
        free(va);
        remat_data_free(d);
    }

    remat_data *x = (remat_data *)&st;
#define REJECT(path, vocab, code, needle, what) do {                                  \
        x = (remat_data *)&st;                                                          \
        st = remat_data_open(path, vocab, &x);                                          \
        CHECK(st == (code) && !x, "%s: status %d (%s)", what, (int)st, remat_errmsg());  \
        CHECK(strstr(remat_errmsg(), needle) != NULL, "%s: message lacks \"%s\": %s",  \
              what, needle, remat_errmsg());                                           \
    } while (0)

    REJECT(write_shard("v2.bin", 20240520, 2, 40, tok, 40, 0), 50257, REMAT_ERR_FORMAT,
           "version 2", "version 2");
    REJECT(write_shard("badmagic.bin", 20240521, 1, 40, tok, 40, 0), 50257, REMAT_ERR_FORMAT,
           "magic 20240521", "bad magic");
    /* Header says 40 tokens, the file holds 30: expected 1024 + 80 = 1104. */
    REJECT(write_shard("trunc.bin", 20240520, 1, 40, tok, 30, 0), 50257, REMAT_ERR_FORMAT,
           "expected 1104", "truncated shard");
    CHECK(strstr(remat_errmsg(), "1084") && strstr(remat_errmsg(), "truncated"),
          "truncated message has the actual size: %s", remat_errmsg());
    REJECT(write_shard("trail.bin", 20240520, 1, 40, tok, 40, 3), 50257, REMAT_ERR_FORMAT,
           "trailing", "trailing bytes");
    REJECT(write_shard("one.bin", 20240520, 1, 1, tok, 1, 0), 50257, REMAT_ERR_FORMAT,
           "claims 1 tokens", "1-token shard");
    REJECT(write_shard("neg.bin", 20240520, 1, -5, tok, 0, 0), 50257, REMAT_ERR_FORMAT,
           "claims -5", "negative count");
    REJECT(write_shard("three.bin", 20240520, 1, 3, tok, 3, 0), 50257, REMAT_ERR_FORMAT,
           "too few", "3-token shard");
    unsigned char hdr[100] = {0};
    remat_put_le32(hdr, 20240520);
    remat_put_le32(hdr + 4, 1);
    REJECT(write_file("short.bin", hdr, sizeof hdr), 50257, REMAT_ERR_FORMAT, "header",
           "header shorter than 1024");
    /* Two tokens >= 500: the message names the first (index 17) and a
     * vocabulary that holds the largest (4000). */
    uint16_t small[40];
    for (int i = 0; i < 40; i++) small[i] = (uint16_t)(i % 50);
    small[17] = 777;
    small[30] = 4000;
    REJECT(write_shard("big.bin", 20240520, 1, 40, small, 40, 0), 500, REMAT_ERR_FORMAT,
           "token 17 is 777", "token >= vocab");
    CHECK(strstr(remat_errmsg(), "--vocab 4001") && strstr(remat_errmsg(), "vocabulary 500"),
          "message suggests a vocab that holds every token: %s", remat_errmsg());

    /* Files, paths and arguments. */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no-such-file.bin", dir);
    REJECT(missing, 256, REMAT_ERR_IO, "no-such-file.bin", "missing file");
    CHECK(strstr(remat_errmsg(), "No such file") != NULL, "strerror in message: %s", remat_errmsg());
    CHECK(remat_data_default_vocab(missing) == 256, "default vocab of an unreadable file");
    REJECT(dir, 256, REMAT_ERR_IO, "not a regular file", "a directory");
    REJECT(p, 1, REMAT_ERR_INVALID, "at least 2", "vocab 1 (shard)");
    REJECT(NULL, 0, REMAT_ERR_INVALID, "at least 2", "vocab 0 (embedded)");
    CHECK(remat_data_open(NULL, 256, NULL) == REMAT_ERR_INVALID, "NULL out");
    remat_data_free(NULL);
#undef REJECT
}

/* Every allocation of every open path fails once: NOMEM, *out NULL, nothing
 * leaked (AddressSanitizer's leak check). */
static void test_alloc_failures(void)
{
    const char *text = write_file("fi.txt", "hello, world\n", 13);
    uint16_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char *shard = write_shard("fi.bin", 20240520, 1, 8, tok, 8, 0);
    const char *srcs[3] = {NULL, text, shard};
    for (int s = 0; s < 3; s++) {
        int k, tried = 0;
        for (k = 1; k < 10; k++) {
            remat_data *d = (remat_data *)&k;
            remat_mem_fail_at((uint64_t)k);
            remat_status st = remat_data_open(srcs[s], 256, &d);
            remat_mem_fail_at(0);
            if (st == REMAT_OK) { remat_data_free(d); break; }
            tried++;
            CHECK(st == REMAT_ERR_NOMEM && !d, "source %d, failing allocation %d: %d (%s)", s, k,
                  (int)st, remat_errmsg());
        }
        CHECK(tried == 2, "source %d: 2 allocations each made to fail (got %d)", s, tried);
    }
}

/* A glob of shards is one stream (sorted, split 90/10 as a whole), a
 * validation set is not split off; every allocation of opening both fails
 * in turn: NOMEM, no handle, nothing leaked. */
static void test_streams(void)
{
    uint16_t a[40], b[30], v[12];
    for (int i = 0; i < 40; i++) a[i] = (uint16_t)(i + 100);
    for (int i = 0; i < 30; i++) b[i] = (uint16_t)(i + 200);
    for (int i = 0; i < 12; i++) v[i] = (uint16_t)(i + 300);
    write_shard("g_01.bin", 20240520, 1, 30, b, 30, 0);   /* written first: the glob sorts */
    write_shard("g_00.bin", 20240520, 1, 40, a, 40, 0);
    write_shard("val_00.bin", 20240520, 1, 12, v, 12, 0);
    char pat[160], val[160];
    snprintf(pat, sizeof pat, "%s/g_*.bin", dir);
    snprintf(val, sizeof val, "%s/val_*.bin", dir);
    remat_data *d = NULL;
    remat_status st = remat_data_open(pat, 50257, &d);
    CHECK(st == REMAT_OK && d && remat_data_tokens(d, 0) == 63 && remat_data_tokens(d, 1) == 7,
          "glob of 2 shards: %s", remat_errmsg());
    if (d) {
        int *tr = read_split(d, 0), ok = 1;
        for (int i = 0; i < 63; i++) ok &= tr[i] == (i < 40 ? a[i] : b[i - 40]);
        CHECK(ok, "the glob's shards in sorted order, one stream");
        free(tr);
        CHECK(remat_data_val_path(d) == NULL, "no validation set");
        remat_data_free(d);
    }
    d = NULL;
    st = remat_data_open_val(pat, val, 50257, &d);
    CHECK(st == REMAT_OK && d && remat_data_tokens(d, 0) == 70 && remat_data_tokens(d, 1) == 12 &&
          remat_data_val_path(d) && !strcmp(remat_data_val_path(d), val), "a validation set: %s", remat_errmsg());
    if (d) {
        int *va = read_split(d, 1), ok = 1;
        for (int i = 0; i < 12; i++) ok &= va[i] == v[i];
        CHECK(ok, "the validation set's tokens");
        free(va);
        remat_data_free(d);
    }
    int k, tried = 0;
    for (k = 1; k < 40; k++) {
        d = (remat_data *)&k;
        remat_mem_fail_at((uint64_t)k);
        st = remat_data_open_val(pat, val, 50257, &d);
        remat_mem_fail_at(0);
        if (st == REMAT_OK) { remat_data_free(d); break; }
        tried++;
        CHECK(st == REMAT_ERR_NOMEM && !d, "globs, failing allocation %d: %d (%s)", k, (int)st, remat_errmsg());
    }
    CHECK(tried >= 8 && k < 40, "globs: %d allocations made to fail", tried);

    /* The default vocabulary is that of the stream's first file, in the
     * stream's byte order: "h_B.txt" before "h_a.bin" (a collating locale,
     * where one is installed, would sort h_a.bin first). */
    write_file("h_B.txt", "text", 4);
    write_shard("h_a.bin", 20240520, 1, 12, v, 12, 0);
    char hpat[160], coll[64];
    snprintf(hpat, sizeof hpat, "%s/h_*", dir);
    snprintf(coll, sizeof coll, "%s", setlocale(LC_COLLATE, NULL));
    setlocale(LC_COLLATE, "en_US.UTF-8");
    CHECK(remat_data_default_vocab(hpat) == 256, "default vocab of a glob: its first file in byte order");
    setlocale(LC_COLLATE, coll);
}

/* Where a data-layer failure is reported: in remat_errmsg(), never in a
 * model's error (which keeps the model's last message) -- why `remat train`
 * reports a failed validation batch from the data with remat_errmsg() and
 * one from the model with remat_model_error(). */
static void test_error_layer(void)
{
    remat_data *d = NULL;
    remat_model *m = NULL;
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1; c.n_embd = 8; c.n_head = 1; c.seq = c.max_seq = 4; c.batch = 1;
    CHECK(remat_data_open(NULL, c.vocab, &d) == REMAT_OK && remat_model_create(&c, 1, &m) == REMAT_OK,
          "setup: %s", remat_errmsg());
    if (!d || !m) { remat_data_free(d); remat_model_free(m); return; }
    CHECK(remat_model_set_policy(m, "bogus") == REMAT_ERR_POLICY && strstr(remat_model_error(m), "bogus"),
          "a model error: %s", remat_model_error(m));
    int in[4], tg[4];
    CHECK(remat_data_next(d, REMAT_SPLIT_VAL, 0, 4, in, tg) == REMAT_ERR_INVALID, "a data error");
    CHECK(strstr(remat_errmsg(), "remat_data_next") && !strstr(remat_model_error(m), "remat_data_next") &&
          strstr(remat_model_error(m), "bogus"), "the data's message is in remat_errmsg() only: '%s' / '%s'",
          remat_errmsg(), remat_model_error(m));
    CHECK(remat_data_seek(d, REMAT_SPLIT_VAL, UINT64_MAX) == REMAT_ERR_RANGE && strstr(remat_errmsg(), "past the end") &&
          !strstr(remat_model_error(m), "past the end"), "seek: %s", remat_errmsg());
    remat_model_free(m);
    remat_data_free(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/remat-test-data-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    test_embedded();
    test_text();
    test_shard();
    test_alloc_failures();
    test_streams();
    test_error_layer();
    for (int i = 0; i < npaths; i++) unlink(paths[i]);
    rmdir(dir);
    return TEST_REPORT();
}
