/* Items -> embeddings in batches (aggregator.h). */
#define _POSIX_C_SOURCE 200809L
#include "aggregator.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_ITEMS 256
#define BATCH_ROWS 65536

typedef struct pending {
    char *key;
    json_t *meta;
    char *text; /* texts */
} pending;

struct vtr_aggregator {
    vtr_embedder *e;
    vtr_aggregator_emit_fn emit;
    void *ctx;
    bool broken;
    bool texts;        /* the pending items are texts (else sets) */
    pending items[BATCH_ITEMS];
    int n;
    int64_t counts[BATCH_ITEMS];
    float *rows;       /* the pending sets' rows, (sum counts, F) */
    size_t rows_used, rows_cap; /* in rows */
    float *out;        /* (BATCH_ITEMS, E) */
};

vtr_status vtr_aggregator_new(vtr_embedder *e, vtr_aggregator_emit_fn emit, void *ctx,
                              vtr_aggregator **out, vtr_error *err)
{
    *out = NULL;
    if (vtr_embedder_text_vectors(e) != 1)
        return vtr_fail(err, VTR_ERR_INVALID, "%s gives several vectors per item and text (%s; "
                        "vtr-index and vtr-search take it); vtr-aggregate writes one vector per "
                        "item", vtr_embedder_checkpoint(e),
                        vtr_embedder_levels(e) ? "an HGR model" : "set embeddings");
    vtr_aggregator *a = calloc(1, sizeof *a);
    if (!a || !(a->out = malloc((size_t)BATCH_ITEMS * (size_t)vtr_embedder_dim(e) *
                                sizeof *a->out))) {
        free(a);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    a->e = e;
    a->emit = emit;
    a->ctx = ctx;
    *out = a;
    return VTR_OK;
}

static void drop_pending(vtr_aggregator *a)
{
    for (int i = 0; i < a->n; i++) {
        free(a->items[i].key);
        free(a->items[i].text);
        json_decref(a->items[i].meta);
    }
    a->n = 0;
    a->rows_used = 0;
}

void vtr_aggregator_free(vtr_aggregator *a)
{
    if (!a)
        return;
    drop_pending(a);
    free(a->rows);
    free(a->out);
    free(a);
}

vtr_status vtr_aggregator_flush(vtr_aggregator *a, vtr_error *err)
{
    if (a->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "the aggregator stopped after an earlier error");
    if (a->n == 0)
        return VTR_OK;
    vtr_status st;
    if (a->texts) {
        const char *texts[BATCH_ITEMS];
        for (int i = 0; i < a->n; i++)
            texts[i] = a->items[i].text;
        st = vtr_embedder_embed_texts(a->e, a->n, texts, NULL, a->out, NULL, err);
    } else {
        st = vtr_embedder_embed_sets(a->e, a->n, a->counts, a->rows, a->out, err);
    }
    size_t E = (size_t)vtr_embedder_dim(a->e);
    for (int i = 0; st == VTR_OK && i < a->n; i++)
        st = a->emit(a->ctx, a->items[i].key, a->items[i].meta, a->out + (size_t)i * E, err);
    drop_pending(a);
    if (st != VTR_OK)
        a->broken = true;
    return st;
}

/* Flushes when the batch cannot take one more item of `rows` rows or of the other kind. */
static vtr_status make_room(vtr_aggregator *a, bool text, size_t rows, vtr_error *err)
{
    if (a->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "the aggregator stopped after an earlier error");
    if (a->n > 0 && (a->n == BATCH_ITEMS || a->texts != text ||
                     (!text && a->rows_used + rows > BATCH_ROWS)))
        return vtr_aggregator_flush(a, err);
    return VTR_OK;
}

/* Takes the next slot for key and meta. */
static vtr_status take_slot(vtr_aggregator *a, bool text, const char *key, json_t *meta,
                            vtr_error *err)
{
    pending *p = &a->items[a->n];
    p->key = strdup(key);
    p->meta = meta ? json_incref(meta) : json_object();
    p->text = NULL;
    if (!p->key || !p->meta) {
        free(p->key);
        json_decref(p->meta);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    a->texts = text;
    return VTR_OK;
}

vtr_status vtr_aggregator_add_set(vtr_aggregator *a, const char *key, json_t *meta,
                                  const vtr_tensor *rows, vtr_error *err)
{
    vtr_status st;
    if ((st = vtr_embedder_check_set(a->e, rows, err)))
        return st;
    size_t F = (size_t)vtr_embedder_feature_dim(a->e);
    size_t n = rows->ndim == 2 ? (size_t)rows->shape[0] : 1;
    if ((st = make_room(a, false, n, err)))
        return st;
    if (a->rows_used + n > a->rows_cap) {
        size_t cap = a->rows_cap ? a->rows_cap : 1024;
        while (cap < a->rows_used + n)
            cap *= 2;
        float *grown = realloc(a->rows, cap * F * sizeof *grown);
        if (!grown)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %zu rows", cap);
        a->rows = grown;
        a->rows_cap = cap;
    }
    if ((st = take_slot(a, false, key, meta, err)))
        return st;
    float *dst = a->rows + a->rows_used * F;
    if (rows->dtype == VTR_F32) {
        memcpy(dst, rows->data, n * F * sizeof *dst);
    } else {
        const uint16_t *h = rows->data;
        for (size_t i = 0; i < n * F; i++)
            dst[i] = vtr_half_to_float(h[i]);
    }
    a->counts[a->n++] = (int64_t)n;
    a->rows_used += n;
    return VTR_OK;
}

vtr_status vtr_aggregator_add_text(vtr_aggregator *a, const char *key, json_t *meta,
                                   const char *text, vtr_error *err)
{
    vtr_status st;
    if ((st = vtr_embedder_check_text(a->e, text, NULL, NULL, err)) || (st = make_room(a, true, 0, err)) ||
        (st = take_slot(a, true, key, meta, err)))
        return st;
    if (!(a->items[a->n].text = strdup(text))) {
        free(a->items[a->n].key);
        json_decref(a->items[a->n].meta);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    a->n++;
    return VTR_OK;
}
