/* One item of an --out-dir output: DIR/KEY.npy (the tensor) beside DIR/KEY.json (its
 * metadata), as vtr-decode and vtr-features write them and the npy-dir importer reads
 * them. */
#ifndef VTR_NPY_ITEM_H
#define VTR_NPY_ITEM_H

#include <jansson.h>

#include "lib/error.h"
#include "lib/tensor.h"

/* Writes both files atomically, both or neither. The key must name a file in dir (no '/',
 * not "." or ".."): VTR_ERR_INVALID otherwise. */
vtr_status vtr_npy_item_save(const char *dir, const char *key, const vtr_tensor *t,
                             const json_t *meta, vtr_error *err);

#endif
