/* NPY arrays (numpy's .npy format, versions 1.0, 2.0 and 3.0).
 *
 * vtr reads and writes little-endian, C-ordered arrays of dtype f4, f2, u1, i4 and i8
 * (VTR_F32, VTR_F16, VTR_U8, VTR_I32, VTR_I64). The reader takes the type strings numpy
 * writes ('<f4', '|u1') and their spellings with '=', '|' or no byte-order mark ('u1',
 * '<u1'); '>' is refused for multi-byte types. Fortran order (with two or more
 * dimensions; with fewer it is the same bytes as C order), big-endian data, object and
 * structured dtypes, unknown dtypes and more than VTR_MAX_DIMS dimensions are
 * VTR_ERR_UNSUPPORTED with a message naming the cause. Malformed input (bad magic, a
 * header that is not the dict literal numpy writes, a missing, repeated or unknown key,
 * negative or overflowing dimensions, a file shorter or longer than header + data) is
 * VTR_ERR_FORMAT. Every header field is bounds-checked against the bytes present.
 *
 * The data written starts at a multiple of 64 bytes, and the header bytes equal
 * numpy's (>= 1.24) for the same array. Alignment when reading: the data is aligned for
 * its dtype whenever the image starts at an 8-byte boundary (a mapping, malloc) and its
 * header keeps the data offset a multiple of the element size, as numpy and vtr always
 * do; a file from another writer may leave it unaligned, which the reader accepts, so
 * code that cannot know where a file came from checks the pointer or uses memcpy.
 */
#ifndef VTR_NPY_H
#define VTR_NPY_H

#include <stdio.h>

#include "error.h"
#include "file.h"
#include "tensor.h"

/* Parses an NPY image held in memory. On success out->data points into buf (no copy;
 * read-only), and the whole of buf is exactly header + data (trailing bytes are an
 * error). On failure out is zeroed. */
vtr_status vtr_npy_parse(const void *buf, size_t len, vtr_tensor *out, vtr_error *err);

/* Bytes that vtr_npy_write_stream(fp, t, version) writes (header + data), or 0 when it
 * would refuse t or version. */
size_t vtr_npy_serialized_size(const vtr_tensor *t, int version);

/* Writes t as NPY to an open stream. version is 1, 2 or 3, or 0 for the smallest that
 * fits (1.0 unless the header exceeds 65535 bytes, which no vtr_tensor reaches). `what`
 * names the destination in error messages. Fails with VTR_ERR_UNSUPPORTED for dtypes
 * numpy lacks (bfloat16), VTR_ERR_INVALID for a bad version, dtype or shape or missing
 * data (checked before anything is written), VTR_ERR_IO when a write fails. */
vtr_status vtr_npy_write_stream(FILE *fp, const vtr_tensor *t, int version, const char *what,
                                vtr_error *err);

/* Writes t to path atomically (temp file + rename), version as above; on failure no
 * file is left behind and an existing one is untouched. */
vtr_status vtr_npy_save(const char *path, const vtr_tensor *t, int version, vtr_error *err);

/* An NPY file mapped read-only; tensor.data points into the mapping. */
typedef struct vtr_npy_file {
    vtr_mapped_file map;
    vtr_tensor tensor;
} vtr_npy_file;

/* Maps and parses path. Errors are prefixed with the path (VTR_ERR_IO when it cannot be
 * opened or mapped; an empty file is VTR_ERR_FORMAT). On failure out is zeroed. */
vtr_status vtr_npy_load(const char *path, vtr_npy_file *out, vtr_error *err);

/* Unmaps; safe on a zeroed or already-closed value. */
void vtr_npy_close(vtr_npy_file *file);

#endif
