/* Checkpoints: round trips, exact resume of a training loop, loading a converted PyTorch
 * state_dict (tests/fixtures/optim/statedict.safetensors), and the load errors. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#include <math.h>
#include "lib/checkpoint.h"
#include "lib/config.h"
#include "lib/lr_schedule.h"
#include "lib/npy.h"

#define FIXTURES "tests/fixtures/optim"

/* ---- helpers ---- */

static void fill_uniform(float *x, size_t n, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * vtr_rng_uniform(rng) - 1.0f;
}

/* A VSE∞-shaped parameter set at toy sizes (REFERENCE.md's names). skip: the name of an
 * entry to leave out (or NULL); wide_fc: fc.weight with another shape. */
static void build_model(vtr_param_set *ps, const char *skip, bool wide_fc)
{
    static const struct {
        const char *name;
        vtr_dtype dtype;
        bool trainable;
        int ndim;
        int64_t shape[2];
    } model[] = {
        {"img_enc.fc.weight", VTR_F32, true, 2, {4, 6}},
        {"img_enc.fc.bias", VTR_F32, true, 1, {4}},
        {"img_enc.mlp.bns.0.weight", VTR_F32, true, 1, {4}},
        {"img_enc.mlp.bns.0.bias", VTR_F32, true, 1, {4}},
        {"img_enc.mlp.bns.0.running_mean", VTR_F32, false, 1, {4}},
        {"img_enc.mlp.bns.0.running_var", VTR_F32, false, 1, {4}},
        {"img_enc.mlp.bns.0.num_batches_tracked", VTR_I64, false, 0, {0}},
        {"img_enc.gpool.linear.weight", VTR_F32, true, 2, {1, 3}},
        {"txt_enc.embed.weight", VTR_F32, true, 2, {10, 3}},
    };
    vtr_error err;
    vtr_param_set_init(ps);
    for (size_t i = 0; i < sizeof model / sizeof model[0]; i++) {
        if (skip && strcmp(skip, model[i].name) == 0)
            continue;
        int64_t shape[2] = {model[i].shape[0], model[i].shape[1]};
        if (wide_fc && i == 0)
            shape[1] = 7;
        CHECK_OK(vtr_param_set_add(ps, model[i].name, model[i].dtype, model[i].trainable,
                                   model[i].ndim, shape, &err));
    }
    CHECK_OK(vtr_param_set_finalize(ps, &err));
}

static void randomize_model(vtr_param_set *ps, uint64_t seed)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    fill_uniform(ps->data, ps->n_data, &rng);
    fill_uniform(ps->grad, ps->n_trainable, &rng);
    for (size_t i = 0; i < ps->n_idata; i++)
        ps->idata[i] = 1000 + (int64_t)seed;
}

static const vtr_config_field test_schema[] = {
    VTR_LR_SCHEDULE_FIELDS("train", "5e-4"),
    {"train.grad_clip", VTR_CONFIG_FLOAT, "2.0", NULL},
    {"model.embed_size", VTR_CONFIG_INT, "1024", NULL},
};

