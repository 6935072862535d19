/* The VSE model (match/vse_model.h): parity of the video variant with PyTorch, checkpoints
 * under the reference names, determinism, initialization, argument errors. The VSE∞
 * region-feature step's parity is in test_nn_parity.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "aggregate/gpo.h"
#include "check.h"
#include "gradcheck.h"
#include "lib/blas_threads.h"
#include "lib/checkpoint.h"
#include "lib/device.h"
#include "lib/gru.h"
#include "lib/optim.h"
#include "match/vse_model.h"

/* ---- helpers ---- */

/* A small model: F 16, E 8, V 20, W 6, the reference GPO sizes; mlp_hidden and the visual
 * pooler as given. */
static vtr_vse_config small_config(int mlp_hidden, vtr_vse_pooler img_pool)
{
    vtr_vse_config cfg = vtr_vse_config_infinity(20);
    cfg.feature_dim = 16;
    cfg.embed_size = 8;
    cfg.mlp_hidden = mlp_hidden;
    cfg.word_dim = 6;
    cfg.img_pool.kind = img_pool;
    return cfg;
}

enum { SB = 4, ST = 6, SL = 7 };

/* A batch of SB pairs for small_config, zero-padded, filled from seed. */
typedef struct small_batch {
    float frames[SB * ST * 16];
    int frame_lengths[SB];
    int ids[SB * SL];
    int caption_lengths[SB];
    vtr_vse_batch batch;
} small_batch;

static void make_batch(small_batch *s, uint64_t seed)
{
    static const int flen[SB] = {6, 2, 4, 1}, clen[SB] = {7, 3, 5, 4};
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 99);
    memset(s, 0, sizeof *s);
    for (int b = 0; b < SB; b++) {
        s->frame_lengths[b] = flen[b];
        s->caption_lengths[b] = clen[b];
        for (int t = 0; t < flen[b]; t++)
            for (int d = 0; d < 16; d++)
                s->frames[(b * ST + t) * 16 + d] = vtr_rng_normal(&rng);
        for (int t = 0; t < clen[b]; t++)
            s->ids[b * SL + t] = 1 + (int)vtr_rng_below(&rng, 19);
    }
    s->batch = (vtr_vse_batch){.B = SB,
                               .T = ST,
                               .frames = s->frames,
                               .frame_lengths = s->frame_lengths,
                               .L = SL,
                               .ids = s->ids,
                               .caption_lengths = s->caption_lengths};
}

/* n training steps with AdamW and clipping at 2.0 (the VSE∞ recipe). */
static void train(vtr_vse_model *m, const small_batch *s, int steps)
{
    vtr_error err;
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &m->params, &hp, &err));
    for (int i = 0; i < steps; i++) {
        float loss;
        vtr_param_set_zero_grad(&m->params);
        CHECK_OK(vtr_vse_train_step(m, &s->batch,
                                    i == 0 ? VTR_HINGE_ALL_NEGATIVES : VTR_HINGE_HARDEST_NEGATIVE,
                                    &loss, &err));
        CHECK(isfinite(loss));
        vtr_clip_grad_norm(&m->params, 2.0);
        vtr_optimizer_step(&opt, &m->params, 1e-2);
    }
    vtr_optimizer_free(&opt);
}

/* ---- parity: the video variant ---- */

