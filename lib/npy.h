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
 *
 * Besides whole arrays: headers for a writer that learns the row count at the end, and
 * a reader of numpy string arrays (both below).
 */
#ifndef VTR_NPY_H
#define VTR_NPY_H

#include <stdint.h>
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

/* ---- headers written before the data ------------------------------------------------
 *
 * A writer that learns the row count only at the end (streaming rows to a file) writes
 * the header of (0, ...) first, then the rows, then rewrites the header in place with the
 * final count. This works because the header's length does not depend on the first
 * dimension: numpy (>= 1.24) and vtr pad its digits to a fixed width, so the bytes equal
 * np.save's for the final array. */

/* Room for any header vtr writes (preamble, dict, padding and '\n'). */
#define VTR_NPY_HEADER_MAX 640

typedef struct vtr_npy_header {
    vtr_dtype dtype;
    int ndim;
    int64_t shape[VTR_MAX_DIMS];
    size_t len;                              /* bytes of the header in bytes[] */
    unsigned char bytes[VTR_NPY_HEADER_MAX]; /* what precedes the data in the file */
} vtr_npy_header;

/* Builds in *h the NPY 1.0 header of a C-ordered dtype array of shape (shape[0], ...,
 * shape[ndim - 1]), byte for byte what vtr_npy_write_stream(fp, t, 1, ...) writes before
 * the data. Fails (h zeroed) with VTR_ERR_INVALID for ndim outside 1 .. VTR_MAX_DIMS, a
 * negative or overflowing shape or a bad dtype, VTR_ERR_UNSUPPORTED for a dtype numpy
 * lacks; messages start with "NPY header: ". */
vtr_status vtr_npy_header_init(vtr_npy_header *h, vtr_dtype dtype, int ndim,
                               const int64_t *shape, vtr_error *err);

/* Rewrites the first dimension of h to rows; h->len does not change, so the caller writes
 * h->bytes over the header at the start of the file and the data behind stays in place.
 * Fails (h unchanged) as vtr_npy_header_init does for the new shape. */
vtr_status vtr_npy_header_set_rows(vtr_npy_header *h, int64_t rows, vtr_error *err);

/* ---- string arrays -------------------------------------------------------------------
 *
 * numpy string arrays, such as the name lists of the HGR release ({trn,val,tst}_names.npy),
 * which vtr_npy_parse refuses. Accepted: NPY 1.0, 2.0 and 3.0 images of a 1-D array of
 * dtype '<U{L}' (UTF-32, what np.save writes for a str array; also '=U', '|U') or
 * '|S{L}' (bytes, read as UTF-8). Each element is its code units up to the last non-NUL
 * one, as numpy reads it, converted to UTF-8. Refused: object arrays ('|O', pickles:
 * VTR_ERR_UNSUPPORTED with a hint to re-save them as str), other dtypes and big-endian
 * '>U' (VTR_ERR_UNSUPPORTED); more or fewer dimensions, a header that is not the dict
 * numpy writes (as for vtr_npy_parse), a data size that is not n * itemsize, an element
 * that is empty, holds a NUL inside, or is not valid Unicode / UTF-8 (VTR_ERR_FORMAT,
 * naming the element's index: "name 3 is empty"). Every field is bounds-checked against
 * the bytes present; L is at most 2^20. */

typedef struct vtr_npy_strings {
    size_t n;
    char **items;  /* n NUL-terminated UTF-8 strings, none empty */
    char *storage; /* owns them */
} vtr_npy_strings;

/* Parses a string-array image held in memory into *out (a copy: buf may go afterwards).
 * On failure *out is zeroed. */
vtr_status vtr_npy_parse_strings(const void *buf, size_t len, vtr_npy_strings *out,
                                 vtr_error *err);

/* Reads the string-array file at path into *out; errors are prefixed with the path
 * (VTR_ERR_IO when it cannot be opened or mapped). On failure *out is zeroed. */
vtr_status vtr_npy_load_strings(const char *path, vtr_npy_strings *out, vtr_error *err);

/* Frees; safe on NULL and on a zeroed or already-freed value. */
void vtr_npy_strings_free(vtr_npy_strings *s);

#endif
