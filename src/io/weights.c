/*
 * weights.c -- model weights in and out (the "weights" section of remat.h):
 * what the formats share, and the dispatch to them (llm.c checkpoints in
 * llmc.c, safetensors files in safetensors.c with their names in
 * hfnames.c, Hugging Face model directories in hfdir.c).
 *
 * Reading is two passes over untrusted sources (a file, a directory's
 * files, or, for the fuzz targets, a memory buffer):
 *   1. parse the headers into a *layout*: the model shape plus a list of
 *      pieces, each a (rows x cols) block of float32 or bfloat16 at a byte
 *      offset of a source that lands at a float offset of remat's parameter
 *      array, possibly transposed (Conv1D weights);
 *   2. fill the parameters by reading each piece.
 * Everything a header claims is checked before anything is allocated from
 * it: sizes with overflow-checked arithmetic, the file size exactly (llm.c),
 * every tensor's byte range (safetensors), every shape against the one the
 * model needs.  Allocation is therefore bounded by the sources' size (plus
 * < 64 padded vocabulary rows).
 *
 * Writes go through the library's atomic writer (remat_atomic_begin/commit,
 * core/files.c), so the final name holds either the old file or the whole
 * new one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io.h"
#include "weights.h"
#include "../core/core.h"
#include "../core/endian.h"
#include "../engine/model.h"
#include "../table/tensors.h"

/* ---- layouts ------------------------------------------------------------------ */

remat_status remat_wlayout_config(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *out)
{
    if (ly->format != REMAT_WEIGHTS_LLMC) return remat_hf_bind(ly, name, hint, out);
    return remat_llmc_config(ly, name, out);
}

/* n elements (float32, or bf16 when bf16) of the source at off into dst
 * as floats; tmp holds at least n bf16 values */
static remat_status read_elems(const remat_wsrc *s, uint64_t off, float *dst, size_t n, int bf16, uint16_t *tmp)
{
    remat_status st;
    if (!bf16) {
        if ((st = remat_wsrc_read(s, off, dst, n * sizeof(float)))) return st;
        remat_le_f32_swap(dst, n);
        return REMAT_OK;
    }
    if ((st = remat_wsrc_read(s, off, tmp, n * sizeof(uint16_t)))) return st;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)remat_get_le16((const unsigned char *)(tmp + i)) << 16;
        memcpy(dst + i, &u, sizeof u);
    }
    return REMAT_OK;
}

/* Reads every piece of source src into params (remat_config_num_params(cfg)
 * floats, the padded vocabulary rows already zero), widening bf16 pieces
 * exactly. */
