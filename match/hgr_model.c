/* HGR and HGR∞ models; the contracts are in hgr_model.h. */
#include "hgr_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "aggregate/span_pool.h"
#include "lib/activation.h"
#include "lib/dist_device.h"
#include "lib/embedding.h"
#include "lib/graph_attention.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/norm.h"
#include "lib/pack.h"
#include "lib/rng.h"
#include "lib/similarity.h"
#include "match/hgr_score.h"
#include "match/hinge_loss.h"
#include "match/model_arena.h"
#include "match/model_ops.h"
#include "match/model_params.h"
#include "match/phrase_attention.h"

/* Upper bounds that keep every size product far from overflow. */
#define MAX_DIM (1 << 20)
#define MAX_ROWS (1 << 26)

/* dropout sites: stream = DROPOUT_SITES * step + site */
enum { SITE_LEVEL0 = 0, SITE_WORDS = 3, SITE_GCN = 4, DROPOUT_SITES = 8 };

/* ---- configuration ---------------------------------------------------------------- */

vtr_hgr_config vtr_hgr_config_default(int vocab_size, vtr_hgr_global_pool pool)
{
    vtr_hgr_config cfg = {
        .feature_dim = 2048,
        .embed_size = 1024,
        .vocab_size = vocab_size,
        .word_dim = 300,
        .num_roles = VTR_HGR_NUM_ROLES,
        .num_verbs = VTR_HGR_NUM_VERBS,
        .num_nouns = VTR_HGR_NUM_NOUNS,
        .global_pool = pool,
        .gpo_pe = VTR_GPO_D_PE,
        .gpo_hidden = VTR_GPO_HIDDEN,
        .video_dropout = 0.2f,
        .text_dropout = 0.2f,
        .gcn_dropout = 0.5f,
        .margin = VTR_HINGE_MARGIN,
        .sigma = VTR_PHRASE_ATTENTION_SIGMA,
    };
    return cfg;
}

static vtr_status check_dim(const char *field, int value, int min, vtr_error *err)
{
    if (value < min || value > MAX_DIM)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: %s = %d outside %d..%d", field, value,
                        min, MAX_DIM);
    return VTR_OK;
}

static vtr_status check_probability(const char *field, float p, vtr_error *err)
{
    if (!(p >= 0.0f && p < 1.0f))
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: %s = %g outside [0, 1)", field,
                        (double)p);
    return VTR_OK;
}

vtr_status vtr_hgr_config_check(const vtr_hgr_config *c, vtr_error *err)
{
    vtr_status st;
    if ((st = check_dim("feature_dim", c->feature_dim, 1, err)) ||
        (st = check_dim("embed_size", c->embed_size, 2, err)) ||
        (st = check_dim("vocab_size", c->vocab_size, 1, err)) ||
        (st = check_dim("word_dim", c->word_dim, 1, err)) ||
        (st = check_dim("num_roles", c->num_roles, 1, err)) ||
        (st = check_dim("num_verbs", c->num_verbs, 1, err)) ||
        (st = check_dim("num_nouns", c->num_nouns, 1, err)) ||
        (st = check_probability("video_dropout", c->video_dropout, err)) ||
        (st = check_probability("text_dropout", c->text_dropout, err)) ||
        (st = check_probability("gcn_dropout", c->gcn_dropout, err)))
        return st;
    if (c->embed_size % 2 != 0)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: embed_size = %d is odd", c->embed_size);
    if (c->global_pool == VTR_HGR_POOL_GPO) {
        if ((st = check_dim("gpo_pe", c->gpo_pe, 2, err)) ||
            (st = check_dim("gpo_hidden", c->gpo_hidden, 1, err)))
            return st;
        if (c->gpo_pe % 2 != 0)
            return vtr_fail(err, VTR_ERR_INVALID, "hgr config: gpo_pe = %d is odd", c->gpo_pe);
    } else if (c->global_pool != VTR_HGR_POOL_ATTENTION) {
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: global_pool = %d is no pooler",
                        (int)c->global_pool);
    }
    if (!(c->margin >= 0.0f && isfinite(c->margin)))
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: margin = %g is not a finite value >= 0",
                        (double)c->margin);
    if (!(c->sigma > 0.0f && isfinite(c->sigma)))
        return vtr_fail(err, VTR_ERR_INVALID, "hgr config: sigma = %g is not a finite value > 0",
                        (double)c->sigma);
    return VTR_OK;
}

int vtr_hgr_sample_frames(int *index, int n, int max_frames)
{
    if (n <= max_frames) {
        for (int i = 0; i < n; i++)
            index[i] = i;
        return n;
    }
    if (max_frames == 1) { /* numpy's linspace(0, n - 1, 1) is [0] */
        index[0] = 0;
        return 1;
    }
    /* numpy: step = (stop - start) / (num - 1), y = arange(num) * step, y[-1] = stop; then
     * np.round, half to even (nearbyint in the default rounding mode) */
    double step = (double)(n - 1) / (double)(max_frames - 1);
    for (int i = 0; i < max_frames; i++)
        index[i] = i == max_frames - 1 ? n - 1 : (int)nearbyint((double)i * step);
    return max_frames;
}

/* ---- the global poolers ------------------------------------------------------------ */

static size_t pool_workspace_size(const vtr_hgr_config *c, int B, int T)
{
    if (c->global_pool == VTR_HGR_POOL_GPO)
        return vtr_gpo_workspace_size(B, T, c->embed_size, c->gpo_pe, c->gpo_hidden);
    return 0;
}

static size_t pool_scratch_size(const vtr_hgr_config *c, int B, int T)
{
    if (c->global_pool == VTR_HGR_POOL_GPO)
        return vtr_gpo_scratch_size(B, T, c->embed_size, c->gpo_pe, c->gpo_hidden);
    return 0;
}

// inp (B,T,E), lengths (B) -> out (B,E), on the model's device
static vtr_status pool_forward(const vtr_hgr_model *m, const vtr_hgr_pool *p, float *out,
                               const float *inp, const int *lengths, int B, int T, vtr_error *err)
{
    const vtr_hgr_config *c = &m->cfg;
    int E = c->embed_size;
    if (c->global_pool == VTR_HGR_POOL_GPO)
        return vtr_dev_gpo_forward(m->device, out, p->weights, p->workspace, inp, lengths,
                                   p->params, B, T, E, c->gpo_pe, c->gpo_hidden, err);
    return vtr_dev_attention_pool_forward(m->device, out, p->weights, inp, p->params, p->params + E,
                                          lengths, B, T, E, err);
}

// dinp (B,T,E) +=, the pooler's gradients +=; dout (B,E); after pool_forward on inp
static vtr_status pool_backward(vtr_hgr_model *m, const vtr_hgr_pool *p, float *dinp,
                                const float *dout, const float *inp, const int *lengths, int B,
                                int T, vtr_error *err)
{
    const vtr_hgr_config *c = &m->cfg;
    int E = c->embed_size;
    if (c->global_pool == VTR_HGR_POOL_GPO)
        return vtr_dev_gpo_backward(m->device, dinp, p->grads, m->scratch, dout, inp, p->weights,
                                    lengths, p->params, p->workspace, B, T, E, c->gpo_pe,
                                    c->gpo_hidden, err);
    return vtr_dev_attention_pool_backward(m->device, dinp, p->grads, p->grads + E, dout, inp,
                                           p->weights, p->params, lengths, B, T, E, err);
}

/* ---- parameters -------------------------------------------------------------------- */

static vtr_status add_pool(vtr_param_set *ps, const char *prefix, const vtr_hgr_config *c,
                           vtr_error *err)
{
    vtr_status st;
    if (c->global_pool == VTR_HGR_POOL_GPO)
        return vtr_model_param_add_gpo(ps, prefix, c->gpo_pe, c->gpo_hidden, err);
    if ((st = vtr_model_param_add(ps, prefix, "ft_attn.weight", VTR_F32, true, 2, 1, c->embed_size,
                                  err)))
        return st;
    return vtr_model_param_add(ps, prefix, "ft_attn.bias", VTR_F32, true, 1, 1, 0, err);
}

static const char *const LEVEL_NAMES[3][2] = {
    {"level_embeds.0.weight", "level_embeds.0.bias"},
    {"level_embeds.1.weight", "level_embeds.1.bias"},
    {"level_embeds.2.weight", "level_embeds.2.bias"},
};

#define GCN_PREFIX "text_encoder.gcn.layers.0."

vtr_status vtr_hgr_model_add_params(vtr_param_set *ps, const vtr_hgr_config *c, vtr_error *err)
{
    int F = c->feature_dim, E = c->embed_size;
    const char *v = "video_encoder.", *t = "text_encoder.";
    vtr_status st;
    for (int k = 0; k < 3; k++)
        if ((st = vtr_model_param_add(ps, v, LEVEL_NAMES[k][0], VTR_F32, true, 2, E, F, err)) ||
            (st = vtr_model_param_add(ps, v, LEVEL_NAMES[k][1], VTR_F32, true, 1, E, 0, err)))
            return st;
    if ((st = add_pool(ps, v, c, err)) ||
        (st = vtr_model_param_add(ps, t, "embedding.we.weight", VTR_F32, true, 2, c->vocab_size,
                                  c->word_dim, err)) ||
        (st = vtr_model_param_add_gru(ps, "text_encoder.rnn.", c->word_dim, E, err)) ||
        (st = add_pool(ps, t, c, err)) ||
        (st = vtr_model_param_add(ps, t, "role_embedding.weight", VTR_F32, true, 2, c->num_roles, E,
                                  err)))
        return st;
    for (int k = 0; k < VTR_ATTN_GCN_TENSORS; k++) {
        int64_t shape[2] = {0, 0};
        int ndim = vtr_attn_gcn_param_shape(E, E / 2, (vtr_attn_gcn_tensor)k, shape);
        if ((st = vtr_model_param_add(ps, GCN_PREFIX, vtr_attn_gcn_param_name(k), VTR_F32, true,
                                      ndim, shape[0], shape[1], err)))
            return st;
    }
    return VTR_OK;
}

