/* The embedding index of vtr-index / vtr-search: L2-normalized float16 embeddings of
 * items (videos, images) in mmap-able row matrices, with the row -> item mapping in
 * SQLite. Format spec: docs/index.md.
 *
 * An index is a directory DIR/ holding
 *   index.sqlite        the manifest: dim, model, generation; the live segments; one
 *                       entry per row (segment, row, item key, vector number, live flag)
 *   seg-NNNNNN.npy      segments: (rows, D) float16, L2-normalized rows; immutable
 *   writer.lock         held (flock) by the one writer
 * Every row of every listed segment is an entry; a row whose entry is not live (its item
 * was removed or re-added since) is a tombstone that searches skip. Items usually have one
 * vector; an item may have several (HGR's global vector and per-frame level vectors, set
 * embeddings), stored as consecutive rows; each entry keeps its vector's norm, so a model
 * whose score depends on lengths (HGR's attended frames) gets its vectors back.
 *
 * Generations. A commit (one SQLite transaction) publishes a new generation: the
 * segments written since the last commit and the tombstones of the items removed or
 * replaced. A segment file is complete, fsynced and renamed into place before the
 * transaction that lists it, and never changes after; compaction writes the live rows of
 * all segments into a new one and drops the old ones in one transaction, deleting their
 * files after it. So whatever moment a writer is killed at, the last committed generation
 * stays intact and readable (left-over files are removed by the next writer).
 *
 * Readers. A reader (vtr_embedding_index) is a snapshot of one generation: it holds an
 * SQLite read transaction (WAL: it never blocks the writer, and the writer never blocks
 * it) and maps the segment files of that generation; later commits and compactions do
 * not change what it sees (a file deleted meanwhile stays mapped). To see newer
 * generations, open a new reader. A reader held for long while a writer commits keeps
 * the SQLite WAL from being recycled (it grows until the reader closes).
 *
 * Threads. A reader's matrix view may be searched from any number of threads at once;
 * its key lookups (which use its SQLite connection) from one thread at a time. A writer
 * belongs to one thread. Processes: any number of readers, one writer (others fail to
 * open with VTR_ERR_IO "... is being written by another process").
 *
 * Errors start with "index DIR: " and name the file and the cause.
 */
#ifndef VTR_EMBEDDING_INDEX_H
#define VTR_EMBEDDING_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "index/topk.h"
#include "lib/error.h"
#include "lib/tensor.h"

#define VTR_EMBEDDING_INDEX_FORMAT "vtr-embedding-index"
/* The SQLite user_version of the schema this code writes (and the newest it reads).
 * Version 2 records each row's norm; a writer upgrades a version 1 index when it opens it
 * (its old rows keep no norm), readers read both. */
#define VTR_EMBEDDING_INDEX_VERSION 2

/* ---- writing ---------------------------------------------------------------------- */

typedef struct vtr_embedding_index_writer vtr_embedding_index_writer;

/* Called at each step of a commit or compaction, with a short name of the step just done:
 * "segment-data" (rows written to the temporary file), "segment-file" (complete, renamed
 * into place), "manifest-staged" (the transaction written, not yet committed),
 * "committed", "cleaned" (replaced segment files deleted; compaction only). For progress
 * logs, and for tests that interrupt a writer at every step. */
typedef void (*vtr_embedding_index_step_fn)(void *ctx, const char *step);

typedef struct vtr_embedding_index_options {
    /* Columns D. Creating: required (>= 1). Opening an existing index: 0, or the index's
     * D (else VTR_ERR_INVALID). */
    int64_t dim;
    /* What made the embeddings (e.g. the checkpoint's SHA-256), recorded when the index is
     * created ("" when NULL). Opening an existing index: NULL, or the recorded text (else
     * VTR_ERR_INVALID: embeddings of two models must not share an index). */
    const char *model;
    vtr_embedding_index_step_fn on_step; /* may be NULL */
    void *step_ctx;
} vtr_embedding_index_options;

/* Opens DIR for writing, creating the directory (its parent must exist) and the index
 * when absent. Takes the writer lock (not waiting), removes files left by a killed
 * writer (temporary files, segments no generation lists), and checks dim and model as
 * above. Fails with VTR_ERR_IO (cannot create or lock; another writer holds the lock),
 * VTR_ERR_INVALID (opt NULL, dim or model mismatch, dim < 1 on creation), VTR_ERR_FORMAT
 * (DIR holds segment files but no index.sqlite, or index.sqlite is not an embedding
 * index), VTR_ERR_UNSUPPORTED (a newer format version), VTR_ERR_DB. *out is NULL on
 * failure. */