#define FILL_CHUNK ((size_t)1 << 16)
static remat_status layout_fill(const remat_wsrc *s, int src, const remat_wlayout *ly, float *params)
{
    remat_status st = REMAT_OK;
    float *row = NULL;
    uint16_t *tmp = NULL;
    size_t rowcap = 0;
    if (!(tmp = remat_malloc(FILL_CHUNK * sizeof *tmp))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    for (size_t k = 0; k < ly->np && !st; k++) {
        const remat_wpiece *pc = &ly->p[k];
        if (pc->src != src) continue;
        float *dst = params + pc->dst_off;
        size_t es = pc->bf16 ? 2 : 4;
        if (!pc->transpose) {
            size_t n = pc->rows * pc->cols;
            for (size_t i = 0; i < n && !st; i += FILL_CHUNK)
                st = read_elems(s, pc->src_off + i * es, dst + i, n - i < FILL_CHUNK ? n - i : FILL_CHUNK, pc->bf16, tmp);
            continue;
        }
        /* source row j (cols x rows matrix) is destination column j */
        if (rowcap < pc->rows) {
            free(row);
            free(tmp);
            rowcap = pc->rows;
            tmp = NULL;
            if (!(row = remat_malloc(rowcap * sizeof *row)) ||
                !(tmp = remat_malloc((rowcap > FILL_CHUNK ? rowcap : FILL_CHUNK) * sizeof *tmp))) {
                st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
                break;
            }
        }
        for (size_t j = 0; j < pc->cols && !st; j++) {
            st = read_elems(s, pc->src_off + (uint64_t)j * pc->rows * es, row, pc->rows, pc->bf16, tmp);
            if (st) break;
            for (size_t i = 0; i < pc->rows; i++) dst[i * pc->cols + j] = row[i];
        }
    }
    free(row);
    free(tmp);
    return st;
}

/* Whether weights of shape can be written as format in dtype: llmc (GPT-2,
 * fp32 only), safetensors or a Hugging Face directory (fp32 or bf16).
 * REMAT_ERR_INVALID otherwise. */
static remat_status check_target(const remat_config *shape, remat_weights_format format, remat_dtype dtype)
{
    if (format != REMAT_WEIGHTS_LLMC && format != REMAT_WEIGHTS_SAFETENSORS && format != REMAT_WEIGHTS_HF)
        return remat_fail(REMAT_ERR_INVALID, "weights format %d is neither llmc (%d), safetensors (%d) nor hf (%d)",
                          (int)format, REMAT_WEIGHTS_LLMC, REMAT_WEIGHTS_SAFETENSORS, REMAT_WEIGHTS_HF);
    if (dtype != REMAT_DTYPE_FP32 && dtype != REMAT_DTYPE_BF16)
        return remat_fail(REMAT_ERR_INVALID, "weights dtype must be fp32 or bf16, got %d", (int)dtype);
    if (format == REMAT_WEIGHTS_LLMC && dtype != REMAT_DTYPE_FP32)
        return remat_fail(REMAT_ERR_INVALID, "llm.c model files are written as version 3 (float32); for bf16 "
                          "weights choose the safetensors format");
    if (format == REMAT_WEIGHTS_LLMC && shape->arch != REMAT_ARCH_GPT2)
        return remat_fail(REMAT_ERR_INVALID, "llm.c model files hold GPT-2 models; write a %s model as safetensors or "
                          "as a Hugging Face directory", remat_arch_name(shape->arch));
    return REMAT_OK;
}

remat_status remat_weights_write(FILE *f, const remat_config *shape, const float *params,
                                  remat_weights_format format, remat_dtype dtype)
{
    remat_status st;
    if (!f || !shape || !params) return remat_fail(REMAT_ERR_INVALID, "remat_weights_write: NULL argument");
    if ((st = remat_config_check(shape)) || (st = check_target(shape, format, dtype))) return st;
    if (format == REMAT_WEIGHTS_HF)
        return remat_fail(REMAT_ERR_INVALID, "a Hugging Face model is a directory: write it with remat_weights_save_hf");
    if (format == REMAT_WEIGHTS_LLMC) st = remat_llmc_write(f, shape, params);
    else st = remat_safetensors_write(f, shape, params, dtype);
    if (st == REMAT_ERR_IO) return remat_fail(REMAT_ERR_IO, "write failed: %s", strerror(errno));
    return st;
}

/* ---- detection, memory parsing ----------------------------------------------------- */

static remat_status any_layout(const remat_wsrc *s, remat_weights_format want, remat_wlayout *ly)
{
    unsigned char b[9] = { 0 };
    size_t have = s->size < sizeof b ? (size_t)s->size : sizeof b;
    remat_status st = remat_wsrc_read(s, 0, b, have);
    if (st) return st;
    if (want == REMAT_WEIGHTS_LLMC) return remat_llmc_layout(s, ly);
    if (want == REMAT_WEIGHTS_SAFETENSORS) return remat_safetensors_layout(s, ly);
    if (have >= 4 && remat_get_le32(b) == REMAT_LLMC_MAGIC) return remat_llmc_layout(s, ly);
    if (have >= 9 && b[8] == '{') return remat_safetensors_layout(s, ly);
    return remat_fail(REMAT_ERR_FORMAT, "%s is neither an llm.c model checkpoint (magic %d) nor a safetensors file "
                      "(an 8-byte length, then '{')", s->name, REMAT_LLMC_MAGIC);
}

static remat_status parse_mem(const void *buf, size_t n, remat_weights_format fmt, int hint, remat_config *shape,
                              float **params)
{
    remat_wlayout ly;
    remat_status st;
    if (!params || !shape || (!buf && n)) return remat_fail(REMAT_ERR_INVALID, "weights parse: NULL argument");
    *params = NULL;
    remat_wsrc s = { buf, NULL, n, "<memory>" };
    if ((st = any_layout(&s, fmt, &ly))) return st;
    remat_config c, h;
    memset(&h, 0, sizeof h);
    h.n_head = hint;
    if ((st = remat_wlayout_config(&ly, s.name, &h, &c))) goto out;
    float *p = remat_calloc((size_t)remat_config_num_params(&c), sizeof(float));
    if (!p) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory for %llu parameters",
                              (unsigned long long)remat_config_num_params(&c)); goto out; }
    if ((st = layout_fill(&s, 0, &ly, p))) { free(p); goto out; }
    *shape = c;
    *params = p;
