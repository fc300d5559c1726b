/* Functions the spec has no entry for, which only the wrappers generated from mpi.h
 * record: a shared-memory communicator (MPI_Comm_split_type), a window, MPI_Get and
 * MPI_Win_fence. Rank 1 sleeps 200 ms before the closing fence, so rank 0 waits there
 * about that long: MPI time, never compute. Each rank prints what it got and how long
 * its closing fence took by its own clock. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);

    int mine = 100 + rank, got = -1;
    MPI_Win win;
    MPI_Win_create(&mine, sizeof mine, sizeof mine, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Get(&got, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win);
    if (rank == 1) {
        struct timespec pause = {0, 200000000};
        nanosleep(&pause, NULL);
    }
    double t0 = now();
    MPI_Win_fence(0, win);
    double waited = now() - t0;
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    printf("rank %d got %d fence_s %.3f\n", rank, got, waited);
    MPI_Finalize();
    return 0;
}
