/* amx_model — a C model of the AMX tile unit (Intel SDM vol. 2, "Intel AMX
 * instructions"; palette 1): eight tiles of up to 16 rows × 64 bytes, a
 * tile configuration, and the instructions the tile kernels use:
 *
 *   amxm_ldtilecfg   LDTILECFG: palette 1 (0 releases), per-tile rows and
 *                    bytes per row; the tiles become zero;
 *   amxm_tileloadd   TILELOADD: rows[t] rows of colsb[t] bytes, `stride`
 *                    bytes apart; the rest of the tile zero;
 *   amxm_tilestored  TILESTORED: the configured part back to memory;
 *   amxm_tilezero    TILEZERO;
 *   amxm_tdpbf16ps   TDPBF16PS: C[m][n] += Σ_k A[m].bf16[2k]·B[k].bf16[2n]
 *                    + A[m].bf16[2k+1]·B[k].bf16[2n+1], per k in order,
 *                    even then odd, each an fp32 FMA with DAZ in, FTZ out,
 *                    RNE (bf16_model.h: bf16m_tdp);
 *   amxm_tdpbusd     TDPBUSD: C[m][n] += Σ over 4 bytes of u8(A)·s8(B),
 *                    int32 wrap-around;
 *   amxm_tdpbsud     TDPBSUD: the same with s8(A)·u8(B) (qmm_amx.inc);
 *   amxm_tilerelease TILERELEASE.
 * Each thread has its own tile state (as each hardware thread does). A
 * shape the hardware would #UD on (more rows or bytes than configured,
 * mismatched K) sets amxm_fault() instead, which the tests check is 0.
 * gemm_amx.c compiles the same kernel source (gemm_amx.inc) against these
 * functions and against the real intrinsics. */
#ifndef DLM_AMX_MODEL_H
#define DLM_AMX_MODEL_H

#include <stdint.h>

/* The 64-byte LDTILECFG operand (palette 1). */
typedef struct amx_tilecfg {
    uint8_t palette_id, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

void amxm_ldtilecfg(const amx_tilecfg *cfg);
void amxm_tilerelease(void);
void amxm_tilezero(int t);
void amxm_tileloadd(int t, const void *base, int64_t stride);
void amxm_tilestored(int t, void *base, int64_t stride);
void amxm_tdpbf16ps(int c, int a, int b);
void amxm_tdpbusd(int c, int a, int b);
void amxm_tdpbsud(int c, int a, int b);     /* s8(A) · u8(B), else as TDPBUSD */
/* Non-zero once an instruction met a shape the hardware refuses. */
int amxm_fault(void);
void amxm_fault_clear(void);

#endif
