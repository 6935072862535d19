/* One import in progress: the items, captions and splits read so far (in memory, in file
 * order), the feature store being built beside them, and the one transaction that writes
 * it all into the catalog. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "import.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/feature_store.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/string_table.h"
#include "text/role_graph.h"

enum item_state { ITEM_ANNOTATED, ITEM_STORED, ITEM_FAILED };

typedef struct caption_ref {
    int64_t item;
    size_t offset; /* into text */
    size_t graph;  /* into text: its role graph (JSON); NO_GRAPH when it has none */
} caption_ref;

#define NO_GRAPH SIZE_MAX

typedef struct membership {
    int64_t item;
    int64_t split; /* index in split_names */
} membership;

struct vtr_import {
    vtr_import_options opt;
    char *layout, *extractor, *store_path, *store_name;
    json_t *source;
    vtr_string_table *keys; /* item index = key index */
    int64_t *caption_count; /* per item */
    unsigned char *state;   /* per item, enum item_state */
    char **failure;         /* per item: why its features were skipped, or NULL */
    size_t item_cap;
    char *text; /* caption texts and role graphs, each NUL-terminated */
    size_t text_len, text_cap;
    caption_ref *captions;
    size_t ncaptions, captions_cap;
    bool graphs_read;
    int64_t graphs;
    char *vocabulary_name;
    char **vocabulary; /* words by id, each malloc'd */
    size_t vocabulary_n;
    vtr_string_table *split_names;
    vtr_string_table *memberships_seen; /* (item, split) pairs as 16-byte keys */
    membership *memberships;
    size_t nmemberships, memberships_cap;
    vtr_feature_store_writer *writer;
    int64_t rows, dim, stored, skipped;
};

static vtr_status nomem(vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_NOMEM, "import: out of memory");
}

/* Grows *buf (elements of size) to hold at least need; doubles. */
static int grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * size);
    if (!p)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

void vtr_import_stats_free(vtr_import_stats *stats)
{
    if (!stats)
        return;
    json_decref(stats->splits);
    stats->splits = NULL;
}

/* vtr_import_load_json with jansson's decoding flags. */
static vtr_status load_json(const char *path, size_t flags, json_t **out, vtr_error *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vtr_fail_errno(err, "%s", path);
    if (S_ISDIR(sb.st_mode))
        return vtr_fail(err, VTR_ERR_IO, "%s: is a directory, expected a JSON file", path);
    json_error_t je;
    json_t *j = json_load_file(path, flags, &je);
    if (!j) {
        if (je.line < 1)
            return vtr_fail(err, VTR_ERR_IO, "%s: %s", path, je.text);
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column,
                        je.text);
    }
    *out = j;
    return VTR_OK;
}

vtr_status vtr_import_load_json(const char *path, json_t **out, vtr_error *err)
{
    return load_json(path, JSON_REJECT_DUPLICATES, out, err);
}

vtr_status vtr_import_load_graphs(const char *path, bool optional, json_t **graphs,
                                  vtr_error *err)
{
    *graphs = NULL;
    struct stat sb;
    if (optional && (stat(path, &sb) != 0 || S_ISDIR(sb.st_mode)))
        return VTR_OK;
    /* duplicate keys: jansson without JSON_REJECT_DUPLICATES, like Python's json, keeps
     * the last value (at the first one's place) */
    vtr_status st = load_json(path, 0, graphs, err);
    if (st != VTR_OK)
        return st;
    if (!json_is_object(*graphs)) {
        json_decref(*graphs);
        *graphs = NULL;
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an object {caption: [nodes, edges]}",
                        path);
    }
    return VTR_OK;
}

/* Validated by the reader's rules (text/role_graph.h), stored as compact JSON in the
 * file's node order. An invalid graph fails the import, as a malformed caption does. */
vtr_status vtr_import_graph_of_caption(vtr_import *im, const json_t *graphs, const char *path,
                                       const char *caption, vtr_error *err)
{
    const json_t *value = graphs ? json_object_get(graphs, caption) : NULL;
    if (!value)
        return VTR_OK;
    vtr_role_graph graph;
    vtr_status st = vtr_role_graph_parse(value, caption, &graph, err);
    vtr_role_graph_free(&graph);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", path);
        return st;
    }
    char *text = json_dumps(value, VTR_JSON_FLAGS);
    if (!text)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    st = vtr_import_caption_graph(im, text, err);
    free(text);
    return st;
}

