/* precomp: the SCAN / VSE++ / VSE∞ precomputed layout, {split}_ims.npy + {split}_caps.txt
 * (+ {split}_ids.txt), for MS-COCO and Flickr30K region features. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import.h"
#include "lib/lines.h"
#include "lib/npy.h"

#define PRECOMP_DEFAULT_CAPTIONS 5

/* The splits of the layout, in import order, and their catalog names. */
static const struct {
    const char *file, *split;
} precomp_splits[] = {
    {"train", "train"},
    {"dev", "val"},
    {"test", "test"},
    {"testall", "testall"},
};

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char *join(const char *dir, const char *split, const char *suffix)
{
    size_t n = strlen(dir) + strlen(split) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, split, suffix);
    return p;
}

/* Trims blanks around an id line in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* The key of every image: from the ids file (N lines, or k*N with each id repeated k
 * times) or "{split}_{i}". keys[i] is malloc'd. */
static vtr_status image_keys(const char *ids_path, const char *split, int64_t images, int k,
                             char ***out, vtr_error *err)
{
    char **keys = calloc((size_t)(images ? images : 1), sizeof *keys);
    if (!keys)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = VTR_OK;
    vtr_line_list ids = {0};
    if (exists(ids_path)) {
        if ((st = vtr_line_list_read(&ids, ids_path, false, err)) != VTR_OK)
            goto end;
        size_t per = 0;
        if (ids.n == (size_t)images)
            per = 1;
        else if (ids.n == (size_t)images * (size_t)k)
            per = (size_t)k;
        if (per == 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: %zu lines for %lld images; expected one id per image (or per "
                          "caption, %lld)",
                          ids_path, ids.n, (long long)images, (long long)images * k);
            goto end;
        }
        for (int64_t i = 0; i < images; i++) {
            char *id = trim(ids.v[(size_t)i * per]);
            for (size_t j = 1; j < per; j++)
                if (strcmp(trim(ids.v[(size_t)i * per + j]), id) != 0) {
                    st = vtr_fail(err, VTR_ERR_FORMAT,
                                  "%s: line %zu: id \"%.64s\" differs from line %zu's \"%.64s\" "
                                  "of the same image",
                                  ids_path, (size_t)i * per + j + 1, ids.v[(size_t)i * per + j],
                                  (size_t)i * per + 1, id);
                    goto end;
                }
            if (!id[0]) {
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s: line %zu: empty id", ids_path,
                              (size_t)i * per + 1);
                goto end;
            }
            if (!(keys[i] = strdup(id))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
        }
    } else {
        for (int64_t i = 0; i < images; i++) {
            char buf[96];
            snprintf(buf, sizeof buf, "%s_%lld", split, (long long)i);
            if (!(keys[i] = strdup(buf))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
        }
    }
    *out = keys;
    keys = NULL;
end:
    if (keys)
        for (int64_t i = 0; i < images; i++)
            free(keys[i]);
    free(keys);
    vtr_line_list_free(&ids);
    return st;
}

/* One split: its images, captions and features. */
static vtr_status import_split(vtr_import *im, const char *dir, const char *file_split,
                               const char *split, int k, int64_t *done, int64_t total,
                               vtr_error *err)
{
    char *ims_path = join(dir, file_split, "_ims.npy");
    char *caps_path = join(dir, file_split, "_caps.txt");
    char *ids_path = join(dir, file_split, "_ids.txt");
    char **keys = NULL;
    vtr_line_list caps = {0};
    vtr_npy_file ims = {0};
    int64_t images = 0;
    vtr_status st = VTR_OK;
    if (!ims_path || !caps_path || !ids_path) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = vtr_npy_load(ims_path, &ims, err)) != VTR_OK)
        goto end;
    const vtr_tensor *t = &ims.tensor;
    char shape[160];
    vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
    if (t->ndim != 2 && t->ndim != 3) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: shape %s is neither (N, regions, D) nor (N, D)",
                      ims_path, shape);
        goto end;
    }
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16) {
        st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: dtype %s; features are float32 or float16",
                      ims_path, vtr_dtype_name(t->dtype));
        goto end;
    }
    images = t->shape[0];
    if ((st = vtr_line_list_read(&caps, caps_path, false, err)) != VTR_OK)
        goto end;
    if (caps.n != (size_t)images * (size_t)k) {
        const char *base = strrchr(ims_path, '/') + 1;
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "%s: %zu lines for %lld images of %s; expected %d per image (%lld)",
                      caps_path, caps.n, (long long)images, base, k, (long long)images * k);
        goto end;
    }
    if ((st = image_keys(ids_path, file_split, images, k, &keys, err)) != VTR_OK)
        goto end;
    int64_t regions = t->ndim == 3 ? t->shape[1] : 1, dim = t->shape[t->ndim - 1];
    size_t row_bytes = (size_t)regions * (size_t)dim * vtr_dtype_size(t->dtype);
    for (int64_t i = 0; i < images; i++) {
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, keys[i], &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s: image %lld", ids_path, (long long)i);
            goto end;
        }
        if ((st = vtr_import_split(im, index, split, err)) != VTR_OK)
            goto end;
        if (added) {
            for (int j = 0; j < k; j++)
                if ((st = vtr_import_caption(im, index, caps.v[(size_t)i * k + j], err)) !=
                    VTR_OK) {
                    vtr_error_context(err, "%s: line %lld", caps_path, (long long)i * k + j + 1);
                    goto end;
                }
            if (vtr_import_has_store(im)) {
                vtr_tensor rows = {.dtype = t->dtype,
                                   .ndim = 2,
                                   .shape = {regions, dim},
                                   .data = (char *)t->data + (size_t)i * row_bytes};
                if ((st = vtr_import_features(im, index, &rows, err)) != VTR_OK) {
                    vtr_error_context(err, "%s: image %lld", ims_path, (long long)i);
                    goto end;
                }
            }
        }
        vtr_import_progress(im, ++*done, total);
    }
