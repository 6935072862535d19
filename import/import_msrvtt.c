/* msrvtt: the MSR-VTT annotation files of the 2016 release, train_val_videodatainfo.json
 * and test_videodatainfo.json: {"videos": [{"video_id", "split", ...}], "sentences":
 * [{"video_id", "caption", "sen_id"}]}; and, when one lies beside a file, the role graphs
 * of its captions in HGR's sent2rolegraph.augment.json (vtr-synth --scenes writes one). */
#include <stdlib.h>
#include <string.h>

#include "import.h"

#define GRAPHS_FILE "sent2rolegraph.augment.json"

/* dirname(path)/sent2rolegraph.augment.json, or NULL when out of memory. */
static char *graphs_path_beside(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    char *p = malloc(dir_len + sizeof GRAPHS_FILE);
    if (p) {
        memcpy(p, path, dir_len);
        memcpy(p + dir_len, GRAPHS_FILE, sizeof GRAPHS_FILE);
    }
    return p;
}

/* The release's split names and vtr's. */
static const char *msrvtt_split(const char *s)
{
    if (!strcmp(s, "train"))
        return "train";
    if (!strcmp(s, "validate"))
        return "val";
    if (!strcmp(s, "test"))
        return "test";
    return NULL;
}

static vtr_status import_file(vtr_import *im, const char *path, vtr_error *err)
{
    json_t *root = NULL, *graphs = NULL;
    char *graphs_path = graphs_path_beside(path);
    if (!graphs_path)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = vtr_import_load_json(path, &root, err);
    if (st != VTR_OK || (st = vtr_import_load_graphs(graphs_path, true, &graphs, err)) != VTR_OK)
        goto end;
    if (graphs)
        vtr_import_graphs_read(im);
    const json_t *videos = json_object_get(root, "videos");
    const json_t *sentences = json_object_get(root, "sentences");
    size_t i;
    const json_t *v;
    if (!json_is_array(videos) || !json_is_array(sentences)) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "%s: expected an object with \"videos\" and \"sentences\" lists", path);
        goto end;
    }
    json_array_foreach(videos, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "video_id"));
        const char *split = json_string_value(json_object_get(v, "split"));
        if (!id || !split) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: videos[%zu]: no \"video_id\" or \"split\" "
                          "string",
                          path, i);
            goto end;
        }
        const char *mapped = msrvtt_split(split);
        if (!mapped) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: video \"%s\": unknown split \"%s\" (train, "
                          "validate or test)",
                          path, id, split);
            goto end;
        }
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, id, &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s: videos[%zu]", path, i);
            goto end;
        }
        if (!added) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: video \"%s\" is listed twice", path, id);
            goto end;
        }
        if ((st = vtr_import_split(im, index, mapped, err)) != VTR_OK)
            goto end;
    }
    json_array_foreach(sentences, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "video_id"));
        const char *caption = json_string_value(json_object_get(v, "caption"));
        if (!id || !caption) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: sentences[%zu]: no \"video_id\" or "
                          "\"caption\" string",
                          path, i);
            goto end;
        }
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, id, &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s: sentences[%zu]", path, i);
            goto end;
        }
        if (added) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: sentences[%zu]: video \"%s\" is not in "
                          "\"videos\"",
                          path, i, id);
            goto end;
        }
        if ((st = vtr_import_caption(im, index, caption, err)) != VTR_OK) {
            vtr_error_context(err, "%s: sentences[%zu]", path, i);
            goto end;
        }
        if ((st = vtr_import_graph_of_caption(im, graphs, graphs_path, caption, err)) != VTR_OK)
            goto end;
    }
end:
    json_decref(graphs);
    json_decref(root);
    free(graphs_path);
    return st;
}

vtr_status vtr_import_msrvtt(const char *const *paths, size_t n, const vtr_import_options *opt,
                             vtr_import_stats *stats, vtr_error *err)
{
    return vtr_import_annotation_files("msrvtt", paths, n, import_file, opt, stats, err);
}
