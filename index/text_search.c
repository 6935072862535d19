/* Text queries against an embedding index (text_search.h). */
#define _POSIX_C_SOURCE 200809L
#include "text_search.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/archive_index.h"
#include "lib/file.h"
#include "lib/json.h"

void vtr_index_model_ref_free(vtr_index_model_ref *r)
{
    if (!r)
        return;
    free(r->model_id);
    free(r->checkpoint);
    memset(r, 0, sizeof *r);
}

static bool is_sha256_hex(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]))
            return false;
    return n == 64;
}

vtr_status vtr_index_model_ref_parse(const char *text, vtr_index_model_ref *out,
                                     vtr_error *err)
{
    memset(out, 0, sizeof *out);
    if (is_sha256_hex(text)) {
        if (!(out->model_id = strdup(text)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        return VTR_OK;
    }
    json_t *j = json_loads(text, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "model_id"));
    const char *ckpt = json_string_value(json_object_get(j, "checkpoint"));
    vtr_status st = VTR_OK;
    if (!id || !is_sha256_hex(id))
        st = vtr_fail(err, VTR_ERR_FORMAT, "the index records no model id (its model is "
                      "\"%.60s\")", text);
    else if (!(out->model_id = strdup(id)) || (ckpt && !(out->checkpoint = strdup(ckpt)))) {
        vtr_index_model_ref_free(out);
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    json_decref(j);
    return st;
}

char *vtr_index_model_text(const char *format, const char *model_id, const char *checkpoint)
{
    json_t *j = json_pack("{s:s, s:s, s:s}", "format", format, "model_id", model_id,
                          "checkpoint", checkpoint);
    char *text = j ? json_dumps(j, VTR_JSON_FLAGS | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return text;
}

vtr_status vtr_text_search_check(const vtr_embedder *e, const vtr_embedding_index *ix,
                                 vtr_error *err)
{
    vtr_index_model_ref ref;
    vtr_status st = vtr_index_model_ref_parse(vtr_embedding_index_model(ix), &ref, err);
    if (st != VTR_OK)
        return st;
    if (strcmp(ref.model_id, vtr_embedder_model_id(e)) != 0)
        st = vtr_fail(err, VTR_ERR_INVALID, "the index was made with model %.12s... (%s%s); "
                      "%s is model %.12s...", ref.model_id,
                      ref.checkpoint ? "checkpoint " : "no checkpoint recorded",
                      ref.checkpoint ? ref.checkpoint : "", vtr_embedder_checkpoint(e),
                      vtr_embedder_model_id(e));
    else if (vtr_embedding_index_dim(ix) != vtr_embedder_dim(e))
        st = vtr_fail(err, VTR_ERR_INVALID, "the index has %lld dimensions; the model embeds "
                      "in %lld", (long long)vtr_embedding_index_dim(ix),
                      (long long)vtr_embedder_dim(e));
    vtr_index_model_ref_free(&ref);
    return st;
}

void vtr_search_results_free(vtr_search_result *results, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        free(results[i].key);
        free(results[i].path);
        results[i].key = results[i].path = NULL;
    }
}

vtr_status vtr_text_search(vtr_embedder *e, vtr_embedding_index *ix, vtr_catalog *cat,
                           int64_t dataset_id, int64_t n, const char *const *queries, int64_t k,
                           vtr_search_result *results, int64_t *found, vtr_error *err)
{
    if (n == 0)
        return VTR_OK;
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "k = %lld is not >= 1", (long long)k);
    int64_t E = vtr_embedder_dim(e);
    size_t nk = (size_t)n * (size_t)k;
    float *q = malloc((size_t)n * (size_t)E * sizeof *q), *scores = malloc(nk * sizeof *scores);
    int64_t *rows = malloc(nk * sizeof *rows);
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < nk; i++)
        results[i] = (vtr_search_result){.row = -1, .duration_s = -1};
    if (!q || !scores || !rows) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld queries", (long long)n);
        goto end;
    }
    if ((st = vtr_embedder_embed_texts(e, n, queries, q, err)))
        goto end;
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {n, E}, .data = q};
    int64_t live;
    if ((st = vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, k, NULL, rows, scores, &live,
                              err)))
        goto end;
    for (int64_t i = 0; i < n; i++) {
        if (found)
            found[i] = live;
        for (int64_t j = 0; j < live; j++) {
            vtr_search_result *r = &results[i * k + j];
            r->row = rows[i * k + j];
            r->score = scores[i * k + j];
            if ((st = vtr_embedding_index_key(ix, r->row, &r->key, NULL, NULL, err)))
                goto end;
            if (!cat)
                continue;
            vtr_item item;
            vtr_error miss;
            if (vtr_catalog_find_item(cat, dataset_id, r->key, &item, &miss) != VTR_OK)
                continue; /* not in the catalog: key only */
            r->duration_s = item.duration_s;
            if (item.path && !(r->path = strdup(item.path)))
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            vtr_item_free(&item);
            if (st != VTR_OK)
                goto end;
        }
    }
