/*
 * params.h -- the parameter table: the shape, offset, name, initialisation
 * and weight decay of each of the 16 parameter tensors (llm.c's layout,
 * enum remat_param in remat.h).  The model, the checkpoint and weights
 * formats and the profiler all lay parameters out through this one table.
 */
#ifndef REMAT_PARAMS_H
#define REMAT_PARAMS_H

#include <stddef.h>
#include "remat.h"

enum remat_param_init { REMAT_INIT_NORMAL, REMAT_INIT_NORMAL_PROJ, REMAT_INIT_ONES, REMAT_INIT_ZEROS };

typedef struct remat_param_def {
    const char *name;       /* llm.c's name, e.g. "qkvw" */
    int per_layer;          /* stacked over the L blocks */
    int decay;              /* AdamW weight decay applies (2-D weights) */
    int init;               /* enum remat_param_init: GPT-2's initialisation */
} remat_param_def;

extern const remat_param_def remat_param_defs[REMAT_PARAM_COUNT];

/* Shapes of the 16 parameter tensors, in llm.c's order (unused dims 0). */
void remat_param_shapes(const remat_config *c, int shapes[REMAT_PARAM_COUNT][3]);
/* The same, with each tensor's offset in the flat parameter vector and its
 * element count (offsets, numel may be NULL); returns the total. */
size_t remat_param_layout(const remat_config *c, int shapes[REMAT_PARAM_COUNT][3], size_t offsets[REMAT_PARAM_COUNT]);
size_t remat_param_numel(const int shape[3]);

#endif