TEST(parity_vse_video_frames_mean_pool_hardest_negative)
{
    /* fc alone (frame features, packed real rows), mean pooling over frames, GPO over
     * words, max violation; tests/fixtures/make_nn_fixtures.py make_vse_video */
    enum { B = 4, T = 5, F = 8, E = 6, V = 13, W = 5, PE = 8, HID = 4 };
    vtr_error err;
    vtr_vse_config cfg = vtr_vse_config_infinity(V);
    cfg.feature_dim = F;
    cfg.embed_size = E;
    cfg.mlp_hidden = 0;
    cfg.word_dim = W;
    cfg.img_pool.kind = VTR_VSE_POOL_MEAN;
    cfg.txt_pool.gpo_pe = PE;
    cfg.txt_pool.gpo_hidden = HID;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, B, T, T, &err));
    static const struct {
        const char *fixture, *entry;
    } ps[] = {
        {"img_fc.weight", "img_enc.fc.weight"},          {"img_fc.bias", "img_enc.fc.bias"},
        {"txt_embed.weight", "txt_enc.embed.weight"},    {"txt_rnn", "txt_enc.rnn.weight_ih_l0"},
        {"txt_gpool", "txt_enc.gpool.gru.weight_ih_l0"},
    };
    const size_t n[] = {E * F, E, V * W, vtr_gru_param_count(W, E, 2),
                        vtr_gpo_param_count(PE, HID)};
    enum { NP = sizeof ps / sizeof ps[0] };
    char name[96];
    size_t loaded = 0;
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "vse_video_%s", ps[i].fixture);
        float *value = nn_fixture_floats(name, n[i]);
        memcpy(vtr_param_data(&m.params, ps[i].entry), value, sizeof(float) * n[i]);
        free(value);
        loaded += n[i];
    }
    CHECK_EQ_INT(loaded, m.params.n_trainable);
    CHECK_EQ_INT(m.params.n_idata, 0); /* no BatchNorm without the MLP */

    float *img = nn_fixture_floats("vse_video_img", B * T * F);
    int *img_len = nn_fixture_ints("vse_video_img_lengths", B);
    int *ids = nn_fixture_ints("vse_video_ids", B * T);
    int *cap_len = nn_fixture_ints("vse_video_cap_lengths", B);
    vtr_vse_batch batch = {.B = B,
                           .T = T,
                           .frames = img,
                           .frame_lengths = img_len,
                           .L = T,
                           .ids = ids,
                           .caption_lengths = cap_len};
    float loss;
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    nn_parity_check("vse_video_img_emb", m.img_emb, B * E);
    nn_parity_check("vse_video_cap_emb", m.cap_emb, B * E);
    nn_parity_check("vse_video_S", m.sim, B * B);
    nn_parity_check("vse_video_loss", &loss, 1);
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "vse_video_%s_grad", ps[i].fixture);
        nn_parity_check(name, vtr_param_grad(&m.params, ps[i].entry), n[i]);
    }

    /* the encoders alone give the step's embeddings (no BatchNorm: the mode is moot) */
    float emb[B * E];
    CHECK_OK(vtr_vse_encode_images(&m, emb, img, img_len, B, T, false, &err));
    nn_parity_check("vse_video_img_emb", emb, B * E);
    CHECK_OK(vtr_vse_encode_captions(&m, emb, ids, cap_len, B, T, &err));
    nn_parity_check("vse_video_cap_emb", emb, B * E);

    free(img), free(img_len), free(ids), free(cap_len);
    vtr_vse_model_free(&m);
}

/* ---- checkpoints ---- */

