/*
 * weights.h -- what the weights formats share (weights.c) and what each
 * provides to the dispatch in weights.c (llmc.c, safetensors.c).  Private to
 * src/io/; the public side is the "weights" section of remat.h.
 */
#ifndef REMAT_WEIGHTS_H
#define REMAT_WEIGHTS_H

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

/* Reads n bytes at off into dst: REMAT_ERR_FORMAT ("truncated") when they
 * run past the source's end, REMAT_ERR_IO when the file cannot be read. */
remat_status remat_wsrc_read(const remat_wsrc *s, uint64_t off, void *dst, size_t n);

/* rows x cols float32 (bf16: bfloat16) at byte src_off of the source,
 * landing row-major as floats at params + dst_off; transposed: the source
 * holds the (cols x rows) matrix. */
typedef struct remat_wpiece {
    uint64_t src_off;
    size_t dst_off, rows, cols;
    int transpose;
    int bf16;
} remat_wpiece;

/* What a header says: the model shape and where each parameter lies. */
typedef struct remat_wlayout {
    remat_config shape;       /* n_head 0 when the file does not record it */
    remat_weights_format format;
    remat_wpiece *p;          /* remat_malloc'd */
    size_t np;
} remat_wlayout;

void remat_wlayout_clear(remat_wlayout *ly);
/* Resolves n_head (file, else hint, else GPT-2's head size 64) and checks the
 * shape as a config (batch = seq = 1, dropout 0) into *out.  Errors are
 * REMAT_ERR_FORMAT (the file is at fault), or REMAT_ERR_INVALID when the
 * number of heads cannot be guessed. */
remat_status remat_wlayout_config(const remat_wlayout *ly, const char *name, int hint, remat_config *out);

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

#endif
