/* isa_scalar — the kernel bodies (isa_body.inc) as plain C for CPUs without
 * AVX2/FMA (and for DLM_CPU_LEVEL=scalar): "vectors" of one float, a 4×4
 * GEMM micro-tile. a·b+c is two roundings here (no FMA instruction), so
 * results differ from the vector levels, never between thread counts. */
#include <math.h>

#include "kern/kern_impl.h"

#define ISA_SUFFIX(n) n##_scalar
#define ISA_TABLE kern_isa_scalar
#define KATTR
#define KINLINE static inline __attribute__((always_inline))

#define VL 1
#define GEMM_MR 4
#define GEMM_NV 4
typedef float vf;

#define vzero() 0.f
#define vset1(x) (x)
#define vload(p) (*(p))
#define vstore(p, v) (*(p) = (v))
#define vloadn(p, n) ((n) > 0 ? *(p) : 0.f)
#define vstoren(p, v, n) do { if ((n) > 0) *(p) = (v); } while (0)
#define sfma(a, b, c) ((a) * (b) + (c))
#define vfma(a, b, c) ((a) * (b) + (c))
#define vfnma(a, b, c) ((c) - (a) * (b))
#define vmul(a, b) ((a) * (b))
#define vadd(a, b) ((a) + (b))
#define vsub(a, b) ((a) - (b))
#define vdiv(a, b) ((a) / (b))
#define vmax(a, b) ((a) > (b) ? (a) : (b))
#define vhsum(v) (v)
#define vhmax(v) (v)
#define vexp_v(x) expf(x)
#define vtranspose(r) ((void)(r))

#include "kern/isa_body.inc"
