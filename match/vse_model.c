/* VSE models; the contracts are in vse_model.h. */
#include "vse_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/adpool.h"
#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "lib/activation.h"
#include "lib/device.h"
#include "lib/embedding.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/norm.h"
#include "lib/pack.h"
#include "lib/rng.h"
#include "lib/similarity.h"
#include "lib/sync_batchnorm.h"
#include "lib/dist_device.h"
#include "match/adopt_loss.h"
#include "match/caption_bigru.h"
#include "match/model_arena.h"
#include "match/model_ops.h"
#include "match/model_params.h"
#include "match/set_similarity.h"

/* Upper bounds that keep every size product far from overflow (a model this large would
 * not fit in memory anyway; the allocation would fail first). */
#define MAX_DIM (1 << 20)
#define MAX_ROWS (1 << 26)
/* Set embeddings' dropout: side s of step n draws from streams (2n + s) * 256 + site, sites
 * 0 .. 2T-1 (aggregate/set_prediction.h). */
#define SET_MAX_T 128

/* ---- configuration ---------------------------------------------------------------- */

vtr_vse_config vtr_vse_config_infinity(int vocab_size)
{
    vtr_vse_pool_config gpo = {
        .kind = VTR_VSE_POOL_GPO, .gpo_pe = VTR_GPO_D_PE, .gpo_hidden = VTR_GPO_HIDDEN};
    vtr_vse_config cfg = {
        .feature_dim = 2048,
        .embed_size = 1024,
        .mlp_hidden = 512,
        .vocab_size = vocab_size,
        .word_dim = 300,
        .img_pool = gpo,
        .txt_pool = gpo,
        .loss = VTR_VSE_LOSS_HINGE,
        .margin = VTR_HINGE_MARGIN,
        .reduction = VTR_REDUCE_SUM,
        .adopt_temperature = VTR_ADOPT_TEMPERATURE,
        .adopt_fixed_k = 0,
        .adopt_positive_in_denominator = true,
        .set = {.K = 0},
    };
    return cfg;
}

vtr_vse_set_config vtr_vse_set_config_default(int embed_size)
{
    return (vtr_vse_set_config){.K = 4,
                                .T = 4,
                                .Dh = 2048,
                                .H = 4 * embed_size,
                                .dropout = 0.1f,
                                .alpha = VTR_SET_ALPHA,
                                .div_weight = 0.01f,
                                .mmd_weight = 0.01f,
                                .lr_scale = 1.0f};
}

int vtr_vse_vectors(const vtr_vse_config *cfg)
{
    return cfg->set.K > 0 ? cfg->set.K : 1;
}

/* The set modules' sizes (C = D = E). */
static vtr_set_prediction_config spm_config(const vtr_vse_config *c)
{
    return (vtr_set_prediction_config){.C = c->embed_size,
                                       .D = c->embed_size,
                                       .K = c->set.K,
                                       .T = c->set.T,
                                       .Dh = c->set.Dh,
                                       .H = c->set.H};
}

const char *vtr_vse_pooler_name(vtr_vse_pooler kind)
{
    switch (kind) {
    case VTR_VSE_POOL_MEAN: return "mean";
    case VTR_VSE_POOL_GPO: return "gpo";
    case VTR_VSE_POOL_ADPOOL: return "adpool";
    }
    return "?";
}

vtr_status vtr_vse_pooler_parse(const char *name, vtr_vse_pooler *out, vtr_error *err)
{
    if (strcmp(name, "mean") == 0 || strcmp(name, "avg") == 0)
        *out = VTR_VSE_POOL_MEAN;
    else if (strcmp(name, "gpo") == 0)
        *out = VTR_VSE_POOL_GPO;
    else if (strcmp(name, "adpool") == 0)
        *out = VTR_VSE_POOL_ADPOOL;
    else {
        char shown[64];
        return vtr_fail(err, VTR_ERR_INVALID, "unknown pooler '%s' (expected mean, gpo or adpool)",
                        vtr_printable(name, strlen(name), shown, sizeof shown));
    }
    return VTR_OK;
}

static vtr_status check_dim(const char *field, int value, int min, vtr_error *err)
{
    if (value < min || value > MAX_DIM)
        return vtr_fail(err, VTR_ERR_INVALID, "vse config: %s = %d outside %d..%d", field, value,
                        min, MAX_DIM);
    return VTR_OK;
}

static vtr_status check_pool(const char *side, const vtr_vse_pool_config *p, vtr_error *err)
{
    char field[64];
    vtr_status st;
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN:
    case VTR_VSE_POOL_ADPOOL: return VTR_OK;
    case VTR_VSE_POOL_GPO:
        snprintf(field, sizeof field, "%s.gpo_pe", side);
        if ((st = check_dim(field, p->gpo_pe, 2, err)))
            return st;
        if (p->gpo_pe % 2 != 0)
            return vtr_fail(err, VTR_ERR_INVALID, "vse config: %s = %d is odd", field, p->gpo_pe);
        snprintf(field, sizeof field, "%s.gpo_hidden", side);
        return check_dim(field, p->gpo_hidden, 1, err);
    }
    return vtr_fail(err, VTR_ERR_INVALID, "vse config: %s.kind = %d is no pooler", side,
                    (int)p->kind);
}

vtr_status vtr_vse_config_check(const vtr_vse_config *cfg, vtr_error *err)
{
    vtr_status st;
    if ((st = check_dim("feature_dim", cfg->feature_dim, 1, err)) ||
        (st = check_dim("embed_size", cfg->embed_size, 1, err)) ||
        (st = check_dim("mlp_hidden", cfg->mlp_hidden, 0, err)) ||
        (st = check_dim("vocab_size", cfg->vocab_size, 1, err)) ||
        (st = check_dim("word_dim", cfg->word_dim, 1, err)) ||
        (st = check_pool("img_pool", &cfg->img_pool, err)) ||
        (st = check_pool("txt_pool", &cfg->txt_pool, err)))
        return st;
    if (!(cfg->margin >= 0.0f && isfinite(cfg->margin)))
        return vtr_fail(err, VTR_ERR_INVALID, "vse config: margin = %g is not a finite value >= 0",
                        (double)cfg->margin);
    if (cfg->reduction != VTR_REDUCE_SUM && cfg->reduction != VTR_REDUCE_MEAN)
        return vtr_fail(err, VTR_ERR_INVALID, "vse config: reduction = %d is neither sum nor mean",
                        (int)cfg->reduction);
    if (cfg->loss != VTR_VSE_LOSS_HINGE && cfg->loss != VTR_VSE_LOSS_ADOPT)
        return vtr_fail(err, VTR_ERR_INVALID, "vse config: loss = %d is neither hinge nor adopt",
                        (int)cfg->loss);
    const vtr_vse_set_config *set = &cfg->set;
    if (set->K != 0) {
        if ((st = check_dim("set.K", set->K, 1, err)) ||
            (st = check_dim("set.T", set->T, 1, err)) ||
            (st = check_dim("set.Dh", set->Dh, 1, err)) ||
            (st = check_dim("set.H", set->H, 1, err)))
            return st;
        if (set->T > SET_MAX_T)
            return vtr_fail(err, VTR_ERR_INVALID, "vse config: set.T = %d is more than %d",
                            set->T, SET_MAX_T);
        if (!(set->dropout >= 0.0f && set->dropout < 1.0f))
            return vtr_fail(err, VTR_ERR_INVALID, "vse config: set.dropout = %g outside [0, 1)",
                            (double)set->dropout);
        if (!(set->alpha > 0.0f && isfinite(set->alpha)) ||
            !(set->lr_scale > 0.0f && isfinite(set->lr_scale)) ||
            !(set->div_weight >= 0.0f && isfinite(set->div_weight)) ||
            !(set->mmd_weight >= 0.0f && isfinite(set->mmd_weight)))
            return vtr_fail(err, VTR_ERR_INVALID,
                            "vse config: set alpha %g and lr_scale %g must be finite and > 0, "
                            "the weights %g and %g finite and >= 0",
                            (double)set->alpha, (double)set->lr_scale,
                            (double)set->div_weight, (double)set->mmd_weight);
        if (cfg->loss != VTR_VSE_LOSS_HINGE)
            return vtr_fail(err, VTR_ERR_INVALID,
                            "vse config: set embeddings train with the hinge loss, not adopt");
    }
    if (cfg->loss == VTR_VSE_LOSS_ADOPT) {
        if (!(cfg->adopt_temperature > 0.0f && isfinite(cfg->adopt_temperature)))
            return vtr_fail(err, VTR_ERR_INVALID,
                            "vse config: adopt_temperature = %g is not a finite value > 0",
                            (double)cfg->adopt_temperature);
        if (cfg->adopt_fixed_k < 0)
            return vtr_fail(err, VTR_ERR_INVALID, "vse config: adopt_fixed_k = %d is negative",
                            cfg->adopt_fixed_k);
    }
    return VTR_OK;
}

