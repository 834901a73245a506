/*
 * attn_tiles.c -- the tiles both attention kernels are built from, the
 * backward they share, and the two layouts of q, k, v (GPT-2's, Llama's).
 * Contract in attn_tiles.h and kernels.h.
 */
#include <assert.h>
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

remat_attn_layout remat_attn_layout_mha(const void *qkv, int B, int T, int C, int NH, int dt)
{
    remat_attn_layout L = { B, T, NH, NH, C / NH, qkv, att_at(qkv, (size_t)C, dt), att_at(qkv, 2 * (size_t)C, dt),
                            3 * C, 3 * C, 3 * C, 3 * C, 0, C, 2 * C, dt, NULL };
    return L;
}

remat_attn_layout remat_attn_layout_gqa(const void *qk, const void *qkv, int B, int T, int NH, int KV, int hs, int dt)
{
    int nq = NH * hs, nkv = KV * hs;
    remat_attn_layout L = { B, T, NH, KV, hs, qk, att_at(qk, (size_t)nq, dt), att_at(qkv, (size_t)(nq + nkv), dt),
                            nq + nkv, nq + nkv, nq + 2 * nkv, nq + 2 * nkv, 0, nq, nq + nkv, dt, NULL };
    return L;
}

attn_head remat_attn_head_at(const remat_attn_layout *L, const void *dout, float *g, int b, int h)
{
    assert(L->KV > 0 && L->NH % L->KV == 0 && "grouped-query attention needs KV to divide NH: check n_kv_head");
    attn_head hd;
    memset(&hd, 0, sizeof hd);
    int T = L->T, hs = L->hs, kvh = h / (L->NH / L->KV), dt = L->dt;
    size_t row = (size_t)b * T;
    hd.Q = att_at(L->q, row * L->ldq + (size_t)h * hs, dt);
    hd.K = att_at(L->k, row * L->ldk + (size_t)kvh * hs, dt);
    hd.V = att_at(L->v, row * L->ldv + (size_t)kvh * hs, dt);
    hd.ldo = L->NH * hs;
    if (dout) hd.G = att_at(dout, row * hd.ldo + (size_t)h * hs, dt);
    if (g) {
        float *g0 = g + row * L->ldg;
        hd.dQ = g0 + L->gq + (size_t)h * hs;
        hd.dK = g0 + L->gk + (size_t)kvh * hs;
        hd.dV = g0 + L->gv + (size_t)kvh * hs;
    }
    hd.b = b; hd.h = h; hd.NH = L->NH; hd.T = T; hd.hs = hs; hd.dt = dt;
    hd.ldq = L->ldq; hd.ldk = L->ldk; hd.ldv = L->ldv; hd.ldg = L->ldg;
    hd.scale = 1.0f / sqrtf((float)hs);
    hd.ws = L->ws;
    return hd;
}

/* one GEMM of the tile site: C (fp32 or dt) = alpha op(A) op(B) + beta C */
static void tile_gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, const void *B, int ldb,
                      float beta, void *C, int c_dt, int ldc, int ab, const remat_ws *ws)
{
    remat_gemm_op g = { ab, c_dt, ta, tb, M, N, K, alpha, beta, A, lda, B, ldb, C, ldc, NULL, ws };
    remat_gemm(&g);
}

void remat_attn_score_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc)
{
    tile_gemm(0, 1, nr, nc, hd->hs, hd->scale, att_at(hd->Q, (size_t)i0 * hd->ldq, hd->dt), hd->ldq,
              att_at(hd->K, (size_t)j0 * hd->ldk, hd->dt), hd->ldk, 0.0f, s, REMAT_DTYPE_FP32, ATT_BC, hd->dt, hd->ws);
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
#ifdef REMAT_ATTN_SEEDED_FAULT
    /* tests/test_flash_fault.c only (the library is never built so): one
     * rounding point too many, the rows' log-sum-exp rounded to bf16 */
    if (hd->dt == REMAT_DTYPE_BF16)
        for (int r = 0; r < nr; r++) l[r] = remat_bf16_to_float(remat_bf16_round(l[r]));
#endif
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
    tile_gemm(0, 0, nr, hd->hs, nc, 1.0f, tile_operand(p, pb, hd->dt, nr, nc), ATT_BC,
              att_at(hd->V, (size_t)j0 * hd->ldv, hd->dt), hd->ldv, beta, o, o_dt, ldo, hd->dt, hd->ws);
}

