/* Learning-rate schedules; the formulas are in lr_schedule.h. */
#include "lr_schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const decay_names[] = {"constant", "step", "multistep", "cosine"};
#define DECAY_COUNT (sizeof decay_names / sizeof decay_names[0])

vtr_lr_schedule vtr_lr_schedule_constant(double base_lr)
{
    vtr_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.decay = VTR_LR_CONSTANT;
    s.base_lr = base_lr;
    s.gamma = 1.0;
    s.step_size = 1;
    s.cosine_epochs = 1;
    return s;
}

const char *vtr_lr_decay_name(vtr_lr_decay decay)
{
    return (unsigned)decay < DECAY_COUNT ? decay_names[decay] : "?";
}

vtr_status vtr_lr_decay_parse(const char *name, vtr_lr_decay *out, vtr_error *err)
{
    for (size_t i = 0; i < DECAY_COUNT; i++)
        if (strcmp(name, decay_names[i]) == 0) {
            *out = (vtr_lr_decay)i;
            return VTR_OK;
        }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID,
                    "unknown lr schedule '%s' (expected constant, step, multistep or cosine)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}

vtr_status vtr_lr_schedule_check(const vtr_lr_schedule *s, vtr_error *err)
{
    if ((unsigned)s->decay >= DECAY_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: unknown decay %d", (int)s->decay);
    if (!(s->base_lr > 0.0) || !isfinite(s->base_lr))
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: base lr %g is not > 0", s->base_lr);
    if ((s->decay == VTR_LR_STEP || s->decay == VTR_LR_MULTISTEP) &&
        (!(s->gamma > 0.0) || !isfinite(s->gamma)))
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: gamma %g is not > 0", s->gamma);
    if (s->decay == VTR_LR_STEP && s->step_size < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: step size %lld is not >= 1",
                        (long long)s->step_size);
    if (s->decay == VTR_LR_MULTISTEP) {
        if (s->milestone_count > VTR_LR_MAX_MILESTONES)
            return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: more than %d milestones",
                            VTR_LR_MAX_MILESTONES);
        for (size_t i = 0; i < s->milestone_count; i++)
            if (s->milestones[i] < 0 || (i > 0 && s->milestones[i] <= s->milestones[i - 1]))
                return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: milestone %zu (%lld) is "
                                "negative or not after the previous one", i + 1,
                                (long long)s->milestones[i]);
    }
    if (s->decay == VTR_LR_COSINE) {
        if (s->cosine_epochs < 1)
            return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: cosine epochs %lld is not >= 1",
                            (long long)s->cosine_epochs);
        if (!(s->lr_min >= 0.0 && s->lr_min <= s->base_lr))
            return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: lr_min %g is not in [0, %g]",
                            s->lr_min, s->base_lr);
    }
    if (s->warmup_iterations < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: warm-up iterations %lld is negative",
                        (long long)s->warmup_iterations);
    if (s->warmup_iterations > 0 && !(s->warmup_start >= 0.0 && s->warmup_start <= 1.0))
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: warm-up start %g is not in [0, 1]",
                        s->warmup_start);
    return VTR_OK;
}

double vtr_lr_at(const vtr_lr_schedule *s, int64_t epoch, int64_t iteration,
                 int64_t iterations_per_epoch)
{
    const double pi = 3.14159265358979323846;
    int64_t global = epoch * iterations_per_epoch + iteration;
    double lr = s->base_lr;
    switch (s->decay) {
    case VTR_LR_CONSTANT:
        break;
    case VTR_LR_STEP:
        /* one multiplication per decay, as torch's chainable StepLR applies them */
        for (int64_t k = epoch / s->step_size; k > 0; k--)
            lr *= s->gamma;
        break;
    case VTR_LR_MULTISTEP:
        for (size_t i = 0; i < s->milestone_count && s->milestones[i] <= epoch; i++)
            lr *= s->gamma;
        break;
    case VTR_LR_COSINE: {
        int64_t T = s->cosine_epochs, t = epoch;
        if (s->cosine_per_iteration) {
            T *= iterations_per_epoch;
            t = global;
        }
        if (t > T)
            t = T;
        lr = s->lr_min + (s->base_lr - s->lr_min) * (1.0 + cos(pi * (double)t / (double)T)) / 2.0;
        break;
    }
    }
    if (s->warmup_iterations > 0 && global < s->warmup_iterations)
        lr *= s->warmup_start +
              (1.0 - s->warmup_start) * (double)global / (double)s->warmup_iterations;
    return lr;
}

/* prefix + "." + key into buf */
static const char *key_of(char *buf, size_t size, const char *prefix, const char *key)
{
    snprintf(buf, size, "%s.%s", prefix, key);
    return buf;
}