/* ---- poolers: every pooler-specific line of the module is in these switches --------- */

/* bytes of the saved coefficients and of the workspace, for (B,T,D) */
static size_t pool_weights_size(const vtr_vse_pool_config *p, int B, int T)
{
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN: return 0;
    case VTR_VSE_POOL_GPO: return sizeof(float) * (size_t)B * T;
    case VTR_VSE_POOL_ADPOOL: return sizeof(float) * (size_t)B * (T + 2); /* theta, omega */
    }
    return 0;
}

static size_t pool_workspace_size(const vtr_vse_pool_config *p, int B, int T, int D)
{
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN: return 0;
    case VTR_VSE_POOL_GPO: return vtr_gpo_workspace_size(B, T, D, p->gpo_pe, p->gpo_hidden);
    case VTR_VSE_POOL_ADPOOL: return vtr_adpool_workspace_size(B, T, D);
    }
    return 0;
}

static size_t pool_scratch_size(const vtr_vse_pool_config *p, int B, int T, int D)
{
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN: return 0;
    case VTR_VSE_POOL_GPO: return vtr_gpo_scratch_size(B, T, D, p->gpo_pe, p->gpo_hidden);
    case VTR_VSE_POOL_ADPOOL: return vtr_adpool_scratch_size(B, T, D);
    }
    return 0;
}

// inp (B,T,D), lengths (B), out (B,D), on dev
static vtr_status pool_forward(vtr_device dev, vtr_vse_pool *p, float *out, const float *inp,
                               const int *lengths, int B, int T, int D, vtr_error *err)
{
    switch (p->cfg.kind) {
    case VTR_VSE_POOL_MEAN: return vtr_dev_mean_pool_forward(dev, out, inp, lengths, B, T, D, err);
    case VTR_VSE_POOL_GPO:
        return vtr_dev_gpo_forward(dev, out, p->weights, p->workspace, inp, lengths, p->params, B,
                                   T, D, p->cfg.gpo_pe, p->cfg.gpo_hidden, err);
    case VTR_VSE_POOL_ADPOOL:
        return vtr_dev_adpool_forward(dev, out, p->weights, p->weights + (size_t)B * T,
                                      p->workspace, inp, lengths, p->params, B, T, D, err);
    }
    return VTR_OK;
}

// dinp (B,T,D) +=, the pooler's parameter gradients +=, dout (B,D); inp and lengths as given
// to pool_forward, which ran last on this pooler
static vtr_status pool_backward(vtr_device dev, vtr_vse_pool *p, float *dinp, void *scratch,
                                const float *dout, const float *inp, const int *lengths, int B,
                                int T, int D, vtr_error *err)
{
    switch (p->cfg.kind) {
    case VTR_VSE_POOL_MEAN:
        return vtr_dev_mean_pool_backward(dev, dinp, dout, lengths, B, T, D, err);
    case VTR_VSE_POOL_GPO:
        return vtr_dev_gpo_backward(dev, dinp, p->grads, scratch, dout, inp, p->weights, lengths,
                                    p->params, p->workspace, B, T, D, p->cfg.gpo_pe,
                                    p->cfg.gpo_hidden, err);
    case VTR_VSE_POOL_ADPOOL:
        return vtr_dev_adpool_backward(dev, dinp, p->grads, scratch, dout, inp, p->weights,
                                       p->weights + (size_t)B * T, lengths, p->params, p->workspace,
                                       B, T, D, err);
    }
    return VTR_OK;
}

static double pool_flops(const vtr_vse_pool_config *p, double B, double T, double ntok)
{
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN:
    case VTR_VSE_POOL_ADPOOL: return 0; /* its two scorers are dot products, no CBLAS */
    case VTR_VSE_POOL_GPO:
        /* the BiGRU over the encodings (no input gradient) and the scorer (forward, input
         * and weight gradients) */
        return vtr_gru_train_flops(ntok, B, p->gpo_pe, p->gpo_hidden, 2, false) +
               3 * 2 * B * T * p->gpo_hidden;
    }
    return 0;
}

/* ---- parameters -------------------------------------------------------------------- */

/* Adds the pooler's entries under prefix ("img_enc." / "txt_enc."); E the set's width. */
static vtr_status pool_add_params(vtr_param_set *ps, const char *prefix,
                                  const vtr_vse_pool_config *p, int E, vtr_error *err)
{
    char sub[64];
    vtr_status st;
    switch (p->kind) {
    case VTR_VSE_POOL_MEAN: return VTR_OK;
    case VTR_VSE_POOL_GPO:
        return vtr_model_param_add_gpo(ps, prefix, p->gpo_pe, p->gpo_hidden, err);
    case VTR_VSE_POOL_ADPOOL:
        /* w_tok then w_bal: aggregate/adpool.h's flat layout */
        snprintf(sub, sizeof sub, "%sadpool.", prefix);
        if ((st = vtr_model_param_add(ps, sub, "token.weight", VTR_F32, true, 2, 1, E, err)))
            return st;
        return vtr_model_param_add(ps, sub, "balance.weight", VTR_F32, true, 2, 1, E, err);
    }
    return VTR_OK;
}

vtr_status vtr_vse_model_add_params(vtr_param_set *ps, const vtr_vse_config *c, vtr_error *err)
{
    int F = c->feature_dim, E = c->embed_size, M = c->mlp_hidden;
    vtr_status st;
    if ((st = vtr_model_param_add(ps, "img_enc.", "fc.weight", VTR_F32, true, 2, E, F, err)) ||
        (st = vtr_model_param_add(ps, "img_enc.", "fc.bias", VTR_F32, true, 1, E, 0, err)))
        return st;
    if (M > 0) {
        const char *p = "img_enc.mlp.";
        if ((st = vtr_model_param_add(ps, p, "layers.0.weight", VTR_F32, true, 2, M, F, err)) ||
            (st = vtr_model_param_add(ps, p, "layers.0.bias", VTR_F32, true, 1, M, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "layers.1.weight", VTR_F32, true, 2, E, M, err)) ||
            (st = vtr_model_param_add(ps, p, "layers.1.bias", VTR_F32, true, 1, E, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "bns.0.weight", VTR_F32, true, 1, M, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "bns.0.bias", VTR_F32, true, 1, M, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "bns.0.running_mean", VTR_F32, false, 1, M, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "bns.0.running_var", VTR_F32, false, 1, M, 0, err)) ||
            (st = vtr_model_param_add(ps, p, "bns.0.num_batches_tracked", VTR_I64, false, 0, 0, 0,
                                      err)))
            return st;
    }
    if ((st = pool_add_params(ps, "img_enc.", &c->img_pool, E, err)) ||
        (st = vtr_model_param_add(ps, "txt_enc.", "embed.weight", VTR_F32, true, 2, c->vocab_size,
                                  c->word_dim, err)) ||
        (st = vtr_model_param_add_gru(ps, "txt_enc.rnn.", c->word_dim, E, err)) ||
        (st = pool_add_params(ps, "txt_enc.", &c->txt_pool, E, err)))
        return st;
    if (c->set.K > 0) {
        vtr_set_prediction_config spm = spm_config(c);
        for (int side = 0; side < 2; side++) {
            const char *prefix = side ? "txt_enc.spm." : "img_enc.spm.";
            for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
                int shape[2];
                size_t offset;
                const char *name = vtr_set_prediction_param_name(&spm, i, shape, &offset);
                if ((st = vtr_model_param_add(ps, prefix, name, VTR_F32, true, shape[1] ? 2 : 1,
                                              shape[0], shape[1], err)))
                    return st;
            }
            vtr_param_set_scale_lr(ps, prefix, c->set.lr_scale);
        }
    }
    return VTR_OK;
}

/* A pooler's flat parameter block: its first tensor (NULL for a pooler without any). */
static void resolve_pool(vtr_vse_pool *p, const vtr_param_set *ps, const char *prefix)
{
    const char *first = NULL;
    char name[64];
    switch (p->cfg.kind) {
    case VTR_VSE_POOL_MEAN: break;
    case VTR_VSE_POOL_GPO: first = "gpool.gru.weight_ih_l0"; break;
    case VTR_VSE_POOL_ADPOOL: first = "adpool.token.weight"; break;
    }
    if (!first) {
        p->params = p->grads = NULL;
        return;
    }
    snprintf(name, sizeof name, "%s%s", prefix, first);
    p->params = vtr_param_data(ps, name);
    p->grads = vtr_param_grad(ps, name);
}

