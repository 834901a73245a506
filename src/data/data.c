/*
 * data.c -- training data: the embedded arithmetic task, byte-tokenized text
 * files and llm.c token shards, each split into train and validation and
 * read as B x T batches with wrap-around (the "data" section of remat.h).
 *
 * Sources
 *   path == NULL   The embedded task.  Lines "a+b=c\n" in plain decimal (no
 *                  padding, e.g. "7+15=22\n", "417+385=802\n"), a and b
 *                  uniform in [0, 999], c = a + b.  Line i of a split takes
 *                  a = low 32 bits % 1000 and b = high 32 bits % 1000 of
 *                  remat_rng_bits(key, i), key = remat_rng_key(EMBED_SEED,
 *                  0, 0, split).  Whole lines are appended until the split
 *                  holds at least EMBED_TRAIN_BYTES (1 MiB) resp.
 *                  EMBED_VAL_BYTES (100 KiB) characters.  Train and
 *                  validation are two independent streams (different keys),
 *                  not a cut of one text, so no line straddles the split;
 *                  the ratio is about 91/9.  Pure integer arithmetic: the
 *                  bytes are identical on every machine.
 *   llm.c shard    A file whose first 4 bytes are the little-endian int32
 *                  20240520: a header of 256 little-endian int32 (magic,
 *                  version 1, token count n), then n little-endian uint16
 *                  tokens; the file is exactly 1024 + 2n bytes.
 *   *.bin          Must be an llm.c shard: a wrong magic is an error.
 *   anything else  Text, one token per byte (vocab 256).
 *
 * Files are split 90/10: the last n/10 tokens (at least 2) are validation,
 * the rest (at least 2) train.  A file with fewer than 4 tokens is rejected.
 *
 * A batch row is T+1 consecutive tokens of the split starting at the split's
 * read position, wrapping from the split's last token to its first; inputs
 * are the first T, targets the last T.  Each row advances the position by T,
 * so consecutive rows and batches tile the split (as llm.c's loader does).
 *
 * Storage: the file (or generated text) is kept as its raw bytes and tokens
 * are decoded on read (little-endian for shards), so a shard costs its file
 * size and the code is independent of host endianness and alignment.  Every
 * allocation goes through a remat_mem (core.h), so failure injection reaches
 * each error path.
 */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../core/core.h"
#include "../core/endian.h"
#include "../core/rng.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES 1024         /* 256 int32 */
#define SHARD_DEFAULT_VOCAB 50257       /* GPT-2 */
#define BYTE_VOCAB 256

#define EMBED_SEED 0x72656d6174ULL      /* "remat" */
#define EMBED_TRAIN_BYTES (1u << 20)
#define EMBED_VAL_BYTES (100u << 10)
#define EMBED_MAX_LINE 16               /* "999+999=1998\n" is 13 */

#define MIN_SPLIT_TOKENS 2

struct remat_data {
    remat_mem mem;            /* counts this handle's allocations */
    unsigned char *buf;       /* the tokens' raw bytes: text, generated text, or the shards'
                                 tokens (little-endian uint16) without their headers; the
                                 training stream, then the validation stream (--val-data) */
    size_t buf_bytes;
    int width;                /* bytes per token: 1 (bytes) or 2 (shard) */
    char *val_path;           /* the validation pattern (owned), or NULL */
    int vocab;                /* the model vocabulary every token is below */
    size_t start[2];          /* first token of each split */
    size_t len[2];            /* tokens in each split (>= 2) */
    uint64_t pos[2];          /* read position of each split, in [0, len) */
    uint64_t hash;            /* the content's identity: the hash of the one stream's file
                                 bytes, headers included, or of both streams' hashes
                                 (--val-data); for the embedded task, of all of buf */
};

/* Token i of raw token bytes `width` bytes wide (1: a byte, 2: little-endian uint16). */
static inline unsigned token_at(const unsigned char *bytes, int width, size_t i)
{
    const unsigned char *p = bytes + i * (size_t)width;
    return width == 1 ? p[0] : remat_get_le16(p);
}