void remat_attn_round_rows(void *out, const float *acc, const attn_head *hd, size_t off, int nr)
{
    for (int r = 0; r < nr; r++) {
        size_t o = off + (size_t)r * hd->ldo;
        remat_bf16_from_f32((remat_bf16 *)out + o, acc + o, (size_t)hd->hs);
    }
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

/* sum_c p[c] x[c] m_c over c < n of a tile row (m_c the dropout mask of
 * column j0 + c of row i; 1 without dropout, and x * 1 is x), in D_LANES
 * lanes: element c to lane c mod D_LANES, each lane summed in order, the
 * lanes added in lane order, so the order is fixed by n alone.  (It used to
 * be one sequential sum, a latency-bound chain of one add per score.) */
#define D_LANES 16
static float row_pdp(const float *p, const float *x, int n, const attn_head *hd, const remat_dropout *drop, int i, int j0)
{
    float l[D_LANES] = { 0 };
    int c = 0;
    if (drop->p <= 0.0f) {
        for (; c + D_LANES <= n; c += D_LANES) {
            #pragma omp simd
            for (int k = 0; k < D_LANES; k++) l[k] += p[c + k] * x[c + k];
        }
        for (; c < n; c++) l[c % D_LANES] += p[c] * x[c];
    } else {
        for (; c < n; c++)
            l[c % D_LANES] += p[c] * (x[c] * remat_dropout_mult(drop, att_index(hd->b, hd->h, i, j0 + c, hd->NH, hd->T)));
    }
    float s = 0.0f;
    for (int k = 0; k < D_LANES; k++) s += l[k];
    return s;
}

void remat_attn_head_backward(const attn_head *hd, const remat_dropout *drop)
{
    int T = hd->T, hs = hd->hs, dt = hd->dt, ldq = hd->ldq, ldk = hd->ldk, ldo = hd->ldo, ldg = hd->ldg;
    int nodrop = drop->p <= 0.0f;
    float s[ATT_BR * ATT_BC], dp[ATT_BR * ATT_BC], D[ATT_BR];
    remat_bf16 sb[dt == REMAT_DTYPE_BF16 ? ATT_BR * ATT_BC : 1], dpb[dt == REMAT_DTYPE_BF16 ? ATT_BR * ATT_BC : 1];
    for (int t = 0; t < T; t++) memset(hd->dQ + (size_t)t * ldg, 0, (size_t)hs * sizeof(float));
    for (int i0 = 0; i0 < T; i0 += ATT_BR) {
        int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
        const void *g = att_at(hd->G, (size_t)i0 * ldo, dt), *q = att_at(hd->Q, (size_t)i0 * ldq, dt);
        for (int r = 0; r < nr; r++) D[r] = 0.0f;
        /* a row block whose causal columns are one tile (every one at T <=
         * ATT_BC) keeps pass 1's P and dPd for pass 2: the same values, so
         * the same bits, without a second P and a second dPd product */
        int one_tile = i0 + nr <= ATT_BC;
        for (int pass = 1; pass <= 2; pass++)
            for (int j0 = 0; j0 < i0 + nr; j0 += ATT_BC) {
                int nc = i0 + nr - j0 < ATT_BC ? i0 + nr - j0 : ATT_BC;
                const void *k = att_at(hd->K, (size_t)j0 * ldk, dt);
                if (pass == 1 || !one_tile) {
                    p_tile(s, hd, i0, nr, j0, nc);                                          /* P, undropped */
                    tile_gemm(0, 1, nr, nc, hs, 1.0f, g, ldo, att_at(hd->V, (size_t)j0 * hd->ldv, dt), hd->ldv, 0.0f,
                              dp, REMAT_DTYPE_FP32, ATT_BC, dt, hd->ws);                            /* dPd */
                }
                for (int r = 0; r < nr; r++) {
                    int i = i0 + r, n = causal_cols(i, j0, nc);
                    float *p = s + r * ATT_BC, *x = dp + r * ATT_BC, Dr = D[r], sc = hd->scale;
                    if (pass == 1) {                                                        /* D += P m dPd */
                        D[r] += row_pdp(p, x, n, hd, drop, i, j0);
                        continue;
                    }
                    if (nodrop) {   /* m = 1: x * 1 and p * 1 are x and p, the bits of the loop below */
                        #pragma omp simd
                        for (int c = 0; c < n; c++) x[c] = p[c] * (x[c] - Dr) * sc;
                    } else {
                        for (int c = 0; c < n; c++) {
                            float m = remat_dropout_mult(drop, att_index(hd->b, hd->h, i, j0 + c, hd->NH, T));
                            float ds = p[c] * (x[c] * m - Dr) * sc;
                            p[c] *= m;
                            x[c] = ds;
                        }
                    }
                    memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
                }
                if (pass == 1) continue;
                /* s holds P m, dp holds dS (both 0 above the diagonal) */
                const void *dS = tile_operand(dp, dpb, dt, nr, nc), *Pm = tile_operand(s, sb, dt, nr, nc);
                tile_gemm(0, 0, nr, hs, nc, 1.0f, dS, ATT_BC, k, ldk, 1.0f, hd->dQ + (size_t)i0 * ldg,
                          REMAT_DTYPE_FP32, ldg, dt, hd->ws);
                tile_gemm(1, 0, nc, hs, nr, 1.0f, dS, ATT_BC, q, ldq, 1.0f, hd->dK + (size_t)j0 * ldg,
                          REMAT_DTYPE_FP32, ldg, dt, hd->ws);
                tile_gemm(1, 0, nc, hs, nr, 1.0f, Pm, ATT_BC, g, ldo, 1.0f, hd->dV + (size_t)j0 * ldg,
                          REMAT_DTYPE_FP32, ldg, dt, hd->ws);
            }
    }
}

/* dqkv (bf16) = acc rounded for one (b, kv head) task's columns, once its
 * query heads are done: the dq of each of them, the kv head's dk and dv,
 * over the T rows of batch row b (elementwise, so the bits of any split;
 * in the task itself, while its accumulators are in cache, rather than in
 * a parallel region of its own after all of them) */
static void round_task(remat_bf16 *dqkv, const float *acc, const remat_attn_layout *L, int b, int kvh)
{
    int hs = L->hs, grp = L->NH / L->KV;
    for (int t = 0; t < L->T; t++) {
        size_t o = ((size_t)b * L->T + t) * L->ldg;
        size_t q = o + L->gq + (size_t)kvh * grp * hs, k = o + L->gk + (size_t)kvh * hs, v = o + L->gv + (size_t)kvh * hs;
        remat_bf16_from_f32(dqkv + q, acc + q, (size_t)grp * hs);
        remat_bf16_from_f32(dqkv + k, acc + k, (size_t)hs);
        remat_bf16_from_f32(dqkv + v, acc + v, (size_t)hs);
    }
}

void remat_attn_backward_heads(void *dqkv, const void *dout, const void *att, const float *lse,
                               const remat_attn_layout *L, const remat_dropout *drop, float *acc)
{
    int B = L->B, T = L->T, NH = L->NH, KV = L->KV, grp = NH / KV, dt = L->dt;
    float *g = dt == REMAT_DTYPE_BF16 ? acc : dqkv;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            for (int h = kvh * grp; h < (kvh + 1) * grp; h++) {
                attn_head hd = remat_attn_head_at(L, dout, g, b, h);
                if (h == kvh * grp)   /* the group's first head: its kv head's dk, dv start at 0 */
                    for (int t = 0; t < T; t++) {
                        memset(hd.dK + (size_t)t * hd.ldg, 0, (size_t)hd.hs * sizeof(float));
                        memset(hd.dV + (size_t)t * hd.ldg, 0, (size_t)hd.hs * sizeof(float));
                    }
                if (att) hd.A = att_at(att, ((size_t)b * NH + h) * T * T, dt);
                else hd.L = lse + ((size_t)b * NH + h) * T;
                remat_attn_head_backward(&hd, drop);
            }
            if (dt == REMAT_DTYPE_BF16) round_task((remat_bf16 *)dqkv, acc, L, b, kvh);
        }
}
