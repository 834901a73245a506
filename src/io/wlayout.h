/*
 * wlayout.h -- what every weights format is read into and written from
 * (wlayout.c): sources, the layout of pieces, safetensors' tensors and
 * dtypes.  The bottom of the weights files: llmc.c, safetensors.c,
 * hfnames.c and hfdir.c build on it, and weights.c, which dispatches
 * between them, is above them all (weights.h).  Private to src/io/.
 */
#ifndef REMAT_WLAYOUT_H
#define REMAT_WLAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* ---- safetensors tensors ---------------------------------------------------- */

#define REMAT_ST_MAX_RANK 8
enum { REMAT_ST_BF16 = 0, REMAT_ST_F32 = 1 };   /* the dtypes remat reads; the others follow */
#define REMAT_ST_NDTYPES 15                     /* the dtypes a header may name */
/* "BF16", "F32", "I32", ... ("?" outside [0, REMAT_ST_NDTYPES)), and the
 * bytes of one element (0 outside) */
const char *remat_st_dtype_name(int dtype);
int remat_st_dtype_size(int dtype);

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

#endif
