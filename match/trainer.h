/* The training loop of VSE and HGR models (match/run_model.h): epochs of shuffled,
 * augmented caption-item batches, the hinge loss with the VSE0 warm-up (HGR: the hardest
 * negative on the fused score), AdamW or Adam with clipping and the lr schedule,
 * validation after every epoch (HGR: the fused score under HGR's protocol), checkpoints
 * and a metrics log in a run directory, and exact resume.
 *
 * Epochs are numbered from 1 in every file and line a run writes (epoch 1 is the first);
 * the loop's and the callbacks' epoch indexes below count from 0.
 *
 * Run directory (setup->output_dir, which must exist):
 *   last.safetensors  the whole training state (lib/checkpoint.h): parameters, AdamW
 *                     state, step / epoch / iteration, the resolved config, and the extra
 *                     strings "best_rsum", "best_epoch", "epoch_loss_sum",
 *                     "epoch_negatives_sum", "epoch_steps", "vocab_sha256". Written atomically after every epoch, every
 *                     checkpoint_every steps, and when the run stops early.
 *   best.safetensors  the parameters (and config) after the epoch with the highest
 *                     validation RSUM so far (ties keep the earlier), with the extra
 *                     strings "rsum", "best_epoch", "vocab_sha256". Atomic.
 *   metrics.jsonl     one JSON object per finished epoch: {"epoch", "steps", "loss" (mean
 *                     per step), "negatives" ("all" / "hardest"), "k" (negatives per
 *                     query, mean per step: 1 / B-1 for the hinge, ADOPT's K), "lr" (first and last
 *                     step's), "val": {"v2t": {...}, "t2v": {...}, "rsum"}, "best",
 *                     "train_s", "val_s"}.
 *
 * Exactness. Everything a step reads is a function of the saved state: the epoch's order
 * and each caption's augmentation come from counter-based RNG streams of (seed, epoch,
 * caption) (match/train_data.h), the parameters and AdamW moments are saved bit for bit,
 * and the running loss sum is saved as a hex float. So with the same data, config, seed,
 * build and thread count, a run stopped anywhere (killed: from its last checkpoint) and
 * resumed ends with a last.safetensors byte-identical to an uninterrupted run's, and the
 * same best.safetensors and metrics (the times in metrics.jsonl aside). Resuming rewrites
 * metrics.jsonl without the lines of epochs the checkpoint has not finished.
 *
 * Data parallel (setup->dist with N > 1 ranks, lib/dist.h; every model): every rank runs
 * this loop on the same data and config; each builds every global batch of batch_size pairs
 * (the same order and augmentation) and computes its share of the pairs
 * (vtr_run_model_step), the gradients are summed over the ranks in rank order, and each
 * rank clips and steps the same optimizer on the same sums, so the ranks hold the same
 * parameters bit for bit, and N ranks train what one process with the same batch size
 * trains, to float rounding (the loss sees the whole batch). batch_size must be a multiple
 * of N. Only rank 0 writes the run directory (checkpoints, metrics); every rank reads
 * last.safetensors when resuming (a shared file system), so a run resumes on any N.
 * Validation is split across the ranks (vtr_run_model_evaluate with the job: each encodes
 * its share of the split, all gather) and gives one process's metrics. A failure on any rank (its message prefixed "rank R: ")
 * or a stop request on any rank ends every rank after the same step.
 */
#ifndef VTR_TRAINER_H
#define VTR_TRAINER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/config.h"
#include "lib/dist.h"
#include "lib/error.h"
#include "match/retrieval_metrics.h"
#include "match/run_dir.h"
#include "match/train_config.h"
#include "match/train_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* After every training step. */
typedef struct vtr_train_step_info {
    int epoch, epochs;          /* zero-based epoch, of epochs */
    int64_t iteration, iterations; /* zero-based step within the epoch, of iterations */
    int64_t step;               /* steps taken in the whole run, this one included */
    float loss;
    double lr;
    int negatives;              /* negatives per query in this step's loss: the hinge's 1
                                   (hardest) or B-1 (all), ADOPT's K */
} vtr_train_step_info;

