/*
 * weights.h -- what the weights formats share (weights.c) and what each
 * provides to the dispatch in weights.c: llm.c files (llmc.c), safetensors
 * files (safetensors.c), the parameter table's Hugging Face names
 * (hfnames.c) and Hugging Face model directories (hfdir.c).  Private to
 * src/io/; the public side is the "weights" section of remat.h.
 */
#ifndef REMAT_WEIGHTS_H
#define REMAT_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "remat.h"

#define REMAT_LLMC_MAGIC 20240326   /* the first little-endian int32 of an llm.c model file */

/* An untrusted source: a file or a memory buffer (the fuzz targets). */
typedef struct remat_wsrc {
    const unsigned char *mem;   /* memory source, or NULL */
    FILE *f;                    /* file source */
    uint64_t size;
    const char *name;           /* for messages */
} remat_wsrc;

/* Opens the regular file path as a source (REMAT_ERR_IO when it cannot;
 * the caller fcloses s->f). */
remat_status remat_wsrc_open(const char *path, remat_wsrc *s);
/* Reads n bytes at off into dst: REMAT_ERR_FORMAT ("truncated") when they
 * run past the source's end, REMAT_ERR_IO when the file cannot be read. */
remat_status remat_wsrc_read(const remat_wsrc *s, uint64_t off, void *dst, size_t n);

/* rows x cols float32 (bf16: bfloat16) at byte src_off of source src,
 * landing row-major as floats at params + dst_off (a row of the parameter
 * is cols floats); transposed: the source holds the (cols x rows) matrix. */
typedef struct remat_wpiece {
    uint64_t src_off;
    size_t dst_off, rows, cols;
    int transpose;
    int bf16;
    int src;                    /* 0, or the directory's file (remat_wlayout.srcs) */
} remat_wpiece;

/* ---- safetensors tensors (safetensors.c) and their names (hfnames.c) ------- */

#define REMAT_ST_MAX_RANK 8
enum { REMAT_ST_BF16 = 0, REMAT_ST_F32 = 1 };   /* the dtypes remat reads; the others follow */
/* "BF16", "F32", "I32", ... */
const char *remat_st_dtype_name(int dtype);

/* One tensor of a safetensors header. */
typedef struct remat_st_tensor {
    char *name;                 /* as the file spells it (remat_malloc'd) */
    int dtype;                  /* REMAT_ST_BF16, REMAT_ST_F32 or another (refused when read) */
    int rank;
    uint64_t shape[REMAT_ST_MAX_RANK];
    uint64_t off, end;          /* its bytes [off, end) in its file */
    int src;                    /* the file it is in (remat_wpiece.src) */
    /* what the name means in the layout's parameter table (remat_hf_names) */
    int param, piece;           /* param -1: a tensor remat does not read */
    int layer;                  /* the block of a per-block tensor, else -1 */
} remat_st_tensor;

/* __metadata__ values remat writes and reads ("n_head", "n_kv_head",
 * "head_dim"); 0 when absent. */
typedef struct remat_st_meta { int n_head, n_kv_head, head_dim; } remat_st_meta;

/* What a header says: the model shape and where each parameter lies. */
typedef struct remat_wlayout {
    remat_config shape;         /* the model the source(s) describe; a field they
                                   do not fix is 0 (n_head without metadata, ...) */
    remat_weights_format format;
    remat_wpiece *p;            /* remat_malloc'd; llmc: from the layout, safetensors
                                   and directories: from remat_wlayout_config */
    size_t np;
    /* safetensors files and directories */
    remat_st_tensor *t;         /* every tensor of every file */
    size_t nt, tcap;
    remat_st_meta meta;
    int fixed;                  /* shape is complete (a directory's config.json): the
                                   tensors are checked against it, nothing is inferred */
    int nblock;                 /* 1 + the highest block index a name holds (0: none) */
    char **srcs;                /* a directory's files, by remat_st_tensor.src */
    uint64_t *srcsize;          /* their sizes when their headers were read */
    int nsrc;
} remat_wlayout;

void remat_wlayout_clear(remat_wlayout *ly);
/* The config of the layout's model (batch = seq = 1, dropout 0) into *out,
 * and for safetensors the pieces (ly->p), every tensor checked against it.
 * What the source does not fix comes from hint (may be NULL): n_head (else
 * C/64), the positions (max_seq, else 1) when no shape holds them, and the
 * rotary and norm settings when hint is of the same architecture.  Errors
 * are REMAT_ERR_FORMAT (the source is at fault), or REMAT_ERR_INVALID when
 * the number of heads cannot be guessed.  name: the source, for messages. */
remat_status remat_wlayout_config(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *out);

