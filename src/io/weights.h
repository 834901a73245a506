/*
 * weights.h -- what each weights format provides to the dispatch in
 * weights.c: llm.c files (llmc.c), safetensors files (safetensors.c), the
 * parameter table's Hugging Face names (hfnames.c) and Hugging Face model
 * directories (hfdir.c).  What they share is below them (wlayout.h, and
 * jsonread.h for JSON); none of them calls weights.c.  Private to src/io/;
 * the public side is the "weights" section of remat.h.
 */
#ifndef REMAT_WEIGHTS_H
#define REMAT_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "remat.h"
#include "wlayout.h"
#include "jsonread.h"

/* The config of the layout's model (batch = seq = 1, dropout 0) into *out,
 * and for safetensors the pieces (ly->p), every tensor checked against it.
 * What the source does not fix comes from hint (may be NULL): n_head (else
 * C/64), the positions (max_seq, else 1) when no shape holds them, and the
 * rotary and norm settings when hint is of the same architecture.  Errors
 * are REMAT_ERR_FORMAT (the source is at fault), or REMAT_ERR_INVALID when
 * the number of heads cannot be guessed.  name: the source, for messages. */
remat_status remat_wlayout_config(remat_wlayout *ly, const char *name, const remat_config *hint, remat_config *out);
/* remat_wlayout_config of an llm.c layout (llmc.c): its header holds every
 * size, checked here (hint is not needed). */
remat_status remat_llmc_config(const remat_wlayout *ly, const char *name, remat_config *out);

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

#endif
