/*
 * safetensors.c -- safetensors files with Hugging Face GPT-2 names, read
 * into a layout and written (the shared parts are in weights.c).
 *
 * Format (github.com/huggingface/safetensors, "Format"): u64 LE header
 *   length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 *   "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v", ...}},
 *   then the data region; offsets are relative to it.  The grammar below
 *   (on the JSON reader of json.h) knows exactly this (objects of those
 *   three fields, a metadata object of strings, unsigned integers) and
 *   rejects anything else.  Every tensor's byte range is checked against
 *   the data region and against the others (the ranges must tile the
 *   region, as the reference reader requires), every shape against the one
 *   the model needs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../kernels/bf16.h"
#include "../core/core.h"
#include "../core/endian.h"
#include "../engine/model.h"
#include "io.h"
#include "json.h"
#include "weights.h"

#define ST_MAX_RANK 8
#define ST_PREFIX "transformer."

/* ---- the header's JSON grammar ------------------------------------------------------ */

enum { DT_BF16, DT_F32 };   /* the two remat reads come first */
static const struct { const char *name; int size; } st_dtypes[] = {
    [DT_BF16] = {"BF16", 2}, [DT_F32] = {"F32", 4},
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
    {"F16", 2}, {"I32", 4}, {"U32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};

typedef struct st_entry {
    char *name;                 /* without the "transformer." prefix */
    int dtype;                  /* index into st_dtypes */
    int rank;
    uint64_t shape[ST_MAX_RANK];
    uint64_t begin, end;        /* relative to the data region */
    int kind;                   /* st_classify(name, &layer), stored when */
    long layer;                 /* the layout checks the names */
} st_entry;

typedef struct st_parser {
    remat_json json;
    st_entry *e;
    size_t ne, cap;
    char **meta;                /* metadata keys, for the duplicate check */
    size_t nmeta, metacap;
    int have_meta;
    int n_head;                 /* from __metadata__ "n_head", 0 if absent */
} st_parser;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static remat_status st_meta(st_parser *j)
{
    remat_json *js = &j->json;
    remat_status st;
    if (j->have_meta) return remat_json_error(js, "duplicate __metadata__");
    j->have_meta = 1;
    if (!remat_json_eat(js, '{')) return remat_json_error(js, "__metadata__ must be an object");
    if (remat_json_eat(js, '}')) return REMAT_OK;
    do {
        char *k = NULL, *v = NULL;
        if ((st = remat_json_string(js, &k))) return st;
        if (j->nmeta == j->metacap) {
            size_t cap = j->metacap ? 2 * j->metacap : 16;
            char **m = remat_realloc(j->meta, cap * sizeof *m);
            if (!m) { free(k); return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing a safetensors header"); }
            j->meta = m;
            j->metacap = cap;
        }
        j->meta[j->nmeta++] = k;
        if (!remat_json_eat(js, ':')) return remat_json_error(js, "expected ':'");
        if ((st = remat_json_string(js, &v)))
            return st == REMAT_ERR_FORMAT ? remat_json_error(js, "__metadata__ values must be strings") : st;
        if (!strcmp(k, "n_head")) {
            char *end;
            errno = 0;
            long h = strtol(v, &end, 10);
            if (!*v || *end || errno || h < 1 || h > REMAT_MAX_EMBD || *v < '1' || *v > '9') {
                free(v);
                return remat_fail(REMAT_ERR_FORMAT, "%s: __metadata__ n_head must be a whole number in [1, %d]",
                                  js->src, REMAT_MAX_EMBD);
            }
            j->n_head = (int)h;
        }
        free(v);
    } while (remat_json_eat(js, ','));
    if (!remat_json_eat(js, '}')) return remat_json_error(js, "expected ',' or '}' in __metadata__");
    if (j->nmeta > 1) qsort(j->meta, j->nmeta, sizeof *j->meta, cmp_str);
    for (size_t i = 1; i < j->nmeta; i++)
        if (!strcmp(j->meta[i - 1], j->meta[i]))
            return remat_fail(REMAT_ERR_FORMAT, "%s: duplicate __metadata__ key '%.64s'", js->src, j->meta[i]);
    return REMAT_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} in any order, each
 * exactly once */
static remat_status st_tensor(st_parser *j, st_entry *e)
{
    remat_json *js = &j->json;
    remat_status st;
    int seen = 0;
    if (!remat_json_eat(js, '{')) return remat_json_error(js, "a tensor entry must be an object");
    do {
        char *k = NULL;
        if ((st = remat_json_string(js, &k))) return st;
        int bit = !strcmp(k, "dtype") ? 1 : !strcmp(k, "shape") ? 2 : !strcmp(k, "data_offsets") ? 4 : 0;
        free(k);
        if (!bit)
            return remat_json_error(js, "unknown field in a tensor entry (expected dtype, shape, data_offsets)");
        if (seen & bit) return remat_json_error(js, "duplicate field in a tensor entry");
        seen |= bit;
        if (!remat_json_eat(js, ':')) return remat_json_error(js, "expected ':'");
        if (bit == 1) {
            char *d = NULL;
            if ((st = remat_json_string(js, &d))) return st;
            e->dtype = -1;
            for (int i = 0; i < (int)(sizeof st_dtypes / sizeof st_dtypes[0]); i++)
                if (!strcmp(d, st_dtypes[i].name)) e->dtype = i;
            free(d);
            if (e->dtype < 0) return remat_json_error(js, "unknown dtype");
        } else if (bit == 2) {
            if ((st = remat_json_uint_array(js, e->shape, ST_MAX_RANK, &e->rank))) return st;
        } else {
            uint64_t v[2];
            int n;
            if ((st = remat_json_uint_array(js, v, 2, &n))) return st;
            if (n != 2) return remat_json_error(js, "data_offsets must be [begin, end]");
            e->begin = v[0];
            e->end = v[1];
        }
    } while (remat_json_eat(js, ','));
    if (!remat_json_eat(js, '}')) return remat_json_error(js, "expected ',' or '}' in a tensor entry");
    if (seen != 7) return remat_json_error(js, "a tensor entry needs dtype, shape and data_offsets");
    return REMAT_OK;
}

static void st_parser_clear(st_parser *j)
{
    for (size_t i = 0; i < j->ne; i++) free(j->e[i].name);
    free(j->e);
    for (size_t i = 0; i < j->nmeta; i++) free(j->meta[i]);
    free(j->meta);
}

static remat_status st_header(st_parser *j)
{
    remat_json *js = &j->json;
    remat_status st;
    if (!remat_json_eat(js, '{')) return remat_json_error(js, "expected '{'");
    if (!remat_json_eat(js, '}')) {
        do {
            char *k = NULL;
            if ((st = remat_json_string(js, &k))) return st;
            if (!remat_json_eat(js, ':')) { free(k); return remat_json_error(js, "expected ':'"); }
            if (!strcmp(k, "__metadata__")) {
                free(k);
                if ((st = st_meta(j))) return st;
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
            if ((st = st_tensor(j, e))) return st;
        } while (remat_json_eat(js, ','));
        if (!remat_json_eat(js, '}')) return remat_json_error(js, "expected ',' or '}'");
    }
    if (!remat_json_at_end(js))   /* writers pad the header with spaces */
        return remat_json_error(js, "trailing characters after the header object");
    return REMAT_OK;
}

/* ---- safetensors: names and shapes ---------------------------------------------- */

/* Per-block tensors in remat's parameter order, with HF names and whether
 * Conv1D stores them transposed. */
static const struct { const char *hf; int param; int transpose; } st_block[] = {
    {"ln_1.weight", GP_LN1W, 0},           {"ln_1.bias", GP_LN1B, 0},
    {"attn.c_attn.weight", GP_QKVW, 1},    {"attn.c_attn.bias", GP_QKVB, 0},
    {"attn.c_proj.weight", GP_ATTPROJW, 1}, {"attn.c_proj.bias", GP_ATTPROJB, 0},
    {"ln_2.weight", GP_LN2W, 0},           {"ln_2.bias", GP_LN2B, 0},
    {"mlp.c_fc.weight", GP_FCW, 1},        {"mlp.c_fc.bias", GP_FCB, 0},
    {"mlp.c_proj.weight", GP_FCPROJW, 1},  {"mlp.c_proj.bias", GP_FCPROJB, 0},
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

static remat_status shape_is(const remat_wsrc *s, const st_entry *e, uint64_t d0, uint64_t d1, int rank)
{
    if (e->dtype != DT_F32 && e->dtype != DT_BF16)
        return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has dtype %s; remat reads F32 and BF16", s->name, e->name,
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

/* Reads the header's length and its JSON into *j (the text in *hdr, which
 * the caller frees, as it clears *j); *data0 = where the data region starts. */
static remat_status st_read_header(const remat_wsrc *s, st_parser *j, char **hdr, uint64_t *data0)
{
    remat_status st;
    unsigned char lb[8];
    if (s->size < 8)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, too short for a safetensors header length", s->name,
                          (unsigned long long)s->size);
    if ((st = remat_wsrc_read(s, 0, lb, 8))) return st;
    uint64_t N = remat_get_le64(lb);
    if (N > REMAT_SAFETENSORS_MAX_HEADER)
        return remat_fail(REMAT_ERR_FORMAT, "%s: safetensors header length %llu is over the %u-byte limit; the file "
                          "is corrupt", s->name, (unsigned long long)N, REMAT_SAFETENSORS_MAX_HEADER);
    if (N > s->size - 8)
        return remat_fail(REMAT_ERR_FORMAT, "%s: safetensors header length %llu runs past the end of the file (%llu "
                          "bytes); the file is truncated or corrupt", s->name, (unsigned long long)N,
                          (unsigned long long)s->size);
    *data0 = 8 + N;
    if (!(*hdr = remat_malloc((size_t)N + 1))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    if ((st = remat_wsrc_read(s, 8, *hdr, (size_t)N))) return st;
    (*hdr)[N] = 0;
    remat_json_init(&j->json, *hdr, (size_t)N, s->name, "safetensors header");
    return st_header(j);
}

/* Every tensor's byte range lies in the dsize-byte data region and is as
 * long as its dtype and shape need; no name appears twice (leaves j->e
 * sorted by name); the ranges tile the region, without gaps or overlaps. */
static remat_status st_check_ranges(const remat_wsrc *s, st_parser *j, uint64_t dsize)
{
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < j->ne; i++) {
        st_entry *e = &j->e[i];
        int ok = 1;
        uint64_t bytes = (uint64_t)st_dtypes[e->dtype].size;
        for (int d = 0; d < e->rank; d++) bytes = remat_mul(bytes, e->shape[d], &ok);
        if (e->begin > e->end || e->end > dsize)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has data_offsets [%llu, %llu] outside the %llu-byte "
                              "data region", s->name, e->name, (unsigned long long)e->begin,
                              (unsigned long long)e->end, (unsigned long long)dsize);
        if (!ok || e->end - e->begin != bytes)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s spans %llu bytes but its dtype and shape need %s%llu",
                              s->name, e->name, (unsigned long long)(e->end - e->begin), ok ? "" : "more than ",
                              (unsigned long long)bytes);
    }
    if (j->ne > 1) qsort(j->e, j->ne, sizeof *j->e, cmp_entry_name);
    for (size_t i = 1; i < j->ne; i++)
        if (!strcmp(j->e[i - 1].name, j->e[i].name))
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s appears twice (with or without the '%s' prefix)",
                              s->name, j->e[i].name, ST_PREFIX);
    st_entry *byoff = remat_malloc((j->ne ? j->ne : 1) * sizeof *byoff);
    if (!byoff) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    if (j->ne) memcpy(byoff, j->e, j->ne * sizeof *byoff);
    if (j->ne > 1) qsort(byoff, j->ne, sizeof *byoff, cmp_entry_off);
    uint64_t at = 0;
    for (size_t i = 0; i < j->ne && !st; i++) {
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
    return st;
}

/* Names -> parameters: every name is a GPT-2 tensor (or one remat ignores),
 * the globals are all there, and there is at least one block.  *gidx: the
 * entry of each global; *slot (remat_malloc'd, the caller frees it): the
 * entry of each (layer, block tensor), -1 where missing; *L: the number of
 * blocks (the highest index seen, plus one). */
static remat_status st_index(const remat_wsrc *s, st_parser *j, long gidx[G_N], long **slot, int *L)
{
    long maxl = -1;
    for (int g = 0; g < G_N; g++) gidx[g] = -1;
    for (size_t i = 0; i < j->ne; i++) {
        long l;
        int k = j->e[i].kind = st_classify(j->e[i].name, &l);
        j->e[i].layer = l;
        if (k == -1)
            return remat_fail(REMAT_ERR_FORMAT, "%s: unknown tensor '%.200s' (not part of a GPT-2 model)", s->name,
                              j->e[i].name);
        if (k >= 0 && k < 100 && l >= REMAT_MAX_LAYERS)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s: block index %ld is over remat's limit of %d "
                              "layers", s->name, j->e[i].name, l, REMAT_MAX_LAYERS);
        if (k >= 100) gidx[k - 100] = (long)i;
        if (k >= 0 && k < 100 && l > maxl) maxl = l;
    }
    for (int g = 0; g < G_N; g++)
        if (gidx[g] < 0) return remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor %s", s->name, st_global[g]);
    if (maxl < 0) return remat_fail(REMAT_ERR_FORMAT, "%s: no transformer blocks (h.0.*)", s->name);
    *L = (int)maxl + 1;
    if (!(*slot = remat_malloc((size_t)*L * ST_NBLOCK * sizeof **slot)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    for (size_t i = 0; i < (size_t)*L * ST_NBLOCK; i++) (*slot)[i] = -1;
    for (size_t i = 0; i < j->ne; i++)
        if (j->e[i].kind >= 0 && j->e[i].kind < 100) (*slot)[j->e[i].layer * ST_NBLOCK + j->e[i].kind] = (long)i;
    return REMAT_OK;
}

/* The model's sizes from the globals' shapes (V, C from wte; maxT from wpe;
 * ln_f's vectors of C) into ly->shape, with L blocks and the metadata's
 * n_head. */
static remat_status st_model_shape(const remat_wsrc *s, const st_parser *j, const long gidx[G_N], int L,
                                   remat_wlayout *ly)
{
    remat_status st;
    const st_entry *wte = &j->e[gidx[G_WTE]], *wpe = &j->e[gidx[G_WPE]];
    if (wte->rank != 2 || wpe->rank != 2 || wte->shape[1] != wpe->shape[1] || wte->shape[0] < REMAT_MIN_VOCAB ||
        wte->shape[0] > REMAT_MAX_VOCAB || wte->shape[1] < 1 || wte->shape[1] > REMAT_MAX_EMBD || wpe->shape[0] < 1 ||
        wpe->shape[0] > REMAT_MAX_SEQ)
        return remat_fail(REMAT_ERR_FORMAT, "%s: wte.weight must be [V, C] and wpe.weight [maxT, C] with V in [%d, %d], "
                          "C in [1, %d], maxT in [1, %d]", s->name, REMAT_MIN_VOCAB, REMAT_MAX_VOCAB, REMAT_MAX_EMBD,
                          REMAT_MAX_SEQ);
    uint64_t V = wte->shape[0], C = wte->shape[1], T = wpe->shape[0];
    if ((st = shape_is(s, wte, V, C, 2)) || (st = shape_is(s, wpe, T, C, 2)) ||
        (st = shape_is(s, &j->e[gidx[G_LNFW]], C, 0, 1)) || (st = shape_is(s, &j->e[gidx[G_LNFB]], C, 0, 1)))
        return st;
    ly->format = REMAT_WEIGHTS_SAFETENSORS;
    ly->shape.n_layer = L;
    ly->shape.n_embd = (int)C;
    ly->shape.vocab = (int)V;
    ly->shape.max_seq = (int)T;
    ly->shape.n_head = j->n_head;
    return REMAT_OK;
}

/* One piece per parameter tensor, into ly->p, after checking every block
 * tensor is present with the shape ly->shape needs. */
static remat_status st_pieces(const remat_wsrc *s, const st_parser *j, const long gidx[G_N], const long *slot,
                              uint64_t data0, remat_wlayout *ly)
{
    remat_status st;
    remat_config c;
    if ((st = remat_wlayout_config(ly, s->name, 1, &c))) return st;   /* sizes only; heads resolved later */
    int L = ly->shape.n_layer;
    remat_param_layout ply;
    remat_param_layout_of(&c, &ply);
    ly->np = 4 + (size_t)L * ST_NBLOCK;
    if (!(ly->p = remat_calloc(ly->np, sizeof *ly->p))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s",
                                                                           s->name);
    /* the globals, in remat's order: wte (V, C), wpe (maxT, C), ln_f (C) twice */
    static const int gparam[G_N] = { GP_WTE, GP_WPE, GP_LNFW, GP_LNFB };
    size_t grows[G_N] = { (size_t)ly->shape.vocab, (size_t)ly->shape.max_seq, (size_t)ly->shape.n_embd,
                          (size_t)ly->shape.n_embd };
    size_t gcols[G_N] = { (size_t)ly->shape.n_embd, (size_t)ly->shape.n_embd, 1, 1 };
    for (int g = 0; g < G_N; g++) {
        const st_entry *e = &j->e[gidx[g]];
        ly->p[g] = (remat_wpiece){ data0 + e->begin, ply.off[gparam[g]], grows[g], gcols[g], 0, e->dtype == DT_BF16 };
    }
    for (int l = 0; l < L; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            long i = slot[l * ST_NBLOCK + k];
            if (i < 0)
                return remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor h.%d.%s (blocks 0..%d are present)", s->name,
                                  l, st_block[k].hf, L - 1);
            const st_entry *e = &j->e[i];
            int pi = st_block[k].param;
            size_t rows = (size_t)ply.shape[pi][1], cols = ply.shape[pi][2] ? (size_t)ply.shape[pi][2] : 1;
            /* HF: Conv1D weight (in, out) = (cols, rows); vectors (rows) */
            if ((st = st_block[k].transpose ? shape_is(s, e, cols, rows, 2) : shape_is(s, e, rows, 0, 1))) return st;
            ly->p[4 + (size_t)l * ST_NBLOCK + k] = (remat_wpiece){ data0 + e->begin, ply.off[pi] + (size_t)l * rows * cols,
                                                                   rows, cols, st_block[k].transpose,
                                                                   e->dtype == DT_BF16 };
        }
    return REMAT_OK;
}

/* The header, its byte ranges, its names, the model's shape, the pieces:
 * each step as its function's comment says; on failure *ly holds nothing. */
remat_status remat_safetensors_layout(const remat_wsrc *s, remat_wlayout *ly)
{
    remat_status st;
    st_parser j;
    char *hdr = NULL;
    long *slot = NULL;   /* entry index per (layer, block tensor) */
    long gidx[G_N];
    uint64_t data0 = 0;
    int L = 0;
    memset(&j, 0, sizeof j);
    memset(ly, 0, sizeof *ly);
    if ((st = st_read_header(s, &j, &hdr, &data0)) || (st = st_check_ranges(s, &j, s->size - data0)) ||
        (st = st_index(s, &j, gidx, &slot, &L)) || (st = st_model_shape(s, &j, gidx, L, ly)) ||
        (st = st_pieces(s, &j, gidx, slot, data0, ly)))
        remat_wlayout_clear(ly);
    free(slot);
    free(hdr);
    st_parser_clear(&j);
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

/* Writes rows x cols floats (row-major at src) as little-endian float32,
 * or bf16 (rounded to nearest even), or their (cols x rows) transpose. */
static remat_status write_f32(FILE *f, const float *src, size_t rows, size_t cols, int transpose, float *tmp,
                              size_t tmpn, remat_dtype dt)
{
    if (dt == REMAT_DTYPE_BF16) {   /* tmp holds tmpn floats: 2 tmpn bf16 */
        unsigned char *o = (unsigned char *)tmp;
        size_t n = rows * cols, cap = 2 * tmpn;
        for (size_t i = 0; i < n; i += cap) {
            size_t m = n - i < cap ? n - i : cap;
            for (size_t k = 0; k < m; k++) {
                size_t e = i + k;   /* output element e: row-major in the written (transposed) shape */
                float x = transpose ? src[(e % rows) * cols + e / rows] : src[e];
                remat_put_le16(o + 2 * k, remat_bf16_round(x));
            }
            if (fwrite(o, 2, m, f) != m) return REMAT_ERR_IO;
        }
        return REMAT_OK;
    }
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

remat_status remat_safetensors_write(FILE *f, const remat_config *c, const float *params, remat_dtype dt)
{
    const char *dname = dt == REMAT_DTYPE_BF16 ? "BF16" : "F32";
    uint64_t es = remat_dtype_bytes(dt);
    remat_status st = REMAT_OK;
    sbuf b = { NULL, 0, 0 };
    float *tmp = NULL;
    remat_param_layout ply;
    remat_param_layout_of(c, &ply);
    uint64_t C = (uint64_t)c->n_embd, at = 0;
    int ok = sb_printf(&b, "{\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"%d\"}", c->n_head);
#define ENTRY(name, ...) do {                                                                              \
        uint64_t dims_[2] = { __VA_ARGS__ }, n_ = dims_[0] * (dims_[1] ? dims_[1] : 1);                 \
        ok = ok && (dims_[1] ? sb_printf(&b, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],"            \
                                         "\"data_offsets\":[%llu,%llu]}", name, dname,                    \
                                         (unsigned long long)dims_[0], (unsigned long long)dims_[1],      \
                                         (unsigned long long)at, (unsigned long long)(at + es * n_))      \
                             : sb_printf(&b, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],"                 \
                                         "\"data_offsets\":[%llu,%llu]}", name, dname,                    \
                                         (unsigned long long)dims_[0], (unsigned long long)at,            \
                                         (unsigned long long)(at + es * n_)));                            \
        at += es * n_;                                                                                    \
    } while (0)
    ENTRY("wte.weight", (uint64_t)c->vocab, C);
    ENTRY("wpe.weight", (uint64_t)c->max_seq, C);
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            char name[64];
            int pi = st_block[k].param;
            uint64_t rows = (uint64_t)ply.shape[pi][1], cols = ply.shape[pi][2] ? (uint64_t)ply.shape[pi][2] : 0;
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
    if ((st = write_f32(f, params + ply.off[GP_WTE], (size_t)c->vocab, (size_t)C, 0, tmp, tmpn, dt)) ||
        (st = write_f32(f, params + ply.off[GP_WPE], (size_t)c->max_seq, (size_t)C, 0, tmp, tmpn, dt)))
        goto out;
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < ST_NBLOCK; k++) {
            int pi = st_block[k].param;
            size_t rows = (size_t)ply.shape[pi][1], cols = ply.shape[pi][2] ? (size_t)ply.shape[pi][2] : 1;
            if ((st = write_f32(f, params + ply.off[pi] + (size_t)l * rows * cols, rows, cols, st_block[k].transpose,
                                tmp, tmpn, dt)))
                goto out;
        }
    if ((st = write_f32(f, params + ply.off[GP_LNFW], (size_t)C, 1, 0, tmp, tmpn, dt)) ||
        (st = write_f32(f, params + ply.off[GP_LNFB], (size_t)C, 1, 0, tmp, tmpn, dt)))
        goto out;
out:
    free(b.s);
    free(tmp);
    return st;
}
