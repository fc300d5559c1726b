/* collectives.c — collective events: begin/end with byte counts and payload hashes, and
 * nonblocking collectives as requests. */
#include "runtime.h"

static const OTF2_CollectiveOp coll_ops[] = {
    [MPS_COLL_BARRIER] = OTF2_COLLECTIVE_OP_BARRIER,
    [MPS_COLL_BCAST] = OTF2_COLLECTIVE_OP_BCAST,
    [MPS_COLL_GATHER] = OTF2_COLLECTIVE_OP_GATHER,
    [MPS_COLL_GATHERV] = OTF2_COLLECTIVE_OP_GATHERV,
    [MPS_COLL_SCATTER] = OTF2_COLLECTIVE_OP_SCATTER,
    [MPS_COLL_SCATTERV] = OTF2_COLLECTIVE_OP_SCATTERV,
    [MPS_COLL_ALLGATHER] = OTF2_COLLECTIVE_OP_ALLGATHER,
    [MPS_COLL_ALLGATHERV] = OTF2_COLLECTIVE_OP_ALLGATHERV,
    [MPS_COLL_ALLTOALL] = OTF2_COLLECTIVE_OP_ALLTOALL,
    [MPS_COLL_ALLTOALLV] = OTF2_COLLECTIVE_OP_ALLTOALLV,
    [MPS_COLL_ALLTOALLW] = OTF2_COLLECTIVE_OP_ALLTOALLW,
    [MPS_COLL_ALLREDUCE] = OTF2_COLLECTIVE_OP_ALLREDUCE,
    [MPS_COLL_REDUCE] = OTF2_COLLECTIVE_OP_REDUCE,
    [MPS_COLL_REDUCE_SCATTER] = OTF2_COLLECTIVE_OP_REDUCE_SCATTER,
    [MPS_COLL_SCAN] = OTF2_COLLECTIVE_OP_SCAN,
    [MPS_COLL_EXSCAN] = OTF2_COLLECTIVE_OP_EXSCAN,
    [MPS_COLL_REDUCE_SCATTER_BLOCK] = OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK,
};

void mps_coll_begin(void)
{
    if (tl_skip || mps_rt.state != 1) return;
    /* Begin shares its region's Enter timestamp: one clock read less */
    ev(MPS_EV_COLL_BEGIN, 0, 0, 0, 0);
}

int mps_hash_wanted(int count, MPI_Datatype type)
{
    if (tl_skip || mps_rt.state != 1 || count < 0 || type == MPI_DATATYPE_NULL) return 0;
    int size = 0;
    /* only contiguous predefined types: their bytes are exactly count * size in memory */
    int named = type_info(type, &size);
    return named && (uint64_t)count * (uint64_t)size <= mps_cfg.hash_bytes;
}

uint64_t mps_hash_buf(const void *buf, int count, MPI_Datatype type)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    if (!buf || buf == MPI_IN_PLACE) return h;
    uint64_t n = mps_type_bytes(count, type);
    const unsigned char *p = buf;
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void mps_coll_end(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
                  int have_hash, uint64_t in_hash, uint64_t out_hash)
{
    if (tl_skip || mps_rt.state != 1) return;
    uint64_t *x = ev(MPS_EV_COLL_END, coll_ops[op], 0,
                     root < 0 ? OTF2_UNDEFINED_UINT32 : (uint32_t)root, have_hash ? 5 : 3);
    x[0] = comm_ref(comm) | (uint64_t)(have_hash != 0) << 32;
    x[1] = sent;
    x[2] = recvd;
    if (have_hash) {
        x[3] = in_hash;
        x[4] = out_hash;
    }
}

void mps_icoll(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
               const MPI_Request *req)
{
    if (tl_skip || mps_rt.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_table_add(&mps_reqs.tab, HANDLE_KEY(*req));
    if (r) {
        r->kind = REQ_COLL;
        r->coll_op = (uint8_t)coll_ops[op];
        r->comm = comm_ref(comm);
        r->root = root;
        r->sent = sent;
        r->recvd = recvd;
        r->id = ++mps_reqs.next_id;
        r->thread = tl_rec->thread;
        r->active = 1;
        ev(MPS_EV_NBC_REQUEST, 0, 0, 0, 1)[0] = r->id;
    }
    UNLOCK();
}
