/* SIGXFSZ guard around the tracer's writes (see iosafe.h).
 *
 * Why a per-thread block and not SIG_IGN: the disposition is process-wide, so ignoring
 * SIGXFSZ would also turn the program's own over-limit writes, made concurrently by its
 * other threads, into EFBIG instead of the death they cause untraced; and a sigaction
 * of the program's between our save and restore would be lost. Blocking the signal in
 * the calling thread alone changes nothing for the other threads. The kernel sends
 * SIGXFSZ to the writing thread, so while blocked it stays pending on that thread; before
 * unblocking we consume it with sigtimedwait (zero timeout), else it would be delivered
 * the moment the old mask comes back. One that was already pending when the guard began
 * (the program blocks SIGXFSZ itself and has one waiting) is the program's: left alone.
 */
#define _GNU_SOURCE
#include "iosafe.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static __thread int depth;
static __thread sigset_t saved_mask;
static __thread int was_pending;

void mps_io_guard_begin(void)
{
    if (depth++) return;
    int saved = errno;
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &saved_mask);
    was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    errno = saved;
}

void mps_io_guard_end(void)
{
    if (depth <= 0 || --depth) return;
    int saved = errno;
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);
    errno = saved;
}
