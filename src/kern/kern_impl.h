/* kern_impl — private declarations shared by the kernel files: the pool's
 * per-thread scratch, the GEMM engine, the ISA dispatch tables and the
 * plain-loop `_ref` twins the tests compare against. Not for other modules. */
#ifndef DLM_KERN_IMPL_H
#define DLM_KERN_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "kern/cpu.h"
#include "kern/dtype.h"
#include "kern/kern.h"

/* ---- pool internals --------------------------------------------------------
 * Every pool slot (0 = the calling thread) owns KERN_SCRATCH_BYTES of
 * 64-byte-aligned scratch, allocated once by kern_init (or lazily, with one
 * thread, by the first kernel call). Kernels use it for packed GEMM panels,
 * dequantized tiles and attention blocks; nothing is allocated per call. */
#define KERN_SCRATCH_BYTES ((size_t)6 << 20)
#define KERN_MAX_THREADS 256
/* Largest head size RoPE and attention accept (larger: no-op / zeros). */
#define KERN_ROPE_MAX_HS 1024
#define KERN_ATTN_MAX_HS 512

/* Slot of the calling thread inside a parallel region (0 outside). */
int kern_tid(void);
/* This thread's scratch (KERN_SCRATCH_BYTES). */
void *kern_scratch(void);
/* One buffer of up to KERN_SHARED_BYTES that every thread of a parallel
 * job may read (the GEMM's packed A). Returns NULL inside a parallel region
 * (nested calls) or when bytes is too large; the caller falls back to its
 * own scratch. Only the driving thread calls it, between jobs. */
#define KERN_SHARED_BYTES ((size_t)12 << 20)
void *kern_shared(size_t bytes);
/* Like kern_parallel_for, but each thread takes indices one at a time from
 * a shared counter (load balance for units of uneven cost). fn(ctx, i, i+1)
 * must not depend on which thread runs i; results stay deterministic. */
void kern_parallel_dyn(int64_t n, kern_range_fn fn, void *ctx);
/* Ensure the pool exists (1 thread if kern_init was never called). */
void kern_ensure_init(void);

/* ---- GEMM engine ------------------------------------------------------------
 * C[M,N] = alpha·A·B + beta·C (+ bias[N] added once, with the beta term)
 * A: f32 [M,K] (ta: stored [K,M]), leading dimension lda.
 * B: one of
 *   GB_ROWS_K: source row n holds column n of B (B[k,n] = src[n][k]) — the
 *              weight W[O,I] in y = x·Wᵀ, or sgemm with tb;
 *   GB_ROWS_N: source row k holds row k of B (B[k,n] = src[k][n]) — the
 *              weight in dx = dy·W, or sgemm without tb.
 * Source rows are `bt` typed, `ldb_bytes` apart; quantized rows are
 * dequantized block by block while packing.
 * The sum over K runs in fixed KC-sized blocks, each accumulated from zero in
 * k order with one FMA per step and added to C: every C element gets the same
 * operations whatever the thread count or tile position. */
enum { GB_ROWS_K = 0, GB_ROWS_N = 1 };
typedef struct gemm_prob {
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    int ta;
    int bkind;
    dtype bt;
    const void *B;
    size_t ldb_bytes;
    float alpha, beta;
    const float *bias;      /* [N] or NULL */
    float *C;
    int64_t ldc;
    int ct;                 /* C stored transposed (set by gemm_run's operand swap) */
    /* Optional low-rank term, one more K block after the main ones:
     * C += alpha2 · A2[M, K2] · B2 with A2 row-major (lda2), B2 f32 of kind
     * b2kind (GB_ROWS_K: B2 is [N, K2]; GB_ROWS_N: [K2, N]), K2 <= GEMM_KC.
     * The same operations as a separate kern_sgemm(alpha2, beta 1) call on
     * the result, without another pass over C (a LoRA adapter's B·U). */
    const float *A2, *B2;
    int64_t lda2, ldb2, K2;
    int b2kind;
    float alpha2;
    /* bf16 numerics (kern_set_bf16): the packed A and B panels are rounded
     * to bf16 (round-to-nearest-even) before the micro-kernels, which keep
     * accumulating in f32; A2/B2 too. 0: the exact f32 path. */
    int bf16;
} gemm_prob;
void gemm_run(const gemm_prob *p);
struct kern_isa;
/* The engine's panel packers (for kernels that drive gemm_block
 * themselves): A rows [m0, m0+mc) × [k0, k0+kc) into MR strips (dst[k][i]);
 * B [k0, k0+kc) × [n0, n0+nc) into NR strips, tmp = NR×KC floats. */
