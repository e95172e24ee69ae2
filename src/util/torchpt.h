/* torchpt — writing a file torch.load reads: PyTorch's zip + pickle layout
 * (torch.save since 1.6, `_use_new_zipfile_serialization`), for the
 * original DocumentLanguageModel's training_state.pt sidecar.
 *
 * The pickle (protocol 2, as torch.save writes it) holds what
 * torch.load(weights_only=True) accepts: dicts, lists, tuples, ints,
 * floats, strings, booleans, None and tensors. A tensor is
 * torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False,
 * OrderedDict()), its storage a persistent id ('storage', torch.FloatStorage
 * | LongStorage | ByteStorage, 'N', 'cpu', numel) whose bytes are the zip
 * entry archive/data/N (little-endian, contiguous, row-major).
 *
 * The zip is the one PyTorchStreamWriter (miniz) writes: stored entries in
 * the order archive/data.pkl, .format_version ("1"), .storage_alignment
 * ("64"), byteorder ("little"), data/0..N-1, version ("3\n"),
 * .data/serialization_id; every entry's bytes start at a multiple of 64 (a
 * local "FB" extra field of 'Z' padding), sizes and CRC-32 in a data
 * descriptor after the bytes, a zip64 end record and locator before the
 * end of the central directory. Only the serialization id differs from a
 * torch.save of the same values: torch draws it at random, here it is a
 * function of the contents (same values → same bytes).
 *
 * Usage: tpt_init, then the value as a stream of calls (a container's
 * items between its _begin and _end; a dict's as key, value, key, value),
 * then tpt_finish. Tensor data is borrowed until tpt_finish. Allocation
 * failures are sticky: tpt_finish reports them. The opcodes are those
 * Python's pickler writes for the same values, less its memo (BINPUT /
 * BINGET, a size optimisation torch.load does not need). */
#ifndef DLM_TORCHPT_H
#define DLM_TORCHPT_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "util/str.h"

typedef enum { TPT_F32, TPT_I64, TPT_U8 } tpt_dtype;

typedef struct tpt_storage {
    tpt_dtype dtype;
    const void *data;
    size_t numel;
} tpt_storage;

typedef struct tpt {
    strbuf pkl;
    tpt_storage *st;
    int n_st, cap_st;
    /* open containers: where each one's MARK is and how many values it
     * holds, so that the end writes Python's shorter forms (an empty dict,
     * SETITEM for one pair, TUPLE1..3, ...) as pickle.dumps does */
    struct { size_t mark; int n; } open[16];
    int depth;
    int oom, bad;
} tpt;

void tpt_init(tpt *w);
void tpt_free(tpt *w);

void tpt_none(tpt *w);
void tpt_bool(tpt *w, int v);
void tpt_int(tpt *w, int64_t v);
void tpt_float(tpt *w, double v);
void tpt_str(tpt *w, const char *s);
/* dict / list / tuple: the items between begin and end */
void tpt_dict_begin(tpt *w);
void tpt_dict_end(tpt *w);
void tpt_list_begin(tpt *w);
void tpt_list_end(tpt *w);
void tpt_tuple_begin(tpt *w);
void tpt_tuple_end(tpt *w);
/* A contiguous tensor of shape[ndim] (ndim 0: a scalar, one value) over
 * data, borrowed until tpt_finish. */
void tpt_tensor(tpt *w, tpt_dtype dt, const void *data, int ndim, const int64_t *shape);

/* The whole file into out (appended). -1 with e set on allocation failure
 * or an unbalanced value. */
int tpt_finish(tpt *w, strbuf *out, dlm_err *e);

/* CRC-32 (zip's, IEEE 802.3 reflected), continued from crc (0 to start). */
uint32_t tpt_crc32(uint32_t crc, const void *p, size_t n);

#endif
