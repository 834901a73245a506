/*
 * hfnames.c -- safetensors tensors <-> remat's parameters, through the
 * parameter table's Hugging Face names (table/params.h): the only place in
 * src/io that knows a model has named tensors, and it knows no model: every
 * name, shape, row piece, transpose, prefix and ignored buffer comes from
 * the table of the architecture at hand.
 *
 * Reading is two steps (weights.h):
 *   remat_hf_names: the architecture is the one whose token embedding the
 *     file names (GPT-2's wte.weight, Llama's model.embed_tokens.weight);
 *     every name must be one of its pieces (a per-block pattern "...%d..."
 *     matched with a block index written without leading zeros) or one it
 *     ignores; the shapes then fix what they can: each file dimension is a
 *     formula over the named dimensions (remat_expr), and a formula with one
 *     unknown factor left is solved for it, until nothing changes.  Shapes
 *     give C, V, maxT, F, NH hs and KV hs; NH itself comes from the
 *     metadata (remat writes "n_head", and "n_kv_head" and "head_dim" where
 *     the table's shapes name them) or from the caller.
 *   remat_hf_bind: with the config complete, every tensor the model has
 *     must be there with exactly the shape the config gives it, in F32 or
 *     BF16, and becomes a piece: a block of rows of a parameter's slice.
 * A tied model's head (the table's untied tensor) is ignored when a file
 * holds it anyway; without a config, its presence unties the head.
 *
 * The files' padded vocabulary rows are not stored: a parameter with
 * vocab_rows has V rows in a file, Vp in remat.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "../table/params.h"
#include "../table/tensors.h"
#include "weights.h"

#define MAX_BLOCKS REMAT_MAX_LAYERS   /* remat_config_check's limit on n_layer */

static const remat_param_table *table_of(remat_arch a)
{
    remat_config c;
    memset(&c, 0, sizeof c);
    c.arch = a;
    return remat_params_of(&c);
}

static const remat_expr vocab_rows = RX(RX_T(1, RD_V));

/* The file shape of piece k of parameter d as formulas e[0, rank): a
 * vector (rows), a matrix (rows, cols), or its transpose (cols, rows). */
static int file_exprs(const remat_param_def *d, int k, remat_expr e[2])
{
    remat_expr rows = d->vocab_rows ? vocab_rows : remat_expr_empty(&d->hf[k].rows) ? d->rows : d->hf[k].rows;
    if (remat_expr_empty(&d->cols)) { e[0] = rows; return 1; }
    e[0] = d->hf[k].transpose ? d->cols : rows;
    e[1] = d->hf[k].transpose ? rows : d->cols;
    return 2;
}

static uint32_t expr_dims(const remat_expr *e)
{
    uint32_t m = 0;
    for (int t = 0; t < RX_TERMS; t++)
        for (int f = 0; e->t[t].k && f < RX_FACTORS; f++)
            if (e->t[t].d[f]) m |= 1u << e->t[t].d[f];
    return m;
}

/* the dimensions the table's file shapes are written in */
static uint32_t table_dims(const remat_param_table *pt)
{
    uint32_t m = 0;
    for (int i = 0; i < pt->count; i++)
        for (int k = 0; k < pt->defs[i].npiece; k++) {
            remat_expr e[2];
            int r = file_exprs(&pt->defs[i], k, e);
            for (int j = 0; j < r; j++) m |= expr_dims(&e[j]);
        }
    return m;
}

uint32_t remat_hf_meta_dims(const remat_config *c) { return table_dims(remat_params_of(c)); }

/* The config field of a dimension the files can fix, or NULL (derived ones:
 * Vp, the step's B and T, ...). */
static int *dim_field(remat_config *c, int dim)
{
    switch (dim) {
    case RD_C: return &c->n_embd;
    case RD_V: return &c->vocab;
    case RD_MAXT: return &c->max_seq;
    case RD_F: return &c->ffn_dim;
    case RD_NH: return &c->n_head;
    case RD_KV: return &c->n_kv_head;
    case RD_HS: return &c->head_dim;
    default: return NULL;
    }
}