vtr_status vtr_embedding_index_writer_open(const char *dir, const vtr_embedding_index_options *opt,
                                           vtr_embedding_index_writer **out, vtr_error *err);

/* Stages item key with its vectors: (D,) for one vector or (n, D) for n >= 1 (rows in
 * order), float32, float16 or bfloat16. Each vector x is stored as
 * float16(x / ||x||), the norm taken in double. A key staged or committed before is
 * replaced: at commit its old rows become tombstones. Refusals leave the writer and the
 * index unchanged, with VTR_ERR_INVALID: a key that is empty or not valid UTF-8; a
 * tensor of another dtype or rank, with no rows, or whose D differs ("item K: 512
 * columns; the index has 1024"); a vector that is zero or not finite. Other failures
 * (VTR_ERR_IO, VTR_ERR_NOMEM, VTR_ERR_DB) break the writer: every later call fails and
 * only close remains. Nothing is visible to readers before commit. */
vtr_status vtr_embedding_index_writer_add(vtr_embedding_index_writer *w, const char *key,
                                          const vtr_tensor *vectors, vtr_error *err);

/* Stages n single-vector items: keys[i] with row i of embeddings (n, D). The same as n
 * calls of add, except that a refusal (checked for all rows first) stages none of them.
 * A key that appears twice keeps its last row. */
vtr_status vtr_embedding_index_writer_add_batch(vtr_embedding_index_writer *w, int64_t n,
                                                const char *const *keys,
                                                const vtr_tensor *embeddings, vtr_error *err);

/* Stages every live item of the index at part (another index directory, of this index's
 * dimension and model text), in part's row order, each item's rows copied bit for bit
 * with their norms, so that an item reads back exactly as it does from part: the join of
 * a sharded run's parts (vtr-merge). Refusals leave the writer and the index unchanged,
 * with VTR_ERR_INVALID: part's dimension or model text is not this index's; one of
 * part's keys is in this index already, committed or staged ("index PART: item K is in
 * DIR already"). part's own errors as vtr_embedding_index_open gives them (VTR_ERR_IO,
 * VTR_ERR_FORMAT, VTR_ERR_UNSUPPORTED, VTR_ERR_DB); a failure while staging breaks the
 * writer. *items (may be NULL) gets the number of items staged. */
vtr_status vtr_embedding_index_writer_add_index(vtr_embedding_index_writer *w, const char *part,
                                                int64_t *items, vtr_error *err);

/* Stages the removal of item key (committed or staged). VTR_ERR_NOT_FOUND, leaving the
 * writer usable, when the index (as staged so far) has no such item. */
vtr_status vtr_embedding_index_writer_remove(vtr_embedding_index_writer *w, const char *key,
                                             vtr_error *err);

/* Rows staged since the last commit (replaced ones included). */
int64_t vtr_embedding_index_writer_pending_rows(const vtr_embedding_index_writer *w);

/* Publishes everything staged as a new generation, atomically; does nothing (and keeps
 * the generation) when nothing is staged. On failure the index stays at the previous
 * generation and the writer is broken (close it, open again, and redo the batch). */
vtr_status vtr_embedding_index_writer_commit(vtr_embedding_index_writer *w, vtr_error *err);

/* Rewrites the live rows of every segment, in order, into one new segment and drops the
 * tombstones, as a new generation (readers of older generations are unaffected); does
 * nothing when the index already is one segment without tombstones. VTR_ERR_INVALID when
 * changes are staged (commit first). Reads and writes the whole matrix once; failures
 * break the writer, as for commit. */
vtr_status vtr_embedding_index_writer_compact(vtr_embedding_index_writer *w, vtr_error *err);

/* Replaces the recorded model text at once (its own transaction), for a caller that has
 * checked the new text names the same model (e.g. a checkpoint that moved: the same
 * SHA-256 at another path). Readers that open afterwards see it. */
vtr_status vtr_embedding_index_writer_set_model(vtr_embedding_index_writer *w, const char *model,
                                                vtr_error *err);

/* The last committed generation (0 for a new index). */
int64_t vtr_embedding_index_writer_generation(const vtr_embedding_index_writer *w);

/* Discards what is staged (removing its temporary file), releases the lock and frees w.
 * Safe on NULL. */