void gemm_pack_a(const struct kern_isa *isa, const gemm_prob *p, float *dst, int64_t m0, int64_t mc, int64_t k0,
                 int64_t kc);
void gemm_pack_b(const struct kern_isa *isa, const gemm_prob *p, float *dst, float *tmp, int64_t n0, int64_t nc,
                 int64_t k0, int64_t kc);

/* Fixed K block of the GEMM. A multiple of QK_K so quantized rows are
 * dequantized in whole blocks. Changing it changes results (not across
 * threads, but across builds). */
#define GEMM_KC 256
/* Column block packed at once (a multiple of QK_K, see GB_ROWS_N). */
#define GEMM_NC 256
/* Row block of A packed at once. */
#define GEMM_MC 192

/* ---- ISA dispatch -----------------------------------------------------------
 * One table per instruction-set level; the level is fixed at first use by
 * cpu_level(). Results may differ between levels, never between thread
 * counts within one. */
typedef struct gemm_epi {
    float alpha, beta;
    const float *bias;      /* already offset to the tile's first column */
    int first;              /* first K block: combine with beta·C + bias */
    int ct;                 /* C stored transposed: element (i, j) at C[j·ldc + i] */
} gemm_epi;

/* What gemm_block reads from its packed panels (gemm_pack_a/b write it):
 *   KERN_PANEL_F32    f32 strips [kc][R] (in bf16 mode holding bf16 values);
 *   KERN_PANEL_PAIRS  bf16 pairs along K: dword (p, r) = k 2p low, 2p+1
 *                     high, ceil(kc/2)·R dwords (VDPBF16PS);
 *   KERN_PANEL_AMX    A: per K chunk of min(kpad, AMX_KT) a row-major
 *                     [R][chunk] bf16 block; B: pairs to kpad (TDPBF16PS).
 * Every layout fits the f32 strip's bytes, so strips stay at the f32
 * offsets (Ap + ir·kc floats) whatever the panel. */
enum { KERN_PANEL_F32 = 0, KERN_PANEL_PAIRS = 1, KERN_PANEL_AMX = 2 };

