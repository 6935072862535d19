/* Optimizers with PyTorch's semantics (torch.optim.Adam and AdamW, torch 1.13, amsgrad off)
 * and gradient-norm clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2), over the
 * trainable entries of a parameter set (lib/params.h).
 *
 * One step, per element, with t the step count after incrementing, g the gradient, p the
 * parameter, in float32 in this order (as torch's single-tensor path computes it):
 *     Adam:  g = g + weight_decay * p                     (L2 penalty, if weight_decay != 0)
 *     AdamW: p = p * (1 - lr * weight_decay)              (decoupled decay, before the update)
 *     m = m * beta1 + (1 - beta1) * g
 *     v = v * beta2 + (1 - beta2) * g * g
 *     denom = sqrt(v) / sqrt(1 - beta2^t) + eps
 *     p = p + (-lr / (1 - beta1^t)) * (m / denom)
 * The scalars (1 - lr*wd, the bias corrections, the step size) are computed in double and
 * rounded to float once, as torch does with Python floats. torch's CPU kernels may fuse a
 * multiply-add where vtr rounds twice, so results agree to about 1 ulp per operation, not
 * bit for bit; against torch the relative error after a few steps is ~1e-7
 * (tests/test_optim.c). The state (exp_avg m, exp_avg_sq v) is float32, as in torch.
 *
 * The per-element math is vtr_adam_update below (VTR_HD), which a CUDA backend calls from
 * its kernel with the same vtr_adam_scalars.
 *
 * Determinism: the step is elementwise (OpenMP over elements); the clipping norm is summed
 * in double over fixed chunks in a fixed order. The same inputs give the same bytes for
 * any thread count.
 */
#ifndef VTR_OPTIM_H
#define VTR_OPTIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "hostdevice.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_optim_kind {
    VTR_OPTIM_ADAM,  /* torch.optim.Adam: weight decay is an L2 term in the gradient */
    VTR_OPTIM_ADAMW, /* torch.optim.AdamW: decoupled weight decay */
} vtr_optim_kind;

typedef struct vtr_optim_hparams {
    vtr_optim_kind kind;
    double beta1, beta2;  /* 0 <= beta < 1 */
    double eps;           /* >= 0 */
    double weight_decay;  /* >= 0 */
} vtr_optim_hparams;

/* torch's defaults for kind: betas (0.9, 0.999), eps 1e-8, weight_decay 0 for Adam and
 * 0.01 for AdamW. The learning rate is not a hyper-parameter here: each step takes it
 * (lib/lr_schedule.h computes it). */
vtr_optim_hparams vtr_optim_defaults(vtr_optim_kind kind);

/* "adam" or "adamw" (the names checkpoints store); vtr_optim_kind_parse is the inverse,
 * failing with VTR_ERR_INVALID "unknown optimizer 'x' (expected adam or adamw)". */
const char *vtr_optim_kind_name(vtr_optim_kind kind);
vtr_status vtr_optim_kind_parse(const char *name, vtr_optim_kind *out, vtr_error *err);

typedef struct vtr_optimizer {
    vtr_optim_hparams hp;
    int64_t step;        /* steps taken (torch's state['step']); 0 before the first */
    size_t n;            /* the parameter set's n_trainable */
    float *exp_avg;      /* n floats, parallel to the set's grad: first moments */
    float *exp_avg_sq;   /* n floats: second moments */
} vtr_optimizer;

/* The scalars of one step (step t >= 1, learning rate lr), computed once per step on the
 * host and shared by every element (CPU loop or CUDA kernel). */
typedef struct vtr_adam_scalars {
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
    float bias_correction2_sqrt; /* sqrt(1 - beta2^t) */
    float neg_step_size;         /* -lr / (1 - beta1^t) */
    float eps;
    float l2_decay;              /* Adam: weight_decay; AdamW: 0 */
    float decay_factor;          /* AdamW: 1 - lr * weight_decay; Adam: 1 */
} vtr_adam_scalars;

vtr_adam_scalars vtr_adam_scalars_at(const vtr_optim_hparams *hp, int64_t t, double lr);

/* One element of one step (the formula at the top of this file): updates *p, *m, *v from
 * the gradient g. Both kinds of decay are applied, the other kind's being the identity
 * (+ 0 p, x 1), without a branch: a loop of these vectorizes. */
static VTR_HD void vtr_adam_update(float *p, float *m, float *v, float g,
                                   const vtr_adam_scalars *s)
{
    float pi = *p;
    g = g + s->l2_decay * pi;
    pi = pi * s->decay_factor;
    float mi = *m * s->beta1 + s->one_minus_beta1 * g;
    float vi = *v * s->beta2 + s->one_minus_beta2 * g * g;
    float denom = sqrtf(vi) / s->bias_correction2_sqrt + s->eps;
    *m = mi;
    *v = vi;
    *p = pi + s->neg_step_size * mi / denom;
}

