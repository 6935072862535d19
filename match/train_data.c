/* Splits, vocabularies and padded batches of a VSE run (train_data.h). */
#define _POSIX_C_SOURCE 200809L
#include "train_data.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "lib/hash.h"
#include "lib/json.h"
#include "lib/rng.h"
#include "lib/string_table.h"

/* Frees a split's caption encoding (either kind). */
static void free_encoding(vtr_split *s)
{
    free(s->cap_offsets);
    free(s->ids);
    free(s->verb_masks);
    free(s->noun_masks);
    free(s->node_roles);
    free(s->rel_edges);
    s->cap_offsets = NULL;
    s->ids = NULL;
    s->verb_masks = s->noun_masks = NULL;
    s->node_roles = NULL;
    s->rel_edges = NULL;
    s->max_words = 0;
}

void vtr_split_free(vtr_split *s)
{
    if (!s)
        return;
    if (s->keys)
        for (int i = 0; i < s->n_items; i++)
            free(s->keys[i]);
    if (s->texts)
        for (int j = 0; j < s->n_caps; j++)
            free(s->texts[j]);
    free(s->name);
    free(s->keys);
    free(s->store_index);
    free(s->cap_item);
    free(s->texts);
    free(s->cap_text);
    free_encoding(s);
    memset(s, 0, sizeof *s);
}

int vtr_frame_subsample(int *idx, int n, int cap)
{
    if (cap > 0)
        return vtr_hgr_sample_frames(idx, n, cap);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    return n;
}

/* Grows a caption array to hold at least need entries. */
static vtr_status grow_captions(vtr_split *s, size_t need, size_t *cap, vtr_error *err)
{
    if (need <= *cap)
        return VTR_OK;
    size_t n = *cap ? 2 * *cap : 1024;
    while (n < need)
        n *= 2;
    int *item = realloc(s->cap_item, n * sizeof *item);
    if (item)
        s->cap_item = item;
    char **texts = item ? realloc(s->texts, n * sizeof *texts) : NULL;
    if (texts)
        s->texts = texts;
    if (!item || !texts)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading captions");
    *cap = n;
    return VTR_OK;
}

vtr_status vtr_split_load(vtr_catalog *cat, const char *dataset, const char *split,
                          const vtr_feature_store_reader *store, int max_frames_cap,
                          vtr_split *out, vtr_error *err)
{
    vtr_split s;
    vtr_item_ref_list items = {0};
    vtr_caption_list caps = {0};
    vtr_string_table *texts = NULL;
    size_t caps_cap = 0;
    int64_t dataset_id;
    vtr_status st;
    memset(&s, 0, sizeof s);
    memset(out, 0, sizeof *out);
    s.store = store;
    s.max_frames_cap = max_frames_cap;

    if ((st = vtr_catalog_find_dataset(cat, dataset, &dataset_id, err)) ||
        (st = vtr_catalog_split_items(cat, dataset_id, split, &items, err)))
        goto fail;
    if (items.n == 0) {
        char names[256];
        if ((st = vtr_catalog_split_names(cat, dataset_id, names, sizeof names, err)) == VTR_OK)
            st = vtr_fail(err, VTR_ERR_INVALID, "dataset '%s' has no items in split '%s' (its "
                          "splits: %s)", dataset, split, names[0] ? names : "none");
        goto fail;
    }
    if (items.n > INT_MAX) {
        st = vtr_fail(err, VTR_ERR_INVALID, "split '%s' has more than %d items", split, INT_MAX);
        goto fail;
    }
    s.name = strdup(split);
    s.keys = calloc(items.n, sizeof *s.keys);
    s.store_index = malloc(items.n * sizeof *s.store_index);
    texts = vtr_string_table_new();
    if (!s.name || !s.keys || !s.store_index || !texts) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading split '%s'", split);
        goto fail;
    }
    const int64_t *offsets = vtr_feature_store_reader_offsets(store);
    for (size_t i = 0; i < items.n; i++) {
        const char *key = items.items[i].key;
        if (!(s.keys[i] = strdup(key))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading split '%s'", split);
            goto fail;
        }
        s.n_items = (int)i + 1;
        int64_t idx = vtr_feature_store_reader_find(store, key);
        if (idx < 0) {
            st = vtr_fail(err, VTR_ERR_INVALID, "item '%s' of split '%s' is not in the feature "
                          "store", key, split);
            goto fail;
        }
        int64_t rows = offsets[idx + 1] - offsets[idx];
        if (rows < 1 || rows > INT_MAX) {
            st = vtr_fail(err, VTR_ERR_INVALID, "item '%s' of split '%s' has %lld feature rows",
                          key, split, (long long)rows);
            goto fail;
        }
        s.store_index[i] = idx;
        int kept = max_frames_cap > 0 && rows > max_frames_cap ? max_frames_cap : (int)rows;
        if (kept > s.max_frames)
            s.max_frames = kept;

        if ((st = vtr_catalog_item_captions(cat, items.items[i].id, &caps, err)))
            goto fail;
        if (caps.n == 0) {
            st = vtr_fail(err, VTR_ERR_INVALID, "item '%s' of split '%s' has no captions", key,
                          split);
            goto fail;
        }
        if ((size_t)s.n_caps + caps.n > INT_MAX) {
            st = vtr_fail(err, VTR_ERR_INVALID, "split '%s' has more than %d captions", split,
                          INT_MAX);
            goto fail;
        }
        if ((st = grow_captions(&s, (size_t)s.n_caps + caps.n, &caps_cap, err)))
            goto fail;
        for (size_t k = 0; k < caps.n; k++) {
            const char *text = caps.captions[k].text;
            int64_t tid;
            char *copy = strdup(text);
            if (!copy) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading captions");
                goto fail;
            }
            s.texts[s.n_caps] = copy;
            s.cap_item[s.n_caps] = (int)i;
            s.n_caps++;
            if ((st = vtr_string_table_insert(texts, text, strlen(text), &tid, NULL, err)))
                goto fail;
        }
        vtr_caption_list_free(&caps);
    }
    /* text ids, in caption order: the string table numbers texts as first inserted */
    if (!(s.cap_text = malloc((size_t)s.n_caps * sizeof *s.cap_text))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading captions");
        goto fail;
    }
    for (int j = 0; j < s.n_caps; j++)
        s.cap_text[j] = (int)vtr_string_table_find(texts, s.texts[j], strlen(s.texts[j]));
    s.n_texts = (int)vtr_string_table_count(texts);
    vtr_string_table_free(texts);
    vtr_item_ref_list_free(&items);
    *out = s;
    return VTR_OK;
