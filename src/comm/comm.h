/*
 * comm.h -- the communication engine (MPI) behind a small interface
 * (private to the library; the public side is the "data parallelism"
 * section of remat.h).
 *
 * Only comm.c includes mpi.h.  Everything above sees point-to-point
 * exchanges of bytes, a broadcast and integer reductions: the arithmetic
 * on floats (the gradient tree, the norm) is done by the engine
 * (engine/dpstep.c) in an order it fixes itself, never by MPI, whose
 * reductions on floats have an unspecified bracketing.
 *
 * Every call counts the bytes this rank sends and the wall time spent
 * inside MPI (waiting for a partner included), so that a step can report
 * its communication.  Errors: REMAT_ERR_COMM with MPI's message.
 *
 * Layer 1: above core/, below engine/ and io/.
 */
#ifndef REMAT_COMM_INTERNAL_H
#define REMAT_COMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "remat.h"

struct remat_comm {
    int rank, size;       /* in the job (MPI_COMM_WORLD) */
    int local_size;       /* ranks on this machine */
    int mpi;              /* MPI was initialised by remat_comm_create (finalised by _free) */
    uint64_t sent_bytes;  /* counters since remat_comm_counters_reset */
    uint64_t ns;          /* wall time inside MPI calls */
    uint64_t messages;
};

/* Resets the counters. */
void remat_comm_counters_reset(remat_comm *c);

/* Sends sbytes from snd to peer and receives rbytes from peer into rcv at
 * once (either count may be 0); peer == own rank copies.  Any sizes. */
remat_status remat_comm_sendrecv(remat_comm *c, int peer, const void *snd, size_t sbytes, void *rcv, size_t rbytes);
/* Blocking send and receive of n bytes (any size). */
remat_status remat_comm_send(remat_comm *c, int peer, const void *p, size_t n);
remat_status remat_comm_recv(remat_comm *c, int peer, void *p, size_t n);
/* n bytes at p from root to every rank. */
remat_status remat_comm_bcast(remat_comm *c, void *p, size_t n, int root);

/* Element-wise reduction of n unsigned integers over every rank, in
 * place (integers: exact in any order). */
enum { REMAT_COMM_MIN = 0, REMAT_COMM_MAX = 1, REMAT_COMM_SUM = 2 };
remat_status remat_comm_allreduce_u64(remat_comm *c, uint64_t *v, int n, int op);

#endif
