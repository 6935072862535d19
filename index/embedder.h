/* A trained model (a vtr-train checkpoint) opened for inference: feature sets and texts
 * in, embeddings out, and the scores of texts against items. What vtr-aggregate,
 * vtr-index and vtr-search embed with; vtr-eval's embeddings of a split (match/encode.h)
 * are the same, see below.
 *
 * Vectors. A model gives each item (a set) and each text one or several vectors of E
 * floats, and says how it scores them (DESIGN.md: "an item may carry several vectors,
 * and a model says how it scores them"):
 *   VSE (VSE++, VSE∞, ...)  an item 1 vector, a text 1 vector, both L2-normalized; the
 *                           score is their inner product (the cosine).
 *   HGR, HGR∞ (match/hgr_model.h)  an item of n kept frames (n <= data.max_frames) 1 + 2n
 *                           vectors: the global vector (L2-normalized), then the n
 *                           verb-level and the n noun-level frame embeddings (as the model
 *                           gives them, not normalized: the attended frames depend on
 *                           their lengths); a text 1 + NV + NN vectors: the sentence node
 *                           (L2-normalized), NV verb and NN noun phrase nodes, and its
 *                           phrase counts (verbs, nouns); the score is the fused score of
 *                           the three levels (vtr_hgr_score_block).
 *   set embeddings (a VSE model with model.set_size K, match/vse_model.h)  an item K
 *                           vectors, a text K vectors, all L2-normalized; the score is
 *                           their smooth-Chamfer similarity (match/set_similarity.h).
 * vtr_embedding_index stores every vector as a unit row with its norm, so an index gives
 * back what the score needs (index/text_search.h).
 *
 * The model is opened as vtr-eval opens it (match/trained_model.h: the config stored in
 * the checkpoint, the vocabulary beside it or named by the config) and runs in evaluation
 * mode. Sets and texts are prepared exactly as training prepares them
 * (match/train_data.h): a set longer than the config's data.max_frames keeps the rows
 * round(linspace(0, n-1, max_frames)); a VSE text is tokenized with data.tokenizer and
 * encoded as <start> w1 ... wn <end>, unknown words as <unk>; an HGR text is encoded with
 * its role graph as vtr_graph_caption_encode does (a text given without a graph gets the
 * root alone, so only the global level can match it: its verb and noun levels score 0).
 *
 * Sets are encoded one by one (a batch of one, without padding), so that a set's
 * embedding is a function of the set alone: it does not depend on the other sets of a
 * call or on how work is split into calls, whatever the CPU and BLAS kernels (a batched
 * product may round a row differently depending on the rows around it, as OpenBLAS's
 * AVX2 kernels do). That is what an index needs: the same video gives the same bytes in
 * any run. Texts are encoded in batches of up to 32 (ten times faster than one by one at
 * E = 1024, for batches of queries and captions): a text's embedding is a function of its
 * batch, the same in every run, and equal to its embedding alone up to float32 rounding
 * (bit for bit where the BLAS rounds rows alike in any batch, as on this project's test
 * machine). The model's buffers grow to the longest set and the largest text batch seen.
 * vtr-eval encodes in batches: its embeddings are these up to rounding, and these bytes
 * when it runs with batches of one (the tests check both).
 *
 * Threads: one embedder is used by one thread at a time. The encoders use OpenMP and BLAS
 * threads; with threads > 0 the calls set both to that count for their duration (process-
 * wide for BLAS, lib/blas_threads.h) and restore them after.
 *
 * Errors start with the checkpoint's path where they concern the model, and name the set
 * or text (its index in the call) where they concern one input.
 */
#ifndef VTR_EMBEDDER_H
#define VTR_EMBEDDER_H

#include <stdint.h>

#include "lib/device.h"
#include "lib/error.h"
#include "lib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_embedder vtr_embedder;

/* Opens a trained model. checkpoint: a vtr-train checkpoint (safetensors with the resolved
 * config). vocab: the vocabulary JSON, or NULL to find it the way vtr-eval does
 * (vocab.json in the checkpoint's directory, else the config's data.vocab; a checkpoint
 * that records the vocabulary's SHA-256 refuses another file). threads: 0 = OpenMP's and
 * the BLAS's defaults. Reads the whole checkpoint once for its SHA-256 (the model id).
 * Fails with what vtr_trained_model_open reports, VTR_ERR_INVALID for threads < 0 or a
 * vocabulary that is not of the VSE layout, VTR_ERR_IO, VTR_ERR_NOMEM. *out is NULL on
 * failure. */
vtr_status vtr_embedder_open(const char *checkpoint, const char *vocab, int threads,
                             vtr_embedder **out, vtr_error *err);

/* Where the model encodes from now on (VTR_DEVICE_CPU after open): VTR_DEVICE_CUDA runs
 * the encoders on the current GPU (vtr_cuda_init first; the inputs and the embeddings stay
 * in host memory, as on the CPU). The model is made there at once, so that a model the GPU
 * does not run (HGR, set embeddings, vse_model.h) or no GPU fails here, with the model's
 * one-line error. */
vtr_status vtr_embedder_use_device(vtr_embedder *e, vtr_device device, vtr_error *err);

/* Frees everything. Safe on NULL. */
void vtr_embedder_close(vtr_embedder *e);

