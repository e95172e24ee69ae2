/* mrope — Qwen2-VL's M-RoPE positions and tables (vision/mrope.h). */
#include "vision/mrope.h"

#include "kern/kern.h"

int qwen2vl_rope_index(const int32_t *ids, int64_t n, int32_t image_token, const int (*grid)[3], int n_images, int merge,
                       int32_t *pos, int64_t *delta, dlm_err *e)
{
    int64_t p = 0, mx = -1;
    int img = 0;
    for (int64_t i = 0; i < n;) {
        if (ids[i] != image_token) {
            for (int s = 0; s < 3; s++) pos[s * n + i] = (int32_t)p;
            if (p > mx) mx = p;
            p++;
            i++;
            continue;
        }
        int64_t run = 0;
        while (i + run < n && ids[i + run] == image_token) run++;
        if (img >= n_images)
            return err_set(e, "ImageError", "the prompt has more image-token runs than the %d image(s) given", n_images);
        int gt = grid[img][0], gh = grid[img][1] / merge, gw = grid[img][2] / merge;
        if ((int64_t)gt * gh * gw != run)
            return err_set(e, "ImageError", "image %d has %lld image tokens, its grid (%d, %d, %d) needs %lld", img + 1,
                           (long long)run, grid[img][0], grid[img][1], grid[img][2], (long long)gt * gh * gw);
        int64_t k = i;
        for (int t = 0; t < gt; t++)
            for (int h = 0; h < gh; h++)
                for (int w = 0; w < gw; w++, k++) {
                    pos[k] = (int32_t)(p + t);
                    pos[n + k] = (int32_t)(p + h);
                    pos[2 * n + k] = (int32_t)(p + w);
                    int64_t m3 = p + (t > h ? (t > w ? t : w) : (h > w ? h : w));
                    if (m3 > mx) mx = m3;
                }
        p += gh > gw ? gh : gw;
        i += run;
        img++;
    }
    if (img != n_images)
        return err_set(e, "ImageError", "%d image(s) given, the prompt has image tokens for %d", n_images, img);
    *delta = mx + 1 - n;
    return 0;
}

int qwen2vl_mrope_table(float *cs, float *sn, const int32_t *pos, int64_t N, int HS, const double *inv_freq,
                        const int sections[3], dlm_err *e)
{
    int half = HS / 2;
    if (HS % 2 || sections[0] < 0 || sections[1] < 0 || sections[2] < 0 ||
        sections[0] + sections[1] + sections[2] != half)
        return err_set(e, "ConfigError", "mrope_section [%d, %d, %d] does not sum to head_dim/2 = %d", sections[0],
                       sections[1], sections[2], half);
    /* column j of row r rotates by stream s(j)'s position: kern_rope_table
     * on the section's columns alone (its frequencies from inv_freq + j0)
     * gives the bits of the whole table's column, without a scratch table
     * (the decoder calls this every pass) */
    for (int64_t r = 0; r < N; r++)
        for (int s = 0, j0 = 0; s < 3; j0 += sections[s], s++)
            if (sections[s])
                kern_rope_table(cs + r * half + j0, sn + r * half + j0, pos + (int64_t)s * N + r, 1, 2 * sections[s],
                                inv_freq + j0);
    return 0;
}
