/* Learning-rate schedules: the lr of each iteration from the epoch, the iteration within
 * the epoch and the number of iterations per epoch, as closed forms of PyTorch's
 * schedulers (torch.optim.lr_scheduler, torch 1.13). Epochs and iterations are zero-based.
 *
 * lr = base_lr * decay(epoch, iteration) * warmup(global iteration), where the global
 * iteration is epoch * iterations_per_epoch + iteration and decay is one of
 *   constant   1
 *   step       gamma ^ floor(epoch / step_size)                       (StepLR)
 *   multistep  gamma ^ (number of milestones <= epoch)                (MultiStepLR)
 *   cosine     (lr_min + (base_lr - lr_min) * (1 + cos(pi * t / T)) / 2) / base_lr
 *              with t = min(epoch, T) and T = cosine_epochs            (CosineAnnealingLR
 *              stepped once per epoch), or, with cosine_per_iteration, t = min(global
 *              iteration, T) and T = cosine_epochs * iterations_per_epoch (stepped once per
 *              iteration). After T the lr stays at lr_min: torch's keeps following the
 *              cosine back up, which no schedule here wants.
 * and warmup is linear over the first warmup_iterations global iterations (LinearLR with
 * end_factor 1, stepped once per iteration):
 *   warmup(i) = warmup_start + (1 - warmup_start) * min(i, N) / N,  1 when N = 0.
 * The factors multiply, as torch's chained schedulers do (with lr_min = 0 for cosine).
 *
 * The VSE∞ schedules (REFERENCE.md): image-text lr 5e-4, multistep [15], gamma 0.1, 25
 * epochs; video-text lr 1e-4, multistep [25], gamma 0.1, 35 epochs.
 */
#ifndef VTR_LR_SCHEDULE_H
#define VTR_LR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"

#define VTR_LR_MAX_MILESTONES 64

typedef enum vtr_lr_decay {
    VTR_LR_CONSTANT,
    VTR_LR_STEP,
    VTR_LR_MULTISTEP,
    VTR_LR_COSINE,
} vtr_lr_decay;

typedef struct vtr_lr_schedule {
    vtr_lr_decay decay;
    double base_lr;                           /* > 0 */
    double gamma;                             /* step, multistep: factor, > 0 */
    int64_t step_size;                        /* step: epochs between decays, >= 1 */
    int64_t milestones[VTR_LR_MAX_MILESTONES]; /* multistep: epochs, increasing, >= 0 */
    size_t milestone_count;
    int64_t cosine_epochs;                    /* cosine: T in epochs, >= 1 */
    bool cosine_per_iteration;                /* cosine: anneal per iteration, not epoch */
    double lr_min;                            /* cosine: the floor, 0 <= lr_min <= base_lr */
    int64_t warmup_iterations;                /* >= 0; 0 = no warm-up */
    double warmup_start;                      /* factor at iteration 0, in [0, 1] */
} vtr_lr_schedule;

/* A constant schedule at base_lr with no warm-up; set the other fields, then check. */
vtr_lr_schedule vtr_lr_schedule_constant(double base_lr);

/* Fails with VTR_ERR_INVALID naming the first field out of the ranges above. */
vtr_status vtr_lr_schedule_check(const vtr_lr_schedule *s, vtr_error *err);

/* "constant", "step", "multistep", "cosine", and the inverse (VTR_ERR_INVALID
 * "unknown lr schedule 'x' (expected constant, step, multistep or cosine)"). */
const char *vtr_lr_decay_name(vtr_lr_decay decay);
vtr_status vtr_lr_decay_parse(const char *name, vtr_lr_decay *out, vtr_error *err);

/* The lr of iteration `iteration` (0 .. iterations_per_epoch - 1) of epoch `epoch` (>= 0),
 * for a checked schedule; iterations_per_epoch >= 1. */
double vtr_lr_at(const vtr_lr_schedule *s, int64_t epoch, int64_t iteration,
                 int64_t iterations_per_epoch);

/* The config keys of a schedule under a group P ("train"), for a program's schema; LR is
 * the YAML text of the base lr's default:
 *     static const vtr_config_field schema[] = {
 *         VTR_LR_SCHEDULE_FIELDS("train", "5e-4"),
 *         ...
 *     };
 * Defaults give the VSE∞ image-text schedule (multistep at epoch 15, gamma 0.1). */
#define VTR_LR_SCHEDULE_FIELDS(P, LR)                                                       \
    {P ".lr", VTR_CONFIG_FLOAT, LR, "base learning rate"},                                  \
    {P ".lr_schedule", VTR_CONFIG_STRING, "multistep",                                      \
     "lr decay: constant, step, multistep or cosine"},                                      \
    {P ".lr_gamma", VTR_CONFIG_FLOAT, "0.1", "step, multistep: lr factor at each decay"},   \
    {P ".lr_step_size", VTR_CONFIG_INT, "30", "step: epochs between decays"},               \
    {P ".lr_decay_epochs", VTR_CONFIG_INT_LIST, "[15]",                                     \
     "multistep: zero-based epochs at which lr *= lr_gamma"},                               \
    {P ".lr_cosine_epochs", VTR_CONFIG_INT, "25", "cosine: epochs from base lr to lr_min"}, \
    {P ".lr_cosine_per_iteration", VTR_CONFIG_BOOL, "false",                                \
     "cosine: anneal every iteration rather than every epoch"},                             \
    {P ".lr_min", VTR_CONFIG_FLOAT, "0.0", "cosine: final learning rate"},                  \
    {P ".lr_warmup_iterations", VTR_CONFIG_INT, "0",                                        \
     "linear warm-up over this many iterations (0: none)"},                                 \
    {P ".lr_warmup_start", VTR_CONFIG_FLOAT, "0.0", "warm-up: lr factor at iteration 0"}

/* Reads the keys of VTR_LR_SCHEDULE_FIELDS(prefix, ...) from cfg into *out and checks
 * them; an out-of-range value fails with VTR_ERR_INVALID through vtr_config_fail
 * ("cfg.yaml:4: key 'train.lr_gamma': ..."), a key missing from the schema with
 * vtr_config_expect's error. Only the keys the chosen decay uses are checked. */
vtr_status vtr_lr_schedule_from_config(const vtr_config *cfg, const char *prefix,
                                       vtr_lr_schedule *out, vtr_error *err);

#endif
