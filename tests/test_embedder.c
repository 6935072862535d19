/* The embedder (index/embedder.h): a checkpoint opened for inference gives the bytes
 * vtr-eval's encoder gives for the same sets and captions, unit rows, the same bytes
 * however the input is split into calls and batches, and one-line errors naming the input. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "index/aggregator.h"
#include "index/embedder.h"
#include "index/text_search.h"
#include "lib/checkpoint.h"
#include "lib/hash.h"
#include "match/encode.h"
#include "match/eval_model.h"
#include "match/train_config.h"
#include "match/train_data.h"
#include "match/trained_model.h"
#include "match/trainer.h"
#include "train_fixture.h"

static const train_fixture_spec emb_spec = {
    .n_objects = 6, .train_items = 32, .val_items = 8, .test_items = 12,
    .captions_per_item = 2, .frames = 9, .min_visible = 3, .max_visible = 8,
    .dim = 24, .amplitude = 3.0f, .noise = 0.5f, .seed = 21,
};

static const char *emb_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/emb/%s", test_tmpdir(), name);
    return buf;
}

/* A checkpoint of a few training steps on the fixture (GPO both sides, the MLP branch with
 * BatchNorm, sets capped at 6 of their 9 rows), and vocab.json beside it; made once. */
static const char *emb_checkpoint(void)
{
    static char ckpt[600];
    if (ckpt[0])
        return ckpt;
    vtr_error err;
    char dir[400], run[400], vocab[512], text[2048], sha[VTR_SHA256_HEX_SIZE];
    emb_path("", dir, sizeof dir);
    CHECK(mkdir(dir, 0777) == 0);
    train_fixture_write(dir, &emb_spec);
    snprintf(text, sizeof text,
             "data: {catalog: %s/catalog.db, dataset: synth, features: %s/features,\n"
             "       vocab_threshold: 1, max_frames: 6}\n"
             "model: {feature_dim: 24, embed_size: 16, mlp_hidden: 8, word_dim: 8, gpo_pe: 8,\n"
             "        gpo_hidden: 8}\n"
             "train: {epochs: 1, batch_size: 16, lr: 2.0e-3, checkpoint_every: 0}\n"
             "val: {batch_size: 16}\n",
             dir, dir);
    vtr_config *cfg = NULL;
    vtr_train_options o;
    vtr_train_data d;
    vtr_train_result res;
    CHECK_OK(vtr_train_config_new(&cfg, &err));
    CHECK_OK(vtr_config_load_string(cfg, "emb", text, strlen(text), &err));
    CHECK_OK(vtr_train_options_from_config(cfg, &o, &err));
    emb_path("run", run, sizeof run);
    CHECK(mkdir(run, 0777) == 0);
    snprintf(vocab, sizeof vocab, "%s/%s", run, VTR_RUN_VOCAB);
    CHECK_OK(vtr_train_data_open(&o, NULL, &d, &err));
    CHECK_OK(vtr_vocab_save_json(d.vocab, vocab, &err));
    CHECK_OK(vtr_file_sha256(vocab, sha, &err));
    vtr_trainer_setup su = {.config = cfg, .opt = &o, .train = &d.train, .val = &d.val,
                            .vocab = d.vocab, .output_dir = run, .vocab_sha256 = sha,
                            .max_steps = 3};
    CHECK_OK(vtr_train_run(&su, &res, &err));
    CHECK(res.steps == 3);
    vtr_train_data_close(&d);
    vtr_config_free(cfg);
    snprintf(ckpt, sizeof ckpt, "%s/%s", run, VTR_RUN_LAST);
    return ckpt;
}

/* The rows of the split's items, concatenated, and their counts. */
static float *split_rows(const vtr_split *s, int64_t *counts)
{
    vtr_error err;
    int64_t F = vtr_feature_store_reader_dim(s->store), total = 0;
    for (int i = 0; i < s->n_items; i++) {
        vtr_tensor t;
        CHECK_OK(vtr_feature_store_reader_item(s->store, s->store_index[i], &t, &err));
        counts[i] = t.shape[0];
        total += t.shape[0];
    }
    float *rows = malloc((size_t)(total * F) * sizeof *rows), *w = rows;
    CHECK(rows != NULL);
    for (int i = 0; i < s->n_items; i++) {
        vtr_tensor t;
        CHECK_OK(vtr_feature_store_reader_item(s->store, s->store_index[i], &t, &err));
        CHECK(t.dtype == VTR_F32);
        memcpy(w, t.data, (size_t)(counts[i] * F) * sizeof *w);
        w += counts[i] * F;
    }
    return rows;
}