/* Splits n tokens 90/10.  Returns REMAT_ERR_FORMAT when n < 4. */
static remat_status split_tokens(remat_data *d, size_t n, const char *what)
{
    size_t nval = n / 10;
    if (nval < MIN_SPLIT_TOKENS) nval = MIN_SPLIT_TOKENS;
    if (n < nval + MIN_SPLIT_TOKENS)
        return remat_fail(REMAT_ERR_FORMAT,
                          "%s has %zu tokens, too few to split: at least %d are needed "
                          "(%d for training, %d for validation); use a longer file",
                          what, n, 2 * MIN_SPLIT_TOKENS, MIN_SPLIT_TOKENS, MIN_SPLIT_TOKENS);
    d->start[REMAT_SPLIT_TRAIN] = 0;
    d->len[REMAT_SPLIT_TRAIN] = n - nval;
    d->start[REMAT_SPLIT_VAL] = n - nval;
    d->len[REMAT_SPLIT_VAL] = nval;
    return REMAT_OK;
}

/* Checks the n tokens of `bytes` (`width` bytes each) against vocab; the
 * message names the first bad one and the vocabulary that would hold them
 * all. */
static remat_status check_tokens(const unsigned char *bytes, int width, int vocab, size_t n,
                                 const char *what)
{
    unsigned limit = width == 1 ? BYTE_VOCAB : 65536u;
    if ((unsigned)vocab >= limit) return REMAT_OK;   /* nothing can exceed it */
    size_t bad = 0;
    unsigned bad_val = 0, max = 0;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned t = token_at(bytes, width, i);
        if (t > max) max = t;
        if (!found && t >= (unsigned)vocab) { found = 1; bad = i; bad_val = t; }
    }
    if (!found) return REMAT_OK;
    if (width == 1)
        return remat_fail(REMAT_ERR_FORMAT,
                          "%s: byte %zu is %u, not below the model vocabulary %d; "
                          "byte-tokenized data needs --vocab %u or more (256 holds any byte)",
                          what, bad, bad_val, vocab, max + 1);
    return remat_fail(REMAT_ERR_FORMAT,
                      "%s: token %zu is %u, not below the model vocabulary %d; "
                      "the largest token is %u, so use --vocab %u or more "
                      "(GPT-2 shards: --vocab %d)",
                      what, bad, bad_val, vocab, max, max + 1, SHARD_DEFAULT_VOCAB);
}

/* Appends whole lines of the embedded task for one split until at least
 * `target` characters are written.  buf has room for target + EMBED_MAX_LINE. */
static size_t embed_generate(unsigned char *buf, size_t target, int split)
{
    uint64_t key = remat_rng_key(EMBED_SEED, 0, 0, (uint32_t)split);
    size_t n = 0;
    for (uint64_t i = 0; n < target; i++) {
        uint64_t r = remat_rng_bits(key, i);
        unsigned a = (unsigned)((r & 0xffffffffu) % 1000u);
        unsigned b = (unsigned)((r >> 32) % 1000u);
        char line[EMBED_MAX_LINE + 1];
        int k = snprintf(line, sizeof line, "%u+%u=%u\n", a, b, a + b);
        memcpy(buf + n, line, (size_t)k);
        n += (size_t)k;
    }
    return n;
}

static remat_status open_embedded(remat_data *d)
{
    size_t cap = (size_t)EMBED_TRAIN_BYTES + EMBED_VAL_BYTES + 2 * EMBED_MAX_LINE;
    d->buf = remat_mem_alloc(&d->mem, REMAT_MEM_WORKSPACE, cap);
    if (!d->buf)
        return remat_fail(REMAT_ERR_NOMEM, "out of memory generating the embedded task (%zu bytes)",
                          cap);
    d->buf_bytes = cap;
    d->width = 1;
    size_t ntrain = embed_generate(d->buf, EMBED_TRAIN_BYTES, REMAT_SPLIT_TRAIN);
    size_t nval = embed_generate(d->buf + ntrain, EMBED_VAL_BYTES, REMAT_SPLIT_VAL);
    /* the data hash covers all of buf: zero the slack past the text, which
     * the allocator leaves undefined (zeros: the hash a fresh mmap gave) */
    memset(d->buf + ntrain + nval, 0, cap - ntrain - nval);
    d->start[REMAT_SPLIT_TRAIN] = 0;
    d->len[REMAT_SPLIT_TRAIN] = ntrain;
    d->start[REMAT_SPLIT_VAL] = ntrain;
    d->len[REMAT_SPLIT_VAL] = nval;
    return check_tokens(d->buf, d->width, d->vocab, ntrain + nval, "the embedded task");
}

