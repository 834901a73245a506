/*
 * attn_tiles.c -- the tiles both attention kernels are built from, and the
 * backward they share.  Contract in attn_tiles.h.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

attn_head attn_head_at(const float *qkv, const float *dout, float *dqkv, int b, int h, int T, int C, int NH)
{
    attn_head hd;
    memset(&hd, 0, sizeof hd);
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C, q = (size_t)b * T * C3 + (size_t)h * hs;
    hd.Q = qkv + q;
    hd.K = hd.Q + C;
    hd.V = hd.Q + 2 * (size_t)C;
    if (dout) hd.G = dout + (size_t)b * T * C + (size_t)h * hs;
    if (dqkv) {
        hd.dQ = dqkv + q;
        hd.dK = hd.dQ + C;
        hd.dV = hd.dQ + 2 * (size_t)C;
    }
    hd.b = b; hd.h = h; hd.NH = NH; hd.T = T; hd.hs = hs; hd.C = C;
    hd.scale = 1.0f / sqrtf((float)hs);
    return hd;
}

void attn_score_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc)
{
    int C3 = 3 * hd->C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd->hs, hd->scale, hd->Q + (size_t)i0 * C3, C3,
                hd->K + (size_t)j0 * C3, C3, 0.0f, s, ATT_BC);
}

void attn_prob_tile(float *s, const float *l, const remat_dropout *drop, const attn_head *hd, int i0, int nr, int j0,
                    int nc)
{
    for (int r = 0; r < nr; r++) {
        float *x = s + r * ATT_BC;
        int i = i0 + r, n = causal_cols(i, j0, nc);
        remat_row_expsum(x, x, n, l[r]);
        if (drop && drop->p > 0.0f)
            for (int c = 0; c < n; c++) x[c] *= remat_dropout_mult(drop, att_index(hd->b, hd->h, i, j0 + c, hd->NH, hd->T));
        memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
    }
}

/* P of tile (i0, j0) into s: copied from the stored probabilities (zeros
 * above the diagonal already there) or recomputed */
static void p_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc)
{
    if (hd->A) {
        for (int r = 0; r < nr; r++)
            memcpy(s + r * ATT_BC, hd->A + (size_t)(i0 + r) * hd->T + j0, (size_t)nc * sizeof(float));
        return;
    }
    attn_score_tile(s, hd, i0, nr, j0, nc);
    attn_prob_tile(s, hd->L + i0, NULL, hd, i0, nr, j0, nc);
}

void attn_head_backward(const attn_head *hd, const remat_dropout *drop)
{
    int T = hd->T, hs = hd->hs, C = hd->C, C3 = 3 * C;
    float s[ATT_BR * ATT_BC], dp[ATT_BR * ATT_BC], D[ATT_BR];
    for (int t = 0; t < T; t++) {
        memset(hd->dQ + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
        memset(hd->dK + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
        memset(hd->dV + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
    }
    for (int i0 = 0; i0 < T; i0 += ATT_BR) {
        int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
        const float *g = hd->G + (size_t)i0 * C;
        for (int r = 0; r < nr; r++) D[r] = 0.0f;
        for (int pass = 1; pass <= 2; pass++)
            for (int j0 = 0; j0 < i0 + nr; j0 += ATT_BC) {
                int nc = i0 + nr - j0 < ATT_BC ? i0 + nr - j0 : ATT_BC;
                p_tile(s, hd, i0, nr, j0, nc);                                          /* P, undropped */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f, g, C,
                            hd->V + (size_t)j0 * C3, C3, 0.0f, dp, ATT_BC);            /* dPd */
                for (int r = 0; r < nr; r++) {
                    int i = i0 + r, n = causal_cols(i, j0, nc);
                    float *p = s + r * ATT_BC, *x = dp + r * ATT_BC, acc = 0.0f;
                    for (int c = 0; c < n; c++) {
                        float m = remat_dropout_mult(drop, att_index(hd->b, hd->h, i, j0 + c, hd->NH, T));
                        if (pass == 1) acc += p[c] * (x[c] * m);                          /* P dP */
                        else { float ds = p[c] * (x[c] * m - D[r]) * hd->scale; p[c] *= m; x[c] = ds; }
                    }
                    if (pass == 1) D[r] += acc;
                    else memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
                }
                if (pass == 1) continue;
                /* s holds P m, dp holds dS (both 0 above the diagonal) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, dp, ATT_BC,
                            hd->K + (size_t)j0 * C3, C3, 1.0f, hd->dQ + (size_t)i0 * C3, C3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, dp, ATT_BC,
                            hd->Q + (size_t)i0 * C3, C3, 1.0f, hd->dK + (size_t)j0 * C3, C3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, s, ATT_BC, g, C, 1.0f,
                            hd->dV + (size_t)j0 * C3, C3);
            }
    }
}
