/*
 * crossentropy.c -- softmax + cross-entropy over the first V of Vp logits,
 * fused with its backward (the logits are overwritten by their gradient,
 * as in llm.c's fused classifier).  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), V vocabulary, Vp padded vocabulary (>= V).
 * The padded columns V..Vp-1 never enter the softmax and get gradient 0.
 */
#include <assert.h>
#include <math.h>
#include "kernels.h"
#include "vmath.h"

/* losses[n] = logsumexp(x[n,:V]) - x[n,target[n]],  lse = max + log(sum exp(x-max))
 * With scale != 0:  x[n,v] <- (softmax(x[n,:V])[v] - [v==target[n]]) * scale, v < V
 *                   x[n,v] <- 0,                                              V <= v < Vp
 * losses (N), logits (N,Vp), targets (N).  Returns sum_n losses[n] in double.
 *
 * Rows run in parallel (each writes only its row and losses[n]); the total
 * is summed afterwards in row order, so it does not depend on the thread
 * count.  Per row, three sweeps over the V logits (a 200 KB row at GPT-2's
 * V stays in L2 between them):
 *   1. the max (exact in any order);
 *   2. e_v = exp(x_v - max) with the vectorised exp of vmath.h (< 1 ulp),
 *      summed in double in a fixed lane order (8 float lanes widened into
 *      two 4-wide double accumulators, combined in lane order at the end;
 *      AVX-512 makes 16 at a time and adds them as two 8-lane halves, the
 *      same sums in the same order);
 *      when a gradient is wanted e_v is stored over x_v, so that
 *   3. the gradient is one multiply, e_v * (scale/sum), with no second exp.
 *      At the target, p - 1 is formed in double (it would cancel in float).
 * x[target] is read before sweep 2 overwrites it. */
#ifdef REMAT_HAVE_AVX2
/* 8 floats into the two 4-wide double accumulators of the row sums */
static inline void add8(__m256d *s0, __m256d *s1, __m256 e)
{
    *s0 = _mm256_add_pd(*s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    *s1 = _mm256_add_pd(*s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

static double ce_row(float *x, int tgt, int V, int Vp, float scale, float *loss)
{
    /* 1. max: four accumulators; vmaxps(acc, x) keeps a NaN in x as acc */
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int v = 0;
    for (; v + 32 <= V; v += 32) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + v));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + v + 8));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + v + 16));
        m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + v + 24));
    }
    for (; v + 8 <= V; v += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + v));
    if (v < V) {
        __m256i msk = remat_mask8(V - v);
        __m256 t = _mm256_maskload_ps(x + v, msk);
        m1 = _mm256_max_ps(m1, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), t, _mm256_castsi256_ps(msk)));
    }
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    float maxv = lanes[0];
    for (int k = 1; k < 8; k++) maxv = lanes[k] > maxv ? lanes[k] : maxv;
    float xt = x[tgt];

    /* 2. exponentials and their sum */
    const __m256 mx = _mm256_set1_ps(maxv);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int store = scale != 0.0f;
    v = 0;
#ifdef REMAT_HAVE_AVX512
    for (; v + 16 <= V; v += 16) {
        __m512 e = remat_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + v), _mm512_set1_ps(maxv)));
        if (store) _mm512_storeu_ps(x + v, e);
        add8(&s0, &s1, _mm512_castps512_ps256(e));
        add8(&s0, &s1, _mm512_extractf32x8_ps(e, 1));
    }
#endif
    for (; v + 8 <= V; v += 8) {
        __m256 e = remat_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + v), mx));
        if (store) _mm256_storeu_ps(x + v, e);
        add8(&s0, &s1, e);
    }
    if (v < V) {
        __m256i msk = remat_mask8(V - v);
        /* masked-off lanes load 0 and would give exp(-max): zero them */
        __m256 e = _mm256_and_ps(remat_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + v, msk), mx)),
                                 _mm256_castsi256_ps(msk));
        if (store) _mm256_maskstore_ps(x + v, msk, e);
        add8(&s0, &s1, e);
    }
    double dl[8];
    _mm256_storeu_pd(dl, s0);
    _mm256_storeu_pd(dl + 4, s1);
    double sum = 0.0;
    for (int k = 0; k < 8; k++) sum += dl[k];
    *loss = (float)((double)maxv + log(sum) - (double)xt);
    if (!store) return sum;

    /* 3. gradient */
    double inv = 1.0 / sum;
    const __m256 c = _mm256_set1_ps((float)(inv * scale));
    double pt = (double)x[tgt] * inv;               /* before the sweep overwrites it */
    v = 0;