/* The absolute path of a directory that may not exist yet: its parent resolved. */
static char *absolute_store_path(const char *path, vtr_error *err)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *slash = NULL;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/')
            slash = path + i;
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    const char *base = slash ? slash + 1 : path;
    size_t base_len = len - (size_t)(base - path);
    bool made = parent && vtr_make_dirs(parent, err) == VTR_OK;
    char *resolved = made ? realpath(parent, NULL) : NULL;
    char *out = NULL;
    if (!parent) {
        nomem(err);
    } else if (!made) {
        vtr_error_context(err, "feature store %s", path);
    } else if (!resolved) {
        vtr_fail_errno(err, "feature store %s: parent directory %s", path, parent);
    } else if (base_len == 0 || (base_len == 1 && base[0] == '.') ||
               (base_len == 2 && base[0] == '.' && base[1] == '.')) {
        vtr_fail(err, VTR_ERR_INVALID, "feature store %s: name a new directory", path);
    } else if ((out = malloc(strlen(resolved) + base_len + 2))) {
        snprintf(out, strlen(resolved) + base_len + 2, "%s%s%.*s", resolved,
                 strcmp(resolved, "/") ? "/" : "", (int)base_len, base);
    } else {
        nomem(err);
    }
    free(parent);
    free(resolved);
    return out;
}

vtr_status vtr_import_begin(const vtr_import_options *opt, const char *layout, bool features,
                            const char *extractor, const json_t *source, vtr_import **out,
                            vtr_error *err)
{
    *out = NULL;
    if (!opt || !opt->catalog)
        return vtr_fail(err, VTR_ERR_INVALID, "import: no catalog");
    if (!opt->dataset || !opt->dataset[0])
        return vtr_fail(err, VTR_ERR_INVALID, "import: no dataset name");
    if (opt->store_dtype != VTR_F32 && opt->store_dtype != VTR_F16)
        return vtr_fail(err, VTR_ERR_INVALID, "import: a store holds float32 or float16, not %s",
                        vtr_dtype_name(opt->store_dtype));
    vtr_import *im = calloc(1, sizeof *im);
    if (!im)
        return nomem(err);
    vtr_status st = VTR_OK;
    im->opt = *opt;
    im->layout = strdup(layout);
    im->extractor = strdup(extractor ? extractor : "");
    im->source = source ? json_deep_copy(source) : json_object();
    im->keys = vtr_string_table_new();
    im->split_names = vtr_string_table_new();
    im->memberships_seen = vtr_string_table_new();
    if (!im->layout || !im->extractor || !im->source || !im->keys || !im->split_names ||
        !im->memberships_seen) {
        st = nomem(err);
        goto end;
    }
    if (features && opt->store) {
        if (!(im->store_path = absolute_store_path(opt->store, err))) {
            st = err ? err->status : VTR_ERR_INVALID;
            goto end;
        }
        const char *name = opt->store_name;
        if (!name || !name[0])
            name = strrchr(im->store_path, '/') + 1;
        if (!(im->store_name = strdup(name))) {
            st = nomem(err);
            goto end;
        }
        vtr_feature_store_options so = {
            .dtype = opt->store_dtype,
            .extractor = im->extractor,
            .source = im->source,
            .replace = opt->replace_store,
        };
        if ((st = vtr_feature_store_writer_open(im->store_path, &so, &im->writer, err)) != VTR_OK)
            goto end;
    }
    *out = im;
    im = NULL;
end:
    vtr_import_abort(im);
    return st;
}

bool vtr_import_has_store(const vtr_import *im)
{
    return im->writer != NULL;
}