end:
    if (st != VTR_OK)
        vtr_search_results_free(results, (int64_t)nk);
    free(q);
    free(scores);
    free(rows);
    return st;
}

/* Opens the model for s->ix: o->model, or the checkpoint the index records. */
static vtr_status open_model(const vtr_text_searcher_options *o, vtr_text_searcher *s,
                             vtr_error *err)
{
    vtr_index_model_ref ref = {0};
    const char *model = o->model;
    vtr_status st;
    if (!model) {
        if ((st = vtr_index_model_ref_parse(vtr_embedding_index_model(s->ix), &ref, err))) {
            vtr_error_context(err, "index %s: name the model with --model", o->index);
            return st;
        }
        if (!ref.checkpoint) {
            vtr_index_model_ref_free(&ref);
            return vtr_fail(err, VTR_ERR_INVALID, "index %s records no checkpoint path: name "
                            "the model with --model", o->index);
        }
        model = ref.checkpoint;
    }
    st = vtr_embedder_open(model, o->vocab, o->threads, &s->e, err);
    if (st != VTR_OK && model == ref.checkpoint) /* moved or deleted since the index was made */
        vtr_error_context(err, "index %s: its model (name it with --model if it moved)",
                          o->index);
    vtr_index_model_ref_free(&ref);
    return st;
}

/* Opens the catalog: o->catalog, or vtr-index's beside the index when it is there. */
static vtr_status open_catalog(const vtr_text_searcher_options *o, vtr_text_searcher *s,
                               vtr_error *err)
{
    char *default_catalog = NULL;
    const char *catalog = o->catalog;
    if (!catalog) {
        if (!(default_catalog = vtr_path_join(o->index, VTR_ARCHIVE_CATALOG)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        if (access(default_catalog, F_OK) == 0)
            catalog = default_catalog;
    }
    vtr_status st = VTR_OK;
    if (catalog) {
        st = vtr_catalog_open_existing(catalog, &s->cat, err);
        if (st == VTR_OK)
            st = vtr_catalog_find_dataset(s->cat, o->dataset ? o->dataset : VTR_ARCHIVE_DATASET,
                                          &s->dataset_id, err);
        if (st == VTR_ERR_NOT_FOUND && !o->dataset && catalog == default_catalog) {
            vtr_catalog_close(s->cat); /* a catalog of something else: keys only */
            s->cat = NULL;
            st = VTR_OK;
        } else if (st != VTR_OK) {
            vtr_error_context(err, "catalog %s", catalog);
        }
    }
    free(default_catalog);
    return st;
}

vtr_status vtr_text_searcher_open(const vtr_text_searcher_options *o, vtr_text_searcher *s,
                                  vtr_error *err)
{
    *s = (vtr_text_searcher){.dataset_id = -1};
    vtr_status st = vtr_embedding_index_open(o->index, &s->ix, err);
    if (st == VTR_OK)
        st = open_model(o, s, err);
    if (st == VTR_OK && (st = vtr_text_search_check(s->e, s->ix, err)) != VTR_OK)
        vtr_error_context(err, "index %s", o->index);
    if (st == VTR_OK)
        st = open_catalog(o, s, err);
    if (st != VTR_OK)
        vtr_text_searcher_close(s);
    return st;
}

void vtr_text_searcher_close(vtr_text_searcher *s)
{
    vtr_catalog_close(s->cat);
    vtr_embedder_close(s->e);
    vtr_embedding_index_close(s->ix);
    *s = (vtr_text_searcher){.dataset_id = -1};
}