static const char *dim_what(int dim)
{
    switch (dim) {
    case RD_C: return "width (C)";
    case RD_V: return "vocabulary (V)";
    case RD_MAXT: return "positions (maxT)";
    case RD_F: return "MLP width (F)";
    case RD_NH: return "heads (NH)";
    case RD_KV: return "key/value heads (KV)";
    case RD_HS: return "head size (hs)";
    default: return "dimensions";
    }
}

/* a piece's pattern with its block filled in */
static void piece_name(const remat_param_def *d, int k, int l, char *buf, size_t n)
{
    if (d->per_layer) snprintf(buf, n, d->hf[k].name, l);
    else snprintf(buf, n, "%s", d->hf[k].name);
}

/* The name without the table's optional prefix. */
static const char *strip(const remat_param_table *pt, const char *name)
{
    size_t n = pt->hf_prefix ? strlen(pt->hf_prefix) : 0;
    return n && !strncmp(name, pt->hf_prefix, n) ? name + n : name;
}

/* 1 when s is pattern pat, whose "%d" (if any) stands for a block index
 * written without leading zeros (into *layer; -1 without one) */
static int name_match(const char *pat, const char *s, long *layer)
{
    const char *pc = strstr(pat, "%d");
    *layer = -1;
    if (!pc) return !strcmp(pat, s);
    size_t pre = (size_t)(pc - pat);
    if (strncmp(pat, s, pre)) return 0;
    const char *p = s + pre;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    long l = 0;
    for (int nd = 0; *p >= '0' && *p <= '9'; nd++) {
        if (nd == 9) return 0;
        l = l * 10 + (*p++ - '0');
    }
    if (strcmp(p, pc + 2)) return 0;
    *layer = l;
    return 1;
}

/* 1: piece *k of parameter *i (block *layer); 0: a name the table ignores;
 * -1: unknown */
static int classify(const remat_param_table *pt, const char *key, int *i, int *k, long *layer)
{
    for (*i = 0; *i < pt->count; (*i)++)
        for (*k = 0; *k < pt->defs[*i].npiece; (*k)++)
            if (name_match(pt->defs[*i].hf[*k].name, key, layer) && (*layer >= 0) == pt->defs[*i].per_layer) return 1;
    for (const char *const *ig = pt->hf_ignored; ig && *ig; ig++)
        if (name_match(*ig, key, layer)) return 0;
    return -1;
}

static const char *src_of(const remat_wlayout *ly, const remat_st_tensor *t, const char *name)
{
    return ly->nsrc ? ly->srcs[t->src] : name;
}

static void shape_text(const uint64_t *d, int rank, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < rank && at + 24 < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
}

/* ---- solving the shapes for the dimensions ------------------------------------ */

typedef struct hf_dims { uint64_t d[RD_COUNT]; uint32_t known; } hf_dims;
_Static_assert(RD_COUNT <= 32, "hf_dims.known is a 32-bit mask over the dimensions: widen it");

static void dims_set(hf_dims *s, int dim, uint64_t v)
{
    s->d[dim] = v;
    s->known |= 1u << dim;
}

/* e = v with exactly one unknown factor left (in one term): solves for it.
 * 1 when it did. */
static int solve_one(const remat_expr *e, uint64_t v, hf_dims *s)
{
    uint64_t sum = 0, coef = 0;
    int unk = -1, ok = 1;
    for (int t = 0; t < RX_TERMS; t++) {
        if (!e->t[t].k) continue;
        uint64_t prod = (uint64_t)e->t[t].k;
        int u = -1, nu = 0;
        for (int f = 0; f < RX_FACTORS; f++) {
            int dim = e->t[t].d[f];
            if (!dim) continue;
            if (s->known & (1u << dim)) prod = remat_mul(prod, s->d[dim], &ok);
            else { nu += dim != u; u = dim; }
        }
        if (!nu) sum = remat_add(sum, prod, &ok);
        else if (nu == 1 && unk < 0) { unk = u; coef = prod; }
        else return 0;   /* two unknowns (NH hs without the heads), or a square */
    }
    if (!ok || unk < 0 || sum >= v || (v - sum) % coef) return 0;
    dims_set(s, unk, (v - sum) / coef);
    return 1;
}