void vtr_import_abort(vtr_import *im)
{
    if (!im)
        return;
    vtr_feature_store_writer_abort(im->writer);
    int64_t n = im->keys ? vtr_string_table_count(im->keys) : 0;
    if (im->failure)
        for (int64_t i = 0; i < n; i++)
            free(im->failure[i]);
    free(im->failure);
    free(im->caption_count);
    free(im->state);
    free(im->text);
    free(im->captions);
    for (size_t i = 0; i < im->vocabulary_n; i++)
        free(im->vocabulary[i]);
    free(im->vocabulary);
    free(im->vocabulary_name);
    free(im->memberships);
    vtr_string_table_free(im->keys);
    vtr_string_table_free(im->split_names);
    vtr_string_table_free(im->memberships_seen);
    json_decref(im->source);
    free(im->layout);
    free(im->extractor);
    free(im->store_path);
    free(im->store_name);
    free(im);
}

vtr_status vtr_import_item(vtr_import *im, const char *key, int64_t *index, bool *added,
                           vtr_error *err)
{
    size_t len = strlen(key);
    char shown[96];
    vtr_printable(key, len, shown, sizeof shown);
    if (len == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "empty item key");
    if (strpbrk(key, "\t\r\n"))
        return vtr_fail(err, VTR_ERR_INVALID, "item key \"%s\" contains a tab or a line break",
                        shown);
    if (!vtr_utf8_valid(key, len))
        return vtr_fail(err, VTR_ERR_INVALID, "item key \"%s\" is not valid UTF-8", shown);
    int64_t n = vtr_string_table_count(im->keys);
    size_t cap = im->item_cap;
    if (grow((void **)&im->caption_count, &cap, (size_t)n + 1, sizeof *im->caption_count) != 0)
        return nomem(err);
    cap = im->item_cap;
    if (grow((void **)&im->state, &cap, (size_t)n + 1, sizeof *im->state) != 0)
        return nomem(err);
    cap = im->item_cap;
    if (grow((void **)&im->failure, &cap, (size_t)n + 1, sizeof *im->failure) != 0)
        return nomem(err);
    im->item_cap = cap;
    bool is_new;
    vtr_status st = vtr_string_table_insert(im->keys, key, len, index, &is_new, err);
    if (st != VTR_OK)
        return st;
    if (is_new) {
        im->caption_count[*index] = 0;
        im->state[*index] = ITEM_ANNOTATED;
        im->failure[*index] = NULL;
    }
    if (added)
        *added = is_new;
    return VTR_OK;
}

int64_t vtr_import_items(const vtr_import *im)
{
    return vtr_string_table_count(im->keys);
}

const char *vtr_import_key(const vtr_import *im, int64_t index)
{
    return vtr_string_table_key(im->keys, index, NULL);
}

/* Appends text (len bytes and a NUL) to im->text; *offset receives where. */
static vtr_status keep_text(vtr_import *im, const char *text, size_t len, size_t *offset,
                            vtr_error *err)
{
    if (grow((void **)&im->text, &im->text_cap, im->text_len + len + 1, 1) != 0)
        return nomem(err);
    memcpy(im->text + im->text_len, text, len);
    im->text[im->text_len + len] = '\0';
    *offset = im->text_len;
    im->text_len += len + 1;
    return VTR_OK;
}

vtr_status vtr_import_caption(vtr_import *im, int64_t index, const char *text, vtr_error *err)
{
    size_t len = strlen(text), offset;
    if (!vtr_utf8_valid(text, len))
        return vtr_fail(err, VTR_ERR_FORMAT, "item \"%s\": caption is not valid UTF-8",
                        vtr_import_key(im, index));
    if (grow((void **)&im->captions, &im->captions_cap, im->ncaptions + 1, sizeof *im->captions) !=
        0)
        return nomem(err);
    vtr_status st = keep_text(im, text, len, &offset, err);
    if (st != VTR_OK)
        return st;
    im->captions[im->ncaptions++] = (caption_ref){index, offset, NO_GRAPH};
    im->caption_count[index]++;
    return VTR_OK;
}

