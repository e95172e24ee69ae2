/* libFuzzer target: a version's adapter_config.json (PEFT's LoRA config,
 * read by prompt, export and --resume of a version). */
#include <stddef.h>
#include <stdint.h>
#include "adapter/adapter.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char p[4300], dir[4300];
    if (fuzz_put("ad/adapter_config.json", data, size, p, sizeof p)) return 0;
    fs_dirname(dir, sizeof dir, p);
    lora_config c;
    dlm_err e;
    (void)adapter_read_config(dir, &c, &e);
    return 0;
}