static char *config_text(void)
{
    vtr_error err;
    vtr_config *cfg;
    char *text;
    CHECK_OK(vtr_config_new(test_schema, sizeof test_schema / sizeof test_schema[0], &cfg, &err));
    CHECK_OK(vtr_config_set(cfg, "model.embed_size=8", &err));
    CHECK_OK(vtr_config_dump_string(cfg, &text, &err));
    vtr_config_free(cfg);
    return text;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    CHECK_MSG(fp, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    CHECK(buf && fread(buf, 1, (size_t)n, fp) == (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return buf;
}

static bool same_files(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = read_file(a, &na), *y = read_file(b, &nb);
    bool same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static bool same_sets(const vtr_param_set *a, const vtr_param_set *b)
{
    return a->n_data == b->n_data && a->n_idata == b->n_idata &&
           memcmp(a->data, b->data, a->n_data * sizeof(float)) == 0 &&
           memcmp(a->idata, b->idata, a->n_idata * sizeof(int64_t)) == 0;
}

static bool same_optimizers(const vtr_optimizer *a, const vtr_optimizer *b)
{
    return a->step == b->step && a->n == b->n &&
           memcmp(a->exp_avg, b->exp_avg, a->n * sizeof(float)) == 0 &&
           memcmp(a->exp_avg_sq, b->exp_avg_sq, a->n * sizeof(float)) == 0;
}

/* A trained model, its AdamW state, two RNGs, a config and extras, saved to path. */
typedef struct saved_run {
    vtr_param_set ps;
    vtr_optimizer opt;
    vtr_rng order, noise;
    vtr_checkpoint_rng rngs[2];
    vtr_checkpoint_kv extra[2];
    vtr_checkpoint_state state;
    char *config;
} saved_run;

static void saved_run_make(saved_run *r, const char *path)
{
    vtr_error err;
    memset(r, 0, sizeof *r);
    build_model(&r->ps, NULL, false);
    randomize_model(&r->ps, 1);
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&r->opt, &r->ps, &hp, &err));
    for (int k = 0; k < 3; k++) {
        vtr_clip_grad_norm(&r->ps, 2.0);
        vtr_optimizer_step(&r->opt, &r->ps, 1e-3);
    }
    vtr_rng_init(&r->order, 42, 1);
    vtr_rng_init(&r->noise, 0xfedcba9876543210ull, 2);
    for (int k = 0; k < 7; k++) /* mid-block: used = 3 */
        vtr_rng_u32(&r->order);
    r->rngs[0] = (vtr_checkpoint_rng){"data_order", &r->order};
    r->rngs[1] = (vtr_checkpoint_rng){"noise", &r->noise}; /* never drawn from */
    r->extra[0] = (vtr_checkpoint_kv){"dataset", "msrvtt"};
    r->extra[1] = (vtr_checkpoint_kv){"best_rsum", "174.7"};
    r->config = config_text();
    r->state = (vtr_checkpoint_state){
        .step = 3, .epoch = 1, .iteration = 2, .rngs = r->rngs, .rng_count = 2,
        .config = r->config, .code_version = "test-1.0", .extra = r->extra, .extra_count = 2,
    };
    if (path)
        CHECK_OK(vtr_checkpoint_save(path, &r->ps, &r->opt, &r->state, &err));
}

static void saved_run_free(saved_run *r)
{
    vtr_optimizer_free(&r->opt);
    vtr_param_set_free(&r->ps);
    free(r->config);
}

/* ---- round trips ---- */

TEST(checkpoint_round_trip_byte_identical)
{
    vtr_error err;
    const char *a = test_path("ck_a.safetensors"), *b = test_path("ck_b.safetensors");
    saved_run r;
    saved_run_make(&r, a);

    /* a fresh "process": new set, optimizer and RNGs */
    vtr_param_set ps;
    build_model(&ps, NULL, false);
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    vtr_rng order, noise;
    vtr_rng_init(&order, 0, 0);
    vtr_rng_init(&noise, 0, 0);
    vtr_checkpoint_rng rngs[2] = {{"noise", &noise}, {"data_order", &order}}; /* any order */
    vtr_checkpoint_state state = {.rngs = rngs, .rng_count = 2};

    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(a, 0, &ck, &err));
    CHECK(!ck.plain);
    CHECK_STR(vtr_checkpoint_meta(&ck, "format"), "vtr-checkpoint");
    CHECK_STR(vtr_checkpoint_meta(&ck, "version"), "1");
    CHECK_STR(vtr_checkpoint_meta(&ck, "optimizer"), "adamw");
    CHECK_STR(vtr_checkpoint_meta(&ck, "dataset"), "msrvtt");
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, 0, &err));
    CHECK_OK(vtr_checkpoint_load_optimizer(&ck, &ps, &opt, &err));
    CHECK_OK(vtr_checkpoint_load_state(&ck, &state, &err));
    CHECK(same_sets(&ps, &r.ps));
    CHECK(same_optimizers(&opt, &r.opt));
    CHECK_EQ_INT(opt.step, 3);
    CHECK_EQ_INT(state.step, 3);
    CHECK_EQ_INT(state.epoch, 1);
    CHECK_EQ_INT(state.iteration, 2);
    CHECK_STR(state.config, r.config);
    CHECK_STR(state.code_version, "test-1.0");
    CHECK(memcmp(&order, &r.order, sizeof order) == 0);
    CHECK(memcmp(&noise, &r.noise, sizeof noise) == 0);
    for (int k = 0; k < 9; k++) {
        CHECK(vtr_rng_u32(&order) == vtr_rng_u32(&r.order));
        CHECK(vtr_rng_u32(&noise) == vtr_rng_u32(&r.noise));
    }
    vtr_rng_init(&order, 42, 1); /* rewind both to what was saved */
    vtr_rng_init(&noise, 0xfedcba9876543210ull, 2);
    for (int k = 0; k < 7; k++)
        vtr_rng_u32(&order);

    /* save again from the loaded state: the same bytes */
    state.extra = r.extra;
    state.extra_count = 2;
    vtr_checkpoint_rng saved_order[2] = {{"data_order", &order}, {"noise", &noise}};
    state.rngs = saved_order;
    char *config = strdup(state.config);
    state.config = config;
    state.code_version = "test-1.0";
    vtr_checkpoint_close(&ck);
    CHECK_OK(vtr_checkpoint_save(b, &ps, &opt, &state, &err));
    CHECK(same_files(a, b));

    free(config);
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);
    saved_run_free(&r);
}

