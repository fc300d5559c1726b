/* MPI-IO: every way to write and read a file, each rank its own 16-byte (4 int) slot
 * per region of the file, so the content does not depend on timing:
 *   region k (k = 0..9) starts at k * 16 * np; rank r's slot is at + 16 * r.
 *   0 write_at  1 write_at_all  2 seek + write  3 seek + write_all  4 iwrite_at + Wait
 *   5 iwrite_at_all + Wait  6 write_at_all_begin/end  7 write_ordered (shared pointer)
 *   8 write_shared  9 iwrite_shared + Wait (8, 9: every rank the same data: any order)
 *   (a barrier between 8 and 9)
 * then the same reads back, a read past the end (8 of 16 bytes there), and rank 0
 * creates, closes and deletes a scratch file. Usage: mpiio FILE. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 4

static void fill(int *b, int rank, int k)
{
    for (int i = 0; i < N; i++) b[i] = rank * 1000 + k * 10 + i;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np, ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *path = argc > 1 ? argv[1] : "mpiio.dat";
    MPI_File fh;
    MPI_Status st;
    MPI_Request rq;
    int b[N], got[N];
    MPI_Offset slot = 16 * rank, region = 16 * (MPI_Offset)np;

    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    fill(b, rank, 0);
    MPI_File_write_at(fh, 0 * region + slot, b, N, MPI_INT, &st);
    fill(b, rank, 1);
    MPI_File_write_at_all(fh, 1 * region + slot, b, N, MPI_INT, MPI_STATUS_IGNORE);
    fill(b, rank, 2);
    MPI_File_seek(fh, 2 * region + slot, MPI_SEEK_SET);
    MPI_File_write(fh, b, N, MPI_INT, &st);
    fill(b, rank, 3);
    MPI_File_seek(fh, 3 * region + slot, MPI_SEEK_SET);
    MPI_File_write_all(fh, b, N, MPI_INT, &st);
    fill(b, rank, 4);
    MPI_File_iwrite_at(fh, 4 * region + slot, b, N, MPI_INT, &rq);
    MPI_Wait(&rq, &st);
    fill(b, rank, 5);
    MPI_File_iwrite_at_all(fh, 5 * region + slot, b, N, MPI_INT, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    fill(b, rank, 6);
    MPI_File_write_at_all_begin(fh, 6 * region + slot, b, N, MPI_INT);
    MPI_File_write_at_all_end(fh, b, &st);
    fill(b, rank, 7);
    MPI_File_seek_shared(fh, 7 * region, MPI_SEEK_SET);
    MPI_File_write_ordered(fh, b, N, MPI_INT, &st);
    fill(b, 0, 8);
    MPI_File_write_shared(fh, b, N, MPI_INT, &st);
    MPI_Barrier(MPI_COMM_WORLD); /* every write_shared before any iwrite_shared */
    fill(b, 0, 9);
    MPI_File_iwrite_shared(fh, b, N, MPI_INT, &rq);
    MPI_Wait(&rq, &st);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);

    /* reads, each checked */
#define CHECK(r, k) do { fill(b, r, k); ok &= memcmp(b, got, sizeof b) == 0; } while (0)
    MPI_File_read_at(fh, 0 * region + slot, got, N, MPI_INT, &st);
    CHECK(rank, 0);
    MPI_File_read_at_all(fh, 1 * region + slot, got, N, MPI_INT, &st);
    CHECK(rank, 1);
    MPI_File_seek(fh, 2 * region + slot, MPI_SEEK_SET);
    MPI_File_read(fh, got, N, MPI_INT, &st);
    CHECK(rank, 2);
    MPI_File_seek(fh, 3 * region + slot, MPI_SEEK_SET);
    MPI_File_read_all(fh, got, N, MPI_INT, &st);
    CHECK(rank, 3);
    MPI_File_iread_at(fh, 4 * region + slot, got, N, MPI_INT, &rq);
    MPI_Wait(&rq, &st);
    CHECK(rank, 4);
    MPI_File_iread_at_all(fh, 5 * region + slot, got, N, MPI_INT, &rq);
    MPI_Wait(&rq, &st);
    CHECK(rank, 5);
    MPI_File_read_at_all_begin(fh, 6 * region + slot, got, N, MPI_INT);
    MPI_File_read_at_all_end(fh, got, &st);
    CHECK(rank, 6);
    MPI_File_seek(fh, 6 * region + slot, MPI_SEEK_SET);
    MPI_File_iread(fh, got, N, MPI_INT, &rq);
    MPI_Wait(&rq, &st);
    CHECK(rank, 6);
    MPI_File_seek_shared(fh, 7 * region, MPI_SEEK_SET);
    MPI_File_read_ordered(fh, got, N, MPI_INT, &st);
    CHECK(rank, 7);
    MPI_File_seek_shared(fh, 8 * region, MPI_SEEK_SET);
    MPI_File_read_shared(fh, got, N, MPI_INT, &st);
    CHECK(0, 8);
    /* past the end: the file has 10 regions; ask 16 bytes where 8 remain */
    int n = -1;
    MPI_File_read_at(fh, 10 * region - 8, got, N, MPI_INT, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    ok &= n == 8;
    MPI_File_close(&fh);

    if (rank == 0) {
        char scratch[4096];
        snprintf(scratch, sizeof scratch, "%s.scratch", path);
        MPI_File_open(MPI_COMM_SELF, scratch, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh);
        MPI_File_close(&fh);
        MPI_File_delete(scratch, MPI_INFO_NULL);
    }
    printf("rank %d mpiio %s\n", rank, ok ? "ok" : "WRONG");
    MPI_Finalize();
    return ok ? 0 : 1;
}
