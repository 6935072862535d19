/* Joining the parts of a sharded run (shard_merge.h, docs/sharding.md). */
#define _POSIX_C_SOURCE 200809L
#include "shard_merge.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/archive_index.h"
#include "index/embedding_index.h"
#include "lib/catalog.h"
#include "lib/feature_store.h"
#include "lib/file.h"
#include "lib/shard.h"

static bool exists_in(const char *dir, const char *name)
{
    char *p = vtr_path_join(dir, name);
    bool yes = p && access(p, F_OK) == 0;
    free(p);
    return yes;
}

/* The parts in the order they are joined (see shard_merge.h): ordered[i] = parts[...]. */
static vtr_status order_parts(const char *const *parts, int n, const char **ordered,
                              vtr_error *err)
{
    vtr_shard first, s;
    size_t stem = 0;
    bool named = vtr_shard_of_path(parts[0], &first, &stem);
    for (int i = 0; i < n; i++)
        ordered[i] = named ? NULL : parts[i];
    for (int i = 0; i < n; i++) {
        bool is = vtr_shard_of_path(parts[i], &s, NULL);
        if (is != named)
            return vtr_fail(err, VTR_ERR_INVALID, "%s is named as a shard (OUT.shard-I-of-N) "
                            "and %s is not: join the parts of one sharded run",
                            is ? parts[i] : parts[0], is ? parts[0] : parts[i]);
        if (!named)
            continue;
        if (s.count != first.count)
            return vtr_fail(err, VTR_ERR_INVALID, "%s is a shard of %d and %s of %d: join the "
                            "parts of one sharded run", parts[0], first.count, parts[i],
                            s.count);
        if (s.index < n && ordered[s.index])
            return vtr_fail(err, VTR_ERR_INVALID, "%s and %s are both shard %d of %d",
                            ordered[s.index], parts[i], s.index, s.count);
        if (s.index < n)
            ordered[s.index] = parts[i];
    }
    if (!named)
        return VTR_OK;
    for (int i = 0; i < first.count; i++)
        if (i >= n || !ordered[i]) /* named as part 0 is, with its own shard */
            return vtr_fail(err, VTR_ERR_INVALID, "missing shard %d of %d (%.*s.shard-%d-of-%d)",
                            i, first.count, (int)stem, parts[0], i, first.count);
    return VTR_OK;
}

/* ---- feature stores ---------------------------------------------------------------- */

/* The first field (of meta.json, or of its "source" object) in which a and b differ, as
 * "NAME: A, not B" in buf; NULL when they agree. */
static const char *first_difference(const json_t *a, const json_t *b, const char *const *names,
                                    size_t n, char *buf, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_object_get(a, names[i]), *y = json_object_get(b, names[i]);
        if (json_equal(x, y) || (!x && !y))
            continue;
        if (!strcmp(names[i], "source") && json_is_object(x) && json_is_object(y)) {
            /* name the setting: the first key of either object whose values differ */
            const char *key;
            const json_t *v;
            json_object_foreach((json_t *)x, key, v)
                if (!json_equal(v, json_object_get(y, key)))
                    return first_difference(x, y, &key, 1, buf, size);
            json_object_foreach((json_t *)y, key, v)
                if (!json_object_get(x, key))
                    return first_difference(x, y, &key, 1, buf, size);
        }
        char *tx = x ? json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        char *ty = y ? json_dumps(y, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        char sx[200], sy[200];
        vtr_printable(tx ? tx : "none", strlen(tx ? tx : "none"), sx, sizeof sx);
        vtr_printable(ty ? ty : "none", strlen(ty ? ty : "none"), sy, sizeof sy);
        snprintf(buf, size, "%s: %s, not %s", names[i], sx, sy);
        free(tx);
        free(ty);
        return buf;
    }
    return NULL;
}

/* Refuses store r (path) unless it fits r0's: dim, dtype, extractor and source. */
static vtr_status check_store_fits(const vtr_feature_store_reader *r, const char *path,
                                   const vtr_feature_store_reader *r0, const char *path0,
                                   vtr_error *err)
{
    static const char *const fields[] = {"dim", "dtype", "extractor", "source"};
    char buf[600];
    const char *diff = first_difference(vtr_feature_store_reader_meta(r),
                                        vtr_feature_store_reader_meta(r0), fields,
                                        sizeof fields / sizeof *fields, buf, sizeof buf);
    if (!diff)
        return VTR_OK;
    return vtr_fail(err, VTR_ERR_INVALID, "feature store %s was made with other settings than "
                    "feature store %s: %s", path, path0, diff);
}

