/* largecount.c — the same program with the int functions, or (built with -DLARGE) with
 * their MPI-4 large-count twins (MPI_Send_c, ...: MPI_Count counts, MPI_Aint
 * displacements). mpiscope must record both alike. Run at 2 ranks. */
#include <mpi.h>
#include <stdio.h>

#ifdef LARGE
#define C(f) f##_c
typedef MPI_Count cnt_t;
typedef MPI_Aint disp_t;
#else
#define C(f) f
typedef int cnt_t;
typedef int disp_t;
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    double a[64] = {0}, b[64] = {0};
    MPI_Request rq[4];
    /* blocking, nonblocking and persistent point-to-point */
    C(MPI_Sendrecv)(a, 8, MPI_DOUBLE, peer, 1, b, 8, MPI_DOUBLE, from, 1, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE);
    if (rank == 0) C(MPI_Send)(a, 3, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
    if (rank == 1) C(MPI_Recv)(b, 3, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    C(MPI_Irecv)(b, 5, MPI_DOUBLE, from, 3, MPI_COMM_WORLD, &rq[0]);
    C(MPI_Isend)(a, 5, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    C(MPI_Recv_init)(b, 7, MPI_DOUBLE, from, 4, MPI_COMM_WORLD, &rq[0]);
    C(MPI_Send_init)(a, 7, MPI_DOUBLE, peer, 4, MPI_COMM_WORLD, &rq[1]);
    MPI_Startall(2, rq);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    /* collectives, blocking and not, with vector forms */
    C(MPI_Bcast)(a, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    C(MPI_Allreduce)(a, b, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    cnt_t counts[16];
    disp_t displs[16];
    for (int i = 0; i < size; i++) { counts[i] = i + 1; displs[i] = 2 * i; }
    C(MPI_Allgatherv)(a, rank + 1, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    C(MPI_Ialltoallv)(a, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE,
                      MPI_COMM_WORLD, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    /* one-sided and I/O */
    MPI_Win win;
    MPI_Win_create(b, sizeof b, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    C(MPI_Put)(a, 6, MPI_DOUBLE, peer, 0, 6, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_File fh;
    char name[256];
    snprintf(name, sizeof name, "%s", argc > 1 ? argv[1] : "largecount.dat");
    MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    C(MPI_File_write_at)(fh, rank * 64, a, 8, MPI_DOUBLE, MPI_STATUS_IGNORE);
    C(MPI_File_read_at)(fh, rank * 64, b, 8, MPI_DOUBLE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Finalize();
    printf("rank %d done\n", rank);
    return 0;
}
