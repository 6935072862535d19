/* A run and its record (match/run_record.h): what a training run writes and records, what
 * a failed new run leaves behind (nothing), and the record of an evaluation. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/blas_kernel.h"
#include "lib/catalog.h"
#include "lib/hash.h"
#include "lib/version.h"
#include "match/run_record.h"
#include "match/trained_model.h"
#include "train_fixture.h"

static const train_fixture_spec rr_spec = {
    .n_objects = 4, .train_items = 24, .val_items = 8, .test_items = 8,
    .captions_per_item = 2, .frames = 4, .min_visible = 2, .max_visible = 4,
    .dim = 16, .amplitude = 3.0f, .noise = 0.5f, .seed = 11,
};

/* test_tmpdir()/name */
static char *rr_path(const char *name)
{
    static char slots[8][512];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, sizeof slots[0], "%s/%s", test_tmpdir(), name);
    return p;
}

/* The fixture's data (written once) and a small config for it with `extra` YAML on top;
 * *o is read from it. */
static vtr_config *rr_config(const char *extra, vtr_train_options *o)
{
    static bool written;
    const char *data = rr_path("rr_data");
    if (!written) {
        CHECK_MSG(mkdir(data, 0777) == 0, "mkdir %s", data);
        train_fixture_write(data, &rr_spec);
        written = true;
    }
    char text[2048];
    snprintf(text, sizeof text,
             "data:\n  catalog: %s/catalog.db\n  dataset: synth\n  features: %s/features\n"
             "  vocab_threshold: 1\n"
             "model:\n  feature_dim: 16\n  embed_size: 16\n  mlp_hidden: 0\n  word_dim: 8\n"
             "  gpo_pe: 8\n  gpo_hidden: 8\n"
             "train:\n  batch_size: 16\n  checkpoint_every: 0\n",
             data, data);
    vtr_error err;
    vtr_config *cfg = NULL;
    CHECK_OK(vtr_train_config_new(&cfg, &err));
    CHECK_OK(vtr_config_load_string(cfg, "base", text, strlen(text), &err));
    CHECK_OK(vtr_config_load_string(cfg, "extra", extra, strlen(extra), &err));
    CHECK_OK(vtr_train_options_from_config(cfg, o, &err));
    return cfg;
}

/* The last run recorded in the fixture's catalog (caller frees with vtr_run_free). */
static void last_run(vtr_run *run)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open_existing(rr_path("rr_data/catalog.db"), &cat, &err));
    int64_t id = 1;
    while (vtr_catalog_get_run(cat, id + 1, run, &err) == VTR_OK) {
        vtr_run_free(run);
        id++;
    }
    CHECK_OK(vtr_catalog_get_run(cat, id, run, &err));
    vtr_catalog_close(cat);
}

typedef struct rr_calls {
    int reading, data, recorded;
} rr_calls;

static void rr_on_reading(void *ctx) { ((rr_calls *)ctx)->reading++; }
static void rr_on_data(void *ctx, const vtr_train_data *d) { ((rr_calls *)ctx)->data++; }
static void rr_on_recorded(void *ctx) { ((rr_calls *)ctx)->recorded++; }

static vtr_status rr_train(const vtr_config *cfg, const vtr_train_options *o, const char *dir,
                           bool resume, int64_t max_steps, rr_calls *calls,
                           vtr_train_result *res, vtr_error *err)
{
    vtr_training_setup su = {.config = cfg, .opt = o, .dir = dir, .resume = resume,
                             .trainer = {.max_steps = max_steps, .ctx = calls},
                             .on_reading = rr_on_reading, .on_data = rr_on_data,
                             .on_recorded = rr_on_recorded};
    return vtr_run_training(&su, res, err);
}