fail:
    vtr_caption_list_free(&caps);
    vtr_item_ref_list_free(&items);
    vtr_string_table_free(texts);
    vtr_split_free(&s);
    return st;
}

void vtr_split_truncate(vtr_split *s, int n)
{
    if (n < 1 || n >= s->n_items)
        return;
    int caps = 0;
    while (caps < s->n_caps && s->cap_item[caps] < n) /* captions follow item order */
        caps++;
    for (int i = n; i < s->n_items; i++)
        free(s->keys[i]);
    for (int j = caps; j < s->n_caps; j++)
        free(s->texts[j]);
    int texts = 0, frames = 0;
    for (int j = 0; j < caps; j++)
        texts = s->cap_text[j] + 1 > texts ? s->cap_text[j] + 1 : texts;
    const int64_t *off = vtr_feature_store_reader_offsets(s->store);
    for (int i = 0; i < n; i++) {
        int64_t rows = off[s->store_index[i] + 1] - off[s->store_index[i]];
        int kept = s->max_frames_cap > 0 && rows > s->max_frames_cap ? s->max_frames_cap
                                                                      : (int)rows;
        frames = kept > frames ? kept : frames;
    }
    s->n_items = n;
    s->n_caps = caps;
    s->n_texts = texts;
    s->max_frames = frames;
    free_encoding(s);
}

vtr_status vtr_split_build_vocab(const vtr_split *s, vtr_tokenizer_mode mode, int64_t threshold,
                                 vtr_vocab_layout layout, vtr_vocab **out, vtr_error *err)
{
    vtr_tokens toks = {0};
    vtr_status st = VTR_OK;
    *out = NULL;
    vtr_vocab_counter *counter = vtr_vocab_counter_new();
    if (!counter)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory building the vocabulary");
    for (int j = 0; j < s->n_caps && st == VTR_OK; j++) {
        st = vtr_tokenize(s->texts[j], mode, &toks, err);
        if (st == VTR_OK)
            st = vtr_vocab_counter_add(counter, toks.tokens, toks.n, err);
        else
            vtr_error_context(err, "caption %d of item '%s'", j, s->keys[s->cap_item[j]]);
    }
    if (st == VTR_OK)
        st = vtr_vocab_build(counter, threshold, VTR_VOCAB_FIRST_SEEN, layout, out, err);
    vtr_tokens_free(&toks);
    vtr_vocab_counter_free(counter);
    return st;
}

