/*
 * safetensors.c -- the safetensors format: a file's header read into
 * tensors (what the names mean is hfnames.c's business), and a file written
 * from a list of tensors.  The shared parts are in wlayout.c.
 *
 * Format (github.com/huggingface/safetensors, "Format"): u64 LE header
 *   length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 *   "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v", ...}},
 *   then the data region; offsets are relative to it.  The JSON is parsed
 *   by Jansson (strict RFC 8259: valid UTF-8, no NUL in strings, duplicate
 *   keys refused), then held to exactly this shape: every entry an object
 *   of those three fields, a known dtype, unsigned integers, a metadata
 *   object of strings.  Every tensor's byte range is checked against the
 *   data region and against the others (the ranges must tile the region,
 *   as the reference reader requires).
 *
 * Writing builds the header with Jansson too (compact, in the order the
 * tensors come), padded with spaces so that the data starts at a multiple
 * of 8 bytes.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../kernels/bf16.h"
#include "../core/core.h"
#include "../core/endian.h"
#include "../table/tensors.h"
#include "io.h"
#include "weights.h"



/* ---- reading ----------------------------------------------------------------- */

#define BADHDR(...) remat_fail(REMAT_ERR_FORMAT, __VA_ARGS__)

/* [u, u, ...]: at most max unsigned integers into v, *n of them */
static remat_status st_uints(const remat_wsrc *s, const char *tensor, const char *field, const json_t *a, int max,
                             uint64_t *v, int *n)
{
    if (!json_is_array(a))
        return BADHDR("%s: malformed safetensors header: tensor %.200s: %s must be an array", s->name, tensor, field);
    if ((int)json_array_size(a) > max)
        return BADHDR("%s: malformed safetensors header: tensor %.200s: %s has too many elements (at most %d)", s->name,
                      tensor, field, max);
    size_t i;
    const json_t *x;
    json_array_foreach(a, i, x) {
        if (json_is_real(x))
            return BADHDR("%s: malformed safetensors header: tensor %.200s: %s must hold whole numbers", s->name,
                          tensor, field);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return BADHDR("%s: malformed safetensors header: tensor %.200s: %s must hold unsigned integers", s->name,
                          tensor, field);
        v[i] = (uint64_t)json_integer_value(x);
    }
    *n = (int)json_array_size(a);
    return REMAT_OK;
}

/* "n_head" and friends: a whole number in [1, REMAT_MAX_EMBD], written without sign
 * or leading zeros */
static remat_status st_meta_int(const remat_wsrc *s, const char *key, const char *v, int *have, int *out)
{
    char *end;
    errno = 0;
    long h = strtol(v, &end, 10);
    if (!*v || *end || errno || h < 1 || h > REMAT_MAX_EMBD || *v < '1' || *v > '9')
        return BADHDR("%s: __metadata__ %s must be a whole number in [1, %d]", s->name, key, REMAT_MAX_EMBD);
    if (*have && *have != (int)h)
        return BADHDR("%s: __metadata__ %s is %ld, another of the model's files says %d", s->name, key, h, *have);
    *out = (int)h;
    return REMAT_OK;
}

static remat_status st_meta(const remat_wsrc *s, const json_t *m, remat_st_meta *out)
{
    remat_status st;
    if (!json_is_object(m)) return BADHDR("%s: malformed safetensors header: __metadata__ must be an object", s->name);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_string(v))
            return BADHDR("%s: malformed safetensors header: __metadata__ values must be strings", s->name);
        int *f = !strcmp(k, "n_head") ? &out->n_head : !strcmp(k, "n_kv_head") ? &out->n_kv_head
               : !strcmp(k, "head_dim") ? &out->head_dim : NULL;
        if (f && (st = st_meta_int(s, k, json_string_value(v), f, f))) return st;
    }
    return REMAT_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, exactly those */