out:
    remat_wlayout_clear(&ly);
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

/* A file's layout, or a directory's: *s is the open file (s->f NULL for a
 * directory, whose files are opened one at a time).  On failure nothing is
 * left open or held. */
static remat_status path_layout(const char *path, remat_wsrc *s, remat_wlayout *ly)
{
    struct stat sb;
    remat_status st;
    memset(ly, 0, sizeof *ly);
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        memset(s, 0, sizeof *s);
        s->name = path;
        return remat_hf_dir_layout(path, ly);
    }
    if ((st = remat_wsrc_open(path, s))) return st;
    if ((st = any_layout(s, REMAT_WEIGHTS_AUTO, ly))) {
        fclose(s->f);
        s->f = NULL;
    }
    return st;
}

/* Reads every piece: from *s, or from each of a directory's files in turn
 * (each still the size its header was read at). */
static remat_status fill_all(const remat_wsrc *s, const remat_wlayout *ly, float *params)
{
    remat_status st = REMAT_OK;
    if (!ly->nsrc) return layout_fill(s, 0, ly, params);
    for (int i = 0; i < ly->nsrc && !st; i++) {
        remat_wsrc f;
        if ((st = remat_wsrc_open(ly->srcs[i], &f))) break;
        if (f.size != ly->srcsize[i])
            st = remat_fail(REMAT_ERR_IO, "'%s' changed size (%llu bytes, then %llu) while it was being read",
                            ly->srcs[i], (unsigned long long)ly->srcsize[i], (unsigned long long)f.size);
        else st = layout_fill(&f, i, ly, params);
        fclose(f.f);
    }
    return st;
}

/* The architecture: every field a weights source can fix. */
static void copy_arch(remat_config *dst, const remat_config *src)
{
    dst->arch = src->arch;
    dst->n_layer = src->n_layer;
    dst->n_embd = src->n_embd;
    dst->n_head = src->n_head;
    dst->vocab = src->vocab;
    dst->max_seq = src->max_seq;
    dst->n_kv_head = src->n_kv_head;
    dst->ffn_dim = src->ffn_dim;
    dst->head_dim = src->head_dim;
    dst->tie_embeddings = src->tie_embeddings;
    dst->n_experts = src->n_experts;
    dst->moe_topk = src->moe_topk;
    dst->moe_ffn_dim = src->moe_ffn_dim;
    dst->moe_shared_dim = src->moe_shared_dim;
    dst->qk_norm = src->qk_norm;
    dst->q_lora_rank = src->q_lora_rank;
    dst->kv_lora_rank = src->kv_lora_rank;
    dst->qk_nope_dim = src->qk_nope_dim;
    dst->qk_rope_dim = src->qk_rope_dim;
    dst->v_head_dim = src->v_head_dim;
    dst->moe_first_dense = src->moe_first_dense;
    dst->moe_groups = src->moe_groups;
    dst->moe_group_topk = src->moe_group_topk;
    dst->moe_scaling = src->moe_scaling;
}

