/* archive.c — the OTF2 archive's files: opening, OTF2's memory and flush callbacks, write
 * errors, and the one-line warnings that say a trace was not written. */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct mps_files mps_out;

/* ------------------------------------------------------------- messages */

/* write(2), not stdio: this may run in the stop-signal handler */
void mps_to_stderr(const char *line)
{
    for (size_t len = strlen(line), done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, line + done, len - done);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) done += (size_t)n;
    }
}

/* Under `mpiscope run`, MPISCOPE_STATUS_FILE names a file it created (never we) and
 * prints at the end as its one-line verdict on the trace. 0: appended. */
static int to_status(const char *text)
{
    const char *status = getenv("MPISCOPE_STATUS_FILE");
    if (!status || !*status) return -1;
    int fd = open(status, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    return (close(fd) == 0) & (n == (ssize_t)len) ? 0 : -1;
}

/* A trace lost at MPI_Init is said at once (the job may run for hours); mpiscope run
 * only learns that it was said, and adds nothing. */
void mps_warn_once(const char *fmt, ...)
{
    if (mps_out.warned)
        return;
    mps_out.warned = 1;
    char msg[PATH_MAX + 512], line[PATH_MAX + 600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "mpiscope: warning: %s; continuing untraced\n", msg);
    mps_to_stderr(line);
    to_status("told\n");
}

/* The trace in `dir` could not be written (werr: an errno, or -OTF2 code): the one line
 * that says so, through mpiscope run's verdict where it asked for it, else on stderr. */
void mps_say_not_written(const char *dir, int werr)
{
    const char *why =
        werr > 0 ? strerror(werr) : OTF2_Error_GetDescription((OTF2_ErrorCode)-werr);
    char line[PATH_MAX + 600];
    snprintf(line, sizeof line, "mpiscope: warning: trace not written to %s: %s\n", dir, why);
    if (to_status(line) != 0) mps_to_stderr(line);
}

/* ---------------------------------------------------------- write errors */

/* OTF2's codes for the errno values a write can fail with (disk full, quota, file
 * size limit, I/O error...): the warning names the reason as strerror would. */
static int otf2_errno(OTF2_ErrorCode code)
{
    static const struct { OTF2_ErrorCode code; int err; } map[] = {
        {OTF2_ERROR_ENOSPC, ENOSPC}, {OTF2_ERROR_EFBIG, EFBIG}, {OTF2_ERROR_EIO, EIO},
        {OTF2_ERROR_EDQUOT, EDQUOT}, {OTF2_ERROR_EACCES, EACCES}, {OTF2_ERROR_EROFS, EROFS},
        {OTF2_ERROR_EPERM, EPERM}, {OTF2_ERROR_ENOENT, ENOENT}, {OTF2_ERROR_ENOTDIR, ENOTDIR},
        {OTF2_ERROR_EISDIR, EISDIR}, {OTF2_ERROR_EMFILE, EMFILE}, {OTF2_ERROR_ENFILE, ENFILE},
        {OTF2_ERROR_EEXIST, EEXIST}, {OTF2_ERROR_ENAMETOOLONG, ENAMETOOLONG},
        {OTF2_ERROR_ESTALE, ESTALE}, {OTF2_ERROR_ENOMEM, ENOMEM},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (map[i].code == code) return map[i].err;
    return -(int)code;
}

/* OTF2 reports errors through this callback; any error stops tracing cleanly for this
 * rank. Nothing is printed here: at MPI_Finalize the ranks agree that the trace was not
 * written and rank 0 says so once (finalize.c). */
OTF2_ErrorCode mps_otf2_error(void *user, const char *file, uint64_t line, const char *func,
                              OTF2_ErrorCode code, const char *fmt, va_list va)
{
    (void)user; (void)file; (void)line; (void)func; (void)fmt; (void)va;
    if (!mps_out.werr) mps_out.werr = otf2_errno(code);
    mps_rt.state = 2;
    mps_out.failed = 1;
    return code;
}

/* ------------------------------------------------------- OTF2 callbacks */

static OTF2_FlushType pre_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void *cd,
                                bool final)
{
    (void)u; (void)ft; (void)loc; (void)cd; (void)final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc)
{
    (void)u; (void)ft;
    /* OTF2's own flushes to disk happen while a batch is encoded, long after those
     * events: they take no time of the run (the batch's BufferFlush does). The location's
     * own recorder: usually the calling thread's, else (MPI_Finalize) in the list. */
    const struct mps_recorder *r = tl_rec;
    if (!r || r->location != loc)
        for (r = &mps_rt; r && r->location != loc; r = r->next) {}
    return r ? r->last_ts : mps_rt.last_ts;
}

static OTF2_FlushCallbacks flush_cbs = {.otf2_pre_flush = pre_flush,
                                        .otf2_post_flush = post_flush};

/* the event chunks' budget is the process's: threads allocate at the same time */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

struct mps_chunk {
    struct mps_chunk *next;
    uint64_t size;
};

static struct mps_chunk *chunk_take(OTF2_FileType ft, uint64_t size);

void mps_pool_grow(uint64_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    mps_out.pool_budget += bytes;
    pthread_mutex_unlock(&pool_lock);
}

/* Event memory comes from a budget; when it is spent OTF2 flushes to disk. */
static void *chunk_alloc(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void **per_buf,
                         uint64_t size)
{
    (void)u; (void)loc;
    if (ft == OTF2_FILETYPE_EVENTS && mps_rt.mt) pthread_mutex_lock(&pool_lock);
    struct mps_chunk *c = chunk_take(ft, size);
    if (ft == OTF2_FILETYPE_EVENTS && mps_rt.mt) pthread_mutex_unlock(&pool_lock);
    if (!c) return NULL;
    c->next = *per_buf;
    *per_buf = c;
    return c + 1;
}

static struct mps_chunk *chunk_take(OTF2_FileType ft, uint64_t size)
{
    if (ft == OTF2_FILETYPE_EVENTS && mps_out.pool_used + size > mps_out.pool_budget)
        return NULL;
    struct mps_chunk *c = NULL;
    if (ft == OTF2_FILETYPE_EVENTS && mps_out.spare && mps_out.spare->size == size) {
        c = mps_out.spare; /* reuse flushed chunks: their pages are already mapped */
        mps_out.spare = c->next;
    } else {
        c = malloc(sizeof(struct mps_chunk) + size);
    }
    if (!c) return NULL;
    c->size = size;
    if (ft == OTF2_FILETYPE_EVENTS) mps_out.pool_used += size;
    return c;
}

static void chunk_free_all(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void **per_buf,
                           bool final)
{
    (void)u; (void)loc;
    if (mps_rt.mt) pthread_mutex_lock(&pool_lock);
    for (struct mps_chunk *c = *per_buf, *next; c; c = next) {
        next = c->next;
        if (ft == OTF2_FILETYPE_EVENTS) mps_out.pool_used -= c->size;
        if (ft == OTF2_FILETYPE_EVENTS && !final) { c->next = mps_out.spare; mps_out.spare = c; }
        else free(c);
    }
    *per_buf = NULL;
    if (final)
        for (struct mps_chunk *next; mps_out.spare; mps_out.spare = next) {
            next = mps_out.spare->next;
            free(mps_out.spare);
        }
    if (mps_rt.mt) pthread_mutex_unlock(&pool_lock);
}

OTF2_MemoryCallbacks mps_mem_cbs = {.otf2_allocate = chunk_alloc,
                                    .otf2_free_all = chunk_free_all};

/* An archive `traces` in dir, written with our flush callbacks (the trace, a salvaged
 * rank's, a recovered rank's); NULL if OTF2 cannot open it. */
OTF2_Archive *mps_archive_open(const char *dir)
{
    OTF2_Archive *ar = OTF2_Archive_Open(dir, "traces", OTF2_FILEMODE_WRITE,
                                         mps_cfg.chunk_size, 4 * 1024 * 1024,
                                         OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
    if (ar) OTF2_Archive_SetFlushCallbacks(ar, &flush_cbs, NULL);
    return ar;
}
