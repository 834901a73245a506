/*
 * params.c -- the parameter table (see params.h).
 */
#include <string.h>
#include "params.h"

const remat_param_def remat_param_defs[REMAT_PARAM_COUNT] = {
    [REMAT_PARAM_WTE] = { "wte", 0, 1, REMAT_INIT_NORMAL },
    [REMAT_PARAM_WPE] = { "wpe", 0, 1, REMAT_INIT_NORMAL },
    [REMAT_PARAM_LN1W] = { "ln1w", 1, 0, REMAT_INIT_ONES },
    [REMAT_PARAM_LN1B] = { "ln1b", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_QKVW] = { "qkvw", 1, 1, REMAT_INIT_NORMAL },
    [REMAT_PARAM_QKVB] = { "qkvb", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_ATTPROJW] = { "attprojw", 1, 1, REMAT_INIT_NORMAL_PROJ },
    [REMAT_PARAM_ATTPROJB] = { "attprojb", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_LN2W] = { "ln2w", 1, 0, REMAT_INIT_ONES },
    [REMAT_PARAM_LN2B] = { "ln2b", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_FCW] = { "fcw", 1, 1, REMAT_INIT_NORMAL },
    [REMAT_PARAM_FCB] = { "fcb", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_FCPROJW] = { "fcprojw", 1, 1, REMAT_INIT_NORMAL_PROJ },
    [REMAT_PARAM_FCPROJB] = { "fcprojb", 1, 0, REMAT_INIT_ZEROS },
    [REMAT_PARAM_LNFW] = { "lnfw", 0, 0, REMAT_INIT_ONES },
    [REMAT_PARAM_LNFB] = { "lnfb", 0, 0, REMAT_INIT_ZEROS },
};

void remat_param_shapes(const remat_config *c, int shapes[REMAT_PARAM_COUNT][3])
{
    int C = c->n_embd, L = c->n_layer, Vp = remat_config_padded_vocab(c);
    int s[REMAT_PARAM_COUNT][3] = {
        {Vp, C, 0}, {c->max_seq, C, 0}, {L, C, 0}, {L, C, 0}, {L, 3 * C, C}, {L, 3 * C, 0},
        {L, C, C}, {L, C, 0}, {L, C, 0}, {L, C, 0}, {L, 4 * C, C}, {L, 4 * C, 0},
        {L, C, 4 * C}, {L, C, 0}, {C, 0, 0}, {C, 0, 0}
    };
    memcpy(shapes, s, sizeof s);
}

size_t remat_param_numel(const int s[3])
{
    size_t n = (size_t)s[0];
    if (s[1]) n *= (size_t)s[1];
    if (s[2]) n *= (size_t)s[2];
    return n;
}

size_t remat_param_layout(const remat_config *c, int shapes[REMAT_PARAM_COUNT][3], size_t offsets[REMAT_PARAM_COUNT])
{
    int tmp[REMAT_PARAM_COUNT][3];
    if (!shapes) shapes = tmp;
    remat_param_shapes(c, shapes);
    size_t total = 0;
    for (int i = 0; i < REMAT_PARAM_COUNT; i++) {
        if (offsets) offsets[i] = total;
        total += remat_param_numel(shapes[i]);
    }
    return total;
}
