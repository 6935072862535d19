/* The catalog: one SQLite database recording datasets, their items (videos and images),
 * captions, splits, feature stores and runs. The schema is in docs/catalog.md.
 *
 * Concurrency: the database is in WAL mode, so readers (vtr-search) are never blocked by
 * the one writer (vtr-index) and see the last committed state. A writer waits up to
 * VTR_CATALOG_BUSY_MS for another writer before failing with VTR_ERR_DB ("database is
 * locked"). A vtr_catalog is one connection: use it from one thread at a time, and open
 * one per thread or process.
 *
 * Transactions: each write outside vtr_catalog_begin() / vtr_catalog_commit() is its own
 * transaction. Bulk imports should wrap many writes in one transaction: it is atomic, and
 * orders of magnitude faster than one commit per row.
 *
 * Schema versions: PRAGMA user_version holds the version of the schema in the file.
 * Opening applies the missing migrations in order, each in its own transaction; a file
 * written by a newer vtr is refused rather than misread.
 *
 * Conventions for every function below:
 * - Text is UTF-8, always bound as a statement parameter, stored and returned verbatim.
 * - Timestamps are UTC ISO-8601 text with milliseconds, "2024-05-01T12:34:56.789Z",
 *   taken from SQLite's clock when the row is written.
 * - Errors: messages start with "catalog PATH: " and name the item and the cause.
 *   VTR_ERR_DB carries SQLite's message; VTR_ERR_NOT_FOUND says a looked-up row is
 *   absent, including a write that refers to a dataset or item id that does not exist;
 *   VTR_ERR_INVALID is a bad argument (a NULL or empty required string, an out-of-range
 *   enum, malformed JSON).
 * - Records returned through an out-parameter (vtr_item, vtr_feature_store, vtr_run, the
 *   lists) own their strings; free them with the matching *_free function, which is safe
 *   on a zeroed or already-freed value. On failure the out-parameter is left zeroed.
 */
#ifndef VTR_CATALOG_H
#define VTR_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tensor.h"

/* The newest schema version this code knows (the number of migrations). */
#define VTR_CATALOG_SCHEMA_VERSION 3

/* How long a write waits for another connection's write lock, in milliseconds. */
#define VTR_CATALOG_BUSY_MS 5000

typedef struct vtr_catalog vtr_catalog;

/* ---- opening ---------------------------------------------------------------------- */

/* Opens the catalog at path, creating the file if it does not exist, and brings its
 * schema up to VTR_CATALOG_SCHEMA_VERSION. Sets WAL journal mode (skipped for the
 * in-memory database ":memory:"), foreign keys on, and the busy timeout.
 * Fails with VTR_ERR_DB for a file that is not an SQLite database, VTR_ERR_UNSUPPORTED
 * for an SQLite database of another application or with a newer schema version ("catalog
 * PATH has schema version N; this vtr knows up to M"). On failure *out is NULL. */
vtr_status vtr_catalog_open(const char *path, vtr_catalog **out, vtr_error *err);

/* The same for a catalog that must exist already (the readers: training, evaluation,
 * search), so that a mistyped path does not leave an empty database behind: a missing
 * file is VTR_ERR_NOT_FOUND "catalog PATH does not exist (vtr-import fills one)", and an
 * empty file (or an SQLite database without a vtr schema) VTR_ERR_FORMAT, left unchanged:
 * these programs never write a schema into a file that is not their catalog. An older
 * vtr catalog is migrated as by vtr_catalog_open. */
vtr_status vtr_catalog_open_existing(const char *path, vtr_catalog **out, vtr_error *err);

/* Closes the connection, rolling back an open transaction. Safe on NULL. */
void vtr_catalog_close(vtr_catalog *cat);

/* ---- transactions ----------------------------------------------------------------- */

/* Starts a write transaction (BEGIN IMMEDIATE: the write lock is taken now, waiting up to
 * the busy timeout, so a later write in it cannot fail on lock contention). Transactions
 * do not nest: beginning while one is open fails with VTR_ERR_INVALID. */
vtr_status vtr_catalog_begin(vtr_catalog *cat, vtr_error *err);

/* Commits the open transaction; VTR_ERR_INVALID when none is open. On a failed commit
 * the transaction has been rolled back. */
