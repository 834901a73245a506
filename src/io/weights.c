/*
 * weights.c -- model weights in and out: llm.c checkpoints and safetensors
 * with Hugging Face GPT-2 names (the "weights" section of remat.h).
 *
 * Reading is two passes over an untrusted source (a file or, for the fuzz
 * targets, a memory buffer):
 *   1. parse the header into a *layout*: the model shape plus a list of
 *      pieces, each a (rows x cols) block of float32 at a byte offset of the
 *      source that lands at a float offset of remat's parameter array,
 *      possibly transposed (Conv1D weights);
 *   2. fill the parameters by reading each piece.
 * Everything the header claims is checked before anything is allocated from
 * it: sizes with overflow-checked arithmetic, the file size exactly (llm.c),
 * every tensor's byte range against the data region and against each other
 * (safetensors: the ranges must tile the region, as the reference reader
 * requires), every shape against the one the model needs.  Allocation is
 * therefore bounded by the file's size (plus < 64 padded vocabulary rows).
 *
 * llm.c (train_gpt2.c, gpt2_build_from_checkpoint): 256 little-endian int32
 *   [0] 20240326  [1] 3 (fp32, padded vocab)  [2] maxT  [3] V  [4] L  [5] NH
 *   [6] C  [7] Vp, the rest 0; then the 16 tensors in llm.c order, float32,
 *   wte with Vp rows.  The file is exactly 1024 + 4 * nparams(Vp) bytes.
 *   remat pads V to a multiple of 64 and llm.c's scripts to 128: any file
 *   Vp >= V loads, keeping rows [0, V) (the others are never read).
 *
 * safetensors (github.com/huggingface/safetensors, "Format"): u64 LE header
 *   length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 *   "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v", ...}},
 *   then the data region; offsets are relative to it.  The JSON parser below
 *   knows exactly this grammar (objects of those three fields, a metadata
 *   object of strings, unsigned integers) and rejects anything else.
 *
 * Writes go through the library's atomic writer (remat_atomic_begin/commit,
 * core/files.c), so the final name holds either the old file or the whole
 * new one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io.h"
#include "../core/core.h"
#include "../core/endian.h"
#include "../engine/model.h"

#define LLMC_MAGIC 20240326
#define LLMC_VERSION 3
#define LLMC_HEADER_INTS 256
#define LLMC_HEADER_BYTES (LLMC_HEADER_INTS * 4)

#define ST_MAX_RANK 8
#define ST_PREFIX "transformer."

/* ---- sources: a file or a memory buffer ------------------------------------ */

typedef struct wsrc {
    const unsigned char *mem;   /* memory source, or NULL */
    FILE *f;                    /* file source */
    uint64_t size;
    const char *name;           /* for messages */
} wsrc;

static remat_status src_read(const wsrc *s, uint64_t off, void *dst, size_t n)
{
    if (off > s->size || n > s->size - off)
        return remat_fail(REMAT_ERR_FORMAT, "%s: truncated: %zu bytes at offset %llu run past the end "
                          "(%llu bytes)", s->name, n, (unsigned long long)off, (unsigned long long)s->size);
    if (n == 0) return REMAT_OK;
    if (s->mem) { memcpy(dst, s->mem + off, n); return REMAT_OK; }
    if (off > (uint64_t)INT64_MAX || fseeko(s->f, (off_t)off, SEEK_SET) != 0 || fread(dst, 1, n, s->f) != n)
        return remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", s->name,
                          ferror(s->f) ? strerror(errno) : "the file shrank while being read");
    return REMAT_OK;
}

/* ---- layouts ------------------------------------------------------------------ */

/* rows x cols float32 at byte src_off of the source, landing row-major at
 * params + dst_off; transposed: the source holds the (cols x rows) matrix. */
typedef struct wpiece {
    uint64_t src_off;
    size_t dst_off, rows, cols;
    int transpose;
} wpiece;

typedef struct wlayout {
    remat_config shape;       /* n_head 0 when the file does not record it */
    remat_weights_format format;
    wpiece *p;
    size_t np;
} wlayout;

static void layout_clear(wlayout *ly)
{
    free(ly->p);
    memset(ly, 0, sizeof *ly);
}

/* Resolves n_head (file, else hint, else GPT-2's head size 64) and checks the
 * shape as a config.  Errors are REMAT_ERR_FORMAT: the file is at fault. */
static remat_status layout_config(const wlayout *ly, const char *name, int hint, remat_config *out)
{
    remat_config c = ly->shape;
    c.batch = 1;
    c.seq = 1;
    c.dropout = 0.0f;
    if (c.n_head <= 0) c.n_head = hint > 0 ? hint : (c.n_embd % 64 == 0 ? c.n_embd / 64 : 0);
    if (c.n_head <= 0)
        return remat_fail(REMAT_ERR_INVALID, "%s does not record the number of heads and its width %d is not a "
                          "multiple of 64; give it (--heads)", name, c.n_embd);
    remat_status st = remat_config_check(&c);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        return remat_fail(REMAT_ERR_FORMAT, "%s: the model it describes is invalid: %s", name, msg);
    }
    *out = c;
    return REMAT_OK;
}

/* Reads every piece into params (remat_config_num_params(cfg) floats, the
 * padded vocabulary rows already zero). */