TEST(run_record_training_writes_records_and_resumes)
{
    vtr_error err;
    vtr_train_options o;
    vtr_train_result res;
    rr_calls calls = {0};
    vtr_run run;
    vtr_config *cfg = rr_config("", &o);
    const char *dir = rr_path("rr_runs/a"); /* the parent is made too */
    CHECK_OK(rr_train(cfg, &o, dir, false, 2, &calls, &res, &err));
    CHECK(!res.finished && res.steps == 2);
    CHECK(calls.reading == 1 && calls.data == 1 && calls.recorded == 1);
    for (const char *const *name = (const char *const[]){VTR_RUN_LAST, VTR_RUN_CONFIG,
                                                         VTR_RUN_VOCAB, NULL};
         *name; name++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, *name);
        CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
    }

    /* the record: kind, config, seed, version, the data hashes, the result */
    char vocab[600], sha[VTR_SHA256_HEX_SIZE], *text = NULL;
    snprintf(vocab, sizeof vocab, "%s/%s", dir, VTR_RUN_VOCAB);
    CHECK_OK(vtr_file_sha256(vocab, sha, &err));
    CHECK_OK(vtr_config_dump_string(cfg, &text, &err));
    last_run(&run);
    CHECK_STR(run.kind, "train");
    CHECK_EQ_INT(run.status, VTR_RUN_DONE);
    CHECK_STR(run.config, text);
    CHECK_EQ_INT(run.seed, o.seed);
    CHECK_STR(run.code_version, vtr_version);
    CHECK(strstr(run.data_hashes, "\"features/rows.npy\"") && strstr(run.data_hashes, sha));
    CHECK(strstr(run.data_hashes, "\"init\"") == NULL);
    CHECK(run.result && strstr(run.result, "\"finished\":false") &&
          strstr(run.result, "\"steps\":2") && strstr(run.result, "\"resumed\":false") &&
          strstr(run.result, dir) && !strstr(run.result, "\"error\""));
    vtr_run_free(&run);

    /* the stored config reads back; a new run there is refused and leaves it as it was */
    vtr_config *stored = NULL;
    char *stored_text = NULL;
    CHECK_OK(vtr_run_dir_config(dir, &stored, &err));
    CHECK_OK(vtr_config_dump_string(stored, &stored_text, &err));
    CHECK_STR(stored_text, text);
    CHECK_FAILS(rr_train(cfg, &o, dir, false, 2, &calls, &res, &err), VTR_ERR_INVALID,
                "holds a run already: continue it with --resume");
    CHECK_EQ_INT(calls.reading, 1);
    CHECK(access(vocab, R_OK) == 0);

    /* resumed: recorded again, as resumed */
    CHECK_OK(rr_train(stored, &o, dir, true, 3, &calls, &res, &err));
    CHECK(res.steps == 3 && calls.recorded == 2);
    last_run(&run);
    CHECK(strstr(run.result, "\"resumed\":true") && strstr(run.result, "\"steps\":3"));
    vtr_run_free(&run);
    vtr_config *none = NULL;
    CHECK_FAILS(vtr_run_dir_config(rr_path("rr_runs"), &none, &err), VTR_ERR_INVALID,
                "has no last.safetensors to resume from");
    CHECK(none == NULL);
    free(text);
    free(stored_text);
    vtr_config_free(stored);
    vtr_config_free(cfg);
}

TEST(run_record_failed_new_run_leaves_nothing_behind)
{
    /* fails in training, after the directory, its files and the record were made */
    vtr_train_options o;
    vtr_config *cfg = rr_config("train:\n  batch_size: 49\n", &o);
    const char *dir = rr_path("rr_failed");
    vtr_error err;
    vtr_train_result res;
    vtr_run run;
    rr_calls calls = {0};
    CHECK_FAILS(rr_train(cfg, &o, dir, false, 0, &calls, &res, &err), VTR_ERR_INVALID,
                "fewer than one batch of 49");
    CHECK_EQ_INT(calls.recorded, 1);
    CHECK(access(dir, F_OK) != 0);
    last_run(&run);
    CHECK_STR(run.kind, "train");
    CHECK_EQ_INT(run.status, VTR_RUN_FAILED);
    CHECK(run.result && strstr(run.result, "\"finished\":false") &&
          strstr(run.result, "fewer than one batch of 49"));
    vtr_run_free(&run);

    /* a directory that held other things stays, with them; only the run's files go */
    char other[600];
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    FILE *f = fopen(other, "w");
    CHECK(f && fclose(f) == 0);
    CHECK_FAILS(rr_train(cfg, &o, dir, false, 0, &calls, &res, &err), VTR_ERR_INVALID,
                "fewer than one batch");
    CHECK(access(other, F_OK) == 0);
    snprintf(other, sizeof other, "%s/%s", dir, VTR_RUN_VOCAB);
    CHECK(access(other, F_OK) != 0);
    snprintf(other, sizeof other, "%s/%s", dir, VTR_RUN_CONFIG);
    CHECK(access(other, F_OK) != 0);
    vtr_config_free(cfg);

    /* data that cannot be read: nothing made, nothing recorded */
    int64_t before;
    last_run(&run);
    before = run.id;
    vtr_run_free(&run);
    cfg = rr_config("data:\n  features: nowhere\n", &o);
    CHECK_FAILS(rr_train(cfg, &o, rr_path("rr_nodata"), false, 0, &calls, &res, &err),
                VTR_ERR_IO, "nowhere");
    CHECK(access(rr_path("rr_nodata"), F_OK) != 0);
    last_run(&run);
    CHECK_EQ_INT(run.id, before);
    vtr_run_free(&run);
    vtr_config_free(cfg);
}

