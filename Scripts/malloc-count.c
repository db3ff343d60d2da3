// A malloc counter for measurements: gcc -O2 -shared -fPIC -o /tmp/libmc.so Scripts/malloc-count.c, then run a
// program with LD_PRELOAD=/tmp/libmc.so; SIGUSR1 prints the count on stderr, mc_count() returns it (PeerTests),
// and with MALLOC_COUNT_AT_EXIT=1 the total is printed on stderr when the process exits (AllocationTests,
// Scripts/malloc-per-frame.sh).
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_long n;
void *malloc(size_t s) { atomic_fetch_add_explicit(&n, 1, memory_order_relaxed); return __libc_malloc(s); }
void *calloc(size_t a, size_t b) { atomic_fetch_add_explicit(&n, 1, memory_order_relaxed); return __libc_calloc(a, b); }
void *realloc(void *p, size_t s) { atomic_fetch_add_explicit(&n, 1, memory_order_relaxed); return __libc_realloc(p, s); }
static void dump(int sig) { (void)sig; char b[64]; int l = snprintf(b, 64, "MALLOCS %ld\n", (long)n); write(2, b, l); }
__attribute__((constructor)) static void init(void) { signal(SIGUSR1, dump); }
__attribute__((destructor)) static void fini(void) { if (getenv("MALLOC_COUNT_AT_EXIT")) dump(0); }
long mc_count(void) { return (long)n; }