static void resolve_pool(vtr_hgr_pool *p, const vtr_param_set *ps, const char *prefix,
                         const vtr_hgr_config *c)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix,
             c->global_pool == VTR_HGR_POOL_GPO ? "gpool.gru.weight_ih_l0" : "ft_attn.weight");
    p->params = vtr_param_data(ps, name);
    p->grads = vtr_param_grad(ps, name);
}

static void resolve_params(vtr_hgr_model *m)
{
    const vtr_param_set *ps = &m->params;
    char name[64];
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "video_encoder.%s", LEVEL_NAMES[k][0]);
        m->level_w[k] = vtr_param_data(ps, name);
        m->level_dw[k] = vtr_param_grad(ps, name);
        snprintf(name, sizeof name, "video_encoder.%s", LEVEL_NAMES[k][1]);
        m->level_b[k] = vtr_param_data(ps, name);
        m->level_db[k] = vtr_param_grad(ps, name);
    }
    m->embed_w = vtr_param_data(ps, "text_encoder.embedding.we.weight");
    m->embed_dw = vtr_param_grad(ps, "text_encoder.embedding.we.weight");
    m->rnn = vtr_param_data(ps, "text_encoder.rnn.weight_ih_l0");
    m->drnn = vtr_param_grad(ps, "text_encoder.rnn.weight_ih_l0");
    m->role_w = vtr_param_data(ps, "text_encoder.role_embedding.weight");
    m->drole_w = vtr_param_grad(ps, "text_encoder.role_embedding.weight");
    snprintf(name, sizeof name, GCN_PREFIX "%s", vtr_attn_gcn_param_name(0));
    m->gcn = vtr_param_data(ps, name);
    m->dgcn = vtr_param_grad(ps, name);
    resolve_pool(&m->vid_pool, ps, "video_encoder.", &m->cfg);
    resolve_pool(&m->txt_pool, ps, "text_encoder.", &m->cfg);
    if (!m->dev_data)
        return;
    /* on the GPU: the same offsets into its copy */
    float **values[] = {&m->level_w[0], &m->level_w[1], &m->level_w[2],      &m->level_b[0],
                        &m->level_b[1], &m->level_b[2], &m->embed_w,         &m->rnn,
                        &m->role_w,     &m->gcn,        &m->vid_pool.params, &m->txt_pool.params};
    float **grads[] = {&m->level_dw[0], &m->level_dw[1], &m->level_dw[2],    &m->level_db[0],
                       &m->level_db[1], &m->level_db[2], &m->embed_dw,       &m->drnn,
                       &m->drole_w,     &m->dgcn,        &m->vid_pool.grads, &m->txt_pool.grads};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        *values[i] = m->dev_data + (*values[i] - ps->data);
    for (size_t i = 0; i < sizeof grads / sizeof *grads; i++)
        *grads[i] = m->dev_grad + (*grads[i] - ps->grad);
}

void vtr_hgr_init_params(vtr_hgr_model *m, uint64_t seed)
{
    vtr_param_set *ps = &m->params;
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        float *x = ps->data + e->offset;
        const char *name = e->name;
        vtr_rng rng;
        vtr_rng_init(&rng, seed, (uint64_t)i);
        if (strcmp(name, "text_encoder.embedding.we.weight") == 0) {
            vtr_model_fill_uniform(x, e->numel, 0.1f, &rng);
        } else if (strncmp(name, "text_encoder.rnn.weight_", 24) == 0) {
            /* the reference's SentEncoder.init_weights */
            vtr_model_fill_orthogonal(x, (int)e->shape[0], (int)e->shape[1], &rng,
                                      m->host_scratch ? m->host_scratch : m->scratch);
        } else if (strncmp(name, "text_encoder.rnn.bias_", 22) == 0) {
            memset(x, 0, sizeof(float) * e->numel);
        } else if (strcmp(name, "text_encoder.role_embedding.weight") == 0) {
            for (size_t k = 0; k < e->numel; k++)
                x[k] = vtr_rng_normal(&rng);
        } else if (strstr(name, "layernorm.")) {
            float value = strstr(name, ".weight") ? 1.0f : 0.0f;
            for (size_t k = 0; k < e->numel; k++)
                x[k] = value;
        } else {
            /* GRU tensors, Linear weights (2-D) and biases: PyTorch's defaults */
            vtr_model_fill_default(ps, i, &rng);
        }
    }
    vtr_param_set_zero_grad(ps);
}

/* ---- the arena ------------------------------------------------------------------- */

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Doubles of vtr_hgr_init_params's QR of the BiGRU's (3E, W) and (3E, E) weights. */
static size_t orthogonal_scratch_size(const vtr_hgr_config *c)
{
    return max_size(vtr_model_orthogonal_scratch_size(3 * c->embed_size, c->word_dim),
                    vtr_model_orthogonal_scratch_size(3 * c->embed_size, c->embed_size));
}

static size_t layout_arena(vtr_hgr_model *m, char *base)
{
    const vtr_hgr_config *c = &m->cfg;
    int Bi = m->max_batch, Ti = m->max_frames, Li = m->max_words, Ei = c->embed_size;
    int Wi = c->word_dim, NV = c->num_verbs, NN = c->num_nouns, N = 1 + NV + NN;
    int P = NV > NN ? NV : NN;
    size_t F = (size_t)c->feature_dim, E = (size_t)Ei, W = (size_t)Wi, Bm = (size_t)Bi;
    size_t R = Bm * (size_t)Ti, Q = Bm * (size_t)Li, f = sizeof(float), ni = sizeof(int);
    size_t off = 0;
    /* the caption BiGRU's buffers: two one-direction GRUs on the CPU, one two-direction GRU
     * on the GPU (model_ops.h); the inputs and what is derived from them on the host (the
     * real frames packed, roles, phrase counts) are in the stage's slot there */
    bool gpu = m->device == VTR_DEVICE_CUDA;
    int dirs = gpu ? 2 : 1;
    size_t rnn_workspace = vtr_gru_workspace_size(Bi, Li, Wi, Ei, dirs);
    size_t rnn_scratch = vtr_gru_scratch_size(Bi, Li, Wi, Ei, dirs);
    size_t cpu = gpu ? 0 : 1;

    m->vid_rows = vtr_arena_carve(base, &off, cpu * f * R * F);
    for (int k = 0; k < 2; k++)
        m->rows[k] = vtr_arena_carve(base, &off, f * R * E);
    for (int k = 0; k < 3; k++)
        m->vid_level[k] = vtr_arena_carve(base, &off, f * R * E);
    m->vid_pool.weights = vtr_arena_carve(base, &off, f * R);
    m->vid_pool.workspace = vtr_arena_carve(base, &off, pool_workspace_size(c, Bi, Ti));
    m->vid_glob = vtr_arena_carve(base, &off, f * Bm * E);
    m->vid_glob_n = vtr_arena_carve(base, &off, f * Bm * E);
    m->vid_glob_norm = vtr_arena_carve(base, &off, f * Bm);
    m->word_emb = vtr_arena_carve(base, &off, f * Q * W);
    m->bigru.inp_rev = vtr_arena_carve(base, &off, cpu * f * Q * W);
    m->bigru.workspace[0] = vtr_arena_carve(base, &off, rnn_workspace);
    m->bigru.workspace[1] = vtr_arena_carve(base, &off, cpu * rnn_workspace);
    m->bigru.out_rev = vtr_arena_carve(base, &off, cpu * f * Q * E);
    m->bigru.dinp_rev = vtr_arena_carve(base, &off, cpu * f * Q * W);
    m->cap_feat = vtr_arena_carve(base, &off, f * Q * E);
    m->txt_pool.weights = vtr_arena_carve(base, &off, f * Q);
    m->txt_pool.workspace = vtr_arena_carve(base, &off, pool_workspace_size(c, Bi, Li));
    m->verb_roles = vtr_arena_carve(base, &off, cpu * ni * Bm * NV);
    m->noun_roles = vtr_arena_carve(base, &off, cpu * ni * Bm * NN);
    m->verb_argmax = vtr_arena_carve(base, &off, ni * Bm * NV * E);
    m->noun_argmax = vtr_arena_carve(base, &off, ni * Bm * NN * E);
    m->nodes = vtr_arena_carve(base, &off, f * Bm * N * E);
    m->gcn_out = vtr_arena_carve(base, &off, f * Bm * N * E);
    m->gcn_workspace = vtr_arena_carve(base, &off, vtr_attn_gcn_workspace_size(Bi, N, Ei, Ei / 2));
    m->sent = vtr_arena_carve(base, &off, f * Bm * E);
    m->sent_n = vtr_arena_carve(base, &off, f * Bm * E);
    m->sent_norm = vtr_arena_carve(base, &off, f * Bm);
    m->verbs = vtr_arena_carve(base, &off, f * Bm * NV * E);
    m->nouns = vtr_arena_carve(base, &off, f * Bm * NN * E);
    m->n_verbs = vtr_arena_carve(base, &off, cpu * ni * Bm);
    m->n_nouns = vtr_arena_carve(base, &off, cpu * ni * Bm);
    m->global_counts = vtr_arena_carve(base, &off, (1 - cpu) * ni * 3 * Bm);
    m->loss = vtr_arena_carve(base, &off, f);
    m->s_global = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->s_verb = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->s_noun = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->s_fused = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->pa_workspace[0] =
        vtr_arena_carve(base, &off, vtr_phrase_attention_workspace_size(Bi, Bi, Ti, NV, Ei));
    m->pa_workspace[1] =
        vtr_arena_carve(base, &off, vtr_phrase_attention_workspace_size(Bi, Bi, Ti, NN, Ei));
    m->ds_fused = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->ds_global = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->ds_verb = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->ds_noun = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->dvid_glob_n = vtr_arena_carve(base, &off, f * Bm * E);
    m->dvid_glob = vtr_arena_carve(base, &off, f * Bm * E);
    m->dsent_n = vtr_arena_carve(base, &off, f * Bm * E);
    m->dsent = vtr_arena_carve(base, &off, f * Bm * E);
    for (int k = 0; k < 3; k++)
        m->dvid_level[k] = vtr_arena_carve(base, &off, f * R * E);
    m->dverbs = vtr_arena_carve(base, &off, f * Bm * NV * E);
    m->dnouns = vtr_arena_carve(base, &off, f * Bm * NN * E);
    m->dgcn_out = vtr_arena_carve(base, &off, f * Bm * N * E);
    m->dnodes = vtr_arena_carve(base, &off, f * Bm * N * E);
    m->dcap_feat = vtr_arena_carve(base, &off, f * Q * E);
    for (int k = 0; k < 2; k++)
        m->dword[k] = vtr_arena_carve(base, &off, f * Q * W);
    size_t scratch = rnn_scratch;
    scratch = max_size(scratch, pool_scratch_size(c, Bi, Ti));
    scratch = max_size(scratch, pool_scratch_size(c, Bi, Li));
    scratch = max_size(scratch, vtr_attn_gcn_scratch_size(Bi, N, Ei, Ei / 2));
    scratch = max_size(scratch, vtr_role_span_pool_scratch_size(Bi, P, Ei));
    scratch = max_size(scratch, vtr_phrase_attention_scratch_size(Bi, Bi, Ti, P, Ei));
    /* vtr_hgr_init_params orthogonalizes the BiGRU's weights there (the GPU: host_scratch) */
    scratch = max_size(scratch, cpu * sizeof(double) * orthogonal_scratch_size(c));
    m->scratch = vtr_arena_carve(base, &off, scratch);
    m->bigru.scratch[0] = m->scratch;
    m->bigru.scratch[1] = vtr_arena_carve(base, &off, cpu * rnn_scratch);
    return off;
}

