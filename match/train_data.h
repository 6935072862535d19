/* The data a VSE or HGR run reads, and its batches. Layout: docs/training.md.
 *
 * A split (train, val, test) is read from two places: the catalog (lib/catalog.h) names
 * its items, in item id order, and their captions, in ordinal order; the feature store
 * (lib/feature_store.h) holds each item's set of feature rows (frames, regions) under the
 * item's key. A training pair is one caption and its item, so an epoch runs over the
 * captions of the split (as the reference data loaders do).
 *
 * Captions are tokenized (text/tokenizer.h) and encoded with a VSE vocabulary
 * (text/vocab.h) as <start> w1 ... wn <end>; the vocabulary is loaded from a reference
 * JSON or built from the training captions (vtr_split_build_vocab). HGR instead encodes
 * each caption's whitespace words with an HGR vocabulary (the catalog's, or one built from
 * the training captions), with its role graph's tensors (vtr_split_encode_graphs), and the
 * same batcher hands them out as a vtr_hgr_batch beside the vtr_vse_batch.
 *
 * Batches (vtr_batcher) are padded as the model wants them (match/vse_model.h): frames
 * (B,T,F) float32 with zero rows after each set's length, ids (B,L) with 0 (<pad>) after
 * each caption's length. Sets longer than max_frames keep the rows round(linspace(0, n-1,
 * max_frames)) (HGR's sampling; numpy's round, half to even). Training batches may apply
 * GPO's size augmentation (aggregate/gpo.h) to each set and caption, from RNG streams that
 * depend only on (seed, epoch, caption index), so a batch is the same whatever ran before
 * it: that is what makes a resumed run exact.
 *
 * Random streams (lib/rng.h) of a run's seed: the model's initialization uses streams
 * 0 .. (tensors - 1) (vtr_vse_init_params); the epoch order uses VTR_STREAM_ORDER + epoch;
 * augmentation of caption c in epoch e uses VTR_STREAM_AUGMENT + 2 (e n_caps + c) for its
 * set and that + 1 for its caption.
 */
#ifndef VTR_TRAIN_DATA_H
#define VTR_TRAIN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/catalog.h"
#include "lib/error.h"
#include "lib/feature_store.h"
#include "match/train_config.h"
#include "match/hgr_model.h"
#include "match/vse_model.h"
#include "text/role_graph.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_STREAM_ORDER (UINT64_C(1) << 40)
#define VTR_STREAM_AUGMENT (UINT64_C(1) << 48)

/* The items and captions of one split. */
typedef struct vtr_split {
    char *name;                            /* "train", ... */
    const vtr_feature_store_reader *store; /* borrowed: the items' feature rows */
    int max_frames_cap;                    /* the data.max_frames it was loaded with */

    int n_items;
    char **keys;          /* (n_items) item keys */
    int64_t *store_index; /* (n_items) the item's index in the store */
    int max_frames;       /* rows of the longest set, after the cap */

    int n_caps;
    int *cap_item;        /* (n_caps) the item caption j describes, 0 .. n_items-1 */
    char **texts;         /* (n_caps) caption texts as stored */
    int *cap_text;        /* (n_caps) text ids: equal for identical texts (HGR de-dup) */
    int n_texts;

    /* vtr_split_encode_captions fills these: */
    int64_t *cap_offsets; /* (n_caps + 1) caption j's ids are ids[cap_offsets[j] ..] */
    int *ids;
    int max_words;        /* ids in the longest caption (with <start> and <end>) */

    /* vtr_split_encode_graphs (HGR) fills these too; NULL for a VSE encoding: */
    vtr_role_graph_shape graph_shape; /* W, NV, NN */
    uint8_t *verb_masks;  /* (n_caps, NV, W) */
    uint8_t *noun_masks;  /* (n_caps, NN, W) */
    int *node_roles;      /* (n_caps, NV + NN) */
    float *rel_edges;     /* (n_caps, N, N), N = 1 + NV + NN */
    int n_graphless;      /* captions without a role graph in the catalog */
} vtr_split;

/* Reads split `split` of dataset `dataset` from the catalog and finds every item in the
 * store (by key). max_frames_cap: see data.max_frames (0 = every row). Fails with
 * VTR_ERR_NOT_FOUND for an unknown dataset; VTR_ERR_INVALID for a split without items
 * ("dataset 'msrvtt' has no items in split 'val'"), an item without captions, an item
 * missing from the store or without rows, more than INT_MAX items or captions; what the
 * catalog reports. On failure *out is zeroed. Free with vtr_split_free. */