/* Validates the header (the first 1024 bytes, when the file has them) of a
 * shard of `size` bytes; on success *ntok is the token count. */
static remat_status shard_header(const char *path, const unsigned char *hdr, uint64_t size,
                                 uint64_t *ntok)
{
    if (size < SHARD_HEADER_BYTES)
        return remat_fail(REMAT_ERR_FORMAT,
                          "shard '%s' is %llu bytes, shorter than its %d-byte header; "
                          "the file is truncated, regenerate it",
                          path, (unsigned long long)size, SHARD_HEADER_BYTES);
    uint32_t version = remat_get_le32(hdr + 4);
    if (version != SHARD_VERSION)
        return remat_fail(REMAT_ERR_FORMAT,
                          "shard '%s' has version %u, only version %d (uint16 tokens) is "
                          "supported; re-export it with llm.c's current data scripts",
                          path, version, SHARD_VERSION);
    int32_t n = (int32_t)remat_get_le32(hdr + 8);
    if (n <= 1)
        return remat_fail(REMAT_ERR_FORMAT,
                          "shard '%s' header claims %d tokens; a shard needs at least 2, "
                          "the header is corrupt",
                          path, (int)n);
    uint64_t expect = SHARD_HEADER_BYTES + 2 * (uint64_t)n;
    if (size != expect)
        return remat_fail(REMAT_ERR_FORMAT,
                          "shard '%s' is %llu bytes, expected %llu (1024-byte header + 2 bytes "
                          "x %d tokens): the file is %s; regenerate it",
                          path, (unsigned long long)size, (unsigned long long)expect, (int)n,
                          size < expect ? "truncated" : "followed by trailing bytes");
    *ntok = (uint64_t)n;
    return REMAT_OK;
}

/* ---- streams: a file, or the sorted matches of a glob, read as one ----------- */

/* One file of a stream, as probed. */
typedef struct src_file {
    const char *path;
    uint64_t size;          /* bytes */
    uint64_t ntok;          /* tokens */
    int shard;              /* an llm.c shard (else byte text) */
} src_file;

typedef struct stream {
    const char *pattern;    /* as given */
    src_file one;           /* a literal path: the stream's only file (no allocation) */
    src_file *f;            /* the files, in order (&one, or an array) */
    size_t n;
    char **names;           /* glob's matches (owned), or NULL */
    uint64_t ntok, bytes;   /* tokens, and bytes of the files */
    int width;              /* bytes per token */
} stream;

static void free_names(char **names, size_t n)
{
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static void stream_clear(stream *s)
{
    if (s->names) {
        free_names(s->names, s->n);
        free(s->f);
    }
    memset(s, 0, sizeof *s);
}

static int has_glob_chars(const char *p) { return strpbrk(p, "*?[") != NULL; }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names of pattern's files, in stream order: the path itself (also when
 * a file has that very name: "a[1].bin" is itself), with *names NULL and
 * *n 1; or the matches of a glob in byte order (strcmp, whatever the
 * locale), *names n owned strings.  Returns 0, GLOB_NOMATCH (also for a
 * glob with no paths), GLOB_NOSPACE (out of memory) or another glob error;
 * sets no message (remat_data_default_vocab fails silently). */