static double row_norm(const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s);
}

/* The split's item and caption embeddings as vtr-eval computes them with batches of b. */
static void encode_split(const char *ckpt, int b, vtr_eval_model *m, float **items, float **caps)
{
    vtr_error err;
    vtr_batcher bt;
    vtr_eval_source src = {.split = "test", .batch = b};
    CHECK_OK(vtr_eval_model_open(ckpt, &src, m, &err));
    CHECK_OK(vtr_batcher_init(&bt, &m->split, src.batch, &err));
    int64_t E = m->model.vse.cfg.embed_size;
    *items = malloc((size_t)(m->split.n_items * E) * sizeof **items);
    *caps = malloc((size_t)(m->split.n_caps * E) * sizeof **caps);
    CHECK(*items && *caps);
    CHECK_OK(vtr_encode_split(&m->model.vse, &bt, NULL, *items, *caps, NULL, NULL, &err));
    vtr_batcher_free(&bt);
}

static float max_abs_diff(const float *a, const float *b, int64_t n)
{
    float d = 0;
    for (int64_t i = 0; i < n; i++)
        d = fabsf(a[i] - b[i]) > d ? fabsf(a[i] - b[i]) : d;
    return d;
}

TEST(embedder_gives_the_embeddings_of_the_evaluation_encoder)
{
    vtr_error err;
    const char *ckpt = emb_checkpoint();
    /* vtr-eval's encoder with batches of one and of 32: sets (encoded alone) and single
     * texts are the first's bytes, a call of the split's 24 captions (one batch) the
     * second's; the two agree up to rounding (bit for bit where the BLAS rounds a row alike
     * in any batch) */
    vtr_eval_model m, m32;
    float *items, *caps, *items32, *caps32;
    encode_split(ckpt, 1, &m, &items, &caps);
    encode_split(ckpt, 32, &m32, &items32, &caps32);
    const vtr_split *s = &m.split;
    int64_t E = m.model.vse.cfg.embed_size;
    CHECK(s->n_caps == 24);
    CHECK(max_abs_diff(items, items32, s->n_items * E) < 1e-5f);
    CHECK(max_abs_diff(caps, caps32, s->n_caps * E) < 1e-5f);
    vtr_eval_model_close(&m32);
    free(items32);

    vtr_embedder *e = NULL;
    CHECK_OK(vtr_embedder_open(ckpt, NULL, 0, &e, &err));
    CHECK_EQ_INT(vtr_embedder_dim(e), 16);
    CHECK_EQ_INT(vtr_embedder_feature_dim(e), 24);
    CHECK_EQ_INT(vtr_embedder_max_frames(e), 6);
    char sha[VTR_SHA256_HEX_SIZE];
    CHECK_OK(vtr_file_sha256(ckpt, sha, &err));
    CHECK_STR(vtr_embedder_model_id(e), sha);
    CHECK_STR(vtr_embedder_checkpoint(e), ckpt);

    /* sets: all in one call (the rows are 9 per item, capped at 6 as in training) */
    int64_t *counts = malloc((size_t)s->n_items * sizeof *counts);
    float *rows = split_rows(s, counts);
    CHECK_EQ_INT(counts[0], 9);
    float *got = malloc((size_t)((s->n_items + 2 * s->n_caps) * E) * sizeof *got);
    CHECK_OK(vtr_embedder_embed_sets(e, s->n_items, counts, rows, got, &err));
    CHECK(memcmp(got, items, (size_t)(s->n_items * E) * sizeof *got) == 0);
    for (int i = 0; i < s->n_items; i++)
        CHECK_MSG(fabs(row_norm(got + i * E, E) - 1.0) < 1e-5, "item %d", i);

    /* one call per set, in reverse order: the same bytes */
    const float *r = rows;
    int64_t *starts = malloc((size_t)s->n_items * sizeof *starts);
    for (int i = 0; i < s->n_items; i++) {
        starts[i] = r - rows;
        r += counts[i] * 24;
    }
    for (int i = s->n_items - 1; i >= 0; i--) {
        float one[16];
        CHECK_OK(vtr_embedder_embed_sets(e, 1, &counts[i], rows + starts[i], one, &err));
        CHECK_MSG(memcmp(one, items + i * E, sizeof one) == 0, "item %d alone", i);
    }

    /* captions: in one call (one batch), again (the same bytes), then one at a time */
    CHECK_OK(vtr_embedder_embed_texts(e, s->n_caps, (const char *const *)s->texts, NULL, got,
                                      NULL, &err));
    CHECK(memcmp(got, caps32, (size_t)(s->n_caps * E) * sizeof *got) == 0);
    CHECK_OK(vtr_embedder_embed_texts(e, s->n_caps, (const char *const *)s->texts, NULL,
                                      got + s->n_caps * E, NULL, &err));
    CHECK(memcmp(got, got + s->n_caps * E, (size_t)(s->n_caps * E) * sizeof *got) == 0);
    free(caps32);
    for (int j = 0; j < s->n_caps; j++) {
        float one[16];
        CHECK_MSG(fabs(row_norm(got + j * E, E) - 1.0) < 1e-5, "caption %d", j);
        CHECK_OK(vtr_embedder_embed_texts(e, 1, (const char *const *)&s->texts[j], NULL, one,
                                          NULL, &err));
        CHECK_MSG(memcmp(one, caps + j * E, sizeof one) == 0, "caption %d alone", j);
    }

    /* a query of unknown words is <start> <unk> ... <end>: two unknown words alike */
    const char *unknown[3] = {"xyzzy", "plugh", ""};
    float u[3][16];
    for (int k = 0; k < 3; k++) /* one by one: rows of one batch may round apart */
        CHECK_OK(vtr_embedder_embed_texts(e, 1, &unknown[k], NULL, u[k], NULL, &err));
    CHECK(memcmp(u[0], u[1], sizeof u[0]) == 0);
    CHECK(memcmp(u[0], u[2], sizeof u[0]) != 0);
    CHECK(fabs(row_norm(u[0], 16) - 1.0) < 1e-5 && fabs(row_norm(u[2], 16) - 1.0) < 1e-5);

    /* 0 inputs: nothing */
    CHECK_OK(vtr_embedder_embed_sets(e, 0, counts, rows, got, &err));
    CHECK_OK(vtr_embedder_embed_texts(e, 0, unknown, NULL, got, NULL, &err));

    vtr_embedder_close(e);
    free(starts);
    free(got);
    free(rows);
    free(counts);
    free(items);
    free(caps);
    vtr_eval_model_close(&m);
}

