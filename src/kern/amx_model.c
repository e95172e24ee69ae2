/* amx_model — see amx_model.h. Plain loops over the tile bytes, no
 * intrinsics: it runs on any CPU. */
#include "kern/amx_model.h"

#include <string.h>

#include "kern/bf16_model.h"

typedef struct amx_state {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
    int fault;
} amx_state;

static _Thread_local amx_state g_st;

static int tile_ok(int t) { return g_st.configured && t >= 0 && t < 8 && g_st.rows[t] && g_st.colsb[t]; }

void amxm_ldtilecfg(const amx_tilecfg *cfg)
{
    memset(&g_st.t, 0, sizeof g_st.t);
    if (cfg->palette_id == 0) {
        g_st.configured = 0;
        return;
    }
    if (cfg->palette_id != 1) {
        g_st.fault = 1;
        return;
    }
    g_st.configured = 1;
    for (int i = 0; i < 8; i++) {
        if (cfg->rows[i] > 16 || cfg->colsb[i] > 64 || (cfg->colsb[i] & 3)) g_st.fault = 1;
        g_st.rows[i] = cfg->rows[i] > 16 ? 16 : cfg->rows[i];
        g_st.colsb[i] = cfg->colsb[i] > 64 ? 64 : cfg->colsb[i];
    }
}

void amxm_tilerelease(void)
{
    memset(&g_st.t, 0, sizeof g_st.t);
    g_st.configured = 0;
}

void amxm_tilezero(int t)
{
    if (!tile_ok(t)) { g_st.fault = 1; return; }
    memset(g_st.t[t], 0, sizeof g_st.t[t]);
}

void amxm_tileloadd(int t, const void *base, int64_t stride)
{
    if (!tile_ok(t)) { g_st.fault = 1; return; }
    memset(g_st.t[t], 0, sizeof g_st.t[t]);
    for (int r = 0; r < g_st.rows[t]; r++)
        memcpy(g_st.t[t][r], (const uint8_t *)base + r * stride, g_st.colsb[t]);
}

void amxm_tilestored(int t, void *base, int64_t stride)
{
    if (!tile_ok(t)) { g_st.fault = 1; return; }
    for (int r = 0; r < g_st.rows[t]; r++) memcpy((uint8_t *)base + r * stride, g_st.t[t][r], g_st.colsb[t]);
}

static uint32_t dw(int t, int r, int i)
{
    uint32_t v;
    memcpy(&v, &g_st.t[t][r][4 * i], 4);
    return v;
}

/* The SDM's shape rules shared by both dot products: C is M×N dwords, A is
 * M×K dwords, B is K×N dwords. */
static int dp_shape_ok(int c, int a, int b)
{
    if (!tile_ok(c) || !tile_ok(a) || !tile_ok(b) || c == a || c == b || a == b) return 0;
    return g_st.rows[c] == g_st.rows[a] && g_st.colsb[a] / 4 == g_st.rows[b] && g_st.colsb[c] == g_st.colsb[b];
}

void amxm_tdpbf16ps(int c, int a, int b)
{
    if (!dp_shape_ok(c, a, b)) { g_st.fault = 1; return; }
    const int M = g_st.rows[c], N = g_st.colsb[c] / 4, K = g_st.colsb[a] / 4;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                float acc;
                memcpy(&acc, &g_st.t[c][m][4 * n], 4);
                acc = bf16m_tdp(acc, dw(a, m, k), dw(b, k, n));
                memcpy(&g_st.t[c][m][4 * n], &acc, 4);
            }
}

/* The int8 dots: dword (m, n) of C += the four byte products of A's dword
 * (m, k) and B's dword (k, n) over k. bf16m_tdpbusd takes the unsigned
 * bytes first; `commute` swaps the operands for TDPBSUD (signed A). */
static void dp_i8(int c, int a, int b, int commute)
{
    if (!dp_shape_ok(c, a, b)) { g_st.fault = 1; return; }
    const int M = g_st.rows[c], N = g_st.colsb[c] / 4, K = g_st.colsb[a] / 4;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                int32_t acc;
                memcpy(&acc, &g_st.t[c][m][4 * n], 4);
                uint32_t x = dw(a, m, k), y = dw(b, k, n);
                acc = commute ? bf16m_tdpbusd(acc, y, x) : bf16m_tdpbusd(acc, x, y);
                memcpy(&g_st.t[c][m][4 * n], &acc, 4);
            }
}

/* TDPBUSD: unsigned bytes of A times signed bytes of B. */
void amxm_tdpbusd(int c, int a, int b) { dp_i8(c, a, b, 0); }

/* TDPBSUD: signed bytes of A times unsigned bytes of B (the int8
 * prefill's x rows against its u8 weight panel, qmm_amx.inc). */
void amxm_tdpbsud(int c, int a, int b) { dp_i8(c, a, b, 1); }

int amxm_fault(void) { return g_st.fault; }
void amxm_fault_clear(void) { g_st.fault = 0; }