TEST(checkpoint_model_only_for_evaluation)
{
    vtr_error err;
    const char *full = test_path("full.safetensors"), *model = test_path("model.safetensors");
    saved_run r;
    saved_run_make(&r, full);

    /* evaluation loads the model alone from a full checkpoint: optimizer tensors are
     * not extras */
    vtr_param_set ps;
    build_model(&ps, NULL, false);
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(full, 0, &ck, &err));
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, 0, &err));
    CHECK(same_sets(&ps, &r.ps));
    vtr_checkpoint_close(&ck);

    /* a model-only checkpoint: no optimizer, no training state */
    CHECK_OK(vtr_checkpoint_save(model, &ps, NULL, NULL, &err));
    vtr_param_set ps2;
    build_model(&ps2, NULL, false);
    CHECK_OK(vtr_checkpoint_open(model, 0, &ck, &err));
    CHECK(vtr_checkpoint_meta(&ck, "optimizer") == NULL);
    CHECK(vtr_checkpoint_meta(&ck, "code_version") != NULL);
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps2, 0, &err));
    CHECK(same_sets(&ps2, &r.ps));
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &ps2, &hp, &err));
    CHECK_FAILS(vtr_checkpoint_load_optimizer(&ck, &ps2, &opt, &err), VTR_ERR_NOT_FOUND,
                "no optimizer state (a model-only checkpoint)");
    vtr_checkpoint_state state = {0};
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_NOT_FOUND,
                "no training state");
    vtr_checkpoint_close(&ck);
    vtr_checkpoint_close(&ck); /* twice is fine */

    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps2);
    vtr_param_set_free(&ps);
    saved_run_free(&r);
}