TEST(vse_checkpoint_round_trip_gives_identical_embeddings)
{
    /* region variant (MLP, BatchNorm buffers, GPO both sides) and video variant (fc only,
     * mean pooling over frames) */
    static const struct {
        int mlp_hidden;
        vtr_vse_pooler img_pool;
        const char *expect[4];
    } cases[] = {
        {4,
         VTR_VSE_POOL_GPO,
         {"img_enc.mlp.bns.0.num_batches_tracked", "img_enc.mlp.layers.1.weight",
          "img_enc.gpool.gru.bias_hh_l0_reverse", "txt_enc.gpool.linear.weight"}},
        {0,
         VTR_VSE_POOL_MEAN,
         {"img_enc.fc.weight", "txt_enc.embed.weight", "txt_enc.rnn.weight_hh_l0_reverse",
          "txt_enc.gpool.gru.weight_ih_l0"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vtr_error err;
        vtr_vse_config cfg = small_config(cases[c].mlp_hidden, cases[c].img_pool);
        vtr_vse_model a, b;
        small_batch s;
        make_batch(&s, 5);
        CHECK_OK(vtr_vse_model_init(&a, &cfg, SB, ST, SL, &err));
        vtr_vse_init_params(&a, 1234);
        train(&a, &s, 2); /* moves the parameters and BatchNorm's buffers off their init */
        if (cfg.mlp_hidden)
            CHECK_EQ_INT(*vtr_param_idata(&a.params, "img_enc.mlp.bns.0.num_batches_tracked"), 2);

        const char *path = test_path(c ? "vse_video.safetensors" : "vse_region.safetensors");
        CHECK_OK(vtr_checkpoint_save(path, &a.params, NULL, NULL, &err));

        vtr_checkpoint ck;
        CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));
        CHECK_EQ_INT(ck.st.count, a.params.count);
        for (int k = 0; k < 4; k++)
            CHECK_MSG(vtr_safetensors_find(&ck.st, cases[c].expect[k]), "no tensor %s",
                      cases[c].expect[k]);
        CHECK_OK(vtr_vse_model_init(&b, &cfg, SB, ST, SL, &err)); /* all zeros */
        CHECK_OK(vtr_checkpoint_load_params(&ck, &b.params, 0, &err));
        vtr_checkpoint_close(&ck);
        CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);

        float ea[SB * 8], eb[SB * 8];
        CHECK_OK(vtr_vse_encode_images(&a, ea, s.frames, s.frame_lengths, SB, ST, false, &err));
        CHECK_OK(vtr_vse_encode_images(&b, eb, s.frames, s.frame_lengths, SB, ST, false, &err));
        CHECK(memcmp(ea, eb, sizeof ea) == 0);
        CHECK_OK(vtr_vse_encode_captions(&a, ea, s.ids, s.caption_lengths, SB, SL, &err));
        CHECK_OK(vtr_vse_encode_captions(&b, eb, s.ids, s.caption_lengths, SB, SL, &err));
        CHECK(memcmp(ea, eb, sizeof ea) == 0);
        for (int i = 0; i < SB * 8; i++)
            CHECK(isfinite(ea[i]));
        vtr_vse_model_free(&a);
        vtr_vse_model_free(&b);
    }
}

TEST(vse_checkpoint_of_another_config_is_refused)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(4, VTR_VSE_POOL_GPO);
    vtr_vse_model a, b;
    CHECK_OK(vtr_vse_model_init(&a, &cfg, SB, ST, SL, &err));
    vtr_vse_init_params(&a, 1);
    const char *path = test_path("vse_other.safetensors");
    CHECK_OK(vtr_checkpoint_save(path, &a.params, NULL, NULL, &err));
    cfg.embed_size = 10;
    CHECK_OK(vtr_vse_model_init(&b, &cfg, SB, ST, SL, &err));
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(path, 0, &ck, &err));
    CHECK_FAILS(vtr_checkpoint_load_params(&ck, &b.params, 0, &err), VTR_ERR_INVALID,
                "img_enc.fc.weight");
    vtr_checkpoint_close(&ck);
    vtr_vse_model_free(&a);
    vtr_vse_model_free(&b);
}

/* ---- determinism, initialization, modes ---- */

TEST(vse_training_is_deterministic)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(4, VTR_VSE_POOL_GPO);
    small_batch s;
    make_batch(&s, 9);
    vtr_vse_model a, b;
    CHECK_OK(vtr_vse_model_init(&a, &cfg, SB, ST, SL, &err));
    CHECK_OK(vtr_vse_model_init(&b, &cfg, SB, ST, SL, &err));
    vtr_vse_init_params(&a, 77);
    vtr_vse_init_params(&b, 77);
    CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);
    train(&a, &s, 3);
    train(&b, &s, 3);
    CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);
    CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
    vtr_vse_init_params(&b, 78);
    CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) != 0);
    vtr_vse_model_free(&a);
    vtr_vse_model_free(&b);
}

