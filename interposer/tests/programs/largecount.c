/* largecount.c — MPI-4 large-count functions (built with -DLARGE: MPI_Send_c,
 * MPI_Allgatherv_c with MPI_Count counts and MPI_Aint displacements, MPI_Win_create_c,
 * MPI_File_read_at_c, ...) or, built without, their int twins: the same calls on the same
 * data, line for line, so the two traces must hold the same records. Any number of ranks
 * >= 2.
 *
 *     largecount FILE      FILE: a scratch path for the MPI-IO part
 *
 * At the end rank 0 broadcasts 3 GiB on MPI_COMM_SELF (a count beyond INT_MAX with
 * -DLARGE, one element of a 3 GiB datatype without): a single-process broadcast moves
 * nothing, so the buffer is a PROT_NONE reservation that no byte of memory backs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef LARGE
#define C(f) f##_c
typedef MPI_Count count_t; /* counts and count arrays */
typedef MPI_Aint displ_t;  /* displacement arrays, a window's displacement unit */
#define BCAST_3GIB(buf, type3) MPI_Bcast_c(buf, (MPI_Count)3 << 30, MPI_BYTE, 0, MPI_COMM_SELF)
#else
#define C(f) f
typedef int count_t;
typedef int displ_t;
#define BCAST_3GIB(buf, type3) MPI_Bcast(buf, 1, type3, 0, MPI_COMM_SELF)
#endif