static vtr_status merge_stores(const char *out, const char *const *parts, int n,
                               vtr_merge_stats *stats, vtr_error *err)
{
    vtr_feature_store_reader **r = calloc((size_t)n, sizeof *r);
    vtr_feature_store_writer *w = NULL;
    if (!r)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = VTR_OK;
    for (int i = 0; i < n && st == VTR_OK; i++)
        if ((st = vtr_feature_store_reader_open(parts[i], &r[i], err)) == VTR_OK && i > 0)
            st = check_store_fits(r[i], parts[i], r[0], parts[0], err);
    /* a key in two parts: each part's keys looked up in the parts before it */
    for (int j = 1; j < n && st == VTR_OK; j++)
        for (int64_t k = 0; k < vtr_feature_store_reader_items(r[j]) && st == VTR_OK; k++) {
            const char *key = vtr_feature_store_reader_key(r[j], k);
            for (int i = 0; i < j && st == VTR_OK; i++)
                if (vtr_feature_store_reader_find(r[i], key) >= 0) {
                    char kbuf[128];
                    st = vtr_fail(err, VTR_ERR_INVALID, "key \"%s\" is in feature store %s and "
                                  "in feature store %s",
                                  vtr_printable(key, strlen(key), kbuf, sizeof kbuf), parts[i],
                                  parts[j]);
                }
        }
    if (st == VTR_OK) {
        const json_t *m0 = vtr_feature_store_reader_meta(r[0]);
        vtr_feature_store_options o = {
            .dtype = vtr_feature_store_reader_dtype(r[0]),
            .dim = vtr_feature_store_reader_dim(r[0]),
            .extractor = json_string_value(json_object_get(m0, "extractor")),
            .source = json_object_get(m0, "source")};
        st = vtr_feature_store_writer_open(out, &o, &w, err);
    }
    *stats = (vtr_merge_stats){.kind = VTR_MERGE_STORES, .parts = n};
    for (int i = 0; i < n && st == VTR_OK; i++) {
        for (int64_t k = 0; k < vtr_feature_store_reader_items(r[i]) && st == VTR_OK; k++) {
            vtr_tensor rows;
            if ((st = vtr_feature_store_reader_item(r[i], k, &rows, err)) == VTR_OK)
                st = vtr_feature_store_writer_add(w, vtr_feature_store_reader_key(r[i], k),
                                                  &rows, err);
        }
        stats->items += vtr_feature_store_reader_items(r[i]);
        stats->rows += vtr_feature_store_reader_rows(r[i]);
    }
    if (st == VTR_OK)
        st = vtr_feature_store_writer_finish(w, err);
    else
        vtr_feature_store_writer_abort(w);
    for (int i = 0; i < n; i++)
        vtr_feature_store_reader_close(r[i]);
    free(r);
    return st;
}

/* ---- indexes and their catalogs ------------------------------------------------------ */

/* Copies the "archive" items of every part's catalog into the catalog of index dir. */
static vtr_status merge_catalogs(const char *dir, const char *const *parts, int n,
                                 vtr_error *err)
{
    vtr_catalog *out = NULL, *in = NULL;
    char *root0 = NULL, *root = NULL, *in_path = NULL;
    int64_t out_id = 0, in_id;
    vtr_item_list items = {0};
    char *path = vtr_path_join(dir, VTR_ARCHIVE_CATALOG);
    vtr_status st = path ? vtr_catalog_open(path, &out, err)
                         : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    free(path);
    if (st == VTR_OK)
        st = vtr_catalog_begin(out, err);
    for (int i = 0; i < n && st == VTR_OK; i++) {
        if (!(in_path = vtr_path_join(parts[i], VTR_ARCHIVE_CATALOG))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = vtr_catalog_open_existing(in_path, &in, err)) != VTR_OK ||
            (st = vtr_catalog_find_dataset(in, VTR_ARCHIVE_DATASET, &in_id, err)) != VTR_OK ||
            (st = vtr_catalog_dataset_root(in, in_id, &root, err)) != VTR_OK ||
            (st = vtr_catalog_dataset_items(in, in_id, &items, err)) != VTR_OK)
            break;
        if (i == 0) {
            root0 = root;
            root = NULL;
            st = vtr_catalog_add_dataset(out, VTR_ARCHIVE_DATASET, root0, &out_id, err);
        } else if ((root != NULL) != (root0 != NULL) || (root && strcmp(root, root0) != 0)) {
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s indexes another archive than index "
                          "%s: %s, not %s", parts[i], parts[0], root ? root : "none",
                          root0 ? root0 : "none");
        }
        for (size_t k = 0; k < items.n && st == VTR_OK; k++) {
            vtr_item it = items.items[k], known;
            if (vtr_catalog_find_item(out, out_id, it.key, &known, NULL) == VTR_OK) {
                vtr_item_free(&known);
                char kbuf[128];
                st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: item \"%s\" is in an earlier "
                              "part's catalog already", in_path,
                              vtr_printable(it.key, strlen(it.key), kbuf, sizeof kbuf));
                break;
            }
            it.dataset_id = out_id;
            st = vtr_catalog_upsert_item(out, &it, NULL, err);
        }
        vtr_item_list_free(&items);
        vtr_catalog_close(in);
        in = NULL;
        free(in_path);
        in_path = NULL;
        free(root);
        root = NULL;
    }
    if (st == VTR_OK)
        st = vtr_catalog_commit(out, err);
    vtr_item_list_free(&items);
    vtr_catalog_close(in);
    vtr_catalog_close(out); /* rolls back what was not committed */
    free(in_path);
    free(root);
    free(root0);
    return st;
}

