/* A trained model opened for inference (embedder.h). */
#define _POSIX_C_SOURCE 200809L
#include "embedder.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "lib/blas_threads.h"
#include "lib/hash.h"
#include "match/train_data.h"
#include "match/trained_model.h"
#include "text/tokenizer.h"

/* Texts per encoder call; set rows past which the model is not grown in both sizes. */
#define EMBED_TEXTS 32
#define EMBED_ROWS 65536

struct vtr_embedder {
    vtr_trained_model trained;
    vtr_vse_model model; /* built on first use, rebuilt larger as needed */
    bool built;
    int threads;
    char *checkpoint;
    char model_id[VTR_SHA256_HEX_SIZE];
    vtr_tokens toks;
    /* one item's input, grown as needed */
    float *frames;    /* (T,F) a set's kept rows */
    size_t frames_cap;
    int *rows;        /* (count) the indices of the rows it keeps */
    size_t rows_cap;
    int *ids;         /* a batch's texts' ids, one after another */
    size_t ids_cap;
    int *packed;      /* (B,L) the same, padded */
    size_t packed_cap;
    int lengths[EMBED_TEXTS];
};

void vtr_embedder_close(vtr_embedder *e)
{
    if (!e)
        return;
    vtr_vse_model_free(&e->model);
    vtr_trained_model_close(&e->trained);
    vtr_tokens_free(&e->toks);
    free(e->checkpoint);
    free(e->frames);
    free(e->rows);
    free(e->ids);
    free(e->packed);
    free(e);
}

vtr_status vtr_embedder_open(const char *checkpoint, const char *vocab, int threads,
                             vtr_embedder **out, vtr_error *err)
{
    *out = NULL;
    if (threads < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "threads %d is not >= 0", threads);
    vtr_embedder *e = calloc(1, sizeof *e);
    if (!e || !(e->checkpoint = strdup(checkpoint))) {
        vtr_embedder_close(e);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory opening %s", checkpoint);
    }
    e->threads = threads;
    vtr_status st = vtr_trained_model_open(checkpoint, NULL, NULL, 0, vocab, &e->trained, err);
    if (st == VTR_OK)
        st = vtr_file_sha256(checkpoint, e->model_id, err);
    if (st == VTR_OK) {
        vtr_vocab_specials sp = vtr_vocab_special_ids(e->trained.vocab);
        if (vtr_vocab_layout_of(e->trained.vocab) != VTR_VOCAB_VSE || sp.start < 0 ||
            sp.end < 0 || sp.unk < 0)
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: its vocabulary is not a VSE vocabulary "
                          "(<start>, <end>, <unk>)", checkpoint);
    }
    if (st != VTR_OK) {
        vtr_embedder_close(e);
        return st;
    }
    *out = e;
    return VTR_OK;
}

int64_t vtr_embedder_dim(const vtr_embedder *e) { return e->trained.model.embed_size; }
int64_t vtr_embedder_feature_dim(const vtr_embedder *e) { return e->trained.model.feature_dim; }
int64_t vtr_embedder_max_frames(const vtr_embedder *e) { return e->trained.o.max_frames; }
const char *vtr_embedder_model_id(const vtr_embedder *e) { return e->model_id; }
const char *vtr_embedder_checkpoint(const vtr_embedder *e) { return e->checkpoint; }

