/*
 * dplayout.c -- the data-parallel layout (dplayout.h) and what it costs:
 * remat_parallel_check, remat_parallel_memory_of and the exchanges that
 * remat_parallel_comm_ms prices (remat.h, "data parallelism").
 */
#include <string.h>
#include "dplayout.h"
#include "../core/core.h"

static int is_pow2(int x) { return x > 0 && !(x & (x - 1)); }

/* "1, 2, 4" : the micro-batches b with b R dividing B, into buf */
static const char *valid_micro(int B, int R, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int b = 1; b <= B && k + 16 < n; b++)
        if (B % b == 0 && (B / b) % R == 0) k += (size_t)snprintf(buf + k, n - k, "%s%d", k ? ", " : "", b);
    return buf;
}

remat_status remat_dp_layout_make(const remat_config *cfg, int R, int rank, int b, int zero, remat_dp_layout *l)
{
    char v[256];
    memset(l, 0, sizeof *l);
    int B = cfg->batch;
    if (!is_pow2(R) || R > (1 << 20))
        return remat_fail(REMAT_ERR_INVALID, "data parallelism needs a power-of-two number of ranks (1, 2, 4, 8, ...), "
                          "got %d: the gradient tree's levels pair rank r with r XOR 2^k", R);
    if (rank < 0 || rank >= R) return remat_fail(REMAT_ERR_INVALID, "rank %d is not in [0, %d)", rank, R);
    if (B < R)
        return remat_fail(REMAT_ERR_INVALID, "--batch %d is smaller than the %d ranks: each rank needs at least one "
                          "sequence per step; give --batch %d or more", B, R, R);
    if (b < 1 || b > B || B % b || (B / b) % R)
        return remat_fail(REMAT_ERR_INVALID, "--batch %d is not a multiple of --micro-batch %d x %d rank%s; valid "
                          "--micro-batch values for %d rank%s: %s", B, b, R, R > 1 ? "s" : "", R, R > 1 ? "s" : "",
                          valid_micro(B, R, v, sizeof v));
    if (zero != 0 && zero != 1) return remat_fail(REMAT_ERR_INVALID, "--zero must be 0 or 1, got %d", zero);
    l->R = R;
    while ((1 << l->logR) < R) l->logR++;
    l->rank = rank;
    l->B = B;
    l->b = b;
    l->M = B / b;
    l->Ml = l->M / R;
    l->zero = zero;
    l->active = R > 1 || l->M > 1;
    l->P = (size_t)remat_config_num_params(cfg);
    size_t per = (l->P + (size_t)R * REMAT_DP_ALIGN - 1) / ((size_t)R * REMAT_DP_ALIGN);
    l->S = per * REMAT_DP_ALIGN;
    l->own = remat_dp_bitrev(rank, l->logR);
    l->own_lo = remat_dp_slice_lo(l, l->own);
    l->own_hi = remat_dp_slice_lo(l, l->own + 1);
    l->nblocks = (l->P + REMAT_DP_ALIGN - 1) / REMAT_DP_ALIGN;
    l->tree_bufs = l->active ? remat_dp_tree_live(l->Ml) - 1 : 0;
    if (R > 1) {
        size_t half = (size_t)(R / 2) * l->S;   /* the largest region a rank keeps */
        l->recv_n = half < REMAT_DP_PIECE ? half : REMAT_DP_PIECE;
    }
    return REMAT_OK;
}

void remat_dp_region(int R, int r, int s, int *klo, int *khi)
{
    int lo = 0, hi = R;
    for (int t = 0; t < s; t++) {
        int mid = lo + (hi - lo) / 2;
        if ((r >> t) & 1) lo = mid;
        else hi = mid;
    }
    *klo = lo;
    *khi = hi;
}

int remat_dp_tree_live(int n)
{
    if (n <= 1) return 1;
    int a = remat_dp_tree_live(remat_dp_split(n)), b = 1 + remat_dp_tree_live(n / 2);
    return a > b ? a : b;
}

double remat_dp_tree_sum(const double *v, int n)
{
    if (n == 1) return v[0];
    int h = remat_dp_split(n);
    return remat_dp_tree_sum(v, h) + remat_dp_tree_sum(v + h, n - h);
}

/* elements of slices [klo, khi) */
static uint64_t slices_n(const remat_dp_layout *l, int klo, int khi)
{
    return remat_dp_slice_lo(l, khi) - remat_dp_slice_lo(l, klo);
}
/* norm blocks of slices [klo, khi) */
static uint64_t blocks_n(const remat_dp_layout *l, int klo, int khi)
{
    uint64_t a = remat_dp_slice_lo(l, klo) / REMAT_DP_ALIGN, b = (remat_dp_slice_lo(l, khi) + REMAT_DP_ALIGN - 1) / REMAT_DP_ALIGN;
    return b - a;
}

/* The all-gathers run the halving backwards (step logR-1 first): at step s
 * a rank sends what it holds after step s, region(r, s+1), and receives its
 * partner's. */
static void gather_steps(const remat_dp_layout *l, uint64_t (*size)(const remat_dp_layout *, int, int), uint64_t unit,
                         void (*fn)(void *, uint64_t, uint64_t), void *arg)
{
    for (int s = l->logR - 1; s >= 0; s--) {
        int a, b, c, d;
        remat_dp_region(l->R, l->rank, s + 1, &a, &b);
        remat_dp_region(l->R, l->rank ^ (1 << s), s + 1, &c, &d);
        fn(arg, unit * size(l, a, b), unit * size(l, c, d));
    }
}