/* Resolves the model's pointers into its finalized set. */
static void resolve_params(vtr_vse_model *m)
{
    const vtr_param_set *ps = &m->params;
    m->fc_w = vtr_param_data(ps, "img_enc.fc.weight");
    m->fc_b = vtr_param_data(ps, "img_enc.fc.bias");
    m->fc_dw = vtr_param_grad(ps, "img_enc.fc.weight");
    m->fc_db = vtr_param_grad(ps, "img_enc.fc.bias");
    m->mlp0_w = vtr_param_data(ps, "img_enc.mlp.layers.0.weight");
    m->mlp0_b = vtr_param_data(ps, "img_enc.mlp.layers.0.bias");
    m->mlp1_w = vtr_param_data(ps, "img_enc.mlp.layers.1.weight");
    m->mlp1_b = vtr_param_data(ps, "img_enc.mlp.layers.1.bias");
    m->bn_w = vtr_param_data(ps, "img_enc.mlp.bns.0.weight");
    m->bn_b = vtr_param_data(ps, "img_enc.mlp.bns.0.bias");
    m->mlp0_dw = vtr_param_grad(ps, "img_enc.mlp.layers.0.weight");
    m->mlp0_db = vtr_param_grad(ps, "img_enc.mlp.layers.0.bias");
    m->mlp1_dw = vtr_param_grad(ps, "img_enc.mlp.layers.1.weight");
    m->mlp1_db = vtr_param_grad(ps, "img_enc.mlp.layers.1.bias");
    m->bn_dw = vtr_param_grad(ps, "img_enc.mlp.bns.0.weight");
    m->bn_db = vtr_param_grad(ps, "img_enc.mlp.bns.0.bias");
    m->bn_running_mean = vtr_param_data(ps, "img_enc.mlp.bns.0.running_mean");
    m->bn_running_var = vtr_param_data(ps, "img_enc.mlp.bns.0.running_var");
    m->bn_batches_tracked = vtr_param_idata(ps, "img_enc.mlp.bns.0.num_batches_tracked");
    m->embed_w = vtr_param_data(ps, "txt_enc.embed.weight");
    m->embed_dw = vtr_param_grad(ps, "txt_enc.embed.weight");
    /* flat blocks: the first tensor of each (added consecutively, so contiguous) */
    m->rnn = vtr_param_data(ps, "txt_enc.rnn.weight_ih_l0");
    m->drnn = vtr_param_grad(ps, "txt_enc.rnn.weight_ih_l0");
    resolve_pool(&m->img_pool, ps, "img_enc.");
    resolve_pool(&m->txt_pool, ps, "txt_enc.");
    for (int side = 0; side < 2; side++) {
        const char *first = side ? "txt_enc.spm.slots" : "img_enc.spm.slots";
        m->spm_w[side] = vtr_param_data(ps, first);
        m->spm_dw[side] = vtr_param_grad(ps, first);
    }
    if (!m->dev_data)
        return;
    /* on the GPU: the same offsets into its copy */
    float **values[] = {&m->fc_w,
                        &m->fc_b,
                        &m->mlp0_w,
                        &m->mlp0_b,
                        &m->mlp1_w,
                        &m->mlp1_b,
                        &m->bn_w,
                        &m->bn_b,
                        &m->bn_running_mean,
                        &m->bn_running_var,
                        &m->embed_w,
                        &m->rnn,
                        &m->img_pool.params,
                        &m->txt_pool.params,
                        &m->spm_w[0],
                        &m->spm_w[1]};
    float **grads[] = {&m->fc_dw,     &m->fc_db,    &m->mlp0_dw,        &m->mlp0_db,
                       &m->mlp1_dw,   &m->mlp1_db,  &m->bn_dw,          &m->bn_db,
                       &m->embed_dw,  &m->drnn,     &m->img_pool.grads, &m->txt_pool.grads,
                       &m->spm_dw[0], &m->spm_dw[1]};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        if (*values[i])
            *values[i] = m->dev_data + (*values[i] - ps->data);
    for (size_t i = 0; i < sizeof grads / sizeof *grads; i++)
        if (*grads[i])
            *grads[i] = m->dev_grad + (*grads[i] - ps->grad);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void vtr_vse_init_params(vtr_vse_model *m, uint64_t seed)
{
    vtr_param_set *ps = &m->params;
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        if (e->dtype == VTR_I64) {
            memset(ps->idata + e->offset, 0, sizeof(int64_t) * e->numel);
            continue;
        }
        float *x = ps->data + e->offset;
        vtr_rng rng;
        vtr_rng_init(&rng, seed, (uint64_t)i);
        const char *name = e->name;
        if (strcmp(name, "img_enc.fc.weight") == 0) {
            /* Xavier-uniform, as the reference's init_weights */
            double r = sqrt(6.0) / sqrt((double)(e->shape[0] + e->shape[1]));
            vtr_model_fill_uniform(x, e->numel, (float)r, &rng);
        } else if (strcmp(name, "img_enc.fc.bias") == 0 || ends_with(name, "running_mean") ||
                   strstr(name, ".bns.0.bias")) {
            memset(x, 0, sizeof(float) * e->numel);
        } else if (ends_with(name, "running_var") || strstr(name, ".bns.0.weight")) {
            for (size_t k = 0; k < e->numel; k++)
                x[k] = 1.0f;
        } else if (strcmp(name, "txt_enc.embed.weight") == 0) {
            vtr_model_fill_uniform(x, e->numel, 0.1f, &rng);
        } else if (strstr(name, ".spm.") && ends_with(name, ".slots")) {
            /* the learnable initial slots: torch.randn */
            for (size_t k = 0; k < e->numel; k++)
                x[k] = vtr_rng_normal(&rng);
        } else if (strstr(name, ".spm.norm_")) {
            /* LayerNorm: weight 1, bias 0 */
            float v = ends_with(name, ".weight") ? 1.0f : 0.0f;
            for (size_t k = 0; k < e->numel; k++)
                x[k] = v;
        } else {
            /* GRU tensors, Linear weights (2-D) and biases: PyTorch's defaults */
            vtr_model_fill_default(ps, i, &rng);
        }
    }
    vtr_param_set_zero_grad(ps);
}

/* ---- the arena ------------------------------------------------------------------- */

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Points every activation buffer into base (or, base NULL, only measures); returns the
 * bytes the arena needs. */
