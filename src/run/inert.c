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
    /* adamw_bnb_8bit trains as written (grad/optim8.h); paged_adamw_8bit
     * is the same optimizer, and what "paged" adds does not exist here */
    if (t->optimizer == DOC_OPT_PAGED_ADAMW_8BIT)
        NOTE("training.optimizer: paged_adamw_8bit trains as adamw_bnb_8bit (the same 8-bit block-wise AdamW): "
             "paging moves optimizer state between GPU and host memory, and dlm trains on the CPU");
    /* training.precision is honoured (run/precision.h): no note */
    /* gate keys set while the gate is off would otherwise be accepted and
     * ignored (hidden_proj_dim, steps, lr, ...) */
    if (!t->gate.enabled &&
        (t->gate.hidden_proj_dim != d.gate.hidden_proj_dim || t->gate.steps != d.gate.steps ||
         t->gate.cold_start_floor != d.gate.cold_start_floor || t->gate.lr != d.gate.lr ||
         t->gate.entropy_lambda != d.gate.entropy_lambda))
        NOTE("training.gate: keys are set but training.gate.enabled is false; no gate is trained");
    /* training.audio.auto_resample acts: media/ingest_audio.c resamples
     * clips whose rate is not the base's instead of refusing them */
#undef NOTE
    return n;
}