vtr_status vtr_catalog_commit(vtr_catalog *cat, vtr_error *err);

/* Rolls back the open transaction; does nothing when none is open, so that cleanup code
 * may call it unconditionally. */
vtr_status vtr_catalog_rollback(vtr_catalog *cat, vtr_error *err);

/* ---- datasets --------------------------------------------------------------------- */

/* Adds the dataset `name` (non-empty) with root directory `root` (may be NULL), or
 * finds it if it exists, in which case its stored root is left unchanged. *id receives
 * the dataset's id. */
vtr_status vtr_catalog_add_dataset(vtr_catalog *cat, const char *name, const char *root,
                                   int64_t *id, vtr_error *err);

/* Finds a dataset by name: VTR_ERR_NOT_FOUND when absent. */
vtr_status vtr_catalog_find_dataset(vtr_catalog *cat, const char *name, int64_t *id,
                                    vtr_error *err);

/* The root directory of dataset_id into *root (malloc'd, free() it; NULL when the
 * dataset has none). VTR_ERR_NOT_FOUND for an unknown id. */
vtr_status vtr_catalog_dataset_root(vtr_catalog *cat, int64_t dataset_id, char **root,
                                    vtr_error *err);

/* ---- items ------------------------------------------------------------------------ */

typedef enum vtr_item_status {
    VTR_ITEM_PENDING, /* known, not yet processed */
    VTR_ITEM_OK,      /* processed */
    VTR_ITEM_FAILED,  /* processing failed; the item's error says why */
} vtr_item_status;

/* "pending", "ok", "failed" (the text stored in the database); "?" when out of range. */
const char *vtr_item_status_name(vtr_item_status status);

/* An item as stored. As input (vtr_catalog_upsert_item) the caller's strings are only
 * read during the call, and id, updated_at and storage are ignored. */
typedef struct vtr_item {
    int64_t id;
    int64_t dataset_id;
    const char *key;        /* unique within the dataset, e.g. "video7010" */
    const char *path;       /* source file; NULL when there is none (imported features) */
    int64_t size_bytes;     /* -1: unknown */
    int64_t mtime_ns;       /* modification time, ns since the epoch; -1: unknown */
    double duration_s;      /* -1: unknown (images have 0) */
    vtr_item_status status;
    const char *error;      /* one-line cause of a failure; NULL when none */
    const char *updated_at; /* when the row last changed */
    void *storage;          /* owns the strings of a returned item */
} vtr_item;

/* Inserts item->key into item->dataset_id, or, when the key exists there, updates that
 * row in place (path, size, mtime, duration, status, error, updated_at), keeping its id
 * and therefore its captions and splits. *id (may be NULL) receives the item's id. */
vtr_status vtr_catalog_upsert_item(vtr_catalog *cat, const vtr_item *item, int64_t *id,
                                   vtr_error *err);

/* Finds an item by dataset and key; VTR_ERR_NOT_FOUND when absent. Free *out with
 * vtr_item_free. */
vtr_status vtr_catalog_find_item(vtr_catalog *cat, int64_t dataset_id, const char *key,
                                 vtr_item *out, vtr_error *err);

/* Sets an item's status and error text (NULL clears it) and touches updated_at;
 * VTR_ERR_NOT_FOUND for an unknown item id. */
vtr_status vtr_catalog_set_item_status(vtr_catalog *cat, int64_t item_id,
                                       vtr_item_status status, const char *error,
                                       vtr_error *err);

void vtr_item_free(vtr_item *item);

typedef struct vtr_item_list {
    size_t n;
    vtr_item *items; /* each owns its strings */
} vtr_item_list;

/* Every item of dataset_id, in item id order (an empty list for an unknown dataset).
 * Free *out with vtr_item_list_free. */
vtr_status vtr_catalog_dataset_items(vtr_catalog *cat, int64_t dataset_id, vtr_item_list *out,
                                     vtr_error *err);

void vtr_item_list_free(vtr_item_list *list);

/* ---- item frames: what vtr-index keeps of an item's sampled frames ------------------ */

/* One sampled frame of an item: when it is, a small picture of it (vtr-serve's
 * thumbnails) and its embedding alone (the model's visual side over the one frame, which
 * tells vtr-serve where in a video a query matches best). */
