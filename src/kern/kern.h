/* kern — the compute kernels: one small set of functions over raw pointers
 * with explicit shapes. The CPU implementation dispatches on cpu_level();
 * a GPU backend could sit behind the same calls later.
 *
 * Contracts every kernel keeps:
 *  - Determinism: results are bit-identical for any thread count. Work is
 *    split over output rows/columns, never over a summed dimension; every
 *    reduction has one fixed order.
 *    (Across ISA levels results may differ; DLM_CPU_LEVEL lowers the level.)
 *  - No allocation per call: the pool gives each thread KERN_SCRATCH_BYTES
 *    (6 MiB, see kern_impl.h) once at kern_init for packed panels and tiles;
 *    what remains comes from the caller (sizes documented below).
 *  - Shapes are written above each function with the letters used across
 *    dlm: N rows (= B*T tokens), C model dim, O/I out/in features, V vocab,
 *    NH/KVH heads, HS head size, F ffn dim.
 *  - Every tuned kernel has a plain-loop `_ref` twin in kern_ref.c that the
 *    tests compare against. */
#ifndef DLM_KERN_H
#define DLM_KERN_H

#include <stddef.h>
#include <stdint.h>
#include "kern/dtype.h"

/* ---- thread pool ----------------------------------------------------------
 * A persistent pool. kern_init(n) (n <= 0: all cores) may be called again to
 * resize; it returns -1 if it could not start all threads (it then runs with
 * fewer). Without kern_init the first kernel call makes a 1-thread pool.
 * kern_parallel_for splits [0, n) into contiguous chunks (about 4 per
 * thread) that the threads, the caller's included, take one at a time, and
 * returns when all are done; a descheduled thread delays only its current
 * chunk. fn must make each index's result independent of the chunking and
 * of the thread. Idle threads spin 50 µs, then sleep (no CPU when idle).
 * One thread drives the pool at a time; nested calls run inline. */
int kern_init(int nthreads);
int kern_threads(void);
void kern_shutdown(void);
typedef void (*kern_range_fn)(void *ctx, int64_t begin, int64_t end);
void kern_parallel_for(int64_t n, kern_range_fn fn, void *ctx);
/* Denormals. Flush-to-zero and denormals-are-zero (MXCSR FTZ|DAZ) on the
 * calling thread until kern_fp_flush_leave(saved); the pool's workers run
 * each job in the mode of the thread that started it, so a result never
 * depends on which thread computed it. Softmax tails (exp of scores far
 * below the row max), their products in attention's backward, SiLU/GELU
 * tails and AdamW's second moment reach the denormal range, where x86
 * cores take microcode assists (Intel) or extra cycles (AMD) on every
 * operation; values below 2^-126 are then 0. docs/denormals.md. */
unsigned kern_fp_flush_enter(void);
void kern_fp_flush_leave(unsigned saved);

/* ---- conversions ---------------------------------------------------------- */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);          /* IEEE RNE, NaN → ±0x7E00 (ggml's rule) */
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);          /* RNE; NaN → (bits>>16)|64 (ggml's rule) */
/* (int8_t)v, the conversion ggml's quantizers apply to "x·id + 0.5"-style
 * values, without the undefined behaviour of converting NaN or an
 * out-of-range float: NaN → 0, saturating at −128 / 127. */
int kern_trunc_i8(float v);

/* x[i] = bf16_to_f32(f32_to_bf16(x[i])) in place, n floats: the value a
 * bf16 cast keeps (round-to-nearest-even, as torch's .to(torch.bfloat16);
 * ±Inf stay, a NaN stays NaN with f32_to_bf16's rule). Idempotent: a
 * value already in bf16 is kept exactly. */
void kern_round_bf16(float *x, int64_t n);

/* Dequantize n elements (a multiple of the block size) of type t. */
void kern_dequant_row(dtype t, const void *src, float *dst, int64_t n);
/* Quantize n elements with llama.cpp's reference algorithms (bit-exact with
 * quantize_row_*_ref; no imatrix). Supports F32 F16 BF16 Q4_0 Q5_0 Q8_0
 * Q4_K Q5_K Q6_K. Returns bytes written, 0 if t is unsupported. */