static remat_status st_tensor(const remat_wsrc *s, const char *name, const json_t *o, remat_st_tensor *e)
{
    remat_status st;
    if (!json_is_object(o))
        return BADHDR("%s: malformed safetensors header: tensor %.200s is not an object", s->name, name);
    const json_t *dt = json_object_get(o, "dtype"), *sh = json_object_get(o, "shape"),
                 *off = json_object_get(o, "data_offsets");
    if (!dt || !sh || !off)
        return BADHDR("%s: malformed safetensors header: tensor %.200s needs dtype, shape and data_offsets", s->name,
                      name);
    if (json_object_size(o) != 3)
        return BADHDR("%s: malformed safetensors header: tensor %.200s has an unknown field (expected dtype, shape, "
                      "data_offsets)", s->name, name);
    e->dtype = -1;
    for (int i = 0; json_is_string(dt) && i < REMAT_ST_NDTYPES; i++)
        if (!strcmp(json_string_value(dt), remat_st_dtype_name(i))) e->dtype = i;
    if (e->dtype < 0) return BADHDR("%s: malformed safetensors header: tensor %.200s: unknown dtype", s->name, name);
    uint64_t be[2];
    int n;
    if ((st = st_uints(s, name, "shape", sh, REMAT_ST_MAX_RANK, e->shape, &e->rank)) ||
        (st = st_uints(s, name, "data_offsets", off, 2, be, &n)))
        return st;
    if (n != 2)
        return BADHDR("%s: malformed safetensors header: tensor %.200s: data_offsets must be [begin, end]", s->name, name);
    e->off = be[0];   /* relative to the data region until the ranges are checked */
    e->end = be[1];
    e->param = -1;
    e->layer = -1;
    return REMAT_OK;
}

static int cmp_by_off(const void *a, const void *b)
{
    const remat_st_tensor *x = *(remat_st_tensor *const *)a, *y = *(remat_st_tensor *const *)b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Tensors t[0, n) of one file: every byte range lies in the dsize-byte data
 * region and is as long as its dtype and shape need; the ranges tile the
 * region, without gaps or overlaps.  Then the offsets become absolute
 * (data0 added). */
static remat_status st_check_ranges(const remat_wsrc *s, remat_st_tensor *t, size_t n, uint64_t data0, uint64_t dsize)
{
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < n; i++) {
        remat_st_tensor *e = &t[i];
        uint64_t end = e->end;
        int ok = 1;
        uint64_t bytes = (uint64_t)remat_st_dtype_size(e->dtype);
        for (int d = 0; d < e->rank; d++) bytes = remat_mul(bytes, e->shape[d], &ok);
        if (e->off > end || end > dsize)
            return BADHDR("%s: tensor %.200s has data_offsets [%llu, %llu] outside the %llu-byte data region", s->name,
                          e->name, (unsigned long long)e->off, (unsigned long long)end, (unsigned long long)dsize);
        if (!ok || end - e->off != bytes)
            return BADHDR("%s: tensor %.200s spans %llu bytes but its dtype and shape need %s%llu", s->name, e->name,
                          (unsigned long long)(end - e->off), ok ? "" : "more than ", (unsigned long long)bytes);
    }
    remat_st_tensor **byoff = remat_malloc((n ? n : 1) * sizeof *byoff);
    if (!byoff) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    for (size_t i = 0; i < n; i++) byoff[i] = &t[i];
    if (n > 1) qsort(byoff, n, sizeof *byoff, cmp_by_off);
    uint64_t at = 0;
    for (size_t i = 0; i < n && !st; i++) {
        if (byoff[i]->off != at)
            st = BADHDR("%s: tensor %.200s starts at data offset %llu, expected %llu: tensors %s", s->name,
                        byoff[i]->name, (unsigned long long)byoff[i]->off, (unsigned long long)at,
                        byoff[i]->off < at ? "overlap" : "leave a gap");
        at = byoff[i]->end;
    }
    if (!st && at != dsize)
        st = BADHDR("%s: the tensors cover %llu of the %llu data bytes; the file has extra bytes", s->name,
                    (unsigned long long)at, (unsigned long long)dsize);
    free(byoff);
    for (size_t i = 0; i < n && !st; i++) {
        t[i].off += data0;
        t[i].end += data0;
    }
    return st;
}

