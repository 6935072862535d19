/* Checkpoints: a parameter set, optionally an optimizer's state, and the training state
 * (counters, RNG states, resolved config) in ONE safetensors file, so that a resumed run
 * continues exactly where it stopped and a converted PyTorch state_dict loads for
 * evaluation. The format is specified in docs/checkpoint.md; in short:
 *
 *   tensors    every entry of the parameter set under its own (state_dict) name, F32 or
 *              I64, its shape as in the set (PyTorch layout);
 *              "optimizer.exp_avg.<name>" and "optimizer.exp_avg_sq.<name>" (F32, the
 *              shape of <name>) for every trainable entry when an optimizer is saved.
 *   metadata   "format" = "vtr-checkpoint", "version" = "1", "code_version";
 *              with an optimizer: "optimizer" ("adam" / "adamw"), "optimizer_step";
 *              with a training state: "step", "epoch", "iteration" (decimal), "rng" (JSON:
 *              {name: {"seed": hex, "stream": hex, "counter": hex, "used": 0..4}}),
 *              "config" (resolved YAML, when given), and the caller's extra strings.
 *
 * Saving is atomic (temp file + rename) and deterministic: the same inputs give the same
 * bytes, so save -> load -> save reproduces the file byte for byte.
 *
 * Loading is in two steps: vtr_checkpoint_open maps and checks the file; the program
 * reads the config from it if it needs one to build the model, builds the parameter set
 * (and optimizer), then loads what it wants: the parameters alone (evaluation), plus the
 * optimizer state and the training state (resume). Every load is all-or-nothing: it
 * checks every tensor before it copies any, so a failed load leaves its target as it was.
 */
#ifndef VTR_CHECKPOINT_H
#define VTR_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "optim.h"
#include "params.h"
#include "rng.h"
#include "safetensors.h"

#define VTR_CHECKPOINT_FORMAT "vtr-checkpoint"
#define VTR_CHECKPOINT_VERSION "1"

/* An RNG the training loop registers under a name ("data_order", "dropout"): saved from
 * and restored into *rng. */
typedef struct vtr_checkpoint_rng {
    const char *name;
    vtr_rng *rng;
} vtr_checkpoint_rng;

/* A free-form metadata string from the caller (e.g. "dataset", "best_rsum"). */
typedef struct vtr_checkpoint_kv {
    const char *key;
    const char *value;
} vtr_checkpoint_kv;

/* Where training stands. Saving reads every field; loading fills step, epoch, iteration,
 * config and code_version and restores the registered rngs (see vtr_checkpoint_load_state). */
typedef struct vtr_checkpoint_state {
    int64_t step;                   /* training steps taken, >= 0 */
    int64_t epoch;                  /* zero-based epoch to continue in, >= 0 */
    int64_t iteration;              /* next iteration within that epoch, >= 0 */
    const vtr_checkpoint_rng *rngs; /* rng_count registered RNGs, names unique */
    size_t rng_count;
    const char *config;             /* resolved YAML (vtr_config_dump_string), or NULL */
    const char *code_version;       /* NULL: this build's vtr_version */
    const vtr_checkpoint_kv *extra; /* extra_count strings; keys not reserved (below) */
    size_t extra_count;
} vtr_checkpoint_state;

/* Writes ps (finalized), opt's state when opt is not NULL (it must belong to ps), and
 * state when it is not NULL (a model-only checkpoint otherwise) to path, atomically.
 * Fails with VTR_ERR_INVALID for an entry name starting with "optimizer.", an optimizer
 * of another size, a negative counter, an empty or repeated RNG name, an extra key that
 * is empty, repeated or reserved ("format", "version", "code_version", "optimizer",
 * "optimizer_step", "step", "epoch", "iteration", "rng", "config"); VTR_ERR_IO and
 * VTR_ERR_NOMEM as the writer reports them. Messages start with path. */
vtr_status vtr_checkpoint_save(const char *path, const vtr_param_set *ps,
                               const vtr_optimizer *opt, const vtr_checkpoint_state *state,
                               vtr_error *err);

/* Flags of vtr_checkpoint_open and vtr_checkpoint_load_params. */
enum {
    /* open: accept a file without "format" metadata, i.e. a plain state_dict converted to
     * safetensors (from PyTorch); it holds parameters only. */
    VTR_CHECKPOINT_ALLOW_PLAIN = 1u << 0,
    /* load_params: ignore tensors the parameter set has no entry for (a released
     * PyTorch checkpoint may carry more than the model uses) instead of failing. */
    VTR_CHECKPOINT_ALLOW_EXTRA = 1u << 1,
};