typedef struct kern_isa {
    int mr, nr;             /* GEMM micro-tile */
    int panel;              /* KERN_PANEL_*: 0 for the f32 tables */
    /* C[mc,nc] (+)= Ap·Bp for packed Ap (ceil(mc/mr) strips of kc×mr) and
     * Bp (ceil(nc/nr) strips of kc×nr). */
    void (*gemm_block)(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp,
                       float *C, int64_t ldc, const gemm_epi *e);
    /* Transpose-pack: dst[k][j] = rows[j][k] for j < R (NULL row = zeros),
     * k < kc: GEMM panels from K-contiguous rows. */
    void (*pack_t)(float *dst, const float *const *rows, int R, int64_t kc);
    /* One row of nc floats into NR strips sstride floats apart (zero-padded). */
    void (*pack_n)(float *dst, const float *src, int64_t nc, int64_t sstride);
    /* Dot products for the small-N path: y[n] = Σ_k x[n][k]·w[k] for n < nx
     * rows of x (ldx apart), result stored at y[n*ldy]. */
    void (*dot_rows)(float *y, int64_t ldy, const float *x, int64_t ldx, int nx,
                     const float *w, int64_t K);
    /* Dequantize n elements (multiple of the block) of type t; 0 if this
     * level has no vector version for t (the scalar one is used). */
    int (*dequant)(dtype t, const void *src, float *dst, int64_t n);
    /* y = Σ_k x[k]·w[k] with w one row of type t, dequantized in registers;
     * bit-identical to dequant + dot_rows. 0 if this level has none for t. */
    int (*dot_fused)(dtype t, const void *w, const float *x, int64_t K, float *y);
    /* y[n] = dot_fused(t, w, x + n·ldx, K) for nx rows of x, each weight
     * converted once for several rows: bit-identical to nx dot_fused
     * calls. NULL, or 0 for a type, where this level has none. */
    int (*dot_fused_n)(dtype t, const void *w, const float *x, int64_t ldx, int nx, int64_t K, float *y);
    /* exp over n floats (softmax, silu): dst may alias src. */
    void (*vexp)(float *dst, const float *src, int64_t n);
    /* Attention units, see attn.c. */
    void (*attn_fwd_unit)(const void *job, int64_t unit);
    void (*attn_dec_unit)(const void *job, int64_t unit);   /* grouped, <= 8 lanes */
    void (*attn_bwd_kv_unit)(const void *job, int64_t unit);
    void (*attn_bwd_q_unit)(const void *job, int64_t unit);
    /* The bf16 units (isa_attn_bf16.inc): forward per (b, kv head, query
     * block), the backward's passes as above with the kept dS tiles. */
    void (*attn_fwd_bf16_unit)(const void *job, int64_t unit);
    void (*attn_bwd_kv_bf16_unit)(const void *job, int64_t unit);
    void (*attn_bwd_q_bf16_unit)(const void *job, int64_t unit);
    /* Cross-entropy on one row, see xent.c. Returns nll. */
    float (*xent_row)(float *drow, const float *row, int V, int target, float grad_scale);
    /* h = silu(g)·u and its backward over n elements. */
    void (*swiglu_fwd)(float *h, const float *g, const float *u, int64_t n);
    void (*swiglu_bwd)(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n);
    /* Online-softmax step on a tile of logits (fused LM head, head.c). */
    void (*softmax_tile)(float *S, int64_t ld, int rows, int nc, float *m, float *l, float *al);
    /* Narrow GEMMs (isa_narrow.inc, driven by narrow.c). */
    void (*narrow_dot)(float *C, int64_t ldc, const float *X, int64_t ldx, const float *const *W, int nw,
                       int64_t m0, int64_t m1, int64_t K, float alpha, float beta);
} kern_isa;
/* kern_sgemm's narrow shapes (narrow.c): returns 1 if it computed C. */
int narrow_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

const kern_isa *kern_isa_get(void);
/* The table the GEMM engine uses under kern_set_bf16: the back end's
 * micro-kernel and panel (gemm_bf16.c); kern_isa_get() for `fma`. */
const kern_isa *kern_isa_bf16(void);
extern const kern_isa kern_isa_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const kern_isa kern_isa_avx2;
extern const kern_isa kern_isa_avx512;
#endif

/* ---- bf16 back ends (gemm_bf16.c, isa_avx512bf16.c, gemm_amx.inc) ---------- */
/* The native AMX kernel needs the compiler's tile intrinsics. */
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define KERN_AMX_NATIVE 1
#endif
#define AMX_MR 32           /* 2×2 tiles of 16×16 fp32 */
#define AMX_NR 32
#define AMX_KT 32           /* bf16 per A tile row (64 bytes) */
/* kpad: kc rounded up to AMX_KT, or to even below AMX_KT (the tiles are
 * then configured that narrow); kpad <= 2·kc, so the panel fits. */
