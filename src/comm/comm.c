/*
 * comm.c -- the communication engine: MPI (OpenMPI from Debian) behind the
 * interface of comm.h and the "data parallelism" section of remat.h.  The
 * only file of remat that includes mpi.h.
 *
 * When MPI is initialised.  Only when the process was started by an MPI
 * launcher (remat_comm_launched: mpirun/mpiexec or a PMI-speaking resource
 * manager set the variables it looks at).  A plain `remat train` never
 * calls MPI_Init: an MPI singleton would cost about 0.35 s of start-up
 * here (OpenMPI 4.1 starts a helper daemon for it), open shared-memory
 * segments, and leave allocations that LeakSanitizer reports, for a job of
 * one rank that has nothing to communicate.  Without a launcher the comm
 * is one rank and no MPI function is ever called.
 *
 * Threads: MPI_THREAD_FUNNELED -- remat's OpenMP threads never
 * communicate; only the thread that created the comm does.
 *
 * Errors: MPI_ERRORS_RETURN on MPI_COMM_WORLD, so a failed call returns
 * REMAT_ERR_COMM with MPI's message instead of aborting the job from inside
 * the library; the caller decides (the CLI prints one line and calls
 * remat_comm_abort, which ends every rank of the job).
 *
 * Built without MPI (make MPI=0), every comm is one rank, and a launch of
 * several ranks is refused (multi_rank_launch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "comm.h"
#ifdef REMAT_MPI
#include <mpi.h>
#endif

/* MPI counts are ints: larger transfers go in pieces of this many bytes */
#define COMM_PIECE ((size_t)1 << 30)

int remat_comm_launched(void)
{
    /* OpenMPI's mpirun, PMIx launchers (OpenMPI 4+, Slurm's srun), and
     * MPICH/Intel MPI's hydra (PMI_RANK) */
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int remat_comm_available(void)
{
#ifdef REMAT_MPI
    return 1;
#else
    return 0;
#endif
}

#ifdef REMAT_MPI
static remat_status mpi_fail(int rc, const char *what, int peer)
{
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = 0;
    if (peer >= 0) return remat_fail(REMAT_ERR_COMM, "%s with rank %d failed: %s", what, peer, msg);
    return remat_fail(REMAT_ERR_COMM, "%s failed: %s", what, msg);
}
#else
/* The first launcher variable that shows this process is one rank of
 * several -- a size other than 1 or a rank other than 0 -- as "NAME=VALUE"
 * in buf, or NULL: what a build without MPI must refuse (each rank would
 * train alone).  The ranks cover launchers that set no size (PMIx). */
static const char *multi_rank_launch(char *buf, size_t cap)
{
    static const struct { const char *name, *one; } vars[] = {
        { "OMPI_COMM_WORLD_SIZE", "1" }, { "PMI_SIZE", "1" },
        { "OMPI_COMM_WORLD_RANK", "0" }, { "PMIX_RANK", "0" }, { "PMI_RANK", "0" },
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i].name);
        if (v && strcmp(v, vars[i].one)) {
            snprintf(buf, cap, "%s=%.32s", vars[i].name, v);
            return buf;
        }
    }
    return NULL;
}
#endif

remat_status remat_comm_create(int *argc, char ***argv, remat_comm **out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_comm_create: out is NULL");
    *out = NULL;
    remat_comm *c = remat_calloc(1, sizeof *c);
    if (!c) return remat_fail(REMAT_ERR_NOMEM, "out of memory creating the communicator");
    c->size = c->local_size = 1;
#ifdef REMAT_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (remat_comm_launched() || inited) {
        int provided, rc;
        if (!inited) {
            if ((rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS) {
                free(c);
                return mpi_fail(rc, "MPI_Init_thread", -1);
            }
            c->mpi = 1;
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
        MPI_Comm local;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
            MPI_Comm_size(local, &c->local_size);
            MPI_Comm_free(&local);
        }
    }
#else
    (void)argc;
    (void)argv;
    char var[80];
    if (multi_rank_launch(var, sizeof var)) {
        free(c);
        return remat_fail(REMAT_ERR_COMM, "this remat was built without MPI (make MPI=0), so it cannot run as one "
                          "of several ranks (the launcher set %s); rebuild with libopenmpi-dev installed", var);
    }
#endif
    *out = c;
    return REMAT_OK;
}

void remat_comm_free(remat_comm *c)
{
    if (!c) return;
#ifdef REMAT_MPI
    if (c->mpi) MPI_Finalize();
#endif
    free(c);
}

int remat_comm_rank(const remat_comm *c) { return c ? c->rank : 0; }
int remat_comm_size(const remat_comm *c) { return c ? c->size : 1; }
int remat_comm_local_size(const remat_comm *c) { return c ? c->local_size : 1; }

void remat_comm_abort(remat_comm *c, int code)
{
#ifdef REMAT_MPI
    if (c && c->size > 1) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
#else
    (void)c;
    (void)code;
#endif
}

void remat_comm_counters_reset(remat_comm *c)
{
    c->sent_bytes = c->ns = c->messages = 0;
}

