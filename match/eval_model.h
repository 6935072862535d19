/* A trained VSE model opened for evaluation on one split: its checkpoint, the config that
 * rebuilds it and names its data, its vocabulary, the split as it reads it, and the model
 * with the checkpoint's parameters. vtr-eval opens one per member of an ensemble.
 *
 * Where each piece comes from:
 *   config      the checkpoint's "config" metadata (vtr-train stores the resolved config),
 *               or src->config_path for a checkpoint without one (a converted PyTorch
 *               state_dict); then src->sets (--set KEY=VALUE) in order.
 *   vocabulary  src->vocab_path; else vocab.json in the checkpoint's directory (vtr-train
 *               writes it there); else the config's data.vocab. When the checkpoint
 *               records "vocab_sha256", the file must have that digest.
 *   split       src->split of data.dataset in data.catalog, features from data.features,
 *               data.max_frames and data.tokenizer as in training.
 */
#ifndef VTR_EVAL_MODEL_H
#define VTR_EVAL_MODEL_H

#include "lib/config.h"
#include "lib/error.h"
#include "lib/feature_store.h"
#include "match/train_config.h"
#include "match/train_data.h"
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
} vtr_eval_source;

typedef struct vtr_eval_model {
    vtr_config *cfg;
    vtr_train_options o;             /* read from cfg */
    vtr_feature_store_reader *store;
    vtr_vocab *vocab;
    char *vocab_path;                /* the vocabulary file read (owned) */
    vtr_split split;                 /* captions encoded */
    vtr_vse_model model;             /* for batches of src->batch and the split's sizes */
} vtr_eval_model;

/* Opens everything for checkpoint ckpt. Errors start with the checkpoint's path; a
 * checkpoint without a config and no config_path is VTR_ERR_INVALID ("... carries no
 * config: name the training config"), a vocabulary of another digest VTR_ERR_INVALID.
 * On failure *out is zeroed. */
vtr_status vtr_eval_model_open(const char *ckpt, const vtr_eval_source *src, vtr_eval_model *out,
                               vtr_error *err);

/* Frees everything; leaves m zeroed. Safe on a zeroed value. */
void vtr_eval_model_close(vtr_eval_model *m);

#ifdef __cplusplus
}
#endif

#endif