/* A copy of the checkpoint's parameters under a config without the row cap, so that sets
 * of any length reach the model. */
static const char *uncapped_checkpoint(const char *ckpt)
{
    static char out[600];
    vtr_error err;
    vtr_trained_model t;
    vtr_run_model m;
    char *cfg_text = NULL, dir[400], vocab[512];
    const char *sets[] = {"data.max_frames=0"};
    CHECK_OK(vtr_trained_model_open(ckpt, NULL, sets, 1, NULL, &t, &err));
    CHECK_OK(vtr_trained_model_build_run(&t, VTR_DEVICE_CPU, 1, 1, 1, &m, &err));
    CHECK_OK(vtr_config_dump_string(t.cfg, &cfg_text, &err));
    emb_path("uncapped", dir, sizeof dir);
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(vocab, sizeof vocab, "%s/%s", dir, VTR_RUN_VOCAB);
    CHECK_OK(vtr_vocab_save_json(t.vocab, vocab, &err));
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    vtr_checkpoint_state state = {.config = cfg_text};
    CHECK_OK(vtr_checkpoint_save(out, vtr_run_model_params(&m), NULL, &state, &err));
    free(cfg_text);
    vtr_run_model_free(&m);
    vtr_trained_model_close(&t);
    return out;
}

/* A checkpoint whose stored config disagrees with its tensors (an embed_size of 1048576) is
 * refused naming the tensor, before the config sizes anything ("out of memory for
 * 120231123184 floats" before). */