vtr_status vtr_split_encode_captions(vtr_split *s, const vtr_vocab *vocab,
                                     vtr_tokenizer_mode mode, vtr_error *err)
{
    vtr_vocab_specials sp = vtr_vocab_special_ids(vocab);
    if (vtr_vocab_layout_of(vocab) != VTR_VOCAB_VSE || sp.start < 0 || sp.end < 0 || sp.mask < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "the vocabulary is not a VSE vocabulary "
                        "(<start>, <end>, <mask>)");
    vtr_tokens toks = {0};
    vtr_status st = VTR_OK;
    size_t cap = 0, used = 0;
    int *ids = NULL, max_words = 0;
    int64_t *offsets = malloc(((size_t)s->n_caps + 1) * sizeof *offsets);
    if (!offsets)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory encoding captions");
    offsets[0] = 0;
    for (int j = 0; j < s->n_caps; j++) {
        if ((st = vtr_tokenize(s->texts[j], mode, &toks, err))) {
            vtr_error_context(err, "caption %d of item '%s'", j, s->keys[s->cap_item[j]]);
            goto end;
        }
        if (toks.n > (size_t)INT_MAX - 2) {
            st = vtr_fail(err, VTR_ERR_INVALID, "caption %d of item '%s' is too long", j,
                          s->keys[s->cap_item[j]]);
            goto end;
        }
        if (used + toks.n + 2 > cap) {
            size_t n = cap ? 2 * cap : 4096;
            while (n < used + toks.n + 2)
                n *= 2;
            int *grown = realloc(ids, n * sizeof *ids);
            if (!grown) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory encoding captions");
                goto end;
            }
            ids = grown;
            cap = n;
        }
        size_t count;
        if ((st = vtr_vocab_encode(vocab, toks.tokens, toks.n, true, ids + used, &count, err)))
            goto end;
        used += count;
        offsets[j + 1] = (int64_t)used;
        if ((int)count > max_words)
            max_words = (int)count;
    }
    free_encoding(s);
    s->cap_offsets = offsets;
    s->ids = ids;
    s->max_words = max_words;
    offsets = NULL;
    ids = NULL;
end:
    vtr_tokens_free(&toks);
    free(offsets);
    free(ids);
    return st;
}

/* ---- HGR: captions with their role graphs ----------------------------------------- */

void vtr_graph_caption_scratch_free(vtr_graph_caption_scratch *sc)
{
    vtr_tokens_free(&sc->toks);
    free(sc->word_ids);
    memset(sc, 0, sizeof *sc);
}

vtr_status vtr_graph_caption_encode(vtr_graph_caption_scratch *sc, const vtr_vocab *vocab,
                                    const vtr_role_graph_shape *shape, const char *text,
                                    const char *graph, vtr_role_graph_tensors *t, vtr_error *err)
{
    vtr_status st = vtr_tokenize(text, VTR_TOKENIZE_WHITESPACE, &sc->toks, err);
    if (st == VTR_OK && sc->toks.n == 0)
        st = vtr_fail(err, VTR_ERR_INVALID, "the caption is empty");
    if (st == VTR_OK && sc->toks.n > sc->word_cap) {
        int *grown = realloc(sc->word_ids, sc->toks.n * sizeof *grown);
        if (!grown)
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory encoding captions");
        else {
            sc->word_ids = grown;
            sc->word_cap = sc->toks.n;
        }
    }
    size_t n = 0;
    if (st == VTR_OK)
        st = vtr_vocab_encode(vocab, sc->toks.tokens, sc->toks.n, false, sc->word_ids, &n, err);
    vtr_role_graph parsed = {0}; /* no graph: the root alone */
    if (st == VTR_OK && graph)
        st = vtr_role_graph_parse_text(graph, strlen(graph), text, &parsed, err);
    if (st == VTR_OK)
        st = vtr_role_graph_encode(&parsed, sc->word_ids, n, shape, t, err);
    vtr_role_graph_free(&parsed);
    return st;
}

typedef struct graph_walk {
    vtr_split *s;
    const vtr_vocab *vocab;
    const vtr_role_graph_shape *shape;
    int j;           /* the next caption of the split */
    vtr_graph_caption_scratch sc;
    int32_t *sent_ids; /* (W) */
} graph_walk;

