/* The cases issue 14 found mpiscope reporting untrue things on: each mode is one of them.
 *   fence          rank 1 reaches MPI_Win_fence 200 ms late: the others wait in the fence
 *   barrier_fence  Barrier; Win_fence; Put; Win_fence; Barrier in a loop: the barrier after
 *                  the RMA is not redundant; the next iteration's first barrier is (nothing
 *                  between it and the previous one), in every iteration: a barrier before
 *                  the loop precedes the first
 *   ialltoall      rank 1 posts MPI_Ialltoall 100 ms late; the others wait in MPI_Wait
 *   io             every rank writes 4 MiB collectively with MPI_File_write_at_all
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fence(int r)
{
    double buf[16] = {0};
    MPI_Win win;
    MPI_Win_create(buf, sizeof buf, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    if (r == 1) usleep(200000);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
}

static void barrier_fence(int r, int n)
{
    double buf[16] = {0}, x = r;
    MPI_Win win;
    MPI_Win_create(buf, sizeof buf, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 5; i++) {
        MPI_Barrier(MPI_COMM_WORLD); /* AFTER_BARRIER: follows the last iteration's barrier */
        MPI_Win_fence(0, win);
        MPI_Put(&x, 1, MPI_DOUBLE, (r + 1) % n, r, 1, MPI_DOUBLE, win);
        MPI_Win_fence(0, win);
        MPI_Barrier(MPI_COMM_WORLD); /* AFTER_RMA: fences and a Put since the last barrier */
    }
    MPI_Win_free(&win);
}

static void ialltoall(int r, int n)
{
    int *s = calloc((size_t)n, sizeof(int)), *d = calloc((size_t)n, sizeof(int));
    MPI_Request q;
    if (r == 1) usleep(100000);
    MPI_Ialltoall(s, 1, MPI_INT, d, 1, MPI_INT, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    free(s);
    free(d);
}

static void io(int r, const char *path)
{
    size_t n = 4u << 20;
    char *b = malloc(n);
    memset(b, 'a' + r, n);
    MPI_File f;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f);
    MPI_File_write_at_all(f, (MPI_Offset)r * (MPI_Offset)n, b, (int)n, MPI_CHAR,
                          MPI_STATUS_IGNORE);
    MPI_File_close(&f);
    free(b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "fence")) fence(r);
    else if (!strcmp(mode, "barrier_fence")) barrier_fence(r, n);
    else if (!strcmp(mode, "ialltoall")) ialltoall(r, n);
    else if (!strcmp(mode, "io") && argc > 2) io(r, argv[2]);
    else {
        if (r == 0) fprintf(stderr, "usage: untrue fence|barrier_fence|ialltoall|io FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