vtr_status vtr_split_load(vtr_catalog *cat, const char *dataset, const char *split,
                          const vtr_feature_store_reader *store, int max_frames_cap,
                          vtr_split *out, vtr_error *err);

/* Frees everything the split owns; leaves it zeroed. Safe on a zeroed or freed split. */
void vtr_split_free(vtr_split *s);

/* Keeps the first n items of the split (1 <= n) and their captions; nothing when the
 * split has no more than n. Call before encoding the captions. */
void vtr_split_truncate(vtr_split *s, int n);

/* A vocabulary of the given layout (text/vocab.h) of the split's caption words seen at
 * least threshold times, in the order in which they first occur (the reference's
 * build_vocab). */
vtr_status vtr_split_build_vocab(const vtr_split *s, vtr_tokenizer_mode mode, int64_t threshold,
                                 vtr_vocab_layout layout, vtr_vocab **out, vtr_error *err);

/* Tokenizes and encodes every caption: <start> words <end>, unknown words as <unk>.
 * Replaces an earlier encoding. VTR_ERR_INVALID for a vocabulary that is not of the VSE
 * layout; the tokenizer's errors name the caption. */
vtr_status vtr_split_encode_captions(vtr_split *s, const vtr_vocab *vocab,
                                     vtr_tokenizer_mode mode, vtr_error *err);

/* HGR's encoding of every caption with its role graph (text/role_graph.h), in place of
 * vtr_split_encode_captions: the caption's whitespace words as ids of the HGR vocabulary
 * (no BOS / EOS), cut to shape->max_words, and the graph tensors of vtr_role_graph_encode.
 * A caption without a graph in the catalog gets the reference's fallback: the root alone
 * (no verb or noun node, no edge). The graphs are read from dataset's split s->name of
 * cat (vtr_catalog_split_caption_graphs), in the split's caption order. VTR_ERR_INVALID
 * for a vocabulary that is not of the HGR layout, an empty caption, or a catalog whose
 * captions no longer match the split's; the graph parser's VTR_ERR_FORMAT names the
 * caption. */
vtr_status vtr_split_encode_graphs(vtr_split *s, vtr_catalog *cat, const char *dataset,
                                   const vtr_vocab *vocab, const vtr_role_graph_shape *shape,
                                   vtr_error *err);

/* HGR's encoding of one caption, vtr_split_encode_graphs's for each of its captions and
 * the embedder's for texts (index/embedder.h): the caption's whitespace words as ids of
 * the HGR vocabulary, cut to shape->max_words, and the tensors of its role graph (graph:
 * the graph's JSON text, one value of sent2rolegraph.augment.json; NULL: the root alone,
 * the reference's graph of a caption whose parse found nothing). sc is scratch the caller
 * keeps between calls (zeroed at first; vtr_graph_caption_scratch_free). VTR_ERR_INVALID
 * for an empty caption; the tokenizer's and the graph parser's errors (which name the
 * caption), VTR_ERR_NOMEM. */
typedef struct vtr_graph_caption_scratch {
    vtr_tokens toks;
    int *word_ids;
    size_t word_cap;
} vtr_graph_caption_scratch;

vtr_status vtr_graph_caption_encode(vtr_graph_caption_scratch *sc, const vtr_vocab *vocab,
                                    const vtr_role_graph_shape *shape, const char *text,
                                    const char *graph, vtr_role_graph_tensors *t, vtr_error *err);
void vtr_graph_caption_scratch_free(vtr_graph_caption_scratch *sc);

/* The rows kept of a set of n rows under cap: idx gets min(n, cap) (or n when cap is 0)
 * row indices, round(linspace(0, n-1, cap)) when n > cap, else 0 .. n-1. Returns the count. */
int vtr_frame_subsample(int *idx, int n, int cap);

/* A uniformly random order of the n captions of epoch `epoch` (stream VTR_STREAM_ORDER +
 * epoch of seed). */
void vtr_epoch_order(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch);

/* Size augmentation of a training batch (aggregate/gpo.h). */
typedef struct vtr_augment {
    uint64_t seed;
    int64_t epoch;
    float frame_drop;  /* set elements dropped with this probability */
    float caption_hit; /* caption tokens masked / replaced / deleted with this probability */
    int vocab_size;    /* random replacements are drawn from [0, vocab_size) */
    int mask_id;       /* the vocabulary's <mask> */
} vtr_augment;

