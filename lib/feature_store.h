/* Feature stores: the features of a whole dataset as one mmap-able row matrix, so that a
 * training run never parses per-item files (DESIGN.md). Format spec: docs/feature-store.md.
 *
 * A store is a directory NAME/ holding
 *   rows.npy     (R, D) float32 or float16: every item's rows, item after item
 *   offsets.npy  (N+1,) int64: item i's rows are rows[offsets[i] .. offsets[i+1]),
 *                offsets[0] = 0, non-decreasing, offsets[N] = R
 *   keys.txt     N lines, key of item i on line i+1: UTF-8, non-empty, unique, without
 *                tab, CR or LF, each line ended by '\n'
 *   meta.json    {"format": "vtr-feature-store", "version": 1, "dim": D,
 *                 "dtype": "float16", "extractor": "...", "items": N, "rows": R,
 *                 "created": "2024-05-01T12:34:56.789Z", "source": <any JSON>}
 * All of it is readable by numpy (np.load(..., mmap_mode="r")) and plain text tools.
 *
 * Writing is streaming and atomic: the writer builds NAME.tmp.PID/ beside NAME, appends
 * each item's rows straight to the final rows.npy (its header is reserved up front and
 * rewritten with the final shape at the end, which numpy's header padding allows), and
 * renames the directory to NAME when finished. Memory stays constant in the number of
 * rows (one conversion buffer); the keys seen so far are kept for the duplicate check.
 * A build that is aborted, fails or is killed never leaves NAME/ (a killed one leaves
 * NAME.tmp.PID/, which may be deleted).
 *
 * Reading maps the three arrays read-only (vtr_npy_load), checks them against each
 * other and meta.json, and indexes the keys (hash table). Item views point into the
 * mapping: they are read-only and live as long as the reader.
 *
 * Errors start with "feature store PATH: " and name the file and the cause.
 */
#ifndef VTR_FEATURE_STORE_H
#define VTR_FEATURE_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "tensor.h"

#define VTR_FEATURE_STORE_FORMAT "vtr-feature-store"
#define VTR_FEATURE_STORE_VERSION 1

/* ---- writing ---------------------------------------------------------------------- */

typedef struct vtr_feature_store_options {
    vtr_dtype dtype;       /* storage type: VTR_F32 or VTR_F16 (0 is VTR_F32) */
    int64_t dim;           /* columns D; 0: taken from the first item */
    const char *extractor; /* what produced the features, e.g. "resnet152/avgpool"; NULL: "" */
    const json_t *source;  /* free-form provenance for meta.json; NULL: none. Copied. */
    bool replace;          /* on finish, replace an existing store NAME (atomically, by
                              exchanging the directories); otherwise an existing NAME is
                              an error, at open and again at finish */
} vtr_feature_store_options;

typedef struct vtr_feature_store_writer vtr_feature_store_writer;

/* Starts building the store at path (the directory NAME; missing parents are created).
 * VTR_ERR_INVALID for a bad option or when path exists and opt->replace is false;
 * VTR_ERR_IO when a parent or the temporary directory cannot be made. *out is NULL on failure. */
vtr_status vtr_feature_store_writer_open(const char *path, const vtr_feature_store_options *opt,
                                         vtr_feature_store_writer **out, vtr_error *err);

/* Appends one item: key and its rows, a 2-D (n, D) array of float32, float16 or bfloat16
 * (n may be 0), converted to the storage type. Refusals leave the writer usable and the
 * store unchanged, with VTR_ERR_INVALID: an empty key or one with a tab, CR or LF, or not
 * valid UTF-8; a key added before; an array that is not 2-D, of another dtype, or whose
 * D differs from the store's. Other failures (VTR_ERR_IO, VTR_ERR_NOMEM) break the
 * writer: every later call fails and only abort remains. */
vtr_status vtr_feature_store_writer_add(vtr_feature_store_writer *w, const char *key,
                                        const vtr_tensor *rows, vtr_error *err);

/* Items added so far. */
int64_t vtr_feature_store_writer_items(const vtr_feature_store_writer *w);

/* Completes the store: final headers, meta.json, fsync, rename to NAME, and a check that
 * what was written reads back (shapes). Always frees w; on failure nothing is left
 * (neither NAME.tmp.PID/ nor, unless it existed before, NAME/). VTR_ERR_INVALID when no
 * item was added and no dim was given, or when NAME appeared meanwhile and opt->replace
 * is false. */
