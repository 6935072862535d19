/* Incremental indexing of a local video archive: what vtr-index does, as a library.
 *
 * A source (a directory walked recursively, or a manifest of paths) is mirrored into an
 * embedding index (index/embedding_index.h) and a catalog (lib/catalog.h), both in the
 * index directory OUT:
 *   OUT/index.sqlite, OUT/seg-*.npy   the embeddings, one L2-normalized float16 row per
 *                                     item, under the item's key
 *   OUT/catalog.sqlite                dataset "archive": one item per file of the source
 *                                     with its path, size, mtime, duration, status (ok /
 *                                     failed) and failure reason
 * An item's embedding: frames sampled uniformly from the file (decode/decode_item.h,
 * --frames N: t_i = start + (i + 0.5) * duration / N; an image is one frame), CNN
 * features of each frame (features/extractor.h), pooled and projected by the trained
 * model (index/embedder.h) into one E-dim vector.
 *
 * Keys: for a directory, the file's path relative to it ("trips/2019/a.mp4"); for a
 * manifest, the path as the manifest writes it.
 *
 * Incremental runs. A file whose key is in the catalog with the same size and mtime is
 * not decoded again: unchanged ("ok") or known to fail ("failed", retried only with
 * retry_failed). A new file, a file whose size or mtime changed, and an item left
 * "pending" are (re)done: the new embedding replaces the old row. An item of the catalog
 * that the source no longer has is removed from the index and the catalog. A file that
 * fails is recorded "failed" with its reason; an embedding it had is removed. Before a
 * file is decoded the catalog marks it "pending" with the error "vtr-index stopped while
 * processing this file (it crashed or was killed)": a run that dies (a crash in FFmpeg, a
 * kill) leaves that mark on the one file it was on, and the next run records that file
 * "failed" with this reason (unless retry_failed) instead of dying on it again. A run
 * stopped through o->stop (vtr-index's SIGINT / SIGTERM) finishes the file it is on and
 * leaves no mark.
 *
 * Interruptions. Work is committed in batches of commit_items items: first the index
 * (one generation), then the catalog (one transaction). A run killed at any point leaves
 * the last committed generation readable and redoes at most one batch on the next run;
 * since an item's embedding depends only on the file, the settings and the thread count
 * (each item is extracted and embedded on its own, never batched with others), a rerun
 * gives the same index content (keys and embedding bytes) as an uninterrupted run.
 * Searches (vtr_embedding_index_open) see the last committed generation meanwhile.
 *
 * The recorded model. The index's model text (vtr_embedding_index_model) is a JSON
 * object written when the index is created:
 *   {"format": "vtr-archive-index", "model_id": hex SHA-256 of the checkpoint
 *    (vtr_embedder_model_id), "checkpoint": its absolute path, "backbone": {"arch",
 *    "weights": absolute path, "sha256"}, "frames": N, "preprocess": {"resize", "crop"}}
 * A later run must use the same model_id, backbone arch and weights digest, frames and
 * preprocessing (settings left at 0 / NULL take the recorded ones); anything else is
 * refused with VTR_ERR_INVALID, since embeddings of two models must not share an index.
 */
#ifndef VTR_ARCHIVE_INDEX_H
#define VTR_ARCHIVE_INDEX_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "features/backbone.h"
#include "index/approx_index.h"
#include "lib/error.h"
#include "lib/shard.h"

#define VTR_ARCHIVE_INDEX_FORMAT "vtr-archive-index"
#define VTR_ARCHIVE_CATALOG "catalog.sqlite" /* in the index directory */
#define VTR_ARCHIVE_DATASET "archive"        /* its dataset */

/* Defaults of the settings an index records. */
#define VTR_ARCHIVE_DEFAULT_FRAMES 8

/* What happened to one item in a run. */
typedef enum vtr_archive_outcome {
    VTR_ARCHIVE_ADDED,    /* a new file, embedded */
    VTR_ARCHIVE_UPDATED,  /* a changed (or retried, or pending) file, embedded again */
    VTR_ARCHIVE_FAILED,   /* could not be embedded; the error says why */
    VTR_ARCHIVE_REMOVED,  /* gone from the source: dropped from the index and catalog */
} vtr_archive_outcome;

/* "added", "updated", "failed", "removed" */
const char *vtr_archive_outcome_name(vtr_archive_outcome o);

/* Counts of a run. After the scan (the plan callback) added / updated count the files to
 * be done, removed the items to drop; at the end, what was done. */
typedef struct vtr_archive_stats {
    int64_t files;          /* files found in the source */
    int64_t added;          /* new files embedded */
    int64_t updated;        /* changed / retried files embedded again */
    int64_t unchanged;      /* skipped: same size and mtime, indexed */
    int64_t skipped_failed; /* skipped: same size and mtime, failed before */
    int64_t failed;         /* failed in this run */
    int64_t removed;        /* dropped: no longer in the source */
    int64_t commits;        /* index generations published by this run */
    bool compacted;         /* the index was compacted at the end */
    vtr_approx_update approx; /* what was done to its approximate index at the end */
    bool stopped;           /* o->stop ended the run early (the work done is committed) */
} vtr_archive_stats;