/* Padded batches of one split. */
typedef struct vtr_batcher {
    const vtr_split *split;
    int F;                /* feature size (the store's dim) */
    int max_batch;
    vtr_vse_batch batch;  /* the last batch built; points into the buffers below */
    vtr_hgr_batch hgr;    /* the same batch for HGR, with the role-graph tensors (a split
                             encoded by vtr_split_encode_graphs only) */
    uint8_t *verb_masks, *noun_masks; /* (max_batch, NV or NN, W) */
    int *node_roles;      /* (max_batch, NV + NN) */
    float *rel_edges;     /* (max_batch, N, N) */
    float *frames;        /* (max_batch, split max_frames, F) */
    int *frame_lengths;   /* (max_batch) */
    int *ids;             /* (max_batch, split max_words) */
    int *caption_lengths; /* (max_batch) */
    int *rows;            /* scratch: a set's kept rows */
    int *keep;            /* scratch: augmentation's kept positions */
} vtr_batcher;

/* Allocates the buffers for batches of at most max_batch (>= 1) pairs of split s, whose
 * captions must be encoded. VTR_ERR_INVALID, VTR_ERR_NOMEM; on failure b is zeroed. */
vtr_status vtr_batcher_init(vtr_batcher *b, const vtr_split *s, int max_batch, vtr_error *err);

void vtr_batcher_free(vtr_batcher *b);

/* Training batch: pair k is caption caps[k] and its item, 1 <= B <= max_batch. aug NULL:
 * no augmentation. Fills b->batch (T and L are the longest set and caption in it). */
vtr_status vtr_batcher_pairs(vtr_batcher *b, const int64_t *caps, int B, const vtr_augment *aug,
                             vtr_error *err);

/* Items item0 .. item0+n-1 alone (frames, frame_lengths, T of b->batch), no augmentation. */
vtr_status vtr_batcher_items(vtr_batcher *b, int item0, int n, vtr_error *err);

/* Captions cap0 .. cap0+n-1 alone (ids, caption_lengths, L of b->batch). */
vtr_status vtr_batcher_captions(vtr_batcher *b, int cap0, int n, vtr_error *err);

/* Everything a training run reads, opened from its options (match/train_config.h). */
typedef struct vtr_train_data {
    vtr_catalog *catalog;            /* open: the program records the run in it */
    vtr_feature_store_reader *store;
    vtr_split train, val;            /* captions encoded with vocab */
    vtr_vocab *vocab;
    bool vocab_built;                /* built from the training captions, not loaded */
    bool vocab_from_catalog;         /* hgr: the catalog's data.catalog_vocab */
} vtr_train_data;

/* Opens o->catalog and o->features, loads the training and validation splits (the latter
 * cut to o->val_max_items). HGR (o->kind): the vocabulary is vocab_path (a run's own, an
 * HGR word list, match/trained_model.h), else the catalog's o->catalog_vocab, or, when
 * that is empty, one built from the training captions' whitespace words with
 * o->vocab_threshold; both splits are encoded with their role graphs
 * (vtr_split_encode_graphs). VSE: loads the
 * vocabulary from vocab_path (a reference JSON; NULL: o->vocab, or, when that is empty,
 * builds it from the training captions with o->vocab_threshold) and encodes both splits'
 * captions. Errors carry the failing step's context ("training split: ..."). On failure
 * *d is zeroed. */
vtr_status vtr_train_data_open(const vtr_train_options *o, const char *vocab_path,
                               vtr_train_data *d, vtr_error *err);

/* A run's vocabulary file (VTR_RUN_VOCAB): a VSE vocabulary in the reference JSON
 * (vtr_vocab_save_json), an HGR one as the JSON array of its words in id order (what the
 * catalog keeps). Load reads either (an array: HGR). Errors name the file. */
vtr_status vtr_run_vocab_save(const vtr_vocab *vocab, const char *path, vtr_error *err);
vtr_status vtr_run_vocab_load(const char *path, vtr_vocab **out, vtr_error *err);

/* Closes and frees everything; leaves d zeroed. Safe on a zeroed value. */
void vtr_train_data_close(vtr_train_data *d);

/* The data hashes a run records (lib/catalog.h runs.data_hashes): a JSON object with the
 * SHA-256 of every file of the feature store ("features/rows.npy", "features/offsets.npy",
 * "features/keys.txt", "features/meta.json") and of each further file named in files:
 * pairs of a name and a path, ended by a NULL name ({"vocab", path, "init", path, NULL});
 * a NULL or empty path is left out. *json is malloc'ed (caller frees). VTR_ERR_IO naming
 * the file. */
vtr_status vtr_train_data_hashes(const char *store_path, const char *const *files, char **json,
                                 vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