static vtr_status graph_caption(void *ctx, const vtr_split_caption *c, vtr_error *err)
{
    graph_walk *w = ctx;
    vtr_split *s = w->s;
    const vtr_role_graph_shape *sh = w->shape;
    if (w->j >= s->n_caps) /* a split cut by vtr_split_truncate */
        return VTR_OK;
    int j = w->j++;
    const char *key = s->keys[s->cap_item[j]];
    if (strcmp(c->key, key) != 0 || strcmp(c->text, s->texts[j]) != 0)
        return vtr_fail(err, VTR_ERR_INVALID, "caption %d of item '%s' is not the catalog's "
                        "(the catalog changed while it was read?)", j, key);
    size_t W = (size_t)sh->max_words, NV = (size_t)sh->num_verbs, NN = (size_t)sh->num_nouns;
    size_t N = 1 + NV + NN;
    vtr_role_graph_tensors t = {.sent_ids = w->sent_ids,
                                .verb_masks = s->verb_masks + (size_t)j * NV * W,
                                .noun_masks = s->noun_masks + (size_t)j * NN * W,
                                .node_roles = s->node_roles + (size_t)j * (NV + NN),
                                .rel_edges = s->rel_edges + (size_t)j * N * N};
    vtr_status st = vtr_graph_caption_encode(&w->sc, w->vocab, sh, c->text, c->graph, &t, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "caption %d of item '%s'", j, key);
        return st;
    }
    s->n_graphless += !c->graph;
    memcpy(s->ids + s->cap_offsets[j], w->sent_ids, (size_t)t.sent_len * sizeof *s->ids);
    s->cap_offsets[j + 1] = s->cap_offsets[j] + t.sent_len;
    if (t.sent_len > s->max_words)
        s->max_words = t.sent_len;
    return VTR_OK;
}

vtr_status vtr_split_encode_graphs(vtr_split *s, vtr_catalog *cat, const char *dataset,
                                   const vtr_vocab *vocab, const vtr_role_graph_shape *shape,
                                   vtr_error *err)
{
    if (vtr_vocab_layout_of(vocab) != VTR_VOCAB_HGR)
        return vtr_fail(err, VTR_ERR_INVALID, "the vocabulary is not an HGR vocabulary");
    if (vtr_role_graph_num_nodes(shape) < 1 || shape->max_words < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "role graph shape out of range");
    int64_t dataset_id;
    vtr_status st = vtr_catalog_find_dataset(cat, dataset, &dataset_id, err);
    if (st != VTR_OK)
        return st;
    free_encoding(s);
    size_t n = (size_t)s->n_caps, W = (size_t)shape->max_words;
    size_t NV = (size_t)shape->num_verbs, NN = (size_t)shape->num_nouns, N = 1 + NV + NN;
    s->graph_shape = *shape;
    s->n_graphless = 0;
    s->cap_offsets = calloc(n + 1, sizeof *s->cap_offsets);
    s->ids = malloc(n * W * sizeof *s->ids);
    s->verb_masks = malloc(n * (NV ? NV : 1) * W);
    s->noun_masks = malloc(n * (NN ? NN : 1) * W);
    s->node_roles = malloc(n * (NV + NN ? NV + NN : 1) * sizeof *s->node_roles);
    s->rel_edges = malloc(n * N * N * sizeof *s->rel_edges);
    graph_walk w = {.s = s, .vocab = vocab, .shape = shape,
                    .sent_ids = malloc(W * sizeof *w.sent_ids)};
    if (!s->cap_offsets || !s->ids || !s->verb_masks || !s->noun_masks || !s->node_roles ||
        !s->rel_edges || !w.sent_ids)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory encoding captions");
    if (st == VTR_OK)
        st = vtr_catalog_split_caption_graphs(cat, dataset_id, s->name, graph_caption, &w, err);
    if (st == VTR_OK && w.j != s->n_caps)
        st = vtr_fail(err, VTR_ERR_INVALID, "split '%s': the catalog walked %d of its %d "
                      "captions (the catalog changed while it was read?)", s->name, w.j,
                      s->n_caps);
    vtr_graph_caption_scratch_free(&w.sc);
    free(w.sent_ids);
    if (st != VTR_OK) {
        vtr_error_context(err, "split '%s'", s->name);
        free_encoding(s);
    }
    return st;
}

void vtr_epoch_order(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, VTR_STREAM_ORDER + (uint64_t)epoch);
    vtr_rng_permutation(&rng, perm, n);
}

/* ---- batches ---------------------------------------------------------------------- */

void vtr_batcher_free(vtr_batcher *b)
{
    if (!b)
        return;
    free(b->frames);
    free(b->frame_lengths);
    free(b->ids);
    free(b->caption_lengths);
    free(b->rows);
    free(b->keep);
    free(b->verb_masks);
    free(b->noun_masks);
    free(b->node_roles);
    free(b->rel_edges);
    memset(b, 0, sizeof *b);
}

