/* libFuzzer target: the HTTP API's request parser (chat and completion
 * bodies), including the error object it builds for rejected input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "api/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int k = 0; k < 2; k++) {
        api_request r;
        api_error err;
        if (api_request_parse(k ? API_COMPLETION : API_CHAT, (const char *)data, size, &r, &err)) {
            json_t *j = api_error_json(&err);
            json_decref(j);
            continue;
        }
        for (size_t i = 0; i < r.n_msgs; i++) (void)strlen(r.msgs[i].content);
        api_request_free(&r);
    }
    return 0;
}