static remat_status layout_fill(const wsrc *s, const wlayout *ly, float *params)
{
    remat_status st = REMAT_OK;
    float *row = NULL;
    size_t rowcap = 0;
    for (size_t k = 0; k < ly->np && !st; k++) {
        const wpiece *pc = &ly->p[k];
        float *dst = params + pc->dst_off;
        if (!pc->transpose) {
            size_t n = pc->rows * pc->cols;
            if ((st = src_read(s, pc->src_off, dst, n * sizeof(float)))) break;
            remat_le_f32_swap(dst, n);
            continue;
        }
        /* source row j (cols x rows matrix) is destination column j */
        if (rowcap < pc->rows) {
            free(row);
            rowcap = pc->rows;
            if (!(row = remat_malloc(rowcap * sizeof *row))) {
                st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
                break;
            }
        }
        for (size_t j = 0; j < pc->cols && !st; j++) {
            st = src_read(s, pc->src_off + (uint64_t)j * pc->rows * sizeof(float), row, pc->rows * sizeof(float));
            if (st) break;
            remat_le_f32_swap(row, pc->rows);
            for (size_t i = 0; i < pc->rows; i++) dst[i * pc->cols + j] = row[i];
        }
    }
    free(row);
    return st;
}

/* ---- llm.c ------------------------------------------------------------------- */

static remat_status llmc_layout(const wsrc *s, wlayout *ly)
{
    unsigned char hb[LLMC_HEADER_BYTES];
    memset(ly, 0, sizeof *ly);
    if (s->size < LLMC_HEADER_BYTES)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, shorter than the %d-byte llm.c header; the file is "
                          "truncated", s->name, (unsigned long long)s->size, LLMC_HEADER_BYTES);
    remat_status st = src_read(s, 0, hb, sizeof hb);
    if (st) return st;
    int32_t h[8];
    for (int i = 0; i < 8; i++) h[i] = (int32_t)remat_get_le32(hb + 4 * i);
    if (h[0] != LLMC_MAGIC)
        return remat_fail(REMAT_ERR_FORMAT, "%s: bad magic %d, expected %d (an llm.c model checkpoint)", s->name,
                          (int)h[0], LLMC_MAGIC);
    if (h[1] != LLMC_VERSION)
        return remat_fail(REMAT_ERR_FORMAT, "%s: llm.c checkpoint version %d; only version 3 (float32, padded "
                          "vocabulary) is supported", s->name, (int)h[1]);
    int maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vpf = h[7];
    if (maxT < 1 || V < 2 || L < 1 || NH < 1 || C < 1 || Vpf < V || Vpf > (1 << 24) + 64)
        return remat_fail(REMAT_ERR_FORMAT, "%s: corrupt llm.c header: maxT %d, V %d, L %d, NH %d, C %d, "
                          "padded V %d", s->name, maxT, V, L, NH, C, Vpf);
    ly->format = REMAT_WEIGHTS_LLMC;
    ly->shape.n_layer = L;
    ly->shape.n_embd = C;
    ly->shape.n_head = NH;
    ly->shape.vocab = V;
    ly->shape.max_seq = maxT;
    remat_config c;
    if ((st = layout_config(ly, s->name, 0, &c))) return st;
    /* the file's parameter count, with its own padding */
    uint64_t np_remat = remat_config_num_params(&c);
    uint64_t Vp = (uint64_t)remat_config_padded_vocab(&c);
    int ok = 1;
    uint64_t np_file = remat_add(np_remat - Vp * (uint64_t)C, remat_mul((uint64_t)Vpf, (uint64_t)C, &ok), &ok);
    uint64_t expect = remat_add(LLMC_HEADER_BYTES, remat_mul(np_file, 4, &ok), &ok);
    if (!ok || s->size != expect)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, expected %llu (header + %llu float32 parameters of "
                          "L %d, C %d, V %d, maxT %d): the file is %s", s->name, (unsigned long long)s->size,
                          (unsigned long long)expect, (unsigned long long)np_file, L, C, V, maxT,
                          s->size < expect ? "truncated" : "followed by extra bytes");
    ly->p = remat_calloc(2, sizeof *ly->p);
    if (!ly->p) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    ly->np = 2;
    /* wte: the first V of the file's Vpf rows; then everything else, whose
     * layout is the same in both */
    ly->p[0] = (wpiece){ LLMC_HEADER_BYTES, 0, (size_t)V, (size_t)C, 0 };
    ly->p[1] = (wpiece){ LLMC_HEADER_BYTES + (uint64_t)Vpf * C * 4, (size_t)(Vp * C), (size_t)(np_remat - Vp * C),
                         1, 0 };
    return REMAT_OK;
}

static remat_status llmc_write(FILE *f, const remat_config *c, const float *params)
{
    unsigned char hb[LLMC_HEADER_BYTES];
    memset(hb, 0, sizeof hb);
    int32_t h[8] = { LLMC_MAGIC, LLMC_VERSION, c->max_seq, c->vocab, c->n_layer, c->n_head, c->n_embd,
                     remat_config_padded_vocab(c) };
    for (int i = 0; i < 8; i++) remat_put_le32(hb + 4 * i, (uint32_t)h[i]);
    if (fwrite(hb, 1, sizeof hb, f) != sizeof hb) return REMAT_ERR_IO;
    size_t n = (size_t)remat_config_num_params(c);
    if (remat_host_is_le()) return fwrite(params, sizeof(float), n, f) == n ? REMAT_OK : REMAT_ERR_IO;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        remat_put_lef32(b, params[i]);
        if (fwrite(b, 1, 4, f) != 4) return REMAT_ERR_IO;
    }
    return REMAT_OK;
}

/* ---- the safetensors JSON header ------------------------------------------------ */

enum { DT_F32 = 11 };
static const struct { const char *name; int size; } st_dtypes[] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
    {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};
_Static_assert(sizeof st_dtypes / sizeof st_dtypes[0] > DT_F32, "DT_F32 indexes st_dtypes");

typedef struct st_entry {
    char *name;                 /* without the "transformer." prefix */
    int dtype;                  /* index into st_dtypes */
    int rank;
    uint64_t shape[ST_MAX_RANK];
    uint64_t begin, end;        /* relative to the data region */
} st_entry;