vtr_status vtr_import_caption_graph(vtr_import *im, const char *graph, vtr_error *err)
{
    if (im->ncaptions == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "import: a role graph before any caption");
    caption_ref *c = &im->captions[im->ncaptions - 1];
    if (c->graph != NO_GRAPH)
        return vtr_fail(err, VTR_ERR_INVALID, "item \"%s\": caption %lld has a role graph already",
                        vtr_import_key(im, c->item), (long long)(im->caption_count[c->item] - 1));
    size_t len = strlen(graph);
    if (!vtr_utf8_valid(graph, len))
        return vtr_fail(err, VTR_ERR_FORMAT, "item \"%s\": role graph is not valid UTF-8",
                        vtr_import_key(im, c->item));
    vtr_status st = keep_text(im, graph, len, &c->graph, err);
    if (st == VTR_OK)
        im->graphs++;
    return st;
}

void vtr_import_graphs_read(vtr_import *im)
{
    im->graphs_read = true;
}

vtr_status vtr_import_vocabulary(vtr_import *im, const char *name, const char *const *words,
                                 size_t n, vtr_error *err)
{
    if (im->vocabulary_name)
        return vtr_fail(err, VTR_ERR_INVALID, "import: vocabulary \"%s\" given already",
                        im->vocabulary_name);
    if (!(im->vocabulary_name = strdup(name)) ||
        !(im->vocabulary = calloc(n ? n : 1, sizeof *im->vocabulary)))
        return nomem(err);
    for (; im->vocabulary_n < n; im->vocabulary_n++)
        if (!(im->vocabulary[im->vocabulary_n] = strdup(words[im->vocabulary_n])))
            return nomem(err);
    return VTR_OK;
}

int64_t vtr_import_caption_count(const vtr_import *im, int64_t index)
{
    return im->caption_count[index];
}

vtr_status vtr_import_split(vtr_import *im, int64_t index, const char *split, vtr_error *err)
{
    if (!split || !split[0])
        return vtr_fail(err, VTR_ERR_INVALID, "empty split name");
    int64_t s;
    vtr_status st = vtr_string_table_insert(im->split_names, split, strlen(split), &s, NULL, err);
    if (st != VTR_OK)
        return st;
    int64_t pair[2] = {index, s};
    bool added;
    if ((st = vtr_string_table_insert(im->memberships_seen, (const char *)pair, sizeof pair, NULL,
                                      &added, err)) != VTR_OK)
        return st;
    if (!added)
        return VTR_OK;
    if (grow((void **)&im->memberships, &im->memberships_cap, im->nmemberships + 1,
             sizeof *im->memberships) != 0)
        return nomem(err);
    im->memberships[im->nmemberships++] = (membership){index, s};
    return VTR_OK;
}

vtr_status vtr_import_item_failed(vtr_import *im, int64_t index, const vtr_error *why,
                                  vtr_error *err)
{
    if (!im->opt.on_skip) {
        if (err && err != why)
            *err = *why;
        return why->status;
    }
    im->opt.on_skip(im->opt.skip_ctx, vtr_import_key(im, index), why);
    free(im->failure[index]);
    im->failure[index] = strdup(why->msg);
    if (!im->failure[index])
        return nomem(err);
    if (im->state[index] != ITEM_FAILED)
        im->skipped++;
    im->state[index] = ITEM_FAILED;
    return VTR_OK;
}

vtr_status vtr_import_features(vtr_import *im, int64_t index, const vtr_tensor *rows,
                               vtr_error *err)
{
    if (!im->writer)
        return vtr_fail(err, VTR_ERR_INVALID, "import: no feature store is being built");
    vtr_error e;
    vtr_error_clear(&e);
    /* arrays mapped from files written by others may sit at any byte offset */
    vtr_tensor aligned = *rows;
    void *copy = NULL;
    size_t elem = vtr_dtype_size(rows->dtype);
    if (rows->data && elem > 1 && (uintptr_t)rows->data % elem != 0) {
        size_t bytes = vtr_tensor_nbytes(rows);
        if (!(copy = malloc(bytes ? bytes : 1)))
            return nomem(err);
        memcpy(copy, rows->data, bytes);
        aligned.data = copy;
    }
    vtr_status st =
        vtr_feature_store_writer_add(im->writer, vtr_import_key(im, index), &aligned, &e);
    free(copy);
    if (st == VTR_ERR_INVALID)
        return vtr_import_item_failed(im, index, &e, err);
    if (st != VTR_OK) {
        if (err)
            *err = e;
        return st;
    }
    im->state[index] = ITEM_STORED;
    im->stored++;
    im->rows += rows->shape[0];
    im->dim = rows->shape[1];
    return VTR_OK;
}

