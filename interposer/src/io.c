/* io.c — MPI-IO: each open file handle an IoHandle of paradigm "MPI-IO" on an
 * IoRegularFile (its path), and reads, writes, syncs and seeks as I/O operation records
 * with the bytes requested and the bytes the status reports. */
#include "runtime.h"

#include <stdlib.h>

typedef struct {
    uint64_t key; /* the MPI_File handle's bits */
    uint32_t ref;
    uint8_t used;
    uint8_t split_mode; /* the split collective in progress (one per handle at a time) */
    uint64_t split_id, split_bytes;
} file_slot;
MPS_OPTABLE(file_table, file_slot, 16)

static struct {
    file_table tab;
    uint64_t next_id; /* matching ids, unique on this rank */
} io;

static int on(void) { return !tl_skip && mps_rt.state == 1; }

static file_slot *file_of(MPI_File fh)
{
    return file_table_find(&io.tab, HANDLE_KEY(fh));
}

void mps_io_opened(MPI_Comm comm, const char *path, int amode, const MPI_File *fh)
{
    if (mps_rt.state != 1 || *fh == MPI_FILE_NULL || !path) return;
    unsigned mode = amode & MPI_MODE_RDWR     ? OTF2_IO_ACCESS_MODE_READ_WRITE
                    : amode & MPI_MODE_WRONLY ? OTF2_IO_ACCESS_MODE_WRITE_ONLY
                                              : OTF2_IO_ACCESS_MODE_READ_ONLY;
    uint64_t creation = (amode & MPI_MODE_CREATE ? OTF2_IO_CREATION_FLAG_CREATE : 0) |
                        (amode & MPI_MODE_EXCL ? OTF2_IO_CREATION_FLAG_EXCLUSIVE : 0) |
                        (amode & MPI_MODE_SEQUENTIAL ? OTF2_IO_CREATION_FLAG_NO_SEEK : 0);
    uint64_t status = (amode & MPI_MODE_APPEND ? OTF2_IO_STATUS_FLAG_APPEND : 0) |
                      (amode & MPI_MODE_DELETE_ON_CLOSE ? OTF2_IO_STATUS_FLAG_DELETE_ON_CLOSE
                                                        : 0);
    LOCK();
    /* one handle per rank and open (no communication inside the open) */
    uint32_t file = mps_obj_intern(MPS_OBJ_FILE, path, strlen(path) + 1);
    uint32_t ref = mps_obj_new_ref();
    mps_obj_add(MPS_OBJ_HANDLE, ref, file, comm_ref(comm), path, strlen(path) + 1, 1);
    file_slot *s = file_table_add(&io.tab, HANDLE_KEY(*fh));
    if (s) s->ref = ref;
    if (s && on()) ev(MPS_EV_IO_CREATE, 0, 0, ref, 1)[0] = mode | creation << 8 | status << 32;
    UNLOCK();
}

void mps_io_closed(MPI_File saved)
{
    if (mps_rt.state != 1) return;
    LOCK();
    file_slot *s = file_of(saved);
    if (s) {
        if (on()) ev(MPS_EV_IO_DESTROY, 0, 0, s->ref, 0);
        file_table_remove(&io.tab, s);
    }
    UNLOCK();
}

void mps_io_deleted(const char *path)
{
    if (!on() || !path) return;
    LOCK();
    uint32_t file = mps_obj_intern(MPS_OBJ_FILE, path, strlen(path) + 1);
    ev(MPS_EV_IO_DELETE, 0, 0, file, 0);
    UNLOCK();
}

static void begin(uint32_t ref, unsigned mode, unsigned flags, uint64_t bytes, uint64_t id)
{
    uint64_t *x = ev(MPS_EV_IO_BEGIN, mode | flags << 4, 0, ref, 2);
    x[0] = bytes;
    x[1] = id;
}

static void complete(uint32_t ref, uint64_t bytes, uint64_t id)
{
    uint64_t *x = ev(MPS_EV_IO_DONE, 0, 0, ref, 2);
    x[0] = bytes;
    x[1] = id;
}