vtr_status vtr_batcher_init(vtr_batcher *b, const vtr_split *s, int max_batch, vtr_error *err)
{
    memset(b, 0, sizeof *b);
    if (max_batch < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "batch size %d is not >= 1", max_batch);
    if (!s->ids || !s->cap_offsets)
        return vtr_fail(err, VTR_ERR_INVALID, "split '%s': captions are not encoded", s->name);
    int64_t F = vtr_feature_store_reader_dim(s->store);
    if (F < 1 || F > INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store dim %lld", (long long)F);
    /* the largest raw set, for the scratch of vtr_frame_subsample */
    const int64_t *off = vtr_feature_store_reader_offsets(s->store);
    int64_t raw = 1;
    for (int i = 0; i < s->n_items; i++) {
        int64_t n = off[s->store_index[i] + 1] - off[s->store_index[i]];
        raw = n > raw ? n : raw;
    }
    b->split = s;
    b->F = (int)F;
    b->max_batch = max_batch;
    size_t T = (size_t)s->max_frames, L = (size_t)(s->max_words > 0 ? s->max_words : 1);
    b->frames = malloc((size_t)max_batch * T * (size_t)F * sizeof *b->frames);
    b->frame_lengths = malloc((size_t)max_batch * sizeof *b->frame_lengths);
    b->ids = malloc((size_t)max_batch * L * sizeof *b->ids);
    b->caption_lengths = malloc((size_t)max_batch * sizeof *b->caption_lengths);
    b->rows = malloc((size_t)raw * sizeof *b->rows);
    b->keep = malloc((T > L ? T : L) * sizeof *b->keep);
    bool graphs = s->verb_masks != NULL;
    if (graphs) {
        size_t NV = (size_t)s->graph_shape.num_verbs, NN = (size_t)s->graph_shape.num_nouns;
        size_t N = 1 + NV + NN;
        b->verb_masks = malloc((size_t)max_batch * (NV ? NV : 1) * L);
        b->noun_masks = malloc((size_t)max_batch * (NN ? NN : 1) * L);
        b->node_roles = malloc((size_t)max_batch * (NV + NN) * sizeof *b->node_roles);
        b->rel_edges = malloc((size_t)max_batch * N * N * sizeof *b->rel_edges);
    }
    if (!b->frames || !b->frame_lengths || !b->ids || !b->caption_lengths || !b->rows ||
        !b->keep || (graphs && (!b->verb_masks || !b->noun_masks || !b->node_roles ||
                                !b->rel_edges))) {
        vtr_batcher_free(b);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for batches of %d", max_batch);
    }
    return VTR_OK;
}

/* Copies row r of the store (float32 or float16) to dst (F floats). */
static void copy_row(float *dst, const vtr_tensor *rows, int r, int F)
{
    if (rows->dtype == VTR_F32) {
        memcpy(dst, (const float *)rows->data + (size_t)r * F, sizeof(float) * (size_t)F);
    } else {
        const uint16_t *h = (const uint16_t *)rows->data + (size_t)r * F;
        for (int d = 0; d < F; d++)
            dst[d] = vtr_half_to_float(h[d]);
    }
}

/* Writes item's (augmented) set to slot k of a batch with T = s->max_frames rows per slot;
 * returns its length. stream is its augmentation stream when aug is not NULL. */
static vtr_status put_set(vtr_batcher *b, int k, int item, const vtr_augment *aug,
                          uint64_t stream, vtr_error *err)
{
    const vtr_split *s = b->split;
    vtr_tensor rows;
    vtr_status st = vtr_feature_store_reader_item(s->store, s->store_index[item], &rows, err);
    if (st != VTR_OK)
        return st;
    int n = vtr_frame_subsample(b->rows, (int)rows.shape[0], s->max_frames_cap);
    int len = n;
    if (aug && aug->frame_drop > 0.0f)
        len = vtr_gpo_augment_set(b->keep, n, aug->frame_drop, aug->seed, stream);
    float *dst = b->frames + (size_t)k * (size_t)s->max_frames * (size_t)b->F;
    for (int t = 0; t < len; t++)
        copy_row(dst + (size_t)t * b->F, &rows, b->rows[aug && aug->frame_drop > 0.0f ?
                                                        b->keep[t] : t], b->F);
    b->frame_lengths[k] = len;
    return VTR_OK;
}

/* Writes caption cap's (augmented) ids to slot k (s->max_words per slot). */
static void put_caption(vtr_batcher *b, int k, int cap, const vtr_augment *aug, uint64_t stream)
{
    const vtr_split *s = b->split;
    const int *ids = s->ids + s->cap_offsets[cap];
    int n = (int)(s->cap_offsets[cap + 1] - s->cap_offsets[cap]);
    int *dst = b->ids + (size_t)k * (size_t)s->max_words;
    if (aug && aug->caption_hit > 0.0f)
        n = vtr_gpo_augment_caption(dst, ids, n, aug->vocab_size, aug->mask_id, aug->caption_hit,
                                    aug->seed, stream);
    else
        memcpy(dst, ids, sizeof(int) * (size_t)n);
    b->caption_lengths[k] = n;
    if (!s->verb_masks)
        return;
    /* the graph tensors (HGR: never augmented); masks with stride s->max_words, cut from
     * the split's W columns (no mask bit lies at or past the caption's length) */
    size_t W = (size_t)s->graph_shape.max_words, M = (size_t)s->max_words;
    size_t NV = (size_t)s->graph_shape.num_verbs, NN = (size_t)s->graph_shape.num_nouns;
    size_t N = 1 + NV + NN;
    for (size_t v = 0; v < NV; v++)
        memcpy(b->verb_masks + ((size_t)k * NV + v) * M,
               s->verb_masks + ((size_t)cap * NV + v) * W, M);
    for (size_t v = 0; v < NN; v++)
        memcpy(b->noun_masks + ((size_t)k * NN + v) * M,
               s->noun_masks + ((size_t)cap * NN + v) * W, M);
    memcpy(b->node_roles + (size_t)k * (NV + NN), s->node_roles + (size_t)cap * (NV + NN),
           (NV + NN) * sizeof *b->node_roles);
    memcpy(b->rel_edges + (size_t)k * N * N, s->rel_edges + (size_t)cap * N * N,
           N * N * sizeof *b->rel_edges);
}

/* Repacks the graph masks of B slots (stride s->max_words) to rows of L. */
static void pack_masks(uint8_t *masks, int B, int rows, size_t stride, size_t L)
{
    for (size_t r = 0; r < (size_t)B * (size_t)rows; r++)
        memmove(masks + r * L, masks + r * stride, L);
}

/* Repacks the slots (stride s->max_frames rows, s->max_words ids) to the batch's own T and
 * L in place, zero-padding, and sets b->batch. Slots only move to lower addresses, in
 * increasing order, so the copies never overwrite a slot not yet moved. */
static void pack(vtr_batcher *b, int B, bool frames, bool captions)
{
    const vtr_split *s = b->split;
    size_t F = (size_t)b->F;
    int T = 1, L = 1;
    for (int k = 0; frames && k < B; k++)
        T = b->frame_lengths[k] > T ? b->frame_lengths[k] : T;
    for (int k = 0; captions && k < B; k++)
        L = b->caption_lengths[k] > L ? b->caption_lengths[k] : L;
    for (int k = 0; frames && k < B; k++) {
        float *src = b->frames + (size_t)k * (size_t)s->max_frames * F;
        float *dst = b->frames + (size_t)k * (size_t)T * F;
        size_t len = (size_t)b->frame_lengths[k];
        memmove(dst, src, len * F * sizeof(float));
        memset(dst + len * F, 0, ((size_t)T - len) * F * sizeof(float));
    }
    for (int k = 0; captions && k < B; k++) {
        int *src = b->ids + (size_t)k * (size_t)s->max_words;
        int *dst = b->ids + (size_t)k * (size_t)L;
        size_t len = (size_t)b->caption_lengths[k];
        memmove(dst, src, len * sizeof(int));
        for (size_t t = len; t < (size_t)L; t++)
            dst[t] = 0;
    }
    if (captions && s->verb_masks) {
        pack_masks(b->verb_masks, B, s->graph_shape.num_verbs, (size_t)s->max_words, (size_t)L);
        pack_masks(b->noun_masks, B, s->graph_shape.num_nouns, (size_t)s->max_words, (size_t)L);
        b->hgr.captions = (vtr_hgr_captions){.B = B,
                                             .L = L,
                                             .ids = b->ids,
                                             .lengths = b->caption_lengths,
                                             .verb_masks = b->verb_masks,
                                             .noun_masks = b->noun_masks,
                                             .node_roles = b->node_roles,
                                             .rel_edges = b->rel_edges};
    }
    if (frames) {
        b->hgr.B = B;
        b->hgr.T = T;
        b->hgr.frames = b->frames;
        b->hgr.frame_lengths = b->frame_lengths;
    }
    b->batch = (vtr_vse_batch){.B = B,
                               .T = frames ? T : 0,
                               .frames = frames ? b->frames : NULL,
                               .frame_lengths = frames ? b->frame_lengths : NULL,
                               .L = captions ? L : 0,
                               .ids = captions ? b->ids : NULL,
                               .caption_lengths = captions ? b->caption_lengths : NULL};
}

vtr_status vtr_batcher_pairs(vtr_batcher *b, const int64_t *caps, int B, const vtr_augment *aug,
                             vtr_error *err)
{
    const vtr_split *s = b->split;
    if (B < 1 || B > b->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "batch of %d pairs (at most %d)", B, b->max_batch);
    for (int k = 0; k < B; k++) {
        int64_t c = caps[k];
        if (c < 0 || c >= s->n_caps)
            return vtr_fail(err, VTR_ERR_INVALID, "caption %lld out of range [0, %d)",
                            (long long)c, s->n_caps);
        uint64_t stream = 0;
        if (aug)
            stream = VTR_STREAM_AUGMENT +
                     2 * ((uint64_t)aug->epoch * (uint64_t)s->n_caps + (uint64_t)c);
        vtr_status st = put_set(b, k, s->cap_item[c], aug, stream, err);
        if (st != VTR_OK)
            return st;
        put_caption(b, k, (int)c, aug, stream + 1);
    }
    pack(b, B, true, true);
    return VTR_OK;
}

vtr_status vtr_batcher_items(vtr_batcher *b, int item0, int n, vtr_error *err)
{
    const vtr_split *s = b->split;
    if (n < 1 || n > b->max_batch || item0 < 0 || item0 > s->n_items - n)
        return vtr_fail(err, VTR_ERR_INVALID, "items %d .. %d of %d (batches of at most %d)",
                        item0, item0 + n - 1, s->n_items, b->max_batch);
    for (int k = 0; k < n; k++) {
        vtr_status st = put_set(b, k, item0 + k, NULL, 0, err);
        if (st != VTR_OK)
            return st;
    }
    pack(b, n, true, false);
    return VTR_OK;
}

vtr_status vtr_batcher_captions(vtr_batcher *b, int cap0, int n, vtr_error *err)
{
    const vtr_split *s = b->split;
    if (n < 1 || n > b->max_batch || cap0 < 0 || cap0 > s->n_caps - n)
        return vtr_fail(err, VTR_ERR_INVALID, "captions %d .. %d of %d (batches of at most %d)",
                        cap0, cap0 + n - 1, s->n_caps, b->max_batch);
    for (int k = 0; k < n; k++)
        put_caption(b, k, cap0 + k, NULL, 0);
    pack(b, n, false, true);
    return VTR_OK;
}

/* ---- a run's data ---------------------------------------------------------------- */

void vtr_train_data_close(vtr_train_data *d)
{
    if (!d)
        return;
    vtr_split_free(&d->train);
    vtr_split_free(&d->val);
    vtr_vocab_free(d->vocab);
    vtr_feature_store_reader_close(d->store);
    vtr_catalog_close(d->catalog);
    memset(d, 0, sizeof *d);
}

/* The vocabulary of the training split's captions (data.vocab_threshold), in layout. */
static vtr_status build_vocab(const vtr_train_options *o, vtr_vocab_layout layout,
                              vtr_train_data *d, vtr_error *err)
{
    vtr_status st = vtr_split_build_vocab(&d->train, o->tokenizer, o->vocab_threshold, layout,
                                          &d->vocab, err);
    d->vocab_built = true;
    if (st != VTR_OK)
        vtr_error_context(err, "building the vocabulary");
    return st;
}

/* HGR's vocabulary (the run's file, else the catalog's, else built from the training
 * captions) and caption encoding. */
static vtr_status open_hgr(const vtr_train_options *o, const char *vocab_path,
                           vtr_train_data *d, vtr_error *err)
{
    vtr_status st;
    if (vocab_path) {
        st = vtr_run_vocab_load(vocab_path, &d->vocab, err);
    } else if (!o->catalog_vocab[0]) {
        st = build_vocab(o, VTR_VOCAB_HGR, d, err);
    } else {
        int64_t dataset_id;
        vtr_word_list words = {0};
        st = vtr_catalog_find_dataset(d->catalog, o->dataset, &dataset_id, err);
        if (st == VTR_OK)
            st = vtr_catalog_get_vocabulary(d->catalog, dataset_id, o->catalog_vocab, &words,
                                            err);
        if (st == VTR_OK)
            st = vtr_vocab_hgr_from_words(words.words, words.n, o->catalog_vocab, &d->vocab,
                                          err);
        vtr_word_list_free(&words);
        d->vocab_from_catalog = true;
        if (st != VTR_OK)
            vtr_error_context(err, "data.catalog_vocab '%s' of dataset '%s'", o->catalog_vocab,
                              o->dataset);
    }
    if (st == VTR_OK && vtr_vocab_layout_of(d->vocab) != VTR_VOCAB_HGR)
        st = vtr_fail(err, VTR_ERR_INVALID, "%s is not an HGR vocabulary", vocab_path);
    if (st != VTR_OK)
        return st;
    vtr_role_graph_shape shape = {.max_words = o->hgr_max_words,
                                  .num_verbs = o->hgr.num_verbs,
                                  .num_nouns = o->hgr.num_nouns,
                                  .eos_id = VTR_ROLE_GRAPH_EOS};
    if ((st = vtr_split_encode_graphs(&d->train, d->catalog, o->dataset, d->vocab, &shape,
                                      err)) ||
        (st = vtr_split_encode_graphs(&d->val, d->catalog, o->dataset, d->vocab, &shape, err)))
        return st;
    return VTR_OK;
}

vtr_status vtr_run_vocab_save(const vtr_vocab *vocab, const char *path, vtr_error *err)
{
    if (vtr_vocab_layout_of(vocab) != VTR_VOCAB_HGR)
        return vtr_vocab_save_json(vocab, path, err);
    json_t *words = json_array();
    for (int i = 0; words && i < vtr_vocab_size(vocab); i++)
        if (json_array_append_new(words, json_string(vtr_vocab_word(vocab, i))) != 0) {
            json_decref(words);
            words = NULL;
        }
    if (!words)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory writing %s", path);
    vtr_status st = VTR_OK;
    if (json_dump_file(words, path, VTR_JSON_FLAGS) != 0)
        st = vtr_fail(err, VTR_ERR_IO, "cannot write %s", path);
    json_decref(words);
    return st;
}

vtr_status vtr_run_vocab_load(const char *path, vtr_vocab **out, vtr_error *err)
{
    json_error_t je;
    *out = NULL;
    json_t *root = json_load_file(path, 0, &je);
    if (!root || !json_is_array(root)) { /* the VSE reader, with its own messages */
        json_decref(root);
        return vtr_vocab_load_json(path, out, err);
    }
    size_t n = json_array_size(root);
    const char **words = malloc((n ? n : 1) * sizeof *words);
    vtr_status st = words ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading %s",
                                              path);
    for (size_t i = 0; st == VTR_OK && i < n; i++)
        if (!(words[i] = json_string_value(json_array_get(root, i))))
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: word %zu is not a string", path, i);
    if (st == VTR_OK)
        st = vtr_vocab_hgr_from_words(words, n, path, out, err);
    free(words);
    json_decref(root);
    return st;
}

