/* collectives.c — collective events: begin/end with byte counts and payload hashes, and
 * nonblocking collectives as requests. */
#include "runtime.h"

#include <stdlib.h>

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

/* Payload hashes only on intracommunicators: on an intercommunicator the buffers of one
 * group's non-root ranks (MPI_PROC_NULL) are not significant and may be anything, and
 * "redundant" needs both sides of one group anyway. MPISCOPE_HASH_BYTES=0: none at all. */
static int hash_comm_ok(MPI_Comm comm)
{
    int inter = 0;
    if (mps_cfg.hash_bytes == 0) return 0;
    PMPI_Comm_test_inter(comm, &inter);
    return !inter;
}

int mps_hash_wanted(MPI_Comm comm, int64_t count, MPI_Datatype type)
{
    if (tl_skip || mps_rt.state != 1 || count < 0 || type == MPI_DATATYPE_NULL) return 0;
    if (!hash_comm_ok(comm)) return 0;
    int64_t size = 0;
    /* only contiguous predefined types: their bytes are exactly count * size in memory */
    int named = type_info(type, &size);
    return named && (uint64_t)count * (uint64_t)size <= mps_cfg.hash_bytes;
}

uint64_t mps_hash_buf(const void *buf, int64_t count, MPI_Datatype type)
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
                  int have_hash, uint64_t in_hash, uint64_t out_hash, uint64_t prior_hash)
{
    if (tl_skip || mps_rt.state != 1) return;
    uint64_t *x = ev(MPS_EV_COLL_END, coll_ops[op], 0,
                     root < 0 ? OTF2_UNDEFINED_UINT32 : (uint32_t)root, have_hash ? 6 : 3);
    x[0] = comm_ref(comm) | (uint64_t)(have_hash != 0) << 32;
    x[1] = sent;
    x[2] = recvd;
    if (have_hash) {
        x[3] = in_hash;
        x[4] = out_hash;
        x[5] = prior_hash;
    }
}

void mps_icoll(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
               const MPI_Request *req)
{
    mps_icoll_hashed(op, comm, root, sent, recvd, req, 0, 0, 0, NULL);
}

/* ------------------------------------------------------------ payload hashing */

#define FNV_BASIS 0xcbf29ce484222325ULL

static uint64_t fnv(uint64_t h, const unsigned char *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Bytes of b, and whether every datatype in it is predefined (then its bytes are
 * exactly count * size in memory, displacements in elements are size-strided). */
static uint64_t buf_bytes(const struct mps_buf *b, int *named)
{
    int64_t sz = 0;
    uint64_t total = 0;
    *named = 1;
    if (!b->buf || b->buf == MPI_IN_PLACE) return 0;
    if (!b->counts) {
        if (b->count <= 0) return 0;
        if (b->type == MPI_DATATYPE_NULL) { *named = 0; return 0; }
        *named = type_info(b->type, &sz);
        return (uint64_t)b->count * (uint64_t)sz;
    }
    for (int i = 0; i < b->n && *named; i++) {
        int64_t c = mps_at(b->counts, b->cw, i);
        if (c <= 0) continue;
        MPI_Datatype t = b->types ? b->types[i] : b->type;
        if (t == MPI_DATATYPE_NULL) { *named = 0; break; }
        *named = type_info(t, &sz);
        total += (uint64_t)c * (uint64_t)sz;
    }
    return total;
}

int mps_hashable(MPI_Comm comm, const struct mps_buf *in, const struct mps_buf *out)
{
    if (tl_skip || mps_rt.state != 1 || !hash_comm_ok(comm)) return 0;
    int named_in, named_out;
    uint64_t bi = buf_bytes(in, &named_in), bo = buf_bytes(out, &named_out);
    return named_in && named_out && bi <= mps_cfg.hash_bytes && bo <= mps_cfg.hash_bytes;
}

/* Block i of a vector buffer as a byte range: 0 if it is empty. `at` is the packed
 * offset so far (where a block goes without displacements), advanced past it. */
struct span {
    int64_t off;
    uint64_t len;
};
static int block_of(const struct mps_buf *b, int i, uint64_t *at, struct span *out)
{
    int64_t c = mps_at(b->counts, b->cw, i);
    if (c <= 0) return 0;
    int64_t sz = 0;
    type_info(b->types ? b->types[i] : b->type, &sz);
    uint64_t len = (uint64_t)c * (uint64_t)sz;
    /* displacements: bytes with one type per block (w), else elements; none: packed */
    int64_t d = b->displs ? mps_at(b->displs, b->dw, i) : 0;
    *out = (struct span){!b->displs ? (int64_t)*at : b->types ? d : d * sz, len};
    *at += len;
    return 1;
}

/* FNV-1a 64 of b's bytes (its blocks concatenated in rank order); 0 for no buffer. */
uint64_t mps_hash_of(const struct mps_buf *b)
{
    if (!b->buf || b->buf == MPI_IN_PLACE) return 0;
    const unsigned char *p = b->buf;
    if (!b->counts) return fnv(FNV_BASIS, p, mps_type_bytes(b->count, b->type));
    uint64_t h = FNV_BASIS, at = 0;
    struct span s;
    for (int i = 0; i < b->n; i++)
        if (block_of(b, i, &at, &s)) h = fnv(h, p + s.off, s.len);
    return h;
}

/* Hashed nonblocking collectives in flight: few at a time, so a small array; when it is
 * full a collective goes unhashed (never wrong, only less provable). The result is hashed
 * at completion, but everything that says where it lies is copied at the call: MPI lets
 * the caller free or reuse its counts, displacements and datatype arrays as soon as a
 * nonblocking collective is posted (mpi4py does), only the buffer itself stays the
 * operation's until it completes. So the blocks are kept as byte ranges of our own. */
#define MPS_NBC_HASHED 64
static struct {
    uint64_t id, in, prior; /* prior: the result buffer's hash at the posting call */
    const unsigned char *base;
    uint32_t n;
    struct span *spans; /* n byte ranges at base, in rank order (malloc'd) */
} nbc_hashed[MPS_NBC_HASHED];

/* b's blocks as byte ranges, read now; *n of them (NULL and 0: none, or no memory). */
static struct span *spans_of(const struct mps_buf *b, uint32_t *n)
{
    *n = 0;
    if (!b->buf || b->buf == MPI_IN_PLACE) return NULL;
    int blocks = b->counts ? b->n : 1;
    struct span *s = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *s);
    if (!s) return NULL;
    if (!b->counts) {
        s[0] = (struct span){0, mps_type_bytes(b->count, b->type)};
        *n = 1;
        return s;
    }
    uint64_t at = 0;
    for (int i = 0; i < b->n; i++)
        if (block_of(b, i, &at, &s[*n])) (*n)++;
    return s;
}