/* Bytes the status says were moved; `fallback` where it says nothing. */
static uint64_t io_bytes(const MPI_Status *st, uint64_t fallback)
{
    int64_t n = !st || st == MPI_STATUS_IGNORE ? -1 : status_bytes(st);
    return n < 0 ? fallback : (uint64_t)n;
}

uint64_t mps_io_begin(MPI_File fh, int mode, int flags, int64_t count, MPI_Datatype type)
{
    if (!on()) return 0;
    uint64_t bytes = mode == MPS_IO_FLUSH ? 0 : mps_type_bytes(count, type);
    uint64_t id = 0;
    LOCK();
    file_slot *s = file_of(fh);
    if (s) {
        id = ++io.next_id;
        begin(s->ref, (unsigned)mode, (unsigned)flags, bytes, id);
    }
    UNLOCK();
    return id;
}

void mps_io_end(MPI_File fh, uint64_t id, const MPI_Status *st, int64_t count, MPI_Datatype type)
{
    if (!on() || !id) return;
    uint64_t bytes = st ? io_bytes(st, mps_type_bytes(count, type)) : 0;
    LOCK();
    file_slot *s = file_of(fh);
    if (s) complete(s->ref, bytes, id);
    UNLOCK();
}

void mps_io_ipost(MPI_File fh, int mode, int flags, int64_t count, MPI_Datatype type,
                  const MPI_Request *req)
{
    if (!on() || *req == MPI_REQUEST_NULL) return;
    uint64_t bytes = mps_type_bytes(count, type);
    LOCK();
    file_slot *s = file_of(fh);
    if (s) {
        uint64_t id = ++io.next_id;
        begin(s->ref, (unsigned)mode, (unsigned)flags | MPS_IO_NONBLOCKING, bytes, id);
        ev(MPS_EV_IO_ISSUED, 0, 0, s->ref, 1)[0] = id;
        req_slot *r = req_table_add(&mps_reqs.tab, HANDLE_KEY(*req));
        if (r) {
            r->kind = REQ_IO;
            r->comm = s->ref;
            r->id = id;
            r->bytes = bytes;
            r->active = 1;
        }
    }
    UNLOCK();
}

void mps_io_req_done(const req_slot *r, const MPI_Status *st)
{
    complete(r->comm, io_bytes(st, r->bytes), r->id);
}

void mps_io_split_begin(MPI_File fh, int mode, int64_t count, MPI_Datatype type)
{
    if (!on()) return;
    uint64_t bytes = mps_type_bytes(count, type);
    LOCK();
    file_slot *s = file_of(fh);
    if (s) {
        s->split_id = ++io.next_id;
        s->split_bytes = bytes;
        s->split_mode = (uint8_t)mode;
        begin(s->ref, (unsigned)mode, MPS_IO_NONBLOCKING | MPS_IO_COLLECTIVE, bytes, s->split_id);
        ev(MPS_EV_IO_ISSUED, 0, 0, s->ref, 1)[0] = s->split_id;
    }
    UNLOCK();
}

void mps_io_split_end(MPI_File fh, const MPI_Status *st)
{
    if (!on()) return;
    LOCK();
    file_slot *s = file_of(fh);
    if (s && s->split_id) {
        complete(s->ref, io_bytes(st, s->split_bytes), s->split_id);
        s->split_id = 0;
    }
    UNLOCK();
}

void mps_io_seek(MPI_File fh, MPI_Offset offset, int whence, int shared)
{
    if (!on()) return;
    MPI_Offset pos = 0;
    /* the position after the seek, in etypes of the view as the request's offset */
    if (shared) PMPI_File_get_position_shared(fh, &pos);
    else PMPI_File_get_position(fh, &pos);
    unsigned w = whence == MPI_SEEK_CUR ? OTF2_IO_SEEK_FROM_CURRENT
                 : whence == MPI_SEEK_END ? OTF2_IO_SEEK_FROM_END
                                          : OTF2_IO_SEEK_FROM_START;
    LOCK();
    file_slot *s = file_of(fh);
    if (s) {
        uint64_t *x = ev(MPS_EV_IO_SEEK, w, 0, s->ref, 2);
        x[0] = (uint64_t)offset;
        x[1] = (uint64_t)pos;
    }
    UNLOCK();
}