TEST(trained_model_checks_the_config_against_the_tensors_first)
{
    vtr_error err;
    char dir[400], path[600], vocab[512], *cfg_text = NULL;
    vtr_trained_model t;
    vtr_run_model m;
    CHECK_OK(vtr_trained_model_open(emb_checkpoint(), NULL, NULL, 0, NULL, &t, &err));
    CHECK_OK(vtr_trained_model_build_run(&t, VTR_DEVICE_CPU, 1, 1, 1, &m, &err));
    CHECK_OK(vtr_config_set(t.cfg, "model.embed_size=1048576", &err) == VTR_OK
                 ? vtr_config_dump_string(t.cfg, &cfg_text, &err)
                 : VTR_ERR_INVALID);
    emb_path("mismatch", dir, sizeof dir);
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(vocab, sizeof vocab, "%s/%s", dir, VTR_RUN_VOCAB);
    CHECK_OK(vtr_vocab_save_json(t.vocab, vocab, &err));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    vtr_checkpoint_state state = {.config = cfg_text};
    CHECK_OK(vtr_checkpoint_save(path, vtr_run_model_params(&m), NULL, &state, &err));
    free(cfg_text);
    vtr_run_model_free(&m);
    vtr_trained_model_close(&t);
    vtr_trained_model t2;
    vtr_status st = vtr_trained_model_open(path, NULL, NULL, 0, NULL, &t2, &err);
    if (st == VTR_OK) {
        st = vtr_trained_model_build_run(&t2, VTR_DEVICE_CPU, 1, 1, 1, &m, &err);
        vtr_trained_model_close(&t2);
    }
    CHECK_MSG(st == VTR_ERR_INVALID, "%s", err.msg);
    CHECK_MSG(strstr(err.msg, "img_enc.fc.weight") && strstr(err.msg, "config") &&
                  !strstr(err.msg, "memory"),
              "%s", err.msg);
}

TEST(embedder_gives_long_and_short_sets_the_same_bytes_alone_or_together)
{
    vtr_error err;
    vtr_embedder *e = NULL;
    CHECK_OK(vtr_embedder_open(uncapped_checkpoint(emb_checkpoint()), NULL, 1, &e, &err));
    CHECK_EQ_INT(vtr_embedder_max_frames(e), 0);
    /* 40 sets: short ones around two long ones (the model grows for them) */
    enum { N = 40, F = 24, E = 16 };
    int64_t counts[N], total = 0;
    for (int i = 0; i < N; i++) {
        counts[i] = i == 7 ? 5000 : i == 30 ? 4500 : 1 + (i * 7) % 13;
        total += counts[i];
    }
    float *rows = malloc((size_t)(total * F) * sizeof *rows);
    uint64_t x = 88172645463325252ull;
    for (int64_t k = 0; k < total * F; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        rows[k] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    static float all[N][E], one[E];
    CHECK_OK(vtr_embedder_embed_sets(e, N, counts, rows, &all[0][0], &err));
    const float *r = rows;
    for (int i = 0; i < N; i++) {
        CHECK_OK(vtr_embedder_embed_sets(e, 1, &counts[i], r, one, &err));
        CHECK_MSG(memcmp(one, all[i], sizeof one) == 0, "set %d (%lld rows)", i,
                  (long long)counts[i]);
        CHECK(fabs(row_norm(one, E) - 1.0) < 1e-5);
        r += counts[i] * F;
    }
    /* a set with more rows than another differs (no silent cap) */
    CHECK(memcmp(all[7], all[30], sizeof all[7]) != 0);
    free(rows);
    vtr_embedder_close(e);
}

TEST(embedder_errors_name_the_input)
{
    vtr_error err;
    const char *ckpt = emb_checkpoint();
    vtr_embedder *e = NULL;
    CHECK_FAILS(vtr_embedder_open("/nonexistent/x.safetensors", NULL, 0, &e, &err), VTR_ERR_IO,
                "/nonexistent/x.safetensors");
    CHECK(e == NULL);
    CHECK_FAILS(vtr_embedder_open(ckpt, "/nonexistent/vocab.json", 0, &e, &err), VTR_ERR_IO,
                "vocab.json");
    char other[512];
    emb_path("other_vocab.json", other, sizeof other);
    CHECK_EQ_INT(test_run("sed 's/\"idx\": *\\([0-9]*\\)/\"idx\": \\1 /' '%s/emb/run/vocab.json' "
                          "> '%s'", test_tmpdir(), other), 0);
    CHECK_FAILS(vtr_embedder_open(ckpt, other, 0, &e, &err), VTR_ERR_INVALID,
                "is not the vocabulary it was trained with");
    CHECK_FAILS(vtr_embedder_open(ckpt, NULL, -1, &e, &err), VTR_ERR_INVALID, "threads");

    CHECK_OK(vtr_embedder_open(ckpt, NULL, 0, &e, &err));
    float rows[3 * 24] = {0}, out[3 * 16];
    int64_t counts[3] = {1, 0, 2};
    CHECK_FAILS(vtr_embedder_embed_sets(e, 3, counts, rows, out, &err), VTR_ERR_INVALID,
                "set 1: 0 rows");
    counts[1] = 1;
    rows[2 * 24 + 5] = NAN;
    CHECK_FAILS(vtr_embedder_embed_sets(e, 3, counts, rows, out, &err), VTR_ERR_INVALID,
                "set 2: row 0 has a non-finite value");
    const char *bad[2] = {"a cat", "\xff\xfe"};
    CHECK_FAILS(vtr_embedder_embed_texts(e, 2, bad, NULL, out, NULL, &err), VTR_ERR_FORMAT,
                "text 1");

    /* check_set: what a program checks per item */
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {3, 24}, .data = rows};
    CHECK_FAILS(vtr_embedder_check_set(e, &t, &err), VTR_ERR_INVALID,
                "row 2 has a non-finite value");
    rows[2 * 24 + 5] = 1.0f;
    CHECK_OK(vtr_embedder_check_set(e, &t, &err));
    t.ndim = 1;
    t.shape[0] = 24;
    CHECK_OK(vtr_embedder_check_set(e, &t, &err));
    t.shape[0] = 23;
    CHECK_FAILS(vtr_embedder_check_set(e, &t, &err), VTR_ERR_INVALID,
                "23 columns; the model takes 24");
    t.ndim = 2;
    t.shape[0] = 0;
    t.shape[1] = 24;
    CHECK_FAILS(vtr_embedder_check_set(e, &t, &err), VTR_ERR_INVALID, "no rows");
    t.dtype = VTR_I64;
    CHECK_FAILS(vtr_embedder_check_set(e, &t, &err), VTR_ERR_INVALID, "float32 or float16");
    vtr_embedder_close(e);
}

