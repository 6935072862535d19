/* The HGR release's names files: {trn,val,tst}_names.npy are numpy string arrays, which
 * vtr's NPY reader (lib/npy.h) refuses; this small reader takes exactly them.
 *
 * Accepted: NPY 1.0, 2.0 and 3.0 files holding a 1-D array of dtype '<U{L}' (UTF-32,
 * what np.save writes for a str array; also '=U', '|U') or '|S{L}' (bytes, read as
 * UTF-8). Each element is its code units up to the last non-NUL one, as numpy reads it.
 * Refused: other dtypes ('|O' object arrays are pickles: VTR_ERR_UNSUPPORTED, with the
 * re-save hint), big-endian '>U', more or fewer dimensions, a header that is not the dict
 * numpy writes, a data size that is not n * itemsize (VTR_ERR_FORMAT); an element that is
 * empty, holds a NUL inside, or is not valid Unicode / UTF-8 (VTR_ERR_FORMAT, naming its
 * index). Every field is bounds-checked against the bytes present. Errors start with the
 * path.
 */
#ifndef VTR_IMPORT_HGR_H
#define VTR_IMPORT_HGR_H

#include <stddef.h>

#include "lib/error.h"

typedef struct vtr_name_list {
    size_t n;
    char **names;  /* n NUL-terminated UTF-8 strings */
    char *storage; /* owns them */
} vtr_name_list;

/* Reads the names file at path into *out (zeroed on failure). */
vtr_status vtr_name_list_load(const char *path, vtr_name_list *out, vtr_error *err);

/* Parses an NPY image held in memory; `what` names it in errors. */
vtr_status vtr_name_list_parse(const void *buf, size_t len, const char *what, vtr_name_list *out,
                               vtr_error *err);

/* Frees; safe on a zeroed or already-freed value. */
void vtr_name_list_free(vtr_name_list *list);

#endif
