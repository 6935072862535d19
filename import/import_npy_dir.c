/* npy-dir: one NPY file per item, DIR/KEY.npy (the layout of the common video
 * feature-extraction tools), into a feature store. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "lib/keyed_files.h"
#include "lib/npy.h"

/* One file's rows into the store; failures of the file are item errors. */
static vtr_status import_file(vtr_import *im, int64_t index, const char *path, vtr_error *err)
{
    vtr_npy_file f;
    vtr_error why;
    vtr_error_clear(&why);
    if (vtr_npy_load(path, &f, &why) != VTR_OK)
        return vtr_import_item_failed(im, index, &why, err);
    vtr_tensor rows = f.tensor;
    char shape[160];
    vtr_shape_str(rows.ndim, rows.shape, shape, sizeof shape);
    vtr_status st;
    if (rows.dtype != VTR_F32 && rows.dtype != VTR_F16) {
        vtr_fail(&why, VTR_ERR_UNSUPPORTED, "%s: dtype %s; features are float32 or float16", path,
                 vtr_dtype_name(rows.dtype));
        st = vtr_import_item_failed(im, index, &why, err);
    } else if (rows.ndim != 1 && rows.ndim != 2) {
        vtr_fail(&why, VTR_ERR_FORMAT, "%s: shape %s is neither (N, D) nor (D,)", path, shape);
        st = vtr_import_item_failed(im, index, &why, err);
    } else {
        if (rows.ndim == 1) {
            rows.ndim = 2;
            rows.shape[1] = rows.shape[0];
            rows.shape[0] = 1;
        }
        st = vtr_import_features(im, index, &rows, err);
        if (st != VTR_OK && err)
            vtr_error_context(err, "%s", path);
    }
    vtr_npy_close(&f);
    return st;
}

vtr_status vtr_import_npy_dir(const vtr_import_source *dirs, size_t n,
                              const vtr_import_options *opt, vtr_import_stats *stats,
                              vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    if (!opt->store)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "npy-dir import: the layout holds only features; name a feature store");
    if (n == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "npy-dir import: no directory");
    static const char *const suffix[] = {".npy"};
    vtr_keyed_files files = {0};
    size_t *dir_end = calloc(n, sizeof *dir_end); /* dir i's files end at dir_end[i] */
    vtr_import *im = NULL;
    json_t *source = json_pack("{s:s, s:[]}", "layout", "npy-dir", "dirs");
    vtr_status st = VTR_OK;
    if (!source || !dir_end) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "npy-dir import: out of memory");
        goto end;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_pack("{s:s?, s:s?}", "path", dirs[i].path, "split", dirs[i].split);
        if (!d || json_array_append_new(json_object_get(source, "dirs"), d) != 0) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "npy-dir import: out of memory");
            goto end;
        }
        if ((st = vtr_keyed_files_add_dir(&files, dirs[i].path, suffix, 1, err)) != VTR_OK)
            goto end;
        dir_end[i] = files.n;
    }
    if (files.n == 0) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "npy-dir import: no .npy file in %s%s", dirs[0].path,
                      n > 1 ? " or the other directories" : "");
        goto end;
    }
    if ((st = vtr_import_begin(opt, "npy-dir", true, "imported:npy-dir", source, &im, err)) !=
        VTR_OK)
        goto end;
    size_t dir = 0;
    for (size_t i = 0; i < files.n; i++) {
        const vtr_keyed_file *e = &files.v[i];
        while (i >= dir_end[dir])
            dir++;
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, e->key, &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s", e->path);
            goto end;
        }
        if (!added) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: key \"%s\" is also in an earlier directory",
                          e->path, e->key);
            goto end;
        }
        const char *split = dirs[dir].split;
        if (split && (st = vtr_import_split(im, index, split, err)) != VTR_OK)
            goto end;
        if ((st = import_file(im, index, e->path, err)) != VTR_OK)
            goto end;
        vtr_import_progress(im, (int64_t)i + 1, (int64_t)files.n);
    }
    st = vtr_import_finish(im, stats, err);
    im = NULL;
end:
    vtr_import_abort(im);
    json_decref(source);
    vtr_keyed_files_free(&files);
    free(dir_end);
    return st;
}
