/* dist — see dist.h. */
#include "run/dist.h"

#include <string.h>

#ifdef DLM_MPI
#include <mpi.h>
#endif

static int g_on, g_rank, g_size = 1;

int dist_compiled(void)
{
#ifdef DLM_MPI
    return 1;
#else
    return 0;
#endif
}

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }

#ifdef DLM_MPI
static char g_lib[MPI_MAX_LIBRARY_VERSION_STRING];

const char *dist_library(void)
{
    if (!g_lib[0]) {
        int len = 0;
        MPI_Get_library_version(g_lib, &len);
        char *nl = strchr(g_lib, ',');   /* "Open MPI v4.1.4, package: ..." → the first part */
        if (nl) *nl = 0;
    }
    return g_lib;
}

int dist_init(int *argc, char ***argv, dlm_err *e)
{
    if (g_on) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return err_set(e, "MPIError", "MPI_Init failed");
    /* errors end the job (a dead rank must not leave the others waiting) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_on = 1;
    return 0;
}

void dist_abort(int code)
{
    if (g_on && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

void dist_finalize(void)
{
    if (g_on) MPI_Finalize();
    g_on = 0;
}

int dist_bcast_flag(int flag)
{
    if (!g_on || g_size == 1) return flag;
    MPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return flag;
}

double dist_bcast_f64(double x)
{
    if (!g_on || g_size == 1) return x;
    MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return x;
}

/* Large gradients go in pieces, each under MPI's int count. */
#define CHUNK ((size_t)1 << 28)

static void send_f(const float *p, size_t n, int to)
{
    for (size_t o = 0; o < n; o += CHUNK)
        MPI_Send(p + o, (int)(n - o < CHUNK ? n - o : CHUNK), MPI_FLOAT, to, 1, MPI_COMM_WORLD);
}

static void recv_f(float *p, size_t n, int from)
{
    for (size_t o = 0; o < n; o += CHUNK)
        MPI_Recv(p + o, (int)(n - o < CHUNK ? n - o : CHUNK), MPI_FLOAT, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void bcast_f(float *p, size_t n, int root)
{
    for (size_t o = 0; o < n; o += CHUNK)
        MPI_Bcast(p + o, (int)(n - o < CHUNK ? n - o : CHUNK), MPI_FLOAT, root, MPI_COMM_WORLD);
}
#else
const char *dist_library(void) { return NULL; }

int dist_init(int *argc, char ***argv, dlm_err *e)
{
    (void)argc;
    (void)argv;
    err_set(e, "MPIError", "this dlm was built without MPI but runs under mpirun");
    return err_hint(e, "build with 'make mpi' (cmake -DDLM_MPI=ON) and run build-mpi/dlm under mpirun");
}

void dist_abort(int code) { (void)code; }
void dist_finalize(void) {}
int dist_bcast_flag(int flag) { return flag; }
double dist_bcast_f64(double x) { return x; }
#endif

static void add_parts(float *acc, const float *const *parts, int n_parts, size_t n, double *sacc,
                      const double *scal, int k)
{
    for (int p = 0; p < n_parts; p++) {
        const float *x = parts[p];
        for (size_t i = 0; i < n; i++) acc[i] += x[i];
        for (int j = 0; j < k; j++) sacc[j] += scal[(size_t)p * k + j];
    }
}

int dist_allreduce_sum(float *acc, const float *const *parts, int n_parts, size_t n,
                       double *scal_acc, const double *scal, int k, dlm_err *e)
{
    (void)e;
    if (g_size == 1 || !g_on) {
        memset(acc, 0, n * sizeof(float));
        for (int j = 0; j < k; j++) scal_acc[j] = 0;
        add_parts(acc, parts, n_parts, n, scal_acc, scal, k);
        return 0;
    }
#ifdef DLM_MPI
    /* A chain, not MPI_Allreduce: MPI may associate a sum any way it
     * likes, and float addition is not associative. Rank r waits for the
     * sum of ranks < r, adds its parts in order and passes it on; the last
     * rank's total is broadcast. The bytes moved per step: about 2·n floats
     * per rank (docs/mpi.md). */
    if (g_rank == 0) {
        memset(acc, 0, n * sizeof(float));
        for (int j = 0; j < k; j++) scal_acc[j] = 0;
    } else {
        recv_f(acc, n, g_rank - 1);
        MPI_Recv(scal_acc, k, MPI_DOUBLE, g_rank - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    add_parts(acc, parts, n_parts, n, scal_acc, scal, k);
    if (g_rank + 1 < g_size) {
        send_f(acc, n, g_rank + 1);
        MPI_Send(scal_acc, k, MPI_DOUBLE, g_rank + 1, 2, MPI_COMM_WORLD);
    }
    bcast_f(acc, n, g_size - 1);
    MPI_Bcast(scal_acc, k, MPI_DOUBLE, g_size - 1, MPI_COMM_WORLD);
#endif
    return 0;
}
