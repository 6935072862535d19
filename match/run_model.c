/* The model of a run, VSE or HGR (run_model.h). */
#include "run_model.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "match/encode.h"

vtr_status vtr_run_model_init(vtr_run_model *m, const vtr_train_options *o,
                              const vtr_vocab *vocab, vtr_device device, int max_batch,
                              int max_frames, int max_words, vtr_error *err)
{
    memset(m, 0, sizeof *m);
    m->kind = o->kind;
    if (o->kind == VTR_MODEL_HGR) {
        vtr_hgr_config c = vtr_train_hgr_config(o, vocab);
        return vtr_hgr_model_init_on(&m->hgr, &c, device, max_batch, max_frames, max_words, err);
    }
    vtr_vse_config c = vtr_train_model_config(o, vocab);
    return vtr_vse_model_init_on(&m->vse, &c, device, max_batch, max_frames, max_words, err);
}

vtr_device vtr_run_model_device(vtr_run_model *m, float **data, float **grad)
{
    vtr_param_set *ps = vtr_run_model_params(m);
    bool hgr = m->kind == VTR_MODEL_HGR;
    float *dev_data = hgr ? m->hgr.dev_data : m->vse.dev_data;
    *data = dev_data ? dev_data : ps->data;
    *grad = dev_data ? (hgr ? m->hgr.dev_grad : m->vse.dev_grad) : ps->grad;
    return hgr ? m->hgr.device : m->vse.device;
}

vtr_status vtr_run_model_zero_grad(vtr_run_model *m, vtr_error *err)
{
    return m->kind == VTR_MODEL_HGR ? vtr_hgr_zero_grad(&m->hgr, err)
                                    : vtr_vse_zero_grad(&m->vse, err);
}

vtr_status vtr_run_model_params_to_device(vtr_run_model *m, vtr_error *err)
{
    return m->kind == VTR_MODEL_HGR ? vtr_hgr_params_to_device(&m->hgr, err)
                                    : vtr_vse_params_to_device(&m->vse, err);
}

vtr_status vtr_run_model_params_to_host(vtr_run_model *m, vtr_error *err)
{
    return m->kind == VTR_MODEL_HGR ? vtr_hgr_params_to_host(&m->hgr, false, err)
                                    : vtr_vse_params_to_host(&m->vse, false, err);
}

vtr_status vtr_run_model_add_params(vtr_param_set *ps, const vtr_train_options *o,
                                    const vtr_vocab *vocab, vtr_error *err)
{
    if (o->kind == VTR_MODEL_HGR) {
        vtr_hgr_config c = vtr_train_hgr_config(o, vocab);
        return vtr_hgr_model_add_params(ps, &c, err);
    }
    vtr_vse_config c = vtr_train_model_config(o, vocab);
    return vtr_vse_model_add_params(ps, &c, err);
}

void vtr_run_model_free(vtr_run_model *m)
{
    if (!m)
        return;
    vtr_vse_model_free(&m->vse);
    vtr_hgr_model_free(&m->hgr);
    memset(m, 0, sizeof *m);
}

vtr_param_set *vtr_run_model_params(vtr_run_model *m)
{
    return m->kind == VTR_MODEL_HGR ? &m->hgr.params : &m->vse.params;
}

float *vtr_run_model_word_embedding(vtr_run_model *m)
{
    /* the host's values (on the GPU, the models' embed_w point at the device's copy) */
    return m->kind == VTR_MODEL_HGR
               ? vtr_param_data(&m->hgr.params, "text_encoder.embedding.we.weight")
               : vtr_param_data(&m->vse.params, "txt_enc.embed.weight");
}

int vtr_run_model_feature_dim(const vtr_run_model *m)
{
    return m->kind == VTR_MODEL_HGR ? m->hgr.cfg.feature_dim : m->vse.cfg.feature_dim;
}

void vtr_run_model_init_params(vtr_run_model *m, uint64_t seed)
{
    if (m->kind == VTR_MODEL_HGR)
        vtr_hgr_init_params(&m->hgr, seed);
    else
        vtr_vse_init_params(&m->vse, seed);
}