int64_t bf16_amx_kpad(int64_t kc);
/* A rounded f32 strip [kc][R] to the pair panel, in place. */
void bf16_pack_pairs(float *strip, int R, int64_t kc);
void bf16_pack_amx_a(uint16_t *dst, const float *strip, int R, int64_t kc);
void bf16_pack_amx_b(uint16_t *dst, const float *strip, int R, int64_t kc);
void gemm_bf16_block_avx512bf16(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                                int64_t ldc, const gemm_epi *e);
/* Pair packers (isa_avx512bf16.c, AVX512_BF16 CPUs; _emu under SIMDe). */
void bf16_pairs_f32_avx512bf16(uint32_t *dst, const float *src, int64_t n);
void bf16_zip_f32_avx512bf16(uint32_t *dst, const float *r0, const float *r1, int64_t n);
void bf16_zip_bf16_avx512bf16(uint32_t *dst, const uint16_t *r0, const uint16_t *r1, int64_t n);
/* The pairs panel straight from the operands (one pass, no f32 panel);
 * 0 where the case is not covered (the caller packs f32, rounds, pairs). */
int bf16_pack_a_direct(const struct kern_isa *isa, const gemm_prob *p, float *dst, int64_t m0, int64_t mc, int64_t k0,
                       int64_t kc);
int bf16_pack_b_direct(const struct kern_isa *isa, const gemm_prob *p, float *dst, float *tmp, int64_t n0, int64_t nc,
                       int64_t k0, int64_t kc);
void gemm_amx_block_model(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                          int64_t ldc, const gemm_epi *e);
void gemm_amx_block_native(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                           int64_t ldc, const gemm_epi *e);
/* The twin of one gemm_block call of back end be over unpacked bf16
 * operands: C[i, j] (tile element, ct as in e) gets the back end's sum of
 * A[i·lda + k]·B[j·ldb + k] over k < kc, then e's epilogue. */
void gemm_bf16_block_ref(kern_bf16_be be, int64_t mc, int64_t nc, int64_t kc, const uint16_t *A, int64_t lda,
                         const uint16_t *B, int64_t ldb, float *C, int64_t ldc, const gemm_epi *e);
/* kern_sgemm's twin under kern_set_bf16 with back end be (AVX2/AVX-512
 * levels: the `fma` back end is then one FMA per k). */
void kern_sgemm_bf16dp_ref(kern_bf16_be be, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                           int64_t ldc);

/* Scalar dequantizers (the definition of each format's values). */
void dequant_row_scalar(dtype t, const void *src, float *dst, int64_t n);

/* ---- attention job (shared by the ISA variants in attn_isa.inc) ------------- */
#define ATTN_BQ 32          /* query rows per unit */
#define ATTN_BK 64          /* keys per block */
typedef struct attn_job {
    attn_shape s;
    float scale;            /* 1/sqrt(HS) */
    int HSP;                /* HS rounded up to the vector width */
    int nqb, nkb;           /* query / key blocks */
    int grouped;            /* forward units are (b, kv head) with rep·Tq lanes */
    float *out, *lse;
    const float *q, *k, *v;
    /* backward */
    float *dq, *dk, *dv;
    const float *dout, *D;  /* D[B,NH,Tq] = Σ dout·out per row */
    /* dS tiles [AQ][AK] of every visible (query block, key block), written
     * by the dK/dV pass and read by the dQ pass (NULL: the dQ pass
     * recomputes them); tile (b, h, qb, kb) at ds_tiles + (((b·NH + h) ·
     * ds_per_head + ds_off[qb] + kb) · AQ·AK. */
    float *ds_tiles;
    const int32_t *ds_off;  /* [nqb + 1] */
    int64_t ds_per_head;
    /* bf16 attention (isa_attn_bf16.inc): the products on bf (NULL: the
     * f32 units). The backward's operands are packed once per call into
     * its scratch (attn.c): qb, ob the rows of q̃ = q/√HS and dO as bf16
     * pairs along d ([B][NH][Tq][HSP/2] dwords); qz, oz the same rows
     * zipped two queries at a time ([B][NH][tq2][HSP], query 2i' low, 2i'+1
     * high); kz the key rows zipped ([B][KVH][tk2][HSP]). The kept dS tiles
     * then hold bf16 pairs along keys ([AQ][AK/2] dwords per tile, tiles
     * AQ·AK/2 floats apart instead of AQ·AK). */
    const struct attn_bf16_ops *bf;
    const uint32_t *qb, *ob, *qz, *oz, *kz;
    int64_t tq2, tk2;
} attn_job;
/* The bf16 products of the attention (attn_bf16.c; _ref twins in
 * kern_ref.c): dp is the pair micro-kernel, rows and zip the packers. */