/* The header's length, its JSON (into tensors appended to ly->t) and the
 * byte ranges, each step as its function's comment says. */
remat_status remat_st_read(const remat_wsrc *s, int src, remat_wlayout *ly)
{
    remat_status st;
    unsigned char lb[8];
    char *hdr = NULL;
    json_t *root = NULL;
    size_t first = ly->nt;
    if (s->size < 8)
        return BADHDR("%s: %llu bytes, too short for a safetensors header length", s->name, (unsigned long long)s->size);
    if ((st = remat_wsrc_read(s, 0, lb, 8))) return st;
    uint64_t N = remat_get_le64(lb);
    if (N > REMAT_SAFETENSORS_MAX_HEADER)
        return BADHDR("%s: safetensors header length %llu is over the %u-byte limit; the file is corrupt", s->name,
                      (unsigned long long)N, REMAT_SAFETENSORS_MAX_HEADER);
    if (N > s->size - 8)
        return BADHDR("%s: safetensors header length %llu runs past the end of the file (%llu bytes); the file is "
                      "truncated or corrupt", s->name, (unsigned long long)N, (unsigned long long)s->size);
    if (!(hdr = remat_malloc((size_t)N + 1))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    if ((st = remat_wsrc_read(s, 8, hdr, (size_t)N))) goto out;
    json_error_t je;
    /* writers pad the header with spaces, which Jansson skips */
    if (!(root = json_loadb(hdr, (size_t)N, JSON_REJECT_DUPLICATES, &je))) {
        st = remat_json_fail(s->name, "safetensors header", &je);
        goto out;
    }
    if (!json_is_object(root)) { st = BADHDR("%s: malformed safetensors header: expected '{'", s->name); goto out; }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!strcmp(k, "__metadata__")) {
            if ((st = st_meta(s, v, &ly->meta))) goto out;
            continue;
        }
        if (ly->nt == ly->tcap) {
            size_t cap = ly->tcap ? 2 * ly->tcap : 64;
            remat_st_tensor *t = remat_realloc(ly->t, cap * sizeof *t);
            if (!t) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name); goto out; }
            ly->t = t;
            ly->tcap = cap;
        }
        remat_st_tensor *e = &ly->t[ly->nt];
        memset(e, 0, sizeof *e);
        if (!(e->name = remat_strdup(k))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name); goto out; }
        e->src = src;
        ly->nt++;
        if ((st = st_tensor(s, k, v, e))) goto out;
    }
    st = st_check_ranges(s, ly->nt > first ? ly->t + first : NULL, ly->nt - first, 8 + N, s->size - 8 - N);
out:
    json_decref(root);
    free(hdr);
    return st;
}

/* One file: its header, then what its names mean (hfnames.c); on failure
 * *ly holds nothing. */
remat_status remat_safetensors_layout(const remat_wsrc *s, remat_wlayout *ly)
{
    remat_status st;
    memset(ly, 0, sizeof *ly);
    ly->format = REMAT_WEIGHTS_SAFETENSORS;
    if ((st = remat_st_read(s, 0, ly)) || (st = remat_hf_names(ly, s->name))) remat_wlayout_clear(ly);
    return st;
}

/* ---- writing ------------------------------------------------------------------ */

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

/* the header: __metadata__ {"format": "pt", "n_head": ..., and the
 * key/value heads and head size where the table's shapes name them}, then
 * each tensor at the offsets its predecessors leave */