static size_t slot_bytes(const vtr_hgr_model *m);

vtr_status vtr_hgr_model_init(vtr_hgr_model *m, const vtr_hgr_config *cfg, int max_batch,
                              int max_frames, int max_words, vtr_error *err)
{
    return vtr_hgr_model_init_on(m, cfg, VTR_DEVICE_CPU, max_batch, max_frames, max_words, err);
}

vtr_status vtr_hgr_model_init_on(vtr_hgr_model *m, const vtr_hgr_config *cfg, vtr_device device,
                                 int max_batch, int max_frames, int max_words, vtr_error *err)
{
    vtr_status st;
    memset(m, 0, sizeof *m);
    if ((st = vtr_hgr_config_check(cfg, err)))
        return st;
    if (device == VTR_DEVICE_CUDA && !vtr_cuda_available()) {
        vtr_cuda_init(0, NULL, 0, err); /* fails, saying why and what to do */
        vtr_error_context(err, "hgr model");
        return VTR_ERR_DEVICE;
    }
    if (max_batch < 1 || max_frames < 1 || max_words < 1 ||
        (long long)max_batch * max_frames > MAX_ROWS || (long long)max_batch * max_words > MAX_ROWS)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "hgr model: max_batch %d, max_frames %d, max_words %d: each must be >= 1 "
                        "and batch x length at most %d rows",
                        max_batch, max_frames, max_words, MAX_ROWS);
    m->cfg = *cfg;
    m->device = device;
    m->max_batch = max_batch;
    m->max_frames = max_frames;
    m->max_words = max_words;
    vtr_param_set_init(&m->params);
    if ((st = vtr_hgr_model_add_params(&m->params, cfg, err)) ||
        (st = vtr_param_set_finalize(&m->params, err)) ||
        (st = vtr_dev_params_alloc(device, &m->params, &m->dev_data, &m->dev_grad,
                                   "hgr model parameters", err)))
        goto fail;
    resolve_params(m);
    size_t bytes = layout_arena(m, NULL);
    if ((st = vtr_dev_alloc(device, &m->arena, bytes, "hgr model", true, err)))
        goto fail;
    layout_arena(m, m->arena);
    if (device == VTR_DEVICE_CUDA) {
        m->host_scratch = malloc(sizeof(double) * orthogonal_scratch_size(cfg));
        if (!m->host_scratch) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "hgr model: out of memory");
            goto fail;
        }
        if ((st = vtr_cuda_stage_new(&m->stage, 1, slot_bytes(m), err))) {
            vtr_error_context(
                err, "hgr model: the inputs of a batch (a smaller batch, or --device cpu)");
            goto fail;
        }
    }
    return VTR_OK;

fail:
    vtr_hgr_model_free(m);
    return st;
}

void vtr_hgr_model_free(vtr_hgr_model *m)
{
    vtr_param_set_free(&m->params);
    vtr_dev_free(m->device, m->arena);
    vtr_cuda_stage_free(m->stage);
    if (m->dev_data)
        vtr_dev_free(m->device, m->dev_data);
    free(m->host_scratch);
    memset(m, 0, sizeof *m);
}

vtr_status vtr_hgr_params_to_device(vtr_hgr_model *m, vtr_error *err)
{
    return vtr_dev_params_upload(m->device, &m->params, m->dev_data, err);
}

vtr_status vtr_hgr_params_to_host(vtr_hgr_model *m, bool grads, vtr_error *err)
{
    return vtr_dev_params_download(m->device, &m->params, m->dev_data, grads ? m->dev_grad : NULL,
                                   err);
}

vtr_status vtr_hgr_zero_grad(vtr_hgr_model *m, vtr_error *err)
{
    return vtr_dev_params_zero_grad(m->device, &m->params, m->dev_grad, err);
}

/* ---- argument checks (once per call) -------------------------------------------- */

static vtr_status check_videos(const vtr_hgr_model *m, const int *lengths, int B, int T,
                               vtr_error *err)
{
    if (B < 1 || B > m->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: batch of %d videos outside 1..%d", B,
                        m->max_batch);
    if (T < 1 || T > m->max_frames)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: %d frames outside 1..%d", T,
                        m->max_frames);
    vtr_status st = vtr_nn_check_lengths(lengths, B, T, err);
    if (st)
        vtr_error_context(err, "hgr model: videos");
    return st;
}

static vtr_status check_captions(const vtr_hgr_model *m, const vtr_hgr_captions *c, vtr_error *err)
{
    int B = c->B, L = c->L, NP = m->cfg.num_verbs + m->cfg.num_nouns;
    vtr_status st;
    if (B < 1 || B > m->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: batch of %d captions outside 1..%d", B,
                        m->max_batch);
    if (L < 1 || L > m->max_words)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: caption length %d outside 1..%d", L,
                        m->max_words);
    if ((st = vtr_nn_check_lengths(c->lengths, B, L, err))) {
        vtr_error_context(err, "hgr model: captions");
        return st;
    }
    for (int b = 0; b < B; b++) {
        if ((st =
                 vtr_nn_check_ids(c->ids + (size_t)b * L, c->lengths[b], m->cfg.vocab_size, err))) {
            vtr_error_context(err, "hgr model: caption %d", b);
            return st;
        }
        if ((st = vtr_nn_check_ids(c->node_roles + (size_t)b * NP, NP, m->cfg.num_roles, err))) {
            vtr_error_context(err, "hgr model: node roles of caption %d", b);
            return st;
        }
    }
    return VTR_OK;
}

/* ---- a call's inputs on the model's device ----------------------------------------- */

/* The number of non-empty spans of each of B items' P masks (P,L) */
static void count_phrases(int *count, const uint8_t *masks, int B, int P, int L)
{
    for (int b = 0; b < B; b++) {
        int k = 0;
        for (int q = 0; q < P; q++) {
            const uint8_t *row = masks + ((size_t)b * P + q) * L;
            int any = 0;
            for (int t = 0; t < L && !any; t++)
                any = row[t] != 0;
            k += any;
        }
        count[b] = k;
    }
}

/* node_roles (B,NV+NN) -> verb_roles (B,NV), noun_roles (B,NN) */
static void split_roles(int *verb_roles, int *noun_roles, const int *node_roles, int B, int NV,
                        int NN)
{
    for (int b = 0; b < B; b++) {
        memcpy(verb_roles + (size_t)b * NV, node_roles + (size_t)b * (NV + NN), sizeof(int) * NV);
        memcpy(noun_roles + (size_t)b * NN, node_roles + (size_t)b * (NV + NN) + NV,
               sizeof(int) * NN);
    }
}

/* Where the ops read a call's inputs (the model's device), and the host copies the loops
 * read. On the CPU: the caller's buffers, and the real frames packed, the roles split and
 * the phrases counted into the arena; on the GPU all of it in the stage's slot. */
typedef struct hgr_inputs {
    const float *rows;        /* (n,F) the real frames, packed */
    const int *frame_lengths; /* (B) */
    vtr_hgr_captions c;       /* node_roles unused */
    const int *roles[2];      /* verb_roles (B,NV), noun_roles (B,NN) */
    const int *n[2];          /* n_verbs, n_nouns (B) */
    const int *host_n[2];     /* the same on the host */
    bool slot;                /* the GPU's slot, to release after the call's work */
} hgr_inputs;

/* Regions of the stage's slot, carved in order as vtr_arena_carve does (host NULL: only
 * measures). */
typedef struct slot_writer {
    char *host;
    size_t off;
} slot_writer;

static size_t slot_take(slot_writer *w, size_t bytes, void **at)
{
    size_t off = w->off;
    vtr_arena_carve(NULL, &w->off, bytes);
    *at = w->host ? w->host + off : NULL;
    return off;
}

static size_t slot_put(slot_writer *w, const void *src, size_t bytes)
{
    void *at;
    size_t off = slot_take(w, bytes, &at);
    if (at && bytes)
        memcpy(at, src, bytes);
    return off;
}

/* The regions of n encoded videos of v from row first on: global, verb, noun, lengths
 * (sources NULL where v's are). */
