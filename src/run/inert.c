/* inert — see inert.h. */
#include "run/inert.h"

#include <stdio.h>
#include <string.h>

int run_inert_notes(const doc_training *t, inert_note_fn fn, void *ctx)
{
    doc_training d;
    doc_training_defaults(&d);
    int n = 0;
    char buf[512];
#define NOTE(...) do { snprintf(buf, sizeof buf, __VA_ARGS__); fn(ctx, buf); n++; } while (0)
    if (t->optimizer != d.optimizer)
        NOTE("training.optimizer: %s is not implemented yet; dlm trains with adamw_torch (32-bit moments, %s more "
             "optimizer memory than 8-bit)", doc_optimizer_names[t->optimizer], "4x");
    if (t->precision != d.precision)
        NOTE("training.precision: %s is not used yet; dlm trains LoRA weights in fp32 on the CPU",
             doc_precision_names[t->precision]);
    if (t->gate.enabled != d.gate.enabled)
        NOTE("training.gate: the adapter gate is not implemented yet; no gate is trained");
    if (t->audio.auto_resample != d.audio.auto_resample)
        NOTE("training.audio: audio sections are not trained (dlm trains text bases only)");
#undef NOTE
    return n;
}