vtr_status vtr_run_model_stage(vtr_run_model *m, int k, vtr_batcher *b, vtr_dist *dist,
                               vtr_error *err)
{
    if (m->kind == VTR_MODEL_HGR || m->vse.device == VTR_DEVICE_CPU)
        return VTR_OK;
    if (!dist || dist->size == 1)
        return vtr_vse_stage_batch(&m->vse, k, &b->batch, err);
    /* this rank's pairs, which vtr_run_model_step's share of b's batch then reads there */
    vtr_vse_batch share = vtr_vse_batch_share(&m->vse, &b->batch, dist);
    VTR_TRY(vtr_vse_stage_batch(&m->vse, k, &share, err));
    b->batch.staged = share.staged;
    return VTR_OK;
}

vtr_status vtr_run_model_step(vtr_run_model *m, const vtr_batcher *b, vtr_hinge_negatives neg,
                              uint64_t seed, int64_t step, vtr_dist *dist, float *loss,
                              int *negatives, vtr_error *err)
{
    vtr_status st;
    bool parallel = dist && dist->size > 1;
    if (m->kind == VTR_MODEL_HGR) {
        if (!b->split->verb_masks)
            return vtr_fail(err, VTR_ERR_INVALID, "split '%s' has no role graphs (an HGR "
                            "model needs vtr_split_encode_graphs)", b->split->name);
        vtr_hgr_batch hb = b->hgr;
        if (parallel) /* this rank's pairs of the global batch, with its padding */
            hb = vtr_hgr_batch_share(&m->hgr, &b->hgr, dist);
        st = vtr_hgr_train_step(&m->hgr, &hb, neg, seed, (uint64_t)step, loss, err);
        *negatives = neg == VTR_HINGE_ALL_NEGATIVES ? b->hgr.B - 1 : 1;
        return st;
    }
    vtr_vse_batch batch = b->batch;
    batch.seed = seed, batch.step = step; /* set embeddings' dropout */
    if (parallel) /* this rank's pairs of the global batch, with its padding */
        batch = vtr_vse_batch_share(&m->vse, &batch, dist);
    st = vtr_vse_train_step(&m->vse, &batch, neg, loss, err);
    *negatives = m->vse.negatives;
    return st;
}

/* ---- HGR evaluation --------------------------------------------------------------- */

/* A split encoded by an HGR model. */
typedef struct hgr_encoded {
    vtr_hgr_model *m;
    const vtr_split *s;
    size_t T, E;                 /* T: the split's longest set */
    float *global, *verb, *noun; /* (n_items, E), (n_items, T, E) x 2 */
    int *frame_lengths;          /* (n_items) */
    float *sent, *verbs, *nouns; /* (n_caps, E), (n_caps, NV, E), (n_caps, NN, E) */
    int *n_verbs, *n_nouns;      /* (n_caps) */
} hgr_encoded;

static void hgr_encoded_free(hgr_encoded *h)
{
    void *p[] = {h->global, h->verb,  h->noun,    h->frame_lengths, h->sent,
                 h->verbs,  h->nouns, h->n_verbs, h->n_nouns};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    memset(h, 0, sizeof *h);
}

/* Every rank's rows [first, first + count) of the arrays (rows of the given bytes) at
 * their places, in each array. */
static vtr_status gather_arrays(vtr_dist *d, void *const *arrays, const size_t *row_bytes,
                                int n_arrays, int first, int count, vtr_error *err)
{
    vtr_status st = VTR_OK;
    for (int k = 0; k < n_arrays && st == VTR_OK; k++) {
        char *a = arrays[k];
        st = vtr_dist_gather(d, a + row_bytes[k] * (size_t)first, row_bytes[k] * (size_t)count,
                             a, err);
    }
    return st;
}

