/* libFuzzer target: util/cbor's reader (the original's replay records come
 * from packs, i.e. from other people). Input: one CBOR item. Decoded items
 * are written back out as JSON to touch every value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "util/cbor.h"
#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o;
    dlm_err e;
    if (cbor_to_json(data, size, &o, &e)) return 0;
    strbuf sb = STRBUF_INIT;
    json_write(&sb, o, JW_SORT);
    sb_free(&sb);
    json_decref(o);
    return 0;
}
