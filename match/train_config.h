/* The settings of a VSE training run (vtr-train's config schema) and their typed, checked
 * form. One schema serves vtr-train (CONFIG.yaml, --set), vtr-eval (the config stored in
 * a checkpoint rebuilds its model and names its data) and the tests (every file in
 * configs/ must load through it). Data layout and keys: docs/training.md.
 *
 * Defaults are the reference VSE∞ image-text setting (REFERENCE.md "VSE∞ model"): region
 * features 2048 -> fc + MLP residual (512) -> 1024, BiGRU text, GPO on both sides, hinge
 * loss with margin 0.2 summed over the batch, all negatives for the first epoch ("VSE0")
 * then the hardest negative, AdamW lr 5e-4 x0.1 at epoch 15, 25 epochs, batch 128,
 * gradient clipping at 2.0, size augmentation p 0.2. The video configs override the
 * visual branch (fc only) and the schedule.
 */
#ifndef VTR_TRAIN_CONFIG_H
#define VTR_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/config.h"
#include "lib/device.h"
#include "lib/error.h"
#include "lib/lr_schedule.h"
#include "lib/precision.h"
#include "lib/optim.h"
#include "match/hgr_model.h"
#include "match/hinge_loss.h"
#include "match/vse_model.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The schema: every key, its type, default and help line (vtr-train --help-config). */
extern const vtr_config_field vtr_train_schema[];
extern const size_t vtr_train_schema_count;

/* A config holding the schema's defaults (required keys unset). VTR_ERR_NOMEM only. */
vtr_status vtr_train_config_new(vtr_config **out, vtr_error *err);

/* The typed settings. Strings point into the config they were read from and live as long
 * as its values do (lib/config.h). Where a run writes is not a setting (vtr-train -o):
 * the same experiment in two directories gives the same bytes. */
/* The model a run trains (model.kind). */
typedef enum vtr_model_kind {
    VTR_MODEL_VSE, /* match/vse_model.h: VSE++, VSE∞, ADOPT */
    VTR_MODEL_HGR, /* match/hgr_model.h: HGR, HGR∞ */
} vtr_model_kind;

typedef struct vtr_train_options {
    /* data: what the run reads */
    const char *catalog;      /* SQLite catalog naming the items, captions and splits */
    const char *dataset;      /* the dataset's name in the catalog */
    const char *features;     /* feature store directory (lib/feature_store.h) */
    const char *train_split;  /* "train" */
    const char *val_split;    /* "val" */
    const char *vocab;        /* reference vocabulary JSON; "" = build from train captions */
    int64_t vocab_threshold;  /* building: keep words seen at least this often (4) */
    vtr_tokenizer_mode tokenizer;
    int max_frames;           /* > 0: items with more rows keep round(linspace(0, n-1, this))
                                 of them (HGR); 0: all rows */

    /* model: everything but vocab_size, which the vocabulary sets */
    vtr_model_kind kind;
    vtr_vse_config model;     /* vse; for hgr the shared keys (sizes, GPO, margin) */
    vtr_hgr_config hgr;       /* hgr: model.global_pool, the role and dropout keys, the
                                 shared keys above */
    int hgr_max_words;        /* hgr: words kept per caption (model.max_words, 30) */
    const char *catalog_vocab; /* hgr: the catalog's vocabulary (data.catalog_vocab); '':
                                * built from the training captions */
    const char *word_vectors; /* GloVe file for the word embedding rows; "" = none */
    const char *init;         /* checkpoint whose parameters start the run; "" = none */

    /* loss */
    int warmup_epochs;                /* epochs with all negatives ("VSE0") first */
    vtr_hinge_negatives negatives;    /* after the warm-up: hardest negative */

    /* optimization */
    int epochs;
    int batch_size;
    bool drop_last;           /* drop the last incomplete batch of an epoch (reference) */
    vtr_optim_hparams optim;
    double grad_clip;         /* > 0: clip the gradient norm to this; 0: no clipping */
    vtr_lr_schedule lr;
    bool size_augment;        /* GPO size augmentation (aggregate/gpo.h) */
    float frame_drop;         /* its probability of dropping a set element */
    float caption_hit;        /* its probability of hitting a caption token */
    int64_t seed;             /* one seed for init, data order and augmentation */
    vtr_precision precision;  /* of a step's matrix products (lib/matmul.h) */
    vtr_device device;        /* where the steps run (train.device) */
    int device_index;         /* cuda:N's N */
    int64_t checkpoint_every; /* > 0: also save last.safetensors every this many steps */

    /* validation after every epoch */
    int val_batch_size;       /* items or captions per encoding batch */
    int val_fold_items;       /* 0: whole split; 1000: COCO 1K folds, averaged */
    int val_max_items;        /* > 0: only the first this many items of the split (the VSE
                                 reference validates on the first 1,000 of COCO's 5,000) */
} vtr_train_options;

/* The data a run trains or evaluates on: data.catalog, data.dataset and data.features must
 * be set (the programs that only embed, vtr-aggregate, vtr-index and vtr-search, read none
 * of them); else VTR_ERR_INVALID naming them, as vtr_config_check_required does. */
vtr_status vtr_train_options_check_data(const vtr_train_options *o, vtr_error *err);

/* Reads and checks every key (the required ones must be set: vtr_config_check_required).
 * Out-of-range values fail with VTR_ERR_INVALID through vtr_config_fail, naming the file,
 * line and key ("msrvtt.yaml:12: key 'train.batch_size': must be >= 2, got 1"). */
vtr_status vtr_train_options_from_config(const vtr_config *cfg, vtr_train_options *out,
                                         vtr_error *err);

/* Loads a config from YAML text (a checkpoint's "config" metadata, named `name` in
 * messages) into a fresh config of the schema. */
vtr_status vtr_train_config_from_string(const char *name, const char *text, vtr_config **out,
                                        vtr_error *err);

/* The model config of a run: opt's with vocab_size from the vocabulary (the model's
 * word table has a row per vocabulary word). */
vtr_vse_config vtr_train_model_config(const vtr_train_options *opt, const vtr_vocab *vocab);

/* The HGR model config of a run (kind hgr): opt's with vocab_size from the vocabulary. */
vtr_hgr_config vtr_train_hgr_config(const vtr_train_options *opt, const vtr_vocab *vocab);

/* For a failure to open a data path (data.catalog, data.features) read from a run's saved
 * config: when the path is relative and does not exist, appends "; PATH is relative to the
 * directory vtr-train ran in (HOW)" to err and returns true; otherwise leaves err as it is
 * and returns false. */
bool vtr_train_explain_data_path(const char *path, const char *how, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