static int list_names(const char *pattern, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    struct stat sb;
    if (!has_glob_chars(pattern) || stat(pattern, &sb) == 0) {
        *n = 1;
        return 0;
    }
    glob_t g;
    int rc = glob(pattern, GLOB_NOSORT, NULL, &g);
    if (rc != 0) return rc;
    if (g.gl_pathc == 0) rc = GLOB_NOMATCH;
    else {
        char **v = remat_calloc(g.gl_pathc, sizeof *v);
        size_t k = 0;
        if (v)
            for (; k < g.gl_pathc; k++)
                if (!(v[k] = remat_strdup(g.gl_pathv[k]))) break;
        if (k < g.gl_pathc) {
            free_names(v, k);
            rc = GLOB_NOSPACE;
        } else {
            qsort(v, k, sizeof *v, cmp_str);
            *names = v;
            *n = k;
        }
    }
    globfree(&g);
    return rc;
}

/* Opens path, checks it is a regular file and reads its first bytes (up to
 * the shard header) into hdr, *have of them, and its size. */
static remat_status open_probe(const char *path, FILE **fp, unsigned char *hdr, size_t *have, uint64_t *size)
{
    remat_status st = REMAT_OK;
    FILE *f = fopen(path, "rb");
    if (!f)
        return remat_fail(REMAT_ERR_IO, "cannot open data file '%s': %s; check the path",
                          path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        st = remat_fail(REMAT_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = remat_fail(REMAT_ERR_IO, "data path '%s' is not a regular file; give a text file "
                        "or an llm.c .bin shard", path);
        goto out;
    }
    if (sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 64) {
        st = remat_fail(REMAT_ERR_RANGE, "data file '%s' is too large (%lld bytes) for this "
                        "machine's address space", path, (long long)sb.st_size);
        goto out;
    }
    *size = (uint64_t)sb.st_size;
    size_t want = *size < SHARD_HEADER_BYTES ? (size_t)*size : SHARD_HEADER_BYTES;
    *have = fread(hdr, 1, want, f);
    if (*have < want) {
        st = remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", path,
                        ferror(f) ? strerror(errno) : "the file shrank while being read");
        goto out;
    }
out:
    if (st) fclose(f);
    else *fp = f;
    return st;
}

/* Probes one file: shard or text, its size and token count, every check a
 * shard's header allows. */
static remat_status probe_file(src_file *sf)
{
    unsigned char hdr[SHARD_HEADER_BYTES];
    size_t have;
    FILE *f = NULL;
    remat_status st = open_probe(sf->path, &f, hdr, &have, &sf->size);
    if (st) return st;
    fclose(f);
    const char *path = sf->path;
    sf->shard = have >= 4 && remat_get_le32(hdr) == SHARD_MAGIC;
    size_t plen = strlen(path);
    if (!sf->shard && plen >= 4 && !strcmp(path + plen - 4, ".bin"))
        /* a .bin file is meant to be a shard: a wrong magic is corruption,
         * not text */
        return remat_fail(REMAT_ERR_FORMAT, "'%s' is not an llm.c token shard: magic %u, expected %d "
                          "(a .bin file must be a shard; rename a text file to another extension)",
                          path, have >= 4 ? (unsigned)remat_get_le32(hdr) : 0u, SHARD_MAGIC);
    if (sf->shard) return shard_header(path, hdr, sf->size, &sf->ntok);
    if (sf->size < 2)
        return remat_fail(REMAT_ERR_FORMAT,
                          "text file '%s' is %s; a byte-tokenized file needs at least "
                          "%d bytes (%d for training, %d for validation)",
                          path, sf->size == 0 ? "empty" : "only 1 byte", 2 * MIN_SPLIT_TOKENS,
                          MIN_SPLIT_TOKENS, MIN_SPLIT_TOKENS);
    sf->ntok = sf->size;
    return REMAT_OK;
}

/* The files of pattern (list_names), each probed.  Several files must all
 * be shards. */
