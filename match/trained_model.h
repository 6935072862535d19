/* A trained model as a checkpoint names it: the checkpoint (mapped), the config that
 * rebuilds the model, its typed options, and the vocabulary it was trained with. The one
 * way to open a checkpoint for inference: vtr-eval (match/eval_model.h) and the embedder
 * of vtr-aggregate, vtr-index and vtr-search (index/embedder.h) both start here.
 *
 * Where each piece comes from:
 *   config      the checkpoint's "config" metadata (vtr-train stores the resolved config),
 *               or config_path for a checkpoint without one (a converted PyTorch
 *               state_dict); then the overrides "KEY=VALUE" in order.
 *   vocabulary  vocab_path; else vocab.json in the checkpoint's directory (vtr-train
 *               writes it there); else the config's data.vocab. When the checkpoint
 *               records "vocab_sha256", the file must have that digest.
 */
#ifndef VTR_TRAINED_MODEL_H
#define VTR_TRAINED_MODEL_H

#include "lib/checkpoint.h"
#include "lib/config.h"
#include "lib/error.h"
#include "match/run_model.h"
#include "match/train_config.h"
#include "match/vse_model.h"
#include "text/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_trained_model {
    vtr_checkpoint ck;     /* open until close: the parameters load from it */
    vtr_config *cfg;
    vtr_train_options o;   /* read from cfg; its strings live with cfg */
    vtr_vocab *vocab;
    char *vocab_path;      /* the vocabulary file read (owned) */
    vtr_vse_config model;  /* o.model with the vocabulary's size */
} vtr_trained_model;

/* Opens checkpoint ckpt, its config and vocabulary as above. config_path and vocab_path
 * may be NULL; sets holds n_sets overrides. Errors start with the checkpoint's path: a
 * checkpoint without a config and no config_path is VTR_ERR_INVALID ("... carries no
 * config: name the training config"), a vocabulary of another digest VTR_ERR_INVALID,
 * no vocabulary found VTR_ERR_INVALID; otherwise what the checkpoint, config and
 * vocabulary readers report. On failure *out is zeroed. */
vtr_status vtr_trained_model_open(const char *ckpt, const char *config_path,
                                  const char *const *sets, int n_sets, const char *vocab_path,
                                  vtr_trained_model *out, vtr_error *err);

/* The first half of vtr_trained_model_open: the checkpoint and its config (and typed
 * options) as above, without the vocabulary, for what needs the model's settings and
 * tensors but not its words (the GPO coefficients of match/gpo_curves.h). out->vocab and
 * out->vocab_path stay NULL and out->model is zeroed. The errors of vtr_trained_model_open
 * but the vocabulary's. */
vtr_status vtr_trained_model_open_config(const char *ckpt, const char *config_path,
                                         const char *const *sets, int n_sets,
                                         vtr_trained_model *out, vtr_error *err);

/* Makes m, a model of the checkpoint's kind (t->o.kind, match/run_model.h) on device (the
 * current GPU for VTR_DEVICE_CUDA: vtr_cuda_init), for batches of max_batch items,
 * max_frames set elements and max_words tokens, and loads the checkpoint's parameters into
 * it (a plain state_dict may carry extra tensors). On failure m is zeroed; errors name the
 * checkpoint. */
vtr_status vtr_trained_model_build_run(const vtr_trained_model *t, vtr_device device,
                                       int max_batch, int max_frames, int max_words,
                                       vtr_run_model *m, vtr_error *err);

/* Frees everything; leaves t zeroed. Safe on a zeroed value. */
void vtr_trained_model_close(vtr_trained_model *t);

#ifdef __cplusplus
}
#endif

#endif