static size_t layout_arena(vtr_vse_model *m, char *base)
{
    const vtr_vse_config *c = &m->cfg;
    size_t F = (size_t)c->feature_dim, E = (size_t)c->embed_size, M = (size_t)c->mlp_hidden;
    size_t W = (size_t)c->word_dim, Bm = (size_t)m->max_batch;
    size_t R = Bm * (size_t)m->max_frames, Q = Bm * (size_t)m->max_words;
    size_t off = 0, f = sizeof(float);
    /* the caption BiGRU's buffers: two one-direction GRUs on the CPU, one two-direction GRU
     * on the GPU (model_ops.h) */
    bool gpu = m->device == VTR_DEVICE_CUDA;
    int dirs = gpu ? 2 : 1;
    size_t rnn_workspace = vtr_gru_workspace_size(m->max_batch, m->max_words, (int)W, (int)E, dirs);
    size_t rnn_scratch = vtr_gru_scratch_size(m->max_batch, m->max_words, (int)W, (int)E, dirs);

    m->img_rows = vtr_arena_carve(base, &off, M || gpu ? 0 : f * R * F);
    m->fc_rows = vtr_arena_carve(base, &off, f * R * E);
    m->mlp_a0 = vtr_arena_carve(base, &off, f * R * M);
    m->mlp_a1 = vtr_arena_carve(base, &off, f * R * M);
    m->bn_mean = vtr_arena_carve(base, &off, f * M);
    m->bn_rstd = vtr_arena_carve(base, &off, f * M);
    m->bn_sums = vtr_arena_carve(base, &off, sizeof(double) * 2 * M);
    m->img_feat = vtr_arena_carve(base, &off, f * R * E);
    m->img_pooled = vtr_arena_carve(base, &off, f * Bm * E);
    m->img_emb = vtr_arena_carve(base, &off, f * Bm * E);
    m->img_norm = vtr_arena_carve(base, &off, f * Bm);
    m->img_pool.weights =
        vtr_arena_carve(base, &off, pool_weights_size(&c->img_pool, m->max_batch, m->max_frames));
    m->img_pool.workspace = vtr_arena_carve(
        base, &off, pool_workspace_size(&c->img_pool, m->max_batch, m->max_frames, (int)E));
    m->word_emb = vtr_arena_carve(base, &off, f * Q * W);
    m->word_rev = vtr_arena_carve(base, &off, gpu ? 0 : f * Q * W);
    m->rnn_workspace[0] = vtr_arena_carve(base, &off, rnn_workspace);
    m->rnn_workspace[1] = vtr_arena_carve(base, &off, gpu ? 0 : rnn_workspace);
    m->rnn_rev = vtr_arena_carve(base, &off, gpu ? 0 : f * Q * E);
    m->cap_feat = vtr_arena_carve(base, &off, f * Q * E);
    m->cap_pooled = vtr_arena_carve(base, &off, f * Bm * E);
    m->cap_emb = vtr_arena_carve(base, &off, f * Bm * E);
    m->cap_norm = vtr_arena_carve(base, &off, f * Bm);
    m->txt_pool.weights =
        vtr_arena_carve(base, &off, pool_weights_size(&c->txt_pool, m->max_batch, m->max_words));
    m->txt_pool.workspace = vtr_arena_carve(
        base, &off, pool_workspace_size(&c->txt_pool, m->max_batch, m->max_words, (int)E));
    m->sim = vtr_arena_carve(base, &off, f * Bm * Bm);
    /* the loss, then ADOPT's K beside it: the step reads both in one download */
    m->loss = vtr_arena_carve(base, &off, f + sizeof(int));
    m->adopt_k = m->loss ? (int *)(m->loss + 1) : NULL;
    m->dsim = vtr_arena_carve(base, &off, f * Bm * Bm);
    m->dimg_emb = vtr_arena_carve(base, &off, f * Bm * E);
    m->dcap_emb = vtr_arena_carve(base, &off, f * Bm * E);
    m->dimg_pooled = vtr_arena_carve(base, &off, f * Bm * E);
    m->dcap_pooled = vtr_arena_carve(base, &off, f * Bm * E);
    m->dimg_feat = vtr_arena_carve(base, &off, f * R * E);
    m->dmlp[0] = vtr_arena_carve(base, &off, f * R * M);
    m->dmlp[1] = vtr_arena_carve(base, &off, f * R * M);
    m->dcap_feat = vtr_arena_carve(base, &off, f * Q * E);
    m->dword_emb = vtr_arena_carve(base, &off, f * Q * W);
    m->dword_rev = vtr_arena_carve(base, &off, gpu ? 0 : f * Q * W);
    /* one scratch for the poolers, the GRU's forward direction (on the GPU: both) and the
     * set modules (whose backward runs before theirs) */
    size_t scratch =
        max3(rnn_scratch, pool_scratch_size(&c->img_pool, m->max_batch, m->max_frames, (int)E),
             pool_scratch_size(&c->txt_pool, m->max_batch, m->max_words, (int)E));
    int len[2] = {m->max_frames, m->max_words};
    for (int side = 0; side < 2 && c->set.K > 0; side++) {
        size_t sc = vtr_set_prediction_scratch_size(&m->spm, m->max_batch, len[side]);
        scratch = sc > scratch ? sc : scratch;
    }
    m->scratch = vtr_arena_carve(base, &off, scratch);
    m->rnn_scratch = vtr_arena_carve(base, &off, gpu ? 0 : rnn_scratch);
    if (c->set.K > 0) {
        size_t KE = (size_t)c->set.K * E;
        for (int side = 0; side < 2; side++) {
            m->set[side] = vtr_arena_carve(base, &off, f * Bm * KE);
            m->slots_n[side] = vtr_arena_carve(base, &off, f * Bm * KE);
            m->dset[side] = vtr_arena_carve(base, &off, f * Bm * KE);
            m->dslots_n[side] = vtr_arena_carve(base, &off, f * Bm * KE);
            m->spm_workspace[side] = vtr_arena_carve(
                base, &off, vtr_set_prediction_workspace_size(&m->spm, m->max_batch, len[side]));
        }
        size_t a = vtr_smooth_chamfer_scratch_size(m->max_batch, m->max_batch, c->set.K, c->set.K);
        size_t b = vtr_set_mmd_scratch_size((long)Bm * c->set.K, (long)Bm * c->set.K);
        m->sim_scratch = vtr_arena_carve(base, &off, a > b ? a : b);
        m->set_loss = vtr_arena_carve(base, &off, f * 4);
    }
    return off;
}

/* What a model of cfg needs that has no CUDA kernels: a sentence for the error, or NULL. */
vtr_status vtr_vse_model_init(vtr_vse_model *m, const vtr_vse_config *cfg, int max_batch,
                              int max_frames, int max_words, vtr_error *err)
{
    return vtr_vse_model_init_on(m, cfg, VTR_DEVICE_CPU, max_batch, max_frames, max_words, err);
}

/* The GPU's stage (vtr_vse_model.stage): its slot layout, then its buffers. */
static vtr_status new_stage(vtr_vse_model *m, vtr_error *err)
{
    size_t Bm = (size_t)m->max_batch, F = (size_t)m->cfg.feature_dim;
    size_t R = Bm * (size_t)m->max_frames, Q = Bm * (size_t)m->max_words, off = 0;
    vtr_arena_carve(NULL, &off, sizeof(int) * 2 * Bm);
    m->stage_ids = off;
    vtr_arena_carve(NULL, &off, sizeof(int) * Q);
    m->stage_frames = off;
    vtr_arena_carve(NULL, &off, sizeof(float) * R * F);
    return vtr_cuda_stage_new(&m->stage, VTR_VSE_STAGE_SLOTS, off, err);
}

vtr_status vtr_vse_model_init_on(vtr_vse_model *m, const vtr_vse_config *cfg, vtr_device device,
                                 int max_batch, int max_frames, int max_words, vtr_error *err)
{
    vtr_status st;
    memset(m, 0, sizeof *m);
    if ((st = vtr_vse_config_check(cfg, err)))
        return st;
    if (device == VTR_DEVICE_CUDA && !vtr_cuda_available()) {
        vtr_cuda_init(0, NULL, 0, err); /* fails, saying why and what to do */
        vtr_error_context(err, "vse model");
        return VTR_ERR_DEVICE;
    }
    if (max_batch < 1 || max_frames < 1 || max_words < 1 ||
        (long long)max_batch * max_frames > MAX_ROWS || (long long)max_batch * max_words > MAX_ROWS)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "vse model: max_batch %d, max_frames %d, max_words %d: each must be >= 1 "
                        "and batch x length at most %d rows",
                        max_batch, max_frames, max_words, MAX_ROWS);
    m->cfg = *cfg;
    m->device = device;
    m->max_batch = max_batch;
    m->max_frames = max_frames;
    m->max_words = max_words;
    m->img_pool.cfg = cfg->img_pool;
    m->txt_pool.cfg = cfg->txt_pool;
    m->spm = spm_config(cfg);
    vtr_param_set_init(&m->params);
    if ((st = vtr_vse_model_add_params(&m->params, cfg, err)) ||
        (st = vtr_param_set_finalize(&m->params, err)) ||
        (st = vtr_dev_params_alloc(device, &m->params, &m->dev_data, &m->dev_grad,
                                   "vse model parameters", err)))
        goto fail;
    resolve_params(m);

    size_t bytes = layout_arena(m, NULL);
    if ((st = vtr_dev_alloc(device, &m->arena, bytes, "vse model", true, err)))
        goto fail;
    layout_arena(m, m->arena);
    if (device == VTR_DEVICE_CUDA && (st = new_stage(m, err))) {
        vtr_error_context(err,
                          "vse model: the inputs of a batch (a smaller batch, or --device cpu)");
        goto fail;
    }
    return VTR_OK;

fail:
    vtr_vse_model_free(m);
    return st;
}

void vtr_vse_model_free(vtr_vse_model *m)
{
    vtr_param_set_free(&m->params);
    vtr_dev_free(m->device, m->arena);
    vtr_cuda_stage_free(m->stage);
    if (m->dev_data)
        vtr_dev_free(m->device, m->dev_data);
    memset(m, 0, sizeof *m);
}

vtr_status vtr_vse_params_to_device(vtr_vse_model *m, vtr_error *err)
{
    return vtr_dev_params_upload(m->device, &m->params, m->dev_data, err);
}

vtr_status vtr_vse_params_to_host(vtr_vse_model *m, bool grads, vtr_error *err)
{
    return vtr_dev_params_download(m->device, &m->params, m->dev_data, grads ? m->dev_grad : NULL,
                                   err);
}

vtr_status vtr_vse_zero_grad(vtr_vse_model *m, vtr_error *err)
{
    return vtr_dev_params_zero_grad(m->device, &m->params, m->dev_grad, err);
}

/* ---- argument checks (once per call, never inside the ops) ---------------------- */

static vtr_status check_images(const vtr_vse_model *m, const int *lengths, int B, int T,
                               vtr_error *err)
{
    if (B < 1 || B > m->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: batch of %d items outside 1..%d", B,
                        m->max_batch);
    if (T < 1 || T > m->max_frames)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: set length %d outside 1..%d", T,
                        m->max_frames);
    vtr_status st = vtr_nn_check_lengths(lengths, B, T, err);
    if (st)
        vtr_error_context(err, "vse model: visual sets");
    return st;
}

