/* The record stream between stages (spec: docs/record-stream.md).
 *
 * A stream is a sequence of records, one per item: a fixed 24-byte header (magic "VTRR",
 * format version, lengths), the item key (UTF-8), a JSON object of metadata, and one
 * array serialized as NPY. Readers work on pipes (no seeking) in constant memory per
 * record: one record's buffers are reused for the next.
 */
#ifndef VTR_RECORD_H
#define VTR_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "error.h"
#include "tensor.h"

#define VTR_RECORD_VERSION 1
#define VTR_RECORD_MAX_KEY 4096                   /* bytes */
#define VTR_RECORD_MAX_META (16u << 20)           /* bytes of JSON */
#define VTR_RECORD_MAX_PAYLOAD ((size_t)1 << 36)  /* 64 GiB of NPY */

/* Whether key can be a record's key: non-empty, at most VTR_RECORD_MAX_KEY bytes, valid
 * UTF-8 (a C string holds no NUL). VTR_ERR_INVALID "record key 'KEY' is not valid UTF-8"
 * (KEY escaped) otherwise. */
vtr_status vtr_record_key_check(const char *key, vtr_error *err);

/* Writes one record. meta must be a JSON object (NULL writes {}); the key must pass
 * vtr_record_key_check. The record is written with one buffered write sequence; `what`
 * names the destination ("stdout", a path) in errors. VTR_ERR_INVALID (a key, metadata
 * or array that cannot be a record) is returned before anything is written, so the
 * stream stays usable; any other failure may leave a partial record. */
vtr_status vtr_record_write(FILE *out, const char *key, const json_t *meta,
                            const vtr_tensor *array, const char *what, vtr_error *err);

/* One record as read. Everything is owned by the reader and valid until the next
 * vtr_record_read on the same reader or vtr_record_reader_free. */
typedef struct vtr_record {
    const char *key;
    json_t *meta;      /* a JSON object; borrowed */
    vtr_tensor array;  /* data points into the reader's buffer */
} vtr_record;

typedef struct vtr_record_reader vtr_record_reader;

/* Reads records from `in` (not owned); `name` ("stdin", a path) prefixes errors.
 * Returns NULL only when out of memory. */
vtr_record_reader *vtr_record_reader_new(FILE *in, const char *name);
void vtr_record_reader_free(vtr_record_reader *reader);

/* Reads the next record into rec. At a clean end of stream returns VTR_OK with
 * *got = false. A truncated record, bad magic, unknown version, malformed key, metadata
 * or array is VTR_ERR_FORMAT (or VTR_ERR_UNSUPPORTED for a newer version); the stream
 * cannot continue after an error. */
vtr_status vtr_record_read(vtr_record_reader *reader, vtr_record *rec, bool *got,
                           vtr_error *err);

#endif