/* ---- the aggregator (index/aggregator.h) ---------------------------------------- */

typedef struct collected {
    int n;
    char keys[600][16];
    float emb[600][16];
    int fail_at; /* emit fails at this item (-1: never) */
} collected;

static vtr_status collect(void *ctx, const char *key, json_t *meta, const float *embedding,
                          vtr_error *err)
{
    collected *c = ctx;
    if (c->n == c->fail_at)
        return vtr_fail(err, VTR_ERR_IO, "output broke at %s", key);
    CHECK(json_is_object(meta));
    snprintf(c->keys[c->n], sizeof c->keys[0], "%s", key);
    memcpy(c->emb[c->n], embedding, sizeof c->emb[0]);
    c->n++;
    return VTR_OK;
}

TEST(aggregator_batches_in_order_and_refuses_bad_items_alone)
{
    vtr_error err;
    vtr_embedder *e = NULL;
    CHECK_OK(vtr_embedder_open(emb_checkpoint(), NULL, 0, &e, &err));
    static collected c;
    c.n = 0;
    c.fail_at = -1;
    vtr_aggregator *a = NULL;
    CHECK_OK(vtr_aggregator_new(e, collect, &c, &a, &err));
    /* 520 sets (three batches of 256 items), float16 every third, a bad one, then texts */
    enum { N = 520 };
    static float rows[N][3][24];
    static uint16_t half[3 * 24];
    static float want[N][16];
    int64_t counts[N];
    for (int i = 0; i < N; i++) {
        counts[i] = 1 + i % 3;
        for (int r = 0; r < 3; r++)
            for (int d = 0; d < 24; d++)
                rows[i][r][d] = vtr_half_to_float(vtr_float_to_half(
                    (float)sin(0.37 * i + 1.3 * r + 0.11 * d)));
    }
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%d", i);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {counts[i], 24},
                        .data = rows[i]};
        if (i % 3 == 0) {
            for (int k = 0; k < (int)counts[i] * 24; k++)
                half[k] = vtr_float_to_half(rows[i][k / 24][k % 24]);
            t.dtype = VTR_F16;
            t.data = half;
        }
        CHECK_OK(vtr_aggregator_add_set(a, key, NULL, &t, &err));
        CHECK_OK(vtr_embedder_embed_sets(e, 1, &counts[i], rows[i][0], want[i], &err));
        if (i == 100) {
            vtr_tensor bad = {.dtype = VTR_F32, .ndim = 2, .shape = {1, 7}, .data = rows[0]};
            CHECK_FAILS(vtr_aggregator_add_set(a, "bad", NULL, &bad, &err), VTR_ERR_INVALID,
                        "7 columns");
        }
    }
    CHECK_EQ_INT(c.n, 512); /* two full batches of 256 emitted while adding */
    CHECK_OK(vtr_aggregator_add_text(a, "t0", NULL, "a video of a cat", &err));
    CHECK_EQ_INT(c.n, N); /* a text after sets flushes the sets */
    CHECK_FAILS(vtr_aggregator_add_text(a, "t1", NULL, "\xc3", &err), VTR_ERR_FORMAT, "UTF-8");
    CHECK_OK(vtr_aggregator_flush(a, &err));
    CHECK_EQ_INT(c.n, N + 1);
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%d", i);
        CHECK_STR(c.keys[i], key);
        CHECK_MSG(memcmp(c.emb[i], want[i], sizeof want[i]) == 0, "set %d", i);
    }
    CHECK_STR(c.keys[N], "t0");
    float cat[16];
    const char *text = "a video of a cat";
    CHECK_OK(vtr_embedder_embed_texts(e, 1, &text, NULL, cat, NULL, &err));
    CHECK(memcmp(c.emb[N], cat, sizeof cat) == 0);

    /* an emit failure stops it */
    c.fail_at = c.n + 1;
    CHECK_OK(vtr_aggregator_add_text(a, "u0", NULL, "one", &err));
    CHECK_OK(vtr_aggregator_add_text(a, "u1", NULL, "two", &err));
    CHECK_FAILS(vtr_aggregator_flush(a, &err), VTR_ERR_IO, "output broke at u1");
    CHECK_FAILS(vtr_aggregator_add_text(a, "u2", NULL, "three", &err), VTR_ERR_INVALID,
                "stopped");
    vtr_aggregator_free(a);
    vtr_embedder_close(e);
}