TEST(vse_bigru_directions_in_parallel_match_one_after_the_other)
{
    /* 2 OpenMP threads: the BiGRU's directions run at the same time (single-threaded BLAS);
     * 1 thread: one after the other. Same values up to float rounding; BLAS's thread count
     * is restored either way. */
#ifdef _OPENMP
    vtr_error err;
    vtr_vse_config cfg = small_config(0, VTR_VSE_POOL_GPO);
    small_batch s;
    make_batch(&s, 21);
    vtr_vse_model a;
    CHECK_OK(vtr_vse_model_init(&a, &cfg, SB, ST, SL, &err));
    vtr_vse_init_params(&a, 8);
    int threads = omp_get_max_threads();
    int blas = vtr_blas_set_threads(2);
    size_t n = a.params.n_trainable;
    float *grads[2], loss[2];
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k == 0 ? 1 : 2);
        vtr_param_set_zero_grad(&a.params);
        CHECK_OK(vtr_vse_train_step(&a, &s.batch, VTR_HINGE_ALL_NEGATIVES, &loss[k], &err));
        grads[k] = malloc(sizeof(float) * n);
        memcpy(grads[k], a.params.grad, sizeof(float) * n);
    }
    omp_set_num_threads(threads);
    if (vtr_blas_threads_adjustable())
        CHECK_EQ_INT(vtr_blas_set_threads(blas), 2); /* the model restored it */
    float scale = 0.0f, diff = 0.0f;
    for (size_t i = 0; i < n; i++) {
        scale = fmaxf(scale, fabsf(grads[0][i]));
        diff = fmaxf(diff, fabsf(grads[0][i] - grads[1][i]));
    }
    CHECK_MSG(diff <= 1e-5f * scale, "gradients differ by %g (largest %g)", diff, scale);
    CHECK(fabsf(loss[0] - loss[1]) <= 1e-6f * fabsf(loss[0]));
    free(grads[0]), free(grads[1]);
    vtr_vse_model_free(&a);
#else
    test_skip("built without OpenMP");
#endif
}

/* max |x| over entry name and its mean */
static float max_abs(const vtr_vse_model *m, const char *name, double *mean)
{
    const vtr_param_entry *e = vtr_param_set_find(&m->params, name);
    CHECK_MSG(e, "no entry %s", name);
    const float *x = m->params.data + e->offset;
    float mx = 0.0f;
    double sum = 0.0;
    for (size_t i = 0; i < e->numel; i++) {
        mx = fabsf(x[i]) > mx ? fabsf(x[i]) : mx;
        sum += x[i];
    }
    *mean = sum / (double)e->numel;
    return mx;
}

TEST(vse_init_follows_the_reference)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(4, VTR_VSE_POOL_GPO);
    cfg.feature_dim = 64;
    cfg.embed_size = 32;
    cfg.vocab_size = 500;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, 2, 2, 2, &err));
    vtr_vse_init_params(&m, 3);
    static const struct {
        const char *name;
        double bound; /* the distribution's bound; the sample reaches > 90% of it */
    } uniform[] = {
        {"img_enc.fc.weight", 0.25},            /* Xavier: sqrt(6 / (64 + 32)) */
        {"img_enc.mlp.layers.0.weight", 0.125}, /* 1/sqrt(64) */
        {"img_enc.mlp.layers.1.weight", 0.5},   /* 1/sqrt(4) */
        {"txt_enc.embed.weight", 0.1},
        {"txt_enc.rnn.weight_hh_l0", 0.17677669529663687}, /* 1/sqrt(32) */
        {"txt_enc.rnn.bias_ih_l0_reverse", 0.17677669529663687},
        {"img_enc.gpool.gru.weight_ih_l0", 0.17677669529663687},
        {"txt_enc.gpool.linear.weight", 0.17677669529663687},
    };
    for (size_t i = 0; i < sizeof uniform / sizeof uniform[0]; i++) {
        double mean;
        float mx = max_abs(&m, uniform[i].name, &mean);
        CHECK_MSG(mx <= uniform[i].bound && mx > 0.9 * uniform[i].bound, "%s: max |x| %g, bound %g",
                  uniform[i].name, mx, uniform[i].bound);
        CHECK_MSG(fabs(mean) < 0.25 * uniform[i].bound, "%s: mean %g", uniform[i].name, mean);
    }
    double mean;
    float mx = max_abs(&m, "img_enc.mlp.layers.0.bias", &mean); /* 4 values: 1/sqrt(64) */
    CHECK(mx > 0.0f && mx <= 0.125f);
    CHECK(max_abs(&m, "img_enc.fc.bias", &mean) == 0.0f);
    CHECK(max_abs(&m, "img_enc.mlp.bns.0.bias", &mean) == 0.0f);
    CHECK(max_abs(&m, "img_enc.mlp.bns.0.running_mean", &mean) == 0.0f);
    CHECK(max_abs(&m, "img_enc.mlp.bns.0.weight", &mean) == 1.0f && mean == 1.0);
    CHECK(max_abs(&m, "img_enc.mlp.bns.0.running_var", &mean) == 1.0f && mean == 1.0);
    /* tensors draw from their own streams: two tensors of one shape differ */
    CHECK(memcmp(vtr_param_data(&m.params, "txt_enc.rnn.weight_hh_l0"),
                 vtr_param_data(&m.params, "txt_enc.rnn.weight_hh_l0_reverse"),
                 sizeof(float) * 96 * 32) != 0);
    vtr_vse_model_free(&m);
}

