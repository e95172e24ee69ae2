#include "util/ulid.h"

#include <string.h>
#include <sodium.h>
#include "util/timeutil.h"

static const char ALPHA[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

void ulid_make(uint64_t ms, const unsigned char *random80, char out[27])
{
    unsigned char b[16];
    for (int i = 0; i < 6; i++) b[i] = (unsigned char)(ms >> (40 - 8 * i));
    if (random80) memcpy(b + 6, random80, 10);
    else randombytes_buf(b + 6, 10);
    /* 128 bits → 26 chars of 5 bits, the first char holding the top 3 bits. */
    int bit = -2; /* 130 bits of output; the first 2 are zero padding */
    for (int i = 0; i < 26; i++) {
        int v = 0;
        for (int k = 0; k < 5; k++, bit++) {
            v <<= 1;
            if (bit >= 0) v |= (b[bit / 8] >> (7 - bit % 8)) & 1;
        }
        out[i] = ALPHA[v];
    }
    out[26] = 0;
}

void ulid_new(char out[27]) { ulid_make(time_ms(), NULL, out); }

int ulid_valid(const char *s)
{
    if (strlen(s) != 26) return 0;
    for (int i = 0; i < 26; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) return 0;
        if (c == 'I' || c == 'L' || c == 'O' || c == 'U') return 0;
    }
    return 1;
}
