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
#include "match/run_model.h"
#include "match/set_similarity.h"
#include "match/train_data.h"
#include "match/trained_model.h"
#include "text/tokenizer.h"

/* Texts per encoder call (and HGR's texts and items per scored block); set rows past
 * which the model is not grown in both sizes. */
#define EMBED_TEXTS 32
#define EMBED_ROWS 65536

struct vtr_embedder {
    vtr_trained_model trained;
    vtr_run_model model; /* built on first use, rebuilt larger as needed */
    bool built;
    bool hgr;            /* the model's kind: HGR (else VSE) */
    vtr_device device;   /* where the model is built */
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
    /* HGR: a batch's role-graph tensors (EMBED_TEXTS captions of shape's sizes), the
     * caption encoder's scratch, and the encoders' and the scorer's blocks */
    vtr_role_graph_shape shape;
    vtr_graph_caption_scratch sc;
    int32_t *sent_ids;
    uint8_t *verb_masks, *noun_masks;
    int *node_roles;
    float *rel_edges;
    float *block;
    size_t block_cap;
};

void vtr_embedder_close(vtr_embedder *e)
{
    if (!e)
        return;
    vtr_run_model_free(&e->model);
    vtr_trained_model_close(&e->trained);
    vtr_tokens_free(&e->toks);
    vtr_graph_caption_scratch_free(&e->sc);
    free(e->sent_ids);
    free(e->verb_masks);
    free(e->noun_masks);
    free(e->node_roles);
    free(e->rel_edges);
    free(e->block);
    free(e->checkpoint);
    free(e->frames);
    free(e->rows);
    free(e->ids);
    free(e->packed);
    free(e);
}