size_t kern_quant_row(dtype t, const float *src, void *dst, int64_t n);
/* The same with per-column importance qw[n] (an imatrix's in_sum2/counts,
 * the same for every row): llama.cpp's quantize_row_*_impl, bit-exact with
 * ggml_quantize_chunk given that imatrix (kern/quant_w.c). Q4_0 Q4_1 Q5_0
 * Q5_1 Q4_K Q5_K Q6_K use it; other types ignore it as ggml does. qw NULL:
 * kern_quant_row. */
size_t kern_quant_row_w(dtype t, const float *src, void *dst, int64_t n, const float *qw);

/* ---- matmul with a weight in its stored type -------------------------------
 * y[N,O] = x[N,I] · W[O,I]ᵀ (+ bias[O]); accumulate != 0 adds into y.
 * W: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K, I a multiple of
 * the block; any other W leaves y untouched. N < 4 takes a dot-product path
 * (results can differ in the last bits from the same rows in a larger N). */
void kern_matmul(float *y, const float *x, const wmat *W, const float *bias,
                 int64_t N, int accumulate);
/* One decode step's matmul, inference only: y[O] = x[I]·Wᵀ (+ bias) for a
 * single row x. For quantized weights (Q8_0 Q4_0 Q5_0 Q4_1 Q5_1 Q4_K Q5_K
 * Q6_K) on an AVX512-VNNI CPU, x is first rounded to int8 blocks the way
 * llama.cpp rounds activations (Q8_0/Q8_1 blocks for the 32-element
 * types, Q8_K for the K types) and the dots are integer (src/kern/qdot.c):
 * faster, and llama.cpp's numerics, not kern_matmul's. Anything else is
 * kern_matmul(y, x, W, bias, 1, 0). Training never calls it; not for use
 * inside a parallel job (x's int8 copy lives in the caller's scratch).
 * kern_set_int8_decode(0) (the command layer's DLM_DECODE=f32) forces
 * kern_matmul. */
void kern_matvec(float *y, const float *x, const wmat *W, const float *bias);
/* N decode steps at once (N rows of x, each a different sequence's one
 * new token; inference only): y[N,O] = x[N,I]·Wᵀ (+ bias) where row n of
 * y has exactly the bits kern_matvec gives for row n of x alone, while the
 * weight is read once for all N rows. N > KERN_MATVEC_MAX_N: kern_matmul.
 * Same scratch rule as kern_matvec. */
#define KERN_MATVEC_MAX_N 16
void kern_matvec_n(float *y, const float *x, const wmat *W, const float *bias, int64_t N);
/* A prompt's rows in inference (prefill): y[N,O] (+)= x[N,I]·Wᵀ (+ bias).
 * For quantized weights (the kern_matvec types) on a CPU with AVX512-VNNI
 * or AVX-VNNI, x is rounded to int8 as llama.cpp rounds it and the
 * products are integer (src/kern/qmm.c; llama.cpp's numerics, the same
 * bits on every back end and thread count); anything else, or
 * kern_set_int8_decode(0), is kern_matmul. Training never calls it; not
 * for use inside a parallel job (x's int8 copy lives in the caller's
 * scratch). */
void kern_matmul_infer(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate);
/* Whether one-row products on quantized weights use the integer dots (on,
 * the default, where the CPU has them) or the float path. */
void kern_set_int8_decode(int on);
/* dx[N,I] += dy[N,O] · W[O,I]   (input gradient through a frozen weight) */
void kern_matmul_dx(float *dx, const float *dy, const wmat *W, int64_t N);
/* Same with accumulate = 0: dx = dy·W (dx is not read; it may hold NaN). */
void kern_matmul_dx_to(float *dx, const float *dy, const wmat *W, int64_t N, int accumulate);
/* The same with a LoRA adapter's second product fused in as one more K
 * block (no extra pass over the output):
 *   kern_matmul_lora:    y (+)= x·Wᵀ (+ bias) + s·U·Bᵀ   U [N,r], B [O,r]
 *   kern_matmul_dx_lora: dx (+)= dy·W + dU·A              dU [N,r], A [r,I]
 * Bit-identical to the base call followed by kern_sgemm(0, 1, N, O, r, s,
 * U, r, B, r, 1, y, O) resp. kern_sgemm(0, 0, N, I, r, 1, dU, r, A, I, 1,
 * dx, I). r <= 256. */
