/* Fuzz target: an --out-dir item, DIR/KEY.npy beside DIR/KEY.json (lib/npy_item.h), as
 * the npy-dir importer and vtr-aggregate read it. The input is a multi-file input
 * (fuzz_util.h): the bytes before the first "%%file " line are item.npy, an
 * "%%file item.json" part its metadata. A failure must come with one line (lib/error.h) and
 * leave nothing; a success gives a JSON object and an array inside the mapped file (ASan
 * reads every byte). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/npy_item.h"

static volatile unsigned sink; /* keeps the reads of the data */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_scratch();
    fuzz_write_files(data, size, "item.npy");
    char *path = fuzz_path("item.npy");
    vtr_npy_file f;
    json_t *meta = NULL;
    vtr_error err;
    if (vtr_npy_item_load(path, &f, &meta, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (meta || f.map.data || f.tensor.data)
            abort();
    } else {
        if (!json_is_object(meta))
            abort();
        const unsigned char *p = f.tensor.data, *start = f.map.data;
        size_t n = vtr_tensor_nbytes(&f.tensor);
        if (n && (p < start || p + n > start + f.map.size))
            abort();
        unsigned sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += p[i];
        sink = sum;
        json_decref(meta);
        vtr_npy_close(&f);
    }
    free(path);
    return 0;
}
