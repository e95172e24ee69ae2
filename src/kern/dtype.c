#include "kern/dtype.h"

#include <string.h>
#include <strings.h>

static const struct { dtype t; const char *name; size_t elems, bytes; } TYPES[] = {
    {DT_F32, "F32", 1, 4},      {DT_F16, "F16", 1, 2},      {DT_BF16, "BF16", 1, 2},
    {DT_Q4_0, "Q4_0", 32, 18},  {DT_Q4_1, "Q4_1", 32, 20},  {DT_Q5_0, "Q5_0", 32, 22},
    {DT_Q5_1, "Q5_1", 32, 24},  {DT_Q8_0, "Q8_0", 32, 34},  {DT_Q4_K, "Q4_K", 256, 144},
    {DT_Q5_K, "Q5_K", 256, 176}, {DT_Q6_K, "Q6_K", 256, 210},
};

static int find(dtype t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == t) return (int)i;
    return -1;
}

size_t dtype_block_elems(dtype t) { int i = find(t); return i < 0 ? 0 : TYPES[i].elems; }
size_t dtype_block_bytes(dtype t) { int i = find(t); return i < 0 ? 0 : TYPES[i].bytes; }
const char *dtype_name(dtype t) { int i = find(t); return i < 0 ? "?" : TYPES[i].name; }
int dtype_is_quant(dtype t) { return dtype_block_elems(t) > 1; }

size_t dtype_row_bytes(dtype t, int64_t n)
{
    size_t be = dtype_block_elems(t);
    if (!be || n < 0 || (uint64_t)n % be) return 0;
    return (size_t)((uint64_t)n / be) * dtype_block_bytes(t);
}

int dtype_from_name(const char *s, dtype *out)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (!strcasecmp(s, TYPES[i].name)) { *out = TYPES[i].t; return 0; }
    return -1;
}
