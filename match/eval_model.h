/* A trained VSE model opened for evaluation on one split: the model as its checkpoint
 * names it (match/trained_model.h: checkpoint, config, vocabulary), the split as it reads
 * it, and the model with the checkpoint's parameters. vtr-eval opens one per member of an
 * ensemble.
 *
 * The split is src->split of data.dataset in data.catalog, features from data.features,
 * data.max_frames and data.tokenizer as in training; an HGR model's captions come with
 * their role graphs (vtr_split_encode_graphs).
 */
#ifndef VTR_EVAL_MODEL_H
#define VTR_EVAL_MODEL_H

#include "lib/config.h"
#include "lib/error.h"
#include "lib/feature_store.h"
#include "match/run_model.h"
#include "match/train_config.h"
#include "match/train_data.h"
#include "match/trained_model.h"
#include "match/vse_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_eval_source {
    const char *split;               /* "test" */
    const char *config_path;         /* NULL: the checkpoint's own config */
    const char *const *sets;         /* n_sets overrides "KEY=VALUE" */
    int n_sets;
    const char *vocab_path;          /* NULL: found as above */
    int batch;                       /* encoding batch size, >= 1 */
    vtr_device device;               /* where the models encode (VTR_DEVICE_CUDA: on the
                                        current GPU, vtr_cuda_init) */
} vtr_eval_source;

typedef struct vtr_eval_model {
    vtr_trained_model trained;       /* checkpoint, config (trained.o), vocabulary */
    vtr_feature_store_reader *store;
    vtr_split split;                 /* captions encoded */
    vtr_run_model model;             /* for batches of src->batch and the split's sizes, of
                                        the checkpoint's kind (model.vse or model.hgr) */
} vtr_eval_model;

/* Opens everything for checkpoint ckpt (vtr_trained_model_open with src's config_path,
 * sets and vocab_path, then the split). Errors start with the checkpoint's path. On
 * failure *out is zeroed. */
vtr_status vtr_eval_model_open(const char *ckpt, const vtr_eval_source *src, vtr_eval_model *out,
                               vtr_error *err);

/* Frees everything; leaves m zeroed. Safe on a zeroed value. */
void vtr_eval_model_close(vtr_eval_model *m);

#ifdef __cplusplus
}
#endif

#endif