typedef void (*attn_dp_fn)(float *out, int64_t ldo, const uint32_t *A, int64_t ao, int64_t ap, const uint32_t *B,
                           int64_t ldb, int np, int nout, int ncols, int acc);
typedef void (*attn_bf16_rows_fn)(uint32_t *dst, const float *src, int n, int npairs, float mul);
typedef void (*attn_bf16_zip_fn)(uint32_t *dst, const float *r0, const float *r1, int n, int npad, float mul);
typedef struct attn_bf16_ops {
    attn_dp_fn dp;
    attn_bf16_rows_fn rows;
    attn_bf16_zip_fn zip;
} attn_bf16_ops;
void attn_dp_ref(float *out, int64_t ldo, const uint32_t *A, int64_t ao, int64_t ap, const uint32_t *B, int64_t ldb,
                 int np, int nout, int ncols, int acc);
void attn_bf16_rows_ref(uint32_t *dst, const float *src, int n, int npairs, float mul);
void attn_bf16_zip_ref(uint32_t *dst, const float *r0, const float *r1, int n, int npad, float mul);
void attn_dp_avx512bf16(float *out, int64_t ldo, const uint32_t *A, int64_t ao, int64_t ap, const uint32_t *B,
                        int64_t ldb, int np, int nout, int ncols, int acc);
void attn_bf16_rows_avx512bf16(uint32_t *dst, const float *src, int n, int npairs, float mul);
void attn_bf16_zip_avx512bf16(uint32_t *dst, const float *r0, const float *r1, int n, int npad, float mul);
extern const attn_bf16_ops attn_bf16_ops_avx512bf16;
/* Tests: when set, the bf16 attention runs on these ops whatever the back
 * end (the _emu build on any x86-64, or the _ref twins); NULL = chosen from
 * the back end. */
extern const attn_bf16_ops *kern_attn_bf16_ops;
/* The last key query position pos of sequence b sees: itself, or the
 * prefix-LM block's last key while pos is inside it (attn_shape.prefix);
 * callers clamp to Tk − 1. */
static inline int attn_last_key(const attn_shape *s, int b, int pos)
{
    return s->prefix && pos < s->prefix[b] && s->prefix[b] - 1 > pos ? s->prefix[b] - 1 : pos;
}
/* Largest dS store (floats) kern_attn_bwd asks for; longer sequences
 * recompute the tiles in the dQ pass instead. */
#define ATTN_DS_MAX_FLOATS ((size_t)8 << 20)
/* Tests: non-zero makes kern_attn_bwd recompute dS even when it fits;
 * kern_attn_dec_off makes decode steps take the 32-lane tiles. */
extern int kern_attn_ds_off, kern_attn_dec_off;
size_t attn_unit_scratch_floats(int HSP);

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from a
 * block's 12 packed bytes sc (ggml's get_scale_min_k4). */
static inline void kern_scmin_k4(const uint8_t *sc, int j, uint8_t *s, uint8_t *m)
{
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (uint8_t)((sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4));
        *m = (uint8_t)((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
    }
}

#if defined(__x86_64__) && defined(DLM_SIMDE)
#include <string.h>
/* The emulated build (simd_x86.h): immintrin.h would clash with SIMDe's
 * aliases; the exact conversion instead. */
static inline float kern_half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}
#elif defined(__x86_64__)
#include <immintrin.h>
#include <string.h>
/* The fp16 at p as f32 with the F16C instruction (exact, the value of
 * fp16_to_f32; every AVX2 and AVX-512 CPU has F16C, cpu.c requires it). */
static inline __attribute__((always_inline, target("f16c"))) float kern_half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
#endif