TEST(checkpoint_loads_converted_pytorch_state_dict)
{
    vtr_error err;
    const char *path = FIXTURES "/statedict.safetensors";
    vtr_checkpoint ck;
    CHECK_FAILS(vtr_checkpoint_open(path, 0, &ck, &err), VTR_ERR_FORMAT,
                "not a vtr checkpoint (format 'pt')");
    CHECK_OK(vtr_checkpoint_open(path, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err));
    CHECK(ck.plain);

    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t w[] = {4, 6}, c[] = {4};
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.fc.weight", VTR_F32, true, 2, w, &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.fc.bias", VTR_F32, true, 1, c, &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.weight", VTR_F32, true, 1, c, &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.bias", VTR_F32, true, 1, c, &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.running_mean", VTR_F32, false, 1, c,
                               &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.running_var", VTR_F32, false, 1, c,
                               &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.num_batches_tracked", VTR_I64, false, 0,
                               NULL, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, 0, &err));

    static const char *const compared[] = {"img_enc.fc.weight", "img_enc.mlp.bns.0.running_var"};
    for (int i = 0; i < 2; i++) {
        char npy[256], key[128];
        snprintf(key, sizeof key, "%s", compared[i]);
        for (char *p = key; *p; p++)
            if (*p == '.')
                *p = '_';
        snprintf(npy, sizeof npy, FIXTURES "/statedict_%s.npy", key);
        vtr_npy_file f;
        CHECK_OK(vtr_npy_load(npy, &f, &err));
        const vtr_param_entry *e = vtr_param_set_find(&ps, compared[i]);
        CHECK((size_t)vtr_tensor_numel(&f.tensor) == e->numel);
        CHECK(memcmp(f.tensor.data, ps.data + e->offset, e->numel * sizeof(float)) == 0);
        vtr_npy_close(&f);
    }
    CHECK_EQ_INT(*vtr_param_idata(&ps, "img_enc.mlp.bns.0.num_batches_tracked"), 1);
    float *rv = vtr_param_data(&ps, "img_enc.mlp.bns.0.running_var");
    CHECK(rv[0] != 1.0f); /* moved by one training-mode forward */

    /* a plain file holds parameters only */
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    CHECK_FAILS(vtr_checkpoint_load_optimizer(&ck, &ps, &opt, &err), VTR_ERR_NOT_FOUND,
                "no optimizer state");
    vtr_optimizer_free(&opt);
    vtr_checkpoint_close(&ck);
    vtr_param_set_free(&ps);
}

/* ---- load errors ---- */

TEST(checkpoint_load_params_errors)
{
    vtr_error err;
    const char *path = test_path("errors.safetensors");
    saved_run r;
    saved_run_make(&r, path);
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));

    /* the model has a tensor the file lacks */
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t w[] = {4, 6}, extra[] = {5};
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.fc.weight", VTR_F32, true, 2, w, &err));
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.new.bias", VTR_F32, true, 1, extra, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &ps, VTR_CHECKPOINT_ALLOW_EXTRA, &err),
                VTR_ERR_NOT_FOUND, "errors.safetensors: tensor 'img_enc.new.bias' is missing");
    vtr_param_set_free(&ps);

    /* a wrong shape names the tensor and both shapes; nothing is copied */
    build_model(&ps, NULL, true);
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &ps, 0, &err), VTR_ERR_INVALID,
                "tensor 'img_enc.fc.weight' has shape (4, 6), the model expects (4, 7)");
    for (size_t i = 0; i < ps.n_data; i++)
        CHECK(ps.data[i] == 0.0f);
    vtr_param_set_free(&ps);

    /* a wrong dtype */
    vtr_param_set_init(&ps);
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.mlp.bns.0.num_batches_tracked", VTR_F32, false, 0,
                               NULL, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &ps, VTR_CHECKPOINT_ALLOW_EXTRA, &err),
                VTR_ERR_INVALID, "is int64, the model expects float32");
    vtr_param_set_free(&ps);

    /* a NaN in a tensor names the tensor and the element (a NaN model loaded silently) */
    {
        const char *nan_path = test_path("nan.safetensors");
        saved_run n;
        saved_run_make(&n, NULL);
        vtr_param_data(&n.ps, "img_enc.fc.bias")[2] = NAN;
        CHECK_OK(vtr_checkpoint_save(nan_path, &n.ps, NULL, &n.state, &err));
        vtr_checkpoint nck;
        CHECK_OK(vtr_checkpoint_open(nan_path, 0, &nck, &err));
        build_model(&ps, NULL, false);
        CHECK_FAILS(vtr_checkpoint_load_params(&nck, &ps, 0, &err), VTR_ERR_INVALID,
                    "tensor 'img_enc.fc.bias' has a non-finite value (element 2)");
        vtr_param_set_free(&ps);
        vtr_checkpoint_close(&nck);
        saved_run_free(&n);
    }

    /* the file has tensors the model lacks: an error unless allowed */
    build_model(&ps, "txt_enc.embed.weight", false);
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &ps, 0, &err), VTR_ERR_INVALID,
                "unexpected tensor 'txt_enc.embed.weight' not in the model");
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, VTR_CHECKPOINT_ALLOW_EXTRA, &err));
    CHECK(memcmp(vtr_param_data(&ps, "img_enc.fc.weight"),
                 vtr_param_data(&r.ps, "img_enc.fc.weight"), 24 * sizeof(float)) == 0);
    vtr_param_set_free(&ps);
    vtr_param_set_init(&ps);
    CHECK_OK(vtr_param_set_add(&ps, "img_enc.fc.weight", VTR_F32, true, 2, w, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &ps, 0, &err), VTR_ERR_INVALID,
                "(and 7 more) not in the model");

    /* optimizer state for a model without that parameter */
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    CHECK_FAILS(vtr_checkpoint_load_optimizer(&ck, &ps, &opt, &err), VTR_ERR_INVALID,
                "unexpected optimizer tensor 'optimizer.exp_avg.img_enc.fc.bias'");
    CHECK_EQ_INT(opt.step, 0);
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);

    /* another kind of optimizer */
    build_model(&ps, NULL, false);
    hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    CHECK_FAILS(vtr_checkpoint_load_optimizer(&ck, &ps, &opt, &err), VTR_ERR_INVALID,
                "the optimizer state is adamw's, this run uses adam");
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);

    vtr_checkpoint_close(&ck);
    saved_run_free(&r);
}

