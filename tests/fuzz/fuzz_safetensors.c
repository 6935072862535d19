/* Fuzz target: the safetensors parser on arbitrary bytes. On success every byte of every
 * tensor is read (ASan catches offsets past the input), every tensor is found by name,
 * every metadata value by key, and the file is written back and parsed again, which must
 * give the same names, dtypes, shapes, bytes and metadata. A failure must come with a
 * one-line ASCII message. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/safetensors.h"

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

static int same_tensor(const vtr_tensor *a, const vtr_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
           memcmp(a->data, b->data, vtr_tensor_nbytes(a)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_safetensors st;
    vtr_error err;
    if (vtr_safetensors_parse(data, size, &st, &err) != VTR_OK) {
        check_message(&err);
        if (st.count || st.entries || st.metadata)
            abort();
        return 0;
    }
    unsigned sum = 0;
    const char **names = calloc(st.count + 1, sizeof *names);
    vtr_tensor *tensors = calloc(st.count + 1, sizeof *tensors);
    if (!names || !tensors)
        abort();
    for (size_t i = 0; i < st.count; i++) {
        const vtr_tensor *t = &st.entries[i].tensor;
        const unsigned char *p = t->data;
        size_t n = vtr_tensor_nbytes(t);
        if (p < data || n > size || p + n > data + size)
            abort();
        for (size_t k = 0; k < n; k++)
            sum += p[k];
        if (vtr_safetensors_find(&st, st.entries[i].name) != t)
            abort();
        names[i] = st.entries[i].name;
        tensors[i] = *t;
    }
    sink = sum;
    const char *key;
    json_t *value;
    json_object_foreach(st.metadata, key, value) {
        if (vtr_safetensors_meta(&st, key) != json_string_value(value))
            abort();
    }

    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp)
        abort();
    if (vtr_safetensors_write_stream(fp, st.count, names, tensors, st.metadata, "memory",
                                     &err) != VTR_OK)
        abort();
    fclose(fp);
    vtr_safetensors back;
    if (vtr_safetensors_parse(buf, len, &back, &err) != VTR_OK || back.count != st.count)
        abort();
    for (size_t i = 0; i < st.count; i++)
        if (strcmp(back.entries[i].name, st.entries[i].name) != 0 ||
            !same_tensor(&back.entries[i].tensor, &st.entries[i].tensor))
            abort();
    if (!json_equal(back.metadata, st.metadata) && (back.metadata || st.metadata))
        abort();
    vtr_safetensors_close(&back);
    free(buf);
    free(names);
    free(tensors);
    vtr_safetensors_close(&st);
    return 0;
}