TEST(index_model_ref_reads_what_index_writers_record)
{
    vtr_error err;
    vtr_index_model_ref r;
    const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    CHECK_OK(vtr_index_model_ref_parse(id, &r, &err));
    CHECK_STR(r.model_id, id);
    CHECK(r.checkpoint == NULL);
    vtr_index_model_ref_free(&r);
    /* vtr-index's text: more keys than these */
    char text[512];
    snprintf(text, sizeof text, "{\"format\": \"vtr-archive-index\", \"model_id\": \"%s\", "
             "\"checkpoint\": \"/runs/a/best.safetensors\", \"backbone\": {\"arch\": "
             "\"resnet18\"}, \"frames\": 8}", id);
    CHECK_OK(vtr_index_model_ref_parse(text, &r, &err));
    CHECK_STR(r.model_id, id);
    CHECK_STR(r.checkpoint, "/runs/a/best.safetensors");
    vtr_index_model_ref_free(&r);
    char *own = vtr_index_model_text("vtr-aggregate-index", id, "/x.safetensors");
    CHECK(own != NULL);
    CHECK_OK(vtr_index_model_ref_parse(own, &r, &err));
    CHECK_STR(r.checkpoint, "/x.safetensors");
    vtr_index_model_ref_free(&r);
    free(own);
    CHECK_FAILS(vtr_index_model_ref_parse("", &r, &err), VTR_ERR_FORMAT, "no model id");
    CHECK_FAILS(vtr_index_model_ref_parse("{\"model_id\": \"abc\"}", &r, &err), VTR_ERR_FORMAT,
                "no model id");
    CHECK_FAILS(vtr_index_model_ref_parse("resnet", &r, &err), VTR_ERR_FORMAT, "no model id");
}

/* The searcher and the approximate index (text_search.h, approx_index.h): used from
 * approx_min_rows live rows on (VTR_APPROX_AUTO) with the exact search's results where it
 * proposes every row; a stale one (a compaction since) not used, with the reason in
 * approx_note, and refused with VTR_APPROX_ALWAYS; none at all refused with ALWAYS. */