static remat_status stream_open(const char *pattern, stream *s)
{
    remat_status st;
    memset(s, 0, sizeof *s);
    s->pattern = pattern;
    int rc = list_names(pattern, &s->names, &s->n);
    if (rc == GLOB_NOMATCH)
        return remat_fail(REMAT_ERR_IO, "no file matches the data pattern '%s'; check the path (quote the "
                          "pattern so that the shell does not expand it)", pattern);
    if (rc == GLOB_NOSPACE)
        return remat_fail(REMAT_ERR_NOMEM, "out of memory listing the files of '%s'", pattern);
    if (rc != 0) return remat_fail(REMAT_ERR_IO, "cannot expand the data pattern '%s'", pattern);
    if (!s->names) {
        s->one.path = pattern;
        s->f = &s->one;
    } else {
        if (!(s->f = remat_calloc(s->n, sizeof *s->f))) {
            stream_clear(s);
            return remat_fail(REMAT_ERR_NOMEM, "out of memory listing the %zu files of '%s'", s->n, pattern);
        }
        for (size_t i = 0; i < s->n; i++) s->f[i].path = s->names[i];
    }
    int ok = 1;
    for (size_t i = 0; i < s->n; i++) {
        if ((st = probe_file(&s->f[i]))) return st;
        if (s->n > 1 && !s->f[i].shard)
            return remat_fail(REMAT_ERR_FORMAT, "'%s' (matched by '%s') is not an llm.c token shard: a pattern "
                              "that matches several files must match shards only", s->f[i].path, pattern);
        s->ntok = remat_add(s->ntok, s->f[i].ntok, &ok);
        s->bytes = remat_add(s->bytes, s->f[i].size, &ok);
    }
    if (!ok || s->ntok > (uint64_t)SIZE_MAX / 2)
        return remat_fail(REMAT_ERR_RANGE, "the files of '%s' are too large for this machine", pattern);
    s->width = s->f[0].shard ? 2 : 1;
    return REMAT_OK;
}

/* Reads the stream's tokens (raw little-endian bytes) into dst, feeding
 * every byte of every file to h, and checks each file's tokens against
 * vocab. */
static remat_status stream_read(stream *s, int vocab, unsigned char *dst, remat_hash *h)
{
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < s->n && !st; i++) {
        src_file *sf = &s->f[i];
        unsigned char hdr[SHARD_HEADER_BYTES];
        size_t have;
        uint64_t size;
        FILE *f = NULL;
        if ((st = open_probe(sf->path, &f, hdr, &have, &size))) return st;
        if (size != sf->size) {
            fclose(f);
            return remat_fail(REMAT_ERR_IO, "'%s' changed size while being opened (%llu, then %llu bytes)", sf->path,
                              (unsigned long long)sf->size, (unsigned long long)size);
        }
        size_t payload = (size_t)sf->ntok * (size_t)s->width;
        remat_hash_update(h, hdr, have);
        if (sf->shard) {
            /* the header was read by the probe; the tokens follow it */
            if (fread(dst, 1, payload, f) != payload)
                st = remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", sf->path,
                                ferror(f) ? strerror(errno) : "the file shrank while being read");
        } else {
            memcpy(dst, hdr, have);
            size_t rest = payload - have;
            if (rest && fread(dst + have, 1, rest, f) != rest)
                st = remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", sf->path,
                                ferror(f) ? strerror(errno) : "the file shrank while being read");
        }
        fclose(f);
        if (st) return st;
        remat_hash_update(h, sf->shard ? dst : dst + have, sf->shard ? payload : payload - have);
        char what[400];
        snprintf(what, sizeof what, "%s '%s'", sf->shard ? "shard" : "text file", sf->path);
        st = check_tokens(dst, s->width, vocab, (size_t)sf->ntok, what);
        dst += payload;
    }
    return st;
}

/* Opens the train stream, and val when given (else the train stream is
 * split 90/10), into d. */
