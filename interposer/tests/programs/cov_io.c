/* MPI-IO through wrappers generated from mpi.h (no spec entry): open, set_view, a
 * collective write, a non-blocking write completed by MPI_Wait, a shared-pointer write
 * in rank order, sync, a collective read back, close. argv[1] is the file; each rank prints what it
 * read back. Any nesting (an MPI library calling MPI_* inside MPI-IO) would show in the
 * trace. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, buf[4], back[4] = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 4; i++) buf[i] = rank * 10 + i;
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                  &fh);
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    MPI_File_write_at_all(fh, rank * 4, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
    MPI_Request rq;
    MPI_File_iwrite_at(fh, 100 + rank * 4, buf, 4, MPI_INT, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_File_seek_shared(fh, 64, MPI_SEEK_SET);
    MPI_File_write_ordered(fh, &buf[3], 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_File_read_at_all(fh, rank * 4, back, 4, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    printf("rank %d read %d %d %d %d\n", rank, back[0], back[1], back[2], back[3]);
    MPI_Finalize();
    return 0;
}
