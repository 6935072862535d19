/* safetensors files: checkpoints and CNN weights (the format of Hugging Face's library).
 *
 * Layout: an 8-byte little-endian header size N, N bytes of a UTF-8 JSON object, then the
 * byte buffer. The object maps each tensor name to
 *     {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * (offsets relative to the buffer) and may hold "__metadata__", an object of strings.
 *
 * vtr reads and writes dtypes F32, F16, BF16, U8, I32 and I64; any other dtype is
 * VTR_ERR_UNSUPPORTED naming the tensor. Every header field is checked against the bytes
 * present: N at most VTR_SAFETENSORS_MAX_HEADER and within the file, names non-empty
 * valid UTF-8 and unique, shapes of at most VTR_MAX_DIMS non-negative dimensions,
 * begin <= end <= buffer size, end - begin equal to the dtype and shape's byte size, and
 * no two tensors sharing a byte. Gaps between tensors and unused bytes after the last are
 * accepted (the reference reader refuses them; vtr never writes them).
 *
 * Alignment: the format does not align tensors. vtr's writer (like the reference one)
 * puts every tensor at an offset that is a multiple of its element size in a buffer that
 * starts at a multiple of 8, so reading a file that vtr or the reference library wrote
 * gives tensors aligned for their dtype. Other files may hold tensors at any offset; the
 * reader accepts them and their data pointer may then be unaligned: code that cannot
 * know where a file came from checks ((uintptr_t)t->data % vtr_dtype_size(t->dtype))
 * or reads elements with memcpy.
 */
#ifndef VTR_SAFETENSORS_H
#define VTR_SAFETENSORS_H

#include <jansson.h>
#include <stdio.h>

#include "error.h"
#include "file.h"
#include "tensor.h"

/* The largest JSON header accepted or written, in bytes (the reference library's limit). */
#define VTR_SAFETENSORS_MAX_HEADER 100000000u

typedef struct vtr_safetensors_entry {
    char *name;        /* owned; NUL-terminated UTF-8 */
    vtr_tensor tensor; /* data points into the parsed buffer or the mapping; read-only */
} vtr_safetensors_entry;

typedef struct vtr_safetensors {
    vtr_mapped_file map;            /* the file (vtr_safetensors_open); empty after parse */
    size_t count;
    vtr_safetensors_entry *entries; /* sorted by name (strcmp order), not file order */
    json_t *metadata;               /* "__metadata__": an object of strings, or NULL */
} vtr_safetensors;

/* Parses a safetensors image held in memory. On success out holds the tensors, whose
 * data points into buf (no copy; buf must outlive out), and must be released with
 * vtr_safetensors_close. On failure out is zeroed. Malformed input is VTR_ERR_FORMAT,
 * an unknown dtype or more than VTR_MAX_DIMS dimensions VTR_ERR_UNSUPPORTED, each with a
 * message naming the tensor; VTR_ERR_NOMEM when out of memory. */
vtr_status vtr_safetensors_parse(const void *buf, size_t len, vtr_safetensors *out,
                                 vtr_error *err);

/* Maps path read-only and parses it as above; errors are prefixed with the path
 * (VTR_ERR_IO when it cannot be opened or mapped). */
vtr_status vtr_safetensors_open(const char *path, vtr_safetensors *out, vtr_error *err);

/* A parser of another format into the table (lib/pth.h), with vtr_safetensors_parse's
 * contract. */
typedef vtr_status (*vtr_safetensors_parser)(const void *buf, size_t len, vtr_safetensors *out,
                                             vtr_error *err);

/* vtr_safetensors_open with another parser: on success out->map holds the mapping. */
vtr_status vtr_safetensors_open_with(const char *path, vtr_safetensors_parser parse,
                                     vtr_safetensors *out, vtr_error *err);

/* The tensor called name, or NULL. Valid until vtr_safetensors_close. */
const vtr_tensor *vtr_safetensors_find(const vtr_safetensors *st, const char *name);

/* The "__metadata__" string stored under key, or NULL. Valid until vtr_safetensors_close. */
const char *vtr_safetensors_meta(const vtr_safetensors *st, const char *key);

/* Sorts st's entries by name, the order vtr_safetensors_find needs, and checks that no
 * two share one (VTR_ERR_FORMAT naming it): for readers of other formats that fill the
 * table (lib/pth.h). */
vtr_status vtr_safetensors_index(vtr_safetensors *st, vtr_error *err);

/* Frees the entries and metadata and unmaps the file; leaves st zeroed. Safe on a zeroed
 * or already-closed value. */
void vtr_safetensors_close(vtr_safetensors *st);

/* Writes count tensors to an open stream. names[i] names tensors[i]; names must be
 * non-empty, valid UTF-8, unique and not "__metadata__". metadata is NULL or a JSON
 * object whose values are all strings (not modified). The JSON header lists
 * "__metadata__" first, then the tensors in the order given, compactly, padded with
 * spaces to a multiple of 8 bytes. The buffer holds the tensors without gaps, ordered by
 * element size, largest first, and in the given order among equal sizes, so that every
 * tensor is aligned for its dtype (the reference writer does the same, breaking ties by
 * name). A bad argument is VTR_ERR_INVALID, a failed write VTR_ERR_IO, both naming `what`
 * (and the tensor). */
vtr_status vtr_safetensors_write_stream(FILE *fp, size_t count, const char *const *names,
                                        const vtr_tensor *tensors, const json_t *metadata,
                                        const char *what, vtr_error *err);

/* Writes as above to path atomically (temp file + rename); on failure no file is left. */
vtr_status vtr_safetensors_save(const char *path, size_t count, const char *const *names,
                                const vtr_tensor *tensors, const json_t *metadata,
                                vtr_error *err);

#endif