TEST(checkpoint_load_state_errors)
{
    vtr_error err;
    const char *path = test_path("state.safetensors");
    saved_run r;
    saved_run_make(&r, path);
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));

    vtr_rng order, noise, other;
    vtr_rng_init(&order, 1, 1);
    vtr_rng_init(&noise, 1, 1);
    vtr_rng_init(&other, 1, 1);
    vtr_rng untouched = order;

    /* a registered rng the file lacks */
    vtr_checkpoint_rng three[3] = {{"data_order", &order}, {"noise", &noise}, {"dropout", &other}};
    vtr_checkpoint_state state = {.step = -1, .rngs = three, .rng_count = 3};
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_NOT_FOUND,
                "no saved state for rng 'dropout'");
    /* a saved rng this run does not register */
    state.rng_count = 1;
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_INVALID,
                "has rng 'noise', which this run does not register");
    /* all or nothing */
    CHECK(memcmp(&order, &untouched, sizeof order) == 0);
    CHECK_EQ_INT(state.step, -1);
    state.rng_count = 2;
    CHECK_OK(vtr_checkpoint_load_state(&ck, &state, &err));
    CHECK_EQ_INT(state.step, 3);
    vtr_checkpoint_close(&ck);
    saved_run_free(&r);
}

/* Writes a safetensors file with one tensor and the given metadata (NULL-terminated
 * key, value pairs). */
static void write_with_metadata(const char *path, const char *const *kv)
{
    vtr_error err;
    float x[2] = {1.0f, 2.0f};
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {2}, .data = x};
    const char *names[] = {"w"};
    json_t *meta = json_object();
    for (; kv && kv[0]; kv += 2)
        json_object_set_new(meta, kv[0], json_string(kv[1]));
    CHECK_OK(vtr_safetensors_save(path, 1, names, &t, meta, &err));
    json_decref(meta);
}

