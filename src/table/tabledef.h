/*
 * tabledef.h -- the shorthand the tensor tables are written in (tensors.c,
 * frameworks.c, frameworks_llama.c): operand lists, and formulas over the
 * named dimensions of tensors.h.  Included by the table files only.
 */
#ifndef REMAT_TABLEDEF_H
#define REMAT_TABLEDEF_H

#include "tensors.h"

#define N_ RT_NONE
#define R(a, b, c) {a, b, c}             /* up to three activations an op reads */
#define G(a, b) {a, b}                   /* up to two gradient buffers */
#define NOG {N_, N_}
#define NOR {N_, N_, N_}
#define BT RD_B, RD_T
#define BTC RD_B, RD_T, RD_C
#define E1(k, ...) RX(RX_T(k, __VA_ARGS__))   /* one term: k times the dimensions */

#endif