static void video_regions(const vtr_hgr_model *m, const vtr_hgr_encoded_videos *v, int first, int n,
                          const void *src[4], size_t bytes[4])
{
    size_t E = (size_t)m->cfg.embed_size, T = (size_t)v->T, i = (size_t)first, f = sizeof(float);
    src[0] = v->global ? v->global + i * E : NULL;
    src[1] = v->verb ? v->verb + i * T * E : NULL;
    src[2] = v->noun ? v->noun + i * T * E : NULL;
    src[3] = v->lengths ? v->lengths + i : NULL;
    bytes[0] = f * (size_t)n * E;
    bytes[1] = bytes[2] = f * (size_t)n * T * E;
    bytes[3] = sizeof(int) * (size_t)n;
}

/* The regions of n encoded captions of c from row first on: sent, verbs, nouns, n_verbs,
 * n_nouns (sources NULL where c's are). */
static void caption_regions(const vtr_hgr_model *m, const vtr_hgr_encoded_captions *c, int first,
                            int n, const void *src[5], size_t bytes[5])
{
    size_t E = (size_t)m->cfg.embed_size, NV = (size_t)m->cfg.num_verbs;
    size_t NN = (size_t)m->cfg.num_nouns, i = (size_t)first, f = sizeof(float);
    src[0] = c->sent ? c->sent + i * E : NULL;
    src[1] = c->verbs ? c->verbs + i * NV * E : NULL;
    src[2] = c->nouns ? c->nouns + i * NN * E : NULL;
    src[3] = c->n_verbs ? c->n_verbs + i : NULL;
    src[4] = c->n_nouns ? c->n_nouns + i : NULL;
    bytes[0] = f * (size_t)n * E;
    bytes[1] = f * (size_t)n * NV * E;
    bytes[2] = f * (size_t)n * NN * E;
    bytes[3] = bytes[4] = sizeof(int) * (size_t)n;
}

/* n videos of v from row first on in the slot; their offsets in at (4). */
static void put_videos(const vtr_hgr_model *m, slot_writer *w, size_t *at,
                       const vtr_hgr_encoded_videos *v, int first, int n)
{
    const void *src[4];
    size_t bytes[4];
    video_regions(m, v, first, n, src, bytes);
    for (int k = 0; k < 4; k++)
        at[k] = slot_put(w, src[k], bytes[k]);
}

/* n captions of c from row first on in the slot; their offsets in at (5). */
static void put_captions(const vtr_hgr_model *m, slot_writer *w, size_t *at,
                         const vtr_hgr_encoded_captions *c, int first, int n)
{
    const void *src[5];
    size_t bytes[5];
    caption_regions(m, c, first, n, src, bytes);
    for (int k = 0; k < 5; k++)
        at[k] = slot_put(w, src[k], bytes[k]);
}

/* A call's videos (frames NULL: none) and captions (c NULL: none) in the slot; offsets
 * in at (rows, frame lengths, ids, lengths, verb and noun masks, rel_edges, verb and noun
 * roles, n_verbs, n_nouns). With w->host NULL, the largest call's regions (measures). */
static void put_inputs(const vtr_hgr_model *m, slot_writer *w, size_t *at, const float *frames,
                       const int *fl, int B, int T, const vtr_hgr_captions *c)
{
    const vtr_hgr_config *cf = &m->cfg;
    size_t F = (size_t)cf->feature_dim, NV = (size_t)cf->num_verbs, NN = (size_t)cf->num_nouns;
    size_t N = 1 + NV + NN, f = sizeof(float), ni = sizeof(int);
    bool measure = !w->host;
    size_t Bv = measure ? (size_t)m->max_batch : (size_t)B;
    size_t Bc = measure ? (size_t)m->max_batch : c ? (size_t)c->B : 0;
    size_t L = measure ? (size_t)m->max_words : c ? (size_t)c->L : 0;
    void *p;
    if (frames || measure) {
        size_t n = measure ? Bv * (size_t)m->max_frames : vtr_pack_count(fl, B);
        at[0] = slot_take(w, f * n * F, &p);
        if (p)
            vtr_pack_rows(p, frames, fl, B, T, (int)F);
        at[1] = slot_put(w, fl, ni * Bv);
    }
    if (c || measure) {
        at[2] = slot_put(w, c ? c->ids : NULL, ni * Bc * L);
        at[3] = slot_put(w, c ? c->lengths : NULL, ni * Bc);
        at[4] = slot_put(w, c ? c->verb_masks : NULL, Bc * NV * L);
        at[5] = slot_put(w, c ? c->noun_masks : NULL, Bc * NN * L);
        at[6] = slot_put(w, c ? c->rel_edges : NULL, f * Bc * N * N);
        void *q;
        at[7] = slot_take(w, ni * Bc * NV, &p);
        at[8] = slot_take(w, ni * Bc * NN, &q);
        if (p)
            split_roles(p, q, c->node_roles, (int)Bc, (int)NV, (int)NN);
        at[9] = slot_take(w, ni * Bc, &p);
        if (p)
            count_phrases(p, c->verb_masks, (int)Bc, (int)NV, (int)L);
        at[10] = slot_take(w, ni * Bc, &p);
        if (p)
            count_phrases(p, c->noun_masks, (int)Bc, (int)NN, (int)L);
    }
}

/* Bytes of the stage's slot: the largest call's inputs, or a score block's. */
static size_t slot_bytes(const vtr_hgr_model *m)
{
    size_t at[11];
    slot_writer a = {NULL, 0}, b = {NULL, 0};
    put_inputs(m, &a, at, NULL, NULL, 0, 0, NULL);
    int Bm = m->max_batch;
    vtr_hgr_encoded_videos v = {.T = m->max_frames};
    vtr_hgr_encoded_captions c = {0};
    put_videos(m, &b, at, &v, 0, Bm);
    put_captions(m, &b, at + 4, &c, 0, Bm);
    return max_size(a.off, b.off);
}

/* The GPU's slot, its host buffer ready for w (once its last copy has left it). */
static vtr_status open_slot(vtr_hgr_model *m, slot_writer *w, vtr_error *err)
{
    void *h;
    VTR_TRY(vtr_cuda_stage_host(m->stage, 0, &h, err));
    *w = (slot_writer){h, 0};
    return VTR_OK;
}

/* w's regions copied to the GPU; *dev the device buffer the work queued next reads. */
static vtr_status send_slot(vtr_hgr_model *m, const slot_writer *w, char **dev, vtr_error *err)
{
    void *d;
    VTR_TRY(vtr_cuda_stage_upload(m->stage, 0, w->off, err));
    VTR_TRY(vtr_cuda_stage_take(m->stage, 0, &d, err));
    *dev = d;
    return VTR_OK;
}

/* After the work that reads the slot is queued; st: the call's status so far, returned
 * unless it is VTR_OK and the release fails. */
static vtr_status release_slot(vtr_hgr_model *m, bool slot, vtr_status st, vtr_error *err)
{
    return slot ? vtr_cuda_stage_release(m->stage, 0, st, err) : st;
}

/* A call's videos (frames NULL: none) and captions (c NULL: none) where the ops read them
 * (hgr_inputs); the GPU's slot is the call's until release_slot. */
static vtr_status take_inputs(vtr_hgr_model *m, const float *frames, const int *fl, int B, int T,
                              const vtr_hgr_captions *c, hgr_inputs *in, vtr_error *err)
{
    const vtr_hgr_config *cf = &m->cfg;
    int NV = cf->num_verbs, NN = cf->num_nouns;
    memset(in, 0, sizeof *in);
    if (m->device == VTR_DEVICE_CPU) {
        if (frames) {
            vtr_pack_rows(m->vid_rows, frames, fl, B, T, cf->feature_dim);
            in->rows = m->vid_rows;
            in->frame_lengths = fl;
        }
        if (c) {
            split_roles(m->verb_roles, m->noun_roles, c->node_roles, c->B, NV, NN);
            count_phrases(m->n_verbs, c->verb_masks, c->B, NV, c->L);
            count_phrases(m->n_nouns, c->noun_masks, c->B, NN, c->L);
            in->c = *c;
            in->roles[0] = m->verb_roles;
            in->roles[1] = m->noun_roles;
            in->n[0] = in->host_n[0] = m->n_verbs;
            in->n[1] = in->host_n[1] = m->n_nouns;
        }
        return VTR_OK;
    }
    size_t at[11];
    slot_writer w;
    char *d;
    VTR_TRY(open_slot(m, &w, err));
    put_inputs(m, &w, at, frames, fl, B, T, c);
    VTR_TRY(send_slot(m, &w, &d, err));
    in->slot = true;
    if (frames) {
        in->rows = (const float *)(d + at[0]);
        in->frame_lengths = (const int *)(d + at[1]);
    }
    if (c) {
        in->c = (vtr_hgr_captions){.B = c->B,
                                   .L = c->L,
                                   .ids = (const int *)(d + at[2]),
                                   .lengths = (const int *)(d + at[3]),
                                   .verb_masks = (const uint8_t *)(d + at[4]),
                                   .noun_masks = (const uint8_t *)(d + at[5]),
                                   .rel_edges = (const float *)(d + at[6])};
        for (int k = 0; k < 2; k++) {
            in->roles[k] = (const int *)(d + at[7 + k]);
            in->n[k] = (const int *)(d + at[9 + k]);
            in->host_n[k] = (const int *)(w.host + at[9 + k]);
        }
    }
    return VTR_OK;
}

/* ---- forward ------------------------------------------------------------------- */

/* rows [from, from + n) of each item's node features (B,N,E) <-> a (B,n,E) buffer */
static vtr_status copy_nodes(vtr_device dev, float *dst, int dst_n, int dst_from, const float *src,
                             int src_n, int src_from, int n, int B, int E, vtr_error *err)
{
    size_t row = sizeof(float) * (size_t)E;
    return vtr_dev_copy_2d(dev, dst + (size_t)dst_from * E, row * dst_n, src + (size_t)src_from * E,
                           row * src_n, row * n, (size_t)B, err);
}

/* Video side: in's frames, hl their lengths on the host -> m->vid_level[0..2] (B,T,E),
 * m->vid_glob_n (B,E). Dropout p with streams 8 * step + k when p > 0, the packed rows'
 * draws from row row0 on (the real frames of the pairs before these in a data-parallel
 * batch; else 0). */