remat_status remat_weights_probe(const char *path, remat_config *shape, remat_weights_format *format)
{
    remat_wsrc s;
    remat_wlayout ly;
    remat_status st;
    if (!shape) return remat_fail(REMAT_ERR_INVALID, "remat_weights_probe: shape is NULL");
    size_t pn = path ? strlen(path) : 0;
    struct stat sb;
    if (pn > 5 && !strcmp(path + pn - 5, ".json") && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        remat_config c;                  /* a config.json alone: the architecture, no tensors */
        if ((st = remat_hf_config_read(path, &c))) return st;
        copy_arch(shape, &c);
        shape->rope_theta = c.rope_theta;
        shape->rope_scaling = c.rope_scaling;
        shape->norm_eps = c.norm_eps;
        if (format) *format = REMAT_WEIGHTS_HF;
        return REMAT_OK;
    }
    if ((st = path_layout(path, &s, &ly))) return st;
    /* every shape checked where the source fixes the sizes the shapes are
     * written in: any number of heads does when the shapes do not name it,
     * and the caller's, when it gives one, solves the others */
    int caller_heads = ly.shape.n_head > 0 ? 0 : shape->n_head > 0 ? shape->n_head : 0;
    remat_config hint, c;
    memset(&hint, 0, sizeof hint);
    hint.n_head = caller_heads ? caller_heads : 1;
    if (ly.format != REMAT_WEIGHTS_LLMC &&
        (ly.shape.n_head > 0 || caller_heads || !(remat_hf_meta_dims(&ly.shape) & (1u << RD_NH))))
        st = remat_wlayout_config(&ly, path, &hint, &c);
    if (!st) {
        copy_arch(shape, &ly.shape);
        if (caller_heads && ly.format != REMAT_WEIGHTS_LLMC) {   /* solved from the shapes with them */
            shape->n_head = c.n_head;
            shape->n_kv_head = remat_config_kv_heads(&c);
            shape->head_dim = remat_config_head_dim(&c);
        }
        if (ly.format == REMAT_WEIGHTS_HF) {   /* config.json holds these too */
            shape->rope_theta = ly.shape.rope_theta;
            shape->rope_scaling = ly.shape.rope_scaling;
            shape->norm_eps = ly.shape.norm_eps;
        }
        if (format) *format = ly.format;
    }
    remat_wlayout_clear(&ly);
    if (s.f) fclose(s.f);
    return st;
}

remat_status remat_weights_load(const char *path, const remat_config *base, uint64_t seed, remat_model **out)
{
    remat_wsrc s;
    remat_wlayout ly;
    remat_model *m = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_weights_load: out is NULL");
    *out = NULL;
    if (!base) return remat_fail(REMAT_ERR_INVALID, "remat_weights_load: base config is NULL");
    if ((st = path_layout(path, &s, &ly))) return st;
    remat_config shape, c = *base;   /* the step's shape and options from base */
    if ((st = remat_wlayout_config(&ly, path, base, &shape))) goto out;
    /* a position table (GPT-2's wpe) has max_seq rows; RoPE (Llama) has none
     * to run out of: a longer seq raises max_seq to base's (the CLI notes it) */
    int rope = shape.arch == REMAT_ARCH_LLAMA;
    if (base->seq > shape.max_seq && !rope) {
        st = remat_fail(REMAT_ERR_INVALID, "seq %d is longer than the %d positions of '%s'; use --seq %d or less",
                        base->seq, shape.max_seq, path, shape.max_seq);
        goto out;
    }
    copy_arch(&c, &shape);
    if (rope && base->seq > c.max_seq) c.max_seq = base->max_seq > base->seq ? base->max_seq : base->seq;
    c.rope_theta = shape.rope_theta;
    c.rope_scaling = shape.rope_scaling;
    c.norm_eps = shape.norm_eps;
    if ((st = remat_model_create(&c, seed, &m))) goto out;
    /* padded vocabulary rows stay as remat_model_create left them: zero */
    if ((st = fill_all(&s, &ly, m->params))) goto out;
    *out = m;
    m = NULL;
out:
    remat_model_free(m);
    remat_wlayout_clear(&ly);
    if (s.f) fclose(s.f);
    return st;
}

remat_status remat_weights_save_as(const remat_model *m, const char *path, remat_weights_format format,
                                   remat_dtype dtype)
{
    if (!m || !path) return remat_fail(REMAT_ERR_INVALID, "remat_weights_save: NULL argument");
    remat_atomic_file a;
    remat_status st;
    /* checked before the temporary file is made */
    if ((st = check_target(&m->cfg, format, dtype))) return st;
    if (format == REMAT_WEIGHTS_HF) return remat_weights_save_hf(m, path, dtype, 0);
    if ((st = remat_atomic_begin(&a, path))) return st;
    if ((st = remat_weights_write(a.f, &m->cfg, m->params, format, dtype))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        remat_atomic_abort(&a);
        return remat_fail(st, "cannot write '%s': %s", path, msg);
    }
    return remat_atomic_commit(&a);
}

remat_status remat_weights_save(const remat_model *m, const char *path, remat_weights_format format)
{
    return remat_weights_save_as(m, path, format, REMAT_DTYPE_FP32);
}
