/* Every kind of crash-safe log record, in a loop that runs until a rank is killed
 * (test_recover_hostile.py): a split communicator with a name (COMM, COMM_NAME), an RMA
 * window and a file (OBJECT), call sites (CALLSITE); with a small MPISCOPE_BUFFER_SIZE
 * the loop's events fill several windows (WINDOW). Every iteration: a Sendrecv around the
 * ring, an Allreduce on `half`, a Put between two fences, a write_at to this rank's slot
 * of FILE, then "rank R pid P iteration I" (flushed) and a 1 ms sleep.
 * Usage: crashlog ITERATIONS FILE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np, buf[4] = {0}, mine[4];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_set_name(half, "half");
    MPI_Win win;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argc > 2 ? argv[2] : "crashlog.dat",
                  MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    char out[64] = {0}, in[64];
    double x = rank, y = 0.0;
    for (long i = 1; i <= iterations; i++) {
        MPI_Sendrecv(out, 64, MPI_CHAR, (rank + 1) % np, 5, in, 64, MPI_CHAR,
                     (rank + np - 1) % np, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half);
        for (int k = 0; k < 4; k++) mine[k] = (int)i;
        MPI_Win_fence(0, win);
        MPI_Put(mine, 4, MPI_INT, (rank + 1) % np, 0, 4, MPI_INT, win);
        MPI_Win_fence(0, win);
        MPI_File_write_at(fh, 16 * rank, mine, 4, MPI_INT, MPI_STATUS_IGNORE);
        printf("rank %d pid %d iteration %ld\n", rank, (int)getpid(), i);
        fflush(stdout);
        usleep(1000);
    }
    MPI_File_close(&fh);
    MPI_Win_free(&win);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