static remat_status open_files(remat_data *d, const char *train, const char *val)
{
    remat_status st;
    stream s[2];
    memset(s, 0, sizeof s);
    int ns = val ? 2 : 1;
    unsigned char *buf = NULL;
    size_t total = 0;
    if ((st = stream_open(train, &s[0]))) goto out;
    if (val && (st = stream_open(val, &s[1]))) goto out;
    if (val && s[0].width != s[1].width) {
        st = remat_fail(REMAT_ERR_FORMAT, "the training data '%s' is %s and the validation data '%s' is %s: both "
                        "must be llm.c shards or both text", train, s[0].width == 2 ? "llm.c shards" : "text", val,
                        s[1].width == 2 ? "llm.c shards" : "text");
        goto out;
    }
    d->width = s[0].width;
    if (!val) {
        char what[400];
        if (s[0].n == 1) snprintf(what, sizeof what, "%s '%s'", s[0].f[0].shard ? "shard" : "text file", train);
        else snprintf(what, sizeof what, "the %zu shards of '%s'", s[0].n, train);
        if ((st = split_tokens(d, (size_t)s[0].ntok, what))) goto out;
    } else {
        for (int k = 0; k < 2; k++)
            if (s[k].ntok < MIN_SPLIT_TOKENS) {
                st = remat_fail(REMAT_ERR_FORMAT, "the %s data '%s' has %llu tokens; it needs at least %d",
                                k ? "validation" : "training", k ? val : train, (unsigned long long)s[k].ntok,
                                MIN_SPLIT_TOKENS);
                goto out;
            }
        d->start[REMAT_SPLIT_TRAIN] = 0;
        d->len[REMAT_SPLIT_TRAIN] = (size_t)s[0].ntok;
        d->start[REMAT_SPLIT_VAL] = (size_t)s[0].ntok;
        d->len[REMAT_SPLIT_VAL] = (size_t)s[1].ntok;
    }
    for (int k = 0; k < ns; k++) total += (size_t)s[k].ntok * (size_t)d->width;
    if (!(buf = remat_mem_alloc(&d->mem, REMAT_MEM_WORKSPACE, total ? total : 1))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading '%s' (%zu bytes)", train, total);
        goto out;
    }
    uint64_t h[2];
    unsigned char *dst = buf;
    for (int k = 0; k < ns; k++) {
        remat_hash hs;
        remat_hash_init(&hs, s[k].bytes);
        if ((st = stream_read(&s[k], d->vocab, dst, &hs))) goto out;
        h[k] = remat_hash_final(&hs);
        dst += (size_t)s[k].ntok * (size_t)d->width;
    }
    /* the contents' identity: the files' bytes (one stream: exactly the hash
     * of the one file, as before streams), and both streams' with --val-data */
    if (val) {
        unsigned char both[16];
        remat_put_le64(both, h[0]);
        remat_put_le64(both + 8, h[1]);
        d->hash = remat_hash_bytes(both, sizeof both);
    } else {
        d->hash = h[0];
    }
    d->buf = buf;
    d->buf_bytes = total ? total : 1;
    buf = NULL;
out:
    if (buf) remat_mem_free(&d->mem, REMAT_MEM_WORKSPACE, buf, total ? total : 1);
    stream_clear(&s[0]);
    stream_clear(&s[1]);
    return st;
}

remat_status remat_data_open(const char *path, int vocab, remat_data **out)
{
    return remat_data_open_val(path, NULL, vocab, out);
}

remat_status remat_data_open_val(const char *train, const char *val, int vocab, remat_data **out)
{
    remat_status st = REMAT_OK;
    remat_data *d = NULL;
    remat_mem mem;
    memset(&mem, 0, sizeof mem);
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_data_open: out is NULL");
    *out = NULL;
    if (vocab < 2)
        return remat_fail(REMAT_ERR_INVALID,
                          "vocabulary %d is too small: it must be at least 2 "
                          "(256 for bytes, 50257 for GPT-2 shards)", vocab);
    if (val && !train)
        return remat_fail(REMAT_ERR_INVALID, "a validation set (--val-data) needs training data (--data): the "
                          "embedded task has its own validation split");
    d = remat_mem_calloc(&mem, REMAT_MEM_WORKSPACE, sizeof *d);
    if (!d) return remat_fail(REMAT_ERR_NOMEM, "out of memory opening the data");
    d->mem = mem;
    d->vocab = vocab;
    if (val && !(d->val_path = remat_strdup(val))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory opening the data");
        goto out;
    }
    if (train) st = open_files(d, train, val);
    else {
        st = open_embedded(d);
        if (!st) d->hash = remat_hash_bytes(d->buf, d->buf_bytes);
    }
    if (st != REMAT_OK) goto out;
    *out = d;
    d = NULL;
out:
    remat_data_free(d);
    return st;
}

const char *remat_data_val_path(const remat_data *d) { return d ? d->val_path : NULL; }