/* An opened checkpoint: the mapped file and its tensors. */
typedef struct vtr_checkpoint {
    vtr_safetensors st;
    char *path; /* owned, for messages */
    bool plain; /* no vtr metadata (opened with VTR_CHECKPOINT_ALLOW_PLAIN) */
} vtr_checkpoint;

/* Maps and parses path. A file whose "format" is not "vtr-checkpoint" is VTR_ERR_FORMAT
 * ("not a vtr checkpoint"), unless it has no "format" at all and flags has
 * VTR_CHECKPOINT_ALLOW_PLAIN; a "version" other than "1" is VTR_ERR_UNSUPPORTED; a
 * truncated or malformed file is the safetensors reader's error. Messages start with
 * path. On failure ck is zeroed; on success release it with vtr_checkpoint_close. */
vtr_status vtr_checkpoint_open(const char *path, unsigned flags, vtr_checkpoint *ck,
                               vtr_error *err);

/* The metadata string under key ("config", "epoch", an extra key), or NULL. Valid until
 * vtr_checkpoint_close. */
const char *vtr_checkpoint_meta(const vtr_checkpoint *ck, const char *key);

/* The checks of vtr_checkpoint_load_params without the copy, on a set finalized or not
 * (names and shapes are enough): to check a checkpoint against a model's entries before
 * the model is allocated. */
vtr_status vtr_checkpoint_check_params(const vtr_checkpoint *ck, const vtr_param_set *ps,
                                       unsigned flags, vtr_error *err);

/* Copies the checkpoint's tensors into every entry of ps (finalized): parameters and
 * buffers alike. Each entry must be present with the same shape; an F32 entry takes an
 * F32 tensor (or F16 / BF16, converted), an I64 entry an I64 tensor. Tensors that match
 * no entry fail the load unless flags has VTR_CHECKPOINT_ALLOW_EXTRA; the optimizer
 * tensors of a vtr checkpoint are not extras. Errors, naming the tensor:
 * VTR_ERR_NOT_FOUND "tensor 'x' is missing", VTR_ERR_INVALID "tensor 'x' has shape
 * (4, 3), the model expects (4, 5)" / "... is I32, the model expects F32" /
 * "tensor 'x' has a non-finite value (element 7)" / "unexpected tensor 'x' (and N more)
 * not in the model". Gradients are not touched. */
vtr_status vtr_checkpoint_load_params(const vtr_checkpoint *ck, vtr_param_set *ps,
                                      unsigned flags, vtr_error *err);

/* Copies the optimizer state saved for ps's trainable entries into opt (made for ps) and
 * sets opt->step. Fails with VTR_ERR_NOT_FOUND when the checkpoint holds no optimizer
 * state, VTR_ERR_INVALID when it was saved by another kind of optimizer or a state
 * tensor has another shape or dtype or matches no trainable entry, VTR_ERR_NOT_FOUND
 * naming a missing state tensor, VTR_ERR_FORMAT for a malformed "optimizer_step". opt's hyper-parameters are not changed (they come from
 * the config). */
vtr_status vtr_checkpoint_load_optimizer(const vtr_checkpoint *ck, const vtr_param_set *ps,
                                         vtr_optimizer *opt, vtr_error *err);

/* Reads the training state: fills state->step, epoch and iteration, points
 * state->config and code_version at the stored strings (NULL when absent; valid until
 * vtr_checkpoint_close), and restores every RNG registered in state->rngs from the
 * state saved under its name, so that it continues the exact sequence. The checkpoint
 * must hold exactly the registered RNGs. Fails with VTR_ERR_NOT_FOUND for a model-only
 * checkpoint or a registered RNG the file lacks, VTR_ERR_INVALID for a saved RNG that
 * is not registered, VTR_ERR_FORMAT for malformed counters or RNG states. On failure
 * state and the RNGs are unchanged. state->extra is not read or written: read extra
 * strings with vtr_checkpoint_meta. */
vtr_status vtr_checkpoint_load_state(const vtr_checkpoint *ck, vtr_checkpoint_state *state,
                                     vtr_error *err);

/* Unmaps the file and frees ck; leaves it zeroed. Safe on a zeroed or closed value. */
void vtr_checkpoint_close(vtr_checkpoint *ck);

#endif
