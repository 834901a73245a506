/*
 * io.h -- internals of remat's file formats (src/io/): the parse-from-memory
 * entry points the fuzz targets (fuzz/) and the tests use.  Not API; the
 * public side of each format is in remat.h.
 */
#ifndef REMAT_IO_H
#define REMAT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "remat.h"

/* ---- weights: llm.c checkpoints and safetensors (weights.c) ---------------- */

/* The largest safetensors JSON header accepted (the reference implementation's
 * limit). */
#define REMAT_SAFETENSORS_MAX_HEADER (100u << 20)

/* Parse a whole llm.c checkpoint or safetensors file held in memory (n bytes,
 * untrusted).  On success *shape holds the file's n_layer, n_embd, n_head,
 * vocab and max_seq (batch = seq = 1, dropout 0), and *params, malloc'd (the
 * caller free()s it), holds remat_config_num_params(shape) floats in remat's
 * layout (padded vocabulary rows zero).  n_head for a safetensors file that
 * does not record it: n_head_hint when > 0, else C/64.  On failure *params
 * is NULL and the status is REMAT_ERR_FORMAT (or NOMEM) with a message. */
remat_status remat_llmc_parse(const void *buf, size_t n, remat_config *shape, float **params);
remat_status remat_safetensors_parse(const void *buf, size_t n, int n_head_hint, remat_config *shape,
                                     float **params);

/* Writes params (remat's layout for shape) to f in format (LLMC or
 * SAFETENSORS).  REMAT_ERR_IO when a write fails. */
remat_status remat_weights_write(FILE *f, const remat_config *shape, const float *params,
                                 remat_weights_format format);

#endif
