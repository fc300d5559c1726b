/* Every point-to-point form mpiscope wraps, in an exactly known sequence on a ring.
 * Works at any size (size 1 talks to itself). Polling loops (Test*, Waitsome, Iprobe)
 * report how often they ran, so the trace can be checked call for call.
 * Lines marked CALLSITE:<name> are the call sites the test looks up. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int active(int n, const MPI_Request *r)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += r[i] != MPI_REQUEST_NULL;
    return k;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv); /* CALLSITE:init */
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const MPI_Comm W = MPI_COMM_WORLD;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int partner = rank ^ 1, paired = partner < size;
    int ib[16] = {0}, ib2[16] = {0};
    double db[8] = {0}, db2[8] = {0};
    MPI_Request rq[4];
    MPI_Status st, sts[4];
    static char bsend_buf[1024];
    MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);
    /* programs spin on the clock: MPI_Wtime/MPI_Wtick must not be events */
    double t0 = MPI_Wtime(), tick = MPI_Wtick();
    for (int i = 0; i < 1000; i++) (void)MPI_Wtime();

    /* 1. blocking, between pairs (0,1), (2,3) */
    if (paired) {
        if (rank % 2 == 0) {
            MPI_Send(ib, 8, MPI_INT, partner, 1, W); /* CALLSITE:send */
            MPI_Recv(db, 3, MPI_DOUBLE, MPI_ANY_SOURCE, 2, W, MPI_STATUS_IGNORE); /* CALLSITE:recv_any */
            MPI_Ssend(ib, 1, MPI_INT, partner, 3, W);
            MPI_Bsend(ib, 2, MPI_INT, partner, 4, W);
        } else {
            MPI_Recv(ib, 8, MPI_INT, partner, 1, W, &st);
            MPI_Send(db, 3, MPI_DOUBLE, partner, 2, W);
            MPI_Recv(ib, 1, MPI_INT, partner, 3, W, &st);
            MPI_Recv(ib, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, W, MPI_STATUS_IGNORE);
        }
    }

    /* 2. ready sends: the barrier guarantees every receive is posted */
    MPI_Irecv(ib, 1, MPI_INT, left, 5, W, &rq[0]);
    MPI_Irecv(ib + 1, 1, MPI_INT, left, 6, W, &rq[1]);
    MPI_Barrier(W);
    MPI_Rsend(ib2, 1, MPI_INT, right, 5, W);
    MPI_Irsend(ib2 + 1, 1, MPI_INT, right, 6, W, &rq[2]);
    MPI_Waitall(3, rq, sts);

    /* 3. combined send-receive */
    MPI_Sendrecv(ib2, 4, MPI_INT, right, 7, ib, 4, MPI_INT, left, 7, W, &st);
    MPI_Sendrecv_replace(db, 2, MPI_DOUBLE, right, 8, left, 8, W, MPI_STATUS_IGNORE);

    /* 4. ANY_SOURCE with STATUSES_IGNORE: the real sender must still be recorded */
    MPI_Irecv(ib, 5, MPI_INT, MPI_ANY_SOURCE, 9, W, &rq[0]); /* CALLSITE:irecv_any */
    MPI_Isend(ib2, 5, MPI_INT, right, 9, W, &rq[1]); /* CALLSITE:isend */
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE); /* CALLSITE:waitall */

    /* 5. Waitany, exactly twice */
    int idx;
    MPI_Irecv(db, 1, MPI_DOUBLE, left, 10, W, &rq[0]);
    MPI_Issend(db2, 1, MPI_DOUBLE, right, 10, W, &rq[1]);
    MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);
    MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);

    /* 6. Waitsome until all four are done */
    int done = 0, out, idxs[4], n_waitsome = 0;
    MPI_Irecv(ib, 2, MPI_INT, left, 11, W, &rq[0]);
    MPI_Irecv(ib + 2, 3, MPI_INT, left, 12, W, &rq[1]);
    MPI_Isend(ib2 + 2, 3, MPI_INT, right, 12, W, &rq[2]);
    MPI_Isend(ib2, 2, MPI_INT, right, 11, W, &rq[3]);
    while (done < 4) {
        MPI_Waitsome(4, rq, &out, idxs, sts);
        n_waitsome++;
        done += out;
    }

    /* 7. the Test family; `idle` counts requests tested without completing */
    int flag, n_test = 0, n_testall = 0, n_testany = 0, n_testsome = 0;
    int idle_testany = 0, idle_testsome = 0;
    MPI_Irecv(ib, 1, MPI_INT, left, 13, W, &rq[0]);
    MPI_Isend(ib2, 1, MPI_INT, right, 13, W, &rq[1]);
    do { MPI_Test(&rq[0], &flag, &st); n_test++; } while (!flag);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE);

    MPI_Irecv(ib, 1, MPI_INT, left, 14, W, &rq[0]);
    MPI_Isend(ib2, 1, MPI_INT, right, 14, W, &rq[1]);
    do { MPI_Testall(2, rq, &flag, sts); n_testall++; } while (!flag);

    MPI_Irecv(ib, 1, MPI_INT, left, 15, W, &rq[0]);
    MPI_Isend(ib2, 1, MPI_INT, right, 15, W, &rq[1]);
    for (done = 0; done < 2;) {
        int before = active(2, rq);
        MPI_Testany(2, rq, &idx, &flag, &st);
        n_testany++;
        if (flag) done++; else idle_testany += before;
    }

    MPI_Irecv(ib, 1, MPI_INT, left, 16, W, &rq[0]);
    MPI_Isend(ib2, 1, MPI_INT, right, 16, W, &rq[1]);
    for (done = 0; done < 2;) {
        int before = active(2, rq);
        MPI_Testsome(2, rq, &out, idxs, sts);
        n_testsome++;
        if (out > 0) done += out; else idle_testsome += before;
    }

    /* 8. Probe and Iprobe, then receive what they found */
    int n_iprobe = 0;
    MPI_Isend(ib2, 3, MPI_INT, right, 17, W, &rq[1]);
    do { MPI_Iprobe(left, 17, W, &flag, &st); n_iprobe++; } while (!flag);
    MPI_Recv(ib, 3, MPI_INT, st.MPI_SOURCE, 17, W, &st);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
    MPI_Isend(ib2, 6, MPI_INT, right, 18, W, &rq[1]);
    MPI_Probe(MPI_ANY_SOURCE, 18, W, &st);
    MPI_Recv(ib, 6, MPI_INT, st.MPI_SOURCE, 18, W, &st);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE);

    /* 9. persistent requests: 3 x Startall, once Start each, then freed */
    MPI_Request p[2];
    MPI_Send_init(ib2, 2, MPI_INT, right, 19, W, &p[0]);
    MPI_Recv_init(ib, 2, MPI_INT, left, 19, W, &p[1]);
    for (int i = 0; i < 3; i++) {
        MPI_Startall(2, p); /* CALLSITE:startall */
        MPI_Waitall(2, p, sts);
    }
    MPI_Start(&p[1]);
    MPI_Start(&p[0]);
    MPI_Wait(&p[1], &st);
    MPI_Wait(&p[0], &st);
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);

    /* 10. a receive nobody matches, cancelled */
    int cancelled;
    MPI_Irecv(ib, 1, MPI_INT, left, 999, W, &rq[0]);
    MPI_Cancel(&rq[0]);
    MPI_Wait(&rq[0], &st);
    MPI_Test_cancelled(&st, &cancelled);

    /* 11. MPI_PROC_NULL: calls, but no messages */
    MPI_Send(ib, 4, MPI_INT, MPI_PROC_NULL, 20, W);
    MPI_Recv(ib, 4, MPI_INT, MPI_PROC_NULL, 20, W, &st);
    MPI_Isend(ib, 4, MPI_INT, MPI_PROC_NULL, 20, W, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);

    /* 12. MPI_REQUEST_NULL alone and among real requests */
    rq[0] = MPI_REQUEST_NULL;
    MPI_Wait(&rq[0], &st);
    MPI_Irecv(ib, 1, MPI_INT, left, 21, W, &rq[1]);
    MPI_Isend(ib2, 1, MPI_INT, right, 21, W, &rq[2]);
    MPI_Waitall(3, rq, sts);

    /* 13. derived datatypes: bytes = count x type size */
    MPI_Datatype vec, tri;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec); /* 2 ints spread over 3: size 8 bytes */
    MPI_Type_contiguous(3, MPI_DOUBLE, &tri); /* 24 bytes */
    MPI_Type_commit(&vec);
    MPI_Type_commit(&tri);
    MPI_Irecv(ib, 2, vec, left, 22, W, &rq[0]);
    MPI_Isend(ib2, 2, vec, right, 22, W, &rq[1]);
    MPI_Waitall(2, rq, sts);
    MPI_Sendrecv(db2, 1, tri, right, 23, db, 3, MPI_DOUBLE, left, 23, W, &st);
    MPI_Type_free(&vec);
    MPI_Type_free(&tri);

    void *b; int bs;
    MPI_Buffer_detach(&b, &bs);
    printf("rank %d POLL test=%d testall=%d testany=%d testsome=%d waitsome=%d iprobe=%d "
           "idle_testany=%d idle_testsome=%d cancelled=%d clock_ok=%d\n", rank, n_test, n_testall,
           n_testany, n_testsome, n_waitsome, n_iprobe, idle_testany, idle_testsome, cancelled,
           MPI_Wtime() >= t0 && tick > 0);
    MPI_Finalize(); /* CALLSITE:finalize */
    return 0;
}
