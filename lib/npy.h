/* NPY arrays (numpy's .npy format, versions 1.0, 2.0 and 3.0).
 *
 * vtr reads and writes little-endian, C-ordered arrays of dtype f4, f2, u1, i4 and i8
 * (VTR_F32, VTR_F16, VTR_U8, VTR_I32, VTR_I64). Fortran order, big-endian data, object
 * and structured dtypes, and unknown dtypes are refused with a message naming the cause.
 * Every header field is bounds-checked against the bytes actually present.
 * The data written starts at a multiple of 64 bytes, as numpy does.
 */
#ifndef VTR_NPY_H
#define VTR_NPY_H

#include <stdio.h>

#include "error.h"
#include "file.h"
#include "tensor.h"

/* Parses an NPY image held in memory. On success out->data points into buf (no copy),
 * and the whole of buf is exactly header + data (trailing bytes are an error). */
vtr_status vtr_npy_parse(const void *buf, size_t len, vtr_tensor *out, vtr_error *err);

/* Bytes that vtr_npy_write_stream(fp, t, version) writes (header + data). */
size_t vtr_npy_serialized_size(const vtr_tensor *t, int version);

/* Writes t as NPY to an open stream. version is 1, 2 or 3, or 0 for the smallest that
 * fits (1.0 unless the header exceeds 65535 bytes). `what` names the destination in
 * error messages. Fails with VTR_ERR_UNSUPPORTED for dtypes numpy lacks (bfloat16). */
vtr_status vtr_npy_write_stream(FILE *fp, const vtr_tensor *t, int version, const char *what,
                                vtr_error *err);

/* Writes t to path atomically (temp file + rename), version as above. */
vtr_status vtr_npy_save(const char *path, const vtr_tensor *t, int version, vtr_error *err);

/* An NPY file mapped read-only; tensor.data points into the mapping. */
typedef struct vtr_npy_file {
    vtr_mapped_file map;
    vtr_tensor tensor;
} vtr_npy_file;

/* Maps and parses path. Errors are prefixed with the path. */
vtr_status vtr_npy_load(const char *path, vtr_npy_file *out, vtr_error *err);

/* Unmaps; safe on a zeroed or already-closed value. */
void vtr_npy_close(vtr_npy_file *file);

#endif