remat_status remat_comm_sendrecv(remat_comm *c, int peer, const void *snd, size_t sbytes, void *rcv, size_t rbytes)
{
    if (peer == c->rank) {
        if (rbytes) memmove(rcv, snd, rbytes < sbytes ? rbytes : sbytes);
        return REMAT_OK;
    }
#ifdef REMAT_MPI
    uint64_t t0 = remat_clock_ns(0);
    const char *s = snd;
    char *r = rcv;
    do {   /* one exchange even when both counts are 0: the partner expects it */
        int ns = (int)(sbytes < COMM_PIECE ? sbytes : COMM_PIECE), nr = (int)(rbytes < COMM_PIECE ? rbytes : COMM_PIECE);
        int rc = MPI_Sendrecv(s, ns, MPI_BYTE, peer, 0, r, nr, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Sendrecv", peer);
        s += ns; r += nr;
        sbytes -= (size_t)ns; rbytes -= (size_t)nr;
        c->sent_bytes += (uint64_t)ns;
        c->messages++;
    } while (sbytes || rbytes);
    c->ns += remat_clock_ns(0) - t0;
    return REMAT_OK;
#else
    return remat_fail(REMAT_ERR_COMM, "no MPI in this build: rank %d does not exist", peer);
#endif
}

/* A blocking send (sending) or receive of n bytes at p, in pieces. */
static remat_status transfer(remat_comm *c, int peer, void *p, size_t n, int sending)
{
#ifdef REMAT_MPI
    uint64_t t0 = remat_clock_ns(0);
    char *b = p;
    do {
        int k = (int)(n < COMM_PIECE ? n : COMM_PIECE);
        int rc = sending ? MPI_Send(b, k, MPI_BYTE, peer, 1, MPI_COMM_WORLD)
                         : MPI_Recv(b, k, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, sending ? "MPI_Send" : "MPI_Recv", peer);
        b += k;
        n -= (size_t)k;
        if (sending) {
            c->sent_bytes += (uint64_t)k;
            c->messages++;
        }
    } while (n);
    c->ns += remat_clock_ns(0) - t0;
    return REMAT_OK;
#else
    (void)c; (void)p; (void)n; (void)sending;
    return remat_fail(REMAT_ERR_COMM, "no MPI in this build: rank %d does not exist", peer);
#endif
}

remat_status remat_comm_send(remat_comm *c, int peer, const void *p, size_t n)
{
    return transfer(c, peer, (void *)p, n, 1);   /* MPI_Send only reads it */
}

remat_status remat_comm_recv(remat_comm *c, int peer, void *p, size_t n) { return transfer(c, peer, p, n, 0); }

remat_status remat_comm_bcast(remat_comm *c, void *p, size_t n, int root)
{
    if (c->size == 1) return REMAT_OK;
#ifdef REMAT_MPI
    uint64_t t0 = remat_clock_ns(0);
    char *b = p;
    do {
        int k = (int)(n < COMM_PIECE ? n : COMM_PIECE);
        int rc = MPI_Bcast(b, k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast", root);
        if (c->rank == root) c->sent_bytes += (uint64_t)k;
        b += k;
        n -= (size_t)k;
        c->messages++;
    } while (n);
    c->ns += remat_clock_ns(0) - t0;
    return REMAT_OK;
#else
    (void)p; (void)n; (void)root;
    return REMAT_OK;
#endif
}

remat_status remat_comm_allreduce_u64(remat_comm *c, uint64_t *v, int n, int op)
{
    if (c->size == 1 || n <= 0) return REMAT_OK;
#ifdef REMAT_MPI
    uint64_t t0 = remat_clock_ns(0);
    MPI_Op mop = op == REMAT_COMM_MIN ? MPI_MIN : op == REMAT_COMM_MAX ? MPI_MAX : MPI_SUM;
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, mop, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce", -1);
    c->sent_bytes += (uint64_t)n * 8;
    c->messages++;
    c->ns += remat_clock_ns(0) - t0;
    return REMAT_OK;
#else
    (void)v; (void)op;
    return REMAT_OK;
#endif
}

remat_status remat_comm_first_failure(remat_comm *c, int failed, int *first, int *count)
{
    if (!c || !first) return remat_fail(REMAT_ERR_INVALID, "remat_comm_first_failure: NULL argument");
    /* the lowest failing rank (a minimum), and how many (a sum) */
    uint64_t v[2] = { failed ? (uint64_t)c->rank : (uint64_t)c->size, failed ? 1u : 0u };
    remat_status st = remat_comm_allreduce_u64(c, v, 1, REMAT_COMM_MIN);
    if (!st) st = remat_comm_allreduce_u64(c, v + 1, 1, REMAT_COMM_SUM);
    if (st) return st;
    *first = v[0] < (uint64_t)c->size ? (int)v[0] : -1;
    if (count) *count = (int)v[1];
    return REMAT_OK;
}

remat_status remat_comm_same(remat_comm *c, uint64_t value, int *same)
{
    if (!c || !same) return remat_fail(REMAT_ERR_INVALID, "remat_comm_same: NULL argument");
    uint64_t v[2] = { value, ~value };   /* min of the values and min of their complements: the max */
    remat_status st = remat_comm_allreduce_u64(c, v, 2, REMAT_COMM_MIN);
    if (st) return st;
    *same = v[0] == value && ~v[1] == value;
    return REMAT_OK;
}