/* solves every tensor's shape until nothing more follows */
static void solve_all(const remat_wlayout *ly, const remat_param_table *pt, hf_dims *s)
{
    int progress = 1;
    while (progress) {
        progress = 0;
        for (size_t i = 0; i < ly->nt; i++) {
            const remat_st_tensor *t = &ly->t[i];
            if (t->param < 0) continue;
            remat_expr e[2];
            int r = file_exprs(&pt->defs[t->param], t->piece, e);
            for (int j = 0; j < r; j++) progress |= solve_one(&e[j], t->shape[j], s);
        }
    }
}

/* the known dimensions of a (partial) config and the metadata */
static void dims_of_config(const remat_config *c, const remat_st_meta *m, hf_dims *s)
{
    memset(s, 0, sizeof *s);
    dims_set(s, RD_1, 1);
    remat_config cc = *c;
    for (int dim = 0; dim < RD_COUNT; dim++) {
        int *f = dim_field(&cc, dim);
        if (f && *f > 0) dims_set(s, dim, (uint64_t)*f);
    }
    if (m->n_head && !(s->known & (1u << RD_NH))) dims_set(s, RD_NH, (uint64_t)m->n_head);
    if (m->n_kv_head && !(s->known & (1u << RD_KV))) dims_set(s, RD_KV, (uint64_t)m->n_kv_head);
    if (m->head_dim && !(s->known & (1u << RD_HS))) dims_set(s, RD_HS, (uint64_t)m->head_dim);
}

/* the known dimensions into c's fields */
static remat_status dims_to_config(const hf_dims *s, remat_config *c, const char *name)
{
    for (int dim = 0; dim < RD_COUNT; dim++) {
        int *f = dim_field(c, dim);
        if (!f || !(s->known & (1u << dim))) continue;
        if (s->d[dim] > 1u << 30)
            return remat_fail(REMAT_ERR_FORMAT, "%s: the tensors' shapes make the %s %llu, too large", name,
                              dim_what(dim), (unsigned long long)s->d[dim]);
        *f = (int)s->d[dim];
    }
    return REMAT_OK;
}

/* ---- names ---------------------------------------------------------------------- */

/* The architecture whose token embedding the file names. */
static remat_status infer_arch(const remat_wlayout *ly, const char *name, const remat_param_table **out)
{
    char tried[256] = "";
    size_t at = 0;
    for (int a = 0; strcmp(remat_arch_name((remat_arch)a), "?"); a++) {
        const remat_param_table *pt = table_of((remat_arch)a);
        const char *emb = pt->defs[pt->wte].hf[0].name;
        for (size_t i = 0; i < ly->nt; i++)
            if (!strcmp(strip(pt, ly->t[i].name), emb)) { *out = pt; return REMAT_OK; }
        if (at < sizeof tried)
            at += (size_t)snprintf(tried + at, sizeof tried - at, "%s%s (%s)", at ? " nor " : "", emb,
                                   remat_arch_name((remat_arch)a));
    }
    return remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor: no token embedding, neither %s; not a model remat reads",
                      name, tried);
}

typedef struct hf_key { const char *key; const remat_st_tensor *t; } hf_key;
static int cmp_key(const void *a, const void *b) { return strcmp(((const hf_key *)a)->key, ((const hf_key *)b)->key); }

/* no name twice, with or without the table's prefix, in one file or two */
static remat_status check_unique(const remat_wlayout *ly, const remat_param_table *pt, const char *name)
{
    remat_status st = REMAT_OK;
    if (ly->nt < 2) return REMAT_OK;
    hf_key *by = remat_malloc(ly->nt * sizeof *by);
    if (!by) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", name);
    for (size_t i = 0; i < ly->nt; i++) by[i] = (hf_key){ strip(pt, ly->t[i].name), &ly->t[i] };
    qsort(by, ly->nt, sizeof *by, cmp_key);
    for (size_t i = 1; i < ly->nt && !st; i++) {
        const remat_st_tensor *a = by[i - 1].t, *b = by[i].t;
        if (strcmp(by[i - 1].key, by[i].key)) continue;
        if (a->src != b->src)
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s is in two files, %s and %s", name, by[i].key,
                            src_of(ly, a, name), src_of(ly, b, name));
        else
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s appears twice%s%s%s", src_of(ly, a, name), by[i].key,
                            pt->hf_prefix ? " (with or without the '" : "", pt->hf_prefix ? pt->hf_prefix : "",
                            pt->hf_prefix ? "' prefix)" : "");
    }
    free(by);
    return st;
}