TEST(run_record_of_an_evaluation)
{
    vtr_error err;
    vtr_train_options o;
    vtr_train_result res;
    rr_calls calls = {0};
    vtr_config *cfg = rr_config("", &o);
    const char *dir = rr_path("rr_eval");
    CHECK_OK(rr_train(cfg, &o, dir, false, 1, &calls, &res, &err));
    char last[600], sha[VTR_SHA256_HEX_SIZE], *text = NULL;
    snprintf(last, sizeof last, "%s/%s", dir, VTR_RUN_LAST);

    vtr_trained_model t;
    vtr_run_record rec;
    vtr_catalog *cat = NULL;
    vtr_run run;
    CHECK_OK(vtr_trained_model_open(last, NULL, NULL, 0, NULL, &t, &err));
    const char *ckpts[] = {last, t.vocab_path};
    CHECK_OK(vtr_run_record_init_eval(&rec, &t, ckpts, 2, &err));
    CHECK_EQ_INT(rec.id, -1);
    CHECK_OK(vtr_run_record_finish(&rec, true, NULL, &err)); /* not begun: nothing */
    CHECK_OK(vtr_catalog_open_existing(t.o.catalog, &cat, &err));
    CHECK_OK(vtr_run_record_begin(&rec, cat, &err));
    json_t *result = json_pack("{s:s}", "error", "it broke");
    CHECK_OK(vtr_run_record_finish(&rec, false, result, &err));
    json_decref(result);
    CHECK_OK(vtr_catalog_get_run(cat, rec.id, &run, &err));
    CHECK_STR(run.kind, "eval");
    CHECK_EQ_INT(run.status, VTR_RUN_FAILED);
    char result_want[160]; /* the result, with the BLAS kernel the run used */
    snprintf(result_want, sizeof result_want, "{\"error\":\"it broke\",\"blas_kernel\":\"%s\"}",
             vtr_blas_kernel_name());
    CHECK_STR(run.result, result_want);
    CHECK_OK(vtr_config_dump_string(t.cfg, &text, &err));
    CHECK_STR(run.config, text);
    CHECK_OK(vtr_file_sha256(last, sha, &err));
    char want[200];
    snprintf(want, sizeof want, "\"checkpoint\":\"%s\"", sha);
    CHECK(strstr(run.data_hashes, want));
    CHECK_OK(vtr_file_sha256(t.vocab_path, sha, &err));
    snprintf(want, sizeof want, "\"checkpoint.1\":\"%s\"", sha);
    CHECK(strstr(run.data_hashes, want));
    snprintf(want, sizeof want, "\"vocab\":\"%s\"", sha);
    CHECK(strstr(run.data_hashes, want) && strstr(run.data_hashes, "\"features/meta.json\""));
    vtr_run_free(&run);
    vtr_run_record_free(&rec);

    /* a checkpoint that cannot be hashed names it */
    const char *missing[] = {last, rr_path("rr_eval/gone.safetensors")};
    CHECK_FAILS(vtr_run_record_init_eval(&rec, &t, missing, 2, &err), VTR_ERR_IO,
                "gone.safetensors");
    vtr_run_record_free(&rec);
    free(text);
    vtr_catalog_close(cat);
    vtr_trained_model_close(&t);
    vtr_config_free(cfg);
}