/* Encodes the split (this rank's share of the batches, then every rank's gathered). */
static vtr_status hgr_encode(vtr_hgr_model *m, vtr_batcher *b, vtr_dist *d, hgr_encoded *h,
                             vtr_error *err)
{
    const vtr_split *s = b->split;
    size_t I = (size_t)s->n_items, C = (size_t)s->n_caps;
    memset(h, 0, sizeof *h);
    h->m = m;
    h->s = s;
    h->T = (size_t)s->max_frames;
    h->E = (size_t)m->cfg.embed_size;
    size_t T = h->T, E = h->E, NV = (size_t)m->cfg.num_verbs, NN = (size_t)m->cfg.num_nouns;
    if (!s->verb_masks)
        return vtr_fail(err, VTR_ERR_INVALID, "split '%s' has no role graphs", s->name);
    if (b->max_batch > m->max_batch || s->max_frames > m->max_frames ||
        s->max_words > m->max_words || b->F != m->cfg.feature_dim)
        return vtr_fail(err, VTR_ERR_INVALID, "split '%s' (batches of %d, %d frames, %d words, "
                        "%d features) does not fit the model (%d, %d, %d, %d)", s->name,
                        b->max_batch, s->max_frames, s->max_words, b->F, m->max_batch,
                        m->max_frames, m->max_words, m->cfg.feature_dim);
    h->global = malloc(I * E * sizeof(float));
    h->verb = calloc(I * T * E, sizeof(float));
    h->noun = calloc(I * T * E, sizeof(float));
    h->frame_lengths = malloc(I * sizeof(int));
    h->sent = malloc(C * E * sizeof(float));
    h->verbs = malloc(C * NV * E * sizeof(float));
    h->nouns = malloc(C * NN * E * sizeof(float));
    h->n_verbs = malloc(C * sizeof(int));
    h->n_nouns = malloc(C * sizeof(int));
    if (!h->global || !h->verb || !h->noun || !h->frame_lengths || !h->sent || !h->verbs ||
        !h->nouns || !h->n_verbs || !h->n_nouns)
        return vtr_dist_agree(d, vtr_fail(err, VTR_ERR_NOMEM, "out of memory encoding split "
                                          "'%s'", s->name), err);
    vtr_status st = VTR_OK;
    int i0, ni, j0, nj;
    vtr_dist_share_blocks(d, s->n_items, b->max_batch, &i0, &ni);
    vtr_dist_share_blocks(d, s->n_caps, b->max_batch, &j0, &nj);
    for (int i = i0; i < i0 + ni && st == VTR_OK; i += b->max_batch) {
        int n = i0 + ni - i < b->max_batch ? i0 + ni - i : b->max_batch;
        if ((st = vtr_batcher_items(b, i, n, err)))
            break;
        size_t Tb = (size_t)b->hgr.T;
        /* the batch's levels (n, Tb, E) land at item i's place, then spread to stride T */
        float *lv = h->verb + (size_t)i * T * E, *ln = h->noun + (size_t)i * T * E;
        if ((st = vtr_hgr_encode_videos(m, h->global + (size_t)i * E, lv, ln, b->hgr.frames,
                                        b->hgr.frame_lengths, n, (int)Tb, err))) {
            vtr_error_context(err, "split '%s', items %d .. %d", s->name, i, i + n - 1);
            break;
        }
        for (int k = n - 1; k >= 0; k--) { /* backwards: Tb <= T, slots only move up */
            float *dv = h->verb + ((size_t)i + (size_t)k) * T * E;
            float *dn = h->noun + ((size_t)i + (size_t)k) * T * E;
            memmove(dv, lv + (size_t)k * Tb * E, Tb * E * sizeof(float));
            memmove(dn, ln + (size_t)k * Tb * E, Tb * E * sizeof(float));
            memset(dv + Tb * E, 0, (T - Tb) * E * sizeof(float));
            memset(dn + Tb * E, 0, (T - Tb) * E * sizeof(float));
            h->frame_lengths[i + k] = b->hgr.frame_lengths[k];
        }
    }
    for (int j = j0; j < j0 + nj && st == VTR_OK; j += b->max_batch) {
        int n = j0 + nj - j < b->max_batch ? j0 + nj - j : b->max_batch;
        size_t J = (size_t)j;
        if ((st = vtr_batcher_captions(b, j, n, err)) ||
            (st = vtr_hgr_encode_captions(m, h->sent + J * E, h->verbs + J * NV * E,
                                          h->nouns + J * NN * E, h->n_verbs + J,
                                          h->n_nouns + J, &b->hgr.captions, err)))
            vtr_error_context(err, "split '%s', captions %d .. %d", s->name, j, j + n - 1);
    }
    size_t f = sizeof(float);
    void *const items[] = {h->global, h->verb, h->noun, h->frame_lengths};
    const size_t item_rows[] = {f * E, f * T * E, f * T * E, sizeof(int)};
    void *const caps[] = {h->sent, h->verbs, h->nouns, h->n_verbs, h->n_nouns};
    const size_t cap_rows[] = {f * E, f * NV * E, f * NN * E, sizeof(int), sizeof(int)};
    if ((st = vtr_dist_agree(d, st, err)) ||
        (st = gather_arrays(d, items, item_rows, 4, i0, ni, err)))
        return st;
    return gather_arrays(d, caps, cap_rows, 5, j0, nj, err);
}

