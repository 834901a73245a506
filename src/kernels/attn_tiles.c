/*
 * attn_tiles.c -- the tiles both attention kernels are built from, and the
 * backward they share.  Contract in attn_tiles.h.
 */
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

attn_head remat_attn_head_at(const void *qkv, const void *dout, float *g, int b, int h, int T, int C, int NH, int dt)
{
    attn_head hd;
    memset(&hd, 0, sizeof hd);
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C, q = (size_t)b * T * C3 + (size_t)h * hs;
    hd.Q = att_at(qkv, q, dt);
    hd.K = att_at(qkv, q + C, dt);
    hd.V = att_at(qkv, q + 2 * (size_t)C, dt);
    if (dout) hd.G = att_at(dout, (size_t)b * T * C + (size_t)h * hs, dt);
    if (g) {
        hd.dQ = g + q;
        hd.dK = hd.dQ + C;
        hd.dV = hd.dQ + 2 * (size_t)C;
    }
    hd.b = b; hd.h = h; hd.NH = NH; hd.T = T; hd.hs = hs; hd.C = C; hd.dt = dt;
    hd.scale = 1.0f / sqrtf((float)hs);
    return hd;
}

/* one GEMM of the tile site: C (fp32 or dt) = alpha op(A) op(B) + beta C */
static void tile_gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, const void *B, int ldb,
                      float beta, void *C, int c_dt, int ldc, int ab)
{
    remat_gemm_op g = { ab, c_dt, ta, tb, M, N, K, alpha, beta, A, lda, B, ldb, C, ldc, NULL };
    remat_gemm(&g);
}

void remat_attn_score_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc)
{
    int C3 = 3 * hd->C;
    tile_gemm(0, 1, nr, nc, hd->hs, hd->scale, att_at(hd->Q, (size_t)i0 * C3, hd->dt), C3,
              att_at(hd->K, (size_t)j0 * C3, hd->dt), C3, 0.0f, s, REMAT_DTYPE_FP32, ATT_BC, hd->dt);
}

void remat_attn_prob_tile(float *s, const float *l, const remat_dropout *drop, const attn_head *hd, int i0, int nr, int j0,
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

void remat_attn_row_lse(float *l, float *s, const attn_head *hd, int i0, int nr)
{
    float mx[ATT_BR], sum[ATT_BR];
    for (int r = 0; r < ATT_BR; r++) { mx[r] = -INFINITY; sum[r] = 0.0f; }
    for (int j0 = 0; j0 < i0 + nr; j0 += ATT_BC) {
        int nc = i0 + nr - j0 < ATT_BC ? i0 + nr - j0 : ATT_BC;
        remat_attn_score_tile(s, hd, i0, nr, j0, nc);
        for (int r = 0; r < nr; r++) {
            int n = causal_cols(i0 + r, j0, nc);
            if (!n) continue;
            float *x = s + r * ATT_BC, t = remat_row_max(x, n), tm = t > mx[r] ? t : mx[r];
            /* rescale the running sum to the new max, then add this tile's terms */
            sum[r] = sum[r] * remat_expf(mx[r] - tm) + remat_row_expsum(x, x, n, tm);
            mx[r] = tm;
        }
    }
    for (int r = 0; r < nr; r++) l[r] = mx[r] + logf(sum[r]);
}

/* a fp32 tile (nr x nc, ld ATT_BC) as a GEMM operand of the head's dtype */
static const void *tile_operand(const float *p, void *pb, int dt, int nr, int nc)
{
    if (dt != REMAT_DTYPE_BF16) return p;
    for (int r = 0; r < nr; r++) remat_bf16_from_f32((remat_bf16 *)pb + r * ATT_BC, p + r * ATT_BC, (size_t)nc);
    return pb;
}

void remat_attn_pv(void *o, int o_dt, int ldo, const float *p, void *pb, const attn_head *hd, int nr, int j0, int nc,
             float beta)
{
    int C3 = 3 * hd->C;
    tile_gemm(0, 0, nr, hd->hs, nc, 1.0f, tile_operand(p, pb, hd->dt, nr, nc), ATT_BC,
              att_at(hd->V, (size_t)j0 * C3, hd->dt), C3, beta, o, o_dt, ldo, hd->dt);
}

/* P of tile (i0, j0) into s: copied from the stored probabilities (zeros
 * above the diagonal already there) or recomputed */
static void p_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc)
{
    if (hd->A) {
        for (int r = 0; r < nr; r++) {
            size_t off = (size_t)(i0 + r) * hd->T + j0;
            if (hd->dt == REMAT_DTYPE_BF16) remat_bf16_to_f32(s + r * ATT_BC, (const remat_bf16 *)hd->A + off, (size_t)nc);
            else memcpy(s + r * ATT_BC, (const float *)hd->A + off, (size_t)nc * sizeof(float));
        }
        return;
    }
    remat_attn_score_tile(s, hd, i0, nr, j0, nc);
    remat_attn_prob_tile(s, hd->L + i0, NULL, hd, i0, nr, j0, nc);
}