typedef struct jparser {
    const char *base, *p, *end;
    const char *src;            /* file name for messages */
    st_entry *e;
    size_t ne, cap;
    char **meta;                /* metadata keys, for the duplicate check */
    size_t nmeta, metacap;
    int have_meta;
    int n_head;                 /* from __metadata__ "n_head", 0 if absent */
} jparser;

static remat_status jerr(const jparser *j, const char *what)
{
    return remat_fail(REMAT_ERR_FORMAT, "%s: malformed safetensors header: %s at byte %zu of the JSON", j->src,
                      what, (size_t)(j->p - j->base));
}

static void jws(jparser *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int jeat(jparser *j, char c)
{
    jws(j);
    if (j->p < j->end && *j->p == c) { j->p++; return 1; }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        unsigned min;
        if ((c & 0xe0) == 0xc0) { k = 1; min = 0x80; c &= 0x1f; }
        else if ((c & 0xf0) == 0xe0) { k = 2; min = 0x800; c &= 0x0f; }
        else if ((c & 0xf8) == 0xf0) { k = 3; min = 0x10000; c &= 0x07; }
        else return 0;
        if (n - i - 1 < k) return 0;
        for (size_t m = 1; m <= k; m++) {
            unsigned b = s[i + m];
            if ((b & 0xc0) != 0x80) return 0;
            c = (c << 6) | (b & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
        i += k + 1;
    }
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int read_u4(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return 0;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 1;
}

/* A JSON string, decoded to a NUL-terminated malloc'd UTF-8 string with no
 * embedded NUL. */
static remat_status jstring(jparser *j, char **out)
{
    *out = NULL;
    jws(j);
    if (j->p >= j->end || *j->p != '"') return jerr(j, "expected a string");
    const char *q = ++j->p;
    size_t raw = 0;
    while (q < j->end && *q != '"') {   /* find the end; the decoded text is no longer */
        if (*q == '\\') { if (++q >= j->end) break; }
        q++;
        raw++;
    }
    if (q >= j->end) return jerr(j, "unterminated string");
    char *o = remat_malloc((size_t)(q - j->p) + 1);
    if (!o) return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing a safetensors header");
    size_t n = 0;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) { free(o); return jerr(j, "control character in a string"); }
        if (c != '\\') { o[n++] = (char)c; j->p++; continue; }
        char e = *++j->p;
        j->p++;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!read_u4(j->p, q, &cp)) { free(o); return jerr(j, "bad \\u escape"); }
            j->p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (q - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !read_u4(j->p + 2, q, &lo) ||
                    lo < 0xdc00 || lo > 0xdfff) {
                    free(o);
                    return jerr(j, "unpaired UTF-16 surrogate");
                }
                j->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                free(o);
                return jerr(j, "unpaired UTF-16 surrogate");
            }
            if (cp == 0) { free(o); return jerr(j, "NUL character in a string"); }
            n += put_utf8(o + n, cp);
            break;
        }
        default: free(o); j->p--; return jerr(j, "bad escape");
        }
    }
    j->p++;
    o[n] = 0;
    (void)raw;
    if (!utf8_valid((const unsigned char *)o, n)) { free(o); return jerr(j, "invalid UTF-8 in a string"); }
    *out = o;
    return REMAT_OK;
}

/* An unsigned integer without sign, fraction, exponent or leading zeros,
 * at most 2^63 - 1. */
static remat_status juint(jparser *j, uint64_t *out)
{
    jws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jerr(j, "expected an unsigned integer");
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return jerr(j, "leading zero in a number");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (UINT64_C(0x7fffffffffffffff) - (uint64_t)(*j->p - '0')) / 10) return jerr(j, "number too large");
        v = v * 10 + (uint64_t)(*j->p - '0');
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return jerr(j, "expected a whole number");
    *out = v;
    return REMAT_OK;
}