/* The fused score and, when levels is not NULL, the three levels: each a whole (n_items,
 * n_caps) matrix computed in one pass over the blocks (items and captions in split order,
 * max_batch at a time; each rank its share of the item blocks, then gathered), then
 * evaluated as a precomputed matrix. */
static vtr_status evaluate_scores(hgr_encoded *h, vtr_dist *d, const vtr_retrieval_options *opt,
                                  vtr_retrieval_metrics *out, vtr_retrieval_metrics *levels,
                                  vtr_error *err)
{
    const vtr_split *s = h->s;
    size_t n = (size_t)s->n_items * (size_t)s->n_caps;
    int n_mats = levels ? 4 : 1;
    float *all = malloc((size_t)n_mats * n * sizeof(float));
    vtr_status st = VTR_OK;
    if (!all)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for the %d x %d scores of split '%s'",
                      s->n_items, s->n_caps, s->name);
    if ((st = vtr_dist_agree(d, st, err)))
        return st;
    float *mats[4] = {all, NULL, NULL, NULL}, *mine[4] = {NULL, NULL, NULL, NULL};
    int i0, ni;
    vtr_dist_share_blocks(d, s->n_items, h->m->max_batch, &i0, &ni);
    for (int k = 0; k < n_mats; k++) {
        mats[k] = all + (size_t)k * n;
        mine[k] = mats[k] + (size_t)i0 * s->n_caps;
    }
    vtr_hgr_encoded_videos v = {h->global + (size_t)i0 * h->E,
                                h->verb + (size_t)i0 * h->T * h->E,
                                h->noun + (size_t)i0 * h->T * h->E,
                                h->frame_lengths + i0,
                                ni,
                                (int)h->T};
    vtr_hgr_encoded_captions c = {h->sent, h->verbs, h->nouns, h->n_verbs, h->n_nouns, s->n_caps};
    if (ni > 0)
        st = vtr_hgr_score_all(h->m, &v, &c, mine, (size_t)s->n_caps, 0, err);
    const size_t rows[4] = {sizeof(float) * s->n_caps, sizeof(float) * s->n_caps,
                            sizeof(float) * s->n_caps, sizeof(float) * s->n_caps};
    if ((st = vtr_dist_agree(d, st, err)) == VTR_OK)
        st = gather_arrays(d, (void *const *)mats, rows, n_mats, i0, ni, err);
    for (int k = 0; k < n_mats && st == VTR_OK; k++) {
        vtr_similarity_matrix sm = {.S = mats[k], .ld = s->n_caps};
        st = vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, s->n_items, s->n_caps,
                                    s->cap_item, opt, k == 0 ? out : &levels[k - 1], NULL, err);
    }
    free(all);
    return st;
}

vtr_status vtr_run_model_evaluate(vtr_run_model *m, vtr_batcher *b, vtr_dist *dist,
                                  const vtr_retrieval_options *opt, vtr_retrieval_metrics *out,
                                  vtr_retrieval_metrics *levels, vtr_error *err)
{
    if (m->kind == VTR_MODEL_VSE)
        return vtr_evaluate_split(&m->vse, b, dist, opt, out, err);
    vtr_dist solo = {.size = 1}, *d = dist ? dist : &solo;
    hgr_encoded h;
    vtr_status st = hgr_encode(&m->hgr, b, d, &h, err);
    if (st == VTR_OK)
        st = evaluate_scores(&h, d, opt, out, levels, err);
    hgr_encoded_free(&h);
    return st;
}