typedef struct vtr_item_frame {
    double time_s;          /* presentation time in seconds; -1: unknown */
    const void *jpeg;       /* a JPEG picture (jpeg_size bytes); NULL: none */
    size_t jpeg_size;
    const uint16_t *vector; /* float16 (dim) embedding; NULL: none */
    int64_t dim;
} vtr_item_frame;

/* Replaces the frames of an item by frames[0 .. n-1] (positions 0 .. n-1; n 0 clears
 * them), in the caller's transaction if any. VTR_ERR_NOT_FOUND for an unknown item id
 * (its foreign key), VTR_ERR_DB. */
vtr_status vtr_catalog_put_item_frames(vtr_catalog *cat, int64_t item_id, size_t n,
                                       const vtr_item_frame *frames, vtr_error *err);

typedef struct vtr_item_frame_list {
    size_t n;
    vtr_item_frame *frames; /* in position order; jpeg NULL (jpeg_size says how large it
                             * is: vtr_catalog_item_frame_jpeg reads it); vector owned */
} vtr_item_frame_list;

/* The frames of an item (an empty list when it has none). */
vtr_status vtr_catalog_item_frames(vtr_catalog *cat, int64_t item_id, vtr_item_frame_list *out,
                                   vtr_error *err);

void vtr_item_frame_list_free(vtr_item_frame_list *list);

/* The picture of frame position of an item: *jpeg (malloc'ed, *size bytes).
 * VTR_ERR_NOT_FOUND when there is no such frame or it has no picture. */
vtr_status vtr_catalog_item_frame_jpeg(vtr_catalog *cat, int64_t item_id, int64_t position,
                                       void **jpeg, size_t *size, vtr_error *err);

/* Deletes an item, with its captions and split memberships (cascade). VTR_ERR_NOT_FOUND
 * for an unknown item id. */
vtr_status vtr_catalog_delete_item(vtr_catalog *cat, int64_t item_id, vtr_error *err);

/* ---- captions --------------------------------------------------------------------- */

typedef struct vtr_caption {
    int64_t id;
    int64_t ordinal; /* 0-based position among the item's captions */
    char *text;
} vtr_caption;

typedef struct vtr_caption_list {
    size_t n;
    vtr_caption *captions;
} vtr_caption_list;

/* Stores a caption of item_id. ordinal >= 0 sets the caption at that position, replacing
 * the text of one already there (so re-importing an annotation file is idempotent);
 * ordinal < 0 appends after the item's last caption. *caption_id (may be NULL) receives
 * the caption's id. */
vtr_status vtr_catalog_add_caption(vtr_catalog *cat, int64_t item_id, int64_t ordinal,
                                   const char *text, int64_t *caption_id, vtr_error *err);

/* The captions of item_id in ordinal order; an empty list for an item without captions
 * (or an unknown id). Free *out with vtr_caption_list_free. */
vtr_status vtr_catalog_item_captions(vtr_catalog *cat, int64_t item_id,
                                     vtr_caption_list *out, vtr_error *err);

void vtr_caption_list_free(vtr_caption_list *list);

/* ---- role graphs of captions (schema version 2) ----------------------------------- */

/* A caption's semantic role graph as HGR's release writes it: the JSON value
 * [nodes, edges] of that caption in sent2rolegraph.augment.json (text/role_graph.h reads
 * it), stored as compact JSON text. The catalog checks only that the text is a JSON
 * array; the importer validates the graph itself. A graph belongs to its caption's text:
 * storing another text at the caption's ordinal (vtr_catalog_add_caption) removes the
 * graph, and deleting the caption or its item deletes it. */

/* Sets (graph non-NULL) or removes (graph NULL; removing what is not there is a no-op)
 * the graph of caption_id. VTR_ERR_INVALID when graph is not a JSON array,
 * VTR_ERR_NOT_FOUND for an unknown caption id. Importers call it inside their
 * transaction (vtr_catalog_begin), after the caption's vtr_catalog_add_caption. */
vtr_status vtr_catalog_set_caption_graph(vtr_catalog *cat, int64_t caption_id,
                                         const char *graph, vtr_error *err);