remat_status remat_hf_names(remat_wlayout *ly, const char *name)
{
    remat_status st;
    const remat_param_table *pt = remat_params_of(&ly->shape);
    if (!ly->fixed && (st = infer_arch(ly, name, &pt))) return st;
    ly->nblock = 0;
    for (size_t i = 0; i < ly->nt; i++) {
        remat_st_tensor *t = &ly->t[i];
        const char *key = strip(pt, t->name);
        long layer;
        int c = classify(pt, key, &t->param, &t->piece, &layer);
        if (c < 0)
            return remat_fail(REMAT_ERR_FORMAT, "%s: unknown tensor '%.200s' (not part of a %s model)", src_of(ly, t, name),
                              t->name, remat_arch_name(pt->arch));
        if (c == 0) { t->param = -1; t->layer = -1; continue; }
        if (layer >= MAX_BLOCKS)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s: block index %ld is over remat's limit of %d layers",
                              src_of(ly, t, name), t->name, layer, MAX_BLOCKS);
        t->layer = (int)layer;
        if (t->layer + 1 > ly->nblock) ly->nblock = t->layer + 1;
        remat_expr e[2];
        int r = file_exprs(&pt->defs[t->param], t->piece, e);
        char got[160];
        shape_text(t->shape, t->rank, got, sizeof got);
        if (t->rank != r)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s has shape [%s], expected %s", src_of(ly, t, name),
                              key, got, r == 1 ? "a vector" : "a matrix");
        if (t->dtype != REMAT_ST_F32 && t->dtype != REMAT_ST_BF16)
            return remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s has dtype %s; remat reads F32 and BF16",
                              src_of(ly, t, name), key, remat_st_dtype_name(t->dtype));
    }
    if ((st = check_unique(ly, pt, name))) return st;
    if (ly->fixed) return REMAT_OK;
    /* the sizes the shapes fix (and the metadata's) */
    remat_config *c = &ly->shape;
    memset(c, 0, sizeof *c);
    c->arch = pt->arch;
    if (!ly->nblock) {
        char first[160] = "";
        for (int i = 0; i < pt->count && !*first; i++)
            if (pt->defs[i].per_layer) piece_name(&pt->defs[i], 0, 0, first, sizeof first);
        return remat_fail(REMAT_ERR_FORMAT, "%s: no transformer blocks (no %s)", name, first);
    }
    c->n_layer = ly->nblock;
    hf_dims s;
    dims_of_config(c, &ly->meta, &s);
    solve_all(ly, pt, &s);
    if ((st = dims_to_config(&s, c, name))) return st;
    for (int i = 0; i < pt->count; i++)
        if (pt->defs[i].untied) {
            c->tie_embeddings = 1;
            for (size_t j = 0; j < ly->nt; j++) c->tie_embeddings &= ly->t[j].param != i;
        }
    return REMAT_OK;
}

/* ---- binding ---------------------------------------------------------------------- */

/* Where piece k of parameter i, block l lands in the flat vector: its rows,
 * cols (1 for a vector) and first element. */
static void piece_at(const remat_param_def *d, int k, int l, const remat_dims *dm, const remat_param_layout *ply, int i,
                     size_t *rows, size_t *cols, size_t *off)
{
    *cols = remat_expr_empty(&d->cols) ? 1 : (size_t)remat_expr_u64(&d->cols, dm);
    *rows = (size_t)remat_expr_u64(d->vocab_rows ? &vocab_rows : remat_expr_empty(&d->hf[k].rows) ? &d->rows
                                                                                                  : &d->hf[k].rows, dm);
    size_t row0 = remat_expr_empty(&d->hf[k].row0) ? 0 : (size_t)remat_expr_u64(&d->hf[k].row0, dm);
    *off = ply->off[i] + (d->per_layer ? (size_t)l * ply->player[i] : 0) + row0 * *cols;
}