#define N 64
#define W MPI_COMM_WORLD

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(W, &rank);
    MPI_Comm_size(W, &size);
    if (argc < 2 || size < 2) {
        if (rank == 0) fprintf(stderr, "usage: largecount FILE, on 2 ranks or more\n");
        MPI_Abort(W, 2);
    }
    double a[N], b[N], c[4 * N], d[4 * N];
    for (int i = 0; i < N; i++) a[i] = rank * 100 + i;
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    memset(d, 0, sizeof d);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request r[3];
    MPI_Status sts[3]; /* not MPI_STATUSES_IGNORE: GCC 12 warns on MPICH's */

    /* blocking point-to-point: 0 -> 1, then a ring */
    if (rank == 0) {
        C(MPI_Send)(a, N, MPI_DOUBLE, 1, 1, W);
        C(MPI_Ssend)(a, 10, MPI_DOUBLE, 1, 2, W);
    } else if (rank == 1) {
        C(MPI_Recv)(b, N, MPI_DOUBLE, 0, 1, W, MPI_STATUS_IGNORE);
        C(MPI_Recv)(b, N, MPI_DOUBLE, 0, 2, W, MPI_STATUS_IGNORE);
    }
    C(MPI_Sendrecv)(a, 8, MPI_DOUBLE, right, 3, b, N, MPI_DOUBLE, left, 3, W,
                    MPI_STATUS_IGNORE);

    /* nonblocking */
    C(MPI_Irecv)(b, N, MPI_DOUBLE, left, 4, W, &r[0]);
    C(MPI_Isend)(a, 16, MPI_DOUBLE, right, 4, W, &r[1]);
    MPI_Waitall(2, r, sts);

    /* persistent, started twice */
    C(MPI_Recv_init)(b, N, MPI_DOUBLE, left, 5, W, &r[0]);
    C(MPI_Send_init)(a, 24, MPI_DOUBLE, right, 5, W, &r[1]);
    for (int it = 0; it < 2; it++) {
        MPI_Startall(2, r);
        MPI_Waitall(2, r, sts);
    }
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);

    /* matched probe, the message received by Mrecv and by Imrecv */
    MPI_Message msg;
    for (int k = 0; k < 2; k++) {
        C(MPI_Isend)(a, 12 + k, MPI_DOUBLE, right, 6, W, &r[1]);
        MPI_Mprobe(left, 6, W, &msg, MPI_STATUS_IGNORE);
        if (k == 0) {
            C(MPI_Mrecv)(b, N, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
        } else {
            C(MPI_Imrecv)(b, N, MPI_DOUBLE, &msg, &r[0]);
            MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        }
        MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    }

    /* blocking collectives; the v-variants with a block of rank + 1 elements per rank,
     * 8 elements apart */
    count_t counts[size], mine[size];
    displ_t displs[size];
    for (int i = 0; i < size; i++) {
        counts[i] = i + 1;
        mine[i] = rank + 1; /* Alltoallv: what each rank sends this one */
        displs[i] = 8 * i;
    }
    C(MPI_Bcast)(a, N, MPI_DOUBLE, 0, W);
    C(MPI_Allreduce)(a, b, N, MPI_DOUBLE, MPI_SUM, W);
    C(MPI_Reduce)(a, b, 8, MPI_DOUBLE, MPI_MAX, 1, W);
    C(MPI_Allgatherv)(a, rank + 1, MPI_DOUBLE, c, counts, displs, MPI_DOUBLE, W);
    C(MPI_Gatherv)(a, rank + 1, MPI_DOUBLE, c, counts, displs, MPI_DOUBLE, 0, W);
    C(MPI_Alltoallv)(a, counts, displs, MPI_DOUBLE, c, mine, displs, MPI_DOUBLE, W);

    /* nonblocking collectives; the v-variants' arrays are overwritten once they are posted
     * (MPI lets the caller reuse them) */
    C(MPI_Iallreduce)(a, b, 4, MPI_DOUBLE, MPI_SUM, W, &r[0]);
    C(MPI_Ibcast)(a, 6, MPI_DOUBLE, size - 1, W, &r[1]);
    MPI_Waitall(2, r, sts);
    C(MPI_Iallgatherv)(a, rank + 1, MPI_DOUBLE, c, counts, displs, MPI_DOUBLE, W, &r[0]);
    C(MPI_Ialltoallv)(a, counts, displs, MPI_DOUBLE, d, mine, displs, MPI_DOUBLE, W, &r[1]);
    for (int i = 0; i < size; i++) counts[i] = mine[i] = displs[i] = -1;
    MPI_Waitall(2, r, sts);

    /* RMA: a window of N doubles, displacement unit a double */
    double win_mem[N];
    memset(win_mem, 0, sizeof win_mem);
    MPI_Win win;
    C(MPI_Win_create)(win_mem, sizeof win_mem, (displ_t)sizeof(double), MPI_INFO_NULL, W, &win);
    MPI_Win_fence(0, win);
    C(MPI_Put)(a, 4, MPI_DOUBLE, right, 0, 4, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    C(MPI_Get)(b, 2, MPI_DOUBLE, left, 4, 2, MPI_DOUBLE, win);
    C(MPI_Accumulate)(a, 3, MPI_DOUBLE, right, 8, 3, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);

    /* MPI-IO: each rank its own N doubles, written and read back */
    MPI_File fh;
    MPI_Offset at = (MPI_Offset)rank * N * (MPI_Offset)sizeof(double);
    MPI_File_open(W, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    C(MPI_File_write_at)(fh, at, a, N, MPI_DOUBLE, MPI_STATUS_IGNORE);
    C(MPI_File_write_at_all)(fh, at, a, N / 2, MPI_DOUBLE, MPI_STATUS_IGNORE);
    C(MPI_File_read_at)(fh, at, b, N, MPI_DOUBLE, MPI_STATUS_IGNORE);
    C(MPI_File_iread_at)(fh, at, c, 8, MPI_DOUBLE, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    int same = memcmp(a, b, sizeof a) == 0;

    /* 3 GiB: beyond what an int counts (the datatype made in both builds: the traces of
     * both have the same calls, on the same lines) */
    if (rank == 0) {
        size_t len = (size_t)3 << 30;
        void *huge = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                          -1, 0);
        if (huge == MAP_FAILED) MPI_Abort(W, 3);
        MPI_Datatype gib, three_gib;
        MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib);
        MPI_Type_contiguous(3, gib, &three_gib);
        MPI_Type_commit(&three_gib);
        BCAST_3GIB(huge, three_gib); /* CALLSITE:huge */
        MPI_Type_free(&three_gib);
        MPI_Type_free(&gib);
        munmap(huge, len);
    }

    printf("rank %d: read back %s\n", rank, same ? "the same" : "something else");
    MPI_Finalize();
    return 0;
}
