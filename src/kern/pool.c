/* pool — the persistent thread pool behind kern_parallel_for.
 *
 * n-1 worker threads plus the caller. A job is published by bumping a
 * generation counter; workers spin on it for a short while (consecutive
 * kernels in a training step follow each other within microseconds) and
 * then sleep on a futex, so an idle pool costs no CPU on a shared machine.
 * The caller runs chunk 0 itself and waits for the others the same way.
 *
 * Chunking is static: thread t gets [n·t/T, n·(t+1)/T). Kernels make each
 * index's result independent of the chunk it lands in, which is what makes
 * results identical for any thread count. */
#include "kern/kern_impl.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a waiting thread spins before it sleeps. */
#define SPIN_NS 50000

typedef struct pool {
    int n;                          /* threads including the caller */
    pthread_t th[KERN_MAX_THREADS];
    void *scratch[KERN_MAX_THREADS];
    _Atomic uint32_t gen;           /* job generation: the workers' futex word */
    _Atomic uint32_t pending;       /* workers still running: the caller's futex word */
    _Atomic int sleepers;           /* workers blocked (or about to block) on gen */
    _Atomic int caller_sleeping;
    _Atomic int64_t next;           /* kern_parallel_dyn counter */
    _Atomic int quit;
    uint32_t start_gen;             /* gen when the workers were created */
    kern_range_fn fn;
    void *ctx;
    int64_t total;
    int dyn;
} pool;

static pool g_pool;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_ready;
static _Thread_local int t_tid;
static _Thread_local int t_in_region;

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void run_share(pool *p, int tid)
{
    if (p->dyn) {
        for (;;) {
            int64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
            if (i >= p->total) break;
            p->fn(p->ctx, i, i + 1);
        }
        return;
    }
    int64_t b = p->total * tid / p->n, e = p->total * (tid + 1) / p->n;
    if (b < e) p->fn(p->ctx, b, e);
}

static void *worker(void *arg)
{
    pool *p = &g_pool;
    t_tid = (int)(intptr_t)arg;
    t_in_region = 1;
    /* Jobs published before this thread existed are not its business: gen
     * keeps counting across kern_init calls. */
    uint32_t seen = p->start_gen;
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen) {
            int64_t t0 = now_ns();
            int spins = 0;
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
                cpu_relax();
                if (++spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
                    atomic_fetch_add(&p->sleepers, 1);
                    futex(&p->gen, FUTEX_WAIT_PRIVATE, seen);
                    atomic_fetch_sub(&p->sleepers, 1);
                    t0 = now_ns();
                }
            }
        }
        seen = g;
        if (atomic_load(&p->quit)) break;
        run_share(p, t_tid);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1 &&
            atomic_load(&p->caller_sleeping))
            futex(&p->pending, FUTEX_WAKE_PRIVATE, 1);
    }
    return NULL;
}

static void stop_workers(pool *p)
{
    if (p->n <= 1) return;
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->gen, 1);
    futex(&p->gen, FUTEX_WAKE_PRIVATE, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    atomic_store(&p->quit, 0);
}

static void free_scratch(pool *p)
{
    for (int i = 0; i < KERN_MAX_THREADS; i++) {
        free(p->scratch[i]);
        p->scratch[i] = NULL;
    }
}

static int online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Caller holds g_init_mu. */
static int init_locked(int nthreads)
{
    pool *p = &g_pool;
    if (nthreads <= 0) nthreads = online_cpus();
    if (nthreads > KERN_MAX_THREADS) nthreads = KERN_MAX_THREADS;
    if (atomic_load(&g_ready)) {
        if (p->n == nthreads) return 0;
        stop_workers(p);
        p->n = 1;
    }
    for (int i = 0; i < nthreads; i++) {
        if (p->scratch[i]) continue;
        if (posix_memalign(&p->scratch[i], 64, KERN_SCRATCH_BYTES)) {
            p->scratch[i] = NULL;
            nthreads = i;       /* run with what we could allocate */
            break;
        }
    }
    if (nthreads < 1) {
        atomic_store(&g_ready, 0);
        return -1;
    }
    p->n = 1;
    p->start_gen = atomic_load(&p->gen);    /* no job runs during init */
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&p->th[i], NULL, worker, (void *)(intptr_t)i)) break;
        p->n = i + 1;
    }
    atomic_store(&g_ready, 1);
    return p->n == nthreads ? 0 : -1;
}

int kern_init(int nthreads)
{
    pthread_mutex_lock(&g_init_mu);
    int rc = init_locked(nthreads);
    pthread_mutex_unlock(&g_init_mu);
    cpu_level();            /* detect once, outside any parallel region */
    kern_isa_get();
    return rc;
}

void kern_ensure_init(void)
{
    if (atomic_load_explicit(&g_ready, memory_order_acquire)) return;
    pthread_mutex_lock(&g_init_mu);
    if (!atomic_load(&g_ready)) init_locked(1);
    pthread_mutex_unlock(&g_init_mu);
}

int kern_threads(void)
{
    kern_ensure_init();
    return g_pool.n;
}

void kern_shutdown(void)
{
    pthread_mutex_lock(&g_init_mu);
    if (atomic_load(&g_ready)) {
        stop_workers(&g_pool);
        free_scratch(&g_pool);
        g_pool.n = 0;
        atomic_store(&g_ready, 0);
    }
    pthread_mutex_unlock(&g_init_mu);
}

int kern_tid(void) { return t_tid; }

void *kern_scratch(void)
{
    kern_ensure_init();
    return g_pool.scratch[t_tid];
}

static void run_job(int64_t n, kern_range_fn fn, void *ctx, int dyn)
{
    if (n <= 0) return;
    kern_ensure_init();
    pool *p = &g_pool;
    /* Nested calls (from inside a worker's share) and tiny jobs run inline. */
    if (t_in_region || p->n == 1 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    p->dyn = dyn;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pending, (uint32_t)(p->n - 1), memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1);       /* seq_cst: publishes the job */
    if (atomic_load(&p->sleepers) > 0) futex(&p->gen, FUTEX_WAKE_PRIVATE, INT_MAX);

    t_in_region = 1;
    run_share(p, 0);
    t_in_region = 0;

    int64_t t0 = now_ns();
    int spins = 0;
    uint32_t left;
    while ((left = atomic_load_explicit(&p->pending, memory_order_acquire)) != 0) {
        cpu_relax();
        if (++spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
            atomic_store(&p->caller_sleeping, 1);
            left = atomic_load(&p->pending);
            if (left) futex(&p->pending, FUTEX_WAIT_PRIVATE, left);
            atomic_store(&p->caller_sleeping, 0);
        }
    }
}

void kern_parallel_for(int64_t n, kern_range_fn fn, void *ctx) { run_job(n, fn, ctx, 0); }
void kern_parallel_dyn(int64_t n, kern_range_fn fn, void *ctx) { run_job(n, fn, ctx, 1); }