static remat_status unknown_heads_fail(const char *name, int C)
{
    return remat_fail(REMAT_ERR_INVALID, "%s does not record the number of heads and its width %d is not a multiple of "
                      "64; give it (--heads)", name, C);
}

/* What the source leaves open, from hint (weights.h says how, at the
 * layout's config).
 * *unknown_heads: no number of heads was found, and 1 stands in for it
 * (only where the shapes do not name the heads, so that the tensors are
 * still checked: the file's faults come first). */
static remat_status resolve(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *c,
                            int *unknown_heads)
{
    remat_status st;
    const remat_param_table *pt = remat_params_of(c);
    uint32_t need = table_dims(pt);
    hf_dims s;
    dims_of_config(c, &ly->meta, &s);
    *unknown_heads = 0;
    if (!(s.known & (1u << RD_NH))) {
        int nh = hint && hint->n_head > 0 ? hint->n_head : c->n_embd > 0 && c->n_embd % 64 == 0 ? c->n_embd / 64 : 0;
        if (!nh && !(need & (1u << RD_NH))) *unknown_heads = nh = 1;
        if (!nh) return unknown_heads_fail(name, c->n_embd);
        dims_set(&s, RD_NH, (uint64_t)nh);
    }
    solve_all(ly, pt, &s);
    for (int dim = 0; dim < RD_COUNT; dim++)
        if ((need & (1u << dim)) && dim_field(c, dim) && !(s.known & (1u << dim)))
            return remat_fail(REMAT_ERR_FORMAT, "%s: the tensors' shapes do not fix the model's %s", name, dim_what(dim));
    if ((st = dims_to_config(&s, c, name))) return st;
    if (!c->max_seq) c->max_seq = hint && hint->max_seq > 0 ? hint->max_seq : 1;
    if (hint && hint->arch == c->arch) {   /* what no file of this architecture records */
        c->rope_theta = hint->rope_theta;
        c->rope_scaling = hint->rope_scaling;
        c->norm_eps = hint->norm_eps;
    }
    return REMAT_OK;
}

remat_status remat_hf_bind(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *out)
{
    remat_status st;
    remat_config c = ly->shape;
    c.batch = 1;
    c.seq = 1;
    c.dropout = 0.0f;
    int unknown_heads = 0;
    if (!ly->fixed && (st = resolve(ly, name, hint, &c, &unknown_heads))) return st;
    if ((st = remat_config_check(&c))) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        return remat_fail(REMAT_ERR_FORMAT, "%s: the model it describes is invalid: %s", name, msg);
    }
    const remat_st_meta *m = &ly->meta;
    if ((m->n_head && m->n_head != c.n_head) || (m->n_kv_head && m->n_kv_head != remat_config_kv_heads(&c)) ||
        (m->head_dim && m->head_dim != remat_config_head_dim(&c)))
        return remat_fail(REMAT_ERR_FORMAT, "%s: __metadata__ (n_head %d, n_kv_head %d, head_dim %d) contradicts the "
                          "model's %d heads, %d key/value heads and head size %d", name, m->n_head, m->n_kv_head,
                          m->head_dim, c.n_head, remat_config_kv_heads(&c), remat_config_head_dim(&c));
    const remat_param_table *pt = remat_params_of(&c);
    remat_param_layout ply;
    remat_param_layout_of(&c, &ply);
    remat_dims dm;
    remat_dims_of(&c, &dm);
    int L = c.n_layer;
    size_t nslot = (size_t)pt->count * RP_MAXPIECE * (size_t)L, np = 0;
    long *slot = remat_malloc(nslot * sizeof *slot);
    if (!slot) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", name);
    for (size_t i = 0; i < nslot; i++) slot[i] = -1;
    for (size_t j = 0; j < ly->nt; j++) {
        const remat_st_tensor *t = &ly->t[j];
        if (t->param < 0 || t->param >= ply.count) continue;   /* ignored, or the head of a tied model */
        if (t->layer >= L) {
            st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %.200s is in block %d, but the model has %d blocks",
                            src_of(ly, t, name), t->name, t->layer, L);
            goto out;
        }
        slot[((size_t)t->param * RP_MAXPIECE + (size_t)t->piece) * (size_t)L + (size_t)(t->layer < 0 ? 0 : t->layer)] = (long)j;
    }
    for (int i = 0; i < ply.count; i++) np += (size_t)pt->defs[i].npiece * (pt->defs[i].per_layer ? (size_t)L : 1);
    free(ly->p);
    ly->np = 0;
    if (!(ly->p = remat_calloc(np ? np : 1, sizeof *ly->p))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", name);
        goto out;
    }
    for (int i = 0; i < ply.count; i++) {
        const remat_param_def *d = &pt->defs[i];
        for (int k = 0; k < d->npiece; k++)
            for (int l = 0; l < (d->per_layer ? L : 1); l++) {
                char pn[192];
                long j = slot[((size_t)i * RP_MAXPIECE + (size_t)k) * (size_t)L + (size_t)l];
                piece_name(d, k, l, pn, sizeof pn);
                if (j < 0) {
                    st = remat_fail(REMAT_ERR_FORMAT, "%s: missing tensor %s", name, pn);
                    goto out;
                }
                const remat_st_tensor *t = &ly->t[j];
                remat_expr e[2];
                uint64_t want[2] = { 0, 0 };
                int r = file_exprs(d, k, e);
                for (int q = 0; q < r; q++) want[q] = remat_expr_u64(&e[q], &dm);
                if (want[0] != t->shape[0] || (r == 2 && want[1] != t->shape[1])) {
                    char got[96], exp[96];
                    shape_text(t->shape, t->rank, got, sizeof got);
                    shape_text(want, r, exp, sizeof exp);
                    st = remat_fail(REMAT_ERR_FORMAT, "%s: tensor %s has shape [%s], expected [%s]", src_of(ly, t, name),
                                    pn, got, exp);
                    goto out;
                }
                remat_wpiece *p = &ly->p[ly->np++];
                piece_at(d, k, l, &dm, &ply, i, &p->rows, &p->cols, &p->dst_off);
                p->src_off = t->off;
                p->transpose = d->hf[k].transpose;
                p->bf16 = t->dtype == REMAT_ST_BF16;
                p->src = t->src;
            }
    }
    if (unknown_heads) st = unknown_heads_fail(name, c.n_embd);
    else *out = c;