end:
    if (keys)
        for (int64_t i = 0; i < images; i++)
            free(keys[i]);
    free(keys);
    vtr_line_list_free(&caps);
    vtr_npy_close(&ims);
    free(ims_path);
    free(caps_path);
    free(ids_path);
    return st;
}

vtr_status vtr_import_precomp(const char *dir, int captions_per_image,
                              const vtr_import_options *opt, vtr_import_stats *stats,
                              vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    int k = captions_per_image ? captions_per_image : PRECOMP_DEFAULT_CAPTIONS;
    if (k < 1 || k > 1000)
        return vtr_fail(err, VTR_ERR_INVALID, "precomp import: %d captions per image",
                        captions_per_image);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return vtr_fail_errno(err, "%s", dir);
    if (!S_ISDIR(sb.st_mode))
        return vtr_fail(err, VTR_ERR_INVALID, "%s: not a directory", dir);
    const size_t nsplits = sizeof precomp_splits / sizeof precomp_splits[0];
    bool present[sizeof precomp_splits / sizeof precomp_splits[0]] = {false};
    int64_t total = 0;
    vtr_status st = VTR_OK;
    vtr_import *im = NULL;
    json_t *source = json_pack("{s:s, s:s, s:i, s:[]}", "layout", "precomp", "dir", dir,
                               "captions_per_image", k, "splits");
    if (!source)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    /* which splits are there; both files or neither */
    for (size_t s = 0; s < nsplits; s++) {
        char *ims = join(dir, precomp_splits[s].file, "_ims.npy");
        char *caps = join(dir, precomp_splits[s].file, "_caps.txt");
        if (!ims || !caps) {
            free(ims);
            free(caps);
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        bool has_ims = exists(ims), has_caps = exists(caps);
        if (has_ims != has_caps)
            st = vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: missing (its split has %s)",
                          has_ims ? caps : ims, strrchr(has_ims ? ims : caps, '/') + 1);
        free(ims);
        free(caps);
        if (st != VTR_OK)
            goto end;
        present[s] = has_ims;
        if (has_ims) {
            vtr_npy_file f;
            char *path = join(dir, precomp_splits[s].file, "_ims.npy");
            if (!path) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
            st = vtr_npy_load(path, &f, err);
            free(path);
            if (st != VTR_OK)
                goto end;
            total += f.tensor.ndim >= 1 ? f.tensor.shape[0] : 0;
            vtr_npy_close(&f);
            json_array_append_new(json_object_get(source, "splits"),
                                  json_string(precomp_splits[s].file));
        }
    }
    if (total == 0 && !present[0] && !present[1] && !present[2] && !present[3]) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND,
                      "%s: no precomp split: expected {train,dev,test,testall}_ims.npy with "
                      "_caps.txt",
                      dir);
        goto end;
    }
    if ((st = vtr_import_begin(opt, "precomp", true, "imported:precomp", source, &im, err)) !=
        VTR_OK)
        goto end;
    int64_t done = 0;
    for (size_t s = 0; s < nsplits; s++)
        if (present[s] &&
            (st = import_split(im, dir, precomp_splits[s].file, precomp_splits[s].split, k, &done,
                               total, err)) != VTR_OK)
            goto end;
    st = vtr_import_finish(im, stats, err);
    im = NULL;
end:
    vtr_import_abort(im);
    json_decref(source);
    return st;
}