TEST(text_searcher_approximate_index)
{
    vtr_error err;
    const char *ckpt = emb_checkpoint();
    vtr_embedder *e;
    CHECK_OK(vtr_embedder_open(ckpt, NULL, 0, &e, &err));
    char dir[400];
    emb_path("approx-index", dir, sizeof dir);
    CHECK_EQ_INT(vtr_embedder_dim(e), 16);
    char *model = vtr_index_model_text("test", vtr_embedder_model_id(e), ckpt);
    vtr_embedding_index_options io = {.dim = vtr_embedder_dim(e), .model = model};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(dir, &io, &w, &err));
    enum { N = 300 };
    float x[16];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        for (int d = 0; d < 16; d++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x[d] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 23);
        }
        char key[32];
        snprintf(key, sizeof key, "item%d", i);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {16}, .data = x};
        CHECK_OK(vtr_embedding_index_writer_add(w, key, &t, &err));
    }
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    CHECK_OK(vtr_embedding_index_writer_remove(w, "item7", &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));

    vtr_text_searcher_options o = {.index = dir, .approx = VTR_APPROX_ALWAYS};
    vtr_text_searcher ts;
    CHECK_FAILS(vtr_text_searcher_open(&o, &ts, &err), VTR_ERR_NOT_FOUND, "vtr-approx");
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_OK(vtr_approx_index_build(ix, dir, VTR_ANN_HNSW, &err));
    vtr_embedding_index_close(ix);

    /* below the threshold: exact; at it: the approximate index, with the same results
     * (HNSW over 299 rows finds each query's 5 best) and scores */
    const char *q[2] = {"a video of a cat", "the dog appears"};
    vtr_search_result exact[10], approx[10];
    int64_t fe[2], fa[2];
    o.approx = VTR_APPROX_AUTO;
    CHECK_OK(vtr_text_searcher_open(&o, &ts, &err));
    CHECK(ts.approx == NULL && ts.approx_note[0] == 0);
    CHECK_OK(vtr_text_search(ts.e, ts.ix, ts.approx, NULL, NULL, -1, 2, q, NULL, 5, 0, exact, fe, NULL,
                             &err));
    vtr_text_searcher_close(&ts);
    o.approx_min_rows = N - 1;
    CHECK_OK(vtr_text_searcher_open(&o, &ts, &err));
    CHECK(ts.approx != NULL);
    CHECK_OK(vtr_text_search(ts.e, ts.ix, ts.approx, NULL, NULL, -1, 2, q, NULL, 5, 0, approx, fa, NULL,
                             &err));
    for (int i = 0; i < 10; i++) {
        CHECK_STR(approx[i].key, exact[i].key);
        CHECK(memcmp(&approx[i].score, &exact[i].score, sizeof(float)) == 0);
    }
    CHECK(fe[0] == 5 && fa[0] == 5 && fa[1] == 5);
    vtr_search_results_free(exact, 10);
    vtr_search_results_free(approx, 10);
    vtr_text_searcher_close(&ts);

    /* a compaction renumbers the rows: not used, and said why, by a new searcher and by a
     * long-lived one moved to the new snapshot (vtr-serve); ALWAYS refuses */
    vtr_text_searcher held;
    CHECK_OK(vtr_text_searcher_open(&o, &held, &err));
    CHECK(held.approx != NULL);
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err));
    CHECK_OK(vtr_text_searcher_open(&o, &ts, &err));
    CHECK(ts.approx == NULL);
    CHECK_MSG(strstr(ts.approx_note, "renumbered its rows since (a compaction") &&
                  strstr(ts.approx_note, "searching exactly"),
              "approx_note: %s", ts.approx_note);
    vtr_text_searcher_close(&ts);
    vtr_embedding_index_close(held.ix);
    CHECK_OK(vtr_embedding_index_open(dir, &held.ix, &err));
    CHECK_OK(vtr_text_searcher_reopen_approx(&held, dir, &err));
    CHECK(held.approx == NULL && strstr(held.approx_note, "a compaction"));
    o.approx = VTR_APPROX_ALWAYS;
    CHECK_FAILS(vtr_text_searcher_open(&o, &ts, &err), VTR_ERR_INVALID, "update it (vtr-approx)");
    /* the update builds it again for the new rows */
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    vtr_approx_update what;
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_REBUILT);
    vtr_embedding_index_close(ix);
    CHECK_OK(vtr_text_searcher_open(&o, &ts, &err));
    CHECK(ts.approx != NULL);
    vtr_text_searcher_close(&ts);
    CHECK_OK(vtr_text_searcher_reopen_approx(&held, dir, &err));
    CHECK(held.approx != NULL && held.approx_note[0] == 0);
    vtr_text_searcher_close(&held);
    vtr_embedding_index_writer_close(w);
    vtr_embedder_close(e);
    free(model);
}