/* Decoding reads every weight row once from memory; the dot loops ask for
 * the bytes this far ahead (_mm_prefetch), because with the hardware
 * prefetcher alone the first load of each block waits on memory (perf:
 * a third of a Q5_0 dot's samples on that load). 1–4 KiB measured best. */
#define KERN_PREFETCH_AHEAD 2048

/* ---- integer decode dots (qdot.c) ------------------------------------------
 * One row of x rounded to int8 blocks as llama.cpp does for the weight type
 * wt: Q8_K (256 per block, d = −max/127) for Q4_K / Q5_K / Q6_K, Q8_0
 * (32 per block, fp16 d; Q8_1 adds s = d·Σq) for Q8_0 / Q4_0 / Q5_0 /
 * Q4_1 / Q5_1; plus the per-lane vectors the
 * 32-element kernels need, so the weight loop does only weight work. */
typedef struct kern_q8x {
    dtype wt;
    int64_t K;
    int8_t *qs;         /* [K], element order but see qx_groups */
    float *d;           /* [K/256] or [K/32] (the fp16 value as float) */
    int32_t *bsum16;    /* Q8_K: Σ qs per 16 [K/16] */
    int32_t *bsum32;    /* Σ qs per 32 [K/32] */
    int32_t *corr;      /* 32-element types: the weight bias·Σ qs / 8 per lane [K/4] */
    float *dv;          /* 32-element types: d per lane [K/4] */
    float *sx;          /* 32-element types: fp16(d·Σ qs) per block, Q8_1's s [K/32] */
} kern_q8x;
/* Q4_0 / Q5_0 / Q4_1 / Q5_1: the first qx_groups(wt, K) groups of 4 blocks (128
 * elements) are stored as the 4 blocks' elements 0..15, then their 16..31
 * (the order their nibbles load in); the rest, and every other type, in
 * element order. qx_at(q, k) is element k's int8 either way. */
int64_t qx_groups(dtype wt, int64_t K);
int qx_at(const kern_q8x *q, int64_t k);
/* Bytes of buffer qx_quantize needs for K elements. */
size_t qx_bytes(int64_t K);
/* 1 if this CPU has the integer path for weights of type wt. */
int qx_supported(dtype wt);
/* Quantize x into buf (64-byte aligned, >= qx_bytes(K)). 0 (nothing
 * usable) if K is not whole blocks or x holds a NaN/Inf (the float path
 * then propagates it). */
int qx_quantize(kern_q8x *q, void *buf, dtype wt, const float *x, int64_t K);
/* One block of x rounded as llama.cpp rounds it (qdot.c; shared with the
 * int8 prefill, qmm.c): Q8_0/Q8_1 (32 elements) and Q8_K (256). */
void qx_round_q8_0(const float *xb, int8_t *qs, float *d, int *s, float *sx);
void qx_round_q8_K(const float *xb, int8_t *qs, float *d, int32_t *bsum16);
/* Σ_k w[k]·x[k] for one weight row of type q->wt (qx_supported). */
float qx_dot(const kern_q8x *q, const void *w);

/* ---- int8 prefill (qmm.c) -----------------------------------------------------
 * N rows of x rounded as the decode dots round one (qx_round_q8_0/_K), in
 * element order; 32 weight rows unpacked into a panel in VNNI order
 * ([K/4][QMM_TILE_ROWS][4] u8) with their scales per row in the lanes. */
