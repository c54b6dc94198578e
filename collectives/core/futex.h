/* Futex waits and wakes, and the monotonic clock, for the core's extensions (Linux). Called
 * without the GIL. */
#ifndef RINGSCOPE_FUTEX_H
#define RINGSCOPE_FUTEX_H
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline double rs_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleep while *word == expect, at most ``timeout_s`` (< 0: no limit): 0 (woken, or the word had
 * changed), ETIMEDOUT, or EINTR (a signal: the caller checks them). */
static inline int rs_futex_wait(atomic_int *word, int expect, double timeout_s) {
    struct timespec ts, *tp = NULL;
    if (timeout_s >= 0) {
        ts.tv_sec = (time_t)timeout_s;
        ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
        tp = &ts;
    }
    if (syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, tp, NULL, 0) == 0) return 0;
    return errno == EAGAIN ? 0 : errno;
}

static inline void rs_futex_wake(atomic_int *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#endif