void vtr_embedding_index_writer_close(vtr_embedding_index_writer *w);

/* ---- reading ---------------------------------------------------------------------- */

typedef struct vtr_embedding_index vtr_embedding_index;

/* Opens a snapshot of the last committed generation of the index at DIR: reads the
 * manifest, maps each segment and checks it (NPY, float16, (rows, D) as listed), and
 * loads the tombstones. Fails with VTR_ERR_IO (no index.sqlite: "not an embedding index";
 * a listed segment file missing or unreadable), VTR_ERR_FORMAT (a segment that is not
 * NPY, not float16, or whose shape differs from the manifest, truncated or padded
 * included; an index.sqlite of another application or not initialized),
 * VTR_ERR_UNSUPPORTED (a newer format version), VTR_ERR_DB. *out is NULL on failure. */
vtr_status vtr_embedding_index_open(const char *dir, vtr_embedding_index **out, vtr_error *err);

/* Ends the read transaction, unmaps and frees. Safe on NULL. */
void vtr_embedding_index_close(vtr_embedding_index *ix);

int64_t vtr_embedding_index_dim(const vtr_embedding_index *ix);
int64_t vtr_embedding_index_generation(const vtr_embedding_index *ix);
const char *vtr_embedding_index_model(const vtr_embedding_index *ix); /* lives with ix */
/* Rows N of the snapshot, tombstones included: global rows are 0 .. N-1, the segments'
 * rows one segment after another. Row numbers belong to the snapshot (a compaction
 * renumbers); keys are the stable names. */
int64_t vtr_embedding_index_rows(const vtr_embedding_index *ix);
int64_t vtr_embedding_index_live_rows(const vtr_embedding_index *ix); /* N - tombstones */
int64_t vtr_embedding_index_segments(const vtr_embedding_index *ix);
/* The id of the snapshot's segment i (0 <= i < segments, in row order; -1 otherwise):
 * file seg-<id>.npy, its rows matrix part i. Ids are never reused, so two snapshots whose
 * lists start with the same ids number those rows alike (the approximate index relies on
 * it, index/approx_index.h). */
int64_t vtr_embedding_index_segment_id(const vtr_embedding_index *ix, int64_t i);

/* The snapshot's rows as a top-k matrix (float16, the tombstones as its skip bitmap),
 * for vtr_topk_search. Borrowed: valid until the reader is closed. */
const vtr_topk_matrix *vtr_embedding_index_matrix(const vtr_embedding_index *ix);

/* Row r (0 <= r < N) as D float32 values in out. VTR_ERR_INVALID when out of range. */
vtr_status vtr_embedding_index_row(const vtr_embedding_index *ix, int64_t row, float *out,
                                   vtr_error *err);

/* The snapshot's live items, for models that score the several vectors of an item (HGR:
 * index/embedder.h): n items in row order, item i the rows first[i] .. first[i] +
 * count[i] - 1; norm (rows) each row's norm before normalization (row r of the matrix
 * times norm[r] is the vector added, up to float16 rounding), NaN for rows of a version 1
 * index and tombstones. Read from the manifest on the first call (one pass over the
 * entries) and kept with ix; the arrays are borrowed until the reader is closed.
 * VTR_ERR_DB, VTR_ERR_NOMEM, VTR_ERR_FORMAT (an entry outside the listed segments). */
typedef struct vtr_embedding_index_items {
    int64_t n;
    const int64_t *first, *count;
    const float *norm;
} vtr_embedding_index_items;

vtr_status vtr_embedding_index_items_read(vtr_embedding_index *ix, vtr_embedding_index_items *out,
                                          vtr_error *err);

/* The item of row r: *key (malloc'ed, free() it) and *vector (may be NULL) its vector
 * number within the item; *live (may be NULL) false for a tombstone. VTR_ERR_INVALID
 * when r is out of range, VTR_ERR_DB. */
vtr_status vtr_embedding_index_key(vtr_embedding_index *ix, int64_t row, char **key,
                                   int64_t *vector, bool *live, vtr_error *err);

/* The live rows of item key: its first row and *n_rows (may be NULL) vectors, rows
 * first .. first + n - 1. VTR_ERR_NOT_FOUND when the snapshot has no such live item. */
vtr_status vtr_embedding_index_find(vtr_embedding_index *ix, const char *key, int64_t *first,
                                    int64_t *n_rows, vtr_error *err);

#endif