void vtr_import_progress(vtr_import *im, int64_t done, int64_t total)
{
    if (im->opt.on_progress)
        im->opt.on_progress(im->opt.progress_ctx, done, total);
}

/* The catalog id of every item: found, or added as new. */
static vtr_status write_items(vtr_import *im, int64_t dataset, int64_t *ids, int64_t *new_items,
                              vtr_error *err)
{
    vtr_catalog *cat = im->opt.catalog;
    int64_t n = vtr_import_items(im);
    for (int64_t i = 0; i < n; i++) {
        const char *key = vtr_import_key(im, i);
        vtr_item found;
        vtr_status st = vtr_catalog_find_item(cat, dataset, key, &found, err);
        if (st == VTR_OK) {
            ids[i] = found.id;
            vtr_item_free(&found);
            continue;
        }
        if (st != VTR_ERR_NOT_FOUND)
            return st;
        vtr_error_clear(err);
        vtr_item item = {
            .dataset_id = dataset,
            .key = key,
            .path = NULL,
            .size_bytes = -1,
            .mtime_ns = -1,
            .duration_s = -1,
            .status = im->state[i] == ITEM_STORED   ? VTR_ITEM_OK
                      : im->state[i] == ITEM_FAILED ? VTR_ITEM_FAILED
                                                    : VTR_ITEM_PENDING,
            .error = im->failure[i],
        };
        if ((st = vtr_catalog_upsert_item(cat, &item, &ids[i], err)) != VTR_OK)
            return st;
        (*new_items)++;
    }
    return VTR_OK;
}

static vtr_status write_captions(vtr_import *im, const int64_t *ids, vtr_error *err)
{
    int64_t n = vtr_import_items(im);
    int64_t *ordinal = calloc((size_t)(n ? n : 1), sizeof *ordinal);
    if (!ordinal)
        return nomem(err);
    vtr_status st = VTR_OK;
    for (size_t c = 0; c < im->ncaptions && st == VTR_OK; c++) {
        const caption_ref *r = &im->captions[c];
        /* when the layout's graphs were read, a caption without one loses a graph that an
         * earlier import stored */
        bool graph = r->graph != NO_GRAPH, touch_graph = graph || im->graphs_read;
        int64_t caption_id = 0;
        st = vtr_catalog_add_caption(im->opt.catalog, ids[r->item], ordinal[r->item]++,
                                     im->text + r->offset, touch_graph ? &caption_id : NULL, err);
        if (st == VTR_OK && touch_graph)
            st = vtr_catalog_set_caption_graph(im->opt.catalog, caption_id,
                                               graph ? im->text + r->graph : NULL, err);
    }
    free(ordinal);
    return st;
}

static vtr_status write_splits(vtr_import *im, const int64_t *ids, json_t *counts, vtr_error *err)
{
    int64_t ns = vtr_string_table_count(im->split_names);
    for (int64_t s = 0; s < ns; s++)
        if (json_object_set_new(counts, vtr_string_table_key(im->split_names, s, NULL),
                                json_integer(0)) != 0)
            return nomem(err);
    for (size_t m = 0; m < im->nmemberships; m++) {
        const membership *mb = &im->memberships[m];
        const char *name = vtr_string_table_key(im->split_names, mb->split, NULL);
        vtr_status st = vtr_catalog_set_split(im->opt.catalog, ids[mb->item], name, err);
        if (st != VTR_OK)
            return st;
        json_t *c = json_object_get(counts, name);
        json_integer_set(c, json_integer_value(c) + 1);
    }
    return VTR_OK;
}

