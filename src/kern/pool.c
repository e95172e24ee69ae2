/* pool — the persistent thread pool behind kern_parallel_for.
 *
 * n-1 worker threads plus the caller. A job is [0, n) cut into chunks;
 * every thread, the caller included, takes chunks from one shared claim
 * word until none is left, so a thread that the OS has descheduled (this
 * machine is shared) holds up at most the chunk it is in, never a fixed
 * share of the job. Waiting threads spin for a short while (consecutive
 * kernels in a training step follow each other within microseconds) and
 * then sleep on a futex, so an idle pool costs no CPU.
 *
 * Which thread runs which chunk varies from run to run. Kernels make each
 * index's result independent of the chunk it lands in and of the thread
 * that runs it, which is what makes results identical for any thread
 * count. */
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

/* The claim word: job id (24 bits) | next chunk (20) | chunk count (20).
 * Everything a thread needs to decide whether a chunk is still to be taken
 * sits in this one word, so a thread that wakes up late (descheduled on a
 * busy machine) can never take a chunk of a job it did not see published:
 * its compare-exchange carries the old job id and fails. */
#define CH_BITS 20
#define CH_MAX ((1u << CH_BITS) - 1)
#define JOB_ID(c) ((uint32_t)((c) >> (2 * CH_BITS)))
#define JOB_NEXT(c) ((uint32_t)((c) >> CH_BITS) & CH_MAX)
#define JOB_N(c) ((uint32_t)(c) & CH_MAX)
#define JOB_WORD(id, next, n) (((uint64_t)(id) << (2 * CH_BITS)) | ((uint64_t)(next) << CH_BITS) | (uint64_t)(n))
#define JOB_ID_MASK ((1u << (64 - 2 * CH_BITS)) - 1)

typedef struct pool {
    int n;                          /* threads including the caller */
    pthread_t th[KERN_MAX_THREADS];
    void *scratch[KERN_MAX_THREADS];
    _Atomic uint64_t claim;         /* see JOB_WORD */
    _Atomic uint32_t wake;          /* bumped per job: the workers' futex word */
    _Atomic uint32_t done;          /* chunks finished: the caller's futex word */
    _Atomic int sleepers;           /* workers blocked (or about to block) on wake */
    _Atomic int caller_sleeping;
    _Atomic int quit;
    uint32_t job_id;                /* last published job (caller side) */
    /* the job; written before its claim word is published */
    _Atomic(kern_range_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t total, grain;
    _Atomic uint32_t csr;           /* the caller's MXCSR control bits: the job's FP mode */
} pool;

static pool g_pool;
static void *g_shared;              /* kern_shared: one buffer for all threads */
static size_t g_shared_bytes;
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

/* Take chunks of job `id` until none is left. The job's fields are read
 * after the claim word showed `id` and before a chunk is won; a chunk is
 * only won while the job is still running, and the caller rewrites the
 * fields only after every chunk was finished, so they belong to `id`. */
static void run_chunks(pool *p, uint32_t id)
{
    kern_range_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
    int64_t total = atomic_load_explicit(&p->total, memory_order_relaxed);
    int64_t grain = atomic_load_explicit(&p->grain, memory_order_relaxed);
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if (JOB_ID(c) != id || JOB_NEXT(c) >= JOB_N(c)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + ((uint64_t)1 << CH_BITS),
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        uint32_t i = JOB_NEXT(c), nch = JOB_N(c);
        int64_t b = (int64_t)i * grain, e = b + grain < total ? b + grain : total;
        fn(ctx, b, e);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
        if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == nch &&
            atomic_load(&p->caller_sleeping))
            futex(&p->done, FUTEX_WAKE_PRIVATE, 1);
    }
}

/* MXCSR: bits 0-5 are sticky exception flags, the rest is the mode
 * (rounding, masks, FTZ bit 15, DAZ bit 6). */
#define CSR_FLAGS 0x3fu
#define CSR_FTZ_DAZ 0x8040u

static void fp_mode_set(uint32_t mode)
{
    uint32_t cur = _mm_getcsr();
    if ((cur & ~CSR_FLAGS) != (mode & ~CSR_FLAGS)) _mm_setcsr((cur & CSR_FLAGS) | (mode & ~CSR_FLAGS));
}

unsigned kern_fp_flush_enter(void)
{
    uint32_t cur = _mm_getcsr();
    fp_mode_set(cur | CSR_FTZ_DAZ);
    return cur & ~CSR_FLAGS;
}

void kern_fp_flush_leave(unsigned saved) { fp_mode_set(saved); }