void remat_attn_head_backward(const attn_head *hd, const remat_dropout *drop)
{
    int T = hd->T, hs = hd->hs, C = hd->C, C3 = 3 * C, dt = hd->dt;
    float s[ATT_BR * ATT_BC], dp[ATT_BR * ATT_BC], D[ATT_BR];
    remat_bf16 sb[dt == REMAT_DTYPE_BF16 ? ATT_BR * ATT_BC : 1], dpb[dt == REMAT_DTYPE_BF16 ? ATT_BR * ATT_BC : 1];
    for (int t = 0; t < T; t++) {
        memset(hd->dQ + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
        memset(hd->dK + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
        memset(hd->dV + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
    }
    for (int i0 = 0; i0 < T; i0 += ATT_BR) {
        int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
        const void *g = att_at(hd->G, (size_t)i0 * C, dt), *q = att_at(hd->Q, (size_t)i0 * C3, dt);
        for (int r = 0; r < nr; r++) D[r] = 0.0f;
        for (int pass = 1; pass <= 2; pass++)
            for (int j0 = 0; j0 < i0 + nr; j0 += ATT_BC) {
                int nc = i0 + nr - j0 < ATT_BC ? i0 + nr - j0 : ATT_BC;
                const void *k = att_at(hd->K, (size_t)j0 * C3, dt);
                p_tile(s, hd, i0, nr, j0, nc);                                              /* P, undropped */
                tile_gemm(0, 1, nr, nc, hs, 1.0f, g, C, att_at(hd->V, (size_t)j0 * C3, dt), C3, 0.0f, dp,
                          REMAT_DTYPE_FP32, ATT_BC, dt);                                    /* dPd */
                for (int r = 0; r < nr; r++) {
                    int i = i0 + r, n = causal_cols(i, j0, nc);
                    float *p = s + r * ATT_BC, *x = dp + r * ATT_BC, acc = 0.0f;
                    for (int c = 0; c < n; c++) {
                        float m = remat_dropout_mult(drop, att_index(hd->b, hd->h, i, j0 + c, hd->NH, T));
                        if (pass == 1) acc += p[c] * (x[c] * m);                              /* P dP */
                        else { float ds = p[c] * (x[c] * m - D[r]) * hd->scale; p[c] *= m; x[c] = ds; }
                    }
                    if (pass == 1) D[r] += acc;
                    else memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
                }
                if (pass == 1) continue;
                /* s holds P m, dp holds dS (both 0 above the diagonal) */
                const void *dS = tile_operand(dp, dpb, dt, nr, nc), *Pm = tile_operand(s, sb, dt, nr, nc);
                tile_gemm(0, 0, nr, hs, nc, 1.0f, dS, ATT_BC, k, C3, 1.0f, hd->dQ + (size_t)i0 * C3,
                          REMAT_DTYPE_FP32, C3, dt);
                tile_gemm(1, 0, nc, hs, nr, 1.0f, dS, ATT_BC, q, C3, 1.0f, hd->dK + (size_t)j0 * C3,
                          REMAT_DTYPE_FP32, C3, dt);
                tile_gemm(1, 0, nc, hs, nr, 1.0f, Pm, ATT_BC, g, C, 1.0f, hd->dV + (size_t)j0 * C3,
                          REMAT_DTYPE_FP32, C3, dt);
            }
    }
}