int64_t vtr_embedder_dim(const vtr_embedder *e);         /* E, the embedding size */
int64_t vtr_embedder_feature_dim(const vtr_embedder *e); /* F, the per-element feature size */
/* The config's data.max_frames: sets keep at most this many rows; 0: every row. */
int64_t vtr_embedder_max_frames(const vtr_embedder *e);

/* A stable identity of the model: the hex SHA-256 (64 lowercase digits) of the checkpoint
 * file, what an index records as its model so that embeddings of two models are never
 * mixed. Lives with e. */
const char *vtr_embedder_model_id(const vtr_embedder *e);

/* The checkpoint's path as given to open. Lives with e. */
const char *vtr_embedder_checkpoint(const vtr_embedder *e);

/* Whether t is a set this embedder takes: float32 or float16, (n, F) with n >= 1 rows or
 * (F,) for one row, every value finite. VTR_ERR_INVALID naming the cause ("1024
 * columns; the model takes 2048", "row 3 has a non-finite value"); nothing is read past
 * the first bad value. For programs that check each item before batching it. */
vtr_status vtr_embedder_check_set(const vtr_embedder *e, const vtr_tensor *t, vtr_error *err);

/* The most tokens of a text the programs embed (queries, captions): a longer text is
 * refused rather than embedded (GPO's cost and memory grow with it: a 24,000-word query
 * took 35 s and 417 MB). Captions of the datasets have tens of words. */
#define VTR_EMBEDDER_MAX_TOKENS 1000

/* Whether text is one this embedder takes: valid UTF-8 (it tokenizes), at least one word
 * (an empty text is refused) and at most VTR_EMBEDDER_MAX_TOKENS tokens. VTR_ERR_FORMAT
 * ("invalid UTF-8 at byte N") or VTR_ERR_INVALID ("the text has no word", "the text has
 * 24000 words; at most 1000") otherwise. words, known: both NULL, or both set to the
 * text's words and how many of them the model's vocabulary has (the others embed as
 * <unk>). */
vtr_status vtr_embedder_check_text(vtr_embedder *e, const char *text, int *words, int *known,
                                   vtr_error *err);

/* The vectors of an item of count >= 1 set rows (VSE: 1; sets: K; HGR: 1 + 2 min(count,
 * max_frames)), and of a text (VSE: 1; sets: K; HGR: 1 + NV + NN). */
int64_t vtr_embedder_item_vectors(const vtr_embedder *e, int64_t count);
int64_t vtr_embedder_text_vectors(const vtr_embedder *e);

/* The levels a score is the mean of (HGR: 3, global, verb and noun; otherwise 0). */
int vtr_embedder_levels(const vtr_embedder *e);

/* n sets; set i is counts[i] >= 1 rows of F floats, the sets' rows concatenated in rows.
 * out: the vectors of each set (vtr_embedder_item_vectors of its count) one set after
 * another, E floats each (VSE: n x E). Sets longer than the model's max_frames are
 * subsampled as in training (data.max_frames rule). Any n >= 0 (each set encoded alone,
 * above). Fails with VTR_ERR_INVALID naming the set for a count < 1 or above INT_MAX or a
 * non-finite value in a row it keeps, VTR_ERR_NOMEM; out is then unspecified. */
vtr_status vtr_embedder_embed_sets(vtr_embedder *e, int64_t n, const int64_t *counts,
                                   const float *rows, float *out, vtr_error *err);

/* n captions/queries (NUL-terminated UTF-8), tokenized and encoded as in training, in
 * batches of 32 (above). out: n x vtr_embedder_text_vectors x E. graphs: NULL, or n role
 * graphs (the JSON text of one value of sent2rolegraph.augment.json, or NULL for none) of
 * an HGR model's texts (a VSE model ignores them). phrases: NULL, or n x 2 ints, each
 * text's verb and noun phrase counts (HGR; 0 for a VSE model). A VSE text with no known
 * word still gets an embedding (its words become <unk>, as in training; an empty text is
 * <start> <end>). Fails with VTR_ERR_FORMAT naming the text for invalid UTF-8 or a graph
 * that does not parse, VTR_ERR_INVALID for an empty HGR text, VTR_ERR_NOMEM; out is then
 * unspecified. */
vtr_status vtr_embedder_embed_texts(vtr_embedder *e, int64_t n, const char *const *texts,
                                    const char *const *graphs, float *out, int *phrases,
                                    vtr_error *err);

/* The scores of n_texts embedded texts (texts and phrases as vtr_embedder_embed_texts gives
 * them; phrases may be NULL for a VSE model) against n_items items (item i has vectors[i]
 * vectors, the items' vectors one item after another in rows, as vtr_embedder_embed_sets
 * gives them or an index gives them back): scores (n_texts, n_items); levels, when not
 * NULL, (3, n_texts, n_items): HGR's global, verb and noun levels, NaN for other models.
 * HGR scores items in blocks of 32 x 32 texts; a score does not depend on the other
 * items and texts of the call beyond BLAS's rounding of a block. VTR_ERR_INVALID naming the
 * item for a vector count the model does not give (VSE: 1; sets: K; HGR: 1 + 2n, 1 <= n <=
 * max_frames) or phrase counts out of range; VTR_ERR_NOMEM. */
vtr_status vtr_embedder_score(vtr_embedder *e, int64_t n_texts, const float *texts,
                              const int *phrases, int64_t n_items, const int64_t *vectors,
                              const float *rows, float *scores, float *levels, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