vtr_status vtr_feature_store_writer_finish(vtr_feature_store_writer *w, vtr_error *err);

/* Abandons the build: removes NAME.tmp.PID/ and frees w. Safe on NULL. */
void vtr_feature_store_writer_abort(vtr_feature_store_writer *w);

/* ---- reading ---------------------------------------------------------------------- */

typedef struct vtr_feature_store_reader vtr_feature_store_reader;

/* Opens and checks the store at path: meta.json well-formed, of this format and a known
 * version (a newer one is VTR_ERR_UNSUPPORTED); rows.npy 2-D float32/float16 with the
 * dim, dtype and row count of meta.json; offsets.npy int64 with items + 1 entries,
 * starting at 0, non-decreasing, ending at the row count; keys.txt with one non-empty
 * UTF-8 key per item, each ended by '\n', no key twice. VTR_ERR_IO when a file is missing or
 * unreadable, VTR_ERR_FORMAT when a check fails (truncated arrays included).
 * *out is NULL on failure. */
vtr_status vtr_feature_store_reader_open(const char *path, vtr_feature_store_reader **out,
                                         vtr_error *err);

/* Unmaps and frees; safe on NULL. Views taken from the reader die with it. */
void vtr_feature_store_reader_close(vtr_feature_store_reader *r);

int64_t vtr_feature_store_reader_items(const vtr_feature_store_reader *r); /* N */
int64_t vtr_feature_store_reader_rows(const vtr_feature_store_reader *r);  /* R */
int64_t vtr_feature_store_reader_dim(const vtr_feature_store_reader *r);   /* D */
vtr_dtype vtr_feature_store_reader_dtype(const vtr_feature_store_reader *r);

/* meta.json as parsed (borrowed; lives as long as the reader). */
const json_t *vtr_feature_store_reader_meta(const vtr_feature_store_reader *r);

/* The key of item i (0 <= i < N), NUL-terminated. */
const char *vtr_feature_store_reader_key(const vtr_feature_store_reader *r, int64_t i);

/* The index of the item with this key, or -1. O(1). */
int64_t vtr_feature_store_reader_find(const vtr_feature_store_reader *r, const char *key);

/* The N+1 offsets (borrowed, read-only). */
const int64_t *vtr_feature_store_reader_offsets(const vtr_feature_store_reader *r);

/* The whole (R, D) row matrix as a read-only view. */
vtr_tensor vtr_feature_store_reader_matrix(const vtr_feature_store_reader *r);

/* A read-only view of item i's rows, (n_i, D). VTR_ERR_INVALID when i is out of range. */
vtr_status vtr_feature_store_reader_item(const vtr_feature_store_reader *r, int64_t i,
                                         vtr_tensor *rows, vtr_error *err);

/* ---- building from a record stream -------------------------------------------------- */

/* Told about each record that the builder skips, with the reason. */
typedef void (*vtr_feature_store_skip_fn)(void *ctx, const char *key, const vtr_error *why);

typedef struct vtr_feature_store_build_stats {
    int64_t records; /* read from the stream */
    int64_t items;   /* stored */
    int64_t rows;    /* stored rows */
    int64_t skipped; /* refused by the writer and reported through on_skip */
} vtr_feature_store_build_stats;

/* Builds the store at path from the record stream `in` (lib/record.h; `in_name` names it
 * in messages): each record becomes one item under its key, its array (n, D) as n rows,
 * or (D,) as one row. When opt->extractor is NULL, the first record's metadata
 * "extractor" (if a string) is used; when opt->source is NULL, meta.json's source is
 * {"records": in_name}. A record the writer refuses (duplicate key, wrong shape, dim or
 * dtype) is passed to on_skip and skipped when on_skip is given, and otherwise fails the
 * build. A malformed stream always fails it; a failed build leaves no store. stats (may
 * be NULL) is filled in either case. */
vtr_status vtr_feature_store_build_from_records(FILE *in, const char *in_name, const char *path,
                                                const vtr_feature_store_options *opt,
                                                vtr_feature_store_skip_fn on_skip, void *ctx,
                                                vtr_feature_store_build_stats *stats,
                                                vtr_error *err);

#endif
