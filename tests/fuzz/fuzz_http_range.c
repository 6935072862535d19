/* Fuzz target: vtr-serve's Range header parser (index/http_range.h) on arbitrary header
 * text against file sizes taken from the input: a partial range must lie inside the
 * file and hold at least one byte; no range means the whole file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "index/http_range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t raw;
    memcpy(&raw, data, sizeof raw);
    char *header = malloc(size - 8 + 1);
    if (!header)
        return 0;
    memcpy(header, data + 8, size - 8);
    header[size - 8] = '\0';
    const int64_t sizes[] = {0, 1, 100, (int64_t)(raw >> 1)};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int64_t n = sizes[i], start, length;
        vtr_http_range_kind k = vtr_http_range_parse(header, n, &start, &length);
        if (k == VTR_RANGE_PARTIAL &&
            !(start >= 0 && length >= 1 && start < n && length <= n - start))
            abort();
        if (k == VTR_RANGE_NONE && !(start == 0 && length == n))
            abort();
        if (k != VTR_RANGE_NONE && k != VTR_RANGE_PARTIAL && k != VTR_RANGE_UNSATISFIABLE)
            abort();
    }
    free(header);
    return 0;
}
