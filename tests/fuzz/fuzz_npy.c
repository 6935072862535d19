/* Fuzz target: the NPY parsers on arbitrary bytes. Numbers: on success every byte of the
 * array is read (ASan catches a data pointer or size past the input), and the array is
 * written back and parsed again, which must give the same dtype, shape and bytes. String
 * arrays: on success every string must be valid UTF-8 and non-empty. A failure must come
 * with a one-line ASCII message. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* keeps the reads of the data */

static void check_message(const vtr_error *err)
{
    if (!err->msg[0])
        abort();
    for (const char *c = err->msg; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            abort();
}

/* The string-array reader: what it returns is non-empty UTF-8, what it refuses leaves
 * *out zeroed. */
static void check_strings(const uint8_t *data, size_t size)
{
    vtr_npy_strings l;
    vtr_error err;
    if (vtr_npy_parse_strings(data, size, &l, &err) != VTR_OK) {
        check_message(&err);
        if (l.n != 0 || l.items || l.storage)
            abort();
        return;
    }
    for (size_t i = 0; i < l.n; i++) {
        size_t len = strlen(l.items[i]);
        if (len == 0)
            abort();
        json_t *s = json_stringn(l.items[i], len); /* jansson validates UTF-8 */
        if (!s)
            abort();
        json_decref(s);
    }
    vtr_npy_strings_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_tensor t;
    vtr_error err;
    check_strings(data, size);
    if (vtr_npy_parse(data, size, &t, &err) != VTR_OK) {
        check_message(&err);
        return 0;
    }
    const unsigned char *p = t.data;
    size_t n = vtr_tensor_nbytes(&t);
    if (p < data || p + n != data + size) /* the data is exactly the input's tail */
        abort();
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    sink = sum;

    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp)
        return 0;
    if (vtr_npy_write_stream(fp, &t, 0, "memory", &err) != VTR_OK)
        abort();
    fclose(fp);
    vtr_tensor back;
    if (len != vtr_npy_serialized_size(&t, 0) || vtr_npy_parse(buf, len, &back, &err) != VTR_OK)
        abort();
    if (back.dtype != t.dtype || back.ndim != t.ndim ||
        memcmp(back.shape, t.shape, sizeof t.shape) != 0 || memcmp(back.data, t.data, n) != 0)
        abort();
    free(buf);
    return 0;
}