/* The graph of caption_id into *graph (malloc'd NUL-terminated text; free it with
 * free()). VTR_ERR_NOT_FOUND ("no role graph of caption ID") when the caption has no
 * graph (or does not exist). On failure *graph is NULL. */
vtr_status vtr_catalog_caption_graph(vtr_catalog *cat, int64_t caption_id, char **graph,
                                     vtr_error *err);

/* One caption of a split, as vtr_catalog_split_caption_graphs() hands it over. The
 * strings are valid during the callback only. */
typedef struct vtr_split_caption {
    int64_t item_id;
    const char *key;    /* the item's key */
    int64_t caption_id;
    int64_t ordinal;    /* the caption's position among its item's captions */
    const char *text;   /* the caption */
    const char *graph;  /* its role graph (JSON text); NULL when it has none */
} vtr_split_caption;

/* Called once per caption; a status other than VTR_OK stops the walk and is returned
 * (with err as the callback filled it). */
typedef vtr_status (*vtr_split_caption_fn)(void *ctx, const vtr_split_caption *caption,
                                           vtr_error *err);

/* Walks the captions of every item in the split `split` of dataset_id, in the split's
 * order (item id order, as vtr_catalog_split_items) and within an item in ordinal order,
 * with their graphs: one query, streamed row by row, so a split of any size is read
 * without holding it in memory. Items without captions give no call. The callback may
 * call other catalog functions for reading, but must not write through cat. An unknown
 * split or dataset walks nothing. */
vtr_status vtr_catalog_split_caption_graphs(vtr_catalog *cat, int64_t dataset_id,
                                            const char *split, vtr_split_caption_fn fn,
                                            void *ctx, vtr_error *err);

/* ---- splits ----------------------------------------------------------------------- */

typedef struct vtr_item_ref {
    int64_t id;
    char *key;
} vtr_item_ref;

typedef struct vtr_item_ref_list {
    size_t n;
    vtr_item_ref *items;
} vtr_item_ref_list;

/* Puts item_id into the split named `split` ("train", "val", "test" or any non-empty
 * name) of the item's dataset. An item may be in several splits; adding it twice to the
 * same split is a no-op. VTR_ERR_NOT_FOUND for an unknown item id. */
vtr_status vtr_catalog_set_split(vtr_catalog *cat, int64_t item_id, const char *split,
                                 vtr_error *err);

/* The items of a split, in item id order, i.e. the order in which items were first added.
 * Importers add items in their annotation file's order, so the order (and hence, e.g.,
 * the contiguous COCO 1K folds) is the reference's. An unknown split gives an empty list:
 * callers that need items should check n. Free *out with vtr_item_ref_list_free. */
vtr_status vtr_catalog_split_items(vtr_catalog *cat, int64_t dataset_id, const char *split,
                                   vtr_item_ref_list *out, vtr_error *err);

void vtr_item_ref_list_free(vtr_item_ref_list *list);

/* The names of dataset_id's splits, sorted, ", "-separated, into buf (size bytes, cut to
 * fit; "" when it has none): for messages ("its splits: test, train, val"). */
vtr_status vtr_catalog_split_names(vtr_catalog *cat, int64_t dataset_id, char *buf,
                                   size_t size, vtr_error *err);

/* ---- vocabularies (schema version 2) --------------------------------------------- */

/* A dataset's vocabulary as a list of words: the word with id i is words[i]. Stored in
 * the table `vocabularies` as a JSON array of strings under (dataset, name); e.g. "hgr",
 * the HGR release's word2int.json / int2word.npy (text/vocab.h makes a vtr_vocab of the
 * list again). */
typedef struct vtr_word_list {
    size_t n;
    const char **words; /* n NUL-terminated UTF-8 strings */
    void *storage;      /* owns them */
} vtr_word_list;

/* Stores (or replaces) the vocabulary `name` (non-empty) of dataset_id: n >= 1 words,
 * each a non-empty string. VTR_ERR_INVALID for a bad argument or a word that is not
 * valid UTF-8, VTR_ERR_NOT_FOUND for an unknown dataset id. */
vtr_status vtr_catalog_put_vocabulary(vtr_catalog *cat, int64_t dataset_id, const char *name,
                                      const char *const *words, size_t n, vtr_error *err);