vtr_status vtr_train_data_open(const vtr_train_options *o, const char *vocab_path,
                               vtr_train_data *d, vtr_error *err)
{
    vtr_status st;
    memset(d, 0, sizeof *d);
    if (!vocab_path && o->vocab[0])
        vocab_path = o->vocab;
    if ((st = vtr_train_options_check_data(o, err)) ||
        (st = vtr_catalog_open_existing(o->catalog, &d->catalog, err)) ||
        (st = vtr_feature_store_reader_open(o->features, &d->store, err)))
        goto fail;
    if ((st = vtr_split_load(d->catalog, o->dataset, o->train_split, d->store, o->max_frames,
                             &d->train, err))) {
        vtr_error_context(err, "training split");
        goto fail;
    }
    if ((st = vtr_split_load(d->catalog, o->dataset, o->val_split, d->store, o->max_frames,
                             &d->val, err))) {
        vtr_error_context(err, "validation split");
        goto fail;
    }
    if (o->val_max_items > 0)
        vtr_split_truncate(&d->val, o->val_max_items);
    if (o->kind == VTR_MODEL_HGR) {
        if ((st = open_hgr(o, vocab_path, d, err)))
            goto fail;
        return VTR_OK;
    }
    st = vocab_path ? vtr_vocab_load_json(vocab_path, &d->vocab, err)
                    : build_vocab(o, VTR_VOCAB_VSE, d, err);
    if (st != VTR_OK)
        goto fail;
    if ((st = vtr_split_encode_captions(&d->train, d->vocab, o->tokenizer, err)) ||
        (st = vtr_split_encode_captions(&d->val, d->vocab, o->tokenizer, err)))
        goto fail;
    return VTR_OK;
fail:
    vtr_train_data_close(d);
    return st;
}

