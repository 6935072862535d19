/* Text queries against an embedding index (text_search.h). */
#define _POSIX_C_SOURCE 200809L
#include "text_search.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
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

vtr_status vtr_search_results_fill(vtr_embedding_index *ix, vtr_catalog *cat,
                                   int64_t dataset_id, int64_t n, const int64_t *rows,
                                   const float *scores, vtr_search_result *results,
                                   vtr_error *err)
{
    for (int64_t j = 0; j < n; j++) {
        vtr_search_result *r = &results[j];
        r->row = rows[j];
        r->score = scores[j];
        r->duration_s = -1;
        vtr_status st = vtr_embedding_index_key(ix, r->row, &r->key, NULL, NULL, err);
        if (st != VTR_OK)
            return st;
        vtr_item item;
        vtr_error miss;
        if (!cat || vtr_catalog_find_item(cat, dataset_id, r->key, &item, &miss) != VTR_OK)
            continue; /* not in the catalog: key only */
        r->duration_s = item.duration_s;
        if (item.path && !(r->path = strdup(item.path)))
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        vtr_item_free(&item);
        if (st != VTR_OK)
            return st;
    }
    return VTR_OK;
}

/* Items scored per call of vtr_embedder_score on the multi-vector path. */
#define SCAN_ITEMS 256

/* Whether (s, r) ranks before (best, best_row): higher score first, then lower row; a NaN
 * score after every number. */
static bool ranks_before(float s, int64_t r, float best, int64_t best_row)
{
    if (isnan(s) || isnan(best))
        return !isnan(s) || (isnan(best) && r < best_row);
    return s > best || (s == best && r < best_row);
}

/* The multi-vector search of n queries: the index's items, the queries' vectors, and each
 * query's k best so far (rows: the item's first row, -1 for none yet; scores; levels). */
typedef struct item_scan {
    vtr_embedder *e;
    vtr_embedding_index *ix;
    vtr_embedding_index_items it;
    int64_t n, k;
    const float *q;
    const int *phrases;
    int64_t *rows;
    float *scores, *levels;
    float *vec, *sc, *lv; /* a block's vectors, scores and levels */
    int64_t *counts;      /* a block's vector counts */
} item_scan;

/* Scores the items items[0 .. m-1] (m <= SCAN_ITEMS) against queries q0 .. q0+nq-1 and keeps
 * each query's k best. */
static vtr_status scan_block(item_scan *s, int64_t q0, int64_t nq, const int64_t *items,
                             int64_t m, vtr_error *err)
{
    size_t E = (size_t)vtr_embedder_dim(s->e), P = (size_t)vtr_embedder_text_vectors(s->e);
    const vtr_embedding_index_items *it = &s->it;
    vtr_status st = VTR_OK;
    float *v = s->vec;
    for (int64_t j = 0; j < m; j++) {
        int64_t i = items[j];
        s->counts[j] = it->count[i];
        for (int64_t r = it->first[i]; r < it->first[i] + it->count[i]; r++) {
            if (isnan(it->norm[r]))
                return vtr_fail(err, VTR_ERR_UNSUPPORTED, "row %lld records no norm (the index "
                                "was made by an older vtr): build it again", (long long)r);
            if ((st = vtr_embedding_index_row(s->ix, r, v, err)))
                return st;
            for (size_t d = 0; d < E; d++)
                v[d] *= it->norm[r];
            v += E;
        }
    }
    if ((st = vtr_embedder_score(s->e, nq, s->q + (size_t)q0 * P * E, s->phrases + 2 * q0, m,
                                 s->counts, s->vec, s->sc, s->lv, err)))
        return st;
    int64_t k = s->k;
    for (int64_t a = 0; a < nq; a++)
        for (int64_t j = 0; j < m; j++) {
            float sc = s->sc[a * m + j];
            int64_t row = it->first[items[j]], *qr = s->rows + (q0 + a) * k;
            float *qs = s->scores + (q0 + a) * k, *ql = s->levels + (q0 + a) * k * 3;
            if (qr[k - 1] >= 0 && !ranks_before(sc, row, qs[k - 1], qr[k - 1]))
                continue;
            int64_t p = k - 1; /* shift the worse ones down */
            while (p > 0 && (qr[p - 1] < 0 || ranks_before(sc, row, qs[p - 1], qr[p - 1]))) {
                qr[p] = qr[p - 1];
                qs[p] = qs[p - 1];
                memcpy(ql + p * 3, ql + (p - 1) * 3, 3 * sizeof *ql);
                p--;
            }
            qr[p] = row;
            qs[p] = sc;
            for (int l = 0; l < 3; l++)
                ql[p * 3 + l] = s->lv[(size_t)l * (size_t)(nq * m) + (size_t)(a * m + j)];
        }
    return VTR_OK;
}