TEST(checkpoint_open_errors)
{
    vtr_error err;
    vtr_checkpoint ck;
    const char *path = test_path("open.safetensors");

    write_with_metadata(path, NULL);
    CHECK_FAILS(vtr_checkpoint_open(path, 0, &ck, &err), VTR_ERR_FORMAT,
                "open.safetensors: not a vtr checkpoint (no \"format\" metadata");
    CHECK(ck.path == NULL);
    CHECK_OK(vtr_checkpoint_open(path, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err));
    vtr_checkpoint_state state = {0};
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_NOT_FOUND,
                "no training state");
    vtr_checkpoint_close(&ck);

    static const char *const v2[] = {"format", "vtr-checkpoint", "version", "2", NULL};
    write_with_metadata(path, v2);
    CHECK_FAILS(vtr_checkpoint_open(path, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err),
                VTR_ERR_UNSUPPORTED, "checkpoint version '2' is not supported");

    static const char *const bad_step[] = {"format", "vtr-checkpoint", "version", "1",
                                           "step", "12x", "epoch", "0", "iteration", "0",
                                           "rng", "{}", NULL};
    write_with_metadata(path, bad_step);
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_FORMAT,
                "step, epoch or iteration is missing or not a count");
    vtr_checkpoint_close(&ck);

    static const char *const bad_rng[] = {
        "format", "vtr-checkpoint", "version", "1", "step", "1", "epoch", "0", "iteration", "0",
        "rng", "{\"a\":{\"seed\":\"zz\",\"stream\":\"0\",\"counter\":\"1\",\"used\":0}}", NULL};
    write_with_metadata(path, bad_rng);
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));
    vtr_rng a;
    vtr_checkpoint_rng reg[1] = {{"a", &a}};
    state.rngs = reg;
    state.rng_count = 1;
    CHECK_FAILS(vtr_checkpoint_load_state(&ck, &state, &err), VTR_ERR_FORMAT,
                "the saved state of rng 'a' is malformed");
    vtr_checkpoint_close(&ck);

    /* truncated: every cut of a real checkpoint fails cleanly */
    const char *full = test_path("whole.safetensors");
    saved_run r;
    saved_run_make(&r, full);
    size_t size;
    unsigned char *bytes = read_file(full, &size);
    size_t cuts[] = {0, 4, 8, 100, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        test_write_file(path, bytes, cuts[i]);
        vtr_status st = vtr_checkpoint_open(path, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err);
        CHECK_MSG(st == VTR_ERR_FORMAT, "cut at %zu: %s", cuts[i], err.msg);
        CHECK(strstr(err.msg, "open.safetensors"));
    }
    free(bytes);
    CHECK_FAILS(vtr_checkpoint_open(test_path("absent.safetensors"), 0, &ck, &err), VTR_ERR_IO,
                "absent.safetensors");
    saved_run_free(&r);
}