/* ---- provenance ------------------------------------------------------------------- */

vtr_status vtr_train_data_hashes(const char *store_path, const char *const *files, char **json,
                                 vtr_error *err)
{
    static const char *const store_files[] = {"rows.npy", "offsets.npy", "keys.txt",
                                              "meta.json"};
    char hex[VTR_SHA256_HEX_SIZE], name[64];
    vtr_status st = VTR_OK;
    *json = NULL;
    json_t *obj = json_object();
    size_t len = strlen(store_path) + 16;
    char *path = malloc(len);
    if (!obj || !path) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (size_t i = 0; i < sizeof store_files / sizeof store_files[0]; i++) {
        snprintf(path, len, "%s/%s", store_path, store_files[i]);
        snprintf(name, sizeof name, "features/%s", store_files[i]);
        if ((st = vtr_file_sha256(path, hex, err)))
            goto end;
        json_object_set_new(obj, name, json_string(hex));
    }
    for (; files && files[0]; files += 2) {
        if (!files[1] || !files[1][0])
            continue;
        if ((st = vtr_file_sha256(files[1], hex, err)))
            goto end;
        json_object_set_new(obj, files[0], json_string(hex));
    }
    if (!(*json = json_dumps(obj, VTR_JSON_FLAGS)))
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
end:
    json_decref(obj);
    free(path);
    return st;
}