void kern_matmul_lora(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate,
                      const float *U, const float *B, int r, float s);
void kern_matmul_dx_lora(float *dx, const float *dy, const wmat *W, int64_t N, int accumulate,
                         const float *dU, const float *A, int r);
/* bf16 training numerics (training.precision: bf16, docs/training.md):
 * while on, every GEMM above and below (kern_matmul*, kern_matmul_dx*,
 * kern_sgemm, the logits product of kern_head_xent) rounds both of its
 * inputs to bf16 where it packs them (kern_round_bf16: frozen weights,
 * activations, gradients flowing in, LoRA factors) and accumulates in f32;
 * the outputs stay f32. The dot-product path of small N and the narrow
 * LoRA shapes are bypassed so that every product sees rounded inputs.
 * Off (the default): the exact f32 path, bit for bit as before. Call it
 * from the thread that drives the kernels, between kernel calls; the
 * results stay bit-identical for any thread count. With AMX or
 * AVX512_BF16 the products run on the bf16 instructions (about twice the
 * f32 rate); elsewhere bf16 is emulated on the f32 FMA units (the speed of
 * f32, the numerics of bf16). */
void kern_set_bf16(int on);
/* The bf16 back end (src/kern/gemm_bf16.c): picked once from the CPU probe,
 * amx where the tiles are usable, avx512bf16 (VDPBF16PS) where the CPU has
 * AVX512_BF16, fma (f32 FMA on rounded inputs) elsewhere. Results are
 * deterministic within a back end; their last bits differ between them. */
typedef enum { KERN_BF16_FMA = 0, KERN_BF16_AVX512BF16 = 1, KERN_BF16_AMX = 2, KERN_BF16_AMX_MODEL = 3 } kern_bf16_be;
kern_bf16_be kern_bf16_backend(void);
const char *kern_bf16_backend_name(kern_bf16_be be);
/* 1 if back end be can run here (fma and amx-model everywhere). */
int kern_bf16_available(kern_bf16_be be);
/* Use back end `name` (fma, avx512bf16, amx, amx-model: the AMX kernel on
 * the C model of the tile unit, for tests) or, NULL, the picked one again.
 * -1: unknown name; -2: not on this CPU. Call between kernel calls. */
int kern_bf16_force(const char *name);
/* "avx512bf16 (vdpbf16ps)" */
void kern_bf16_describe(char *buf, int cap);
/* General f32 GEMM, row-major: C[M,N] = alpha·op(A)·op(B) + beta·C with
 * op(A) [M,K] (A is [K,M] when ta), op(B) [K,N] (B is [N,K] when tb).
 * Used for LoRA and weight gradients: dW[O,I] += dyᵀ·x is
 * kern_sgemm(1, 0, O, I, N, 1, dy, O, x, I, 1, dW, I). */
void kern_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb,
                float beta, float *C, int64_t ldc);

/* ---- elementwise and row ops ---------------------------------------------- */
/* y[N,C] = x · rsqrt(mean(x²) + eps) · w; rstd[N] saved for backward. */
void kern_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w,
                      int64_t N, int C, float eps);
/* y = x·rstd·w with the rstd of a forward: the same bits as that forward's
 * y (to recompute a normalised input instead of keeping it). */
void kern_rmsnorm_apply(float *y, const float *x, const float *w, const float *rstd, int64_t N, int C);
/* dx[N,C] = (overwrite) grad wrt x; dw[C] += grad wrt w (dw may be NULL). */
void kern_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x,
                      const float *w, const float *rstd, int64_t N, int C);
/* Same, adding the grad wrt x into dx (a residual stream's gradient). */
void kern_rmsnorm_bwd_add(float *dx, float *dw, const float *dy, const float *x,
                          const float *w, const float *rstd, int64_t N, int C);