static vtr_status check_captions(const vtr_vse_model *m, const int *ids, const int *lengths, int B,
                                 int L, vtr_error *err)
{
    vtr_status st;
    if (B < 1 || B > m->max_batch)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: batch of %d captions outside 1..%d", B,
                        m->max_batch);
    if (L < 1 || L > m->max_words)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: caption length %d outside 1..%d", L,
                        m->max_words);
    if ((st = vtr_nn_check_lengths(lengths, B, L, err))) {
        vtr_error_context(err, "vse model: captions");
        return st;
    }
    for (int b = 0; b < B; b++)
        if ((st = vtr_nn_check_ids(ids + (size_t)b * L, lengths[b], m->cfg.vocab_size, err))) {
            vtr_error_context(err, "vse model: caption %d", b);
            return st;
        }
    return VTR_OK;
}

/* ---- a call's inputs on the model's device ----------------------------------------- */

/* Where the ops read a call's inputs: on the CPU the caller's buffers (without an MLP the
 * real rows packed into m->img_rows); on the GPU a slot of the stage. The loops over items
 * read the caller's host lengths either way. */
typedef struct vse_inputs {
    const float *frames;   /* (B,T,F) padded with an MLP, else the real rows (N,F) packed */
    const int *lengths[2]; /* the sets', the captions' (B) */
    const int *ids;        /* (B,L) */
    int slot;              /* the GPU's slot to release after the call's work, or -1 */
} vse_inputs;

/* Writes a call's frames (with their lengths fl) and captions (ids, lengths cl), each
 * pair NULL where the call has none, into h in the slot layout of vtr_vse_model.stage;
 * returns the bytes to copy. */
static size_t fill_slot(const vtr_vse_model *m, char *h, const float *frames, const int *fl, int B,
                        int T, const int *ids, const int *cl, int L)
{
    size_t F = (size_t)m->cfg.feature_dim, end = 0;
    if (cl) {
        memcpy(h + sizeof(int) * (size_t)m->max_batch, cl, sizeof(int) * (size_t)B);
        memcpy(h + m->stage_ids, ids, sizeof(int) * (size_t)B * L);
        end = m->stage_ids + sizeof(int) * (size_t)B * L;
    }
    if (fl) {
        memcpy(h, fl, sizeof(int) * (size_t)B);
        float *x = (float *)(h + m->stage_frames);
        size_t rows = (size_t)B * T;
        if (m->cfg.mlp_hidden > 0)
            memcpy(x, frames, sizeof(float) * rows * F);
        else
            rows = vtr_pack_rows(x, frames, fl, B, T, (int)F);
        end = m->stage_frames + sizeof(float) * rows * F;
    }
    return end;
}

/* The call's inputs where the ops read them, as fill_slot takes them. staged k + 1: they
 * are in slot k already (vtr_vse_stage_batch); 0: on the GPU they go through the last
 * slot. The GPU's slot is then the call's until release_inputs. */
static vtr_status take_inputs(vtr_vse_model *m, int staged, const float *frames, const int *fl,
                              int B, int T, const int *ids, const int *cl, int L, vse_inputs *in,
                              vtr_error *err)
{
    *in = (vse_inputs){.frames = frames, .lengths = {fl, cl}, .ids = ids, .slot = -1};
    if (m->device == VTR_DEVICE_CPU) {
        if (fl && m->cfg.mlp_hidden == 0) {
            vtr_pack_rows(m->img_rows, frames, fl, B, T, m->cfg.feature_dim);
            in->frames = m->img_rows;
        }
        return VTR_OK;
    }
    int slot = staged ? staged - 1 : VTR_VSE_STAGE_SLOTS - 1;
    if (!staged) {
        void *h;
        VTR_TRY(vtr_cuda_stage_host(m->stage, slot, &h, err));
        size_t bytes = fill_slot(m, h, frames, fl, B, T, ids, cl, L);
        VTR_TRY(vtr_cuda_stage_upload(m->stage, slot, bytes, err));
    }
    void *d;
    VTR_TRY(vtr_cuda_stage_take(m->stage, slot, &d, err));
    char *base = d;
    *in = (vse_inputs){
        .frames = fl ? (const float *)(base + m->stage_frames) : NULL,
        .lengths = {fl ? (const int *)base : NULL, cl ? (const int *)base + m->max_batch : NULL},
        .ids = cl ? (const int *)(base + m->stage_ids) : NULL,
        .slot = slot};
    return VTR_OK;
}

/* After the work that reads in is queued: the GPU's slot may take its next inputs. st:
 * the call's status so far, returned unless it is VTR_OK and the release fails. */
static vtr_status release_inputs(vtr_vse_model *m, const vse_inputs *in, vtr_status st,
                                 vtr_error *err)
{
    return in->slot < 0 ? st : vtr_cuda_stage_release(m->stage, in->slot, st, err);
}

/* ---- forward ------------------------------------------------------------------- */

/* Visual side: x (take_inputs's frames: (B,T,F) padded with an MLP, else the real rows
 * packed), lengths (B) on the device and hl on the host -> m->img_emb (B,E). Leaves in the arena
 * what image_backward reads. dp: NULL, or a data-parallel training batch (BatchNorm over the global
 * batch's rows; dist's errors). */
static vtr_status image_forward(vtr_vse_model *m, const float *x, const int *lengths,
                                const int *hl, int B, int T, bool train, const vtr_vse_batch *dp,
                                vtr_error *err)
{
    vtr_device dev = m->device;
    int F = m->cfg.feature_dim, E = m->cfg.embed_size, M = m->cfg.mlp_hidden;
    int R = B * T;
    if (M > 0) {
        // img_feat (R,E) = fc(x) + Linear1(ReLU(BN(Linear0(x)))) over every row, padded
        // rows included (they enter BatchNorm's statistics, as in the reference)
        VTR_TRY(vtr_dev_linear_forward(dev, m->img_feat, x, m->fc_w, m->fc_b, R, F, E, err));
        VTR_TRY(vtr_dev_linear_forward(dev, m->mlp_a0, x, m->mlp0_w, m->mlp0_b, R, F, M, err));
        if (train && dp) {
            VTR_TRY(vtr_sync_batchnorm_forward(
                dp->dist, dev, m->mlp_a1, m->bn_mean, m->bn_rstd, m->bn_running_mean,
                m->bn_running_var, m->mlp_a0, m->bn_w, m->bn_b, R, M, (int64_t)dp->B_global * T,
                VTR_BATCHNORM_MOMENTUM, VTR_BATCHNORM_EPS, m->bn_sums, err));
            (*m->bn_batches_tracked)++;
        } else if (train) {
            VTR_TRY(vtr_dev_batchnorm_forward(dev, m->mlp_a1, m->bn_mean, m->bn_rstd,
                                              m->bn_running_mean, m->bn_running_var, m->mlp_a0,
                                              m->bn_w, m->bn_b, R, M, VTR_BATCHNORM_MOMENTUM,
                                              VTR_BATCHNORM_EPS, err));
            (*m->bn_batches_tracked)++;
        } else {
            VTR_TRY(vtr_dev_batchnorm_forward_eval(dev, m->mlp_a1, m->mlp_a0, m->bn_w, m->bn_b,
                                                   m->bn_running_mean, m->bn_running_var, R, M,
                                                   VTR_BATCHNORM_EPS, err));
        }
        VTR_TRY(vtr_dev_relu_forward(dev, m->mlp_a1, m->mlp_a1, (size_t)R * M, err));
        VTR_TRY(vtr_dev_linear_forward(dev, m->fc_rows, m->mlp_a1, m->mlp1_w, m->mlp1_b, R, M, E,
                                       err));
        VTR_TRY(vtr_dev_add(dev, m->img_feat, m->fc_rows, (size_t)R * E, err));
    } else {
        // Row-wise only: fc over the real rows alone, packed (x (N,F) -> fc_rows (N,E)),
        // then spread to img_feat (B,T,E) with zero padded rows. The pooler reads real rows
        // only, so this equals the reference's fc over the padded batch.
        size_t n = vtr_pack_count(hl, B);
        VTR_TRY(vtr_dev_linear_forward(dev, m->fc_rows, x, m->fc_w, m->fc_b, (int)n, F, E, err));
        VTR_TRY(vtr_dev_unpack_rows(dev, m->img_feat, m->fc_rows, lengths, B, T, E, err));
    }
    VTR_TRY(pool_forward(dev, &m->img_pool, m->img_pooled, m->img_feat, lengths, B, T, E, err));
    return vtr_dev_l2norm_forward(dev, m->img_emb, m->img_norm, m->img_pooled, B, E, err);
}

/* ---- the text BiGRU (match/caption_bigru.h) ---------------------------------- */