#ifdef REMAT_HAVE_AVX512
    for (; v + 16 <= V; v += 16) _mm512_storeu_ps(x + v, _mm512_mul_ps(_mm512_loadu_ps(x + v), _mm512_set1_ps((float)(inv * scale))));
#endif
    for (; v + 8 <= V; v += 8) _mm256_storeu_ps(x + v, _mm256_mul_ps(_mm256_loadu_ps(x + v), c));
    if (v < V) {
        __m256i msk = remat_mask8(V - v);
        _mm256_maskstore_ps(x + v, msk, _mm256_mul_ps(_mm256_maskload_ps(x + v, msk), c));
    }
    x[tgt] = (float)((pt - 1.0) * scale);
    for (v = V; v < Vp; v++) x[v] = 0.0f;
    return sum;
}
#else
/* the same three sweeps, one element at a time (the exp is vmath.h's
 * scalar twin; the sum is kept in the same 8 lanes, so a build without
 * AVX2 gives the same bits) */
static double ce_row(float *x, int tgt, int V, int Vp, float scale, float *loss)
{
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) if (x[v] > maxv) maxv = x[v];
    float xt = x[tgt];
    int store = scale != 0.0f;
    double dl[8] = { 0 };
    for (int v = 0; v < V; v++) {
        float e = remat_expf(x[v] - maxv);
        if (store) x[v] = e;
        dl[v & 7] += e;
    }
    double sum = 0.0;
    for (int k = 0; k < 8; k++) sum += dl[k];
    *loss = (float)((double)maxv + log(sum) - (double)xt);
    if (!store) return sum;
    double inv = 1.0 / sum;
    float c = (float)(inv * scale);
    double pt = (double)x[tgt] * inv;
    for (int v = 0; v < V; v++) x[v] *= c;
    x[tgt] = (float)((pt - 1.0) * scale);
    for (int v = V; v < Vp; v++) x[v] = 0.0f;
    return sum;
}
#endif

/* Each thread's fp32 row for ce_row16's exponentials (V floats): its slice
 * of the op's workspace (gemm.h, remat_ws), which the tensor table declares
 * for the bf16 LM head (V floats per thread) so that it is counted like
 * every other byte.  NULL -- no workspace, or not enough -- takes the path
 * that forms each exponential again: the same bits. */
/* The same row from bf16 logits (autocast's cross-entropy of a bf16 LM
 * head: the loss in fp32 from the rounded logits), the gradient rounded
 * into the row, once.  Three sweeps again; sweep 2's exponentials go to
 * the thread's fp32 row (the bf16 row cannot hold them unrounded) and
 * sweep 3 is one multiply and one rounding, as in ce_row.  Without the
 * row (out of memory) sweep 3 forms each exponential again: the same ops,
 * the same bits (every vector width's exp is the scalar twin's). */
