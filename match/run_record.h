/* A run and its record in the catalog (lib/catalog.h runs): the lifecycle of a training
 * run in its run directory (vtr-train) and the record of an evaluation (vtr-eval). What a
 * run writes, where, in which order, what the catalog records of it and what a failed run
 * leaves behind are decided here; nothing here prints, exits or installs a signal handler
 * (the program does that, told when by callbacks).
 *
 * The record of a run: its kind ("train", "eval"), the resolved config (YAML), the seed,
 * the code version (lib/version.h) and the data hashes (match/train_data.h
 * vtr_train_data_hashes: the feature store's files and the named files). It begins with
 * status running and finishes done or failed with a JSON result.
 */
#ifndef VTR_RUN_RECORD_H
#define VTR_RUN_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/catalog.h"
#include "lib/config.h"
#include "lib/error.h"
#include "match/run_dir.h"
#include "match/train_config.h"
#include "match/train_data.h"
#include "match/trained_model.h"
#include "match/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the catalog record ----------------------------------------------------------- */

typedef struct vtr_run_record {
    vtr_run run;          /* what is recorded; config and data_hashes owned */
    vtr_catalog *catalog; /* where it was begun (borrowed); NULL before */
    int64_t id;           /* its row; -1 before it is begun */
} vtr_run_record;

/* Fills rec with what a run of kind (a static string) records: cfg's resolved text, seed,
 * vtr_version, and the hashes of the feature store features and of files (pairs of a name
 * and a path ended by a NULL name, as vtr_train_data_hashes). Begins nothing. Errors:
 * VTR_ERR_NOMEM, VTR_ERR_IO naming a file that cannot be hashed. Free rec with
 * vtr_run_record_free, also after a failure. */
vtr_status vtr_run_record_init(vtr_run_record *rec, const char *kind, const vtr_config *cfg,
                               int64_t seed, const char *features, const char *const *files,
                               vtr_error *err);

/* vtr_run_record_init for the evaluation of the checkpoints ckpts[0..n_ckpts) (an
 * ensemble when n_ckpts > 1) with the first's model t: kind "eval", t's config and seed,
 * the hashes of t's feature store, of its vocabulary ("vocab") and of every checkpoint
 * ("checkpoint", then "checkpoint.1", ... for the other members). */
vtr_status vtr_run_record_init_eval(vtr_run_record *rec, const vtr_trained_model *t,
                                    const char *const *ckpts, int n_ckpts, vtr_error *err);

/* Records the start of the run in cat (borrowed; it must outlive rec's finish): status
 * running. The catalog's errors. */
vtr_status vtr_run_record_begin(vtr_run_record *rec, vtr_catalog *cat, vtr_error *err);

/* Records the end of a begun run: VTR_RUN_DONE when done, else VTR_RUN_FAILED, with result
 * (may be NULL; not stolen) as its JSON, to which an object gains "blas_kernel" (the BLAS
 * kernel in use, blas_kernel.h). Does nothing for a run not begun. The catalog's
 * errors, VTR_ERR_NOMEM. */
vtr_status vtr_run_record_finish(vtr_run_record *rec, bool done, const json_t *result,
                                 vtr_error *err);

/* Frees what rec owns (not the catalog); leaves it as before init. Safe on a zeroed rec. */
void vtr_run_record_free(vtr_run_record *rec);

/* ---- a training run --------------------------------------------------------------- */

/* Reads the resolved config stored with the run in dir (in dir/last.safetensors) into a
 * new *cfg (caller frees with vtr_config_free). The checkpoint's errors; VTR_ERR_FORMAT
 * when it holds no config. */
vtr_status vtr_run_dir_config(const char *dir, vtr_config **cfg, vtr_error *err);

/* Everything is borrowed for the call. */
typedef struct vtr_training_setup {
    const vtr_config *config;     /* resolved */
    const vtr_train_options *opt; /* read from config */
    const char *dir;              /* the run directory */
    bool resume;                  /* continue the run in dir, else start a new one there */
    /* max_steps, stop and the callbacks and ctx of the training loop; its other fields
     * are ignored (filled in from the run) */
    vtr_trainer_setup trainer;
    /* each may be NULL; they get trainer.ctx */
    void (*on_reading)(void *ctx);                              /* before reading the data */
    void (*on_data)(void *ctx, const vtr_train_data *data); /* data read (a new run's
                                                               files written) */
    void (*on_recorded)(void *ctx);           /* the catalog records the run: training starts */
    void (*on_record_error)(void *ctx, const vtr_error *e); /* its end could not be recorded:
                                                               the run's status stands */
} vtr_training_setup;

/* Runs a training run from start to record, in this order:
 *   1. a new run: fails (VTR_ERR_INVALID, "DIR holds a run already: ...") when
 *      dir/last.safetensors exists;
 *   2. reads the data (vtr_train_data_open; resuming, with dir/vocab.json; a failure
 *      explains a relative data path of the stored config);
 *   3. a new run: makes dir and writes vocab.json and config.yaml (the resolved config);
 *   4. records the run in the data's catalog (kind "train", data hashes "vocab", "init",
 *      "word_vectors" as set);
 *   5. trains (vtr_train_run, vocab.json's digest stored in the checkpoints);
 *   6. finishes the record with the result {"finished", "steps", "epoch", "iteration",
 *      "best_rsum", "best_epoch", "output", "resumed", "threads"} and, on failure, "error"
 *      (a failure to record goes to on_record_error; the status returned is training's).
 * A new run that fails before saving any state leaves nothing behind: its files go, and
 * dir with them when nothing else is in it. *res as vtr_train_run sets it (zeroed when
 * training did not start). Errors: those of each step. */
vtr_status vtr_run_training(const vtr_training_setup *su, vtr_train_result *res,
                            vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
