/* Matched probe and the point-to-point variants: every rank sends to its right-hand
 * neighbour and receives from its left, with each kind of call once; sizes and tags depend
 * only on the step. MPI_Mprobe/MPI_Mrecv, MPI_Improbe (polled) / MPI_Imrecv + Wait, then
 * Ibsend, Ssend_init, Bsend_init, Rsend_init (receives pre-posted: Rsend needs them). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c); /* the receives must name this one, not the world */
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    int out[64] = {0}, in[64];
    MPI_Request rq, rr;
    MPI_Message msg;
    MPI_Status st;
    int flag = 0, count = 0, polls = 0;

    /* 1: Mprobe + Mrecv (blocking), 3 ints, tag 11 */
    MPI_Isend(out, 3, MPI_INT, right, 11, c, &rq);
    MPI_Mprobe(left, 11, c, &msg, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    MPI_Mrecv(in, count, MPI_INT, &msg, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);

    /* 2: Improbe until found + Imrecv + Wait, 5 ints, any source, tag 12 */
    MPI_Isend(out, 5, MPI_INT, right, 12, c, &rq);
    while (!flag) {
        MPI_Improbe(MPI_ANY_SOURCE, 12, c, &flag, &msg, &st);
        polls++;
    }
    MPI_Imrecv(in, 5, MPI_INT, &msg, &rr);
    MPI_Wait(&rr, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);

    /* 3: the send variants, each received by an Irecv posted first: 7 ints, tags 21-24 */
    int size = 0;
    MPI_Pack_size(7, MPI_INT, c, &size);
    int bufsize = 4 * (size + MPI_BSEND_OVERHEAD);
    void *buf = malloc(bufsize);
    MPI_Buffer_attach(buf, bufsize);
    MPI_Request r4[4], s4[4];
    for (int i = 0; i < 4; i++) MPI_Irecv(in + 8 * i, 7, MPI_INT, left, 21 + i, c, &r4[i]);
    MPI_Barrier(c); /* every receive is posted before any ready-send */
    MPI_Ibsend(out, 7, MPI_INT, right, 21, c, &s4[0]);
    MPI_Ssend_init(out, 7, MPI_INT, right, 22, c, &s4[1]);
    MPI_Bsend_init(out, 7, MPI_INT, right, 23, c, &s4[2]);
    MPI_Rsend_init(out, 7, MPI_INT, right, 24, c, &s4[3]);
    MPI_Startall(3, s4 + 1);
    MPI_Waitall(4, r4, MPI_STATUSES_IGNORE);
    MPI_Waitall(4, s4, MPI_STATUSES_IGNORE);
    for (int i = 1; i < 4; i++) MPI_Request_free(&s4[i]);
    MPI_Buffer_detach(&buf, &bufsize);
    free(buf);

    printf("rank %d improbe %d\n", rank, polls);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}