/* The item whose first row is row, by bisection (items are in row order); -1 if none. */
static int64_t item_of_row(const vtr_embedding_index_items *it, int64_t row)
{
    int64_t lo = 0, hi = it->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (it->first[mid] == row)
            return mid;
        if (it->first[mid] < row)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Pre-selection: each query's `preselect` best items by the global level alone, through the
 * top-k search over the items' first rows (the global vectors); then each query's
 * candidates are scored. */
static vtr_status scan_preselected(item_scan *s, int64_t preselect, int64_t *ids,
                                   int64_t *n_cand, vtr_error *err)
{
    const vtr_embedding_index_items *it = &s->it;
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(s->ix);
    int64_t N = vtr_embedding_index_rows(s->ix), words = N / 64 + 1;
    size_t E = (size_t)vtr_embedder_dim(s->e), P = (size_t)vtr_embedder_text_vectors(s->e);
    size_t nc = (size_t)s->n * (size_t)preselect;
    uint64_t *skip = malloc((size_t)words * sizeof *skip);
    float *glob = malloc((size_t)s->n * E * sizeof *glob), *gs = malloc(nc * sizeof *gs);
    int64_t *cand = malloc(nc * sizeof *cand), found = 0;
    vtr_status st = VTR_OK;
    if (!skip || !glob || !gs || !cand) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory pre-selecting %lld items",
                      (long long)preselect);
        goto end;
    }
    memset(skip, 0xff, (size_t)words * sizeof *skip);
    for (int64_t i = 0; i < it->n; i++)
        vtr_topk_keep_row(skip, it->first[i]);
    for (int64_t q = 0; q < s->n; q++)
        memcpy(glob + (size_t)q * E, s->q + (size_t)q * P * E, E * sizeof *glob);
    vtr_topk_matrix globals = *m;
    globals.skip = skip;
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {s->n, (int64_t)E}, .data = glob};
    if ((st = vtr_topk_search(&globals, &qt, preselect, NULL, cand, gs, &found, err)))
        goto end;
    *n_cand = found;
    for (int64_t q = 0; st == VTR_OK && q < s->n; q++)
        for (int64_t j0 = 0; st == VTR_OK && j0 < found; j0 += SCAN_ITEMS) {
            int64_t mj = found - j0 < SCAN_ITEMS ? found - j0 : SCAN_ITEMS;
            for (int64_t j = 0; j < mj; j++)
                ids[j] = item_of_row(it, cand[q * preselect + j0 + j]);
            st = scan_block(s, q, 1, ids, mj, err);
        }
end:
    free(skip);
    free(glob);
    free(gs);
    free(cand);
    return st;
}

/* Models that score several vectors per item (embedder.h): the live items' vectors (rows
 * times their norms), all of them or each query's pre-selection, scored by the model
 * against the n embedded queries; the k best items per query kept in rows (the item's
 * first row), scores and levels (n x k x 3). */