/* The BiGRU's buffers in the arena: direction 0's scratch is the one the poolers share. */
static vtr_caption_bigru caption_bigru(const vtr_vse_model *m)
{
    return (vtr_caption_bigru){.inp_rev = m->word_rev,
                               .workspace = {m->rnn_workspace[0], m->rnn_workspace[1]},
                               .out_rev = m->rnn_rev,
                               .dinp_rev = m->dword_rev,
                               .scratch = {m->scratch, m->rnn_scratch}};
}

/* Text side: ids (B,L) and lengths (B) on the device, hl on the host -> m->cap_emb (B,E).
 * Only real tokens are looked up; padded rows of the word embeddings are zero (the CPU's
 * GRU does not read them; the GPU's multiplies them by zero). */
static vtr_status caption_forward(vtr_vse_model *m, const int *ids, const int *lengths,
                                  const int *hl, int B, int L, vtr_error *err)
{
    vtr_device dev = m->device;
    int W = m->cfg.word_dim, E = m->cfg.embed_size;
    VTR_TRY(vtr_dev_embedding_forward(dev, m->word_emb, ids, m->embed_w, lengths, B, L, W, err));
    vtr_caption_bigru g = caption_bigru(m);
    VTR_TRY(vtr_dev_caption_bigru_forward(dev, m->cap_feat, &g, m->word_emb, lengths, hl, m->rnn,
                                          B, L, W, E, err));
    VTR_TRY(pool_forward(dev, &m->txt_pool, m->cap_pooled, m->cap_feat, lengths, B, L, E, err));
    return vtr_dev_l2norm_forward(dev, m->cap_emb, m->cap_norm, m->cap_pooled, B, E, err);
}

/* After side's forward (0 visual, 1 text) on B items of n elements with lengths (on the
 * device): its embeddings into host out, (B,E), or with set embeddings the sets (B,K,E). */
static vtr_status encoder_output(vtr_vse_model *m, int side, float *out, const int *lengths, int B,
                                 int n, vtr_error *err)
{
    vtr_device dev = m->device;
    size_t E = (size_t)m->cfg.embed_size;
    if (m->cfg.set.K == 0)
        return vtr_dev_download(dev, out, side ? m->cap_emb : m->img_emb, sizeof(float) * B * E,
                                err);
    VTR_TRY(vtr_dev_set_prediction_forward(dev, m->set[side], m->slots_n[side],
                                           m->spm_workspace[side], side ? m->cap_feat : m->img_feat,
                                           lengths, side ? m->cap_pooled : m->img_pooled,
                                           m->spm_w[side], &m->spm, B, n, 0.0f, 0, 0, 0, err));
    return vtr_dev_download(dev, out, m->set[side], sizeof(float) * B * m->cfg.set.K * E, err);
}

vtr_status vtr_vse_encode_images(vtr_vse_model *m, float *out, const float *frames,
                                 const int *lengths, int B, int T, bool train, vtr_error *err)
{
    vtr_status st = check_images(m, lengths, B, T, err);
    if (st)
        return st;
    if (train && m->cfg.mlp_hidden > 0 && B * T < 2)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "vse model: BatchNorm in training mode needs at least 2 rows, got %d",
                        B * T);
    vse_inputs in;
    VTR_TRY(take_inputs(m, 0, frames, lengths, B, T, NULL, NULL, 0, &in, err));
    st = image_forward(m, in.frames, in.lengths[0], lengths, B, T, train, NULL, err);
    if (st == VTR_OK)
        st = encoder_output(m, 0, out, in.lengths[0], B, T, err);
    return release_inputs(m, &in, st, err);
}

vtr_status vtr_vse_encode_captions(vtr_vse_model *m, float *out, const int *ids, const int *lengths,
                                   int B, int L, vtr_error *err)
{
    vtr_status st = check_captions(m, ids, lengths, B, L, err);
    if (st)
        return st;
    vse_inputs in;
    VTR_TRY(take_inputs(m, 0, NULL, NULL, B, 0, ids, lengths, L, &in, err));
    st = caption_forward(m, in.ids, in.lengths[1], lengths, B, L, err);
    if (st == VTR_OK)
        st = encoder_output(m, 1, out, in.lengths[1], B, L, err);
    return release_inputs(m, &in, st, err);
}

/* ---- backward ------------------------------------------------------------------ */

/* The gradients of the pooled embeddings from those of the l2-normalized ones: dimg_emb
 * (B,E) -> dimg_pooled (B,E), dcap_emb -> dcap_pooled; the element gradients dimg_feat
 * (B,T,E) and dcap_feat (B,L,E) zeroed for the poolers to accumulate into. */
static vtr_status single_vector_backward(vtr_vse_model *m, int B, int T, int L, vtr_error *err)
{
    vtr_device dev = m->device;
    size_t E = (size_t)m->cfg.embed_size;
    VTR_TRY(vtr_dev_zero(dev, m->dimg_pooled, sizeof(float) * B * E, err));
    VTR_TRY(vtr_dev_l2norm_backward(dev, m->dimg_pooled, m->dimg_emb, m->img_pooled, m->img_norm,
                                    B, (int)E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dimg_feat, sizeof(float) * B * T * E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dcap_pooled, sizeof(float) * B * E, err));
    VTR_TRY(vtr_dev_l2norm_backward(dev, m->dcap_pooled, m->dcap_emb, m->cap_pooled, m->cap_norm,
                                    B, (int)E, err));
    return vtr_dev_zero(dev, m->dcap_feat, sizeof(float) * B * L * E, err);
}

/* Visual side, after image_forward(train) on the same x and dp: m->dimg_pooled (B,E) and
 * the element gradients m->dimg_feat (B,T,E) so far -> the visual parameters' gradients. */
static vtr_status image_backward(vtr_vse_model *m, const float *x, const int *lengths,
                                 const int *hl, int B, int T, const vtr_vse_batch *dp,
                                 vtr_error *err)
{
    vtr_device dev = m->device;
    int F = m->cfg.feature_dim, E = m->cfg.embed_size, M = m->cfg.mlp_hidden;
    int R = B * T;
    VTR_TRY(pool_backward(dev, &m->img_pool, m->dimg_feat, m->scratch, m->dimg_pooled,
                          m->img_feat, lengths, B, T, E, err));
    if (M > 0) {
        // fc and the MLP residual both read x; x itself wants no gradient
        VTR_TRY(vtr_dev_linear_backward(dev, NULL, m->fc_dw, m->fc_db, m->dimg_feat, x, m->fc_w,
                                        R, F, E, err));
        // Linear 1 -> dmlp[0], ReLU -> dmlp[1], BatchNorm -> dmlp[0], Linear 0
        size_t n = sizeof(float) * (size_t)R * M;
        VTR_TRY(vtr_dev_zero(dev, m->dmlp[0], n, err));
        VTR_TRY(vtr_dev_linear_backward(dev, m->dmlp[0], m->mlp1_dw, m->mlp1_db, m->dimg_feat,
                                        m->mlp_a1, m->mlp1_w, R, M, E, err));
        VTR_TRY(vtr_dev_zero(dev, m->dmlp[1], n, err));
        VTR_TRY(vtr_dev_relu_backward(dev, m->dmlp[1], m->dmlp[0], m->mlp_a1, (size_t)R * M, err));
        VTR_TRY(vtr_dev_zero(dev, m->dmlp[0], n, err));
        if (dp)
            VTR_TRY(vtr_sync_batchnorm_backward(
                dp->dist, dev, m->dmlp[0], m->bn_dw, m->bn_db, m->dmlp[1], m->mlp_a0, m->bn_w,
                m->bn_mean, m->bn_rstd, R, M, (int64_t)dp->B_global * T, m->bn_sums, err));
        else
            VTR_TRY(vtr_dev_batchnorm_backward(dev, m->dmlp[0], m->bn_dw, m->bn_db, m->dmlp[1],
                                               m->mlp_a0, m->bn_w, m->bn_mean, m->bn_rstd, R, M,
                                               err));
        return vtr_dev_linear_backward(dev, NULL, m->mlp0_dw, m->mlp0_db, m->dmlp[0], x,
                                       m->mlp0_w, R, F, M, err);
    }
    // gather the real rows' gradients into fc_rows (N,E), the packed layout of the forward
    size_t n = vtr_pack_count(hl, B);
    VTR_TRY(vtr_dev_pack_rows(dev, m->fc_rows, m->dimg_feat, lengths, B, T, E, err));
    return vtr_dev_linear_backward(dev, NULL, m->fc_dw, m->fc_db, m->fc_rows, x, m->fc_w, (int)n, F,
                                   E, err);
}

/* Text side, after caption_forward on the same ids: m->dcap_pooled (B,E) and the element
 * gradients m->dcap_feat (B,L,E) so far -> the text parameters' gradients. */
