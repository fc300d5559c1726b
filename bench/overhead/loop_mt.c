/* bench/overhead: the threaded loop, MPI_THREAD_MULTIPLE. NT threads per rank (argv[2],
 * default 2) each run, at the same time, per iteration an Irecv + Isend (8 B) with the
 * ring neighbours' same thread (the thread's own tag) + Waitall. Every thread makes one
 * exchange first (traced, that sets up its recorder) and the timed loops start together:
 * a thread started late would otherwise run its loop alone. Prints on rank 0:
 *   loop_s=<slowest rank's loop time> iterations=<n> calls=<wrapped MPI calls per thread> */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rank_, size_, iters_;
static pthread_barrier_t ready, go;

static void *worker(void *arg)
{
    int tag = (int)(long)arg, right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    double out = rank_, in = 0;
    for (int i = -1; i < iters_; i++) {
        if (i == 0) { /* after the warm-up exchange: start with the others */
            pthread_barrier_wait(&ready);
            pthread_barrier_wait(&go);
        }
        MPI_Request rq[2];
        MPI_Irecv(&in, 1, MPI_DOUBLE, left, tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, right, tag, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        out += in;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    iters_ = argc > 1 ? atoi(argv[1]) : 100000;
    int nt = argc > 2 ? atoi(argv[2]) : 2;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    pthread_t th[64];
    if (nt < 1 || nt > 64) nt = 2;
    pthread_barrier_init(&ready, NULL, (unsigned)nt + 1);
    pthread_barrier_init(&go, NULL, (unsigned)nt + 1);
    for (long t = 0; t < nt; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    pthread_barrier_wait(&ready); /* every thread has made its first exchange */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    pthread_barrier_wait(&go);
    for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank_ == 0) printf("loop_s=%.6f iterations=%d calls=%ld\n", tmax, iters_, 3L * iters_);
    MPI_Finalize();
    return 0;
}
