/* vatex: the VATEX annotation files, JSON lists of {"videoID", "enCap": [10 English
 * captions], "chCap": [10 Chinese captions]}. */
#include <string.h>

#include "import.h"

/* The split of an official file name, or NULL. */
static const char *vatex_split(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strncmp(base, "vatex_training", 14))
        return "train";
    if (!strncmp(base, "vatex_validation", 16))
        return "val";
    if (!strncmp(base, "vatex_public_test", 17) || !strncmp(base, "vatex_private_test", 18))
        return "test";
    return NULL;
}

static vtr_status import_file(vtr_import *im, const vtr_import_source *src, vtr_error *err)
{
    const char *path = src->path;
    const char *split = src->split ? src->split : vatex_split(path);
    json_t *root = NULL;
    vtr_status st = vtr_import_load_json(path, &root, err);
    if (st != VTR_OK)
        return st;
    size_t i;
    const json_t *v;
    if (!json_is_array(root)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: expected a list of {\"videoID\", \"enCap\"}", path);
        goto end;
    }
    json_array_foreach(root, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "videoID"));
        if (!id) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: entry %zu: no \"videoID\" string", path, i);
            goto end;
        }
        const json_t *caps = json_object_get(v, "enCap");
        if (caps && !json_is_array(caps)) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: video \"%s\": \"enCap\" is not a list", path,
                          id);
            goto end;
        }
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, id, &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s: entry %zu", path, i);
            goto end;
        }
        if (!added) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: video \"%s\" appears twice", path, id);
            goto end;
        }
        if (split && (st = vtr_import_split(im, index, split, err)) != VTR_OK)
            goto end;
        size_t j;
        const json_t *c;
        json_array_foreach(caps, j, c)
        {
            if (!json_is_string(c)) {
                st = vtr_fail(err, VTR_ERR_FORMAT,
                              "%s: video \"%s\": enCap[%zu] is not a "
                              "string",
                              path, id, j);
                goto end;
            }
            if ((st = vtr_import_caption(im, index, json_string_value(c), err)) != VTR_OK) {
                vtr_error_context(err, "%s", path);
                goto end;
            }
        }
    }
end:
    json_decref(root);
    return st;
}

vtr_status vtr_import_vatex(const vtr_import_source *files, size_t n, const vtr_import_options *opt,
                            vtr_import_stats *stats, vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    if (n == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "vatex import: no annotation file");
    vtr_import *im = NULL;
    json_t *source = json_pack("{s:s, s:[]}", "layout", "vatex", "files");
    vtr_status st = source ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && st == VTR_OK; i++) {
        json_t *f = json_pack("{s:s, s:s?}", "path", files[i].path, "split",
                              files[i].split ? files[i].split : vatex_split(files[i].path));
        if (!f || json_array_append_new(json_object_get(source, "files"), f) != 0)
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    if (st == VTR_OK)
        st = vtr_import_begin(opt, "vatex", false, NULL, source, &im, err);
    for (size_t i = 0; i < n && st == VTR_OK; i++)
        st = import_file(im, &files[i], err);
    if (st == VTR_OK) {
        st = vtr_import_finish(im, stats, err);
        im = NULL;
    }
    vtr_import_abort(im);
    json_decref(source);
    return st;
}