/* HF rotate-half RoPE in place on x[N, H, HS] (row n at position pos[n]):
 * for j < HS/2, angle = pos·inv_freq[j],
 *   x'[j] = x[j]·cos − x[j+HS/2]·sin,  x'[j+HS/2] = x[j+HS/2]·cos + x[j]·sin.
 * inv_freq[HS/2] is double and the angle is computed in double, then cos
 * and sin are rounded to float, as the PyTorch reference does (an f32
 * inv_freq alone would move angles by ~1e-5 rad at position 500).
 * HS must be even and <= 1024 (otherwise x is left unchanged). */
void kern_rope_fwd(float *x, const int32_t *pos, int64_t N, int H, int HS, const double *inv_freq);
/* Backward = rotation by −angle, in place on the gradient. */
void kern_rope_bwd(float *dx, const int32_t *pos, int64_t N, int H, int HS, const double *inv_freq);
/* The same with the cos/sin computed once for all layers: cs, sn [N, HS/2]
 * from kern_rope_table hold exactly the floats kern_rope_fwd computes, and
 * kern_rope_fwd_t / _bwd_t give the same bits as kern_rope_fwd / _bwd. */
void kern_rope_table(float *cs, float *sn, const int32_t *pos, int64_t N, int HS, const double *inv_freq);
void kern_rope_fwd_t(float *x, const float *cs, const float *sn, int64_t N, int H, int HS);
void kern_rope_bwd_t(float *dx, const float *cs, const float *sn, int64_t N, int H, int HS);
/* Partial rotary (phi3): only the first RD of each head's HS dims rotate,
 * rotate-half within them (pairs i, i + RD/2); the table holds RD/2 per row. */
void kern_rope_fwd_tp(float *x, const float *cs, const float *sn, int64_t N, int H, int HS, int RD);
void kern_rope_bwd_tp(float *dx, const float *cs, const float *sn, int64_t N, int H, int HS, int RD);

/* h[n] = silu(g[n]) · u[n] */
void kern_swiglu_fwd(float *h, const float *g, const float *u, int64_t n);
void kern_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n);
/* h[n] = gelu_tanh(g[n]) · u[n] (gemma2's GeGLU; gelu.c) */
void kern_geglu_fwd(float *h, const float *g, const float *u, int64_t n);
void kern_geglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n);
/* x = cap·tanh(x/cap) in place; the backward scales dx by 1 − (y/cap)²,
 * y the capped values (gemma2's logit soft cap). */
void kern_softcap(float *x, int64_t n, float cap);
void kern_softcap_bwd(float *dx, const float *y, int64_t n, float cap);

/* ---- attention --------------------------------------------------------------
 * Causal GQA attention, softmax(q·kᵀ/sqrt(HS) + mask)·v, query head h uses
 * kv head h / (NH/KVH).
 *   q   [B, Tq, NH, HS]   rows contiguous
 *   k,v [B, Tk, KVH, HS]  batch stride kv_bstride floats (>= Tk*KVH*HS, so a
 *                         KV cache [Tmax, KVH, HS] can be passed directly)
 *   out [B, Tq, NH, HS]
 *   lse [B, NH, Tq]       log-sum-exp per query row (for backward; may be NULL
 *                         in inference)
 * Query i sits at key position q_off + i and sees keys j <= q_off + i. With
 * seg (segment ids [B, Tk], packing) it also sees only keys whose segment
 * equals its own (seg[b][q_off+i]). No T×T matrix is materialised: tiles
 * of 32 queries × 64 keys live in the pool's per-thread scratch.
 * kern_attn_scratch() is a token 16 floats (the forward needs none; scratch
 * may be NULL); kern_attn_bwd_scratch() is B·NH·Tq (+16) floats plus room
 * to keep the backward's dS tiles (at most ATTN_DS_MAX_FLOATS) and the
 * bf16 operands of kern_set_bf16 (about 2·B·NH·Tq·HS + B·KVH·Tk·HS); it grows
 * with B, Tq and Tk, so a scratch sized for the largest shape serves every
 * smaller one.
 * Limits: HS <= 512, NH % KVH == 0, q_off + Tq <= Tk; otherwise the forward
 * writes zeros and the backward does nothing. A decode step (Tq = 1,
 * q_off = Tk−1) gives exactly the last row of the full causal run. */
