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

/* Writes both files atomically, both or neither. The key must name a file in dir (no '/',
 * not "." or ".."): VTR_ERR_INVALID otherwise. */
vtr_status vtr_npy_item_save(const char *dir, const char *key, const vtr_tensor *t,
                             const json_t *meta, vtr_error *err);

/* The items of a directory: its KEY.npy files (names not starting with '.', not
 * directories), keys[i] = KEY and paths[i] = DIR/KEY.npy, sorted by key (bytewise). */
typedef struct vtr_npy_item_list {
    char **keys;
    char **paths;
    size_t n;
} vtr_npy_item_list;

/* Lists dir. VTR_ERR_IO naming dir when it cannot be read, VTR_ERR_NOMEM. An empty list
 * is not an error. On failure *out is zeroed. */
vtr_status vtr_npy_item_list_dir(const char *dir, vtr_npy_item_list *out, vtr_error *err);

/* Frees the list; leaves it zeroed. Safe on a zeroed value. */
void vtr_npy_item_list_free(vtr_npy_item_list *l);

/* Maps npy_path (an item listed above) into *file and reads its metadata, the JSON file
 * beside it (KEY.json for KEY.npy), into *meta: a new JSON object (an empty one when
 * there is no such file; json_decref it). A metadata file that is not a JSON object is
 * VTR_ERR_FORMAT naming it; the NPY reader's errors name the file. On failure *file is
 * zeroed and *meta NULL. */
vtr_status vtr_npy_item_load(const char *npy_path, vtr_npy_file *file, json_t **meta,
                             vtr_error *err);

#endif