/* [u, u, ...] with at most max elements */
static remat_status juint_array(jparser *j, uint64_t *v, int max, int *n)
{
    remat_status st;
    *n = 0;
    if (!jeat(j, '[')) return jerr(j, "expected '['");
    if (jeat(j, ']')) return REMAT_OK;
    do {
        if (*n >= max) return jerr(j, "too many elements in an array");
        if ((st = juint(j, &v[(*n)++]))) return st;
    } while (jeat(j, ','));
    if (!jeat(j, ']')) return jerr(j, "expected ',' or ']'");
    return REMAT_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static remat_status jmeta(jparser *j)
{
    remat_status st;
    if (j->have_meta) return jerr(j, "duplicate __metadata__");
    j->have_meta = 1;
    if (!jeat(j, '{')) return jerr(j, "__metadata__ must be an object");
    if (jeat(j, '}')) return REMAT_OK;
    do {
        char *k = NULL, *v = NULL;
        if ((st = jstring(j, &k))) return st;
        if (j->nmeta == j->metacap) {
            size_t cap = j->metacap ? 2 * j->metacap : 16;
            char **m = remat_realloc(j->meta, cap * sizeof *m);
            if (!m) { free(k); return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing a safetensors header"); }
            j->meta = m;
            j->metacap = cap;
        }
        j->meta[j->nmeta++] = k;
        if (!jeat(j, ':')) return jerr(j, "expected ':'");
        if ((st = jstring(j, &v))) return st == REMAT_ERR_FORMAT ? jerr(j, "__metadata__ values must be strings") : st;
        if (!strcmp(k, "n_head")) {
            char *end;
            errno = 0;
            long h = strtol(v, &end, 10);
            if (!*v || *end || errno || h < 1 || h > 65536 || *v < '1' || *v > '9') {
                free(v);
                return remat_fail(REMAT_ERR_FORMAT, "%s: __metadata__ n_head must be a whole number in [1, 65536]",
                                  j->src);
            }
            j->n_head = (int)h;
        }
        free(v);
    } while (jeat(j, ','));
    if (!jeat(j, '}')) return jerr(j, "expected ',' or '}' in __metadata__");
    if (j->nmeta > 1) qsort(j->meta, j->nmeta, sizeof *j->meta, cmp_str);
    for (size_t i = 1; i < j->nmeta; i++)
        if (!strcmp(j->meta[i - 1], j->meta[i]))
            return remat_fail(REMAT_ERR_FORMAT, "%s: duplicate __metadata__ key '%.64s'", j->src, j->meta[i]);
    return REMAT_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} in any order, each
 * exactly once */
static remat_status jtensor(jparser *j, st_entry *e)
{
    remat_status st;
    int seen = 0;
    if (!jeat(j, '{')) return jerr(j, "a tensor entry must be an object");
    do {
        char *k = NULL;
        if ((st = jstring(j, &k))) return st;
        int bit = !strcmp(k, "dtype") ? 1 : !strcmp(k, "shape") ? 2 : !strcmp(k, "data_offsets") ? 4 : 0;
        free(k);
        if (!bit) return jerr(j, "unknown field in a tensor entry (expected dtype, shape, data_offsets)");
        if (seen & bit) return jerr(j, "duplicate field in a tensor entry");
        seen |= bit;
        if (!jeat(j, ':')) return jerr(j, "expected ':'");
        if (bit == 1) {
            char *d = NULL;
            if ((st = jstring(j, &d))) return st;
            e->dtype = -1;
            for (int i = 0; i < (int)(sizeof st_dtypes / sizeof st_dtypes[0]); i++)
                if (!strcmp(d, st_dtypes[i].name)) e->dtype = i;
            free(d);
            if (e->dtype < 0) return jerr(j, "unknown dtype");
        } else if (bit == 2) {
            if ((st = juint_array(j, e->shape, ST_MAX_RANK, &e->rank))) return st;
        } else {
            uint64_t v[2];
            int n;
            if ((st = juint_array(j, v, 2, &n))) return st;
            if (n != 2) return jerr(j, "data_offsets must be [begin, end]");
            e->begin = v[0];
            e->end = v[1];
        }
    } while (jeat(j, ','));
    if (!jeat(j, '}')) return jerr(j, "expected ',' or '}' in a tensor entry");
    if (seen != 7) return jerr(j, "a tensor entry needs dtype, shape and data_offsets");
    return REMAT_OK;
}

static void jparser_clear(jparser *j)
{
    for (size_t i = 0; i < j->ne; i++) free(j->e[i].name);
    free(j->e);
    for (size_t i = 0; i < j->nmeta; i++) free(j->meta[i]);
    free(j->meta);
}

static remat_status jheader(jparser *j)
{
    remat_status st;
    if (!jeat(j, '{')) return jerr(j, "expected '{'");
    if (!jeat(j, '}')) {
        do {
            char *k = NULL;
            if ((st = jstring(j, &k))) return st;
            if (!jeat(j, ':')) { free(k); return jerr(j, "expected ':'"); }
            if (!strcmp(k, "__metadata__")) {
                free(k);
                if ((st = jmeta(j))) return st;
                continue;
            }
            if (j->ne == j->cap) {
                size_t cap = j->cap ? 2 * j->cap : 64;
                st_entry *e = remat_realloc(j->e, cap * sizeof *e);
                if (!e) { free(k); return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing a safetensors header"); }
                j->e = e;
                j->cap = cap;
            }
            st_entry *e = &j->e[j->ne++];
            memset(e, 0, sizeof *e);
            size_t pl = strlen(ST_PREFIX);
            if (!strncmp(k, ST_PREFIX, pl)) memmove(k, k + pl, strlen(k + pl) + 1);
            e->name = k;
            if ((st = jtensor(j, e))) return st;
        } while (jeat(j, ','));
        if (!jeat(j, '}')) return jerr(j, "expected ',' or '}'");
    }
    jws(j);   /* writers pad the header with spaces */
    if (j->p != j->end) return jerr(j, "trailing characters after the header object");
    return REMAT_OK;
}

/* ---- safetensors: names and shapes ---------------------------------------------- */

/* Per-block tensors in remat's parameter order (index into the parameter
 * tensors = 2 + k), with HF names and whether Conv1D stores them transposed. */
static const struct { const char *hf; int param; int transpose; } st_block[] = {
    {"ln_1.weight", 2, 0}, {"ln_1.bias", 3, 0}, {"attn.c_attn.weight", 4, 1}, {"attn.c_attn.bias", 5, 0},
    {"attn.c_proj.weight", 6, 1}, {"attn.c_proj.bias", 7, 0}, {"ln_2.weight", 8, 0}, {"ln_2.bias", 9, 0},
    {"mlp.c_fc.weight", 10, 1}, {"mlp.c_fc.bias", 11, 0}, {"mlp.c_proj.weight", 12, 1}, {"mlp.c_proj.bias", 13, 0},
};
#define ST_NBLOCK ((int)(sizeof st_block / sizeof st_block[0]))
/* buffers HF checkpoints may carry that remat does not need */
static const char *const st_ignored_block[] = { "attn.bias", "attn.masked_bias" };
static const char *const st_ignored_global[] = { "lm_head.weight" };
enum { G_WTE = 0, G_WPE, G_LNFW, G_LNFB, G_N };
static const char *const st_global[G_N] = { "wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias" };

/* Classifies a name: *layer = block index (or -1), returns the st_block
 * index (0..), or 100 + global index, or -2 (ignored), or -1 (unknown). */
static int st_classify(const char *name, long *layer)
{
    *layer = -1;
    for (int g = 0; g < G_N; g++)
        if (!strcmp(name, st_global[g])) return 100 + g;
    for (size_t g = 0; g < sizeof st_ignored_global / sizeof *st_ignored_global; g++)
        if (!strcmp(name, st_ignored_global[g])) return -2;
    if (strncmp(name, "h.", 2) != 0) return -1;
    const char *p = name + 2;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long l = 0;
    while (*p >= '0' && *p <= '9') {
        if (l > 100000) return -1;
        l = l * 10 + (*p++ - '0');
    }
    if (*p++ != '.') return -1;
    *layer = l;
    for (int k = 0; k < ST_NBLOCK; k++)
        if (!strcmp(p, st_block[k].hf)) return k;
    for (size_t k = 0; k < sizeof st_ignored_block / sizeof *st_ignored_block; k++)
        if (!strcmp(p, st_ignored_block[k])) return -2;
    return -1;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_entry_off(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static remat_status shape_is(const wsrc *s, const st_entry *e, uint64_t d0, uint64_t d1, int rank)
{
    if (e->dtype != DT_F32)
        return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has dtype %s; remat reads F32 only", s->name, e->name,
                          st_dtypes[e->dtype].name);
    if (e->rank != rank || e->shape[0] != d0 || (rank == 2 && e->shape[1] != d1)) {
        char want[64], got[160] = "";
        if (rank == 2) snprintf(want, sizeof want, "[%llu, %llu]", (unsigned long long)d0, (unsigned long long)d1);
        else snprintf(want, sizeof want, "[%llu]", (unsigned long long)d0);
        size_t n = 0;
        for (int i = 0; i < e->rank && n < sizeof got - 24; i++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%llu", i ? ", " : "", (unsigned long long)e->shape[i]);
        return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has shape [%s], expected %s", s->name, e->name, got, want);
    }
    return REMAT_OK;
}

static remat_status st_layout(const wsrc *s, wlayout *ly)
{
    remat_status st = REMAT_OK;
    jparser j;
    char *hdr = NULL;
    long *slot = NULL;   /* entry index per (layer, block tensor) */
    memset(&j, 0, sizeof j);
    memset(ly, 0, sizeof *ly);
    unsigned char lb[8];
    if (s->size < 8)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, too short for a safetensors header length", s->name,
                          (unsigned long long)s->size);
    if ((st = src_read(s, 0, lb, 8))) return st;
    uint64_t N = remat_get_le64(lb);
    if (N > REMAT_SAFETENSORS_MAX_HEADER)
        return remat_fail(REMAT_ERR_FORMAT, "%s: safetensors header length %llu is over the %u-byte limit; the file "
                          "is corrupt", s->name, (unsigned long long)N, REMAT_SAFETENSORS_MAX_HEADER);
    if (N > s->size - 8)
        return remat_fail(REMAT_ERR_FORMAT, "%s: safetensors header length %llu runs past the end of the file (%llu "
                          "bytes); the file is truncated or corrupt", s->name, (unsigned long long)N,
                          (unsigned long long)s->size);
    uint64_t data0 = 8 + N, dsize = s->size - data0;
    if (!(hdr = remat_malloc((size_t)N + 1))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    if ((st = src_read(s, 8, hdr, (size_t)N))) goto out;
    hdr[N] = 0;
    j.base = j.p = hdr;
    j.end = hdr + N;
    j.src = s->name;
    if ((st = jheader(&j))) goto out;

    /* byte ranges: in the data region, of the dtype's size, tiling it */
    for (size_t i = 0; i < j.ne; i++) {
        st_entry *e = &j.e[i];
        int ok = 1;
        uint64_t bytes = (uint64_t)st_dtypes[e->dtype].size;
        for (int d = 0; d < e->rank; d++) bytes = remat_mul(bytes, e->shape[d], &ok);
        if (e->begin > e->end || e->end > dsize) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has data_offsets [%llu, %llu] outside the %llu-byte data "
                            "region", s->name, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)dsize);
            goto out;
        }
        if (!ok || e->end - e->begin != bytes) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s spans %llu bytes but its dtype and shape need %s%llu",
                            s->name, e->name, (unsigned long long)(e->end - e->begin), ok ? "" : "more than ",
                            (unsigned long long)bytes);
            goto out;
        }
    }
    if (j.ne > 1) qsort(j.e, j.ne, sizeof *j.e, cmp_entry_name);
    for (size_t i = 1; i < j.ne; i++)
        if (!strcmp(j.e[i - 1].name, j.e[i].name)) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s appears twice (with or without the '%s' prefix)",
                            s->name, j.e[i].name, ST_PREFIX);
            goto out;
        }
    {
        st_entry *byoff = remat_malloc((j.ne ? j.ne : 1) * sizeof *byoff);
        if (!byoff) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name); goto out; }
        if (j.ne) memcpy(byoff, j.e, j.ne * sizeof *byoff);
        if (j.ne > 1) qsort(byoff, j.ne, sizeof *byoff, cmp_entry_off);
        uint64_t at = 0;
        for (size_t i = 0; i < j.ne && !st; i++) {
            if (byoff[i].begin != at)
                st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s starts at data offset %llu, expected %llu: tensors "
                                "%s", s->name, byoff[i].name, (unsigned long long)byoff[i].begin,
                                (unsigned long long)at, byoff[i].begin < at ? "overlap" : "leave a gap");
            at = byoff[i].end;
        }
        if (!st && at != dsize)
            st = remat_fail(REMAT_ERR_FORMAT, "%s: the tensors cover %llu of the %llu data bytes; the file has extra "
                            "bytes", s->name, (unsigned long long)at, (unsigned long long)dsize);
        free(byoff);
        if (st) goto out;
    }

    /* names -> parameters */
    long gidx[G_N] = { -1, -1, -1, -1 }, maxl = -1;
    for (size_t i = 0; i < j.ne; i++) {
        long l;
        int k = st_classify(j.e[i].name, &l);
        if (k == -1) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: unknown tensor '%.200s' (not part of a GPT-2 model)", s->name,
                            j.e[i].name);
            goto out;
        }
        if (k >= 0 && k < 100 && l >= 4096) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s: block index %ld is over remat's limit of 4096 "
                            "layers", s->name, j.e[i].name, l);
            goto out;
        }
        if (k >= 100) gidx[k - 100] = (long)i;
        if (k >= 0 && k < 100 && l > maxl) maxl = l;
    }
    for (int g = 0; g < G_N; g++)
        if (gidx[g] < 0) { st = remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor %s", s->name, st_global[g]); goto out; }
    if (maxl < 0) { st = remat_fail(REMAT_ERR_FORMAT, "%s: no transformer blocks (h.0.*)", s->name); goto out; }
    int L = (int)maxl + 1;
    if (!(slot = remat_malloc((size_t)L * ST_NBLOCK * sizeof *slot))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
        goto out;
    }
    for (size_t i = 0; i < (size_t)L * ST_NBLOCK; i++) slot[i] = -1;
    for (size_t i = 0; i < j.ne; i++) {
        long l;
        int k = st_classify(j.e[i].name, &l);
        if (k >= 0 && k < 100) slot[l * ST_NBLOCK + k] = (long)i;
    }
    const st_entry *wte = &j.e[gidx[G_WTE]], *wpe = &j.e[gidx[G_WPE]];
    if (wte->rank != 2 || wpe->rank != 2 || wte->shape[1] != wpe->shape[1] || wte->shape[0] < 2 ||
        wte->shape[0] > (1 << 24) || wte->shape[1] < 1 || wte->shape[1] > 65536 || wpe->shape[0] < 1 ||
        wpe->shape[0] > (1 << 20)) {
        st = remat_fail(REMAT_ERR_FORMAT, "%s: wte.weight must be [V, C] and wpe.weight [maxT, C] with V in [2, 2^24], "
                        "C in [1, 65536], maxT in [1, 2^20]", s->name);
        goto out;
    }
    uint64_t V = wte->shape[0], C = wte->shape[1], T = wpe->shape[0];
    if ((st = shape_is(s, wte, V, C, 2)) || (st = shape_is(s, wpe, T, C, 2)) ||
        (st = shape_is(s, &j.e[gidx[G_LNFW]], C, 0, 1)) || (st = shape_is(s, &j.e[gidx[G_LNFB]], C, 0, 1)))
        goto out;
    ly->format = REMAT_WEIGHTS_SAFETENSORS;
    ly->shape.n_layer = L;
    ly->shape.n_embd = (int)C;
    ly->shape.vocab = (int)V;
    ly->shape.max_seq = (int)T;
    ly->shape.n_head = j.n_head;
    remat_config c;
    if ((st = layout_config(ly, s->name, 1, &c))) goto out;   /* sizes only; heads resolved later */
    int shapes[REMAT_NPARAM][3];
    size_t poff[REMAT_NPARAM];
    remat_param_layout(&c, shapes, poff);
    ly->np = 4 + (size_t)L * ST_NBLOCK;
    if (!(ly->p = remat_calloc(ly->np, sizeof *ly->p))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
        goto out;
    }
    ly->p[0] = (wpiece){ data0 + wte->begin, poff[0], (size_t)V, (size_t)C, 0 };
    ly->p[1] = (wpiece){ data0 + wpe->begin, poff[1], (size_t)T, (size_t)C, 0 };
    ly->p[2] = (wpiece){ data0 + j.e[gidx[G_LNFW]].begin, poff[14], (size_t)C, 1, 0 };
    ly->p[3] = (wpiece){ data0 + j.e[gidx[G_LNFB]].begin, poff[15], (size_t)C, 1, 0 };
    for (int l = 0; l < L; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            long i = slot[l * ST_NBLOCK + k];
            if (i < 0) {
                st = remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor h.%d.%s (blocks 0..%d are present)", s->name, l,
                                st_block[k].hf, L - 1);
                goto out;
            }
            const st_entry *e = &j.e[i];
            int pi = st_block[k].param;
            size_t rows = (size_t)shapes[pi][1], cols = shapes[pi][2] ? (size_t)shapes[pi][2] : 1;
            /* HF: Conv1D weight (in, out) = (cols, rows); vectors (rows) */
            if ((st = st_block[k].transpose ? shape_is(s, e, cols, rows, 2) : shape_is(s, e, rows, 0, 1))) goto out;
            ly->p[4 + (size_t)l * ST_NBLOCK + k] = (wpiece){ data0 + e->begin, poff[pi] + (size_t)l * rows * cols,
                                                            rows, cols, st_block[k].transpose };
        }
