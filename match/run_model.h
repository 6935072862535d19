/* The model of a run, of either kind (model.kind: match/vse_model.h's VSE models or
 * match/hgr_model.h's HGR / HGR∞), behind the few operations the training loop
 * (match/trainer.h) and evaluation (match/eval_model.h, vtr-eval) use: make it, its
 * parameter set (optimizer, checkpoints), initialize it, one training step on a batcher's
 * batch, and the retrieval metrics of a split. So one loop trains both kinds.
 *
 * Scores. VSE: the cosine of the item and caption embeddings. HGR: the fused score (the
 * mean of the global, verb and noun levels, match/hgr_score.h). HGR evaluation encodes
 * the whole split first (videos: global (E) and per-frame verb and noun levels (T, E);
 * captions: sentence (E), verb (NV, E) and noun (NN, E) phrases: about 4 (2 T n_items +
 * (1 + NV + NN) n_caps) E bytes), then scores every video-caption pair through
 * vtr_hgr_score_block, max_batch videos x max_batch captions a call in split order, into
 * a whole score matrix (4 bytes a pair; 16 with the three levels: 0.7 and 2.9 GB for
 * MSR-VTT's test split) that the metrics read. The blocks are always the same, so the
 * scores (which depend on a block's sizes in their last bits) and the metrics do not
 * depend on the metrics' tiling.
 */
#ifndef VTR_RUN_MODEL_H
#define VTR_RUN_MODEL_H

#include <stdint.h>

#include "lib/dist.h"
#include "lib/error.h"
#include "lib/params.h"
#include "match/hgr_model.h"
#include "match/hinge_loss.h"
#include "match/retrieval_metrics.h"
#include "match/train_config.h"
#include "match/train_data.h"
#include "match/vse_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tagged union: vse is used when kind is VTR_MODEL_VSE, hgr when VTR_MODEL_HGR. */
typedef struct vtr_run_model {
    vtr_model_kind kind;
    vtr_vse_model vse;
    vtr_hgr_model hgr;
} vtr_run_model;

/* Makes the model of o's kind (vtr_train_model_config / vtr_train_hgr_config with the
 * vocabulary's size) on device (vtr_vse_model_init_on, vtr_hgr_model_init_on) for batches of
 * max_batch pairs, max_frames frames and max_words words; parameters zero. The model's
 * errors; on failure m is zeroed. */
vtr_status vtr_run_model_init(vtr_run_model *m, const vtr_train_options *o,
                              const vtr_vocab *vocab, vtr_device device, int max_batch,
                              int max_frames, int max_words, vtr_error *err);

/* The device it runs on; *data and *grad: where the steps read its values and accumulate
 * its gradients there (the GPU copies, vse_model.h; on the CPU the parameter set's own). */
vtr_device vtr_run_model_device(vtr_run_model *m, float **data, float **grad);

/* vtr_vse_zero_grad, vtr_vse_params_to_device and _to_host (the values only) for either
 * kind (HGR: the parameter set's zero_grad; the copies are no-ops). */
vtr_status vtr_run_model_zero_grad(vtr_run_model *m, vtr_error *err);
vtr_status vtr_run_model_params_to_device(vtr_run_model *m, vtr_error *err);
vtr_status vtr_run_model_params_to_host(vtr_run_model *m, vtr_error *err);

/* The parameter entries of o's model (vtr_vse_model_add_params / vtr_hgr_model_add_params)
 * added to ps, unfinalized: names and shapes only. */
vtr_status vtr_run_model_add_params(vtr_param_set *ps, const vtr_train_options *o,
                                    const vtr_vocab *vocab, vtr_error *err);

/* Frees it; leaves m zeroed. Safe on a zeroed model. */
void vtr_run_model_free(vtr_run_model *m);

/* Its parameters (all trainable), in the checkpoint's names and order. */
vtr_param_set *vtr_run_model_params(vtr_run_model *m);

/* The word embedding (vocab_size, word_dim), row-major, in the parameter set (host
 * memory; on a GPU, vtr_run_model_params_to_device copies it there): GloVe rows go there. */
float *vtr_run_model_word_embedding(vtr_run_model *m);

/* The feature size it expects. */
int vtr_run_model_feature_dim(const vtr_run_model *m);

/* Initialization from the seed's streams (vtr_vse_init_params / vtr_hgr_init_params). */
void vtr_run_model_init_params(vtr_run_model *m, uint64_t seed);

/* One training step on b's last batch (vtr_batcher_pairs; for HGR a split encoded with
 * its graphs): forward, loss (*loss), backward accumulating into the gradients (zero them
 * first). dist: NULL or one process, or the ranks of a data-parallel job that each built
 * the same global batch: this rank computes its share (vtr_dist_share) of the pairs, the
 * loss is the whole batch's (vse_model.h, hgr_model.h), and the gradients are this rank's
 * share, to be summed over the ranks. neg: the hinge's negatives (all or the hardest);
 * seed and step: the dropout streams of HGR and of set embeddings (the run's step count, so
 * a resumed run draws the same). *negatives: the negatives per query the loss used (the
 * hinge's 1 or B-1, ADOPT's K). */
vtr_status vtr_run_model_step(vtr_run_model *m, const vtr_batcher *b, vtr_hinge_negatives neg,
                              uint64_t seed, int64_t step, vtr_dist *dist, float *loss,
                              int *negatives, vtr_error *err);

/* Starts copying b's last batch to the model's GPU into stage slot k (0 or 1; vse_model.h
 * vtr_vse_stage_batch), for the step that takes b to read there: the trainer's batch
 * thread calls it while the previous step runs (match/batch_ahead.h). dist: NULL, or the
 * data-parallel job whose step will take this rank's share of the batch (only that share
 * is copied). Nothing to do on the CPU and for HGR. */
vtr_status vtr_run_model_stage(vtr_run_model *m, int k, vtr_batcher *b, vtr_dist *dist,
                               vtr_error *err);

/* Retrieval metrics of b's split (VSE: vtr_evaluate_split; HGR: the fused score, see the
 * top). levels: NULL, or (3) the metrics of HGR's global, verb and noun levels alone
 * (VSE leaves them untouched). The model must have been made for the batcher's batch size
 * and the split's longest set and caption. dist: NULL, or the ranks of a job that share
 * the work: each encodes its share of the batches and (HGR) scores its share of the item
 * blocks, then all gather; the same bytes as one process, on every rank. */
vtr_status vtr_run_model_evaluate(vtr_run_model *m, vtr_batcher *b, vtr_dist *dist,
                                  const vtr_retrieval_options *opt, vtr_retrieval_metrics *out,
                                  vtr_retrieval_metrics *levels, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
