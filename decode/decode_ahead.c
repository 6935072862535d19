/* Decoding files ahead on a thread (decode_ahead.h): a ring of depth slots between one
 * decoding thread and the caller. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "decode_ahead.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    vtr_decoded_item item;
    vtr_status st;
    vtr_error err;
} slot;

struct vtr_decode_ahead {
    char **paths;
    size_t n;
    vtr_decode_options opt;
    int depth;
    slot *ring;             /* item i lives in ring[i % depth] from decoded to taken */
    size_t decoded, taken;  /* items decoded so far; items handed out so far */
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* decoded, taken or stop moved */
    pthread_t thread;
    bool started;
};

static void *decode_thread(void *arg)
{
    vtr_decode_ahead *d = arg;
    for (size_t i = 0; i < d->n; i++) {
        pthread_mutex_lock(&d->lock);
        while (!d->stop && d->decoded - d->taken >= (size_t)d->depth)
            pthread_cond_wait(&d->changed, &d->lock);
        bool stop = d->stop;
        pthread_mutex_unlock(&d->lock);
        if (stop)
            break;
        /* the slot is free: only this thread writes it until decoded moves past it */
        slot *s = &d->ring[i % (size_t)d->depth];
        vtr_error_clear(&s->err);
        memset(&s->item, 0, sizeof s->item);
        s->st = vtr_decode_item(d->paths[i], &d->opt, NULL, &s->item, &s->err);
        pthread_mutex_lock(&d->lock);
        d->decoded++;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
    }
    return NULL;
}

vtr_status vtr_decode_ahead_start(const char *const *paths, size_t n,
                                  const vtr_decode_options *o, int depth,
                                  vtr_decode_ahead **out, vtr_error *err)
{
    *out = NULL;
    if (depth < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "decoding ahead: depth %d (must be >= 0)", depth);
    vtr_decode_ahead *d = calloc(1, sizeof *d);
    if (!d)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    d->n = n;
    d->opt = *o;
    d->depth = depth;
    d->paths = calloc(n ? n : 1, sizeof *d->paths);
    d->ring = calloc((size_t)(depth ? depth : 1), sizeof *d->ring);
    bool ok = d->paths && d->ring;
    for (size_t i = 0; ok && i < n; i++)
        ok = (d->paths[i] = strdup(paths[i])) != NULL;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, NULL);
    if (!ok) {
        vtr_decode_ahead_free(d);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    if (depth > 0 && pthread_create(&d->thread, NULL, decode_thread, d) != 0) {
        vtr_decode_ahead_free(d);
        return vtr_fail(err, VTR_ERR_IO, "decoding ahead: cannot start a thread");
    }
    d->started = depth > 0;
    *out = d;
    return VTR_OK;
}

vtr_status vtr_decode_ahead_next(vtr_decode_ahead *d, vtr_decoded_item *item, vtr_error *err)
{
    memset(item, 0, sizeof *item);
    if (d->taken == d->n)
        return vtr_fail(err, VTR_ERR_INVALID, "decoding ahead: no more items");
    if (!d->started) /* depth 0: in turn */
        return vtr_decode_item(d->paths[d->taken++], &d->opt, NULL, item, err);
    pthread_mutex_lock(&d->lock);
    while (d->decoded == d->taken)
        pthread_cond_wait(&d->changed, &d->lock);
    pthread_mutex_unlock(&d->lock);
    slot *s = &d->ring[d->taken % (size_t)d->depth];
    vtr_status st = s->st;
    if (st == VTR_OK)
        *item = s->item;
    else
        *err = s->err;
    memset(&s->item, 0, sizeof s->item);
    pthread_mutex_lock(&d->lock);
    d->taken++;
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
    return st;
}

void vtr_decode_ahead_free(vtr_decode_ahead *d)
{
    if (!d)
        return;
    if (d->started) {
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        /* the items decoded and not taken */
        for (size_t i = d->taken; i < d->decoded; i++)
            if (d->ring[i % (size_t)d->depth].st == VTR_OK)
                vtr_decoded_item_free(&d->ring[i % (size_t)d->depth].item);
    }
    pthread_cond_destroy(&d->changed);
    pthread_mutex_destroy(&d->lock);
    for (size_t i = 0; d->paths && i < d->n; i++)
        free(d->paths[i]);
    free(d->paths);
    free(d->ring);
    free(d);
}