static vtr_status scan_items(vtr_embedder *e, vtr_embedding_index *ix, int64_t n,
                             const float *q, const int *phrases, int64_t k, int64_t preselect,
                             int64_t *rows, float *scores, float *levels, int64_t *live,
                             vtr_error *err)
{
    item_scan s = {.e = e, .ix = ix, .n = n, .k = k, .q = q, .phrases = phrases, .rows = rows,
                   .scores = scores, .levels = levels};
    vtr_status st = vtr_embedding_index_items_read(ix, &s.it, err);
    if (st != VTR_OK)
        return st;
    size_t E = (size_t)vtr_embedder_dim(e), nk = (size_t)n * (size_t)k;
    for (size_t i = 0; i < nk; i++) {
        rows[i] = -1;
        scores[i] = -INFINITY;
    }
    int64_t max_count = 1;
    for (int64_t i = 0; i < s.it.n; i++)
        max_count = s.it.count[i] > max_count ? s.it.count[i] : max_count;
    bool all = preselect <= 0 || preselect >= s.it.n;
    int64_t scored = s.it.n; /* the items scored for each query */
    size_t per_call = all ? (size_t)n : 1;
    s.vec = malloc(((size_t)SCAN_ITEMS * (size_t)max_count * E +
                    4 * per_call * SCAN_ITEMS) * sizeof *s.vec);
    s.counts = malloc(SCAN_ITEMS * sizeof *s.counts);
    int64_t *ids = malloc(SCAN_ITEMS * sizeof *ids);
    if (!s.vec || !s.counts || !ids) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory scoring %lld items", (long long)s.it.n);
        goto end;
    }
    s.sc = s.vec + (size_t)SCAN_ITEMS * (size_t)max_count * E;
    s.lv = s.sc + per_call * SCAN_ITEMS;
    if (!all) {
        st = scan_preselected(&s, preselect, ids, &scored, err);
        goto end;
    }
    for (int64_t i0 = 0; st == VTR_OK && i0 < s.it.n; i0 += SCAN_ITEMS) {
        int64_t m = s.it.n - i0 < SCAN_ITEMS ? s.it.n - i0 : SCAN_ITEMS;
        for (int64_t j = 0; j < m; j++)
            ids[j] = i0 + j;
        st = scan_block(&s, 0, n, ids, m, err);
    }
end:
    free(s.vec);
    free(s.counts);
    free(ids);
    *live = scored < k ? scored : k;
    return st;
}

vtr_status vtr_text_search(vtr_embedder *e, vtr_embedding_index *ix,
                           const vtr_approx_index *approx, vtr_topk_cuda *gpu, vtr_catalog *cat,
                           int64_t dataset_id,
                           int64_t n, const char *const *queries,
                           const char *const *graphs, int64_t k, int64_t preselect,
                           vtr_search_result *results, int64_t *found, int *phrases,
                           vtr_error *err)
{
    if (n == 0)
        return VTR_OK;
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "k = %lld is not >= 1", (long long)k);
    if (preselect > 0 && vtr_embedder_levels(e) == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "pre-selection ranks items by an HGR model's "
                        "global level; %s is not an HGR model", vtr_embedder_checkpoint(e));
    int64_t E = vtr_embedder_dim(e), per = vtr_embedder_text_vectors(e);
    size_t nk = (size_t)n * (size_t)k;
    float *q = malloc((size_t)n * (size_t)(per * E) * sizeof *q);
    float *scores = malloc(nk * sizeof *scores), *levels = malloc(3 * nk * sizeof *levels);
    int64_t *rows = malloc(nk * sizeof *rows), *qfound = malloc((size_t)n * sizeof *qfound);
    int *ph = malloc(2 * (size_t)n * sizeof *ph);
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < nk; i++)
        results[i] = (vtr_search_result){.row = -1, .duration_s = -1,
                                         .levels = {NAN, NAN, NAN}};
    if (!q || !scores || !levels || !rows || !qfound || !ph) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld queries", (long long)n);
        goto end;
    }
    if ((st = vtr_embedder_embed_texts(e, n, queries, graphs, q, ph, err)))
        goto end;
    if (phrases)
        memcpy(phrases, ph, 2 * (size_t)n * sizeof *ph);
    int64_t live = 0;
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {n, E}, .data = q};
    if (per > 1)
        st = scan_items(e, ix, n, q, ph, k, preselect, rows, scores, levels, &live, err);
    else if (approx)
        st = vtr_approx_search(approx, ix, &qt, k, NULL, rows, scores, qfound, err);
    else if (gpu && k <= VTR_TOPK_CUDA_MAX_K)
        st = vtr_topk_cuda_search(gpu, &qt, k, rows, scores, &live, err);
    else
        st = vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, k, NULL, rows, scores, &live,
                             err);
    if (st)
        goto end;
    for (int64_t i = 0; i < n; i++) {
        if (per > 1 || !approx)
            qfound[i] = live;
        if (found)
            found[i] = qfound[i];
        for (int64_t j = 0; per > 1 && j < qfound[i]; j++)
            memcpy(results[i * k + j].levels, levels + (i * k + j) * 3,
                   sizeof results->levels);
        if ((st = vtr_search_results_fill(ix, cat, dataset_id, qfound[i], rows + i * k,
                                          scores + i * k, results + i * k, err)))
            goto end;
    }