out:
    if (st) layout_clear(ly);
    free(slot);
    free(hdr);
    jparser_clear(&j);
    return st;
}

/* Appends printf output to a growing string; returns 0 on out of memory. */
typedef struct sbuf { char *s; size_t n, cap; } sbuf;

static int sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return 0;
        if (b->s && (size_t)k < b->cap - b->n) { b->n += (size_t)k; return 1; }
        size_t cap = (b->cap ? b->cap : 4096);
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *s = remat_realloc(b->s, cap);
        if (!s) return 0;
        b->s = s;
        b->cap = cap;
    }
}

/* Writes rows x cols floats (row-major at src) as little-endian, or their
 * (cols x rows) transpose. */
static remat_status write_f32(FILE *f, const float *src, size_t rows, size_t cols, int transpose, float *tmp,
                              size_t tmpn)
{
    if (!transpose) {
        size_t n = rows * cols;
        if (remat_host_is_le()) return fwrite(src, sizeof(float), n, f) == n ? REMAT_OK : REMAT_ERR_IO;
        for (size_t i = 0; i < n; i += tmpn) {
            size_t m = n - i < tmpn ? n - i : tmpn;
            memcpy(tmp, src + i, m * sizeof(float));
            remat_le_f32_swap(tmp, m);
            if (fwrite(tmp, sizeof(float), m, f) != m) return REMAT_ERR_IO;
        }
        return REMAT_OK;
    }
    for (size_t j = 0; j < cols; j++) {
        for (size_t i = 0; i < rows; i++) tmp[i] = src[i * cols + j];
        remat_le_f32_swap(tmp, rows);
        if (fwrite(tmp, sizeof(float), rows, f) != rows) return REMAT_ERR_IO;
    }
    return REMAT_OK;
}