/* Reads the vocabulary `name` of dataset_id into *out (free with vtr_word_list_free).
 * VTR_ERR_NOT_FOUND when there is none; VTR_ERR_FORMAT when the stored text is not a
 * JSON array of strings. */
vtr_status vtr_catalog_get_vocabulary(vtr_catalog *cat, int64_t dataset_id, const char *name,
                                      vtr_word_list *out, vtr_error *err);

void vtr_word_list_free(vtr_word_list *list);

/* ---- feature stores --------------------------------------------------------------- */

/* A feature store of a dataset (see DESIGN.md: one row matrix + offsets + keys). As input
 * id, created_at and storage are ignored. */
typedef struct vtr_feature_store {
    int64_t id;
    int64_t dataset_id;
    const char *name;       /* unique within the dataset, e.g. "resnet152" */
    const char *path;       /* where the store lives */
    const char *extractor;  /* what produced the features, e.g. "resnet152/avgpool" */
    int64_t dim;            /* columns, > 0 */
    vtr_dtype dtype;        /* element type of the rows */
    int64_t rows;           /* rows in the matrix (frames, grid cells ...) */
    int64_t items;          /* items with features */
    const char *config;     /* the extractor's resolved config; NULL when none */
    const char *created_at; /* when the store was last added or replaced */
    void *storage;          /* owns the strings of a returned store */
} vtr_feature_store;

/* Adds fs under (fs->dataset_id, fs->name), or replaces every field of the store already
 * registered under that name, keeping its id. *id (may be NULL) receives the id. */
vtr_status vtr_catalog_put_feature_store(vtr_catalog *cat, const vtr_feature_store *fs,
                                         int64_t *id, vtr_error *err);

/* Finds a feature store by dataset and name; VTR_ERR_NOT_FOUND when absent. Free *out
 * with vtr_feature_store_free. */
vtr_status vtr_catalog_find_feature_store(vtr_catalog *cat, int64_t dataset_id,
                                          const char *name, vtr_feature_store *out,
                                          vtr_error *err);

void vtr_feature_store_free(vtr_feature_store *fs);

/* ---- runs ------------------------------------------------------------------------- */

typedef enum vtr_run_status {
    VTR_RUN_RUNNING,
    VTR_RUN_DONE,
    VTR_RUN_FAILED,
} vtr_run_status;

/* "running", "done", "failed"; "?" when out of range. */
const char *vtr_run_status_name(vtr_run_status status);

/* What produced a result. As input (vtr_catalog_begin_run) only kind, config, seed,
 * code_version, data_hashes and host are read. */
typedef struct vtr_run {
    int64_t id;
    const char *kind;         /* "train", "eval", "index", ... */
    const char *config;       /* the full resolved config (YAML text) */
    int64_t seed;
    const char *code_version; /* vtr_version */
    const char *data_hashes;  /* JSON object, name -> hex digest; NULL: "{}" */
    const char *host;         /* NULL: this machine's host name */
    const char *started_at;
    const char *finished_at;  /* NULL while running */
    vtr_run_status status;
    const char *result;       /* JSON text; NULL while running or when none was given */
    void *storage;            /* owns the strings of a returned run */
} vtr_run;

/* Records the start of a run (status running) and gives its id in *id. kind, config and
 * code_version are required; data_hashes must be a JSON object whose values are strings
 * (VTR_ERR_INVALID otherwise). */
vtr_status vtr_catalog_begin_run(vtr_catalog *cat, const vtr_run *run, int64_t *id,
                                 vtr_error *err);

/* Records the end of a running run: status VTR_RUN_DONE or VTR_RUN_FAILED, result any
 * JSON text (may be NULL), finished_at now. VTR_ERR_NOT_FOUND for an unknown id,
 * VTR_ERR_INVALID for a run that has already finished or for malformed JSON. */
vtr_status vtr_catalog_finish_run(vtr_catalog *cat, int64_t run_id, vtr_run_status status,
                                  const char *result_json, vtr_error *err);

/* Reads a run's record; VTR_ERR_NOT_FOUND when absent. Free *out with vtr_run_free. */
vtr_status vtr_catalog_get_run(vtr_catalog *cat, int64_t run_id, vtr_run *out,
                               vtr_error *err);

void vtr_run_free(vtr_run *run);

#endif