static vtr_status caption_backward(vtr_vse_model *m, const int *ids, const int *lengths,
                                   const int *hl, int B, int L, vtr_error *err)
{
    vtr_device dev = m->device;
    int W = m->cfg.word_dim, E = m->cfg.embed_size;
    VTR_TRY(pool_backward(dev, &m->txt_pool, m->dcap_feat, m->scratch, m->dcap_pooled,
                          m->cap_feat, lengths, B, L, E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dword_emb, sizeof(float) * (size_t)B * L * W, err));
    vtr_caption_bigru g = caption_bigru(m);
    VTR_TRY(vtr_dev_caption_bigru_backward(dev, m->dword_emb, m->drnn, &g, m->dcap_feat,
                                           m->word_emb, lengths, hl, m->rnn, B, L, W, E, err));
    // the real tokens' rows, items in order (a fixed accumulation order for repeated ids)
    return vtr_dev_embedding_backward(dev, m->embed_dw, m->dword_emb, ids, lengths, B, L, W, err);
}

/* ---- the training step ----------------------------------------------------------- */

/* Data parallel: this rank's B rows of `row` floats at the start of buf -> the global
 * batch's, and this rank's rows of a global gradient back to the start. */
static vtr_status gather_rows(const vtr_vse_model *m, const vtr_vse_batch *bt, float *buf,
                              size_t row, vtr_error *err)
{
    return vtr_dist_gather_rows_on(bt->dist, m->device, buf, sizeof(float) * row, bt->first, bt->B,
                                   bt->B_global, err);
}

static vtr_status own_rows(const vtr_vse_model *m, const vtr_vse_batch *bt, float *buf, size_t row,
                           vtr_error *err)
{
    return vtr_dist_own_rows_on(m->device, buf, sizeof(float) * row, bt->first, bt->B, err);
}

/* Set embeddings, after both encoders' forward (in: their inputs): the set modules, S =
 * smooth-Chamfer, the loss's terms (vse_model.h; in m->set_loss, summed by the step) and
 * the backward down to m->dimg_pooled, dimg_feat, dcap_pooled and dcap_feat (the encoders'
 * backward takes it from there). dp: a data-parallel batch (the sets gathered for S and the
 * loss) or NULL. */
static vtr_status set_step(vtr_vse_model *m, const vtr_vse_batch *bt, const vtr_vse_batch *dp,
                           const vse_inputs *in, vtr_hinge_negatives negatives, vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_vse_config *c = &m->cfg;
    const vtr_vse_set_config *sc = &c->set;
    int B = bt->B, E = c->embed_size, K = sc->K, len[2] = {bt->T, bt->L};
    int Bg = dp ? dp->B_global : B, first = dp ? dp->first : 0;
    float *feat[2] = {m->img_feat, m->cap_feat}, *pooled[2] = {m->img_pooled, m->cap_pooled};
    float *dfeat[2] = {m->dimg_feat, m->dcap_feat}, *dpooled[2] = {m->dimg_pooled, m->dcap_pooled};
    uint64_t stream[2];
    vtr_status st;
    for (int side = 0; side < 2; side++) {
        stream[side] = ((uint64_t)bt->step * 2 + (uint64_t)side) * 256;
        VTR_TRY(vtr_dev_set_prediction_forward(
            dev, m->set[side], m->slots_n[side], m->spm_workspace[side], feat[side],
            in->lengths[side], pooled[side], m->spm_w[side], &m->spm, B, len[side], sc->dropout,
            bt->seed, stream[side], first, err));
        if (dp && ((st = gather_rows(m, dp, m->set[side], (size_t)K * E, err)) ||
                   (st = gather_rows(m, dp, m->slots_n[side], (size_t)K * E, err))))
            return st;
    }
    VTR_TRY(vtr_dev_smooth_chamfer_forward(dev, m->sim, Bg, m->sim_scratch, m->set[0], m->set[1],
                                           Bg, Bg, K, K, E, sc->alpha, err));
    m->negatives = negatives == VTR_HINGE_ALL_NEGATIVES ? Bg - 1 : 1;
    /* the loss's terms (set_loss: hinge, L_div of each side, L_mmd), summed after the step */
    float *t = m->set_loss;
    long rows = (long)Bg * K;
    VTR_TRY(vtr_dev_hinge_loss_forward(dev, &t[0], m->sim, Bg, c->margin, negatives, c->reduction,
                                       err));
    VTR_TRY(vtr_dev_set_diversity_forward(dev, &t[1], m->slots_n[0], Bg, K, E, err));
    VTR_TRY(vtr_dev_set_diversity_forward(dev, &t[2], m->slots_n[1], Bg, K, E, err));
    VTR_TRY(vtr_dev_set_mmd_forward(dev, &t[3], m->sim_scratch, m->set[0], m->set[1], rows, rows, E,
                                    VTR_SET_MMD_GAMMA, err));

    // backward
    size_t n = sizeof(float) * (size_t)rows * E;
    for (int side = 0; side < 2; side++) {
        VTR_TRY(vtr_dev_zero(dev, m->dset[side], n, err));
        VTR_TRY(vtr_dev_zero(dev, m->dslots_n[side], n, err));
    }
    VTR_TRY(vtr_dev_set_mmd_backward(dev, m->dset[0], m->dset[1], sc->mmd_weight, m->sim_scratch,
                                     m->set[0], m->set[1], rows, rows, E, VTR_SET_MMD_GAMMA, err));
    VTR_TRY(vtr_dev_zero(dev, m->dsim, sizeof(float) * (size_t)Bg * Bg, err));
    VTR_TRY(vtr_dev_hinge_loss_backward(dev, m->dsim, 1.0f, m->sim, Bg, c->margin, negatives,
                                        c->reduction, err));
    VTR_TRY(vtr_dev_smooth_chamfer_backward(dev, m->dset[0], m->dset[1], m->sim_scratch, m->dsim,
                                            Bg, m->set[0], m->set[1], Bg, Bg, K, K, E, sc->alpha,
                                            err));
    for (int side = 0; side < 2; side++) {
        VTR_TRY(vtr_dev_set_diversity_backward(dev, m->dslots_n[side], sc->div_weight,
                                               m->slots_n[side], Bg, K, E, err));
        if (dp && ((st = own_rows(m, dp, m->dset[side], (size_t)K * E, err)) ||
                   (st = own_rows(m, dp, m->dslots_n[side], (size_t)K * E, err))))
            return st;
        VTR_TRY(vtr_dev_zero(dev, dfeat[side], sizeof(float) * (size_t)B * len[side] * E, err));
        VTR_TRY(vtr_dev_zero(dev, dpooled[side], sizeof(float) * (size_t)B * E, err));
        VTR_TRY(vtr_dev_set_prediction_backward(
            dev, dfeat[side], dpooled[side], m->spm_dw[side], m->scratch, m->dset[side],
            m->dslots_n[side], m->spm_workspace[side], feat[side], in->lengths[side], pooled[side],
            m->spm_w[side], &m->spm, B, len[side], sc->dropout, bt->seed, stream[side], first,
            err));
    }
    return VTR_OK;
}

/* One vector per item: S over the (gathered) embeddings, the loss (in m->loss), and the
 * backward down to m->dimg_pooled, dimg_feat, dcap_pooled and dcap_feat. */
static vtr_status single_vector_step(vtr_vse_model *m, const vtr_vse_batch *bt,
                                     const vtr_vse_batch *dp, vtr_hinge_negatives negatives,
                                     vtr_error *err)
{
    vtr_device dev = m->device;
    const vtr_vse_config *c = &m->cfg;
    int B = bt->B, E = c->embed_size, Bg = dp ? dp->B_global : B;
    vtr_status st;
    if (dp && ((st = gather_rows(m, dp, m->img_emb, (size_t)E, err)) ||
               (st = gather_rows(m, dp, m->cap_emb, (size_t)E, err))))
        return st;
    VTR_TRY(vtr_dev_cosine_similarity_forward(dev, m->sim, m->img_emb, m->cap_emb, Bg, Bg, E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dsim, sizeof(float) * (size_t)Bg * Bg, err));
    if (c->loss == VTR_VSE_LOSS_ADOPT) {
        /* K: every negative (warm-up), adopt_fixed_k, or equation 6 (fixed 0) on the device;
         * vtr_vse_train_step reads it back with the loss */
        int fixed = Bg - 1;
        if (negatives == VTR_HINGE_HARDEST_NEGATIVE)
            fixed =
                c->adopt_fixed_k > 0 ? (c->adopt_fixed_k < Bg - 1 ? c->adopt_fixed_k : Bg - 1) : 0;
        VTR_TRY(vtr_dev_adopt_negatives(dev, m->adopt_k, m->sim, Bg, fixed, err));
        VTR_TRY(vtr_dev_adopt_loss_forward(dev, m->loss, m->sim, Bg, m->adopt_k,
                                           c->adopt_temperature, c->adopt_positive_in_denominator,
                                           c->reduction, err));
        VTR_TRY(vtr_dev_adopt_loss_backward(dev, m->dsim, 1.0f, m->sim, Bg, m->adopt_k,
                                            c->adopt_temperature, c->adopt_positive_in_denominator,
                                            c->reduction, err));
    } else {
        m->negatives = negatives == VTR_HINGE_ALL_NEGATIVES ? Bg - 1 : 1;
        VTR_TRY(vtr_dev_hinge_loss_forward(dev, m->loss, m->sim, Bg, c->margin, negatives,
                                           c->reduction, err));
        VTR_TRY(vtr_dev_hinge_loss_backward(dev, m->dsim, 1.0f, m->sim, Bg, c->margin, negatives,
                                            c->reduction, err));
    }
    // backward: every gradient buffer of the arena is zeroed before it accumulates
    VTR_TRY(vtr_dev_zero(dev, m->dimg_emb, sizeof(float) * (size_t)Bg * E, err));
    VTR_TRY(vtr_dev_zero(dev, m->dcap_emb, sizeof(float) * (size_t)Bg * E, err));
    VTR_TRY(vtr_dev_cosine_similarity_backward(dev, m->dimg_emb, m->dcap_emb, m->dsim, m->img_emb,
                                               m->cap_emb, Bg, Bg, E, err));
    if (dp && ((st = own_rows(m, dp, m->dimg_emb, (size_t)E, err)) ||
               (st = own_rows(m, dp, m->dcap_emb, (size_t)E, err))))
        return st;
    return single_vector_backward(m, B, bt->T, bt->L, err);
}