/* Makes an optimizer for the trainable entries of a finalized parameter set, with
 * zeroed state and step 0. Fails with VTR_ERR_INVALID for hyper-parameters out of range
 * or a set not finalized, VTR_ERR_NOMEM; on failure *opt is zeroed. */
vtr_status vtr_optimizer_init(vtr_optimizer *opt, const vtr_param_set *ps,
                              const vtr_optim_hparams *hp, vtr_error *err);

/* Frees the state; leaves opt zeroed. Safe on a zeroed or freed value. */
void vtr_optimizer_free(vtr_optimizer *opt);

/* One step with learning rate lr over ps->data[0, n_trainable) using ps->grad (read, not
 * changed: zero it before the next backward); step is incremented first. Each entry steps
 * at lr x its lr_scale (torch's parameter groups; AdamW's decay uses that rate too). ps must be the
 * set the optimizer was made for: when its n_trainable differs from opt->n (a programming
 * error) the call does nothing. Buffers (non-trainable entries) are never touched. */
void vtr_optimizer_step(vtr_optimizer *opt, vtr_param_set *ps, double lr);

/* vtr_optimizer_step on the gradients times grad_scale, multiplied as they are read
 * (ps->grad is left as it is): clipping fused into the step, with grad_scale =
 * vtr_clip_coef(vtr_grad_norm(ps), max_norm). The same bytes as vtr_clip_grad_norm then
 * vtr_optimizer_step, with one pass over the gradients fewer. */
void vtr_optimizer_step_scaled(vtr_optimizer *opt, vtr_param_set *ps, double lr,
                               float grad_scale);

/* torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=2): the total norm is
 * sqrt(sum of g^2) over every trainable gradient (summed in double, rounded to float);
 * coef = max_norm / (total + 1e-6) in float; when coef < 1 every gradient is multiplied by
 * coef. Returns the total norm before clipping. A non-finite total (NaN or Inf in a
 * gradient) is returned as is and the gradients are left unchanged (torch would scale
 * them by NaN): the caller sees the norm and decides, e.g. to skip the step. max_norm
 * must be > 0. */
float vtr_clip_grad_norm(vtr_param_set *ps, double max_norm);

/* The total norm above without clipping. */
float vtr_grad_norm(const vtr_param_set *ps);

/* The factor vtr_clip_grad_norm multiplies the gradients by for a total norm: coef when it
 * is below 1, else 1 (also for a non-finite total). */
static VTR_HD float vtr_clip_coef(float total, double max_norm)
{
    /* torch: max_norm / (total + 1e-6) on a float tensor is reciprocal(total + 1e-6) *
     * max_norm (Tensor.__rtruediv__) */
    float coef = (1.0f / (total + 1e-6f)) * (float)max_norm;
    return isfinite(total) && coef < 1.0f ? coef : 1.0f;
}

/* The runs of consecutive trainable entries of ps that share one lr_scale (usually one run,
 * the whole set), in order: from entry *e (0 at first), the next run's elements [begin,
 * end) and its scale, *e advanced past it; false when no run is left. */
bool vtr_optim_next_run(const vtr_param_set *ps, size_t *e, size_t *begin, size_t *end,
                        float *lr_scale);

/* The CUDA side (lib/optim.cu, through lib/cuda_entries.c; lib/nn_cuda.h's
 * conventions: device buffers, work queued without a host wait, VTR_ERR_DEVICE).
 *
 * vtr_cuda_clip_coef: out (2 device floats) = {vtr_grad_norm's total, vtr_clip_coef(total,
 * max_norm)} of the n gradients at grad, partials a device scratch of
 * VTR_CUDA_NORM_PARTIALS doubles. Summed in double in a fixed order (the same bytes on
 * every run on one GPU; another order than the CPU's, so equal to it to rounding).
 *
 * vtr_cuda_optimizer_step: vtr_optimizer_step_scaled on the GPU copies of ps's values
 * (data, n_data), gradients (grad, n_trainable) and opt's moments (exp_avg, exp_avg_sq,
 * n_trainable each; opt->exp_avg on the host is not touched), the gradients times
 * *grad_scale (a device float, e.g. out + 1 above, so that clipping needs no host wait;
 * NULL: 1). opt->step is incremented. */
#define VTR_CUDA_NORM_PARTIALS 256
vtr_status vtr_cuda_clip_coef(float *out, double *partials, const float *grad, size_t n,
                              double max_norm, vtr_error *err);
vtr_status vtr_cuda_optimizer_step(vtr_optimizer *opt, const vtr_param_set *ps, float *data,
                                   const float *grad, float *exp_avg, float *exp_avg_sq,
                                   double lr, const float *grad_scale, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
