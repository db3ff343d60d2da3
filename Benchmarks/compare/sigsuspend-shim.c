/* For running the Swift contender under valgrind 3.19 (compare.py --callgrind): libdispatch's main thread parks in
 * sigsuspend() with a mask in read-only memory, and valgrind's rt_sigsuspend wrapper edits the mask in place,
 * which kills valgrind (SIGSEGV). Preloaded, this sigsuspend passes a writable copy instead. Nothing else changes. */
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
