/* Fuzz target: the record stream reader on arbitrary bytes. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>

#include "lib/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    FILE *fp = fmemopen((void *)data, size, "rb");
    if (!fp)
        return 0;
    vtr_record_reader *r = vtr_record_reader_new(fp, "fuzz");
    volatile unsigned sum = 0;
    for (;;) {
        vtr_record rec;
        bool got;
        vtr_error err;
        if (vtr_record_read(r, &rec, &got, &err) != VTR_OK || !got)
            break;
        const unsigned char *p = rec.array.data;
        size_t n = vtr_tensor_nbytes(&rec.array);
        for (size_t i = 0; i < n; i++)
            sum += p[i];
        sum += (unsigned)rec.key[0];
    }
    vtr_record_reader_free(r);
    fclose(fp);
    return 0;
}
