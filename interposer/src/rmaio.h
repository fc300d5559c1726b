/* RMA and MPI-IO hooks of the generated wrappers (gen/mpi.spec, sections RMA and MPI-IO);
 * the state behind them is in rma.c (windows) and io.c (open files). */
#ifndef MPISCOPE_RMAIO_H
#define MPISCOPE_RMAIO_H

#include <mpi.h>
#include <stdint.h>

/* ---- RMA. Targets are ranks in the window's communicator, as the records want them. */
void mps_win_created(MPI_Comm comm, const MPI_Win *win);
void mps_win_freed(MPI_Win saved);
enum mps_rma_kind { MPS_RMA_PUT, MPS_RMA_GET, MPS_RMA_ACC, MPS_RMA_GET_ACC, MPS_RMA_FOP,
                    MPS_RMA_CAS };
/* bytes at the origin: sent (put/accumulate data), recvd (get/fetched result); req is the
 * request of Rput/Rget/Raccumulate/Rget_accumulate, NULL for the others */
void mps_rma_op(enum mps_rma_kind kind, MPI_Win win, int target, uint64_t sent,
                uint64_t recvd, const MPI_Request *req);
void mps_rma_fence_begin(void);
void mps_rma_fence_end(MPI_Win win);
enum mps_gsync { MPS_GSYNC_POST, MPS_GSYNC_START, MPS_GSYNC_COMPLETE, MPS_GSYNC_WAIT };
void mps_rma_gsync(enum mps_gsync which, MPI_Win win, MPI_Group group);
/* every rank of the window (lock_all, flush_all, …): no rank, nor MPI_PROC_NULL (MPICH: -1) */
#define MPS_RMA_ALL INT32_MIN
/* stage 0: requested (before the call), 1: acquired, 2: released; rank MPS_RMA_ALL: all */
void mps_rma_lock(int stage, MPI_Win win, int rank, int lock_type);
/* flush/flush_local (rank MPS_RMA_ALL: _all) and MPI_Win_sync (sync: no operation completes) */
void mps_rma_flush(MPI_Win win, int rank, int local);
void mps_rma_sync(MPI_Win win);

/* ---- MPI-IO. Bytes: requested count × type size; result from the status. */
enum { MPS_IO_READ = 0, MPS_IO_WRITE = 1, MPS_IO_FLUSH = 2 };
enum { MPS_IO_BLOCKING = 0, MPS_IO_NONBLOCKING = 1, MPS_IO_COLLECTIVE = 2 };
void mps_io_opened(MPI_Comm comm, const char *path, int amode, const MPI_File *fh);
void mps_io_closed(MPI_File saved);
void mps_io_deleted(const char *path);
/* a blocking operation: Begin before the call, Complete after (its matching id) */
uint64_t mps_io_begin(MPI_File fh, int mode, int flags, int64_t count, MPI_Datatype type);
void mps_io_end(MPI_File fh, uint64_t id, const MPI_Status *st, int64_t count, MPI_Datatype type);
/* non-blocking: Begin + Issued now, Complete in the Wait/Test that completes *req */
void mps_io_ipost(MPI_File fh, int mode, int flags, int64_t count, MPI_Datatype type,
                  const MPI_Request *req);
/* split collective: Begin + Issued in *_begin, Complete in *_end */
void mps_io_split_begin(MPI_File fh, int mode, int64_t count, MPI_Datatype type);
void mps_io_split_end(MPI_File fh, const MPI_Status *st);
void mps_io_seek(MPI_File fh, MPI_Offset offset, int whence, int shared);

/* Fortran: a CHARACTER argument (blank-padded, hidden length) as a C string; free it. */
char *mps_f_string(const char *s, size_t len);

#endif