vtr_status vtr_import_finish(vtr_import *im, vtr_import_stats *stats, vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    vtr_catalog *cat = im->opt.catalog;
    int64_t n = vtr_import_items(im), dataset = 0, new_items = 0;
    int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    json_t *counts = json_object();
    char *config = NULL;
    bool in_transaction = false;
    vtr_status st = VTR_OK;
    if (!ids || !counts) {
        st = nomem(err);
        goto end;
    }
    if (im->writer && im->stored == 0) {
        st = vtr_fail(err, VTR_ERR_INVALID, "%s import: no item had features to store in %s",
                      im->layout, im->store_path);
        goto end;
    }
    if ((st = vtr_catalog_begin(cat, err)) != VTR_OK)
        goto end;
    in_transaction = true;
    if ((st = vtr_catalog_add_dataset(cat, im->opt.dataset, im->opt.root, &dataset, err)) !=
            VTR_OK ||
        (st = write_items(im, dataset, ids, &new_items, err)) != VTR_OK ||
        (st = write_captions(im, ids, err)) != VTR_OK ||
        (st = write_splits(im, ids, counts, err)) != VTR_OK)
        goto end;
    if (im->vocabulary_name && (st = vtr_catalog_put_vocabulary(cat, dataset, im->vocabulary_name,
                                                                (const char *const *)im->vocabulary,
                                                                im->vocabulary_n, err)) != VTR_OK)
        goto end;
    if (im->writer) {
        if (!(config = json_dumps(im->source, VTR_JSON_FLAGS))) {
            st = nomem(err);
            goto end;
        }
        vtr_feature_store fs = {
            .dataset_id = dataset,
            .name = im->store_name,
            .path = im->store_path,
            .extractor = im->extractor,
            .dim = im->dim,
            .dtype = im->opt.store_dtype,
            .rows = im->rows,
            .items = im->stored,
            .config = config,
        };
        if ((st = vtr_catalog_put_feature_store(cat, &fs, NULL, err)) != VTR_OK)
            goto end;
        vtr_feature_store_writer *w = im->writer;
        im->writer = NULL;
        if ((st = vtr_feature_store_writer_finish(w, err)) != VTR_OK)
            goto end;
    }
    in_transaction = false;
    if ((st = vtr_catalog_commit(cat, err)) != VTR_OK) {
        if (im->store_path)
            vtr_error_context(err, "feature store %s was written but is not in the catalog",
                              im->store_path);
        goto end;
    }
    if (stats) {
        stats->items = n;
        stats->new_items = new_items;
        stats->captions = (int64_t)im->ncaptions;
        stats->skipped = im->skipped;
        stats->feature_items = im->stored;
        stats->feature_rows = im->rows;
        stats->dim = im->store_path ? im->dim : 0;
        stats->graphs_read = im->graphs_read;
        stats->graphs = im->graphs;
        stats->captions_without_graph = im->graphs_read ? (int64_t)im->ncaptions - im->graphs : 0;
        stats->vocabulary_words = (int64_t)im->vocabulary_n;
        stats->splits = counts;
        counts = NULL;
    }
end:
    if (in_transaction)
        vtr_catalog_rollback(cat, NULL);
    free(config);
    free(ids);
    json_decref(counts);
    vtr_import_abort(im);
    return st;
}

vtr_status vtr_import_annotation_files(const char *layout, const char *const *paths, size_t n,
                                       vtr_import_file_fn import_file,
                                       const vtr_import_options *opt, vtr_import_stats *stats,
                                       vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    if (n == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s import: no annotation file", layout);
    vtr_import *im = NULL;
    json_t *source = json_pack("{s:s, s:[]}", "layout", layout, "files");
    vtr_status st = source ? VTR_OK : nomem(err);
    for (size_t i = 0; i < n && st == VTR_OK; i++)
        if (json_array_append_new(json_object_get(source, "files"), json_string(paths[i])) != 0)
            st = nomem(err);
    if (st == VTR_OK)
        st = vtr_import_begin(opt, layout, false, NULL, source, &im, err);
    for (size_t i = 0; i < n && st == VTR_OK; i++)
        st = import_file(im, paths[i], err);
    if (st == VTR_OK) {
        st = vtr_import_finish(im, stats, err);
        im = NULL;
    }
    vtr_import_abort(im);
    json_decref(source);
    return st;
}