TEST(vse_batchnorm_modes)
{
    /* training mode moves the running statistics and the counter; eval mode reads them */
    vtr_error err;
    vtr_vse_config cfg = small_config(4, VTR_VSE_POOL_GPO);
    small_batch s;
    make_batch(&s, 2);
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, SB, ST, SL, &err));
    vtr_vse_init_params(&m, 5);
    float e1[SB * 8], e2[SB * 8];
    CHECK_OK(vtr_vse_encode_images(&m, e1, s.frames, s.frame_lengths, SB, ST, false, &err));
    CHECK_EQ_INT(*vtr_param_idata(&m.params, "img_enc.mlp.bns.0.num_batches_tracked"), 0);
    CHECK_OK(vtr_vse_encode_images(&m, e2, s.frames, s.frame_lengths, SB, ST, false, &err));
    CHECK(memcmp(e1, e2, sizeof e1) == 0);
    CHECK_OK(vtr_vse_encode_images(&m, e2, s.frames, s.frame_lengths, SB, ST, true, &err));
    CHECK_EQ_INT(*vtr_param_idata(&m.params, "img_enc.mlp.bns.0.num_batches_tracked"), 1);
    CHECK(memcmp(e1, e2, sizeof e1) != 0); /* batch statistics differ from (0, 1) */
    CHECK(vtr_param_data(&m.params, "img_enc.mlp.bns.0.running_mean")[0] != 0.0f);
    CHECK_OK(vtr_vse_encode_images(&m, e2, s.frames, s.frame_lengths, SB, ST, false, &err));
    CHECK(memcmp(e1, e2, sizeof e1) != 0); /* the moved running statistics */
    vtr_vse_model_free(&m);
}

/* ---- errors ---- */

