/* Every communicator constructor, each followed by a collective on the new communicator
 * (marked CALLSITE:<name>) so the test can check that the collective names a defined
 * communicator with the right members. Needs an even number of ranks for the
 * intercommunicator (evens and odds, paired by position). */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, x = 1, y = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Comm W = MPI_COMM_WORLD;

    /* one node: every rank, ordered by key (highest world rank first) */
    MPI_Comm shared;
    MPI_Comm_split_type(W, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &shared);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, shared); /* CALLSITE:split_type */

    MPI_Comm dupi;
    MPI_Comm_dup_with_info(W, MPI_INFO_NULL, &dupi);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dupi); /* CALLSITE:dup_with_info */

    /* idup of the world, and twice of the parity halves (ids per parent and sequence) */
    MPI_Comm half, idup, ih1, ih2;
    MPI_Request rq[3];
    MPI_Comm_split(W, rank % 2, rank, &half);
    MPI_Comm_idup(W, &idup, &rq[0]);
    MPI_Comm_idup(half, &ih1, &rq[1]);
    MPI_Comm_idup(half, &ih2, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, idup); /* CALLSITE:idup */
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, ih1); /* CALLSITE:idup_half1 */
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, ih2); /* CALLSITE:idup_half2 */
    /* idup of MPI_COMM_SELF: one communicator per rank, each its own id */
    MPI_Comm iself;
    MPI_Comm_idup(MPI_COMM_SELF, &iself, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, iself); /* CALLSITE:idup_self */

    /* create_group: only the even ranks call it, in reverse order */
    MPI_Group wg, eg;
    MPI_Comm_group(W, &wg);
    int *evens = malloc(n * sizeof(int)), ne = 0;
    for (int r = (n - 1) / 2 * 2; r >= 0; r -= 2) evens[ne++] = r;
    MPI_Group_incl(wg, ne, evens, &eg);
    MPI_Comm cg = MPI_COMM_NULL;
    if (rank % 2 == 0) {
        MPI_Comm_create_group(W, eg, 7, &cg);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, cg); /* CALLSITE:create_group */
    }

    /* a (n/2) x 2 grid, rows kept by Cart_sub: {2i, 2i+1} */
    MPI_Comm grid, row;
    int dims[2] = {n / 2, 2}, periods[2] = {0, 0}, remain[2] = {0, 1};
    MPI_Cart_create(W, 2, dims, periods, 0, &grid);
    MPI_Cart_sub(grid, remain, &row);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, row); /* CALLSITE:cart_sub */

    /* a ring as a graph, a dist graph and an adjacent dist graph */
    int *index = malloc(n * sizeof(int)), *edges = malloc(2 * n * sizeof(int));
    for (int i = 0; i < n; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + n - 1) % n;
        edges[2 * i + 1] = (i + 1) % n;
    }
    MPI_Comm graph, dg, dga;
    MPI_Graph_create(W, n, index, edges, 0, &graph);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, graph); /* CALLSITE:graph */
    int me[1] = {rank}, one[1] = {1}, right[1] = {(rank + 1) % n}, left[1] = {(rank + n - 1) % n};
    MPI_Dist_graph_create(W, 1, me, one, right, one, MPI_INFO_NULL, 0, &dg);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dg); /* CALLSITE:dist_graph */
    MPI_Dist_graph_create_adjacent(W, 1, left, one, 1, right, one, MPI_INFO_NULL, 0, &dga);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dga); /* CALLSITE:dist_graph_adjacent */

    /* evens and odds joined by an intercommunicator (leaders: world ranks 0 and 1); each
     * rank sends to its partner (same position in the other group), then both merge,
     * evens first */
    MPI_Comm inter, merged;
    MPI_Intercomm_create(half, 0, W, 1 - rank % 2, 99, &inter);
    int hr;
    MPI_Comm_rank(half, &hr);
    int v = rank, w = -1;
    MPI_Sendrecv(&v, 1, MPI_INT, hr, 5, &w, 1, MPI_INT, hr, 5, inter, MPI_STATUS_IGNORE); /* CALLSITE:inter_p2p */
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, inter); /* CALLSITE:inter_coll */
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, merged); /* CALLSITE:merge */

    MPI_Comm *all[] = {&shared, &dupi, &half, &idup, &ih1, &ih2, &iself, &grid, &row, &graph, &dg,
                       &dga, &inter, &merged};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) MPI_Comm_free(all[i]);
    if (cg != MPI_COMM_NULL) MPI_Comm_free(&cg);
    MPI_Group_free(&eg);
    MPI_Group_free(&wg);
    free(evens);
    free(index);
    free(edges);
    MPI_Finalize();
    return 0;
}