static double ce_row16(remat_bf16 *x, int tgt, int V, int Vp, float scale, float *loss, const remat_ws *ws)
{
    float *eb = scale != 0.0f ? remat_ws_thread(ws, (size_t)V * sizeof(float)) : NULL;
    float maxv = -INFINITY;
    int v = 0;
#ifdef REMAT_HAVE_AVX2
    __m256 m0 = _mm256_set1_ps(-INFINITY);
    for (; v + 8 <= V; v += 8) m0 = _mm256_max_ps(m0, remat_bf16_load8(x + v));
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    for (int k = 0; k < 8; k++) maxv = lanes[k] > maxv ? lanes[k] : maxv;
#endif
    for (; v < V; v++) {
        float f = remat_bf16_to_float(x[v]);
        maxv = f > maxv ? f : maxv;
    }
    float xt = remat_bf16_to_float(x[tgt]);
    double dl[8] = { 0 };
    v = 0;
#ifdef REMAT_HAVE_AVX2
    const __m256 mx = _mm256_set1_ps(maxv);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
#ifdef REMAT_HAVE_AVX512
    for (; v + 16 <= V; v += 16) {   /* as ce_row: two 8-lane halves, in order */
        __m512 e = remat_exp16(_mm512_sub_ps(remat_bf16_load16(x + v), _mm512_set1_ps(maxv)));
        if (eb) _mm512_storeu_ps(eb + v, e);
        add8(&s0, &s1, _mm512_castps512_ps256(e));
        add8(&s0, &s1, _mm512_extractf32x8_ps(e, 1));
    }
#endif
    for (; v + 8 <= V; v += 8) {
        __m256 e = remat_exp8(_mm256_sub_ps(remat_bf16_load8(x + v), mx));
        if (eb) _mm256_storeu_ps(eb + v, e);
        add8(&s0, &s1, e);
    }
    _mm256_storeu_pd(dl, s0);
    _mm256_storeu_pd(dl + 4, s1);
#endif
    for (; v < V; v++) {
        float e = remat_expf(remat_bf16_to_float(x[v]) - maxv);
        if (eb) eb[v] = e;
        dl[v & 7] += e;
    }
    double sum = 0.0;
    for (int k = 0; k < 8; k++) sum += dl[k];
    *loss = (float)((double)maxv + log(sum) - (double)xt);
    if (scale == 0.0f) return sum;
    double inv = 1.0 / sum;
    float c = (float)(inv * scale);
    double pt = (double)remat_expf(xt - maxv) * inv;
    v = 0;
    if (eb) {   /* x = bf16(e c) */
#ifdef REMAT_HAVE_AVX2
        const __m256 vc = _mm256_set1_ps(c);
#ifdef REMAT_HAVE_AVX512
        for (; v + 16 <= V; v += 16) remat_bf16_store16(x + v, _mm512_mul_ps(_mm512_loadu_ps(eb + v), _mm512_set1_ps(c)));
#endif
        for (; v + 8 <= V; v += 8)
            _mm_storeu_si128((__m128i *)(x + v), remat_bf16_round8(_mm256_mul_ps(_mm256_loadu_ps(eb + v), vc)));
#endif
        for (; v < V; v++) x[v] = remat_bf16_round(eb[v] * c);
    }
#ifdef REMAT_HAVE_AVX2
    const __m256 vc = _mm256_set1_ps(c);
#ifdef REMAT_HAVE_AVX512
    for (; v + 16 <= V; v += 16)
        remat_bf16_store16(x + v, _mm512_mul_ps(remat_exp16(_mm512_sub_ps(remat_bf16_load16(x + v), _mm512_set1_ps(maxv))),
                                                _mm512_set1_ps(c)));
#endif
    for (; v + 8 <= V; v += 8)
        _mm_storeu_si128((__m128i *)(x + v),
                         remat_bf16_round8(_mm256_mul_ps(remat_exp8(_mm256_sub_ps(remat_bf16_load8(x + v), mx)), vc)));
#endif
    for (; v < V; v++) x[v] = remat_bf16_round(remat_expf(remat_bf16_to_float(x[v]) - maxv) * c);
    x[tgt] = remat_bf16_round((float)((pt - 1.0) * scale));
    for (v = V; v < Vp; v++) x[v] = 0;
    return sum;
}

double remat_crossentropy_forward(float *losses, void *logits, const int *targets, int N, int V, int Vp,
                            float dlogits_scale, int dt, const remat_ws *ws)
{
    #pragma omp parallel for schedule(static) if (REMAT_PAR(4 * (size_t)N * V))
    for (int n = 0; n < N; n++) {
        int tgt = targets[n];
        assert(tgt >= 0 && tgt < V && "crossentropy_forward: target out of [0,V); check the data shard's vocabulary");
        if (dt == REMAT_DTYPE_BF16) ce_row16((remat_bf16 *)logits + (size_t)n * Vp, tgt, V, Vp, dlogits_scale, &losses[n], ws);
        else ce_row((float *)logits + (size_t)n * Vp, tgt, V, Vp, dlogits_scale, &losses[n]);
    }
    double total = 0.0;
    for (int n = 0; n < N; n++) total += losses[n];
    return total;
}
