/* Every nonblocking collective of MPI-3.1 and every neighbourhood collective (blocking and
 * nonblocking), each once with counts that depend only on the number of ranks, so the
 * test can compute what each rank sends and receives; a few blocking collectives with
 * known payloads (for their hashes); last an MPI_Ialltoall whose partner comes 100 ms
 * late. Payload: a[i] = 1000 * rank + i. */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#define DONE MPI_Wait(&rq, MPI_STATUS_IGNORE)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Comm W = MPI_COMM_WORLD;
    int *a = malloc(64 * (size_t)n * sizeof(int)), *b = calloc(64 * (size_t)n, sizeof(int));
    for (int i = 0; i < 64 * n; i++) a[i] = 1000 * rank + i;
    int *cnt = malloc(n * sizeof(int)), *dsp = malloc(n * sizeof(int));
    int *cnt2 = malloc(n * sizeof(int)), *dsp2 = malloc(n * sizeof(int));
    MPI_Datatype *types = malloc(n * sizeof(MPI_Datatype));
    MPI_Request rq;
    int s = rank, sr = 0;

    /* nonblocking collectives, each completed by its own Wait */
    MPI_Igather(a, 1, MPI_INT, b, 1, MPI_INT, 0, W, &rq); DONE;
    for (int i = 0, o = 0; i < n; i++) { cnt[i] = i + 1; dsp[i] = o; o += i + 1; }
    MPI_Igatherv(a, rank + 1, MPI_INT, b, cnt, dsp, MPI_INT, 0, W, &rq); DONE;
    MPI_Iscatter(a, 2, MPI_INT, b, 2, MPI_INT, 0, W, &rq); DONE;
    MPI_Iscatterv(a, cnt, dsp, MPI_INT, b, rank + 1, MPI_INT, 0, W, &rq); DONE;
    MPI_Iallgather(a, 1, MPI_INT, b, 1, MPI_INT, W, &rq); DONE;
    MPI_Iallgatherv(a, rank + 1, MPI_INT, b, cnt, dsp, MPI_INT, W, &rq); DONE;
    MPI_Ialltoall(a, 1, MPI_INT, b, 1, MPI_INT, W, &rq); DONE;
    /* send j+1 ints to rank j, so receive rank+1 ints from everyone */
    for (int i = 0; i < n; i++) { cnt2[i] = rank + 1; dsp2[i] = i * (rank + 1); }
    MPI_Ialltoallv(a, cnt, dsp, MPI_INT, b, cnt2, dsp2, MPI_INT, W, &rq); DONE;
    for (int i = 0; i < n; i++) { cnt2[i] = 1; dsp2[i] = i * (int)sizeof(int); types[i] = MPI_INT; }
    MPI_Ialltoallw(a, cnt2, dsp2, types, b, cnt2, dsp2, types, W, &rq); DONE;
    for (int i = 0; i < n; i++) cnt2[i] = 2;
    MPI_Ireduce_scatter(a, b, cnt2, MPI_INT, MPI_SUM, W, &rq); DONE;
    MPI_Ireduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, W, &rq); DONE;
    MPI_Iscan(&s, &sr, 1, MPI_INT, MPI_SUM, W, &rq); DONE;
    MPI_Iexscan(&s, &sr, 1, MPI_INT, MPI_SUM, W, &rq); DONE;

    /* neighbourhood collectives on a periodic ring: two neighbours, left then right (the
     * same counts both ways: on a ring of two, both are the same rank and MPI could not
     * tell the two messages apart) */
    MPI_Comm ring, chain, dg;
    int dims[1] = {n}, periodic[1] = {1}, open[1] = {0};
    MPI_Cart_create(W, 1, dims, periodic, 0, &ring);
    int lr[2] = {2, 2}, rl[2] = {2, 2}, d01[2] = {0, 2}, d02[2] = {4, 0};
    MPI_Aint ad01[2] = {0, 2 * sizeof(int)}, ad02[2] = {4 * sizeof(int), 0};
    MPI_Datatype t2[2] = {MPI_INT, MPI_INT};
    MPI_Neighbor_allgather(a, 1, MPI_INT, b, 1, MPI_INT, ring);
    MPI_Neighbor_allgatherv(a, 1, MPI_INT, b, lr, d01, MPI_INT, ring);
    MPI_Neighbor_alltoall(a, 1, MPI_INT, b, 1, MPI_INT, ring);
    MPI_Neighbor_alltoallv(a, lr, d01, MPI_INT, b, rl, d02, MPI_INT, ring);
    MPI_Neighbor_alltoallw(a, lr, ad01, t2, b, rl, ad02, t2, ring);
    MPI_Ineighbor_allgather(a, 1, MPI_INT, b, 1, MPI_INT, ring, &rq); DONE;
    MPI_Ineighbor_allgatherv(a, 1, MPI_INT, b, lr, d01, MPI_INT, ring, &rq); DONE;
    MPI_Ineighbor_alltoall(a, 1, MPI_INT, b, 1, MPI_INT, ring, &rq); DONE;
    MPI_Ineighbor_alltoallv(a, lr, d01, MPI_INT, b, rl, d02, MPI_INT, ring, &rq); DONE;
    MPI_Ineighbor_alltoallw(a, lr, ad01, t2, b, rl, ad02, t2, ring, &rq); DONE;
    /* a chain (not periodic): the ends' outer neighbours are MPI_PROC_NULL */
    MPI_Cart_create(W, 1, dims, open, 0, &chain);
    MPI_Neighbor_alltoall(a, 3, MPI_INT, b, 3, MPI_INT, chain);
    /* a directed chain: rank r receives from r-1 and sends to r+1 */
    int src[1] = {rank - 1}, dst[1] = {rank + 1}, one[1] = {1};
    MPI_Dist_graph_create_adjacent(W, rank > 0, src, one, rank < n - 1, dst, one,
                                   MPI_INFO_NULL, 0, &dg);
    MPI_Neighbor_allgather(a, 5, MPI_INT, b, 5, MPI_INT, dg);

    /* blocking collectives with known payloads: their hashes */
    for (int i = 0; i < 64 * n; i++) a[i] = 1000 * rank + i;
    MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, W);
    MPI_Gather(a, 2, MPI_INT, b, 2, MPI_INT, 0, W);
    MPI_Scatter(a, 1, MPI_INT, b, 1, MPI_INT, 0, W);
    MPI_Reduce_scatter_block(a, b, 1, MPI_INT, MPI_SUM, W);

    /* Ialltoall completed by MPI_Wait, rank 1 arriving 100 ms late */
    MPI_Barrier(W);
    if (rank == 1) usleep(100000);
    MPI_Ialltoall(a, 1, MPI_INT, b, 1, MPI_INT, W, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE); /* CALLSITE:late_wait */

    MPI_Comm_free(&dg);
    MPI_Comm_free(&chain);
    MPI_Comm_free(&ring);
    MPI_Finalize();
    return 0;
}