/* Parse a header into *ly (validated as the file comment of each says; on
 * failure ly holds nothing to clear), and write a whole file for params
 * (remat's layout of shape) to f: REMAT_ERR_IO when a write fails (errno
 * says why), REMAT_ERR_NOMEM. */
remat_status remat_llmc_layout(const remat_wsrc *s, remat_wlayout *ly);
remat_status remat_llmc_write(FILE *f, const remat_config *shape, const float *params);
remat_status remat_safetensors_layout(const remat_wsrc *s, remat_wlayout *ly);
/* dtype: REMAT_DTYPE_FP32 (F32 tensors) or REMAT_DTYPE_BF16 (BF16, rounded
 * to nearest even) */
remat_status remat_safetensors_write(FILE *f, const remat_config *shape, const float *params, remat_dtype dtype);

/* Reads the header of safetensors file s (one of a directory's files: src)
 * and appends its tensors to ly->t, its metadata to ly->meta (files that
 * disagree are refused): checked as safetensors.c says, names not yet. */
remat_status remat_st_read(const remat_wsrc *s, int src, remat_wlayout *ly);

/* A tensor to write: its name and shape in the file, and where its values
 * are (remat_wpiece's rows x cols at src, read transposed when transpose). */
typedef struct remat_st_out {
    char name[192];
    int rank;
    uint64_t shape[2];
    const float *src;
    size_t rows, cols;
    int transpose;
} remat_st_out;
/* Writes a safetensors file of the n tensors o (values rounded to dtype)
 * with remat's __metadata__ for shape (remat_hf_meta_dims). */
remat_status remat_st_write(FILE *f, const remat_config *shape, const remat_st_out *o, size_t n, remat_dtype dtype);

/* Names -> parameters (the layout's first half): infers the architecture
 * from the names unless ly->fixed, gives every tensor its parameter, piece
 * and block (or marks it one remat does not read), refuses unknown names
 * and names that appear twice, and, unless fixed, the sizes the shapes fix
 * into ly->shape.  name: the source, for messages. */
remat_status remat_hf_names(remat_wlayout *ly, const char *name);
/* The second half: resolves what the shapes leave open from hint (as
 * remat_wlayout_config says) into *out, then checks every tensor against
 * the config and lays the pieces out (ly->p). */
remat_status remat_hf_bind(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *out);
/* Every tensor of a model in the file's order (the globals before the
 * blocks, the blocks one by one, the globals after them) into *out
 * (remat_malloc'd), *n of them. */
remat_status remat_hf_outputs(const remat_config *shape, const float *params, remat_st_out **out, size_t *n);
/* The bits (1 << RD_*) of the dimensions the parameter table's shapes of
 * shape's architecture name: the metadata records the heads, and the
 * key/value heads and head size where the shapes need them. */
uint32_t remat_hf_meta_dims(const remat_config *shape);

/* ---- Hugging Face model directories (hfdir.c) ------------------------------ */

/* config.json, model.safetensors or the index and its shards, into *ly
 * (format REMAT_WEIGHTS_HF, shape from config.json, the tensors named). */
remat_status remat_hf_dir_layout(const char *dir, remat_wlayout *ly);

/* A Jansson parse error as one line: "SRC: malformed DOC: WHAT at byte N"
 * (REMAT_ERR_FORMAT; REMAT_ERR_NOMEM when Jansson ran out of memory). */
remat_status remat_json_fail(const char *src, const char *doc, const json_error_t *e);

/* ---- the keys of a JSON object (jsonread.c) ----------------------------------
 * An object being read, with where it is for messages: src (the file) and
 * where ("rope_scaling." inside that object, "" at the top).  Each reader
 * takes dflt when the key is absent or null, else refuses a value of
 * another type or out of range (REMAT_ERR_FORMAT, "SRC: WHEREkey must be
 * ..., got VALUE"). */
typedef struct remat_jobj { const json_t *o; const char *src, *where; } remat_jobj;
/* the value of key: NULL when absent or null */
const json_t *remat_jobj_val(const remat_jobj *h, const char *key);
/* v as JSON text for a message: one line, cut to n bytes */
void remat_jobj_show(const json_t *v, char *buf, size_t n);
remat_status remat_jobj_bad(const remat_jobj *h, const char *key, const char *want, const json_t *v);
/* an integer in [lo, hi] */
remat_status remat_jobj_ll(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi,
                           long long *out);
remat_status remat_jobj_int(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi, int *out);
/* a number in (lo, hi], and in [lo, hi] */
remat_status remat_jobj_num(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out);
remat_status remat_jobj_range(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out);
remat_status remat_jobj_bool(const remat_jobj *h, const char *key, int dflt, int *out);
remat_status remat_jobj_str(const remat_jobj *h, const char *key, const char *dflt, const char **out);

#endif