static remat_status st_write(FILE *f, const remat_config *c, const float *params)
{
    remat_status st = REMAT_OK;
    sbuf b = { NULL, 0, 0 };
    float *tmp = NULL;
    int shapes[REMAT_NPARAM][3];
    size_t poff[REMAT_NPARAM];
    remat_param_layout(c, shapes, poff);
    uint64_t C = (uint64_t)c->n_embd, at = 0;
    int ok = sb_printf(&b, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"%d\"}", c->n_head);
#define ENTRY(name, ...) do {                                                                              \
        uint64_t dims_[2] = { __VA_ARGS__ }, n_ = dims_[0] * (dims_[1] ? dims_[1] : 1);                 \
        ok = ok && (dims_[1] ? sb_printf(&b, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],"          \
                                         "\"data_offsets\":[%llu,%llu]}", name,                           \
                                         (unsigned long long)dims_[0], (unsigned long long)dims_[1],      \
                                         (unsigned long long)at, (unsigned long long)(at + 4 * n_))       \
                             : sb_printf(&b, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu],"               \
                                         "\"data_offsets\":[%llu,%llu]}", name,                           \
                                         (unsigned long long)dims_[0], (unsigned long long)at,            \
                                         (unsigned long long)(at + 4 * n_)));                             \
        at += 4 * n_;                                                                                     \
    } while (0)
    ENTRY("wte.weight", (uint64_t)c->vocab, C);
    ENTRY("wpe.weight", (uint64_t)c->max_seq, C);
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            char name[64];
            int pi = st_block[k].param;
            uint64_t rows = (uint64_t)shapes[pi][1], cols = shapes[pi][2] ? (uint64_t)shapes[pi][2] : 0;
            snprintf(name, sizeof name, "h.%d.%s", l, st_block[k].hf);
            if (st_block[k].transpose) ENTRY(name, cols, rows);
            else ENTRY(name, rows, 0);
        }
    ENTRY("ln_f.weight", C, 0);
    ENTRY("ln_f.bias", C, 0);
