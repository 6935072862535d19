/* Training batches built one step ahead, on a thread of their own: while the caller runs
 * step n (on a GPU, mostly waiting for the device), batch n+1 is gathered from the feature
 * store, augmented and padded (vtr_batcher_pairs) into the second of two batchers. Each
 * batch is exactly the one vtr_batcher_pairs builds from the same arguments, so a run's
 * bytes do not depend on it. Without the thread (ahead false) a batch is built when it is
 * taken, so that a caller has one way to take its batches either way
 * (decode/decode_ahead.h does the same for decoding).
 *
 *   vtr_batch_ahead a;
 *   vtr_batch_ahead_init(&a, split, max_batch, true, &err);
 *   vtr_batch_ahead_request(&a, caps, B, &aug);        // batch 0
 *   for (n = 0; n < steps; n++) {
 *       vtr_batcher *b;
 *       st = vtr_batch_ahead_take(&a, &b, &err);       // batch n, or its failure
 *       if (n + 1 < steps)
 *           vtr_batch_ahead_request(&a, ...);          // batch n+1, built during step n
 *       step(b);                                       // b is the caller's until the next take
 *   }
 *   vtr_batch_ahead_free(&a);                          // also early: waits for a build
 *
 * The thread only reads the split (its feature store is memory: lib/feature_store.h), so
 * the caller may read the split too, but must not change it, nor the caps of a request,
 * until that request is taken.
 *
 * Staging. A stage function, when given, runs on each batch right after it is built (on
 * the thread): stage(ctx, k, b, err) with k the batcher's index (0 or 1), which
 * alternates from batch to batch. The trainer starts the batch's copy to the GPU there
 * (match/run_model.h vtr_run_model_stage), so that the copy of batch n+1 overlaps step n;
 * its failure is the batch's, reported at its take.
 */
#ifndef VTR_BATCH_AHEAD_H
#define VTR_BATCH_AHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "match/train_data.h"

typedef vtr_status (*vtr_batch_ahead_stage_fn)(void *ctx, int k, vtr_batcher *b, vtr_error *err);

typedef struct vtr_batch_ahead {
    vtr_batcher b[2];
    vtr_batch_ahead_stage_fn stage; /* NULL, or run on each batch built */
    void *stage_ctx;
    int held; /* the batcher the caller took last (0 before the first take) */
    bool threaded;
    /* the request: vtr_batcher_pairs's arguments, built into b[1 - held] */
    const int64_t *caps;
    int B;
    vtr_augment aug;
    bool augment;
    /* between the caller and the thread, under mu */
    enum { VTR_AHEAD_IDLE, VTR_AHEAD_REQUESTED, VTR_AHEAD_BUILT } state;
    bool quit, started;
    vtr_status st; /* the built batch's status, and its message */
    vtr_error err;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} vtr_batch_ahead;

/* Two batchers for batches of at most max_batch pairs of split s (vtr_batcher_init), and
 * with ahead the thread; stage (NULL: none) with its ctx runs on every batch built.
 * VTR_ERR_INVALID, VTR_ERR_NOMEM, VTR_ERR_IO when the thread cannot start; on failure a is
 * zeroed. */
vtr_status vtr_batch_ahead_init(vtr_batch_ahead *a, const vtr_split *s, int max_batch, bool ahead,
                                vtr_batch_ahead_stage_fn stage, void *ctx, vtr_error *err);

/* Asks for the batch vtr_batcher_pairs(b, caps, B, aug, ...) builds (aug may be NULL; it is
 * copied). The previous request must have been taken. */
void vtr_batch_ahead_request(vtr_batch_ahead *a, const int64_t *caps, int B,
                             const vtr_augment *aug);

/* Waits for the requested batch (builds it, without the thread) and hands over its batcher,
 * valid until the next take: VTR_OK, or vtr_batcher_pairs's failure. */
vtr_status vtr_batch_ahead_take(vtr_batch_ahead *a, vtr_batcher **out, vtr_error *err);

/* Stops the thread (after the batch it is building, if any) and frees everything; leaves
 * a zeroed. Safe on a zeroed value. */
void vtr_batch_ahead_free(vtr_batch_ahead *a);

#endif