typedef struct attn_shape {
    int B, Tq, Tk, NH, KVH, HS;
    int q_off;
    int64_t kv_bstride;
    const int32_t *seg;
    int window;     /* sliding window: the query at position p sees key j only if p − j < window; 0 = none */
    /* gemma2: scores = softcap·tanh(scale·q·k / softcap); with either set
     * kern_attn_fwd/bwd run the plain-loop kern_attn_cap_* (attn_cap.c) */
    float scale;    /* 0 = 1/√HS */
    float softcap;  /* 0 = none */
    /* PaliGemma's prefix-LM: prefix[b] keys at positions < prefix[b] are
     * seen by every query at a position < prefix[b] (the image + prompt
     * block attends both ways; the rest stays causal). NULL = causal. The
     * tiled kernels extend each query's key range (attn_last_key); the
     * backward then recomputes dS in the dQ pass (no kept tiles). */
    const int32_t *prefix;
} attn_shape;
void kern_attn_cap_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const attn_shape *s);
void kern_attn_cap_bwd(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                       const float *q, const float *k, const float *v, const attn_shape *s);
size_t kern_attn_scratch(const attn_shape *s);
void kern_attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                   const attn_shape *s, float *scratch);
/* dq [B,Tq,NH,HS] overwritten; dk, dv [B,Tk,KVH,HS] overwritten (same batch
 * stride as k/v). Needs out and lse from the forward. */
size_t kern_attn_bwd_scratch(const attn_shape *s);
void kern_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *out,
                   const float *lse, const float *q, const float *k, const float *v,
                   const attn_shape *s, float *scratch);

/* ---- loss -------------------------------------------------------------------
 * Softmax cross-entropy over logits[N,V] with targets[N] (-1 = masked; any
 * target < 0 or >= V is treated as masked).
 * Writes nll[N] (0 for masked rows) and, if dlogits != NULL, the gradient
 * (softmax − onehot)·grad_scale for unmasked rows, 0 for masked rows
 * (dlogits may alias logits). Returns the sum of nll over unmasked rows,
 * summed in row order in double. */
double kern_xent(float *dlogits, float *nll, const float *logits, const int32_t *targets,
                 int64_t N, int V, float grad_scale);

/* ---- fused LM head + cross-entropy ------------------------------------------
 * logits = x[N,C]·W[V,C]ᵀ never materialised: for rows with targets[n] in
 * [0, V), nll[n] = logsumexp(logits_n) − logits_n[t], and if dx != NULL,
 * dx[n] = grad_scale·(softmax(logits_n) − onehot(t))·W (overwritten);
 * other rows get nll 0 and dx 0. W: any kern_matmul type. Returns Σ nll
 * over rows with a target (row order, double). scratch: at least
 * kern_head_xent_scratch(N, C) floats (8·min(N,512)·(C+2) + ...). W is read
 * once per 512 rows. Call it from outside parallel jobs (NaN otherwise). */
size_t kern_head_xent_scratch(int64_t N, int C);
double kern_head_xent(float *dx, float *nll, const float *x, const wmat *W, const int32_t *targets,
                      int64_t N, float grad_scale, float *scratch);

/* ---- dropout ------------------------------------------------------------------
 * keep[n bits, LSB first]: bit i set iff rng_uniform(seed, purpose, step, i)
 * >= p (util/rng.h, Philox-4x32-10; the same draws bit for bit, vectorized
 * 16 or 8 at a time). keep holds (n + 7) / 8 bytes.
 * dst[i] = keep bit i ? src[i]·scale : 0 (dst may alias src). */
void kern_dropout_mask(uint8_t *keep, int64_t n, float p, uint64_t seed, uint32_t purpose, uint64_t step);
void kern_dropout_apply(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale);
/* dst[i] += keep bit i ? src[i]·scale : 0: the same bits as kern_dropout_apply
 * into a buffer and then dst[i] += it, in one pass (dropout's backward). */