#undef ENTRY
    ok = ok && sb_printf(&b, "}");
    while (ok && (8 + b.n) % 8) ok = sb_printf(&b, " ");   /* align the data region to 8 bytes */
    if (!ok) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing a safetensors header"); goto out; }
    size_t tmpn = 4 * C > (uint64_t)c->max_seq ? (size_t)(4 * C) : (size_t)c->max_seq;
    if (!(tmp = remat_malloc(tmpn * sizeof *tmp))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing safetensors");
        goto out;
    }
    unsigned char lb[8];
    remat_put_le64(lb, (uint64_t)b.n);
    if (fwrite(lb, 1, 8, f) != 8 || fwrite(b.s, 1, b.n, f) != b.n) { st = REMAT_ERR_IO; goto out; }
    if ((st = write_f32(f, params + poff[0], (size_t)c->vocab, (size_t)C, 0, tmp, tmpn)) ||
        (st = write_f32(f, params + poff[1], (size_t)c->max_seq, (size_t)C, 0, tmp, tmpn)))
        goto out;
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            int pi = st_block[k].param;
            size_t rows = (size_t)shapes[pi][1], cols = shapes[pi][2] ? (size_t)shapes[pi][2] : 1;
            if ((st = write_f32(f, params + poff[pi] + (size_t)l * rows * cols, rows, cols, st_block[k].transpose,
                                tmp, tmpn)))
                goto out;
        }
    if ((st = write_f32(f, params + poff[14], (size_t)C, 1, 0, tmp, tmpn)) ||
        (st = write_f32(f, params + poff[15], (size_t)C, 1, 0, tmp, tmpn)))
        goto out;
out:
    free(b.s);
    free(tmp);
    return st;
}

remat_status remat_weights_write(FILE *f, const remat_config *shape, const float *params,
                                  remat_weights_format format)
{
    remat_status st;
    if (!f || !shape || !params) return remat_fail(REMAT_ERR_INVALID, "remat_weights_write: NULL argument");
    if ((st = remat_config_check(shape))) return st;
    if (format == REMAT_WEIGHTS_LLMC) st = llmc_write(f, shape, params);
    else if (format == REMAT_WEIGHTS_SAFETENSORS) st = st_write(f, shape, params);
    else return remat_fail(REMAT_ERR_INVALID, "weights format %d is neither llmc (%d) nor safetensors (%d)",
                           (int)format, REMAT_WEIGHTS_LLMC, REMAT_WEIGHTS_SAFETENSORS);
    if (st == REMAT_ERR_IO) return remat_fail(REMAT_ERR_IO, "write failed: %s", strerror(errno));
    return st;
}

/* ---- detection, memory parsing ----------------------------------------------------- */