static vtr_status video_forward(vtr_hgr_model *m, const hgr_inputs *in, const int *hl, int B, int T,
                                float p, uint64_t seed, uint64_t step, int64_t row0, vtr_error *err)
{
    vtr_device dev = m->device;
    int F = m->cfg.feature_dim, E = m->cfg.embed_size;
    // the Linear layers over the real frames only, packed (take_inputs): the padded frames
    // (the reference's bias rows) are read by no later op
    size_t n = vtr_pack_count(hl, B);
    for (int k = 0; k < 3; k++) {
        VTR_TRY(vtr_dev_linear_forward(dev, m->rows[0], in->rows, m->level_w[k], m->level_b[k],
                                       (int)n, F, E, err));
        VTR_TRY(vtr_dev_dropout_forward(dev, m->rows[0], m->rows[0], n * E, p, seed,
                                        DROPOUT_SITES * step + SITE_LEVEL0 + k, (uint64_t)row0 * E,
                                        err));
        VTR_TRY(
            vtr_dev_unpack_rows(dev, m->vid_level[k], m->rows[0], in->frame_lengths, B, T, E, err));
    }
    VTR_TRY(
        pool_forward(m, &m->vid_pool, m->vid_glob, m->vid_level[0], in->frame_lengths, B, T, err));
    return vtr_dev_l2norm_forward(dev, m->vid_glob_n, m->vid_glob_norm, m->vid_glob, B, E, err);
}

/* Text side: in's captions, hl their lengths on the host -> m->sent_n (B,E), m->verbs
 * (B,NV,E), m->nouns (B,NN,E). Dropout (words p_words, GCN p_gcn) from seed and step, the
 * draws of captions first .. first+B-1 of a data-parallel batch (else first 0). */
static vtr_status caption_forward(vtr_hgr_model *m, const hgr_inputs *in, const int *hl,
                                  float p_words, float p_gcn, uint64_t seed, uint64_t step,
                                  int64_t first, vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_hgr_config *cf = &m->cfg;
    const vtr_hgr_captions *c = &in->c;
    int B = c->B, L = c->L, W = cf->word_dim, E = cf->embed_size;
    int NV = cf->num_verbs, NN = cf->num_nouns, N = 1 + NV + NN;
    VTR_TRY(
        vtr_dev_embedding_forward(dev, m->word_emb, c->ids, m->embed_w, c->lengths, B, L, W, err));
    VTR_TRY(vtr_dev_dropout_forward(dev, m->word_emb, m->word_emb, (size_t)B * L * W, p_words, seed,
                                    DROPOUT_SITES * step + SITE_WORDS, (uint64_t)first * L * W,
                                    err));
    VTR_TRY(vtr_dev_caption_bigru_forward(dev, m->cap_feat, &m->bigru, m->word_emb, c->lengths, hl,
                                          m->rnn, B, L, W, E, err));

    // nodes (B,N,E) = [root, verbs, nouns]
    VTR_TRY(pool_forward(m, &m->txt_pool, m->sent, m->cap_feat, c->lengths, B, L, err));
    VTR_TRY(vtr_dev_role_span_pool_forward(dev, m->verbs, m->verb_argmax, m->cap_feat,
                                           c->verb_masks, in->roles[0], m->role_w, B, NV, L, E,
                                           err));
    VTR_TRY(vtr_dev_role_span_pool_forward(dev, m->nouns, m->noun_argmax, m->cap_feat,
                                           c->noun_masks, in->roles[1], m->role_w, B, NN, L, E,
                                           err));
    VTR_TRY(copy_nodes(dev, m->nodes, N, 0, m->sent, 1, 0, 1, B, E, err));
    VTR_TRY(copy_nodes(dev, m->nodes, N, 1, m->verbs, NV, 0, NV, B, E, err));
    VTR_TRY(copy_nodes(dev, m->nodes, N, 1 + NV, m->nouns, NN, 0, NN, B, E, err));

    VTR_TRY(vtr_dev_attn_gcn_forward(dev, m->gcn_out, m->gcn_workspace, m->nodes, c->rel_edges,
                                     m->gcn, B, N, E, E / 2, p_gcn, seed,
                                     DROPOUT_SITES * step + SITE_GCN, first, err));
    VTR_TRY(copy_nodes(dev, m->sent, 1, 0, m->gcn_out, N, 0, 1, B, E, err));
    VTR_TRY(copy_nodes(dev, m->verbs, NV, 0, m->gcn_out, N, 1, NV, B, E, err));
    VTR_TRY(copy_nodes(dev, m->nouns, NN, 0, m->gcn_out, N, 1 + NV, NN, B, E, err));
    return vtr_dev_l2norm_forward(dev, m->sent_n, m->sent_norm, m->sent, B, E, err);
}

/* The encodings a score reads, on the model's device, with the host copies of the counts
 * the loops read. */
typedef struct hgr_encodings {
    const float *glob_n, *verb, *noun;   /* videos: (Bv,E), (Bv,T,E) x 2 */
    const int *vlen, *host_vlen;         /* (Bv) */
    const float *sent_n, *verbs, *nouns; /* captions: (Bc,E), (Bc,NV,E), (Bc,NN,E) */
    const int *n[2], *host_n[2];         /* n_verbs, n_nouns (Bc) */
} hgr_encodings;

/* The three levels and the fused score of Bv videos x Bc captions into m->s_* (Bv,Bc);
 * the phrase attention's workspaces kept for backward. */
static vtr_status scores_forward(vtr_hgr_model *m, const hgr_encodings *x, int Bv, int T, int Bc,
                                 vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_hgr_config *c = &m->cfg;
    int E = c->embed_size;
    VTR_TRY(
        vtr_dev_cosine_similarity_forward(dev, m->s_global, x->glob_n, x->sent_n, Bv, Bc, E, err));
    VTR_TRY(vtr_dev_phrase_attention_score_forward(
        dev, m->s_verb, m->pa_workspace[0], x->verb, x->vlen, x->host_vlen, x->verbs, x->n[0],
        x->host_n[0], Bv, Bc, T, c->num_verbs, E, c->sigma, err));
    VTR_TRY(vtr_dev_phrase_attention_score_forward(
        dev, m->s_noun, m->pa_workspace[1], x->noun, x->vlen, x->host_vlen, x->nouns, x->n[1],
        x->host_n[1], Bv, Bc, T, c->num_nouns, E, c->sigma, err));
    return vtr_dev_hgr_fused_score_forward(dev, m->s_fused, m->s_global, m->s_verb, m->s_noun,
                                           (size_t)Bv * Bc, err);
}

/* ---- backward ------------------------------------------------------------------ */

/* m->ds_fused (B,B) -> the gradients of the encoders' outputs: dvid_glob_n, dvid_level[1..2]
 * (zeroed here, then accumulated), dsent_n, dverbs, dnouns. x: what scores_forward read. */
static vtr_status scores_backward(vtr_hgr_model *m, const hgr_encodings *x, int B, int T,
                                  vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_hgr_config *c = &m->cfg;
    int E = c->embed_size, NV = c->num_verbs, NN = c->num_nouns;
    size_t BB = (size_t)B * B, R = (size_t)B * T, f = sizeof(float);
    VTR_TRY(vtr_dev_zero(dev, m->ds_global, f * BB, err));
    VTR_TRY(vtr_dev_zero(dev, m->ds_verb, f * BB, err));
    VTR_TRY(vtr_dev_zero(dev, m->ds_noun, f * BB, err));
    VTR_TRY(vtr_dev_hgr_fused_score_backward(dev, m->ds_global, m->ds_verb, m->ds_noun, m->ds_fused,
                                             BB, err));
    VTR_TRY(vtr_dev_zero(dev, m->dvid_glob_n, f * B * E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dsent_n, f * B * E, err));
    VTR_TRY(vtr_dev_cosine_similarity_backward(dev, m->dvid_glob_n, m->dsent_n, m->ds_global,
                                               m->vid_glob_n, m->sent_n, B, B, E, err));
    for (int k = 0; k < 3; k++)
        VTR_TRY(vtr_dev_zero(dev, m->dvid_level[k], f * R * E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dverbs, f * B * NV * E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dnouns, f * B * NN * E, err));
    VTR_TRY(vtr_dev_phrase_attention_score_backward(
        dev, m->dvid_level[1], m->dverbs, m->scratch, m->ds_verb, m->vid_level[1], x->vlen,
        x->host_vlen, m->verbs, x->n[0], x->host_n[0], m->pa_workspace[0], B, B, T, NV, E, c->sigma,
        err));
    return vtr_dev_phrase_attention_score_backward(
        dev, m->dvid_level[2], m->dnouns, m->scratch, m->ds_noun, m->vid_level[2], x->vlen,
        x->host_vlen, m->nouns, x->n[1], x->host_n[1], m->pa_workspace[1], B, B, T, NN, E, c->sigma,
        err);
}

static vtr_status video_backward(vtr_hgr_model *m, const hgr_inputs *in, const int *hl, int B,
                                 int T, float p, uint64_t seed, uint64_t step, int64_t row0,
                                 vtr_error *err)
{
    vtr_device dev = m->device;
    int F = m->cfg.feature_dim, E = m->cfg.embed_size;
    VTR_TRY(vtr_dev_zero(dev, m->dvid_glob, sizeof(float) * B * E, err));
    VTR_TRY(vtr_dev_l2norm_backward(dev, m->dvid_glob, m->dvid_glob_n, m->vid_glob,
                                    m->vid_glob_norm, B, E, err));
    VTR_TRY(pool_backward(m, &m->vid_pool, m->dvid_level[0], m->dvid_glob, m->vid_level[0],
                          in->frame_lengths, B, T, err));
    size_t n = vtr_pack_count(hl, B);
    for (int k = 0; k < 3; k++) {
        // gather the real frames' gradients (packed), through dropout, into the Linear
        VTR_TRY(
            vtr_dev_pack_rows(dev, m->rows[0], m->dvid_level[k], in->frame_lengths, B, T, E, err));
        VTR_TRY(vtr_dev_zero(dev, m->rows[1], sizeof(float) * n * E, err));
        VTR_TRY(vtr_dev_dropout_backward(dev, m->rows[1], m->rows[0], n * E, p, seed,
                                         DROPOUT_SITES * step + SITE_LEVEL0 + k, (uint64_t)row0 * E,
                                         err));
        VTR_TRY(vtr_dev_linear_backward(dev, NULL, m->level_dw[k], m->level_db[k], m->rows[1],
                                        in->rows, m->level_w[k], (int)n, F, E, err));
    }
    return VTR_OK;
}