TEST(vse_config_and_argument_errors)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(4, VTR_VSE_POOL_GPO);
    vtr_vse_config bad = cfg;
    bad.embed_size = 0;
    CHECK_FAILS(vtr_vse_config_check(&bad, &err), VTR_ERR_INVALID, "embed_size = 0");
    bad = cfg;
    bad.txt_pool.gpo_pe = 7;
    CHECK_FAILS(vtr_vse_config_check(&bad, &err), VTR_ERR_INVALID, "txt_pool.gpo_pe = 7 is odd");
    bad = cfg;
    bad.img_pool.kind = (vtr_vse_pooler)9;
    CHECK_FAILS(vtr_vse_config_check(&bad, &err), VTR_ERR_INVALID, "img_pool.kind");
    bad = cfg;
    bad.margin = -1.0f;
    CHECK_FAILS(vtr_vse_config_check(&bad, &err), VTR_ERR_INVALID, "margin");

    vtr_vse_pooler kind;
    CHECK_OK(vtr_vse_pooler_parse("avg", &kind, &err));
    CHECK(kind == VTR_VSE_POOL_MEAN);
    CHECK_OK(vtr_vse_pooler_parse(vtr_vse_pooler_name(VTR_VSE_POOL_GPO), &kind, &err));
    CHECK(kind == VTR_VSE_POOL_GPO);
    CHECK_FAILS(vtr_vse_pooler_parse("adpool?", &kind, &err), VTR_ERR_INVALID,
                "unknown pooler 'adpool?'");

    vtr_vse_model m;
    CHECK_FAILS(vtr_vse_model_init(&m, &bad, SB, ST, SL, &err), VTR_ERR_INVALID, "margin");
    CHECK(m.arena == NULL && m.params.count == 0);
    CHECK_FAILS(vtr_vse_model_init(&m, &cfg, 0, ST, SL, &err), VTR_ERR_INVALID, "max_batch 0");
    vtr_vse_model_free(&m); /* safe on the zeroed model */

    CHECK_OK(vtr_vse_model_init(&m, &cfg, SB, ST, SL, &err));
    vtr_vse_init_params(&m, 1);
    small_batch s;
    make_batch(&s, 1);
    float loss = -1.0f, out[SB * 8];
    vtr_vse_batch b = s.batch;
    b.B = 1;
    CHECK_FAILS(vtr_vse_train_step(&m, &b, VTR_HINGE_ALL_NEGATIVES, &loss, &err), VTR_ERR_INVALID,
                "at least 2 pairs");
    b = s.batch;
    b.B = SB + 1;
    CHECK_FAILS(vtr_vse_train_step(&m, &b, VTR_HINGE_ALL_NEGATIVES, &loss, &err), VTR_ERR_INVALID,
                "batch of 5 items outside 1..4");
    b = s.batch;
    b.L = SL + 1;
    CHECK_FAILS(vtr_vse_train_step(&m, &b, VTR_HINGE_ALL_NEGATIVES, &loss, &err), VTR_ERR_INVALID,
                "caption length 8 outside 1..7");
    s.frame_lengths[2] = 0;
    CHECK_FAILS(vtr_vse_train_step(&m, &s.batch, VTR_HINGE_ALL_NEGATIVES, &loss, &err),
                VTR_ERR_INVALID, "visual sets: item 2: length 0");
    s.frame_lengths[2] = 4;
    s.ids[1 * SL + 2] = 20;
    CHECK_FAILS(vtr_vse_train_step(&m, &s.batch, VTR_HINGE_ALL_NEGATIVES, &loss, &err),
                VTR_ERR_INVALID, "caption 1: token 2: id 20 outside 0..19");
    CHECK_FAILS(vtr_vse_encode_captions(&m, out, s.ids, s.caption_lengths, SB, SL, &err),
                VTR_ERR_INVALID, "caption 1: token 2");
    CHECK_FAILS(vtr_vse_stage_batch(&m, 0, &s.batch, &err), VTR_ERR_INVALID, "caption 1: token 2");
    s.ids[1 * SL + 2] = 5;
    CHECK_FAILS(vtr_vse_stage_batch(&m, 2, &s.batch, &err), VTR_ERR_INVALID,
                "stage slot 2 outside 0..1");
    CHECK_OK(vtr_vse_stage_batch(&m, 1, &s.batch, &err)); /* nothing to copy on the CPU */
    CHECK_EQ_INT(s.batch.staged, 0);
    b = s.batch;
    b.staged = 3;
    CHECK_FAILS(vtr_vse_train_step(&m, &b, VTR_HINGE_ALL_NEGATIVES, &loss, &err), VTR_ERR_INVALID,
                "staged = 3 outside 0..2");
    s.ids[1 * SL + 5] = -7; /* padding is not read */
    CHECK_OK(vtr_vse_encode_captions(&m, out, s.ids, s.caption_lengths, SB, SL, &err));
    CHECK(loss == -1.0f);
    CHECK_EQ_INT(*vtr_param_idata(&m.params, "img_enc.mlp.bns.0.num_batches_tracked"), 0);
    CHECK_FAILS(vtr_vse_train_step(&m, &s.batch, (vtr_hinge_negatives)5, &loss, &err),
                VTR_ERR_INVALID, "no hinge mode");
    CHECK_OK(vtr_vse_train_step(&m, &s.batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    CHECK(loss >= 0.0f);
    vtr_vse_model_free(&m);
}

/* On the GPU (tests/test_cuda_model.c runs it there): a missing GPU is one line saying what
 * to do, for set embeddings too; on the CPU the device calls change nothing. */
TEST(vse_model_on_cuda_without_a_gpu_says_what_to_do)
{
    vtr_error err;
    vtr_vse_model m;
    vtr_vse_config cfg = small_config(0, VTR_VSE_POOL_GPO);
    vtr_vse_config sets = cfg;
    sets.set = vtr_vse_set_config_default(cfg.embed_size);
    if (!vtr_cuda_available()) {
        CHECK_FAILS(vtr_vse_model_init_on(&m, &cfg, VTR_DEVICE_CUDA, SB, ST, SL, &err),
                    VTR_ERR_DEVICE, "run on the CPU (--device cpu)");
        CHECK_FAILS(vtr_vse_model_init_on(&m, &sets, VTR_DEVICE_CUDA, SB, ST, SL, &err),
                    VTR_ERR_DEVICE, "run on the CPU (--device cpu)");
        CHECK(m.arena == NULL && m.params.count == 0);
    }

    CHECK_OK(vtr_vse_model_init_on(&m, &cfg, VTR_DEVICE_CPU, SB, ST, SL, &err));
    CHECK(m.device == VTR_DEVICE_CPU && m.dev_data == NULL && m.stage == NULL);
    vtr_vse_init_params(&m, 4);
    float first = m.params.data[0];
    CHECK_OK(vtr_vse_params_to_device(&m, &err));
    m.params.grad[3] = 1.0f;
    CHECK_OK(vtr_vse_params_to_host(&m, true, &err));
    CHECK(m.params.data[0] == first && m.params.grad[3] == 1.0f);
    CHECK_OK(vtr_vse_zero_grad(&m, &err));
    CHECK(m.params.grad[3] == 0.0f);
    vtr_vse_model_free(&m);
}

TEST(vse_train_step_flops_count_the_products)
{
    /* the reference video step: fc 2048 -> 1024 over the real frames, BiGRU 300 -> 1024,
     * GPO (32, 32) on both sides; 2 pairs, lengths (3, 2) frames and (4, 1) tokens */
    vtr_error err;
    vtr_vse_config cfg = vtr_vse_config_infinity(10);
    cfg.mlp_hidden = 0;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, 2, 3, 4, &err));
    int fl[2] = {3, 2}, cl[2] = {4, 1};
    vtr_vse_batch b = {.B = 2, .T = 3, .frame_lengths = fl, .L = 4, .caption_lengths = cl};
    double fc = 2 * 2 * 5.0 * 2048 * 1024;
    /* GRUs: input projections over the 5 real positions (not the padded 6 or 8) */
    double H = 1024, rnn_dir = 2 * 5 * 300 * 3 * H * 3  /* W_ih: forward, dW, dinp */
                               + 2 * 3 * H * 3 * H * 3; /* hidden, 3 steps after the first:
                                                           forward, dh, dW_hh */
    double g = 32, gpo_gru = 2 * (2 * 5 * 32 * 3 * g * 2 + 2 * 3 * g * 3 * g * 3);
    double gpo_img = gpo_gru + 3 * 2 * 6 * g, gpo_txt = gpo_gru + 3 * 2 * 8 * g; /* scorer */
    double sim = 3 * 2 * 4 * 1024.0;
    double want = fc + 2 * rnn_dir + gpo_img + gpo_txt + sim;
    double got = vtr_vse_train_step_flops(&m, &b);
    CHECK_MSG(fabs(got - want) <= 1e-9 * want, "flops %.0f, expected %.0f", got, want);
    vtr_vse_model_free(&m);
}
