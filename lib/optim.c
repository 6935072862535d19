/* Adam, AdamW and gradient-norm clipping; the semantics are in optim.h. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a loop runs on one thread (thread start-up costs more). */
#define PARALLEL_MIN 32768

/* The clipping norm is summed over at most NORM_CHUNKS chunks of at least NORM_CHUNK_MIN
 * elements, each in double and in element order, then the chunks in order: the chunk
 * boundaries depend only on the element count, so the sum does not depend on threads. */
#define NORM_CHUNKS 1024
#define NORM_CHUNK_MIN 65536

vtr_optim_hparams vtr_optim_defaults(vtr_optim_kind kind)
{
    vtr_optim_hparams hp = {
        .kind = kind,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .weight_decay = kind == VTR_OPTIM_ADAMW ? 0.01 : 0.0,
    };
    return hp;
}

const char *vtr_optim_kind_name(vtr_optim_kind kind)
{
    return kind == VTR_OPTIM_ADAM ? "adam" : kind == VTR_OPTIM_ADAMW ? "adamw" : "?";
}

vtr_status vtr_optim_kind_parse(const char *name, vtr_optim_kind *out, vtr_error *err)
{
    if (strcmp(name, "adam") == 0)
        *out = VTR_OPTIM_ADAM;
    else if (strcmp(name, "adamw") == 0)
        *out = VTR_OPTIM_ADAMW;
    else {
        char shown[64];
        return vtr_fail(err, VTR_ERR_INVALID, "unknown optimizer '%s' (expected adam or adamw)",
                        vtr_printable(name, strlen(name), shown, sizeof shown));
    }
    return VTR_OK;
}

vtr_status vtr_optimizer_init(vtr_optimizer *opt, const vtr_param_set *ps,
                              const vtr_optim_hparams *hp, vtr_error *err)
{
    memset(opt, 0, sizeof *opt);
    if (hp->kind != VTR_OPTIM_ADAM && hp->kind != VTR_OPTIM_ADAMW)
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: unknown kind %d", (int)hp->kind);
    if (!(hp->beta1 >= 0.0 && hp->beta1 < 1.0) || !(hp->beta2 >= 0.0 && hp->beta2 < 1.0))
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: betas (%g, %g) not in [0, 1)",
                        hp->beta1, hp->beta2);
    if (!(hp->eps >= 0.0) || !isfinite(hp->eps))
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: eps %g is not >= 0", hp->eps);
    if (!(hp->weight_decay >= 0.0) || !isfinite(hp->weight_decay))
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: weight decay %g is not >= 0",
                        hp->weight_decay);
    if (!ps->finalized)
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: the parameter set is not finalized");
    size_t n = ps->n_trainable;
    float *m = n ? calloc(n, sizeof *m) : NULL;
    float *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && (!m || !v)) {
        free(m);
        free(v);
        return vtr_fail(err, VTR_ERR_NOMEM, "optimizer: out of memory for %zu floats of state",
                        2 * n);
    }
    opt->hp = *hp;
    opt->n = n;
    opt->exp_avg = m;
    opt->exp_avg_sq = v;
    return VTR_OK;
}

void vtr_optimizer_free(vtr_optimizer *opt)
{
    free(opt->exp_avg);
    free(opt->exp_avg_sq);
    memset(opt, 0, sizeof *opt);
}

vtr_adam_scalars vtr_adam_scalars_at(const vtr_optim_hparams *hp, int64_t t, double lr)
{
    /* Python-float scalars in torch, rounded to float when they meet a float tensor */
    vtr_adam_scalars s = {
        .beta1 = (float)hp->beta1,
        .one_minus_beta1 = (float)(1.0 - hp->beta1),
        .beta2 = (float)hp->beta2,
        .one_minus_beta2 = (float)(1.0 - hp->beta2),
        .bias_correction2_sqrt = (float)sqrt(1.0 - pow(hp->beta2, (double)t)),
        .neg_step_size = (float)-(lr / (1.0 - pow(hp->beta1, (double)t))),
        .eps = (float)hp->eps,
        .l2_decay = hp->kind == VTR_OPTIM_ADAM ? (float)hp->weight_decay : 0.0f,
        .decay_factor = hp->kind == VTR_OPTIM_ADAMW ? (float)(1.0 - lr * hp->weight_decay) : 1.0f,
    };
    return s;
}