#define QMM_TILE_ROWS 32
#define QMM_R_MAX 4         /* rows of x per kernel call */
/* MODEL: the AMX kernel on the tile model (amx_model.c), for tests only */
enum { QMM_ISA_NONE = 0, QMM_ISA_VNNI256 = 1, QMM_ISA_VNNI512 = 2, QMM_ISA_AMX = 3, QMM_ISA_MODEL = 4 };
typedef struct qmm_x {
    dtype wt;
    int64_t N, K, nb;   /* nb: blocks of 32 or 256 per row */
    int8_t *qs;         /* [N][K] */
    float *d;           /* [N][nb] */
    int32_t *bs16;      /* [N][K/16] Σ qs per 16 (K types) */
    int32_t *bs32;      /* [N][K/32] Σ qs per 32 */
    float *sx;          /* [N][K/32] Q8_1's s (32-element types) */
    int32_t *bs2;       /* [N][K/64] bs32 in int16 pairs (K types) */
} qmm_x;
typedef struct qmm_panel {
    dtype wt;
    int64_t K, nb;
    uint8_t *w;         /* [K/4][32][4] */
    float *d, *d2;      /* [nb][32]: d; dmin (K types) or m (Q4_1/Q5_1) */
    int32_t *sc;        /* [sub-blocks][32]: per 32 (K types), per 16 (Q6_K) */
    int32_t *mn;        /* [K/32][32]: the K types' mins */
    int32_t *mn2;       /* [K/64][32]: the same in int16 pairs */
} qmm_panel;
int qmm_type_ok(dtype t);
size_t qmm_x_bytes(int64_t N, int64_t K);
size_t qmm_x_row_bytes(int64_t K);
int qmm_x_init(qmm_x *q, void *buf, dtype wt, int64_t N, int64_t K);    /* buf 64-aligned */
void qmm_x_round(qmm_x *q, int64_t n, const float *x);                  /* row n (finite) */
/* The same bytes with AVX-512 where the back end has it (qmm_vnni.c). */
void qmm_x_round_fast(qmm_x *q, int64_t n, const float *x);
void qmm_round_q8_0_512(const float *xb, int8_t *qs, float *d, int *s, float *sx);
void qmm_round_q8_K_512(const float *xb, int8_t *qs, float *d, int32_t *bsum16);
/* One weight row's unsigned bytes in element order and its scales at
 * [i·stride] (qmm.c); the AVX-512 BW/VL twin (qmm_vnni.c) gives the same
 * bytes and returns 0 for the types it leaves to the plain loop. */
void qmm_unpack_row_ref(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d, float *d2, int32_t *sc,
                        int32_t *mn, int64_t stride);
int qmm_unpack_row_512(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d, float *d2, int32_t *sc,
                       int32_t *mn, int64_t stride);
size_t qmm_panel_bytes(int64_t K);
void qmm_panel_build(qmm_panel *p, void *buf, const wmat *W, int64_t o0);
/* out[R][32] for rows n0.. of x against the panel: the back end isa
 * (QMM_ISA_*), or the plain-loop model of the lanes (qmm_panel_ref); all
 * give the same bits. */