int mps_nbc_hashes(uint64_t id, uint64_t *in, uint64_t *out, uint64_t *prior)
{
    for (int i = 0; i < MPS_NBC_HASHED; i++)
        if (nbc_hashed[i].id == id) {
            uint64_t h = FNV_BASIS;
            for (uint32_t k = 0; k < nbc_hashed[i].n; k++)
                h = fnv(h, nbc_hashed[i].base + nbc_hashed[i].spans[k].off,
                        nbc_hashed[i].spans[k].len);
            *in = nbc_hashed[i].in;
            *prior = nbc_hashed[i].prior;
            *out = nbc_hashed[i].spans ? h : 0;
            free(nbc_hashed[i].spans);
            nbc_hashed[i].spans = NULL;
            nbc_hashed[i].id = 0;
            return 1;
        }
    return 0;
}

void mps_icoll_hashed(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent,
                      uint64_t recvd, const MPI_Request *req, int have_hash,
                      uint64_t in_hash, uint64_t prior_hash, const struct mps_buf *out)
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
        r->hashed = 0;
        for (int i = 0; have_hash && out && i < MPS_NBC_HASHED; i++)
            if (!nbc_hashed[i].id) {
                uint32_t n = 0;
                struct span *s = spans_of(out, &n);
                if (!s && out->buf && out->buf != MPI_IN_PLACE) break; /* no memory: unhashed */
                nbc_hashed[i].id = r->id;
                nbc_hashed[i].in = in_hash;
                nbc_hashed[i].prior = prior_hash;
                nbc_hashed[i].base = out->buf;
                nbc_hashed[i].n = n;
                nbc_hashed[i].spans = s;
                r->hashed = 1;
                break;
            }
        ev(MPS_EV_NBC_REQUEST, 0, 0, 0, 1)[0] = r->id;
    }
    UNLOCK();
}

/* ------------------------------------------------------ neighbourhood collectives */

int mps_nbr_degree(MPI_Comm comm, int out)
{
    int topo = MPI_UNDEFINED, n = 0, in = 0, o = 0, weighted = 0;
    PMPI_Topo_test(comm, &topo);
    if (topo == MPI_CART) {
        PMPI_Cartdim_get(comm, &n);
        return 2 * n;
    }
    if (topo == MPI_GRAPH) {
        PMPI_Graph_neighbors_count(comm, mps_comm_rank(comm), &n);
        return n;
    }
    if (topo == MPI_DIST_GRAPH) {
        PMPI_Dist_graph_neighbors_count(comm, &in, &o, &weighted);
        return out ? o : in;
    }
    return 0;
}

uint64_t mps_nbr_bytes_w(MPI_Comm comm, int out, const void *counts, int cw, int64_t count,
                         MPI_Datatype type, const MPI_Datatype *types)
{
    if (tl_skip || mps_rt.state != 1) return 0;
    int topo = MPI_UNDEFINED, deg = mps_nbr_degree(comm, out);
    PMPI_Topo_test(comm, &topo);
    uint64_t total = 0;
    int src = MPI_PROC_NULL, dst = MPI_PROC_NULL;
    for (int i = 0; i < deg; i++) {
        /* a Cartesian rank's neighbours, in and out alike: per dimension the rank below
         * (source of MPI_Cart_shift by 1), then the rank above; off a non-periodic edge
         * they are MPI_PROC_NULL and nothing moves */
        if (topo == MPI_CART) {
            if (i % 2 == 0) PMPI_Cart_shift(comm, i / 2, 1, &src, &dst);
            if ((i % 2 ? dst : src) == MPI_PROC_NULL) continue;
        }
        total += mps_type_bytes(counts ? mps_at(counts, cw, i) : count, types ? types[i] : type);
    }
    return total;
}
