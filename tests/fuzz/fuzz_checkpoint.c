/* Fuzz target: checkpoint loading (lib/checkpoint.h) on an arbitrary file, as vtr-eval
 * and vtr-train --resume load one into a small model: open (a vtr checkpoint, and a plain
 * state_dict), the metadata, the check of the config against the model, and the three
 * loads (parameters, Adam's state, the training state with two RNGs). A failure must
 * come with one line (lib/error.h; starting with the path, for open) and leave its target
 * as it was (every load is all-or-nothing); loaded parameters are finite. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/checkpoint.h"

/* The model: "enc.weight" (2, 3) and "enc.bias" (3,) trainable, "steps" (1,) int64. */
typedef struct model {
    vtr_param_set ps;
    vtr_optimizer opt;
    vtr_rng data_order, dropout;
} model;

static void model_init(model *m)
{
    static const int64_t w[] = {2, 3}, b[] = {3}, n[] = {1};
    vtr_error err;
    memset(m, 0, sizeof *m);
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    if (vtr_param_set_add(&m->ps, "enc.weight", VTR_F32, true, 2, w, &err) != VTR_OK ||
        vtr_param_set_add(&m->ps, "enc.bias", VTR_F32, true, 1, b, &err) != VTR_OK ||
        vtr_param_set_add(&m->ps, "steps", VTR_I64, false, 1, n, &err) != VTR_OK ||
        vtr_param_set_finalize(&m->ps, &err) != VTR_OK ||
        vtr_optimizer_init(&m->opt, &m->ps, &hp, &err) != VTR_OK) {
        fprintf(stderr, "model: %s\n", err.msg);
        abort();
    }
    for (size_t i = 0; i < m->ps.n_data; i++)
        m->ps.data[i] = 0.5f + (float)i;
    m->ps.idata[0] = 7;
    for (size_t i = 0; i < m->opt.n; i++)
        m->opt.exp_avg[i] = m->opt.exp_avg_sq[i] = 0.25f;
    vtr_rng_init(&m->data_order, 1, 2);
    vtr_rng_init(&m->dropout, 3, 4);
}

static void model_free(model *m)
{
    vtr_optimizer_free(&m->opt);
    vtr_param_set_free(&m->ps);
}

static bool same_model(const model *a, const model *b)
{
    return memcmp(a->ps.data, b->ps.data, a->ps.n_data * sizeof *a->ps.data) == 0 &&
           a->ps.idata[0] == b->ps.idata[0] && a->opt.step == b->opt.step &&
           memcmp(a->opt.exp_avg, b->opt.exp_avg, a->opt.n * sizeof(float)) == 0 &&
           memcmp(a->opt.exp_avg_sq, b->opt.exp_avg_sq, a->opt.n * sizeof(float)) == 0 &&
           memcmp(&a->data_order, &b->data_order, sizeof a->data_order) == 0 &&
           memcmp(&a->dropout, &b->dropout, sizeof a->dropout) == 0;
}

static void load(const vtr_checkpoint *ck)
{
    model m, before;
    model_init(&m);
    model_init(&before);
    vtr_error err;
    for (unsigned flags = 0; flags <= VTR_CHECKPOINT_ALLOW_EXTRA;
         flags += VTR_CHECKPOINT_ALLOW_EXTRA)
        if (vtr_checkpoint_check_params(ck, &m.ps, flags, &err) != VTR_OK)
            fuzz_check_message(&err, NULL);
    if (vtr_checkpoint_load_params(ck, &m.ps, VTR_CHECKPOINT_ALLOW_EXTRA, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (!same_model(&m, &before))
            abort();
    } else {
        for (size_t i = 0; i < m.ps.n_data; i++)
            if (!isfinite(m.ps.data[i]))
                abort();
    }
    model_free(&before);
    before = m; /* what the next loads must leave as it is when they fail */
    model_init(&m);
    memcpy(m.ps.data, before.ps.data, m.ps.n_data * sizeof *m.ps.data);
    m.ps.idata[0] = before.ps.idata[0];

    if (vtr_checkpoint_load_optimizer(ck, &m.ps, &m.opt, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (!same_model(&m, &before))
            abort();
    }
    vtr_checkpoint_rng rngs[] = {{"data_order", &m.data_order}, {"dropout", &m.dropout}};
    vtr_checkpoint_state state = {
        .step = -1, .epoch = -1, .iteration = -1, .rngs = rngs, .rng_count = 2};
    if (vtr_checkpoint_load_state(ck, &state, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (state.step != -1 || state.epoch != -1 || state.iteration != -1 ||
            memcmp(&m.data_order, &before.data_order, sizeof m.data_order) != 0 ||
            memcmp(&m.dropout, &before.dropout, sizeof m.dropout) != 0)
            abort();
    } else if (state.step < 0 || state.epoch < 0 || state.iteration < 0 || m.data_order.used > 4 ||
               m.dropout.used > 4) {
        abort();
    }
    model_free(&m);
    model_free(&before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_scratch();
    fuzz_write_file("model.safetensors", data, size);
    char *path = fuzz_path("model.safetensors");
    for (unsigned flags = 0; flags <= VTR_CHECKPOINT_ALLOW_PLAIN; flags++) {
        vtr_checkpoint ck;
        vtr_error err;
        if (vtr_checkpoint_open(path, flags, &ck, &err) != VTR_OK) {
            fuzz_check_message(&err, path);
            continue;
        }
        static const char *const keys[] = {"config", "epoch", "code_version", "dataset"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const char *v = vtr_checkpoint_meta(&ck, keys[i]);
            if (v)
                fuzz_check_utf8(v, strlen(v));
        }
        load(&ck);
        vtr_checkpoint_close(&ck);
    }
    free(path);
    return 0;
}