static vtr_status caption_backward(vtr_hgr_model *m, const hgr_inputs *in, const int *hl,
                                   float p_words, float p_gcn, uint64_t seed, uint64_t step,
                                   int64_t first, vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_hgr_config *cf = &m->cfg;
    const vtr_hgr_captions *c = &in->c;
    int B = c->B, L = c->L, W = cf->word_dim, E = cf->embed_size;
    int NV = cf->num_verbs, NN = cf->num_nouns, N = 1 + NV + NN;
    size_t f = sizeof(float);
    // the GCN's output gradient (B,N,E) = [dsent, dverbs, dnouns]
    float *dsent = m->dsent;
    VTR_TRY(vtr_dev_zero(dev, dsent, f * B * E, err));
    VTR_TRY(vtr_dev_l2norm_backward(dev, dsent, m->dsent_n, m->sent, m->sent_norm, B, E, err));
    VTR_TRY(copy_nodes(dev, m->dgcn_out, N, 0, dsent, 1, 0, 1, B, E, err));
    VTR_TRY(copy_nodes(dev, m->dgcn_out, N, 1, m->dverbs, NV, 0, NV, B, E, err));
    VTR_TRY(copy_nodes(dev, m->dgcn_out, N, 1 + NV, m->dnouns, NN, 0, NN, B, E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dnodes, f * B * N * E, err));
    VTR_TRY(vtr_dev_attn_gcn_backward(dev, m->dnodes, m->dgcn, m->scratch, m->dgcn_out, m->nodes,
                                      m->gcn, m->gcn_workspace, B, N, E, E / 2, p_gcn, seed,
                                      DROPOUT_SITES * step + SITE_GCN, first, err));
    // nodes -> the word states
    VTR_TRY(copy_nodes(dev, dsent, 1, 0, m->dnodes, N, 0, 1, B, E, err));
    VTR_TRY(copy_nodes(dev, m->dverbs, NV, 0, m->dnodes, N, 1, NV, B, E, err));
    VTR_TRY(copy_nodes(dev, m->dnouns, NN, 0, m->dnodes, N, 1 + NV, NN, B, E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dcap_feat, f * B * L * E, err));
    VTR_TRY(
        pool_backward(m, &m->txt_pool, m->dcap_feat, dsent, m->cap_feat, c->lengths, B, L, err));
    VTR_TRY(vtr_dev_role_span_pool_backward(dev, m->dcap_feat, m->drole_w, m->scratch, m->dverbs,
                                            m->cap_feat, m->verb_argmax, in->roles[0], m->role_w, B,
                                            NV, L, E, err));
    VTR_TRY(vtr_dev_role_span_pool_backward(dev, m->dcap_feat, m->drole_w, m->scratch, m->dnouns,
                                            m->cap_feat, m->noun_argmax, in->roles[1], m->role_w, B,
                                            NN, L, E, err));
    // the BiGRU, dropout, the embedding (items in order: a fixed order for repeated ids)
    size_t nw = (size_t)B * L * W;
    VTR_TRY(vtr_dev_zero(dev, m->dword[0], f * nw, err));
    VTR_TRY(vtr_dev_caption_bigru_backward(dev, m->dword[0], m->drnn, &m->bigru, m->dcap_feat,
                                           m->word_emb, c->lengths, hl, m->rnn, B, L, W, E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dword[1], f * nw, err));
    VTR_TRY(vtr_dev_dropout_backward(dev, m->dword[1], m->dword[0], nw, p_words, seed,
                                     DROPOUT_SITES * step + SITE_WORDS, (uint64_t)first * L * W,
                                     err));
    return vtr_dev_embedding_backward(dev, m->embed_dw, m->dword[1], c->ids, c->lengths, B, L, W,
                                      err);
}

/* ---- the public calls -------------------------------------------------------------- */

vtr_hgr_batch vtr_hgr_batch_share(const vtr_hgr_model *m, const vtr_hgr_batch *global,
                                  vtr_dist *dist)
{
    vtr_hgr_batch hb = *global;
    vtr_hgr_captions *c = &hb.captions;
    int64_t first, count;
    vtr_dist_share(global->B, dist->rank, dist->size, &first, &count);
    size_t L = (size_t)c->L, NV = (size_t)m->cfg.num_verbs, NN = (size_t)m->cfg.num_nouns;
    size_t N = 1 + NV + NN, f = (size_t)first;
    hb.dist = dist;
    hb.B_global = global->B;
    hb.first = (int)first;
    hb.frame_lengths_global = global->frame_lengths;
    hb.B = c->B = (int)count;
    hb.frames += f * (size_t)hb.T * (size_t)m->cfg.feature_dim;
    hb.frame_lengths += f;
    c->ids += f * L;
    c->lengths += f;
    c->verb_masks += f * NV * L;
    c->noun_masks += f * NN * L;
    c->node_roles += f * (NV + NN);
    c->rel_edges += f * N * N;
    return hb;
}

/* Data parallel: this rank's encodings -> the global batch's (in place, rank order). */
static vtr_status gather_encodings(vtr_hgr_model *m, const vtr_hgr_batch *dp, vtr_error *err)
{
    size_t E = (size_t)m->cfg.embed_size, T = (size_t)dp->T, f = sizeof(float);
    size_t NV = (size_t)m->cfg.num_verbs, NN = (size_t)m->cfg.num_nouns;
    struct {
        void *buf;
        size_t row;
    } parts[] = {
        {m->vid_glob_n, f * E}, {m->vid_level[1], f * T * E}, {m->vid_level[2], f * T * E},
        {m->sent_n, f * E},     {m->verbs, f * NV * E},       {m->nouns, f * NN * E},
    };
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && st == VTR_OK; i++)
        st = vtr_dist_gather_rows_on(dp->dist, m->device, parts[i].buf, parts[i].row, dp->first,
                                     dp->B, dp->B_global, err);
    return st;
}

/* Data parallel: every rank's phrase counts, gathered in rank order into host (2 Bg), and
 * with the global batch's frame lengths where x's scores read them (on a GPU, copies in
 * m->global_counts). */
static vtr_status global_counts(vtr_hgr_model *m, const vtr_hgr_batch *dp, const hgr_inputs *in,
                                const int *lengths_g, int *host, hgr_encodings *x, vtr_error *err)
{
    size_t Bg = (size_t)dp->B_global, ni = sizeof(int);
    for (int k = 0; k < 2; k++) {
        int *all = host + (size_t)k * Bg;
        memcpy(all + dp->first, in->host_n[k], ni * (size_t)dp->B);
        VTR_TRY(vtr_dist_gather(dp->dist, all + dp->first, ni * (size_t)dp->B, all, err));
        x->host_n[k] = x->n[k] = all;
    }
    x->host_vlen = x->vlen = lengths_g;
    if (m->device == VTR_DEVICE_CPU)
        return VTR_OK;
    int *d = m->global_counts;
    VTR_TRY(vtr_dev_upload(m->device, d, lengths_g, ni * Bg, err));
    VTR_TRY(vtr_dev_upload(m->device, d + Bg, host, ni * 2 * Bg, err));
    x->vlen = d, x->n[0] = d + Bg, x->n[1] = d + 2 * Bg;
    return VTR_OK;
}

/* Data parallel: this rank's rows of the global gradients of the encodings. */
static vtr_status own_gradients(vtr_hgr_model *m, const vtr_hgr_batch *dp, vtr_error *err)
{
    size_t E = (size_t)m->cfg.embed_size, T = (size_t)dp->T, f = sizeof(float);
    size_t NV = (size_t)m->cfg.num_verbs, NN = (size_t)m->cfg.num_nouns;
    struct { void *buf; size_t row; } parts[] = {
        {m->dvid_glob_n, f * E}, {m->dvid_level[1], f * T * E}, {m->dvid_level[2], f * T * E},
        {m->dsent_n, f * E},     {m->dverbs, f * NV * E},       {m->dnouns, f * NN * E},
    };
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && st == VTR_OK; i++)
        st = vtr_dist_own_rows_on(m->device, parts[i].buf, parts[i].row, dp->first, dp->B, err);
    return st;
}

/* The step's work on in (take_inputs), queued on the GPU; the loss into m->loss. dp: the
 * data-parallel batch or NULL; lengths_g the frame lengths of the global batch of Bg
 * pairs (host), counts_g room for its phrase counts (2 Bg, host; dp only); row0 the real frames of
 * the pairs before this rank's. */