void vtr_optimizer_step(vtr_optimizer *opt, vtr_param_set *ps, double lr)
{
    vtr_optimizer_step_scaled(opt, ps, lr, 1.0f);
}

void vtr_optimizer_step_scaled(vtr_optimizer *opt, vtr_param_set *ps, double lr,
                               float grad_scale)
{
    if (ps->n_trainable != opt->n)
        return;
    opt->step++;
    float *p = ps->data, *m = opt->exp_avg, *v = opt->exp_avg_sq;
    const float *grad = ps->grad;
    size_t e = 0, first, last;
    float lr_scale;
    while (vtr_optim_next_run(ps, &e, &first, &last, &lr_scale)) {
        const vtr_adam_scalars s = vtr_adam_scalars_at(&opt->hp, opt->step, lr * (double)lr_scale);
        long begin = (long)first, n = (long)last;
#pragma omp parallel for simd schedule(simd : static) if (n - begin > PARALLEL_MIN)
        for (long i = begin; i < n; i++) /* g * 1 is g: unclipped steps are unchanged */
            vtr_adam_update(&p[i], &m[i], &v[i], grad[i] * grad_scale, &s);
    }
}

bool vtr_optim_next_run(const vtr_param_set *ps, size_t *e, size_t *begin, size_t *end,
                        float *lr_scale)
{
    while (*e < ps->count && !ps->entries[*e].trainable)
        (*e)++;
    if (*e >= ps->count)
        return false;
    const vtr_param_entry *first = &ps->entries[*e];
    *begin = first->offset;
    *end = first->offset + first->numel;
    *lr_scale = first->lr_scale;
    for ((*e)++; *e < ps->count && ps->entries[*e].trainable &&
                 ps->entries[*e].lr_scale == first->lr_scale;
         (*e)++)
        *end = ps->entries[*e].offset + ps->entries[*e].numel;
    return true;
}

float vtr_grad_norm(const vtr_param_set *ps)
{
    size_t n = ps->n_trainable;
    if (n == 0)
        return 0.0f;
    size_t chunk = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
    if (chunk < NORM_CHUNK_MIN)
        chunk = NORM_CHUNK_MIN;
    long chunks = (long)((n + chunk - 1) / chunk);
    double partial[NORM_CHUNKS];
    const float *g = ps->grad;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (long c = 0; c < chunks; c++) {
        size_t begin = (size_t)c * chunk, end = begin + chunk < n ? begin + chunk : n;
        /* in 8 lanes, then those in order: a fixed order that vectorizes */
        enum { LANES = 8 };
        double lane[LANES] = {0.0}, s = 0.0;
        size_t i = begin;
        for (; i + LANES <= end; i += LANES)
            for (int k = 0; k < LANES; k++)
                lane[k] += (double)g[i + k] * (double)g[i + k];
        for (int k = 0; k < LANES; k++)
            s += lane[k];
        for (; i < end; i++)
            s += (double)g[i] * (double)g[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (long c = 0; c < chunks; c++)
        total += partial[c];
    return (float)sqrt(total);
}

float vtr_clip_grad_norm(vtr_param_set *ps, double max_norm)
{
    float total = vtr_grad_norm(ps);
    float coef = vtr_clip_coef(total, max_norm);
    if (coef == 1.0f)
        return total;
    float *g = ps->grad;
    long n = (long)ps->n_trainable;
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        g[i] *= coef;
    return total;
}