vtr_status vtr_embedder_check_set(const vtr_embedder *e, const vtr_tensor *t, vtr_error *err)
{
    int64_t F = vtr_embedder_feature_dim(e);
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16)
        return vtr_fail(err, VTR_ERR_INVALID, "features are %s; float32 or float16 expected",
                        vtr_dtype_name(t->dtype));
    if (t->ndim != 1 && t->ndim != 2)
        return vtr_fail(err, VTR_ERR_INVALID, "features have %d dimensions; (rows, %lld) "
                        "expected", t->ndim, (long long)F);
    int64_t cols = t->shape[t->ndim - 1], n = t->ndim == 2 ? t->shape[0] : 1;
    if (cols != F)
        return vtr_fail(err, VTR_ERR_INVALID, "%lld columns; the model takes %lld",
                        (long long)cols, (long long)F);
    if (n < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "no rows");
    if (n > INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "%lld rows; at most %d", (long long)n, INT_MAX);
    for (int64_t r = 0; r < n; r++)
        for (int64_t d = 0; d < F; d++) {
            size_t i = (size_t)(r * F + d);
            float v = t->dtype == VTR_F32 ? ((const float *)t->data)[i]
                                          : vtr_half_to_float(((const uint16_t *)t->data)[i]);
            if (!isfinite(v))
                return vtr_fail(err, VTR_ERR_INVALID, "row %lld has a non-finite value",
                                (long long)r);
        }
    return VTR_OK;
}

vtr_status vtr_embedder_check_text(vtr_embedder *e, const char *text, vtr_error *err)
{
    return vtr_tokenize(text, e->trained.o.tokenizer, &e->toks, err);
}

/* Grows *buf (of *cap elements of size sz) to at least n elements. */
static vtr_status grow(void **buf, size_t *cap, size_t n, size_t sz, vtr_error *err)
{
    if (n <= *cap)
        return VTR_OK;
    size_t c = *cap ? *cap : 256;
    while (c < n)
        c *= 2;
    void *p = realloc(*buf, c * sz);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a batch of embeddings");
    *buf = p;
    *cap = c;
    return VTR_OK;
}

/* Makes sure the model takes B items of T set rows or L tokens: rebuilt (the parameters
 * reloaded from the checkpoint) with the larger of each size, or with exactly these when
 * that would pass EMBED_ROWS set rows (one very long set after a batch of texts). */
static vtr_status fit_model(vtr_embedder *e, int B, int T, int L, vtr_error *err)
{
    vtr_vse_model *m = &e->model;
    if (e->built && B <= m->max_batch && T <= m->max_frames && L <= m->max_words)
        return VTR_OK;
    int nb = B, nf = T, nw = L;
    if (e->built) {
        nb = B > m->max_batch ? B : m->max_batch;
        nf = T > m->max_frames ? T : m->max_frames;
        nw = L > m->max_words ? L : m->max_words;
        if ((int64_t)nb * nf > EMBED_ROWS && (int64_t)nb * nf > T) {
            nb = B;
            nf = T;
        }
    }
    vtr_vse_model_free(m);
    e->built = false;
    vtr_status st = vtr_trained_model_build(&e->trained, nb, nf, nw, m, err);
    if (st == VTR_OK)
        e->built = true;
    return st;
}

/* Runs fn under the embedder's thread counts. */
typedef struct thread_counts {
    int omp, blas;
} thread_counts;

static thread_counts threads_enter(const vtr_embedder *e)
{
    thread_counts saved = {0, 0};
    if (e->threads > 0) {
        saved.omp = omp_get_max_threads();
        omp_set_num_threads(e->threads);
        saved.blas = vtr_blas_set_threads(e->threads);
    }
    return saved;
}

static void threads_leave(const vtr_embedder *e, thread_counts saved)
{
    if (e->threads > 0) {
        omp_set_num_threads(saved.omp);
        if (saved.blas > 0)
            vtr_blas_set_threads(saved.blas);
    }
}