/* Called after each item is processed (err: the cause, for VTR_ARCHIVE_FAILED only; NULL
 * otherwise). Not called for unchanged or skipped items. */
typedef void (*vtr_archive_item_fn)(void *ctx, const char *key, vtr_archive_outcome outcome,
                                    const vtr_error *err);
/* Called once after the scan, before any work, with the plan (see vtr_archive_stats). */
typedef void (*vtr_archive_plan_fn)(void *ctx, const vtr_archive_stats *plan);

typedef struct vtr_archive_options {
    const char *source;     /* a directory, or a manifest file (one path per line; empty
                             * lines and lines starting with '#' are skipped) */
    const char *index_dir;  /* OUT, created when absent (its parent must exist) */
    const char *checkpoint; /* the trained model (vtr-train checkpoint) */
    const char *vocab;      /* the model's vocabulary, NULL: found as vtr_embedder_open does */
    const char *arch;       /* backbone architecture; NULL: recorded, or the weights' */
    const char *weights;    /* backbone weights (safetensors); NULL: the recorded ones
                             * (required for a new index) */
    vtr_device device;      /* the backbone's and the model's */
    int device_index;       /* which GPU, with VTR_DEVICE_CUDA (cuda:N) */
    bool bf16;              /* the backbone in bfloat16 (vtr_backbone_set_bf16: a CPU with
                             * AVX512-BF16 or AMX, else the run fails) */
    int frames;             /* frames per video, 0: recorded, or VTR_ARCHIVE_DEFAULT_FRAMES */
    int resize, crop;       /* preprocessing (features/preprocess.h), -1: recorded, or
                             * torchvision's 256 / 224; 0 means none, as there */
    bool retry_failed;      /* redo files that failed before even when unchanged */
    int threads;            /* decoder and embedder threads, 0: default */
    int commit_items;       /* items per commit, >= 1 */
    int decode_ahead;       /* files decoded ahead on a thread of their own while the
                             * backbone and the model embed the current one
                             * (decode/decode_ahead.h), 0: each decoded in its turn */
    /* NULL, or the shard of a sharded run (lib/shard.h): the index mirrors only the
     * shard's contiguous share of the source's files (in key order); the others are
     * neither indexed nor kept (an item of the index outside the share is dropped) */
    const vtr_shard *shard;
    vtr_archive_plan_fn on_plan; /* may be NULL */
    vtr_archive_item_fn on_item; /* may be NULL */
    void *ctx;
    /* NULL, or a flag (set by a signal handler) that stops the run before its next item:
     * the items done are committed, no file is left marked, stats->stopped is set */
    const volatile sig_atomic_t *stop;
} vtr_archive_options;

/* source, index_dir and checkpoint NULL; device CPU; frames 0, resize and crop -1 (the
 * recorded or default values); commit_items 32; decode_ahead 2. */
void vtr_archive_options_defaults(vtr_archive_options *o);

/* Brings the index at o->index_dir up to date with o->source (see above). Per-file
 * failures are not errors of the run: they go to on_item and stats->failed. Fails, with
 * the work of the batches committed so far kept, with VTR_ERR_INVALID (bad options; a
 * model, backbone or setting other than the index's; a backbone whose feature size is not
 * the model's), VTR_ERR_IO (the source cannot be read; the index is locked by another
 * writer), VTR_ERR_NOT_FOUND (no weights given for a new index), and whatever opening the
 * model, the backbone, the index or the catalog, or writing them, fails with. stats (may
 * be NULL) gets the counts, also on failure. */
vtr_status vtr_archive_index_update(const vtr_archive_options *o, vtr_archive_stats *stats,
                                    vtr_error *err);

/* The recorded model of an index, parsed from its model text. */
typedef struct vtr_archive_model {
    char *model_id;       /* hex SHA-256 of the checkpoint */
    char *checkpoint;     /* absolute path when it was recorded */
    char *arch;           /* "resnet152", ... */
    char *weights;        /* absolute path when it was recorded */
    char *weights_sha256;
    int frames;
    int resize, crop;
} vtr_archive_model;

/* Parses an index's model text (vtr_embedding_index_model). VTR_ERR_FORMAT when it is not
 * one that vtr-index wrote, naming what is missing. *out is zeroed on failure. */
vtr_status vtr_archive_model_parse(const char *text, vtr_archive_model *out, vtr_error *err);

/* Frees the strings; safe on a zeroed or freed value. */
void vtr_archive_model_free(vtr_archive_model *m);

#endif
