/* Every collective family mpiscope wraps, plus communicator life cycle, each call once
 * with known counts. Sizes depend only on the number of ranks, so the test can compute
 * the bytes each rank sends and receives. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Comm W = MPI_COMM_WORLD;
    int *a = calloc(64 * (size_t)n, sizeof(int)), *b = calloc(64 * (size_t)n, sizeof(int));
    int *cnt = malloc(n * sizeof(int)), *dsp = malloc(n * sizeof(int));
    int *cnt2 = malloc(n * sizeof(int)), *dsp2 = malloc(n * sizeof(int));
    MPI_Datatype *types = malloc(n * sizeof(MPI_Datatype));
    /* result buffers set before use: the trace hashes each as it was before the call */
    double x = rank + 1, y = 0, d2[2] = {1, 2}, r2[2] = {0, 0};

    MPI_Barrier(W); /* CALLSITE:barrier */
    MPI_Bcast(a, 4, MPI_INT, 0, W);
    MPI_Reduce(d2, r2, 2, MPI_DOUBLE, MPI_SUM, n - 1, W);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, W); /* CALLSITE:allreduce */
    int three[3] = {rank, 1, 2};
    MPI_Allreduce(MPI_IN_PLACE, three, 3, MPI_INT, MPI_MAX, W); /* CALLSITE:allreduce_in_place */
    for (int i = 0; i < n; i++) cnt[i] = 2;
    MPI_Reduce_scatter(a, b, cnt, MPI_INT, MPI_SUM, W);
    MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, W);
    int s = rank, sr = 0;
    MPI_Scan(&s, &sr, 1, MPI_INT, MPI_SUM, W);
    MPI_Exscan(&s, &sr, 1, MPI_INT, MPI_SUM, W);
    MPI_Gather(a, 1, MPI_INT, b, 1, MPI_INT, 0, W);
    /* v-variants: rank i contributes i+1 ints */
    for (int i = 0, o = 0; i < n; i++) { cnt[i] = i + 1; dsp[i] = o; o += i + 1; }
    MPI_Gatherv(a, rank + 1, MPI_INT, b, cnt, dsp, MPI_INT, 0, W);
    MPI_Scatter(a, 2, MPI_INT, b, 2, MPI_INT, 0, W);
    MPI_Scatterv(a, cnt, dsp, MPI_INT, b, rank + 1, MPI_INT, 0, W);
    MPI_Allgather(&s, 1, MPI_INT, b, 1, MPI_INT, W);
    MPI_Allgatherv(a, rank + 1, MPI_INT, b, cnt, dsp, MPI_INT, W);
    MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, W);
    /* Alltoallv: send j+1 ints to rank j, so receive rank+1 ints from everyone */
    for (int i = 0; i < n; i++) {
        cnt2[i] = rank + 1; dsp2[i] = i * (rank + 1); dsp[i] = i * 64;
    }
    for (int i = 0, o = 0; i < n; i++) { cnt[i] = i + 1; dsp[i] = o; o += i + 1; }
    MPI_Alltoallv(a, cnt, dsp, MPI_INT, b, cnt2, dsp2, MPI_INT, W);
    /* Alltoallw: one int to everyone, displacements in bytes */
    for (int i = 0; i < n; i++) {
        cnt[i] = 1; dsp[i] = i * (int)sizeof(int); types[i] = MPI_INT;
    }
    MPI_Alltoallw(a, cnt, dsp, types, b, cnt, dsp, types, W);

    /* non-blocking collectives, each completed by its own Wait */
    MPI_Request rq;
    MPI_Ibarrier(W, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Ibcast(a, 4, MPI_INT, 0, W, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Ireduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, 0, W, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Iallreduce(a, b, 2, MPI_INT, MPI_SUM, W, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);

    /* communicators: every event must name the right one */
    MPI_Comm dup, split, evens, cart;
    MPI_Comm_dup(W, &dup);
    MPI_Comm_set_name(dup, "solver comm"); /* the trace must carry the program's name */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dup); /* CALLSITE:allreduce_dup */
    /* colour by parity, key reversed: comm rank 0 is the highest world rank of a colour */
    MPI_Comm_split(W, rank % 2, -rank, &split); /* CALLSITE:split */
    int srank, ssize;
    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    MPI_Bcast(a, 3, MPI_INT, 0, split); /* CALLSITE:bcast_split */
    if (ssize > 1) {
        if (srank == 0) MPI_Send(a, 7, MPI_INT, 1, 42, split); /* CALLSITE:send_split */
        else if (srank == 1) MPI_Recv(a, 7, MPI_INT, 0, 42, split, MPI_STATUS_IGNORE);
    }
    MPI_Group wg, eg;
    MPI_Comm_group(W, &wg);
    int ne = (n + 1) / 2, *ev = malloc(ne * sizeof(int));
    for (int i = 0; i < ne; i++) ev[i] = 2 * i;
    MPI_Group_incl(wg, ne, ev, &eg);
    MPI_Comm_create(W, eg, &evens);
    if (evens != MPI_COMM_NULL) MPI_Barrier(evens);
    int dims[1] = {n}, periods[1] = {1}, src, dst;
    MPI_Cart_create(W, 1, dims, periods, 0, &cart);
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    MPI_Sendrecv(&s, 1, MPI_INT, dst, 43, &sr, 1, MPI_INT, src, 43, cart, MPI_STATUS_IGNORE);
    MPI_Comm_free(&cart);
    if (evens != MPI_COMM_NULL) MPI_Comm_free(&evens);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    /* a new communicator, likely at the freed one's address: it must get a new ref */
    MPI_Comm_dup(W, &dup);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dup); /* CALLSITE:allreduce_dup2 */
    MPI_Comm_free(&dup);
    MPI_Group_free(&eg);
    MPI_Group_free(&wg);

    printf("rank %d of %d: allreduce %g split rank %d of %d\n", rank, n, y, srank, ssize);
    free(a); free(b); free(cnt); free(dsp); free(cnt2); free(dsp2); free(types); free(ev);
    MPI_Finalize();
    return 0;
}