vtr_vse_batch vtr_vse_batch_share(const vtr_vse_model *m, const vtr_vse_batch *global,
                                  vtr_dist *dist)
{
    vtr_vse_batch batch = *global;
    int64_t first, count;
    vtr_dist_share(global->B, dist->rank, dist->size, &first, &count);
    batch.dist = dist;
    batch.B_global = global->B;
    batch.first = (int)first;
    batch.B = (int)count;
    batch.frames += (size_t)first * (size_t)global->T * (size_t)m->cfg.feature_dim;
    batch.frame_lengths += first;
    batch.ids += (size_t)first * (size_t)global->L;
    batch.caption_lengths += first;
    return batch;
}

vtr_status vtr_vse_stage_batch(vtr_vse_model *m, int slot, vtr_vse_batch *batch, vtr_error *err)
{
    vtr_status st;
    if ((st = check_images(m, batch->frame_lengths, batch->B, batch->T, err)) ||
        (st = check_captions(m, batch->ids, batch->caption_lengths, batch->B, batch->L, err)))
        return st;
    if (slot < 0 || slot > 1)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: stage slot %d outside 0..1", slot);
    if (m->device == VTR_DEVICE_CPU)
        return VTR_OK;
    void *h;
    VTR_TRY(vtr_cuda_stage_host(m->stage, slot, &h, err));
    size_t bytes = fill_slot(m, h, batch->frames, batch->frame_lengths, batch->B, batch->T,
                             batch->ids, batch->caption_lengths, batch->L);
    VTR_TRY(vtr_cuda_stage_upload(m->stage, slot, bytes, err));
    batch->staged = slot + 1;
    return VTR_OK;
}

/* The step's work on in (take_inputs), queued on the GPU. */
static vtr_status step_queued(vtr_vse_model *m, const vtr_vse_batch *bt, const vtr_vse_batch *dp,
                              const vse_inputs *in, vtr_hinge_negatives negatives, vtr_error *err)
{
    int B = bt->B;
    const int *hl[2] = {bt->frame_lengths, bt->caption_lengths};
    VTR_TRY(image_forward(m, in->frames, in->lengths[0], hl[0], B, bt->T, true, dp, err));
    VTR_TRY(caption_forward(m, in->ids, in->lengths[1], hl[1], B, bt->L, err));
    VTR_TRY(m->cfg.set.K > 0 ? set_step(m, bt, dp, in, negatives, err)
                             : single_vector_step(m, bt, dp, negatives, err));
    VTR_TRY(image_backward(m, in->frames, in->lengths[0], hl[0], B, bt->T, dp, err));
    return caption_backward(m, in->ids, in->lengths[1], hl[1], B, bt->L, err);
}

vtr_status vtr_vse_train_step(vtr_vse_model *m, const vtr_vse_batch *batch,
                              vtr_hinge_negatives negatives, float *loss, vtr_error *err)
{
    const vtr_vse_batch *bt = batch;
    /* the data-parallel batch, when there is more than one rank */
    const vtr_vse_batch *dp = bt->dist && bt->dist->size > 1 ? bt : NULL;
    int B = bt->B, Bg = dp ? bt->B_global : B;
    vtr_status st;
    if (dp && (B < 1 || bt->first < 0 || bt->first > Bg - B || Bg > m->max_batch))
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: pairs %d .. %d of a global batch of "
                        "%d (at most %d)", bt->first, bt->first + B - 1, Bg, m->max_batch);
    if (Bg < 2)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "vse model: a training batch needs at least 2 pairs (negatives), got %d",
                        Bg);
    if ((st = check_images(m, bt->frame_lengths, B, bt->T, err)) ||
        (st = check_captions(m, bt->ids, bt->caption_lengths, B, bt->L, err)))
        return st;
    if (negatives != VTR_HINGE_ALL_NEGATIVES && negatives != VTR_HINGE_HARDEST_NEGATIVE)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: negatives = %d is no hinge mode",
                        (int)negatives);
    if (bt->staged < 0 || bt->staged > 2)
        return vtr_fail(err, VTR_ERR_INVALID, "vse model: staged = %d outside 0..2", bt->staged);
    const int *hl[2] = {bt->frame_lengths, bt->caption_lengths};
    vse_inputs in;
    VTR_TRY(take_inputs(m, m->device == VTR_DEVICE_CUDA ? bt->staged : 0, bt->frames, hl[0], B,
                        bt->T, bt->ids, hl[1], bt->L, &in, err));
    st = step_queued(m, bt, dp, &in, negatives, err);
    st = release_inputs(m, &in, st, err);
    if (st)
        return st;
    if (m->cfg.set.K > 0) { /* the loss from its terms, as the reference sums them */
        const vtr_vse_set_config *sc = &m->cfg.set;
        float t[4];
        VTR_TRY(vtr_dev_download(m->device, t, m->set_loss, sizeof t, err));
        float div = t[1] + t[2];
        *loss = t[0] + sc->div_weight * div + sc->mmd_weight * t[3];
        m->set_terms[0] = t[0], m->set_terms[1] = div, m->set_terms[2] = t[3];
        return VTR_OK;
    }
    unsigned char out[sizeof(float) + sizeof(int)]; /* m->loss, then m->adopt_k */
    VTR_TRY(vtr_dev_download(m->device, out, m->loss, sizeof out, err));
    memcpy(loss, out, sizeof(float));
    if (m->cfg.loss == VTR_VSE_LOSS_ADOPT)
        memcpy(&m->negatives, out + sizeof(float), sizeof(int));
    return VTR_OK;
}

double vtr_vse_train_step_flops(const vtr_vse_model *m, const vtr_vse_batch *batch)
{
    const vtr_vse_config *c = &m->cfg;
    double F = c->feature_dim, E = c->embed_size, M = c->mlp_hidden, W = c->word_dim;
    double B = batch->B, T = batch->T, L = batch->L;
    double frames = 0, tokens = 0;
    for (int b = 0; b < batch->B; b++) {
        frames += batch->frame_lengths[b];
        tokens += batch->caption_lengths[b];
    }
    double flops = 0;
    if (M > 0) {
        double R = B * T;
        flops += 2 * (2 * R * F * E); /* fc: forward, weight gradient */
        flops += 2 * (2 * R * F * M); /* Linear 0: forward, weight gradient */
        flops += 3 * (2 * R * M * E); /* Linear 1: forward, both gradients */
    } else {
        flops += 2 * (2 * frames * F * E); /* fc over the real rows */
    }
    flops += pool_flops(&c->img_pool, B, T, frames);
    flops += vtr_gru_train_flops(tokens, B, W, E, 2, true);
    flops += pool_flops(&c->txt_pool, B, L, tokens);
    if (c->set.K > 0) {
        double K = c->set.K;
        flops += 3 * vtr_set_prediction_flops(&m->spm, batch->B, (long)frames);
        flops += 3 * vtr_set_prediction_flops(&m->spm, batch->B, (long)tokens);
        flops += 4 * (2 * B * K * B * K * E); /* cosines, again in backward, two gradients */
        flops += 7 * (2 * B * K * B * K * E); /* MMD's three Gram blocks and four gradients */
        return flops;
    }
    flops += 3 * (2 * B * B * E); /* S and both of its gradients */
    return flops;
}