TEST(checkpoint_save_errors)
{
    vtr_error err;
    const char *path = test_path("save.safetensors");
    saved_run r;
    saved_run_make(&r, NULL);

    vtr_checkpoint_kv reserved[1] = {{"step", "7"}};
    r.state.extra = reserved;
    r.state.extra_count = 1;
    CHECK_FAILS(vtr_checkpoint_save(path, &r.ps, &r.opt, &r.state, &err), VTR_ERR_INVALID,
                "extra metadata key 'step' is reserved");
    r.state.extra_count = 0;
    r.rngs[1].name = "data_order";
    CHECK_FAILS(vtr_checkpoint_save(path, &r.ps, &r.opt, &r.state, &err), VTR_ERR_INVALID,
                "rng 'data_order' registered twice");
    r.rngs[1].name = "noise";
    r.state.epoch = -1;
    CHECK_FAILS(vtr_checkpoint_save(path, &r.ps, &r.opt, &r.state, &err), VTR_ERR_INVALID,
                "negative");
    r.state.epoch = 0;

    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t s[] = {2};
    CHECK_OK(vtr_param_set_add(&ps, "optimizer.lr", VTR_F32, false, 1, s, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_checkpoint_save(path, &ps, NULL, NULL, &err), VTR_ERR_INVALID,
                "reserved prefix 'optimizer.'");
    vtr_param_set_free(&ps);
    vtr_param_set_init(&ps);
    CHECK_OK(vtr_param_set_add(&ps, "w", VTR_F32, true, 1, s, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_checkpoint_save(path, &ps, &r.opt, NULL, &err), VTR_ERR_INVALID,
                "the optimizer holds state for 69 values, the parameter set has 2 trainable");
    vtr_param_set_free(&ps);
    FILE *fp = fopen(path, "rb");
    CHECK(fp == NULL); /* nothing written */

    CHECK_FAILS(vtr_checkpoint_save(test_path("no/such/dir.safetensors"), &r.ps, NULL, NULL,
                                    &err),
                VTR_ERR_IO, "dir.safetensors");
    saved_run_free(&r);
}

/* ---- exact resume ---- */

/* A tiny deterministic training run: linear regression y = x . w + b on N fixed rows,
 * minibatches of B rows drawn with replacement by the "data_order" RNG, target noise from
 * the "noise" RNG, MSE loss, clipping at 1.0, AdamW with a warm-up + multistep schedule,
 * and an int64 buffer counting steps. */
enum { LR_N = 64, LR_D = 5, LR_B = 8, LR_IPE = 4 };

typedef struct regression {
    vtr_param_set ps;
    vtr_optimizer opt;
    vtr_rng order, noise;
    vtr_checkpoint_rng rngs[2];
    vtr_lr_schedule sched;
    float x[LR_N][LR_D], y[LR_N];
} regression;

static void regression_make(regression *m)
{
    vtr_error err;
    memset(m, 0, sizeof *m);
    vtr_param_set_init(&m->ps);
    int64_t w[] = {1, LR_D}, b[] = {1};
    CHECK_OK(vtr_param_set_add(&m->ps, "lin.weight", VTR_F32, true, 2, w, &err));
    CHECK_OK(vtr_param_set_add(&m->ps, "lin.steps", VTR_I64, false, 0, NULL, &err));
    CHECK_OK(vtr_param_set_add(&m->ps, "lin.bias", VTR_F32, true, 1, b, &err));
    CHECK_OK(vtr_param_set_finalize(&m->ps, &err));
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&m->opt, &m->ps, &hp, &err));
    m->sched = vtr_lr_schedule_constant(0.05);
    m->sched.decay = VTR_LR_MULTISTEP;
    m->sched.gamma = 0.5;
    m->sched.milestones[0] = 1;
    m->sched.milestone_count = 1;
    m->sched.warmup_iterations = 3;
    m->sched.warmup_start = 0.2;
    CHECK_OK(vtr_lr_schedule_check(&m->sched, &err));
    /* the data and the initial weights: fixed, not part of the training state */
    vtr_rng data;
    vtr_rng_init(&data, 7, 100);
    const float true_w[LR_D] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f};
    for (int i = 0; i < LR_N; i++) {
        m->y[i] = 0.3f;
        for (int d = 0; d < LR_D; d++) {
            m->x[i][d] = vtr_rng_normal(&data);
            m->y[i] += true_w[d] * m->x[i][d];
        }
    }
    fill_uniform(m->ps.data, m->ps.n_data, &data);
    vtr_rng_init(&m->order, 7, 1);
    vtr_rng_init(&m->noise, 7, 2);
    m->rngs[0] = (vtr_checkpoint_rng){"data_order", &m->order};
    m->rngs[1] = (vtr_checkpoint_rng){"noise", &m->noise};
}

static void regression_free(regression *m)
{
    vtr_optimizer_free(&m->opt);
    vtr_param_set_free(&m->ps);
}

/* Runs global steps [from, to). */
static void regression_train(regression *m, int64_t from, int64_t to)
{
    float *w = vtr_param_data(&m->ps, "lin.weight"), *b = vtr_param_data(&m->ps, "lin.bias");
    float *dw = vtr_param_grad(&m->ps, "lin.weight"), *db = vtr_param_grad(&m->ps, "lin.bias");
    int64_t *steps = vtr_param_idata(&m->ps, "lin.steps");
    for (int64_t step = from; step < to; step++) {
        vtr_param_set_zero_grad(&m->ps);
        for (int k = 0; k < LR_B; k++) {
            uint32_t i = vtr_rng_below(&m->order, LR_N);
            float target = m->y[i] + 0.1f * vtr_rng_normal(&m->noise);
            float pred = *b;
            for (int d = 0; d < LR_D; d++)
                pred += w[d] * m->x[i][d];
            float g = 2.0f * (pred - target) / LR_B;
            for (int d = 0; d < LR_D; d++)
                dw[d] += g * m->x[i][d];
            *db += g;
        }
        vtr_clip_grad_norm(&m->ps, 1.0);
        vtr_optimizer_step(&m->opt, &m->ps, vtr_lr_at(&m->sched, step / LR_IPE, step % LR_IPE,
                                                        LR_IPE));
        ++*steps;
    }
}