static vtr_status step_queued(vtr_hgr_model *m, const vtr_hgr_batch *batch, const vtr_hgr_batch *dp,
                              const hgr_inputs *in, vtr_hinge_negatives negatives, uint64_t seed,
                              uint64_t step, const int *lengths_g, int *counts_g, int Bg,
                              int64_t row0, vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_hgr_config *c = &m->cfg;
    int B = batch->B, T = batch->T, first = dp ? dp->first : 0;
    const int *hl = batch->captions.lengths;
    VTR_TRY(
        video_forward(m, in, batch->frame_lengths, B, T, c->video_dropout, seed, step, row0, err));
    VTR_TRY(caption_forward(m, in, hl, c->text_dropout, c->gcn_dropout, seed, step, first, err));
    hgr_encodings x = {.glob_n = m->vid_glob_n,
                       .verb = m->vid_level[1],
                       .noun = m->vid_level[2],
                       .vlen = in->frame_lengths,
                       .host_vlen = lengths_g,
                       .sent_n = m->sent_n,
                       .verbs = m->verbs,
                       .nouns = m->nouns,
                       .n = {in->n[0], in->n[1]},
                       .host_n = {in->host_n[0], in->host_n[1]}};
    if (dp) {
        VTR_TRY(gather_encodings(m, dp, err));
        VTR_TRY(global_counts(m, dp, in, lengths_g, counts_g, &x, err));
    }
    VTR_TRY(scores_forward(m, &x, Bg, T, Bg, err));
    VTR_TRY(vtr_dev_hinge_loss_forward(dev, m->loss, m->s_fused, Bg, c->margin, negatives,
                                       VTR_REDUCE_MEAN, err));
    VTR_TRY(vtr_dev_zero(dev, m->ds_fused, sizeof(float) * Bg * Bg, err));
    VTR_TRY(vtr_dev_hinge_loss_backward(dev, m->ds_fused, 1.0f, m->s_fused, Bg, c->margin,
                                        negatives, VTR_REDUCE_MEAN, err));
    VTR_TRY(scores_backward(m, &x, Bg, T, err));
    if (dp)
        VTR_TRY(own_gradients(m, dp, err));
    VTR_TRY(
        video_backward(m, in, batch->frame_lengths, B, T, c->video_dropout, seed, step, row0, err));
    return caption_backward(m, in, hl, c->text_dropout, c->gcn_dropout, seed, step, first, err);
}

vtr_status vtr_hgr_train_step(vtr_hgr_model *m, const vtr_hgr_batch *batch,
                              vtr_hinge_negatives negatives, uint64_t seed, uint64_t step,
                              float *loss, vtr_error *err)
{
    /* the data-parallel batch, when there is more than one rank */
    const vtr_hgr_batch *dp = batch->dist && batch->dist->size > 1 ? batch : NULL;
    int B = batch->B, T = batch->T, Bg = dp ? dp->B_global : B, first = dp ? dp->first : 0;
    const int *lengths_g = dp ? dp->frame_lengths_global : batch->frame_lengths;
    vtr_status st;
    if (dp && (B < 1 || first < 0 || first > Bg - B || Bg > m->max_batch ||
               !dp->frame_lengths_global))
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: pairs %d .. %d of a global batch of "
                        "%d (at most %d)", first, first + B - 1, Bg, m->max_batch);
    if (Bg < 2)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "hgr model: a training batch needs at least 2 pairs (negatives), got %d",
                        Bg);
    if (negatives != VTR_HINGE_ALL_NEGATIVES && negatives != VTR_HINGE_HARDEST_NEGATIVE)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: negatives = %d is no hinge mode",
                        (int)negatives);
    if (batch->captions.B != B)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: %d videos but %d captions", B,
                        batch->captions.B);
    if ((st = check_videos(m, batch->frame_lengths, B, T, err)) ||
        (st = check_captions(m, &batch->captions, err)) ||
        (dp && (st = check_videos(m, lengths_g, Bg, T, err))))
        return st;
    int64_t row0 = 0; /* the real frames of the pairs before this rank's */
    for (int b = 0; b < first; b++)
        row0 += lengths_g[b];

    int *counts_g = NULL; /* data parallel: the global batch's phrase counts */
    if (dp && !(counts_g = malloc(sizeof(int) * 2 * (size_t)Bg)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    hgr_inputs in;
    if ((st = take_inputs(m, batch->frames, batch->frame_lengths, B, T, &batch->captions, &in,
                          err)) == VTR_OK) {
        st = step_queued(m, batch, dp, &in, negatives, seed, step, lengths_g, counts_g, Bg, row0,
                         err);
        st = release_slot(m, in.slot, st, err);
    }
    free(counts_g);
    if (st)
        return st;
    return vtr_dev_download(m->device, loss, m->loss, sizeof(float), err);
}

vtr_status vtr_hgr_encode_videos(vtr_hgr_model *m, float *global, float *verb, float *noun,
                                 const float *frames, const int *lengths, int B, int T,
                                 vtr_error *err)
{
    vtr_status st = check_videos(m, lengths, B, T, err);
    if (st)
        return st;
    hgr_inputs in;
    VTR_TRY(take_inputs(m, frames, lengths, B, T, NULL, &in, err));
    size_t E = (size_t)m->cfg.embed_size, f = sizeof(float);
    vtr_device dev = m->device;
    if ((st = video_forward(m, &in, lengths, B, T, 0.0f, 0, 0, 0, err)) == VTR_OK &&
        (st = vtr_dev_download(dev, global, m->vid_glob_n, f * B * E, err)) == VTR_OK &&
        (st = vtr_dev_download(dev, verb, m->vid_level[1], f * B * T * E, err)) == VTR_OK)
        st = vtr_dev_download(dev, noun, m->vid_level[2], f * B * T * E, err);
    return release_slot(m, in.slot, st, err);
}

vtr_status vtr_hgr_encode_captions(vtr_hgr_model *m, float *sent, float *verbs, float *nouns,
                                   int *n_verbs, int *n_nouns, const vtr_hgr_captions *c,
                                   vtr_error *err)
{
    vtr_status st = check_captions(m, c, err);
    if (st)
        return st;
    hgr_inputs in;
    VTR_TRY(take_inputs(m, NULL, NULL, 0, 0, c, &in, err));
    size_t E = (size_t)m->cfg.embed_size, B = (size_t)c->B, f = sizeof(float);
    vtr_device dev = m->device;
    if ((st = caption_forward(m, &in, c->lengths, 0.0f, 0.0f, 0, 0, 0, err)) == VTR_OK &&
        (st = vtr_dev_download(dev, sent, m->sent_n, f * B * E, err)) == VTR_OK &&
        (st = vtr_dev_download(dev, verbs, m->verbs, f * B * m->cfg.num_verbs * E, err)) ==
            VTR_OK &&
        (st = vtr_dev_download(dev, nouns, m->nouns, f * B * m->cfg.num_nouns * E, err)) ==
            VTR_OK) {
        memcpy(n_verbs, in.host_n[0], sizeof(int) * B);
        memcpy(n_nouns, in.host_n[1], sizeof(int) * B);
    }
    return release_slot(m, in.slot, st, err);
}

/* Phrase counts of Bc encoded captions within the model's. */
static vtr_status check_phrase_counts(const vtr_hgr_model *m, const int *n_verbs,
                                      const int *n_nouns, int Bc, vtr_error *err)
{
    for (int b = 0; b < Bc; b++)
        if (n_verbs[b] < 0 || n_verbs[b] > m->cfg.num_verbs || n_nouns[b] < 0 ||
            n_nouns[b] > m->cfg.num_nouns)
            return vtr_fail(err, VTR_ERR_INVALID,
                            "hgr model: caption %d has %d verbs and %d nouns (at most %d, %d)", b,
                            n_verbs[b], n_nouns[b], m->cfg.num_verbs, m->cfg.num_nouns);
    return VTR_OK;
}

/* x's videos: v's (on the model's device) from row first on; host_lengths: their lengths
 * on the host (from row first on). */
static void videos_at(const vtr_hgr_model *m, hgr_encodings *x, const vtr_hgr_encoded_videos *v,
                      int first, const int *host_lengths)
{
    const void *at[4];
    size_t bytes[4];
    video_regions(m, v, first, 0, at, bytes);
    x->glob_n = at[0];
    x->verb = at[1];
    x->noun = at[2];
    x->vlen = at[3];
    x->host_vlen = host_lengths;
}

/* x's captions: c's (on the model's device) from row first on; host_n: their phrase counts
 * on the host (from row first on). */
static void captions_at(const vtr_hgr_model *m, hgr_encodings *x, const vtr_hgr_encoded_captions *c,
                        int first, const int *const host_n[2])
{
    const void *at[5];
    size_t bytes[5];
    caption_regions(m, c, first, 0, at, bytes);
    x->sent_n = at[0];
    x->verbs = at[1];
    x->nouns = at[2];
    x->n[0] = at[3];
    x->n[1] = at[4];
    x->host_n[0] = host_n[0];
    x->host_n[1] = host_n[1];
}

/* The slot's videos (put_videos's offsets at) and captions (put_captions's). */
static vtr_hgr_encoded_videos slot_videos(const char *d, const size_t *at, int n, int T)
{
    return (vtr_hgr_encoded_videos){(const float *)(d + at[0]),
                                    (const float *)(d + at[1]),
                                    (const float *)(d + at[2]),
                                    (const int *)(d + at[3]),
                                    n,
                                    T};
}

static vtr_hgr_encoded_captions slot_captions(const char *d, const size_t *at, int n)
{
    return (vtr_hgr_encoded_captions){(const float *)(d + at[0]), (const float *)(d + at[1]),
                                      (const float *)(d + at[2]), (const int *)(d + at[3]),
                                      (const int *)(d + at[4]),   n};
}

/* The scores of x's Bv videos x Bc captions into out (vtr_hgr_score_all's, rows at ld);
 * buf: host room for Bv Bc floats, used when ld != Bc. */
static vtr_status score_into(vtr_hgr_model *m, const hgr_encodings *x, int Bv, int T, int Bc,
                             float *const out[4], size_t ld, float *buf, vtr_error *err)
{
    const float *scores[4] = {m->s_fused, m->s_global, m->s_verb, m->s_noun};
    size_t n = (size_t)Bv * Bc, row = sizeof(float) * (size_t)Bc;
    VTR_TRY(scores_forward(m, x, Bv, T, Bc, err));
    for (int k = 0; k < 4; k++) {
        if (!out[k])
            continue;
        bool rows = ld == (size_t)Bc;
        VTR_TRY(
            vtr_dev_download(m->device, rows ? out[k] : buf, scores[k], sizeof(float) * n, err));
        for (int a = 0; !rows && a < Bv; a++)
            memcpy(out[k] + (size_t)a * ld, buf + (size_t)a * Bc, row);
    }
    return VTR_OK;
}

vtr_status vtr_hgr_score_block(vtr_hgr_model *m, float *fused, float *levels, const float *global,
                               const float *verb, const float *noun, const int *frame_lengths,
                               int Bv, int T, const float *sent, const float *verbs,
                               const float *nouns, const int *n_verbs, const int *n_nouns, int Bc,
                               vtr_error *err)
{
    vtr_status st = check_videos(m, frame_lengths, Bv, T, err);
    if (st)
        return st;
    if (Bc < 1 || Bc > m->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: block of %d captions outside 1..%d", Bc,
                        m->max_batch);
    VTR_TRY(check_phrase_counts(m, n_verbs, n_nouns, Bc, err));
    size_t n = (size_t)Bv * Bc;
    float *const out[4] = {fused, levels, levels ? levels + n : NULL,
                           levels ? levels + 2 * n : NULL};
    vtr_hgr_encoded_videos v = {global, verb, noun, frame_lengths, Bv, T};
    vtr_hgr_encoded_captions c = {sent, verbs, nouns, n_verbs, n_nouns, Bc};
    bool slot = m->device == VTR_DEVICE_CUDA;
    if (slot) { /* the encodings, copied to the GPU for the block */
        size_t at[9];
        slot_writer w;
        char *d;
        VTR_TRY(open_slot(m, &w, err));
        put_videos(m, &w, at, &v, 0, Bv);
        put_captions(m, &w, at + 4, &c, 0, Bc);
        VTR_TRY(send_slot(m, &w, &d, err));
        v = slot_videos(d, at, Bv, T);
        c = slot_captions(d, at + 4, Bc);
    }
    hgr_encodings x;
    const int *const host_n[2] = {n_verbs, n_nouns};
    videos_at(m, &x, &v, 0, frame_lengths);
    captions_at(m, &x, &c, 0, host_n);
    st = score_into(m, &x, Bv, T, Bc, out, (size_t)Bc, NULL, err);
    return release_slot(m, slot, st, err);
}

/* Videos [first, first + n) of v copied to dev (put_videos's layout); *on: them there. */
static vtr_status upload_videos(vtr_hgr_model *m, char *dev, const vtr_hgr_encoded_videos *v,
                                int first, int n, vtr_hgr_encoded_videos *on, vtr_error *err)
{
    const void *src[4];
    size_t bytes[4], at[4];
    slot_writer w = {NULL, 0};
    vtr_hgr_encoded_videos none = {.T = v->T};
    put_videos(m, &w, at, &none, 0, n);
    video_regions(m, v, first, n, src, bytes);
    for (int k = 0; k < 4; k++)
        VTR_TRY(vtr_dev_upload(m->device, dev + at[k], src[k], bytes[k], err));
    *on = slot_videos(dev, at, n, v->T);
    return VTR_OK;
}

/* The scores of v's videos [v0, v0 + nv) (held on the model's device as on, from row 0)
 * x every caption of c, into out's rows from v0 on; buf as score_into's. */
static vtr_status score_chunk(vtr_hgr_model *m, const vtr_hgr_encoded_videos *v,
                              const vtr_hgr_encoded_videos *on, int v0, int nv,
                              const vtr_hgr_encoded_captions *c, float *const out[4], size_t ld,
                              float *buf, vtr_error *err)
{
    int mb = m->max_batch;
    bool slot = m->device == VTR_DEVICE_CUDA;
    for (int c0 = 0; c0 < c->n; c0 += mb) {
        int Bc = c->n - c0 < mb ? c->n - c0 : mb;
        vtr_hgr_encoded_captions cd = *c; /* where the block's captions are, from row cf */
        int cf = c0;
        if (slot) {
            size_t at[5];
            slot_writer w;
            char *d;
            VTR_TRY(open_slot(m, &w, err));
            put_captions(m, &w, at, c, c0, Bc);
            VTR_TRY(send_slot(m, &w, &d, err));
            cd = slot_captions(d, at, Bc);
            cf = 0;
        }
        vtr_status st = VTR_OK;
        const int *const host_n[2] = {c->n_verbs + c0, c->n_nouns + c0};
        for (int b0 = 0; b0 < nv && st == VTR_OK; b0 += mb) {
            int Bv = nv - b0 < mb ? nv - b0 : mb;
            size_t row = (size_t)(v0 + b0) * ld + (size_t)c0;
            float *const at[4] = {out[0] ? out[0] + row : NULL, out[1] ? out[1] + row : NULL,
                                  out[2] ? out[2] + row : NULL, out[3] ? out[3] + row : NULL};
            hgr_encodings x;
            videos_at(m, &x, on, b0, v->lengths + v0 + b0);
            captions_at(m, &x, &cd, cf, host_n);
            st = score_into(m, &x, Bv, v->T, Bc, at, ld, buf, err);
        }
        VTR_TRY(release_slot(m, slot, st, err));
    }
    return VTR_OK;
}

vtr_status vtr_hgr_score_all(vtr_hgr_model *m, const vtr_hgr_encoded_videos *v,
                             const vtr_hgr_encoded_captions *c, float *const out[4], size_t ld,
                             size_t chunk_bytes, vtr_error *err)
{
    int mb = m->max_batch, T = v->T;
    if (v->n < 1 || c->n < 1 || ld < (size_t)c->n)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "hgr model: scores of %d videos x %d captions in rows of %zu", v->n, c->n,
                        ld);
    if (T < 1 || T > m->max_frames)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr model: %d frames outside 1..%d", T,
                        m->max_frames);
    vtr_status st = vtr_nn_check_lengths(v->lengths, v->n, T, err);
    if (st) {
        vtr_error_context(err, "hgr model: videos");
        return st;
    }
    VTR_TRY(check_phrase_counts(m, c->n_verbs, c->n_nouns, c->n, err));
    float *buf = malloc(sizeof(float) * (size_t)mb * (size_t)mb);
    if (!buf)
        return vtr_fail(err, VTR_ERR_NOMEM, "hgr model: out of memory for a block of scores");
    if (m->device == VTR_DEVICE_CPU) { /* the videos are where the ops read them */
        st = score_chunk(m, v, v, 0, v->n, c, out, ld, buf, err);
        free(buf);
        return st;
    }
    size_t at[4];
    vtr_hgr_encoded_videos none = {.T = T};
    slot_writer block = {NULL, 0}; /* the bytes of one block of videos */
    put_videos(m, &block, at, &none, 0, mb);
    size_t blocks = (chunk_bytes ? chunk_bytes : (size_t)1 << 30) / block.off;
    size_t most = (blocks ? blocks : 1) * (size_t)mb;
    int chunk = most < (size_t)v->n ? (int)most : v->n;
    void *dev = NULL;
    for (;;) { /* a GPU short of memory takes the videos in smaller chunks, down to a block */
        slot_writer layout = {NULL, 0};
        put_videos(m, &layout, at, &none, 0, chunk);
        st = vtr_dev_alloc(m->device, &dev, layout.off, "the videos of hgr scores", true, err);
        if (st == VTR_OK || chunk <= mb)
            break;
        chunk = (chunk / 2 + mb - 1) / mb * mb;
    }
    for (int v0 = 0; v0 < v->n && st == VTR_OK; v0 += chunk) {
        int nv = v->n - v0 < chunk ? v->n - v0 : chunk;
        vtr_hgr_encoded_videos on;
        if ((st = upload_videos(m, dev, v, v0, nv, &on, err)) == VTR_OK)
            st = score_chunk(m, v, &on, v0, nv, c, out, ld, buf, err);
    }
    vtr_dev_free(m->device, dev);
    free(buf);
    return st;
}