static json_t *st_header(const remat_config *c, const remat_st_out *o, size_t n, remat_dtype dt)
{
    json_t *root = json_object(), *meta = json_object();
    int ok = root && meta && !json_object_set_new(meta, "format", json_string("pt"));
    uint32_t dims = remat_hf_meta_dims(c);
    char v[16];
    snprintf(v, sizeof v, "%d", c->n_head);
    ok = ok && !json_object_set_new(meta, "n_head", json_string(v));
    if (dims & (1u << RD_KV)) {
        snprintf(v, sizeof v, "%d", remat_config_kv_heads(c));
        ok = ok && !json_object_set_new(meta, "n_kv_head", json_string(v));
    }
    if (dims & (1u << RD_HS)) {
        snprintf(v, sizeof v, "%d", remat_config_head_dim(c));
        ok = ok && !json_object_set_new(meta, "head_dim", json_string(v));
    }
    ok = ok && !json_object_set_new(root, "__metadata__", meta);
    if (!ok) json_decref(meta);
    uint64_t at = 0, es = remat_dtype_bytes(dt);
    for (size_t i = 0; i < n && ok; i++) {
        json_t *e = json_object(), *shape = json_array();
        uint64_t bytes = es;
        ok = e && shape;
        for (int d = 0; ok && d < o[i].rank; d++) {
            bytes *= o[i].shape[d];
            ok = !json_array_append_new(shape, json_integer((json_int_t)o[i].shape[d]));
        }
        ok = ok && !json_object_set_new(e, "dtype", json_string(dt == REMAT_DTYPE_BF16 ? "BF16" : "F32"));
        ok = ok && !json_object_set_new(e, "shape", shape);
        if (!ok) json_decref(shape);
        ok = ok && !json_object_set_new(e, "data_offsets",
                                        json_pack("[II]", (json_int_t)at, (json_int_t)(at + bytes)));
        ok = ok && !json_object_set_new(root, o[i].name, e);
        if (!ok) json_decref(e);
        at += bytes;
    }
    if (!ok) { json_decref(root); return NULL; }
    return root;
}

remat_status remat_st_write(FILE *f, const remat_config *c, const remat_st_out *o, size_t n, remat_dtype dt)
{
    remat_status st = REMAT_OK;
    char *text = NULL, *hdr = NULL;
    float *tmp = NULL;
    json_t *root = st_header(c, o, n, dt);
    if (!root || !(text = json_dumps(root, JSON_COMPACT))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing a safetensors header");
        goto out;
    }
    size_t len = strlen(text), N = len + (8 - (8 + len) % 8) % 8;   /* the data region 8-byte aligned */
    size_t tmpn = (size_t)1 << 16;
    for (size_t i = 0; i < n; i++)
        if (o[i].transpose && o[i].rows > tmpn) tmpn = o[i].rows;
    if (!(hdr = remat_malloc(8 + N)) || !(tmp = remat_malloc(tmpn * sizeof *tmp))) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing safetensors");
        goto out;
    }
    remat_put_le64((unsigned char *)hdr, (uint64_t)N);
    memcpy(hdr + 8, text, len);
    memset(hdr + 8 + len, ' ', N - len);
    if (fwrite(hdr, 1, 8 + N, f) != 8 + N) { st = REMAT_ERR_IO; goto out; }
    for (size_t i = 0; i < n && !st; i++)
        st = write_f32(f, o[i].src, o[i].rows, o[i].cols, o[i].transpose, tmp, tmpn, dt);
out:
    json_decref(root);
    free(text);   /* json_dumps allocates with Jansson's allocator: malloc */
    free(hdr);
    free(tmp);
    return st;
}

remat_status remat_safetensors_write(FILE *f, const remat_config *c, const float *params, remat_dtype dt)
{
    remat_st_out *o = NULL;
    size_t n = 0;
    remat_status st = remat_hf_outputs(c, params, &o, &n);
    if (!st) st = remat_st_write(f, c, o, n, dt);
    free(o);
    return st;
}
