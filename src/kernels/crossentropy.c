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

/* losses[n] = logsumexp(x[n,:V]) - x[n,target[n]],  lse = max + log(sum exp(x-max))
 * With scale != 0:  x[n,v] <- (softmax(x[n,:V])[v] - [v==target[n]]) * scale, v < V
 *                   x[n,v] <- 0,                                              V <= v < Vp
 * losses (N), logits (N,Vp), targets (N).  Returns sum_n losses[n] in double.
 *
 * Rows run in parallel (each writes only its row and losses[n]); the total
 * is summed afterwards in row order, so it does not depend on the thread
 * count.  The row's sum of exponentials is kept in double. */
double crossentropy_forward(float *losses, float *logits, const int *targets,
                            int N, int V, int Vp, float dlogits_scale)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *x = logits + (size_t)n * Vp;
        int tgt = targets[n];
        assert(tgt >= 0 && tgt < V && "crossentropy_forward: target out of [0,V); check the data shard's vocabulary");
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (x[v] > maxv) maxv = x[v];
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((double)x[v] - maxv);
        double lse = (double)maxv + log(sum);
        losses[n] = (float)(lse - (double)x[tgt]);
        if (dlogits_scale != 0.0f) {
            double inv = 1.0 / sum;
            for (int v = 0; v < V; v++) {
                /* in double: p - 1 at the target would cancel in float */
                double p = exp((double)x[v] - maxv) * inv;
                x[v] = (float)((p - (v == tgt ? 1.0 : 0.0)) * dlogits_scale);
            }
            for (int v = V; v < Vp; v++) x[v] = 0.0f;
        }
    }
    double total = 0.0;
    for (int n = 0; n < N; n++) total += losses[n];
    return total;
}
