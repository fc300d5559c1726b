/* One-sided communication under each synchronisation mode, one mode per run:
 *   rma fence    Put/Get/Accumulate between two fences; the last rank 200 ms late
 *   rma pscw     rank 0 exposes its window to the others (post/wait), who put into it
 *                (start/complete); the last rank starts 200 ms late
 *   rma passive  an exclusive lock on rank 0 held 200 ms by rank 0 while the others wait
 *                for it, then lock_all with request-based operations and flushes
 * Every rank checks what it received and prints one line. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LATE_US 200000

static int fence(int rank, int np)
{
    int *base, got[2] = {0, 0};
    MPI_Win win;
    MPI_Alloc_mem(16 * sizeof(int), MPI_INFO_NULL, &base);
    for (int i = 0; i < 16; i++) base[i] = rank * 100 + i;
    MPI_Win_create(base, 16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int mine[4] = {rank, rank, rank, rank}, one = 1;
    MPI_Win_fence(0, win);
    MPI_Put(mine, 4, MPI_INT, (rank + 1) % np, 4, 4, MPI_INT, win);
    MPI_Get(got, 2, MPI_INT, (rank + np - 1) % np, 0, 2, MPI_INT, win);
    MPI_Accumulate(&one, 1, MPI_INT, 0, 15, 1, MPI_INT, MPI_SUM, win);
    if (rank == np - 1) usleep(LATE_US); /* everyone else waits for it in the fence */
    MPI_Win_fence(0, win);
    int prev = (rank + np - 1) % np;
    int ok = got[0] == prev * 100 && got[1] == prev * 100 + 1 && base[4] == prev &&
             base[7] == prev && (rank != 0 || base[15] == 15 + np);
    MPI_Win_free(&win);
    MPI_Free_mem(base);
    return ok;
}

static int pscw(int rank, int np)
{
    int base[64] = {0};
    MPI_Win win;
    MPI_Group world, peers;
    MPI_Win_create(base, sizeof base, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ok = 1;
    if (rank == 0) {
        int zero = 0;
        MPI_Group_excl(world, 1, &zero, &peers); /* ranks 1 .. np-1 */
        MPI_Win_post(peers, 0, win);
        MPI_Win_wait(win); /* waits for the late origin's complete */
        for (int r = 1; r < np; r++) ok &= base[4 * r] == r && base[4 * r + 3] == r;
    } else {
        int zero = 0, mine[4] = {rank, rank, rank, rank};
        MPI_Group_incl(world, 1, &zero, &peers); /* rank 0 */
        if (rank == np - 1) usleep(LATE_US);
        MPI_Win_start(peers, 0, win);
        MPI_Put(mine, 4, MPI_INT, 0, 4 * rank, 4, MPI_INT, win);
        MPI_Win_complete(win);
    }
    MPI_Group_free(&peers);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    return ok;
}

static int passive(int rank, int np)
{
    int *base;
    MPI_Win win;
    MPI_Win_allocate(12 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < 12; i++) base[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    int one = 1, old = -1, cmp = 0, swap = rank, prev = -1;
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Barrier(MPI_COMM_WORLD); /* the others ask for the lock while rank 0 holds it */
        usleep(LATE_US);
        MPI_Win_unlock(0, win);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 0, MPI_SUM, win);
        MPI_Compare_and_swap(&swap, &cmp, &prev, MPI_INT, 0, 1, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int t = (rank + 1) % np, mine[4] = {rank, rank, rank, rank}, got[2] = {-1, -1};
    int r1 = 0, r2 = 0, two[2] = {1, 1};
    MPI_Request req[2];
    MPI_Win_lock_all(0, win);
    MPI_Rput(mine, 4, MPI_INT, t, 4, 4, MPI_INT, win, &req[0]);
    MPI_Rget(got, 2, MPI_INT, t, 2, 2, MPI_INT, win, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    MPI_Get_accumulate(&one, 1, MPI_INT, &r1, 1, MPI_INT, t, 3, 1, MPI_INT, MPI_SUM, win);
    MPI_Raccumulate(two, 2, MPI_INT, t, 8, 2, MPI_INT, MPI_SUM, win, &req[0]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Rget_accumulate(&one, 1, MPI_INT, &r2, 1, MPI_INT, t, 3, 1, MPI_INT, MPI_SUM, win,
                        &req[1]);
    MPI_Wait(&req[1], MPI_STATUS_IGNORE);
    MPI_Win_flush(t, win);
    MPI_Accumulate(&one, 1, MPI_INT, t, 3, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_flush_local_all(win);
    MPI_Put(&one, 1, MPI_INT, t, 1, 1, MPI_INT, win);
    MPI_Win_sync(win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = rank != 0 || base[0] == np - 1;
    ok &= base[3] == 3 && base[4] == (rank + np - 1) % np && base[2] == 0 && base[1] == 1 &&
          base[8] == 1 && base[9] == 1 && r1 + r2 == 1 && got[0] == 0;
    MPI_Win_free(&win);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np, ok = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *mode = argc > 1 ? argv[1] : "fence";
    if (!strcmp(mode, "fence")) ok = fence(rank, np);
    else if (!strcmp(mode, "pscw")) ok = pscw(rank, np);
    else if (!strcmp(mode, "passive")) ok = passive(rank, np);
    printf("rank %d %s %s\n", rank, mode, ok ? "ok" : "WRONG");
    MPI_Finalize();
    return ok ? 0 : 1;
}