void kern_dropout_add(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale);

/* ---- optimizer --------------------------------------------------------------
 * torch.optim.AdamW on n params, step t >= 1:
 *   m = b1·m + (1−b1)·g;  v = b2·v + (1−b2)·g²;  p −= lr·wd·p;
 *   p −= lr/(1−b1^t) · m / (sqrt(v)/sqrt(1−b2^t) + eps)
 * The hyper-parameters are double, as torch's Python floats are: 1−b2 from
 * a float 0.999f would be off by 1.3e-5 relative. Scalars are derived in
 * double and rounded to float once, as torch does. */
void kern_adamw(float *p, const float *g, float *m, float *v, int64_t n,
                double lr, double b1, double b2, double eps, double wd, int64_t t);

/* ---- 8-bit AdamW (Dettmers et al., arXiv 2110.02861; bitsandbytes) ---------
 * Block-wise dynamic quantization: a tensor is cut into blocks of
 * KERN_Q8_BLOCK values from its start (the paper's B = 2048); a block keeps
 * absmax = max|x| (f32) and one code per value, the index of the value of
 * the dynamic map nearest to x/absmax (the paper's N_b = max|T_b|,
 * T^Q = argmin_j |Q_j − T/N_b|; a block of zeros: absmax 0, the code of 0).
 * kern_q8_map(1) is the signed map (first moment), (0) the unsigned one
 * (second moment): 256 ascending floats in [−1, 1] / [0, 1].
 *
 * kern_adamw8, per block, as bitsandbytes' blockwise 2-state kernel:
 *   m = map1[c1]·absmax1;  v = map2[c2]·absmax2         (dequantize)
 *   m = m·b1 + (1−b1)·g;   v = v·b2 + ((1−b2)·g)·g       (f32)
 *   absmax1 = max|m|, absmax2 = max|v| over the block
 *   p = p + step_size·(m / (sqrt(v) + eps·c2));  p = p·(1 − lr·wd)
 *   c1, c2 = nearest codes of m/absmax1, v/absmax2        (requantize)
 * with c1 = 1 − b1^t, c2 = sqrt(1 − b2^t), step_size = −lr·c2/c1 (scalars in
 * double, rounded to f32 once: kern_adamw_bnb_scalars). The update uses the
 * f32 moments of this step; quantization error enters from the next one.
 * Weight decay comes after the update, as in bitsandbytes (torch.AdamW
 * decays first). kern_adamw32_bnb is the same update with f32 moments: the
 * tensors bitsandbytes keeps in 32 bits (fewer than 4096 values).
 * Blocks are independent, so the bytes do not depend on the thread count. */
#define KERN_Q8_BLOCK 2048
typedef struct kern_adamw_bnb {
    float b1, omb1, b2, omb2, step_size, eps_c2, decay;
} kern_adamw_bnb;
void kern_adamw_bnb_scalars(kern_adamw_bnb *s, double lr, double b1, double b2, double eps, double wd, int64_t t);
const float *kern_q8_map(int is_signed);
uint8_t kern_q8_zero_code(int is_signed);
/* nearest code of x (already divided by absmax); ties to the lower code;
 * signed: a negative x never takes the code of 0 (it takes the next lower) */
uint8_t kern_q8_encode(const float *map, int is_signed, float x);
/* absmax[ceil(n / KERN_Q8_BLOCK)] */
void kern_q8_quantize(uint8_t *codes, float *absmax, const float *x, int64_t n, int is_signed);
void kern_q8_dequantize(float *x, const uint8_t *codes, const float *absmax, int64_t n, int is_signed);
void kern_adamw8(float *p, const float *g, uint8_t *c1, uint8_t *c2, float *absmax1, float *absmax2, int64_t n,
                 const kern_adamw_bnb *s);
void kern_adamw32_bnb(float *p, const float *g, float *m, float *v, int64_t n, const kern_adamw_bnb *s);

#endif