static uint64_t units_n(const remat_dp_layout *l, int klo, int khi) { (void)l; return (uint64_t)(khi - klo); }

void remat_dp_exchanges(const remat_dp_layout *l, int update, void (*fn)(void *, uint64_t, uint64_t), void *arg)
{
    if (l->R == 1) return;
    /* the micro-batches' loss sums (Ml doubles a rank) */
    gather_steps(l, units_n, 8 * (uint64_t)l->Ml, fn, arg);
    /* reduce-scatter of the gradient: recursive halving, in pieces */
    for (int s = 0; s < l->logR; s++) {
        int lo, hi;
        remat_dp_region(l->R, l->rank, s, &lo, &hi);
        int mid = lo + (hi - lo) / 2, up = (l->rank >> s) & 1;
        uint64_t keep = up ? slices_n(l, mid, hi) : slices_n(l, lo, mid);
        uint64_t send = up ? slices_n(l, lo, mid) : slices_n(l, mid, hi);
        uint64_t big = keep > send ? keep : send;
        uint64_t pieces = big ? (big + REMAT_DP_PIECE - 1) / REMAT_DP_PIECE : 1;
        for (uint64_t i = 0; i < pieces; i++) {
            uint64_t a = send > i * REMAT_DP_PIECE ? send - i * REMAT_DP_PIECE : 0;
            uint64_t b = keep > i * REMAT_DP_PIECE ? keep - i * REMAT_DP_PIECE : 0;
            fn(arg, 4 * (a < REMAT_DP_PIECE ? a : REMAT_DP_PIECE), 4 * (b < REMAT_DP_PIECE ? b : REMAT_DP_PIECE));
        }
    }
    /* ZeRO-1 with an update: the norm's block partials, then the updated
     * parameters; otherwise the summed gradient */
    if (update && l->zero) gather_steps(l, blocks_n, 8, fn, arg);
    gather_steps(l, slices_n, 4, fn, arg);
}

/* ---- the public side ------------------------------------------------------------ */

remat_status remat_parallel_check(const remat_config *cfg, const remat_parallel *p)
{
    remat_dp_layout l;
    if (!cfg || !p) return remat_fail(REMAT_ERR_INVALID, "remat_parallel_check: NULL argument");
    return remat_dp_layout_make(cfg, p->ranks, 0, p->micro_batch, p->zero, &l);
}

typedef struct tally { uint64_t bytes, msgs; } tally;
static void count(void *arg, uint64_t sent, uint64_t recvd)
{
    tally *t = arg;
    (void)recvd;
    t->bytes += sent;
    t->msgs++;
}

remat_status remat_parallel_memory_of(const remat_config *cfg, const remat_parallel *p, int rank,
                                      remat_parallel_memory *out)
{
    remat_dp_layout l;
    remat_status st;
    if (!cfg || !p || !out) return remat_fail(REMAT_ERR_INVALID, "remat_parallel_memory_of: NULL argument");
    memset(out, 0, sizeof *out);
    if ((st = remat_config_check(cfg))) return st;
    if ((st = remat_dp_layout_make(cfg, p->ranks, rank, p->micro_batch, p->zero, &l))) return st;
    uint64_t P = l.P, N = (uint64_t)cfg->batch * (uint64_t)cfg->seq;
    out->grad_accum = l.Ml;
    out->tree_buffers = l.tree_bufs;
    out->params_bytes = 4 * P;
    out->grads_bytes = 4 * P;
    out->optim_bytes = 8 * (l.zero ? (uint64_t)(l.own_hi - l.own_lo) : P);
    out->weights16_bytes = cfg->dtype == REMAT_DTYPE_BF16 ? 2 * P : 0;
    /* the model's workspace: the step's whole batch of inputs and targets
     * (int) and per-position losses (float) */
    out->workspace_bytes = N * (2 * sizeof(int) + sizeof(float));
    if (l.active)
        out->reduce_bytes = (uint64_t)l.tree_bufs * 4 * P + 4 * (uint64_t)l.recv_n + 8 * (uint64_t)l.nblocks +
                            16 * (uint64_t)l.M;
    out->static_bytes = out->params_bytes + out->grads_bytes + out->optim_bytes + out->weights16_bytes +
                        out->workspace_bytes + out->reduce_bytes;
    out->slice_params = l.zero ? (uint64_t)(l.own_hi - l.own_lo) : P;
    tally t = { 0, 0 };
    remat_dp_exchanges(&l, 1, count, &t);
    out->comm_bytes = t.bytes;
    out->messages = t.msgs;
    return REMAT_OK;
}

typedef struct alpha_beta { double bw, lat, s; } alpha_beta;
static void price(void *arg, uint64_t sent, uint64_t recvd)
{
    alpha_beta *a = arg;
    a->s += a->lat + (double)(sent > recvd ? sent : recvd) / a->bw;
}

double remat_parallel_comm_ms(const remat_config *cfg, const remat_parallel *p, double bytes_per_s, double latency_s)
{
    remat_dp_layout l;
    if (!cfg || !p || !(bytes_per_s > 0) || !(latency_s >= 0)) return 0;
    if (remat_dp_layout_make(cfg, p->ranks, 0, p->micro_batch, p->zero, &l)) return 0;
    alpha_beta a = { bytes_per_s, latency_s, 0 };
    remat_dp_exchanges(&l, 1, price, &a);
    return 1000.0 * a.s;
}