out:
    free(slot);
    return st;
}

/* ---- writing ----------------------------------------------------------------------- */

remat_status remat_hf_outputs(const remat_config *c, const float *params, remat_st_out **out, size_t *n)
{
    const remat_param_table *pt = remat_params_of(c);
    remat_param_layout ply;
    remat_param_layout_of(c, &ply);
    remat_dims dm;
    remat_dims_of(c, &dm);
    int L = c->n_layer, first = ply.count;   /* the first per-block parameter */
    size_t total = 0;
    for (int i = ply.count - 1; i >= 0; i--)
        if (pt->defs[i].per_layer) first = i;
    for (int i = 0; i < ply.count; i++) total += (size_t)pt->defs[i].npiece * (pt->defs[i].per_layer ? (size_t)L : 1);
    *n = 0;
    if (!(*out = remat_calloc(total ? total : 1, sizeof **out)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory writing weights");
    /* three sweeps: the globals before the blocks, block l's tensors for
     * each l, the globals after them (for GPT-2, llm.c's order within a
     * block: the order Hugging Face's files have too) */
    for (int sweep = 0; sweep < 2 + L; sweep++) {
        int l = sweep - 1;
        for (int i = 0; i < ply.count; i++) {
            const remat_param_def *d = &pt->defs[i];
            if (sweep == 0 ? d->per_layer || i > first : sweep == L + 1 ? d->per_layer || i < first : !d->per_layer)
                continue;
            for (int k = 0; k < d->npiece; k++) {
                remat_st_out *o = &(*out)[(*n)++];
                remat_expr e[2];
                size_t off;
                piece_name(d, k, l, o->name, sizeof o->name);
                o->rank = file_exprs(d, k, e);
                for (int q = 0; q < o->rank; q++) o->shape[q] = remat_expr_u64(&e[q], &dm);
                piece_at(d, k, l, &dm, &ply, i, &o->rows, &o->cols, &off);
                o->src = params + off;
                o->transpose = d->hf[k].transpose;
            }
        }
    }
    return REMAT_OK;
}