/* Once, with the parameters set, before the first step. */
typedef struct vtr_train_start_info {
    bool resumed;               /* from output_dir/last.safetensors */
    int epoch;                  /* zero-based epoch the run starts in */
    int64_t iteration;          /* step within it */
    const char *init;           /* the checkpoint the parameters came from, or NULL */
    int64_t word_vectors;       /* vocabulary words given a vector by model.word_vectors;
                                   -1 when not set (or resumed) */
    int vocab_size;
    const char *device;         /* where the steps run: "cpu", or the GPU's description */
} vtr_train_start_info;

/* After every epoch (its metrics.jsonl line has been written). */
typedef struct vtr_train_epoch_info {
    int epoch;
    double loss;                /* mean per step */
    double negatives;           /* negatives per query, mean per step (ADOPT's K) */
    vtr_retrieval_metrics val;
    bool best;                  /* best.safetensors was written */
    double train_s, val_s;
} vtr_train_epoch_info;

typedef struct vtr_trainer_setup {
    const vtr_config *config;      /* resolved config, stored in checkpoints */
    const vtr_train_options *opt;  /* read from config */
    const vtr_split *train, *val;  /* captions encoded with vocab */
    const vtr_vocab *vocab;
    const char *output_dir;        /* existing directory */
    const char *vocab_sha256;      /* of output_dir/vocab.json, stored in checkpoints */
    bool resume;                   /* continue from output_dir/last.safetensors */
    int64_t max_steps;             /* > 0: stop (state saved) once the run has taken this
                                      many steps in all */
    volatile sig_atomic_t *stop;   /* may be NULL; polled after every step: nonzero saves
                                      the state and stops (on any rank: all stop) */
    vtr_dist *dist;                /* NULL: one process; else the ranks of a data-parallel
                                      run (see the top) */
    void (*on_start)(void *ctx, const vtr_train_start_info *info); /* may be NULL */
    void (*on_step)(void *ctx, const vtr_train_step_info *info);   /* may be NULL */
    void (*on_epoch)(void *ctx, const vtr_train_epoch_info *info); /* may be NULL */
    void (*on_validate)(void *ctx, int epoch); /* before validating; may be NULL */
    void *ctx;
} vtr_trainer_setup;

typedef struct vtr_train_result {
    bool finished;         /* every epoch done; false: stopped by max_steps or stop */
    int64_t steps;         /* steps taken in all, including before a resume */
    int epoch;             /* epoch to continue in (epochs when finished) */
    int64_t iteration;     /* step within it to continue at */
    double best_rsum;      /* -1 before the first validation */
    int best_epoch;        /* -1 before the first validation */
    bool resumed_from_end; /* resume found the run already finished */
} vtr_train_result;

/* Trains (or resumes) as set up; the result says where the run stands. Unless resuming,
 * the model of opt->kind is initialized from opt->seed (vtr_run_model_init_params), then
 * its word embedding rows from opt->word_vectors (text/word_vectors.h) or all its
 * parameters from the checkpoint opt->init (opened as match/trained_model.h does: a vtr-train checkpoint, or
 * a converted reference model; its vocabulary must give the words the ids of the run's,
 * else VTR_ERR_INVALID, and its tensors the model's shapes). Fails with
 * VTR_ERR_INVALID for data that does not fit the config (feature dim, too few captions
 * for one batch), a non-finite loss or gradient ("loss is nan at epoch 3, step 120");
 * resuming, with the checkpoint's errors (VTR_ERR_IO when there is no last.safetensors);
 * with VTR_ERR_IO when a file of the run directory cannot be written. A failure leaves
 * the files of the last successful save. */
vtr_status vtr_train_run(const vtr_trainer_setup *setup, vtr_train_result *result,
                         vtr_error *err);

/* Whether o trains on `ranks` processes: batch_size a multiple of them; else
 * VTR_ERR_INVALID naming the cause. */
vtr_status vtr_train_check_ranks(const vtr_train_options *o, int ranks, vtr_error *err);

/* Steps per epoch for n captions on `ranks` processes: n / batch, plus one for a remainder
 * of at least 2 pairs, and at least one per rank, when drop_last is false (a one-pair batch
 * has no negative and is dropped; so is a remainder that cannot give every rank a pair). */
int64_t vtr_train_iterations_per_epoch(int64_t n_caps, int batch_size, bool drop_last,
                                       int ranks);


#ifdef __cplusplus
}
#endif

#endif
