/* bench/overhead: loop.c's loop, its MPI calls made 9 functions below main, so that every
 * call has a call path deeper than any depth measured (MPISCOPE_CALLPATH_DEPTH 1..8, mpiP
 * -k). Each level is a separate non-inlined function, as an application's layers
 * (driver → solver → exchange → comm wrapper) are. Prints on rank 0:
 *   loop_s=<slowest rank's loop time> iterations=<n> calls=<wrapped MPI calls per rank> */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, left, right;

__attribute__((noinline)) static long step(int i) /* the application's comm wrapper */
{
    static double out, in, sum, x;
    MPI_Request rq[2];
    out = rank;
    MPI_Irecv(&in, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(&out, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    x = in + i;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (i % 10 == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        return 5;
    }
    return 4;
}

/* eight more levels; the empty asm keeps each a real call, never a tail jump */
#define LEVEL(name, next) \
    __attribute__((noinline)) static long name(int i) { long r = next(i); __asm__ volatile(""); return r; }
LEVEL(l1, step)
LEVEL(l2, l1)
LEVEL(l3, l2)
LEVEL(l4, l3)
LEVEL(l5, l4)
LEVEL(l6, l5)
LEVEL(l7, l6)
LEVEL(l8, l7)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    long calls = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) calls += l8(i);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("loop_s=%.6f iterations=%d calls=%ld\n", tmax, iters, calls);
    MPI_Finalize();
    return 0;
}
