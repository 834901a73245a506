/*
 * comm_bench.c -- the alpha and beta of this machine's MPI, as the data-
 * parallel exchanges see them: rank r and r ^ 1 swap n bytes at once
 * through remat's comm engine (remat_comm_sendrecv, an MPI_Sendrecv), for n
 * from 8 bytes to 64 MiB; the median time of an exchange per size.  The
 * latency is the 8-byte exchange's time, the bandwidth the slope between
 * 1 MiB and the largest size: what `remat plan --net-bw --net-latency`
 * takes, so that its prediction can be checked against what `remat train`
 * measures (README, "Data parallelism").
 *
 *   mpirun -np 2 build/bench/comm_bench [--max-mib 64] [--reps 9]
 * Prints one line per size, then "latency_s X bw_bytes_per_s Y".
 */
#include <stdio.h>
#include <string.h>
#include "bench_util.h"
#include "comm/comm.h"

int main(int argc, char **argv)
{
    remat_comm *c = NULL;
    if (remat_comm_create(&argc, &argv, &c)) { fprintf(stderr, "%s\n", remat_errmsg()); return 1; }
    int rank = remat_comm_rank(c), R = remat_comm_size(c);
    long max_mib = 64, reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max-mib")) max_mib = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps")) reps = strtol(argv[i + 1], NULL, 10);
    }
    if (R < 2 || R % 2 || max_mib < 1 || reps < 1) {
        if (rank == 0) fprintf(stderr, "run it under mpirun with an even number of ranks (--max-mib N, --reps N)\n");
        remat_comm_free(c);
        return 2;
    }
    size_t max = (size_t)max_mib << 20;
    char *a = malloc(max), *b = malloc(max);
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!a || !b || !t) { fprintf(stderr, "out of memory\n"); return 1; }
    memset(a, 1, max);
    memset(b, 2, max);
    double lat = 0, t1 = 0, tmax = 0;
    for (size_t n = 8; n <= max; n *= 8) {
        for (long k = 0; k <= reps; k++) {   /* one untimed round first */
            double t0 = bench_now_ms();
            if (remat_comm_sendrecv(c, rank ^ 1, a, n, b, n)) { fprintf(stderr, "%s\n", remat_errmsg()); return 1; }
            if (k) t[k - 1] = bench_now_ms() - t0;
        }
        double med = remat_median(t, (size_t)reps) / 1e3;
        if (n == 8) lat = med;
        if (n <= ((size_t)1 << 20)) t1 = med;
        tmax = med;
        if (rank == 0) printf("bytes %zu exchange_s %.3e bytes_per_s %.3e\n", n, med, (double)n / med);
        if (n * 8 > max && n != max) n = max / 8;   /* end exactly at max */
    }
    size_t n1 = (size_t)1 << 20;
    if (n1 > max) n1 = max / 8;
    double bw = tmax > t1 ? (double)(max - n1) / (tmax - t1) : (double)max / tmax;
    if (rank == 0) printf("latency_s %.3e bw_bytes_per_s %.3e\n", lat, bw);
    free(a); free(b); free(t);
    remat_comm_free(c);
    return 0;
}
