/* One media file to its embedding (media_embedder.h). */
#include "media_embedder.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "features/extractor.h"

struct vtr_media_embedder {
    vtr_embedder *embedder;
    vtr_extractor *extractor;
    vtr_decode_options decode;
    vtr_decoded_item item; /* the last file's frames */
    float *features;       /* its features (feature_rows, F) */
    size_t features_cap;
    int64_t feature_rows;
    float *embedding;      /* (the most vectors an item can have, E) */
    float *singles;        /* the frames' one-frame embeddings (feature_rows, per frame, E) */
    float *frame_vectors;  /* their first vectors (feature_rows, E) */
    int64_t *ones;         /* feature_rows counts of 1 */
    size_t frames_cap;     /* rows the three above hold */
    bool broken;
};

/* The extractor's emit: keeps the one item's features. */
static vtr_status keep_features(void *ctx, const vtr_extractor_item *item, vtr_error *err)
{
    vtr_media_embedder *m = ctx;
    size_t n = (size_t)vtr_tensor_numel(&item->features);
    if (n > m->features_cap) {
        float *grown = realloc(m->features, n * sizeof *grown);
        if (!grown)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        m->features = grown;
        m->features_cap = n;
    }
    memcpy(m->features, item->features.data, n * sizeof *m->features);
    m->feature_rows = item->features.shape[0];
    return VTR_OK;
}

vtr_status vtr_media_embedder_new(vtr_embedder *e, vtr_backbone *b,
                                  const vtr_preprocess_options *pre, int frames, int threads,
                                  vtr_media_embedder **out, vtr_error *err)
{
    *out = NULL;
    if (vtr_backbone_dim(b) != vtr_embedder_feature_dim(e))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s takes %lld-d features; %s gives %d-d ones: use the backbone the "
                        "model was trained on",
                        vtr_embedder_checkpoint(e), (long long)vtr_embedder_feature_dim(e),
                        vtr_backbone_arch_name(vtr_backbone_get_arch(b)), vtr_backbone_dim(b));
    if (frames < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "frames per video must be >= 1, not %d", frames);
    vtr_media_embedder *m = calloc(1, sizeof *m);
    if (!m)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    m->embedder = e;
    vtr_extractor_options xo;
    vtr_extractor_defaults(&xo);
    xo.pre = *pre;
    vtr_status st = vtr_extractor_new(b, &xo, keep_features, m, &m->extractor, err);
    if (st != VTR_OK) {
        free(m);
        return st;
    }
    /* an item's vectors: 1, or HGR's 1 + 2 x its kept frames */
    m->embedding = malloc((size_t)vtr_embedder_item_vectors(e, INT64_MAX) *
                          (size_t)vtr_embedder_dim(e) * sizeof *m->embedding);
    if (!m->embedding) {
        vtr_media_embedder_free(m);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    vtr_decode_options_defaults(&m->decode);
    m->decode.sampler.mode = VTR_SAMPLE_FRAMES;
    m->decode.sampler.n = frames;
    m->decode.threads = threads;
    *out = m;
    return VTR_OK;
}

void vtr_media_embedder_free(vtr_media_embedder *m)
{
    if (!m)
        return;
    vtr_extractor_free(m->extractor);
    vtr_decoded_item_free(&m->item);
    free(m->features);
    free(m->embedding);
    free(m->singles);
    free(m->frame_vectors);
    free(m->ones);
    free(m);
}

bool vtr_media_embedder_broken(const vtr_media_embedder *m)
{
    return m->broken;
}

/* A failure that ends m's use. */
static vtr_status breaks(vtr_media_embedder *m, vtr_status st)
{
    m->broken = true;
    return st;
}

/* Each frame's embedding alone: the feature rows as one-frame sets, their first vectors
 * into m->frame_vectors. */
static vtr_status frame_vectors(vtr_media_embedder *m, vtr_error *err)
{
    size_t n = (size_t)m->feature_rows, E = (size_t)vtr_embedder_dim(m->embedder);
    size_t per = (size_t)vtr_embedder_item_vectors(m->embedder, 1);
    if (n > m->frames_cap) {
        free(m->singles);
        free(m->frame_vectors);
        free(m->ones);
        m->singles = malloc(n * per * E * sizeof *m->singles);
        m->frame_vectors = malloc(n * E * sizeof *m->frame_vectors);
        m->ones = malloc(n * sizeof *m->ones);
        m->frames_cap = m->singles && m->frame_vectors && m->ones ? n : 0;
        if (!m->frames_cap)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            m->ones[i] = 1;
    }
    vtr_status st = vtr_embedder_embed_sets(m->embedder, (int64_t)n, m->ones, m->features,
                                            m->singles, err);
    for (size_t i = 0; st == VTR_OK && i < n; i++)
        memcpy(m->frame_vectors + i * E, m->singles + i * per * E, E * sizeof *m->singles);
    return st;
}

const vtr_decode_options *vtr_media_embedder_decode_options(const vtr_media_embedder *m)
{
    return &m->decode;
}

vtr_status vtr_media_embedder_embed(vtr_media_embedder *m, const char *path, const char *key,
                                    vtr_media_embedding *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    out->duration = -1;
    if (m->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "the media embedder failed before: open a new one");
    vtr_decoded_item item;
    vtr_status st = vtr_decode_item(path, &m->decode, NULL, &item, err);
    if (st == VTR_ERR_NOMEM)
        return breaks(m, st);
    if (st != VTR_OK)
        return st;
    return vtr_media_embedder_embed_decoded(m, path, key, &item, out, err);
}

vtr_status vtr_media_embedder_embed_decoded(vtr_media_embedder *m, const char *path,
                                            const char *key, vtr_decoded_item *item,
                                            vtr_media_embedding *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    out->duration = -1;
    vtr_decoded_item_free(&m->item);
    m->item = *item;
    memset(item, 0, sizeof *item);
    if (m->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "the media embedder failed before: open a new one");
    vtr_status st;
    out->decoded = &m->item;
    /* the catalog's duration: 0 for an image (lib/catalog.h), the stream's for a video */
    json_t *duration = json_object_get(m->item.meta, "duration");
    if (json_is_true(json_object_get(m->item.meta, "image")))
        out->duration = 0.0;
    else if (json_is_number(duration))
        out->duration = json_number_value(duration);
    if ((st = vtr_extractor_check_frames(m->extractor, &m->item.frames, err)) != VTR_OK)
        return st;
    if (m->item.frames.shape[0] == 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: no frames decoded", path);
    m->feature_rows = 0;
    if ((st = vtr_extractor_add(m->extractor, key, NULL, &m->item.frames, err)) != VTR_OK ||
        (st = vtr_extractor_finish(m->extractor, err)) != VTR_OK)
        return breaks(m, st);
    int64_t counts[1] = {m->feature_rows};
    st = vtr_embedder_embed_sets(m->embedder, 1, counts, m->features, m->embedding, err);
    if (st == VTR_ERR_INVALID) /* this file's features (non-finite values) */
        return st;
    if (st != VTR_OK)
        return breaks(m, st);
    out->vectors = vtr_embedder_item_vectors(m->embedder, counts[0]);
    out->embedding = m->embedding;
    if ((st = frame_vectors(m, err)) != VTR_OK)
        return breaks(m, st);
    out->frame_vectors = m->frame_vectors;
    return VTR_OK;
}