void remat_data_free(remat_data *d)
{
    if (!d) return;
    remat_mem_free(&d->mem, REMAT_MEM_WORKSPACE, d->buf, d->buf_bytes);
    free(d->val_path);
    remat_mem mem = d->mem;
    remat_mem_free(&mem, REMAT_MEM_WORKSPACE, d, sizeof *d);
}

int remat_data_is_bytes(const remat_data *d) { return d && d->width == 1; }

int remat_data_default_vocab(const char *path)
{
    if (!path) return BYTE_VOCAB;
    char **names;
    size_t n;
    if (list_names(path, &names, &n) != 0) return BYTE_VOCAB;
    FILE *f = fopen(names ? names[0] : path, "rb");   /* the stream's first file */
    free_names(names, n);
    if (!f) return BYTE_VOCAB;
    unsigned char m[4];
    int shard = fread(m, 1, 4, f) == 4 && remat_get_le32(m) == SHARD_MAGIC;
    fclose(f);
    return shard ? SHARD_DEFAULT_VOCAB : BYTE_VOCAB;
}

static int split_ok(int split) { return split == REMAT_SPLIT_TRAIN || split == REMAT_SPLIT_VAL; }

uint64_t remat_data_hash(const remat_data *d) { return d ? d->hash : 0; }

size_t remat_data_tokens(const remat_data *d, remat_split split)
{
    return d && split_ok(split) ? d->len[split] : 0;
}

remat_status remat_data_next(remat_data *d, remat_split split, int B, int T, int *inputs, int *targets)
{
    if (!d || !inputs || !targets)
        return remat_fail(REMAT_ERR_INVALID, "remat_data_next: NULL data, inputs or targets");
    if (!split_ok(split))
        return remat_fail(REMAT_ERR_INVALID, "remat_data_next: split %d is neither "
                          "REMAT_SPLIT_TRAIN (0) nor REMAT_SPLIT_VAL (1)", split);
    if (B < 1 || T < 1)
        return remat_fail(REMAT_ERR_INVALID, "remat_data_next: batch %d x %d; B and T must be "
                          ">= 1", B, T);
    uint64_t n = d->len[split];
    if (n < MIN_SPLIT_TOKENS)
        return remat_fail(REMAT_ERR_STATE, "remat_data_next: split %d has %llu tokens, "
                          "fewer than %d", split, (unsigned long long)n, MIN_SPLIT_TOKENS);
    size_t s0 = d->start[split];
    uint64_t row = d->pos[split];
    uint64_t step = (uint64_t)T % n;
    for (size_t b = 0; b < (size_t)B; b++) {
        int *in = inputs + b * (size_t)T, *tg = targets + b * (size_t)T;
        uint64_t p = row;
        unsigned cur = token_at(d->buf, d->width, s0 + (size_t)p);
        for (size_t t = 0; t < (size_t)T; t++) {
            p = p + 1 == n ? 0 : p + 1;
            unsigned next = token_at(d->buf, d->width, s0 + (size_t)p);
            in[t] = (int)cur;
            tg[t] = (int)next;
            cur = next;
        }
        row += step;
        if (row >= n) row -= n;
    }
    d->pos[split] = row;
    return REMAT_OK;
}

uint64_t remat_data_position(const remat_data *d, remat_split split)
{
    return d && split_ok(split) ? d->pos[split] : 0;
}

remat_status remat_data_seek(remat_data *d, remat_split split, uint64_t pos)
{
    if (!d) return remat_fail(REMAT_ERR_INVALID, "remat_data_seek: data is NULL");
    if (!split_ok(split))
        return remat_fail(REMAT_ERR_INVALID, "remat_data_seek: split %d is neither "
                          "REMAT_SPLIT_TRAIN (0) nor REMAT_SPLIT_VAL (1)", split);
    if (pos >= d->len[split])
        return remat_fail(REMAT_ERR_RANGE, "data position %llu is past the end of the %s split "
                          "(%zu tokens); the checkpoint was made with different data",
                          (unsigned long long)pos, split ? "validation" : "training",
                          d->len[split]);
    d->pos[split] = pos;
    return REMAT_OK;
}
