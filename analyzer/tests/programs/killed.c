/* A loop that runs until one of its ranks is killed, for test_killed_rank.py.
 * Every iteration: a Sendrecv around the ring (tag 5, 64 bytes), an Allreduce of one
 * double on MPI_COMM_WORLD and one on `half` (Comm_split by rank parity, named "half":
 * {0, 2} and {1} with 3 ranks), then each rank prints "rank R pid P iteration I"
 * (flushed), so the test knows how far a rank got and whom to kill -9. A short sleep
 * keeps the loop from outrunning the test. It ends by itself after argv[1] iterations.
 * With "mt" it asks for MPI_THREAD_MULTIPLE (the interposer then stamps under its lock).
 * Usage: killed [ITERATIONS [SLEEP_US [mt]]]   (defaults 100000, 2000)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 100000;
    long sleep_us = argc > 2 ? atol(argv[2]) : 2000;
    if (argc > 3 && strcmp(argv[3], "mt") == 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_set_name(half, "half");
    char out[64] = {0}, in[64];
    double x = rank, y = 0.0;
    for (long i = 1; i <= iterations; i++) {
        MPI_Sendrecv(out, 64, MPI_CHAR, (rank + 1) % size, 5, in, 64, MPI_CHAR, /* CALLSITE:ring */
                     (rank + size - 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* CALLSITE:world */
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half); /* CALLSITE:half */
        printf("rank %d pid %d iteration %ld\n", rank, (int)getpid(), i);
        fflush(stdout);
        if (sleep_us) usleep((useconds_t)sleep_us);
    }
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