end:
    if (st != VTR_OK)
        vtr_search_results_free(results, (int64_t)nk);
    free(q);
    free(scores);
    free(levels);
    free(rows);
    free(qfound);
    free(ph);
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

/* Opens the approximate index of s->ix, the index at dir, as s->approx_mode asks
 * (text_search.h). */
static vtr_status open_approx(vtr_text_searcher *s, const char *dir, vtr_error *err)
{
    bool always = s->approx_mode == VTR_APPROX_ALWAYS;
    if (s->approx_mode == VTR_APPROX_NEVER ||
        (!always && vtr_embedding_index_live_rows(s->ix) < s->approx_min_rows))
        return VTR_OK; /* small: one exact pass is as fast */
    if (vtr_embedder_text_vectors(s->e) > 1) {
        if (!always)
            return VTR_OK;
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: approximate search is for models of "
                        "one vector per item; %s scores several (HGR: use pre-selection)",
                        dir, vtr_embedder_checkpoint(s->e));
    }
    vtr_error why;
    vtr_status st = vtr_approx_index_open(dir, &s->approx, &why);
    if (st == VTR_OK && (st = vtr_approx_index_check(s->approx, s->ix, NULL, &why)) != VTR_OK)
        vtr_error_context(&why, "index %s", dir);
    if (st == VTR_OK)
        return VTR_OK;
    vtr_approx_index_close(s->approx);
    s->approx = NULL;
    if (always) {
        if (err)
            *err = why;
        return st;
    }
    if (st != VTR_ERR_NOT_FOUND)
        snprintf(s->approx_note, sizeof s->approx_note, "%s: searching exactly", why.msg);
    return VTR_OK;
}

/* GPU o->device_index: a VSE model's index rows copied there (one vector per item, the
 * search exact there); an HGR model run there (its query encoders and score blocks; the
 * items ranked on the CPU from their scores). */
static vtr_status open_gpu(const vtr_text_searcher_options *o, vtr_text_searcher *s,
                           vtr_error *err)
{
    vtr_status st = vtr_cuda_init(o->device_index, NULL, 0, err);
    if (st == VTR_OK && vtr_embedder_text_vectors(s->e) > 1)
        st = vtr_embedder_use_device(s->e, VTR_DEVICE_CUDA, err);
    else if (st == VTR_OK)
        st = vtr_topk_cuda_new(vtr_embedding_index_matrix(s->ix), &s->gpu, err);
    if (st)
        vtr_error_context(err, "index %s", o->index);
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
    if (st == VTR_OK && o->device == VTR_DEVICE_CUDA)
        st = open_gpu(o, s, err);
    else if (st == VTR_OK) {
        s->approx_mode = o->approx;
        s->approx_min_rows = o->approx_min_rows > 0 ? o->approx_min_rows : VTR_APPROX_MIN_ROWS;
        st = open_approx(s, o->index, err);
    }
    if (st == VTR_OK)
        st = open_catalog(o, s, err);
    if (st != VTR_OK)
        vtr_text_searcher_close(s);
    return st;
}

vtr_status vtr_text_searcher_reopen_approx(vtr_text_searcher *s, const char *dir,
                                           vtr_error *err)
{
    vtr_approx_index_close(s->approx);
    s->approx = NULL;
    s->approx_note[0] = 0;
    return open_approx(s, dir, err);
}

void vtr_text_searcher_close(vtr_text_searcher *s)
{
    vtr_topk_cuda_free(s->gpu);
    vtr_catalog_close(s->cat);
    vtr_approx_index_close(s->approx);
    vtr_embedder_close(s->e);
    vtr_embedding_index_close(s->ix);
    *s = (vtr_text_searcher){.dataset_id = -1};
}