static vtr_status embed_sets(vtr_embedder *e, int64_t n, const int64_t *counts,
                             const float *rows, float *out, vtr_error *err)
{
    size_t F = (size_t)vtr_embedder_feature_dim(e), E = (size_t)vtr_embedder_dim(e);
    vtr_status st;
    for (int64_t i = 0; i < n; i++)
        if (counts[i] < 1 || counts[i] > INT_MAX)
            return vtr_fail(err, VTR_ERR_INVALID, "set %lld: %lld rows; 1 to %d expected",
                            (long long)i, (long long)counts[i], INT_MAX);
    const float *src = rows;
    for (int64_t i = 0; i < n; i++) {
        /* each set alone (B = 1, T = its kept rows): see embedder.h */
        int count = (int)counts[i], len;
        if ((st = grow((void **)&e->rows, &e->rows_cap, (size_t)count, sizeof *e->rows, err)))
            return st;
        len = vtr_frame_subsample(e->rows, count, e->trained.o.max_frames);
        if ((st = fit_model(e, 1, len, 1, err)) ||
            (st = grow((void **)&e->frames, &e->frames_cap, (size_t)len * F, sizeof *e->frames,
                       err)))
            return st;
        for (int t = 0; t < len; t++) {
            const float *row = src + (size_t)e->rows[t] * F;
            for (size_t d = 0; d < F; d++)
                if (!isfinite(row[d]))
                    return vtr_fail(err, VTR_ERR_INVALID, "set %lld: row %d has a non-finite "
                                    "value", (long long)i, e->rows[t]);
            memcpy(e->frames + (size_t)t * F, row, F * sizeof *row);
        }
        if ((st = vtr_vse_encode_images(&e->model, out + (size_t)i * E, e->frames, &len, 1, len,
                                        false, err))) {
            vtr_error_context(err, "set %lld", (long long)i);
            return st;
        }
        src += (size_t)count * F;
    }
    return VTR_OK;
}

vtr_status vtr_embedder_embed_sets(vtr_embedder *e, int64_t n, const int64_t *counts,
                                   const float *rows, float *out, vtr_error *err)
{
    thread_counts saved = threads_enter(e);
    vtr_status st = embed_sets(e, n, counts, rows, out, err);
    threads_leave(e, saved);
    return st;
}

static vtr_status embed_texts(vtr_embedder *e, int64_t n, const char *const *texts, float *out,
                              vtr_error *err)
{
    size_t E = (size_t)vtr_embedder_dim(e);
    vtr_status st;
    for (int64_t i = 0; i < n; i += EMBED_TEXTS) {
        /* texts i .. i+B-1 as one padded batch (B,L) */
        int B = n - i < EMBED_TEXTS ? (int)(n - i) : EMBED_TEXTS, L = 1;
        size_t used = 0;
        for (int k = 0; k < B; k++) {
            if ((st = vtr_tokenize(texts[i + k], e->trained.o.tokenizer, &e->toks, err))) {
                vtr_error_context(err, "text %lld", (long long)(i + k));
                return st;
            }
            if (e->toks.n > (size_t)INT_MAX - 2)
                return vtr_fail(err, VTR_ERR_INVALID, "text %lld is too long",
                                (long long)(i + k));
            size_t count;
            if ((st = grow((void **)&e->ids, &e->ids_cap, used + e->toks.n + 2, sizeof *e->ids,
                           err)) ||
                (st = vtr_vocab_encode(e->trained.vocab, e->toks.tokens, e->toks.n, true,
                                       e->ids + used, &count, err)))
                return st;
            used += count;
            e->lengths[k] = (int)count;
            L = (int)count > L ? (int)count : L;
        }
        if ((st = fit_model(e, B, 1, L, err)) ||
            (st = grow((void **)&e->packed, &e->packed_cap, (size_t)B * (size_t)L,
                       sizeof *e->packed, err)))
            return st;
        memset(e->packed, 0, (size_t)B * (size_t)L * sizeof *e->packed);
        const int *src = e->ids;
        for (int k = 0; k < B; k++) {
            memcpy(e->packed + (size_t)k * (size_t)L, src, (size_t)e->lengths[k] * sizeof *src);
            src += e->lengths[k];
        }
        if ((st = vtr_vse_encode_captions(&e->model, out + (size_t)i * E, e->packed, e->lengths,
                                          B, L, err))) {
            vtr_error_context(err, "texts %lld .. %lld", (long long)i, (long long)(i + B - 1));
            return st;
        }
    }
    return VTR_OK;
}

vtr_status vtr_embedder_embed_texts(vtr_embedder *e, int64_t n, const char *const *texts,
                                    float *out, vtr_error *err)
{
    thread_counts saved = threads_enter(e);
    vtr_status st = embed_texts(e, n, texts, out, err);
    threads_leave(e, saved);
    return st;
}
