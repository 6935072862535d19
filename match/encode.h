/* Embedding a split with a VSE model, in batches, and evaluating it.
 *
 * The model runs in evaluation mode (BatchNorm on its running statistics, no
 * augmentation). It must have been made (vtr_vse_model_init) for batches at least as large
 * as the batcher's and for the split's longest set and caption (vtr_split max_frames,
 * max_words), and its feature_dim must be the store's dim. The same model, split and
 * thread count give the same bytes.
 */
#ifndef VTR_ENCODE_H
#define VTR_ENCODE_H

#include <stdint.h>

#include "lib/dist.h"
#include "lib/error.h"
#include "match/retrieval_metrics.h"
#include "match/train_data.h"
#include "match/vse_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Told after every batch: done of total (items, then captions) embedded. May be NULL. */
typedef void (*vtr_encode_progress_fn)(void *ctx, int64_t done, int64_t total);

/* Embeds every item of the batcher's split into items (n_items, E) and every caption into
 * captions (n_caps, E), l2-normalized rows; set embeddings (n_items, K, E) and
 * (n_caps, K, E). dist: NULL, or the ranks of a job that share the work (each embeds its
 * share of the batches, vtr_dist_share, then all gather every rank's rows: the same bytes
 * as one process, whose batches they are). Fails with VTR_ERR_INVALID when the model does
 * not fit the split (sizes above), or as the model's encoders do (on every rank: the
 * ranks agree). progress counts this rank's rows. */
vtr_status vtr_encode_split(vtr_vse_model *m, vtr_batcher *b, vtr_dist *dist, float *items,
                            float *captions, vtr_encode_progress_fn progress, void *ctx,
                            vtr_error *err);

/* The embeddings of a model of cfg as match/retrieval_metrics.h scores them (a set model's
 * by smooth-Chamfer with its alpha). */
vtr_embedding_model vtr_vse_embedding_model(const vtr_vse_config *cfg, const float *items,
                                            const float *captions);

/* Embeds the split (shared among dist's ranks as vtr_encode_split does; dist may be NULL)
 * and evaluates retrieval on it (match/retrieval_metrics.h, options opt, which may be
 * NULL, with the products on the model's device; every rank computes the same metrics).
 * The embeddings are freed before returning. */
vtr_status vtr_evaluate_split(vtr_vse_model *m, vtr_batcher *b, vtr_dist *dist,
                              const vtr_retrieval_options *opt, vtr_retrieval_metrics *out,
                              vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