vtr_status vtr_lr_schedule_from_config(const vtr_config *cfg, const char *prefix,
                                       vtr_lr_schedule *out, vtr_error *err)
{
    static const struct {
        const char *key;
        vtr_config_type type;
    } keys[] = {
        {"lr", VTR_CONFIG_FLOAT},
        {"lr_schedule", VTR_CONFIG_STRING},
        {"lr_gamma", VTR_CONFIG_FLOAT},
        {"lr_step_size", VTR_CONFIG_INT},
        {"lr_decay_epochs", VTR_CONFIG_INT_LIST},
        {"lr_cosine_epochs", VTR_CONFIG_INT},
        {"lr_cosine_per_iteration", VTR_CONFIG_BOOL},
        {"lr_min", VTR_CONFIG_FLOAT},
        {"lr_warmup_iterations", VTR_CONFIG_INT},
        {"lr_warmup_start", VTR_CONFIG_FLOAT},
    };
    char k[256];
    vtr_status st;
    if (strlen(prefix) > 200)
        return vtr_fail(err, VTR_ERR_INVALID, "lr schedule: config prefix too long");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((st = vtr_config_expect(cfg, key_of(k, sizeof k, prefix, keys[i].key), keys[i].type,
                                    err)) != VTR_OK)
            return st;

    vtr_lr_schedule s = vtr_lr_schedule_constant(vtr_config_float(cfg, key_of(k, sizeof k,
                                                                              prefix, "lr")));
    if (!(s.base_lr > 0.0))
        return vtr_config_fail(cfg, k, err, "the learning rate must be > 0, got %g", s.base_lr);
    const char *name = vtr_config_string(cfg, key_of(k, sizeof k, prefix, "lr_schedule"));
    if (vtr_lr_decay_parse(name, &s.decay, NULL) != VTR_OK) {
        char shown[64];
        return vtr_config_fail(cfg, k, err, "unknown schedule '%s' (expected constant, step, "
                               "multistep or cosine)",
                               vtr_printable(name, strlen(name), shown, sizeof shown));
    }

    if (s.decay == VTR_LR_STEP || s.decay == VTR_LR_MULTISTEP) {
        s.gamma = vtr_config_float(cfg, key_of(k, sizeof k, prefix, "lr_gamma"));
        if (!(s.gamma > 0.0))
            return vtr_config_fail(cfg, k, err, "must be > 0, got %g", s.gamma);
    }
    if (s.decay == VTR_LR_STEP) {
        s.step_size = vtr_config_int(cfg, key_of(k, sizeof k, prefix, "lr_step_size"));
        if (s.step_size < 1)
            return vtr_config_fail(cfg, k, err, "must be >= 1, got %lld",
                                   (long long)s.step_size);
    }
    if (s.decay == VTR_LR_MULTISTEP) {
        size_t n;
        const int64_t *m = vtr_config_int_list(cfg, key_of(k, sizeof k, prefix,
                                                           "lr_decay_epochs"), &n);
        if (n > VTR_LR_MAX_MILESTONES)
            return vtr_config_fail(cfg, k, err, "at most %d epochs", VTR_LR_MAX_MILESTONES);
        for (size_t i = 0; i < n; i++) {
            if (m[i] < 0 || (i > 0 && m[i] <= m[i - 1]))
                return vtr_config_fail(cfg, k, err, "epochs must be >= 0 and increasing, "
                                       "item %zu is %lld", i + 1, (long long)m[i]);
            s.milestones[i] = m[i];
        }
        s.milestone_count = n;
    }
    if (s.decay == VTR_LR_COSINE) {
        s.cosine_epochs = vtr_config_int(cfg, key_of(k, sizeof k, prefix, "lr_cosine_epochs"));
        if (s.cosine_epochs < 1)
            return vtr_config_fail(cfg, k, err, "must be >= 1, got %lld",
                                   (long long)s.cosine_epochs);
        s.cosine_per_iteration =
            vtr_config_bool(cfg, key_of(k, sizeof k, prefix, "lr_cosine_per_iteration"));
        s.lr_min = vtr_config_float(cfg, key_of(k, sizeof k, prefix, "lr_min"));
        if (!(s.lr_min >= 0.0 && s.lr_min <= s.base_lr))
            return vtr_config_fail(cfg, k, err, "must be in [0, lr = %g], got %g", s.base_lr,
                                   s.lr_min);
    }
    s.warmup_iterations = vtr_config_int(cfg, key_of(k, sizeof k, prefix,
                                                     "lr_warmup_iterations"));
    if (s.warmup_iterations < 0)
        return vtr_config_fail(cfg, k, err, "must be >= 0, got %lld",
                               (long long)s.warmup_iterations);
    s.warmup_start = vtr_config_float(cfg, key_of(k, sizeof k, prefix, "lr_warmup_start"));
    if (!(s.warmup_start >= 0.0 && s.warmup_start <= 1.0))
        return vtr_config_fail(cfg, k, err, "must be in [0, 1], got %g", s.warmup_start);
    if ((st = vtr_lr_schedule_check(&s, err)) != VTR_OK)
        return st;
    *out = s;
    return VTR_OK;
}
