/* A run and its record in the catalog (run_record.h). */
#define _POSIX_C_SOURCE 200809L
#include "run_record.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/blas_kernel.h"
#include "lib/checkpoint.h"
#include "lib/file.h"
#include "lib/hash.h"
#include "lib/json.h"
#include "lib/version.h"

/* ---- the catalog record ----------------------------------------------------------- */

vtr_status vtr_run_record_init(vtr_run_record *rec, const char *kind, const vtr_config *cfg,
                               int64_t seed, const char *features, const char *const *files,
                               vtr_error *err)
{
    char *config = NULL, *hashes = NULL;
    *rec = (vtr_run_record){.run = {.kind = kind, .seed = seed, .code_version = vtr_version},
                           .id = -1};
    vtr_status st = vtr_config_dump_string(cfg, &config, err);
    if (st == VTR_OK)
        st = vtr_train_data_hashes(features, files, &hashes, err);
    rec->run.config = config;
    rec->run.data_hashes = hashes;
    return st;
}

vtr_status vtr_run_record_init_eval(vtr_run_record *rec, const vtr_trained_model *t,
                                    const char *const *ckpts, int n_ckpts, vtr_error *err)
{
    /* {"vocab", path, "checkpoint", ckpts[0], "checkpoint.1", ckpts[1], ..., NULL} */
    const char **files = calloc(2 * (size_t)n_ckpts + 3, sizeof *files);
    char (*keys)[32] = calloc((size_t)n_ckpts, sizeof *keys);
    vtr_status st;
    if (!files || !keys) {
        *rec = (vtr_run_record){.id = -1};
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    files[0] = "vocab";
    files[1] = t->vocab_path;
    for (int i = 0; i < n_ckpts; i++) {
        if (i == 0)
            snprintf(keys[i], sizeof keys[i], "checkpoint");
        else
            snprintf(keys[i], sizeof keys[i], "checkpoint.%d", i);
        files[2 + 2 * i] = keys[i];
        files[3 + 2 * i] = ckpts[i];
    }
    st = vtr_run_record_init(rec, "eval", t->cfg, t->o.seed, t->o.features, files, err);
end:
    free(files);
    free(keys);
    return st;
}

vtr_status vtr_run_record_begin(vtr_run_record *rec, vtr_catalog *cat, vtr_error *err)
{
    vtr_status st = vtr_catalog_begin_run(cat, &rec->run, &rec->id, err);
    if (st == VTR_OK)
        rec->catalog = cat;
    return st;
}

vtr_status vtr_run_record_finish(vtr_run_record *rec, bool done, const json_t *result,
                                 vtr_error *err)
{
    if (!rec->catalog)
        return VTR_OK;
    /* an object result also records the BLAS kernel the run used */
    json_t *with = json_is_object(result) ? json_copy((json_t *)result) : NULL;
    if (with)
        json_object_set_new(with, "blas_kernel", json_string(vtr_blas_kernel_name()));
    char *text = result ? json_dumps(with ? with : result, VTR_JSON_FLAGS) : NULL;
    json_decref(with);
    vtr_status st = result && !text
                        ? vtr_fail(err, VTR_ERR_NOMEM, "out of memory")
                        : vtr_catalog_finish_run(rec->catalog, rec->id,
                                                 done ? VTR_RUN_DONE : VTR_RUN_FAILED, text, err);
    free(text);
    return st;
}

void vtr_run_record_free(vtr_run_record *rec)
{
    free((char *)rec->run.config);
    free((char *)rec->run.data_hashes);
    *rec = (vtr_run_record){.id = -1};
}

/* ---- a training run --------------------------------------------------------------- */

/* VTR_OK when the run directory has its last checkpoint to resume from; else an error
 * that says why not. */
static vtr_status check_resumable(const char *dir, const char *last, vtr_error *err)
{
    if (access(last, F_OK) == 0)
        return VTR_OK;
    if (errno != ENOENT)
        return vtr_fail_errno(err, "%s", last);
    return vtr_fail(err, VTR_ERR_INVALID, "%s has no %s to resume from: the run stopped before "
                    "its first checkpoint (or this is not a run directory); start it again "
                    "without --resume", dir, VTR_RUN_LAST);
}

vtr_status vtr_run_dir_config(const char *dir, vtr_config **cfg, vtr_error *err)
{
    vtr_checkpoint ck = {0};
    char *last = vtr_path_join(dir, VTR_RUN_LAST);
    vtr_status st;
    *cfg = NULL;
    if (!last)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    st = check_resumable(dir, last, err);
    if (st == VTR_OK)
        st = vtr_checkpoint_open(last, 0, &ck, err);
    free(last);
    if (st != VTR_OK)
        return st;
    const char *text = vtr_checkpoint_meta(&ck, "config");
    if (!text)
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no config in the checkpoint", ck.path);
    else
        st = vtr_train_config_from_string(ck.path, text, cfg, err);
    vtr_checkpoint_close(&ck);
    return st;
}

/* The paths of a run directory's files. */
typedef struct run_paths {
    char *last, *vocab, *config;
} run_paths;

static vtr_status run_paths_init(run_paths *p, const char *dir, vtr_error *err)
{
    p->last = vtr_path_join(dir, VTR_RUN_LAST);
    p->vocab = vtr_path_join(dir, VTR_RUN_VOCAB);
    p->config = vtr_path_join(dir, VTR_RUN_CONFIG);
    if (!p->last || !p->vocab || !p->config)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

static void run_paths_free(run_paths *p)
{
    free(p->last);
    free(p->vocab);
    free(p->config);
}

/* config.yaml: the resolved config, written atomically. */
static vtr_status write_config(const char *path, const vtr_config *cfg, vtr_error *err)
{
    char *text = NULL;
    vtr_atomic_file f;
    vtr_status st = vtr_config_dump_string(cfg, &text, err);
    if (st != VTR_OK || (st = vtr_atomic_open(&f, path, err)) != VTR_OK)
        goto end;
    if ((st = vtr_write_all(f.fp, text, strlen(text), path, err)) != VTR_OK)
        vtr_atomic_abort(&f);
    else
        st = vtr_atomic_commit(&f, err);
end:
    free(text);
    return st;
}

/* A new run that failed before saving its state (last.safetensors) leaves nothing to
 * resume: its files go, a best.safetensors saved before the failure too (without
 * vocab.json beside it no program could use it), and the directory with them when nothing
 * else is in it. So a run directory is either usable or gone. */
static void remove_unstarted_run(const char *dir, const run_paths *p)
{
    if (access(p->last, F_OK) == 0)
        return;
    char *metrics = vtr_path_join(dir, VTR_RUN_METRICS);
    char *best = vtr_path_join(dir, VTR_RUN_BEST);
    unlink(p->config);
    unlink(p->vocab);
    if (metrics)
        unlink(metrics);
    if (best)
        unlink(best);
    free(metrics);
    free(best);
    rmdir(dir);
}

/* The result a training run records. */
static json_t *training_result(const vtr_training_setup *su, vtr_status st,
                               const vtr_train_result *res, const vtr_error *err)
{
    json_t *result = json_pack(
        "{s:b, s:I, s:i, s:I, s:f, s:i, s:s, s:b, s:i}", "finished", st == VTR_OK && res->finished,
        "steps", (json_int_t)res->steps, "epoch", res->epoch, "iteration",
        (json_int_t)res->iteration, "best_rsum", res->best_rsum, "best_epoch", res->best_epoch + 1,
        "output", su->dir, "resumed", su->resume, "threads", omp_get_max_threads());
    if (result) {
        json_object_set_new(result, "ranks",
                            json_integer(su->trainer.dist ? su->trainer.dist->size : 1));
        /* what the step's products ran in: a bfloat16 config on a CPU without it trains
         * float32 (vtr-train says so) */
        json_object_set_new(result, "precision",
                            json_string(vtr_precision_name(su->opt->precision)));
        char device[32] = "cpu";
        if (su->opt->device == VTR_DEVICE_CUDA)
            snprintf(device, sizeof device, "cuda:%d", su->opt->device_index);
        json_object_set_new(result, "device", json_string(device));
    }
    if (result && st != VTR_OK)
        json_object_set_new(result, "error", json_string(err->msg));
    return result;
}

/* The ranks' checks before a data-parallel run: the same code and config everywhere, and
 * a run that divides among them. */
static vtr_status check_ranks(vtr_dist *d, const vtr_config *cfg, const vtr_train_options *o,
                              vtr_error *err)
{
    char *text = NULL;
    vtr_status st = vtr_config_dump_string(cfg, &text, err);
    st = vtr_dist_agree(d, st, err);
    if (st == VTR_OK)
        st = vtr_dist_check_same(d, "vtr version", vtr_version, strlen(vtr_version), err);
    if (st == VTR_OK)
        st = vtr_dist_check_same(d, "config", text, strlen(text), err);
    if (st == VTR_OK) /* the same config on every rank: every rank's verdict */
        st = vtr_dist_fail_alike(d, vtr_train_check_ranks(o, d->size, err));
    free(text);
    return st;
}

vtr_status vtr_run_training(const vtr_training_setup *su, vtr_train_result *res,
                            vtr_error *err)
{
    const vtr_train_options *o = su->opt;
    void *ctx = su->trainer.ctx;
    vtr_dist solo = {.size = 1}, *d = su->trainer.dist ? su->trainer.dist : &solo;
    bool writer = d->rank == 0; /* rank 0 writes the run directory and the record */
    vtr_train_data data = {0};
    vtr_run_record rec = {.id = -1};
    run_paths p = {0};
    char vocab_sha[VTR_SHA256_HEX_SIZE] = "";
    bool made_files = false; /* this run made the run directory's files */
    memset(res, 0, sizeof *res);
    vtr_status st = check_ranks(d, su->config, o, err);
    if (st)
        goto end;
    /* a GPU that is not there is refused before the data is read (each rank checks) */
    if (o->device == VTR_DEVICE_CUDA && (st = vtr_cuda_check(o->device_index, err)))
        vtr_error_context(err, "train.device cuda:%d", o->device_index);
    if ((st = vtr_dist_agree(d, st, err)))
        goto end;
    st = run_paths_init(&p, su->dir, err);
    if (st == VTR_OK && !su->resume && access(p.last, F_OK) == 0)
        st = vtr_fail(err, VTR_ERR_INVALID, "%s holds a run already: continue it with "
                      "--resume %s, or choose another --output", su->dir, su->dir);
    if (st == VTR_OK && su->resume)
        st = check_resumable(su->dir, p.last, err);
    if ((st = vtr_dist_agree(d, st, err)))
        goto end;

    /* the data (before the run directory is made: a bad path leaves nothing behind); a
     * resumed run reads the vocabulary it was trained with */
    if (su->on_reading)
        su->on_reading(ctx);
    st = vtr_train_data_open(o, su->resume ? p.vocab : NULL, &data, err);
    if (st && su->resume && !vtr_train_explain_data_path(o->catalog, "resume from there", err))
        vtr_train_explain_data_path(o->features, "resume from there", err);
    if ((st = vtr_dist_agree(d, st, err)))
        goto end;
    if (!su->resume && writer) {
        made_files = true;
        if ((st = vtr_make_dirs(su->dir, err)) == VTR_OK)
            st = vtr_run_vocab_save(data.vocab, p.vocab, err);
    }
    if (st == VTR_OK && writer)
        st = vtr_file_sha256(p.vocab, vocab_sha, err);
    if (st == VTR_OK && writer && !su->resume)
        st = write_config(p.config, su->config, err);
    if ((st = vtr_dist_agree(d, st, err)) ||
        (st = vtr_dist_broadcast(d, vocab_sha, sizeof vocab_sha, 0, err)))
        goto end;
    if (su->on_data)
        su->on_data(ctx, &data);

    const char *hashed[] = {"vocab", data.vocab_built || data.vocab_from_catalog || su->resume ? p.vocab
                                                                                    : o->vocab,
                            "init", o->init, "word_vectors", o->word_vectors, NULL};
    if (writer && (st = vtr_run_record_init(&rec, "train", su->config, o->seed, o->features,
                                            hashed, err)) == VTR_OK)
        st = vtr_run_record_begin(&rec, data.catalog, err);
    if ((st = vtr_dist_agree(d, st, err)))
        goto end;
    if (su->on_recorded)
        su->on_recorded(ctx);

    vtr_trainer_setup ts = su->trainer;
    ts.config = su->config;
    ts.opt = o;
    ts.train = &data.train;
    ts.val = &data.val;
    ts.vocab = data.vocab;
    ts.output_dir = su->dir;
    ts.vocab_sha256 = vocab_sha;
    ts.resume = su->resume;
    st = vtr_train_run(&ts, res, err);

    json_t *result = training_result(su, st, res, err);
    vtr_error err2;
    if (vtr_run_record_finish(&rec, st == VTR_OK, result, &err2) != VTR_OK &&
        su->on_record_error)
        su->on_record_error(ctx, &err2);
    json_decref(result);
end:
    if (st != VTR_OK && made_files)
        remove_unstarted_run(su->dir, &p);
    vtr_run_record_free(&rec);
    vtr_train_data_close(&data);
    run_paths_free(&p);
    return st;
}