TEST(checkpoint_exact_resume)
{
    vtr_error err;
    const char *path = test_path("resume.safetensors");
    regression *straight = malloc(sizeof *straight), *split = malloc(sizeof *split);
    CHECK(straight && split);
    regression_make(straight);
    regression_train(straight, 0, 10);

    /* 5 steps, save mid-epoch, then drop everything */
    regression_make(split);
    regression_train(split, 0, 5);
    vtr_checkpoint_state state = {.step = 5, .epoch = 5 / LR_IPE, .iteration = 5 % LR_IPE,
                                  .rngs = split->rngs, .rng_count = 2};
    CHECK_OK(vtr_checkpoint_save(path, &split->ps, &split->opt, &state, &err));
    regression_free(split);
    memset(split, 0xa5, sizeof *split);

    /* a fresh start from the checkpoint */
    regression_make(split);
    vtr_rng_init(&split->order, 999, 999); /* whatever the program would start with */
    vtr_checkpoint ck;
    vtr_checkpoint_state loaded = {.rngs = split->rngs, .rng_count = 2};
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));
    CHECK_OK(vtr_checkpoint_load_params(&ck, &split->ps, 0, &err));
    CHECK_OK(vtr_checkpoint_load_optimizer(&ck, &split->ps, &split->opt, &err));
    CHECK_OK(vtr_checkpoint_load_state(&ck, &loaded, &err));
    vtr_checkpoint_close(&ck);
    CHECK_EQ_INT(loaded.epoch * LR_IPE + loaded.iteration, 5);
    regression_train(split, loaded.step, 10);

    CHECK(same_sets(&split->ps, &straight->ps));
    CHECK(same_optimizers(&split->opt, &straight->opt));
    CHECK(memcmp(&split->order, &straight->order, sizeof split->order) == 0);
    CHECK(memcmp(&split->noise, &straight->noise, sizeof split->noise) == 0);
    CHECK_EQ_INT(*vtr_param_idata(&split->ps, "lin.steps"), 10);
    /* the comparison is not vacuous: training moved the parameters */
    regression_free(split);
    regression_make(split);
    CHECK(!same_sets(&split->ps, &straight->ps));
    regression_free(straight);
    regression_free(split);
    free(straight);
    free(split);
}

TEST(checkpoint_converts_half_precision_parameters)
{
    /* a released checkpoint stored in float16 / bfloat16 loads into float32 entries */
    vtr_error err;
    const char *path = test_path("half.safetensors");
    uint16_t h[2] = {vtr_float_to_half(1.5f), vtr_float_to_half(-2.0f)};
    uint16_t b[2] = {vtr_float_to_bf16(0.25f), vtr_float_to_bf16(3.0f)};
    vtr_tensor t[2] = {{.dtype = VTR_F16, .ndim = 1, .shape = {2}, .data = h},
                       {.dtype = VTR_BF16, .ndim = 1, .shape = {2}, .data = b}};
    const char *names[2] = {"w", "b"};
    CHECK_OK(vtr_safetensors_save(path, 2, names, t, NULL, &err));
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t s[] = {2};
    CHECK_OK(vtr_param_set_add(&ps, "w", VTR_F32, true, 1, s, &err));
    CHECK_OK(vtr_param_set_add(&ps, "b", VTR_F32, true, 1, s, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(path, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err));
    CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, 0, &err));
    vtr_checkpoint_close(&ck);
    float *w = vtr_param_data(&ps, "w"), *bias = vtr_param_data(&ps, "b");
    CHECK(w[0] == 1.5f && w[1] == -2.0f && bias[0] == 0.25f && bias[1] == 3.0f);
    vtr_param_set_free(&ps);
}
