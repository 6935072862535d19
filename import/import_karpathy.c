/* karpathy: the Karpathy splits of MS-COCO and Flickr30K (dataset_coco.json,
 * dataset_flickr30k.json): {"images": [{"filename", "split", "sentences": [{"raw",
 * "tokens"}], ...}], "dataset": ...}. */
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The key of an image: its file name without directory and extension, which is what
 * vtr-decode calls the same file. Writes into buf (size > strlen(filename)). */
static void image_key(const char *filename, char *buf)
{
    const char *base = strrchr(filename, '/');
    base = base ? base + 1 : filename;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    memcpy(buf, base, len);
    buf[len] = '\0';
}

/* A sentence's text: "raw", or the tokens joined by spaces (malloc'd into *owned). */
static const char *sentence_text(const json_t *s, char **owned)
{
    *owned = NULL;
    const char *raw = json_string_value(json_object_get(s, "raw"));
    if (raw)
        return raw;
    const json_t *tokens = json_object_get(s, "tokens");
    if (!json_is_array(tokens))
        return NULL;
    size_t len = 1, i;
    const json_t *t;
    json_array_foreach(tokens, i, t)
    {
        if (!json_is_string(t))
            return NULL;
        len += json_string_length(t) + 1;
    }
    char *text = malloc(len);
    if (!text)
        return NULL;
    size_t used = 0;
    json_array_foreach(tokens, i, t)
    {
        if (i > 0)
            text[used++] = ' ';
        memcpy(text + used, json_string_value(t), json_string_length(t));
        used += json_string_length(t);
    }
    text[used] = '\0';
    *owned = text;
    return text;
}

static vtr_status import_file(vtr_import *im, const char *path, vtr_error *err)
{
    json_t *root = NULL;
    char *key = NULL;
    vtr_status st = vtr_import_load_json(path, &root, err);
    if (st != VTR_OK)
        return st;
    const json_t *images = json_object_get(root, "images");
    size_t i;
    const json_t *img;
    if (!json_is_array(images)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: expected an object with an \"images\" list", path);
        goto end;
    }
    json_array_foreach(images, i, img)
    {
        const char *filename = json_string_value(json_object_get(img, "filename"));
        const char *split = json_string_value(json_object_get(img, "split"));
        const json_t *sentences = json_object_get(img, "sentences");
        if (!filename || !split || !json_is_array(sentences)) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: images[%zu]: needs \"filename\", \"split\" "
                          "and a \"sentences\" list",
                          path, i);
            goto end;
        }
        const char *mapped = NULL, *also = NULL;
        if (!strcmp(split, "train") || !strcmp(split, "val") || !strcmp(split, "test")) {
            mapped = split;
        } else if (!strcmp(split, "restval")) {
            mapped = "train";
            also = "restval";
        } else {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: image \"%s\": unknown split \"%s\" (train, "
                          "val, test or restval)",
                          path, filename, split);
            goto end;
        }
        free(key);
        if (!(key = malloc(strlen(filename) + 1))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        image_key(filename, key);
        int64_t index;
        bool added;
        if ((st = vtr_import_item(im, key, &index, &added, err)) != VTR_OK) {
            vtr_error_context(err, "%s: images[%zu]", path, i);
            goto end;
        }
        if (!added) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "%s: images[%zu]: key \"%s\" (from \"%s\") is "
                          "taken by an earlier image",
                          path, i, key, filename);
            goto end;
        }
        if ((st = vtr_import_split(im, index, mapped, err)) != VTR_OK ||
            (also && (st = vtr_import_split(im, index, also, err)) != VTR_OK))
            goto end;
        size_t j;
        const json_t *s;
        json_array_foreach(sentences, j, s)
        {
            char *owned;
            const char *text = sentence_text(s, &owned);
            if (!text) {
                st = vtr_fail(err, VTR_ERR_FORMAT,
                              "%s: image \"%s\": sentences[%zu] has no "
                              "\"raw\" text or \"tokens\" list",
                              path, filename, j);
                goto end;
            }
            st = vtr_import_caption(im, index, text, err);
            free(owned);
            if (st != VTR_OK) {
                vtr_error_context(err, "%s", path);
                goto end;
            }
        }
    }
end:
    free(key);
    json_decref(root);
    return st;
}

vtr_status vtr_import_karpathy(const char *const *paths, size_t n, const vtr_import_options *opt,
                               vtr_import_stats *stats, vtr_error *err)
{
    return vtr_import_annotation_files("karpathy", paths, n, import_file, opt, stats, err);
}