static remat_status any_layout(const wsrc *s, remat_weights_format want, wlayout *ly)
{
    unsigned char b[9] = { 0 };
    size_t have = s->size < sizeof b ? (size_t)s->size : sizeof b;
    remat_status st = src_read(s, 0, b, have);
    if (st) return st;
    if (want == REMAT_WEIGHTS_LLMC) return llmc_layout(s, ly);
    if (want == REMAT_WEIGHTS_SAFETENSORS) return st_layout(s, ly);
    if (have >= 4 && remat_get_le32(b) == LLMC_MAGIC) return llmc_layout(s, ly);
    if (have >= 9 && b[8] == '{') return st_layout(s, ly);
    return remat_fail(REMAT_ERR_FORMAT, "%s is neither an llm.c model checkpoint (magic %d) nor a safetensors file "
                      "(an 8-byte length, then '{')", s->name, LLMC_MAGIC);
}

static remat_status parse_mem(const void *buf, size_t n, remat_weights_format fmt, int hint, remat_config *shape,
                              float **params)
{
    wlayout ly;
    remat_status st;
    if (!params || !shape || (!buf && n)) return remat_fail(REMAT_ERR_INVALID, "weights parse: NULL argument");
    *params = NULL;
    wsrc s = { buf, NULL, n, "<memory>" };
    if ((st = any_layout(&s, fmt, &ly))) return st;
    remat_config c;
    if ((st = layout_config(&ly, s.name, hint, &c))) goto out;
    float *p = remat_calloc((size_t)remat_config_num_params(&c), sizeof(float));
    if (!p) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory for %llu parameters",
                              (unsigned long long)remat_config_num_params(&c)); goto out; }
    if ((st = layout_fill(&s, &ly, p))) { free(p); goto out; }
    *shape = c;
    *params = p;
out:
    layout_clear(&ly);
    return st;
}

remat_status remat_llmc_parse(const void *buf, size_t n, remat_config *shape, float **params)
{
    return parse_mem(buf, n, REMAT_WEIGHTS_LLMC, 0, shape, params);
}

remat_status remat_safetensors_parse(const void *buf, size_t n, int n_head_hint, remat_config *shape, float **params)
{
    return parse_mem(buf, n, REMAT_WEIGHTS_SAFETENSORS, n_head_hint, shape, params);
}

/* ---- files ------------------------------------------------------------------------------- */

static remat_status open_src(const char *path, wsrc *s)
{
    memset(s, 0, sizeof *s);
    s->name = path;
    if (!path) return remat_fail(REMAT_ERR_INVALID, "weights path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return remat_fail(REMAT_ERR_IO, "cannot open weights file '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return remat_fail(REMAT_ERR_IO, "weights path '%s' is not a regular file", path);
    }
    s->f = f;
    s->size = (uint64_t)sb.st_size;
    return REMAT_OK;
}

remat_status remat_weights_probe(const char *path, remat_config *shape, remat_weights_format *format)
{
    wsrc s;
    wlayout ly;
    remat_status st;
    if (!shape) return remat_fail(REMAT_ERR_INVALID, "remat_weights_probe: shape is NULL");
    if ((st = open_src(path, &s))) return st;
    if (!(st = any_layout(&s, REMAT_WEIGHTS_AUTO, &ly))) {
        shape->n_layer = ly.shape.n_layer;
        shape->n_embd = ly.shape.n_embd;
        shape->n_head = ly.shape.n_head;
        shape->vocab = ly.shape.vocab;
        shape->max_seq = ly.shape.max_seq;
        if (format) *format = ly.format;
        layout_clear(&ly);
    }
    fclose(s.f);
    return st;
}

remat_status remat_weights_load(const char *path, const remat_config *base, uint64_t seed, remat_model **out)
{
    wsrc s;
    wlayout ly;
    remat_model *m = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_weights_load: out is NULL");
    *out = NULL;
    if (!base) return remat_fail(REMAT_ERR_INVALID, "remat_weights_load: base config is NULL");
    if ((st = open_src(path, &s))) return st;
    memset(&ly, 0, sizeof ly);
    if ((st = any_layout(&s, REMAT_WEIGHTS_AUTO, &ly))) goto out;
    remat_config shape, c = *base;   /* the step's shape and options from base */
    if ((st = layout_config(&ly, path, base->n_head, &shape))) goto out;
    if (base->seq > shape.max_seq) {
        st = remat_fail(REMAT_ERR_INVALID, "seq %d is longer than the %d positions of '%s'; use --seq %d or less",
                        base->seq, shape.max_seq, path, shape.max_seq);
        goto out;
    }
    c.n_layer = shape.n_layer;
    c.n_embd = shape.n_embd;
    c.n_head = shape.n_head;
    c.vocab = shape.vocab;
    c.max_seq = shape.max_seq;
    if ((st = remat_model_create(&c, seed, &m))) goto out;
    /* padded vocabulary rows stay as remat_model_create left them: zero */
    if ((st = layout_fill(&s, &ly, m->params))) goto out;
    *out = m;
    m = NULL;
out:
    remat_model_free(m);
    layout_clear(&ly);
    fclose(s.f);
    return st;
}

remat_status remat_weights_save(const remat_model *m, const char *path, remat_weights_format format)
{
    if (!m || !path) return remat_fail(REMAT_ERR_INVALID, "remat_weights_save: NULL argument");
    if (format != REMAT_WEIGHTS_LLMC && format != REMAT_WEIGHTS_SAFETENSORS)
        return remat_fail(REMAT_ERR_INVALID, "weights format %d: choose llmc or safetensors", (int)format);
    remat_atomic_file a;
    remat_status st;
    if ((st = remat_atomic_begin(&a, path))) return st;
    if ((st = remat_weights_write(a.f, &m->cfg, m->params, format))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        remat_atomic_abort(&a);
        return remat_fail(st, "cannot write '%s': %s", path, msg);
    }
    return remat_atomic_commit(&a);
}
