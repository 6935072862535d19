/* Embedding a split in batches (encode.h). */
#include "encode.h"

#include <stdlib.h>

vtr_status vtr_encode_split(vtr_vse_model *m, vtr_batcher *b, vtr_dist *dist, float *items,
                            float *captions, vtr_encode_progress_fn progress, void *ctx,
                            vtr_error *err)
{
    const vtr_split *s = b->split;
    size_t E = (size_t)m->cfg.embed_size * (size_t)vtr_vse_vectors(&m->cfg); /* floats each */
    int B = b->max_batch;
    vtr_dist solo = {.size = 1}, *d = dist ? dist : &solo;
    vtr_status st = VTR_OK;
    if (B > m->max_batch || s->max_frames > m->max_frames || s->max_words > m->max_words)
        return vtr_fail(err, VTR_ERR_INVALID, "split '%s' needs a model for batches of %d, "
                        "%d frames and %d words; it was made for %d, %d and %d", s->name, B,
                        s->max_frames, s->max_words, m->max_batch, m->max_frames,
                        m->max_words);
    if (b->F != m->cfg.feature_dim)
        return vtr_fail(err, VTR_ERR_INVALID, "the features have %d dimensions, the model "
                        "expects %d", b->F, m->cfg.feature_dim);
    int i0, ni, j0, nj;
    vtr_dist_share_blocks(d, s->n_items, B, &i0, &ni);
    vtr_dist_share_blocks(d, s->n_caps, B, &j0, &nj);
    int64_t total = (int64_t)ni + nj;
    for (int i = i0; i < i0 + ni && st == VTR_OK; i += B) {
        int n = i0 + ni - i < B ? i0 + ni - i : B;
        if ((st = vtr_batcher_items(b, i, n, err)) ||
            (st = vtr_vse_encode_images(m, items + (size_t)i * E, b->batch.frames,
                                        b->batch.frame_lengths, n, b->batch.T, false, err)))
            vtr_error_context(err, "split '%s', items %d .. %d", s->name, i, i + n - 1);
        else if (progress)
            progress(ctx, i - i0 + n, total);
    }
    for (int j = j0; j < j0 + nj && st == VTR_OK; j += B) {
        int n = j0 + nj - j < B ? j0 + nj - j : B;
        if ((st = vtr_batcher_captions(b, j, n, err)) ||
            (st = vtr_vse_encode_captions(m, captions + (size_t)j * E, b->batch.ids,
                                          b->batch.caption_lengths, n, b->batch.L, err)))
            vtr_error_context(err, "split '%s', captions %d .. %d", s->name, j, j + n - 1);
        else if (progress)
            progress(ctx, ni + j - j0 + n, total);
    }
    /* every rank's rows, in rank order: the split's order */
    size_t f = sizeof(float);
    if ((st = vtr_dist_agree(d, st, err)) ||
        (st = vtr_dist_gather(d, items + (size_t)i0 * E, (size_t)ni * E * f, items, err)))
        return st;
    return vtr_dist_gather(d, captions + (size_t)j0 * E, (size_t)nj * E * f, captions, err);
}

vtr_embedding_model vtr_vse_embedding_model(const vtr_vse_config *cfg, const float *items,
                                            const float *captions)
{
    return (vtr_embedding_model){.items = items,
                                 .captions = captions,
                                 .dim = cfg->embed_size,
                                 .set_size = cfg->set.K,
                                 .set_alpha = cfg->set.alpha};
}

vtr_status vtr_evaluate_split(vtr_vse_model *m, vtr_batcher *b, vtr_dist *dist,
                              const vtr_retrieval_options *opt, vtr_retrieval_metrics *out,
                              vtr_error *err)
{
    const vtr_split *s = b->split;
    size_t E = (size_t)m->cfg.embed_size * (size_t)vtr_vse_vectors(&m->cfg);
    float *items = malloc((size_t)s->n_items * E * sizeof *items);
    float *captions = malloc((size_t)s->n_caps * E * sizeof *captions);
    vtr_status st = VTR_OK;
    if (!items || !captions)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for the embeddings of split '%s'",
                      s->name);
    vtr_dist solo = {.size = 1};
    if ((st = vtr_dist_agree(dist ? dist : &solo, st, err)) || /* before the gathers */
        (st = vtr_encode_split(m, b, dist, items, captions, NULL, NULL, err)))
        goto end;
    vtr_embedding_model em = vtr_vse_embedding_model(&m->cfg, items, captions);
    vtr_retrieval_options o = opt ? *opt : (vtr_retrieval_options){0};
    o.device = m->device; /* the scores and their counting where the model is */
    st = vtr_retrieval_evaluate_embeddings(&em, 1, s->n_items, s->n_caps, s->cap_item, &o, out,
                                           NULL, err);
end:
    free(items);
    free(captions);
    return st;
}
