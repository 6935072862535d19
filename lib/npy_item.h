/* One item of an --out-dir output: DIR/KEY.npy (the tensor) beside DIR/KEY.json (its
 * metadata), as vtr-decode and vtr-features write them and the npy-dir importer reads
 * them. */
#ifndef VTR_NPY_ITEM_H
#define VTR_NPY_ITEM_H

#include <jansson.h>

#include <stddef.h>

#include "lib/error.h"
#include "lib/npy.h"
#include "lib/tensor.h"

/* Writes both files atomically, both or neither. The key must name a file in dir
 * (vtr_key_check_file_name): VTR_ERR_INVALID otherwise. */
vtr_status vtr_npy_item_save(const char *dir, const char *key, const vtr_tensor *t,
                             const json_t *meta, vtr_error *err);

/* Maps npy_path (DIR/KEY.npy; lib/keyed_files.h lists them) into *file and reads its metadata, the JSON file
 * beside it (KEY.json for KEY.npy), into *meta: a new JSON object (an empty one when
 * there is no such file; json_decref it). A metadata file that is not a JSON object is
 * VTR_ERR_FORMAT naming it; the NPY reader's errors name the file. On failure *file is
 * zeroed and *meta NULL. */
vtr_status vtr_npy_item_load(const char *npy_path, vtr_npy_file *file, json_t **meta,
                             vtr_error *err);

#endif
