/* RMA and MPI-IO in a loop that runs until a rank is killed (test_rma_io.py's crash-safe
 * log test). Every iteration: a Put into the next rank's window between two fences, an
 * MPI_File_write_at and an MPI_File_iwrite_at + Wait of 16 bytes each to this rank's
 * slots of FILE, then "rank R pid P iteration I" (flushed) and a 2 ms sleep.
 * Usage: rmaio_loop ITERATIONS FILE */
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
    MPI_Win win;
    MPI_File fh;
    MPI_Request rq;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_File_open(MPI_COMM_WORLD, argc > 2 ? argv[2] : "rmaio_loop.dat",
                  MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    for (long i = 1; i <= iterations; i++) {
        for (int k = 0; k < 4; k++) mine[k] = (int)i;
        MPI_Win_fence(0, win);
        MPI_Put(mine, 4, MPI_INT, (rank + 1) % np, 0, 4, MPI_INT, win);
        MPI_Win_fence(0, win);
        MPI_File_write_at(fh, 32 * rank, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
        MPI_File_iwrite_at(fh, 32 * rank + 16, buf, 4, MPI_INT, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        printf("rank %d pid %d iteration %ld\n", rank, (int)getpid(), i);
        fflush(stdout);
        usleep(2000);
    }
    MPI_File_close(&fh);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
