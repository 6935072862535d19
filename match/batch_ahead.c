/* Training batches built one step ahead (batch_ahead.h). */
#include "batch_ahead.h"

#include <string.h>

/* Builds the request into the batcher the caller does not hold, and stages it. */
static void build(vtr_batch_ahead *a)
{
    int k = 1 - a->held;
    a->st = vtr_batcher_pairs(&a->b[k], a->caps, a->B, a->augment ? &a->aug : NULL, &a->err);
    if (a->st == VTR_OK && a->stage)
        a->st = a->stage(a->stage_ctx, k, &a->b[k], &a->err);
}

static void *run(void *arg)
{
    vtr_batch_ahead *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->quit && a->state != VTR_AHEAD_REQUESTED)
            pthread_cond_wait(&a->cv, &a->mu);
        if (a->quit)
            break;
        pthread_mutex_unlock(&a->mu);
        build(a);
        pthread_mutex_lock(&a->mu);
        a->state = VTR_AHEAD_BUILT;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

vtr_status vtr_batch_ahead_init(vtr_batch_ahead *a, const vtr_split *s, int max_batch, bool ahead,
                                vtr_batch_ahead_stage_fn stage, void *ctx, vtr_error *err)
{
    memset(a, 0, sizeof *a);
    a->stage = stage;
    a->stage_ctx = ctx;
    vtr_status st;
    if ((st = vtr_batcher_init(&a->b[0], s, max_batch, err)) ||
        (st = vtr_batcher_init(&a->b[1], s, max_batch, err))) {
        vtr_batch_ahead_free(a);
        return st;
    }
    /* held 0: the first request builds into b[1], the first take hands over b[1] */
    a->threaded = ahead;
    if (!ahead)
        return VTR_OK;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->started = true;
    int rc = pthread_create(&a->thread, NULL, run, a);
    if (rc != 0) {
        a->started = false;
        vtr_batch_ahead_free(a);
        return vtr_fail(err, VTR_ERR_IO, "cannot start the batch thread: %s", strerror(rc));
    }
    return VTR_OK;
}

void vtr_batch_ahead_request(vtr_batch_ahead *a, const int64_t *caps, int B, const vtr_augment *aug)
{
    if (a->threaded)
        pthread_mutex_lock(&a->mu);
    a->caps = caps;
    a->B = B;
    a->augment = aug != NULL;
    if (aug)
        a->aug = *aug;
    a->state = VTR_AHEAD_REQUESTED;
    if (a->threaded) {
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
    }
}

vtr_status vtr_batch_ahead_take(vtr_batch_ahead *a, vtr_batcher **out, vtr_error *err)
{
    if (a->threaded) {
        pthread_mutex_lock(&a->mu);
        while (a->state != VTR_AHEAD_BUILT)
            pthread_cond_wait(&a->cv, &a->mu);
        a->state = VTR_AHEAD_IDLE;
        pthread_mutex_unlock(&a->mu);
    } else {
        build(a);
        a->state = VTR_AHEAD_IDLE;
    }
    a->held = 1 - a->held;
    *out = &a->b[a->held];
    if (a->st != VTR_OK)
        *err = a->err;
    return a->st;
}

void vtr_batch_ahead_free(vtr_batch_ahead *a)
{
    if (a->started) {
        pthread_mutex_lock(&a->mu);
        a->quit = true;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
    }
    if (a->threaded) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
    }
    vtr_batcher_free(&a->b[0]);
    vtr_batcher_free(&a->b[1]);
    memset(a, 0, sizeof *a);
}