/* An HGR model's caption shape and the buffers of a batch of role graphs. */
static vtr_status hgr_prepare(vtr_embedder *e, vtr_error *err)
{
    const vtr_train_options *o = &e->trained.o;
    e->hgr = true;
    if (vtr_vocab_layout_of(e->trained.vocab) != VTR_VOCAB_HGR)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: its vocabulary is not an HGR vocabulary",
                        e->checkpoint);
    e->shape = (vtr_role_graph_shape){.max_words = o->hgr_max_words,
                                      .num_verbs = o->hgr.num_verbs,
                                      .num_nouns = o->hgr.num_nouns,
                                      .eos_id = VTR_ROLE_GRAPH_EOS};
    size_t W = (size_t)e->shape.max_words, NV = (size_t)e->shape.num_verbs;
    size_t NN = (size_t)e->shape.num_nouns, N = 1 + NV + NN;
    e->sent_ids = malloc(W * sizeof *e->sent_ids);
    e->verb_masks = malloc(EMBED_TEXTS * (NV ? NV : 1) * W);
    e->noun_masks = malloc(EMBED_TEXTS * (NN ? NN : 1) * W);
    e->node_roles = malloc(EMBED_TEXTS * (NV + NN ? NV + NN : 1) * sizeof *e->node_roles);
    e->rel_edges = malloc(EMBED_TEXTS * N * N * sizeof *e->rel_edges);
    if (!e->sent_ids || !e->verb_masks || !e->noun_masks || !e->node_roles || !e->rel_edges)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory opening %s", e->checkpoint);
    return VTR_OK;
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
    if (st == VTR_OK && e->trained.o.kind == VTR_MODEL_HGR)
        st = hgr_prepare(e, err);
    else if (st == VTR_OK) {
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

int64_t vtr_embedder_dim(const vtr_embedder *e)
{
    return e->hgr ? e->trained.o.hgr.embed_size : e->trained.model.embed_size;
}

int64_t vtr_embedder_feature_dim(const vtr_embedder *e)
{
    return e->hgr ? e->trained.o.hgr.feature_dim : e->trained.model.feature_dim;
}

int64_t vtr_embedder_max_frames(const vtr_embedder *e) { return e->trained.o.max_frames; }
const char *vtr_embedder_model_id(const vtr_embedder *e) { return e->model_id; }
const char *vtr_embedder_checkpoint(const vtr_embedder *e) { return e->checkpoint; }

/* The kept rows of a set of count rows. */
static int64_t kept_rows(const vtr_embedder *e, int64_t count)
{
    int64_t cap = e->trained.o.max_frames;
    return cap > 0 && count > cap ? cap : count;
}

int vtr_embedder_levels(const vtr_embedder *e)
{
    return e->hgr ? 3 : 0;
}

/* A VSE model's vectors per item and text: 1, or K for set embeddings. */
static int64_t vse_vectors(const vtr_embedder *e)
{
    return vtr_vse_vectors(&e->trained.model);
}

int64_t vtr_embedder_item_vectors(const vtr_embedder *e, int64_t count)
{
    return e->hgr ? 1 + 2 * kept_rows(e, count) : vse_vectors(e);
}

int64_t vtr_embedder_text_vectors(const vtr_embedder *e)
{
    return e->hgr ? 1 + e->shape.num_verbs + e->shape.num_nouns : vse_vectors(e);
}

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

vtr_status vtr_embedder_check_text(vtr_embedder *e, const char *text, int *words, int *known,
                                   vtr_error *err)
{
    vtr_status st = vtr_tokenize(text, e->hgr ? VTR_TOKENIZE_WHITESPACE : e->trained.o.tokenizer,
                                 &e->toks, err);
    if (st == VTR_OK && e->toks.n == 0) /* an empty query matches nothing in particular */
        st = vtr_fail(err, VTR_ERR_INVALID, "the text has no word");
    if (st == VTR_OK && e->toks.n > VTR_EMBEDDER_MAX_TOKENS)
        st = vtr_fail(err, VTR_ERR_INVALID, "the text has %zu words; at most %d", e->toks.n,
                      VTR_EMBEDDER_MAX_TOKENS);
    if (st != VTR_OK || !words || !known) /* the counts only when asked */
        return st;
    int unk = vtr_vocab_special_ids(e->trained.vocab).unk, n = 0;
    for (size_t i = 0; i < e->toks.n; i++) {
        int id = vtr_vocab_id(e->trained.vocab, e->toks.tokens[i]);
        n += id >= 0 && id != unk;
    }
    *words = (int)e->toks.n;
    *known = n;
    return VTR_OK;
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
    int mb = e->hgr ? e->model.hgr.max_batch : e->model.vse.max_batch;
    int mf = e->hgr ? e->model.hgr.max_frames : e->model.vse.max_frames;
    int mw = e->hgr ? e->model.hgr.max_words : e->model.vse.max_words;
    if (e->built && B <= mb && T <= mf && L <= mw)
        return VTR_OK;
    int nb = B, nf = T, nw = L;
    if (e->built) {
        nb = B > mb ? B : mb;
        nf = T > mf ? T : mf;
        nw = L > mw ? L : mw;
        if ((int64_t)nb * nf > EMBED_ROWS && (int64_t)nb * nf > T) {
            nb = B;
            nf = T;
        }
    }
    vtr_run_model_free(&e->model);
    e->built = false;
    vtr_status st = vtr_trained_model_build_run(&e->trained, e->device, nb, nf, nw, &e->model,
                                                 err);
    if (st == VTR_OK)
        e->built = true;
    return st;
}

vtr_status vtr_embedder_use_device(vtr_embedder *e, vtr_device device, vtr_error *err)
{
    vtr_run_model_free(&e->model);
    e->built = false;
    e->device = device;
    return fit_model(e, 1, 1, 1, err);
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
        st = e->hgr ? vtr_hgr_encode_videos(&e->model.hgr, out, out + E, out + E + (size_t)len * E,
                                            e->frames, &len, 1, len, err)
                    : vtr_vse_encode_images(&e->model.vse, out, e->frames, &len, 1, len, false,
                                            err);
        if (st) {
            vtr_error_context(err, "set %lld", (long long)i);
            return st;
        }
        src += (size_t)count * F;
        out += (size_t)vtr_embedder_item_vectors(e, count) * E;
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

/* Texts i .. i + B - 1 of a VSE model as one padded batch (B,L): out (B,E). */
static vtr_status vse_texts(vtr_embedder *e, int64_t i, int B, const char *const *texts,
                            float *out, vtr_error *err)
{
    vtr_status st;
    int L = 1;
    size_t used = 0;
    for (int k = 0; k < B; k++) {
        if ((st = vtr_tokenize(texts[k], e->trained.o.tokenizer, &e->toks, err))) {
            vtr_error_context(err, "text %lld", (long long)(i + k));
            return st;
        }
        if (e->toks.n > (size_t)INT_MAX - 2)
            return vtr_fail(err, VTR_ERR_INVALID, "text %lld is too long", (long long)(i + k));
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
        (st = grow((void **)&e->packed, &e->packed_cap, (size_t)B * (size_t)L, sizeof *e->packed,
                   err)))
        return st;
    memset(e->packed, 0, (size_t)B * (size_t)L * sizeof *e->packed);
    const int *src = e->ids;
    for (int k = 0; k < B; k++) {
        memcpy(e->packed + (size_t)k * (size_t)L, src, (size_t)e->lengths[k] * sizeof *src);
        src += e->lengths[k];
    }
    if ((st = vtr_vse_encode_captions(&e->model.vse, out, e->packed, e->lengths, B, L, err)))
        vtr_error_context(err, "texts %lld .. %lld", (long long)i, (long long)(i + B - 1));
    return st;
}

/* Texts i .. i + B - 1 of an HGR model with their graphs (NULL: none): out (B, 1+NV+NN, E),
 * phrases (B, 2). */
static vtr_status hgr_texts(vtr_embedder *e, int64_t i, int B, const char *const *texts,
                            const char *const *graphs, float *out, int *phrases,
                            vtr_error *err)
{
    const vtr_role_graph_shape *sh = &e->shape;
    size_t W = (size_t)sh->max_words, NV = (size_t)sh->num_verbs, NN = (size_t)sh->num_nouns;
    size_t N = 1 + NV + NN, E = (size_t)vtr_embedder_dim(e);
    vtr_status st;
    if ((st = grow((void **)&e->packed, &e->packed_cap, (size_t)B * W, sizeof *e->packed, err)))
        return st;
    for (int k = 0; k < B; k++) {
        vtr_role_graph_tensors t = {.sent_ids = e->sent_ids,
                                    .verb_masks = e->verb_masks + (size_t)k * NV * W,
                                    .noun_masks = e->noun_masks + (size_t)k * NN * W,
                                    .node_roles = e->node_roles + (size_t)k * (NV + NN),
                                    .rel_edges = e->rel_edges + (size_t)k * N * N};
        if ((st = vtr_graph_caption_encode(&e->sc, e->trained.vocab, sh, texts[k],
                                           graphs ? graphs[k] : NULL, &t, err))) {
            vtr_error_context(err, "text %lld", (long long)(i + k));
            return st;
        }
        for (size_t w = 0; w < W; w++)
            e->packed[(size_t)k * W + w] = t.sent_ids[w];
        e->lengths[k] = t.sent_len;
    }
    /* the encoder's outputs: sent (B,E), verbs (B,NV,E), nouns (B,NN,E), counts (2,B) */
    size_t need = (size_t)B * N * E + 2 * (size_t)B;
    if ((st = fit_model(e, B, 1, (int)W, err)) ||
        (st = grow((void **)&e->block, &e->block_cap, need, sizeof *e->block, err)))
        return st;
    float *sent = e->block, *verbs = sent + (size_t)B * E, *nouns = verbs + (size_t)B * NV * E;
    int counts[2 * EMBED_TEXTS];
    vtr_hgr_captions c = {.B = B, .L = (int)W, .ids = e->packed, .lengths = e->lengths,
                          .verb_masks = e->verb_masks, .noun_masks = e->noun_masks,
                          .node_roles = e->node_roles, .rel_edges = e->rel_edges};
    if ((st = vtr_hgr_encode_captions(&e->model.hgr, sent, verbs, nouns, counts,
                                      counts + EMBED_TEXTS, &c, err))) {
        vtr_error_context(err, "texts %lld .. %lld", (long long)i, (long long)(i + B - 1));
        return st;
    }
    for (int k = 0; k < B; k++) {
        float *o = out + (size_t)k * N * E;
        memcpy(o, sent + (size_t)k * E, E * sizeof *o);
        memcpy(o + E, verbs + (size_t)k * NV * E, NV * E * sizeof *o);
        memcpy(o + (1 + NV) * E, nouns + (size_t)k * NN * E, NN * E * sizeof *o);
        if (phrases) {
            phrases[2 * k] = counts[k];
            phrases[2 * k + 1] = counts[EMBED_TEXTS + k];
        }
    }
    return VTR_OK;
}

static vtr_status embed_texts(vtr_embedder *e, int64_t n, const char *const *texts,
                              const char *const *graphs, float *out, int *phrases,
                              vtr_error *err)
{
    size_t per = (size_t)vtr_embedder_text_vectors(e) * (size_t)vtr_embedder_dim(e);
    for (int64_t i = 0; i < n; i += EMBED_TEXTS) {
        int B = n - i < EMBED_TEXTS ? (int)(n - i) : EMBED_TEXTS;
        float *o = out + (size_t)i * per;
        vtr_status st;
        if (e->hgr)
            st = hgr_texts(e, i, B, texts + i, graphs ? graphs + i : NULL, o,
                           phrases ? phrases + 2 * i : NULL, err);
        else {
            st = vse_texts(e, i, B, texts + i, o, err);
            if (phrases)
                memset(phrases + 2 * i, 0, 2 * (size_t)B * sizeof *phrases);
        }
        if (st)
            return st;
    }
    return VTR_OK;
}

vtr_status vtr_embedder_embed_texts(vtr_embedder *e, int64_t n, const char *const *texts,
                                    const char *const *graphs, float *out, int *phrases,
                                    vtr_error *err)
{
    thread_counts saved = threads_enter(e);
    vtr_status st = embed_texts(e, n, texts, graphs, out, phrases, err);
    threads_leave(e, saved);
    return st;
}

/* ---- scores --------------------------------------------------------------------------- */

/* Checks the items' vector counts (and HGR's phrase counts). */
static vtr_status check_score_inputs(const vtr_embedder *e, int64_t n_texts, const int *phrases,
                                     int64_t n_items, const int64_t *vectors, vtr_error *err)
{
    int64_t cap = e->trained.o.max_frames;
    for (int64_t i = 0; i < n_items; i++) {
        int64_t v = vectors[i];
        bool ok = e->hgr ? v >= 3 && v % 2 == 1 && (cap <= 0 || (v - 1) / 2 <= cap)
                         : v == vse_vectors(e);
        if (!ok)
            return e->hgr ? vtr_fail(err, VTR_ERR_INVALID, "item %lld has %lld vectors; an HGR "
                                     "item has 1 + 2n (n frames, 1 .. %lld)", (long long)i,
                                     (long long)v, (long long)cap)
                          : vtr_fail(err, VTR_ERR_INVALID, "item %lld has %lld vectors; this "
                                     "model's items have %lld", (long long)i, (long long)v,
                                     (long long)vse_vectors(e));
    }
    if (!e->hgr)
        return VTR_OK;
    if (!phrases)
        return vtr_fail(err, VTR_ERR_INVALID, "an HGR model scores texts with their phrase counts");
    for (int64_t q = 0; q < n_texts; q++)
        if (phrases[2 * q] < 0 || phrases[2 * q] > e->shape.num_verbs || phrases[2 * q + 1] < 0 ||
            phrases[2 * q + 1] > e->shape.num_nouns)
            return vtr_fail(err, VTR_ERR_INVALID, "text %lld: %d verbs and %d nouns (at most %d, "
                            "%d)", (long long)q, phrases[2 * q], phrases[2 * q + 1],
                            e->shape.num_verbs, e->shape.num_nouns);
    return VTR_OK;
}

/* HGR: items in blocks of EMBED_TEXTS (their frames unpacked into (Bv,T,E) levels) against
 * texts in blocks of EMBED_TEXTS, through vtr_hgr_score_block. */
static vtr_status hgr_score(vtr_embedder *e, int64_t n_texts, const float *texts,
                            const int *phrases, int64_t n_items, const int64_t *vectors,
                            const float *rows, float *scores, float *levels, vtr_error *err)
{
    const int BS = EMBED_TEXTS;
    size_t E = (size_t)vtr_embedder_dim(e), NV = (size_t)e->shape.num_verbs;
    size_t NN = (size_t)e->shape.num_nouns, N = 1 + NV + NN;
    int T = (int)(e->trained.o.max_frames > 0 ? e->trained.o.max_frames : VTR_HGR_MAX_FRAMES);
    size_t per_block = (size_t)BS * E * (1 + 2 * (size_t)T) + (size_t)BS * N * E +
                       4 * (size_t)BS * BS;
    vtr_status st;
    if ((st = fit_model(e, BS, T, e->shape.max_words, err)) ||
        (st = grow((void **)&e->block, &e->block_cap, per_block, sizeof *e->block, err)))
        return st;
    float *glob = e->block, *verb = glob + (size_t)BS * E, *noun = verb + (size_t)BS * T * E;
    float *sent = noun + (size_t)BS * T * E, *verbs = sent + (size_t)BS * E;
    float *nouns = verbs + (size_t)BS * NV * E, *fused = nouns + (size_t)BS * NN * E;
    float *lv = fused + (size_t)BS * BS;
    int lengths[EMBED_TEXTS], nv[EMBED_TEXTS], nn[EMBED_TEXTS];
    size_t plane = (size_t)n_texts * (size_t)n_items;
    const float *item = rows;
    for (int64_t i0 = 0; i0 < n_items; i0 += BS) {
        int bv = n_items - i0 < BS ? (int)(n_items - i0) : BS, bt = 1;
        for (int v = 0; v < bv; v++) {
            lengths[v] = (int)((vectors[i0 + v] - 1) / 2);
            bt = lengths[v] > bt ? lengths[v] : bt;
        }
        memset(verb, 0, (size_t)bv * bt * E * sizeof *verb);
        memset(noun, 0, (size_t)bv * bt * E * sizeof *noun);
        for (int v = 0; v < bv; v++) {
            size_t len = (size_t)lengths[v];
            memcpy(glob + (size_t)v * E, item, E * sizeof *item);
            memcpy(verb + (size_t)v * bt * E, item + E, len * E * sizeof *item);
            memcpy(noun + (size_t)v * bt * E, item + (1 + len) * E, len * E * sizeof *item);
            item += (1 + 2 * len) * E;
        }
        for (int64_t q0 = 0; q0 < n_texts; q0 += BS) {
            int bc = n_texts - q0 < BS ? (int)(n_texts - q0) : BS;
            for (int c = 0; c < bc; c++) {
                const float *t = texts + (size_t)(q0 + c) * N * E;
                memcpy(sent + (size_t)c * E, t, E * sizeof *t);
                memcpy(verbs + (size_t)c * NV * E, t + E, NV * E * sizeof *t);
                memcpy(nouns + (size_t)c * NN * E, t + (1 + NV) * E, NN * E * sizeof *t);
                nv[c] = phrases[2 * (q0 + c)];
                nn[c] = phrases[2 * (q0 + c) + 1];
            }
            if ((st = vtr_hgr_score_block(&e->model.hgr, fused, levels ? lv : NULL, glob, verb,
                                          noun, lengths, bv, bt, sent, verbs, nouns, nv, nn, bc,
                                          err)))
                return st;
            for (int c = 0; c < bc; c++)
                for (int v = 0; v < bv; v++) {
                    size_t at = (size_t)(q0 + c) * (size_t)n_items + (size_t)(i0 + v);
                    scores[at] = fused[(size_t)v * bc + c];
                    for (int l = 0; levels && l < 3; l++)
                        levels[l * plane + at] = lv[(size_t)l * bv * bc + (size_t)v * bc + c];
                }
        }
    }
    return VTR_OK;
}

/* Set embeddings: the smooth-Chamfer scores of the texts' sets against the items' sets
 * (symmetric in its two sides), in blocks of EMBED_ROWS texts x items. */
static vtr_status set_score(vtr_embedder *e, int64_t n_texts, const float *texts,
                            int64_t n_items, const float *rows, float *scores, vtr_error *err)
{
    const vtr_vse_config *c = &e->trained.model;
    int K = c->set.K, E = c->embed_size, BS = EMBED_ROWS / K;
    size_t bytes = vtr_smooth_chamfer_scratch_size(BS, BS, K, K);
    vtr_status st = grow((void **)&e->block, &e->block_cap, bytes / sizeof *e->block + 1,
                         sizeof *e->block, err);
    if (st != VTR_OK)
        return st;
    thread_counts saved = threads_enter(e);
    for (int64_t q0 = 0; q0 < n_texts; q0 += BS)
        for (int64_t i0 = 0; i0 < n_items; i0 += BS) {
            int nq = n_texts - q0 < BS ? (int)(n_texts - q0) : BS;
            int ni = n_items - i0 < BS ? (int)(n_items - i0) : BS;
            vtr_smooth_chamfer_forward(scores + (size_t)q0 * (size_t)n_items + (size_t)i0,
                                       (long)n_items, e->block,
                                       texts + (size_t)q0 * (size_t)K * (size_t)E,
                                       rows + (size_t)i0 * (size_t)K * (size_t)E, nq, ni, K, K,
                                       E, c->set.alpha);
        }
    threads_leave(e, saved);
    return VTR_OK;
}

vtr_status vtr_embedder_score(vtr_embedder *e, int64_t n_texts, const float *texts,
                              const int *phrases, int64_t n_items, const int64_t *vectors,
                              const float *rows, float *scores, float *levels, vtr_error *err)
{
    vtr_status st = check_score_inputs(e, n_texts, phrases, n_items, vectors, err);
    if (st != VTR_OK || n_texts == 0 || n_items == 0)
        return st;
    if (!e->hgr && levels)
        for (size_t k = 0; k < 3 * (size_t)n_texts * (size_t)n_items; k++)
            levels[k] = NAN;
    if (!e->hgr && e->trained.model.set.K > 0)
        return set_score(e, n_texts, texts, n_items, rows, scores, err);
    if (!e->hgr) {
        size_t E = (size_t)vtr_embedder_dim(e);
        for (int64_t q = 0; q < n_texts; q++)
            for (int64_t i = 0; i < n_items; i++) {
                double dot = 0;
                for (size_t d = 0; d < E; d++)
                    dot += (double)texts[(size_t)q * E + d] * rows[(size_t)i * E + d];
                scores[(size_t)q * (size_t)n_items + (size_t)i] = (float)dot;
            }
        return VTR_OK;
    }
    thread_counts saved = threads_enter(e);
    st = hgr_score(e, n_texts, texts, phrases, n_items, vectors, rows, scores, levels, err);
    threads_leave(e, saved);
    return st;
}