static vtr_status merge_indexes(const char *out, const char *const *parts, int n, bool catalog,
                                vtr_merge_stats *stats, vtr_error *err)
{
    *stats = (vtr_merge_stats){.kind = VTR_MERGE_INDEXES, .parts = n, .catalog = catalog};
    size_t size = strlen(out) + 32;
    char *tmp = malloc(size);
    if (!tmp)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    snprintf(tmp, size, "%s.tmp.%ld", out, (long)getpid());
    vtr_embedding_index *first = NULL, *ix = NULL;
    vtr_embedding_index_writer *w = NULL;
    vtr_status st = vtr_embedding_index_open(parts[0], &first, err);
    /* every part of the first one's dimension and model */
    for (int i = 1; i < n && st == VTR_OK; i++) {
        if ((st = vtr_embedding_index_open(parts[i], &ix, err)) != VTR_OK)
            break;
        const char *m = vtr_embedding_index_model(ix), *m0 = vtr_embedding_index_model(first);
        char a[300], b[300];
        if (vtr_embedding_index_dim(ix) != vtr_embedding_index_dim(first))
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s has dimension %lld, index %s %lld",
                          parts[i], (long long)vtr_embedding_index_dim(ix), parts[0],
                          (long long)vtr_embedding_index_dim(first));
        else if (strcmp(m, m0) != 0)
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s holds embeddings of another model "
                          "than index %s: %s, not %s", parts[i], parts[0],
                          vtr_printable(m, strlen(m), a, sizeof a),
                          vtr_printable(m0, strlen(m0), b, sizeof b));
        vtr_embedding_index_close(ix);
        ix = NULL;
    }
    if (st == VTR_OK) {
        vtr_embedding_index_options o = {.dim = vtr_embedding_index_dim(first),
                                         .model = vtr_embedding_index_model(first)};
        st = vtr_embedding_index_writer_open(tmp, &o, &w, err);
    }
    vtr_embedding_index_close(first);
    for (int i = 0; i < n && st == VTR_OK; i++) {
        int64_t items;
        st = vtr_embedding_index_writer_add_index(w, parts[i], &items, err);
        stats->items += items;
    }
    if (st == VTR_OK)
        stats->rows = vtr_embedding_index_writer_pending_rows(w);
    if (st == VTR_OK)
        st = vtr_embedding_index_writer_commit(w, err);
    vtr_embedding_index_writer_close(w);
    if (st == VTR_OK && catalog)
        st = merge_catalogs(tmp, parts, n, err);
    if (st == VTR_OK && access(out, F_OK) == 0)
        st = vtr_fail(err, VTR_ERR_INVALID, "%s exists (appeared meanwhile)", out);
    if (st == VTR_OK && rename(tmp, out) != 0)
        st = vtr_fail_errno(err, "renaming %s to %s", tmp, out);
    if (st != VTR_OK)
        vtr_remove_flat_dir(tmp);
    free(tmp);
    return st;
}

/* ---- the join ------------------------------------------------------------------------ */

vtr_status vtr_shard_merge(const char *out, const char *const *parts, int n,
                           vtr_merge_stats *stats, vtr_error *err)
{
    vtr_merge_stats ignored;
    if (!stats)
        stats = &ignored;
    if (n < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "no parts to join");
    if (access(out, F_OK) == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s exists; the parts are joined into a new "
                        "store or index", out);
    const char **ordered = calloc((size_t)n, sizeof *ordered);
    if (!ordered)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = order_parts(parts, n, ordered, err);
    bool store = st == VTR_OK && exists_in(ordered[0], "meta.json");
    bool catalog = st == VTR_OK && exists_in(ordered[0], VTR_ARCHIVE_CATALOG);
    for (int i = 0; i < n && st == VTR_OK; i++) {
        bool is_store = exists_in(ordered[i], "meta.json");
        bool is_index = exists_in(ordered[i], "index.sqlite");
        if (!is_store && !is_index)
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: neither a feature store (meta.json) nor "
                          "an embedding index (index.sqlite)", ordered[i]);
        else if (is_store != store)
            st = vtr_fail(err, VTR_ERR_INVALID, "%s is %s, %s %s: join parts of one kind",
                          ordered[i], is_store ? "a feature store" : "an embedding index",
                          ordered[0], store ? "a feature store" : "an embedding index");
        else if (!store && exists_in(ordered[i], VTR_ARCHIVE_CATALOG) != catalog)
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s %s a catalog (%s) and index %s %s",
                          ordered[i], catalog ? "lacks" : "has", VTR_ARCHIVE_CATALOG,
                          ordered[0], catalog ? "has one" : "has none");
    }
    if (st == VTR_OK)
        st = store ? merge_stores(out, ordered, n, stats, err)
                   : merge_indexes(out, ordered, n, catalog, stats, err);
    free(ordered);
    return st;
}