void qmm_panel_run(int isa, const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_ref(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
/* the back ends (qmm_vnni.c; qmm_amx.c: R ≤ 16, on the AMX instructions
 * or on the tile model, amx_model.c) */
void qmm_panel_512(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_256(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_amx_model(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_amx_native(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
/* The back end this process uses (QMM_ISA_NONE: none, the float path);
 * qmm_cap_isa lowers it (tests). */
int qmm_isa(void);
void qmm_cap_isa(int isa);
const char *qmm_isa_name(int isa);
int qmm_supported(const wmat *W);
/* y (+)= x·Wᵀ (+ bias) on the int8 path; 0 (y untouched) when W or this
 * CPU has none, or x holds a NaN/Inf. */
int qmm_matmul(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate);
/* The same as a plain loop over whole rows (allocates; tests only). */
int kern_matmul_int8_ref(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate);

/* Whether kern_set_bf16 is on (read by the entry points on the driving
 * thread; the workers see it through gemm_prob.bf16). */
int kern_bf16_active(void);

/* ---- plain-loop references (kern_ref.c) ------------------------------------ */
void kern_matmul_ref(float *y, const float *x, const wmat *W, const float *bias,
                     int64_t N, int accumulate);
void kern_matmul_dx_ref(float *dx, const float *dy, const wmat *W, int64_t N);
void kern_sgemm_ref(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);
void kern_rmsnorm_fwd_ref(float *y, float *rstd, const float *x, const float *w,
                          int64_t N, int C, float eps);
void kern_rmsnorm_bwd_ref(float *dx, float *dw, const float *dy, const float *x,
                          const float *w, const float *rstd, int64_t N, int C);
void kern_swiglu_fwd_ref(float *h, const float *g, const float *u, int64_t n);
/* One row of RMSNorm's input gradient, dx (+)= (float)(r·w·dy − r³/C·Σ(w·dy·x)·x)
 * in double: the plain loops of ops.c and the AVX-512 twin (ops_avx512.c),
 * same bits. */
void kern_rms_bwd_row_ref(float *dx, const float *w, const float *dy, const float *x, double r, int C, int add);
void kern_rms_bwd_row_avx512(float *dx, const float *w, const float *dy, const float *x, double r, int C, int add);
/* dst[i] += keep bit i ? src[i]·scale : 0: the plain loop (dropout.c) and
 * its AVX-512 twin (ops_avx512.c), same bits. */
void kern_drop_add_ref(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale);
void kern_drop_add_avx512(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale);
void kern_swiglu_bwd_ref(float *dg, float *du, const float *dh, const float *g,
                         const float *u, int64_t n);
void kern_attn_fwd_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                       const attn_shape *s);
void kern_attn_bwd_ref(float *dq, float *dk, float *dv, const float *dout,
                       const float *q, const float *k, const float *v, const attn_shape *s);
double kern_xent_ref(float *dlogits, float *nll, const float *logits, const int32_t *targets,
                     int64_t N, int V, float grad_scale);
/* kern_sgemm's twin under kern_set_bf16: C = alpha·op(A)·op(B) + beta·C with every A and B
 * element rounded to bf16 first, sums in double (kern_ref.c). */
void kern_sgemm_bf16_ref(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb,
                         float beta, float *C, int64_t ldc);
/* kern_round_bf16's twin: one value through f32_to_bf16 and back. */
void kern_round_bf16_ref(float *x, int64_t n);
/* matmul_ref + xent_ref + matmul_dx_ref (allocates the logits). */
double kern_head_xent_ref(float *dx, float *nll, const float *x, const wmat *W, const int32_t *targets,
                          int64_t N, float grad_scale);

/* kern_adamw8 one value at a time: linear search for the nearest code
 * (the distance to every code, the first of equal ones), no threads. */
void kern_adamw8_ref(float *p, const float *g, uint8_t *c1, uint8_t *c2, float *absmax1, float *absmax2, int64_t n,
                     const kern_adamw_bnb *s);
uint8_t kern_q8_encode_ref(const float *map, int is_signed, float x);

/* The quantizers' shared helpers (quant.c, quant_w.c, qdot.c): a little-endian
 * u16 store, and ggml's nearest_int (round half to even through the float
 * mantissa, for |f| <= 4194303). */
static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* ggml's make_qkx2_quants (= make_qkx3_quants with weights, no MAD): the
 * (scale, -min) fit of the K-quants' sub-blocks, x[n] to L[n] in 0..nmax
 * (Laux[n] scratch); returns the scale, *the_min = -min (quant.c). */
float quant_make_qkx(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                     uint8_t *Laux, float rmin, float rdelta, int nstep);
/* ggml's make_qx_quants (rmse_type 1): symmetric fit of x[n] to L[n] =
 * l + nmax, l in -nmax..nmax-1, weighted by qw or, qw NULL, by x² (quant.c). */
float quant_make_qx(int n, int nmax, const float *x, int8_t *L, const float *qw);
/* Q4_K/Q5_K/Q6_K rows, qw the row's importance or NULL (quant.c); the
 * importance-weighted block fit of Q4_K (nmax 15) and Q5_K (nmax 31):
 * L[256], scales[12], d and dmin of one block (quant_w.c). */
size_t quant_k_row(dtype t, const float *src, void *dst, int64_t n, const float *qw);
void quant_kx_block_w(const float *x, const float *qwb, int nmax, uint8_t *L, uint8_t *scales12, uint16_t *d_out,
                      uint16_t *dmin_out);

#endif