/* ---- FLOP count ------------------------------------------------------------------- */

static double global_pool_flops(const vtr_hgr_config *c, double B, double T, double ntok)
{
    if (c->global_pool != VTR_HGR_POOL_GPO)
        return 0; /* attention pooling: dot products */
    return vtr_gru_train_flops(ntok, B, c->gpo_pe, c->gpo_hidden, 2, false) +
           3 * 2 * B * T * c->gpo_hidden;
}

double vtr_hgr_train_step_flops(const vtr_hgr_model *m, const vtr_hgr_batch *batch)
{
    const vtr_hgr_config *c = &m->cfg;
    const vtr_hgr_captions *cap = &batch->captions;
    double F = c->feature_dim, E = c->embed_size, W = c->word_dim, G = c->embed_size / 2;
    double B = batch->B, T = batch->T, L = cap->L;
    double N = 1 + c->num_verbs + c->num_nouns;
    double frames = 0, words = 0, frames_sq = 0;
    for (int b = 0; b < batch->B; b++) {
        frames += batch->frame_lengths[b];
        frames_sq += (double)batch->frame_lengths[b] * batch->frame_lengths[b];
        words += cap->lengths[b];
    }
    double flops = 3 * 2 * (2 * frames * F * E); /* level Linears: forward, dW */
    flops += global_pool_flops(c, B, T, frames) + global_pool_flops(c, B, L, words);
    flops += vtr_gru_train_flops(words, B, W, E, 2, true);
    /* GCN: query (E -> E/2) and context (E -> E) over the attending rows, key over the
     * attended rows, forward, dx, dW; per caption q kᵀ, a x forward, their two gradients */
    int attending, attended;
    vtr_attn_gcn_count_edge_rows(&attending, &attended, cap->rel_edges, batch->B, (int)N);
    flops += 3 * 2 * E * ((double)attending * (G + E) + (double)attended * G);
    flops += B * 3 * 2 * N * N * (G + E);
    flops += 3 * 2 * B * B * E; /* global cosines */
    for (int k = 0; k < 2; k++) {
        int P = k == 0 ? c->num_verbs : c->num_nouns;
        const uint8_t *masks = k == 0 ? cap->verb_masks : cap->noun_masks;
        double valid = 0;
        for (int b = 0; b < batch->B; b++) {
            int n;
            count_phrases(&n, masks + (size_t)b * P * cap->L, 1, P, cap->L);
            valid += n;
        }
        flops += 3 * 2 * valid * (B * T) * E + 2 * frames_sq * E;
    }
    return flops;
}
