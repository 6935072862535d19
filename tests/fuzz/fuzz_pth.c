/* Fuzz target: the torch.save reader (lib/pth.h, lib/zip.h) on arbitrary bytes. Entries
 * are stored and carry no checked CRC, so mutations inside data.pkl keep the archive
 * whole and reach the pickle interpreter. On success every byte of every tensor is read
 * (ASan catches a view past its storage or the input), every name is non-empty UTF-8,
 * sorted, unique and found; on failure the message is one line and the table is left
 * zeroed. Seeds: real torch.save files (tests/interop/make_fuzz_corpus.py pth). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/pth.h"

static volatile unsigned sink; /* keeps the reads of the data */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_safetensors st;
    vtr_error err;
    if (vtr_pth_parse(data, size, &st, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (st.count || st.entries || st.metadata)
            abort();
        return 0;
    }
    unsigned sum = 0;
    for (size_t i = 0; i < st.count; i++) {
        const char *name = st.entries[i].name;
        const vtr_tensor *t = &st.entries[i].tensor;
        const unsigned char *p = t->data;
        size_t n = vtr_tensor_nbytes(t);
        if (!name[0] || (i > 0 && strcmp(st.entries[i - 1].name, name) >= 0))
            abort();
        fuzz_check_utf8(name, strlen(name));
        if (n && (p < data || n > size || p + n > data + size))
            abort();
        for (size_t k = 0; k < n; k++)
            sum += p[k];
        if (vtr_safetensors_find(&st, name) != t)
            abort();
    }
    sink = sum;
    vtr_safetensors_close(&st);
    return 0;
}