static void *worker(void *arg)
{
    pool *p = &g_pool;
    t_tid = (int)(intptr_t)arg;
    t_in_region = 1;
    /* Jobs published before this thread existed are not its business. */
    uint32_t seen = JOB_ID(atomic_load(&p->claim));
    for (;;) {
        uint64_t c;
        int64_t t0 = now_ns();
        int spins = 0;
        while (JOB_ID(c = atomic_load_explicit(&p->claim, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->quit, memory_order_relaxed)) {
            cpu_relax();
            if (++spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
                uint32_t w = atomic_load(&p->wake);
                atomic_fetch_add(&p->sleepers, 1);
                if (JOB_ID(atomic_load(&p->claim)) == seen && !atomic_load(&p->quit))
                    futex(&p->wake, FUTEX_WAIT_PRIVATE, w);
                atomic_fetch_sub(&p->sleepers, 1);
                t0 = now_ns();
            }
        }
        if (atomic_load(&p->quit)) break;
        seen = JOB_ID(c);
        /* every chunk runs in the FP mode of the thread that started the
         * job (kern_fp_flush_enter): the bytes cannot depend on which
         * thread ran it. Read like the job's other fields (run_chunks). */
        fp_mode_set(atomic_load_explicit(&p->csr, memory_order_relaxed));
        run_chunks(p, seen);
    }
    return NULL;
}

static void stop_workers(pool *p)
{
    if (p->n <= 1) return;
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->wake, 1);
    futex(&p->wake, FUTEX_WAKE_PRIVATE, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    atomic_store(&p->quit, 0);
}

static void free_scratch(pool *p)
{
    free(g_shared);
    g_shared = NULL;
    g_shared_bytes = 0;
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
    /* The shared buffer whole, now: growing it on first use would allocate
     * inside a training step. Pages a kernel never touches cost nothing. */
    if (!g_shared) {
        if (posix_memalign(&g_shared, 64, KERN_SHARED_BYTES)) g_shared = NULL;
        g_shared_bytes = g_shared ? KERN_SHARED_BYTES : 0;
    }
    p->n = 1;
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

void *kern_shared(size_t bytes)
{
    if (t_in_region || bytes > KERN_SHARED_BYTES) return NULL;
    kern_ensure_init();
    return bytes <= g_shared_bytes ? g_shared : NULL;
}

void *kern_scratch(void)
{
    kern_ensure_init();
    return g_pool.scratch[t_tid];
}

static void run_job(int64_t n, kern_range_fn fn, void *ctx, int64_t grain)
{
    if (n <= 0) return;
    kern_ensure_init();
    pool *p = &g_pool;
    /* Nested calls (from inside a worker's share) and tiny jobs run inline. */
    if (t_in_region || p->n == 1 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    if (grain < 1) grain = 1;
    if ((n + grain - 1) / grain > CH_MAX) grain = (n + CH_MAX - 1) / CH_MAX;
    uint32_t nch = (uint32_t)((n + grain - 1) / grain);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->total, n, memory_order_relaxed);
    atomic_store_explicit(&p->grain, grain, memory_order_relaxed);
    atomic_store_explicit(&p->csr, _mm_getcsr() & ~CSR_FLAGS, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t id = p->job_id = (p->job_id + 1) & JOB_ID_MASK;
    atomic_store_explicit(&p->claim, JOB_WORD(id, 0, nch), memory_order_seq_cst);  /* publishes the job */
    atomic_fetch_add(&p->wake, 1);
    if (atomic_load(&p->sleepers) > 0) futex(&p->wake, FUTEX_WAKE_PRIVATE, INT_MAX);

    /* The caller takes chunks too; a worker that is not running (a busy
     * machine) leaves its share to whoever is. */
    t_in_region = 1;
    run_chunks(p, id);
    t_in_region = 0;

    int64_t t0 = now_ns();
    int spins = 0;
    uint32_t d;
    while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) != nch) {
        cpu_relax();
        if (++spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
            atomic_store(&p->caller_sleeping, 1);
            d = atomic_load(&p->done);
            if (d != nch) futex(&p->done, FUTEX_WAIT_PRIVATE, d);
            atomic_store(&p->caller_sleeping, 0);
        }
    }
}

/* About four chunks per thread: enough to even out a thread that is
 * descheduled for a while, few enough that claiming costs nothing. */
void kern_parallel_for(int64_t n, kern_range_fn fn, void *ctx)
{
    int64_t T = g_pool.n > 0 ? g_pool.n : 1;
    run_job(n, fn, ctx, (n + 4 * T - 1) / (4 * T));
}

void kern_parallel_dyn(int64_t n, kern_range_fn fn, void *ctx) { run_job(n, fn, ctx, 1); }
