/* Internal to the embedding index (embedding_index.h): what its writer
 * (embedding_index_writer.c), compaction (embedding_index_compact.c), merge
 * (embedding_index_merge.c) and reader (embedding_index_reader.c) share. Not an API:
 * include it only from those files and embedding_index_store.c. The eix_ prefix marks these names as internal.
 *
 * On-disk layout (docs/index.md): DIR/index.sqlite (the manifest), DIR/seg-NNNNNN.npy
 * (segments, (rows, D) float16), DIR/writer.lock. Errors follow embedding_index.h: they
 * start with "index DIR: ".
 */
#ifndef VTR_EMBEDDING_INDEX_INTERNAL_H
#define VTR_EMBEDDING_INDEX_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "index/embedding_index.h"
#include "lib/npy.h"
#include "lib/string_table.h"

#define DB_FILE "index.sqlite"
#define APPLICATION_ID 1987342921LL /* "vtrI" */
#define BUSY_MS 5000
#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

/* ---- segments and the manifest (embedding_index_store.c) ---- */

/* DIR/seg-000012.npy for id 12 (with ".tmp" appended when tmp), malloc'ed; NULL when out
 * of memory. */
char *eix_segment_path(const char *dir, int64_t id, bool tmp);

/* Sets err to VTR_ERR_DB "index DIR: index.sqlite: <what>: <SQLite's message>" (db NULL:
 * "out of memory") and returns VTR_ERR_DB. */
vtr_status eix_db_fail(sqlite3 *db, const char *dir, vtr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs sql (one or more statements without results); on failure eix_db_fail with what. */
vtr_status eix_exec_sql(sqlite3 *db, const char *dir, const char *sql, const char *what,
                        vtr_error *err);

/* Rolls back the open transaction, if any; safe on NULL. */
void eix_rollback(sqlite3 *db);

/* Runs a query of one integer result into *value. */
vtr_status eix_query_int(sqlite3 *db, const char *dir, const char *sql, const char *what,
                         int64_t *value, vtr_error *err);

/* Prepares sql into *s (the caller finalizes it, also on failure: *s is then NULL). */
vtr_status eix_prepare(sqlite3 *db, const char *dir, const char *sql, sqlite3_stmt **s,
                       vtr_error *err);

/* Steps a statement that returns no rows, then resets it for the next bindings. */
vtr_status eix_step_done(sqlite3 *db, const char *dir, sqlite3_stmt *s, const char *what,
                         vtr_error *err);

/* Checks the format version and meta of an opened index.sqlite: the reader's and the
 * writer's common check (VTR_ERR_FORMAT: not initialized, another application, another
 * format; VTR_ERR_UNSUPPORTED: a newer version). Reads dim, model (malloc'ed, when model
 * is not NULL), generation and the format version (1: entries have no norm column). */
vtr_status eix_read_meta(sqlite3 *db, const char *dir, int64_t *dim, char **model,
                         int64_t *generation, int64_t *version, vtr_error *err);

/* The listed segments of the current generation, in id order, mapped. */
typedef struct eix_segment_list {
    int64_t n;
    int64_t *ids, *rows;
    vtr_npy_file *files; /* each checked: (rows[i], D) float16 */
} eix_segment_list;

/* Reads the segment list (inside the caller's transaction) and maps and checks each file
 * (VTR_ERR_FORMAT when it is not the (rows, D) float16 array the manifest lists). A
 * missing file is VTR_ERR_IO with *missing set (the reader retries on that). On failure
 * *l is empty. */
vtr_status eix_load_segments(sqlite3 *db, const char *dir, int64_t dim, eix_segment_list *l,
                             bool *missing, vtr_error *err);

/* Unmaps and frees; leaves *l empty (safe to call again). */
void eix_segment_list_free(eix_segment_list *l);

/* ---- the writer's state, shared with compaction (embedding_index_writer.c) ---- */

struct vtr_embedding_index_writer {
    char *dir;
    sqlite3 *db;
    int lock_fd;
    int64_t dim;
    int64_t generation;
    vtr_embedding_index_step_fn on_step;
    void *step_ctx;
    bool broken;

    /* the staged segment: rows written behind a (0, D) header, renamed at commit */
    int64_t seg_id; /* 0: none yet */
    char *seg_path, *tmp_path;
    FILE *seg;
    int64_t n_rows, cap_rows;
    int64_t *row_key;  /* (n_rows) index into staged */
    int64_t *row_vec;  /* vector number within the item */
    uint8_t *row_live;
    double *row_norm;  /* the vector's norm before normalization */
    /* every key added or removed since the last commit, with its staged live rows
     * (key_count 0: removed); at commit, their committed rows become tombstones */
    vtr_string_table *staged;
    int64_t *key_first, *key_count;
    int64_t key_cap;
    uint16_t *convert; /* (D) one normalized row */
};

/* Stages item key's n rows as stored already (float16, L2-normalized: rows (n, D), read
 * from another index) with their norms (NaN: none), bit for bit; a key staged before is
 * replaced, as by vtr_embedding_index_writer_add. The caller has checked the key and the
 * rows; a failure breaks nothing by itself (the caller marks the writer broken). */
vtr_status eix_stage_stored(vtr_embedding_index_writer *w, const char *key, const uint16_t *rows,
                            const double *norms, int64_t n, vtr_error *err);

/* Reports step `name` to the writer's on_step callback, if any. */
void eix_step(vtr_embedding_index_writer *w, const char *name);

/* VTR_ERR_INVALID: the writer failed earlier and only close remains. */
vtr_status eix_broken_writer(const vtr_embedding_index_writer *w, vtr_error *err);

/* Drops the staged segment's temporary file, if any, and the staged bookkeeping. */
vtr_status eix_reset_staged(vtr_embedding_index_writer *w, vtr_error *err);

/* Takes a new segment id (ids are never reused, even when the segment never commits),
 * then opens its temporary file behind the NPY header of (0, D). */
vtr_status eix_start_segment(vtr_embedding_index_writer *w, vtr_error *err);

/* Completes the staged segment file of `rows` rows: the header rewritten with the row
 * count, fsync, rename, fsync of the directory. Afterwards the file is the final one
 * (w->tmp_path is cleared). */
vtr_status eix_finish_segment(vtr_embedding_index_writer *w, int64_t rows, vtr_error *err);

/* After a failed commit or compaction: rolls back; no generation lists the new segment,
 * so its file goes (unlinked here, or by the next writer). Breaks the writer. */
void eix_drop_new_segment(vtr_embedding_index_writer *w);

#endif
