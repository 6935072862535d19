#define _POSIX_C_SOURCE 200809L
#include "catalog.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PRAGMA application_id of a vtr catalog: the bytes "vtr!" (0x76747221). It tells a
 * catalog from another application's SQLite file, which we refuse to add tables to. */
#define CATALOG_APPLICATION_ID 1987342881LL

/* The timestamp of every row: UTC ISO-8601 with milliseconds. */
#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

/* Migration i takes the schema from version i to version i + 1. They run in order, each
 * in one transaction that also sets user_version. A migration is never edited once
 * released: a change to the schema is a new migration appended here (and a line in
 * docs/catalog.md). */
static const char *const migrations[] = {
    /* 1: the initial schema */
    "PRAGMA application_id = 1987342881;"

    "CREATE TABLE datasets ("
    "  id         INTEGER PRIMARY KEY,"
    "  name       TEXT NOT NULL UNIQUE CHECK (name <> ''),"
    "  root       TEXT,"
    "  created_at TEXT NOT NULL DEFAULT (" NOW_SQL "));"

    "CREATE TABLE items ("
    "  id         INTEGER PRIMARY KEY,"
    "  dataset_id INTEGER NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,"
    "  key        TEXT NOT NULL CHECK (key <> ''),"
    "  path       TEXT,"
    "  size_bytes INTEGER CHECK (size_bytes >= 0),"
    "  mtime_ns   INTEGER,"
    "  duration_s REAL CHECK (duration_s >= 0),"
    "  status     TEXT NOT NULL DEFAULT 'pending'"
    "             CHECK (status IN ('ok', 'failed', 'pending')),"
    "  error      TEXT,"
    "  updated_at TEXT NOT NULL DEFAULT (" NOW_SQL "),"
    "  UNIQUE (dataset_id, key));"
    /* the indexer's "what is left to do" */
    "CREATE INDEX items_by_status ON items (dataset_id, status);"

    "CREATE TABLE captions ("
    "  id      INTEGER PRIMARY KEY,"
    "  item_id INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,"
    "  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),"
    "  text    TEXT NOT NULL,"
    "  UNIQUE (item_id, ordinal));"

    /* dataset_id repeats the item's, so that a split is listed from one index */
    "CREATE TABLE splits ("
    "  dataset_id INTEGER NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,"
    "  item_id    INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,"
    "  split      TEXT NOT NULL CHECK (split <> ''),"
    "  UNIQUE (item_id, split));"
    "CREATE INDEX splits_by_name ON splits (dataset_id, split, item_id);"

    "CREATE TABLE feature_stores ("
    "  id         INTEGER PRIMARY KEY,"
    "  dataset_id INTEGER NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,"
    "  name       TEXT NOT NULL CHECK (name <> ''),"
    "  path       TEXT NOT NULL,"
    "  extractor  TEXT NOT NULL,"
    "  dim        INTEGER NOT NULL CHECK (dim > 0),"
    "  dtype      TEXT NOT NULL,"
    "  rows       INTEGER NOT NULL CHECK (rows >= 0),"
    "  items      INTEGER NOT NULL CHECK (items >= 0),"
    "  config     TEXT,"
    "  created_at TEXT NOT NULL DEFAULT (" NOW_SQL "),"
    "  UNIQUE (dataset_id, name));"

    "CREATE TABLE runs ("
    "  id           INTEGER PRIMARY KEY,"
    "  kind         TEXT NOT NULL CHECK (kind <> ''),"
    "  config       TEXT NOT NULL,"
    "  seed         INTEGER NOT NULL,"
    "  code_version TEXT NOT NULL,"
    "  data_hashes  TEXT NOT NULL DEFAULT '{}',"
    "  started_at   TEXT NOT NULL DEFAULT (" NOW_SQL "),"
    "  finished_at  TEXT,"
    "  status       TEXT NOT NULL DEFAULT 'running'"
    "               CHECK (status IN ('running', 'done', 'failed')),"
    "  result       TEXT,"
    "  host         TEXT);"
    "CREATE INDEX runs_by_kind ON runs (kind, started_at);",

    /* 2: role graphs of captions (HGR), vocabularies of datasets */
    "CREATE TABLE caption_graphs ("
    "  caption_id INTEGER PRIMARY KEY REFERENCES captions (id) ON DELETE CASCADE,"
    "  graph      TEXT NOT NULL);"
    /* a graph describes its caption's words: a new text makes it stale */
    "CREATE TRIGGER caption_graphs_follow_text AFTER UPDATE OF text ON captions"
    "  WHEN old.text IS NOT new.text"
    "  BEGIN DELETE FROM caption_graphs WHERE caption_id = new.id; END;"

    "CREATE TABLE vocabularies ("
    "  dataset_id INTEGER NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,"
    "  name       TEXT NOT NULL CHECK (name <> ''),"
    "  words      TEXT NOT NULL,"
    "  created_at TEXT NOT NULL DEFAULT (" NOW_SQL "),"
    "  UNIQUE (dataset_id, name));",

    /* 3: what vtr-index keeps of an item's sampled frames for vtr-serve */
    "CREATE TABLE item_frames ("
    "  item_id  INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL CHECK (position >= 0),"
    "  time_s   REAL,"
    "  jpeg     BLOB,"
    "  vector   BLOB,"
    "  PRIMARY KEY (item_id, position));",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == VTR_CATALOG_SCHEMA_VERSION,
               "VTR_CATALOG_SCHEMA_VERSION must equal the number of migrations");

/* Every statement the catalog runs, prepared once per connection on first use. */
enum stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_DATASET_INSERT,
    ST_DATASET_FIND,
    ST_DATASET_ROOT,
    ST_ITEM_UPSERT,
    ST_ITEM_ID,
    ST_ITEM_FIND,
    ST_ITEM_EXISTS,
    ST_ITEM_SET_STATUS,
    ST_ITEMS_OF_DATASET,
    ST_ITEM_DELETE,
    ST_CAPTION_APPEND,
    ST_CAPTION_PUT,
    ST_CAPTION_ID,
    ST_CAPTIONS_OF_ITEM,
    ST_SPLIT_SET,
    ST_SPLIT_ITEMS,
    ST_SPLIT_NAMES,
    ST_STORE_UPSERT,
    ST_STORE_ID,
    ST_STORE_FIND,
    ST_RUN_INSERT,
    ST_RUN_FINISH,
    ST_RUN_STATUS,
    ST_RUN_GET,
    ST_GRAPH_PUT,
    ST_GRAPH_DELETE,
    ST_GRAPH_GET,
    ST_CAPTION_EXISTS,
    ST_VOCAB_PUT,
    ST_VOCAB_GET,
    ST_FRAMES_DELETE,
    ST_FRAME_PUT,
    ST_FRAMES_OF_ITEM,
    ST_FRAME_JPEG,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_DATASET_INSERT] = "INSERT INTO datasets (name, root) VALUES (?1, ?2)"
                          " ON CONFLICT (name) DO NOTHING",
    [ST_DATASET_FIND] = "SELECT id FROM datasets WHERE name = ?1",
    [ST_DATASET_ROOT] = "SELECT root FROM datasets WHERE id = ?1",
    [ST_ITEM_UPSERT] =
        "INSERT INTO items (dataset_id, key, path, size_bytes, mtime_ns, duration_s,"
        " status, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        " ON CONFLICT (dataset_id, key) DO UPDATE SET path = excluded.path,"
        " size_bytes = excluded.size_bytes, mtime_ns = excluded.mtime_ns,"
        " duration_s = excluded.duration_s, status = excluded.status,"
        " error = excluded.error, updated_at = " NOW_SQL,
    [ST_ITEM_ID] = "SELECT id FROM items WHERE dataset_id = ?1 AND key = ?2",
    [ST_ITEM_FIND] = "SELECT id, dataset_id, key, path, size_bytes, mtime_ns, duration_s,"
                     " status, error, updated_at FROM items"
                     " WHERE dataset_id = ?1 AND key = ?2",
    [ST_ITEM_EXISTS] = "SELECT 1 FROM items WHERE id = ?1",
    [ST_ITEM_SET_STATUS] = "UPDATE items SET status = ?2, error = ?3,"
                           " updated_at = " NOW_SQL " WHERE id = ?1",
    [ST_ITEMS_OF_DATASET] = "SELECT id, dataset_id, key, path, size_bytes, mtime_ns,"
                            " duration_s, status, error, updated_at FROM items"
                            " WHERE dataset_id = ?1 ORDER BY id",
    [ST_ITEM_DELETE] = "DELETE FROM items WHERE id = ?1",
    /* MAX over no rows is NULL, so the first caption gets ordinal 0 */
    [ST_CAPTION_APPEND] = "INSERT INTO captions (item_id, ordinal, text)"
                          " SELECT ?1, COALESCE(MAX(ordinal) + 1, 0), ?2"
                          " FROM captions WHERE item_id = ?1",
    [ST_CAPTION_PUT] = "INSERT INTO captions (item_id, ordinal, text) VALUES (?1, ?2, ?3)"
                       " ON CONFLICT (item_id, ordinal) DO UPDATE SET text = excluded.text",
    [ST_CAPTION_ID] = "SELECT id FROM captions WHERE item_id = ?1 AND ordinal = ?2",
    [ST_CAPTIONS_OF_ITEM] = "SELECT id, ordinal, text FROM captions WHERE item_id = ?1"
                            " ORDER BY ordinal",
    /* the WHERE clause is also what lets SQLite parse the ON CONFLICT after a SELECT */
    [ST_SPLIT_SET] = "INSERT INTO splits (dataset_id, item_id, split)"
                     " SELECT dataset_id, id, ?2 FROM items WHERE id = ?1"
                     " ON CONFLICT (item_id, split) DO NOTHING",
    [ST_SPLIT_ITEMS] = "SELECT items.id, items.key FROM splits"
                       " JOIN items ON items.id = splits.item_id"
                       " WHERE splits.dataset_id = ?1 AND splits.split = ?2"
                       " ORDER BY splits.item_id",
    [ST_SPLIT_NAMES] = "SELECT DISTINCT split FROM splits WHERE dataset_id = ?1 ORDER BY split",
    [ST_STORE_UPSERT] =
        "INSERT INTO feature_stores (dataset_id, name, path, extractor, dim, dtype, rows,"
        " items, config) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        " ON CONFLICT (dataset_id, name) DO UPDATE SET path = excluded.path,"
        " extractor = excluded.extractor, dim = excluded.dim, dtype = excluded.dtype,"
        " rows = excluded.rows, items = excluded.items, config = excluded.config,"
        " created_at = " NOW_SQL,
    [ST_STORE_ID] = "SELECT id FROM feature_stores WHERE dataset_id = ?1 AND name = ?2",
    [ST_STORE_FIND] = "SELECT id, dataset_id, name, path, extractor, dim, dtype, rows,"
                      " items, config, created_at FROM feature_stores"
                      " WHERE dataset_id = ?1 AND name = ?2",
    [ST_RUN_INSERT] = "INSERT INTO runs (kind, config, seed, code_version, data_hashes,"
                      " host) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_RUN_FINISH] = "UPDATE runs SET status = ?2, result = ?3, finished_at = " NOW_SQL
                      " WHERE id = ?1 AND status = 'running'",
    [ST_RUN_STATUS] = "SELECT status FROM runs WHERE id = ?1",
    [ST_RUN_GET] = "SELECT id, kind, config, seed, code_version, data_hashes, host,"
                   " started_at, finished_at, status, result FROM runs WHERE id = ?1",
    [ST_GRAPH_PUT] = "INSERT INTO caption_graphs (caption_id, graph) VALUES (?1, ?2)"
                     " ON CONFLICT (caption_id) DO UPDATE SET graph = excluded.graph",
    [ST_GRAPH_DELETE] = "DELETE FROM caption_graphs WHERE caption_id = ?1",
    [ST_GRAPH_GET] = "SELECT graph FROM caption_graphs WHERE caption_id = ?1",
    [ST_CAPTION_EXISTS] = "SELECT 1 FROM captions WHERE id = ?1",
    [ST_VOCAB_PUT] = "INSERT INTO vocabularies (dataset_id, name, words) VALUES (?1, ?2, ?3)"
                     " ON CONFLICT (dataset_id, name) DO UPDATE SET words = excluded.words,"
                     " created_at = " NOW_SQL,
    [ST_VOCAB_GET] = "SELECT words FROM vocabularies WHERE dataset_id = ?1 AND name = ?2",
    [ST_FRAMES_DELETE] = "DELETE FROM item_frames WHERE item_id = ?1",
    [ST_FRAME_PUT] = "INSERT INTO item_frames (item_id, position, time_s, jpeg, vector)"
                     " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_FRAMES_OF_ITEM] = "SELECT time_s, length(jpeg), vector FROM item_frames"
                          " WHERE item_id = ?1 ORDER BY position",
    [ST_FRAME_JPEG] = "SELECT jpeg FROM item_frames WHERE item_id = ?1 AND position = ?2"
                      " AND jpeg IS NOT NULL",
};

struct vtr_catalog {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmts[ST_COUNT];
};

static const char *const item_status_names[] = {"pending", "ok", "failed"};
static const char *const run_status_names[] = {"running", "done", "failed"};
#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *vtr_item_status_name(vtr_item_status status)
{
    return (unsigned)status < (unsigned)COUNT_OF(item_status_names)
               ? item_status_names[status]
               : "?";
}

const char *vtr_run_status_name(vtr_run_status status)
{
    return (unsigned)status < (unsigned)COUNT_OF(run_status_names) ? run_status_names[status]
                                                                   : "?";
}

/* Index of text in names, or -1. */
static int name_index(const char *const *names, int n, const char *text)
{
    for (int i = 0; text && i < n; i++)
        if (strcmp(names[i], text) == 0)
            return i;
    return -1;
}

/* ---- errors ----------------------------------------------------------------------- */

/* Fails with "catalog PATH: <what>: <SQLite's message>". A foreign key violation is a
 * reference to a row that does not exist, hence VTR_ERR_NOT_FOUND. Call before the
 * statement is reset, while the connection still holds the message. */
static vtr_status db_fail(vtr_catalog *cat, int rc, vtr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static vtr_status db_fail(vtr_catalog *cat, int rc, vtr_error *err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    vtr_status st = rc == SQLITE_CONSTRAINT_FOREIGNKEY ? VTR_ERR_NOT_FOUND : VTR_ERR_DB;
    const char *cause = sqlite3_errcode(cat->db) == rc ? sqlite3_errmsg(cat->db)
                                                       : sqlite3_errstr(rc);
    return vtr_fail(err, st, "catalog %s: %s: %s", cat->path, what, cause);
}

static vtr_status nomem(vtr_catalog *cat, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_NOMEM, "catalog %s: out of memory", cat->path);
}

/* VTR_ERR_INVALID unless text is a non-empty string. */
/* Makes room for one more element in a list of n (*items, *cap elements of size bytes),
 * doubling from first when full. */
static vtr_status grow_list(vtr_catalog *cat, void *items, size_t *cap, size_t n, size_t size,
                            size_t first, vtr_error *err)
{
    if (n < *cap)
        return VTR_OK;
    size_t new_cap = *cap ? 2 * *cap : first;
    void *grown = realloc(*(void **)items, new_cap * size);
    if (!grown)
        return nomem(cat, err);
    *(void **)items = grown;
    *cap = new_cap;
    return VTR_OK;
}

static vtr_status require_text(vtr_catalog *cat, const char *text, const char *what,
                               vtr_error *err)
{
    if (text && *text)
        return VTR_OK;
    return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: %s is %s", cat->path, what,
                    text ? "empty" : "missing");
}

/* ---- statements ------------------------------------------------------------------- */

static vtr_status stmt_get(vtr_catalog *cat, enum stmt_id id, sqlite3_stmt **out,
                           vtr_error *err)
{
    if (!cat->stmts[id]) {
        int rc = sqlite3_prepare_v2(cat->db, stmt_sql[id], -1, &cat->stmts[id], NULL);
        if (rc != SQLITE_OK)
            return db_fail(cat, rc, err, "preparing \"%s\"", stmt_sql[id]);
    }
    *out = cat->stmts[id];
    return VTR_OK;
}

/* Makes a cached statement ready for its next use and ends its read, if any. */
static void stmt_release(sqlite3_stmt *s)
{
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

/* Binders that do nothing once *rc holds an error, so that a run of bindings is checked
 * once, by the step that follows. */
static void bind_text(sqlite3_stmt *s, int i, const char *v, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

static void bind_int64(sqlite3_stmt *s, int i, int64_t v, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(s, i, v);
}

/* A negative value means unknown and is stored as NULL. */
static void bind_opt_int64(sqlite3_stmt *s, int i, int64_t v, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = v >= 0 ? sqlite3_bind_int64(s, i, v) : sqlite3_bind_null(s, i);
}

/* A negative value or NaN means unknown and is stored as NULL. */
static void bind_opt_double(sqlite3_stmt *s, int i, double v, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = v >= 0 ? sqlite3_bind_double(s, i, v) : sqlite3_bind_null(s, i);
}

static int64_t column_opt_int64(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, col);
}

static double column_opt_double(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, col);
}

/* A NULL in column col of the current row where the schema says NOT NULL: only a damaged
 * or hand-edited file has one. */
static vtr_status null_column(vtr_catalog *cat, sqlite3_stmt *s, int col, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_FORMAT, "catalog %s: a row without its %s (a damaged database?)",
                    cat->path, sqlite3_column_name(s, col));
}

/* Copies text columns of the current row into one allocation, *storage, pointing each
 * *fields[i] at its copy of column cols[i] (NULL for an SQL NULL). A NULL where bit i of
 * nullable is clear (a NOT NULL column: only a damaged or hand-edited file has one) is
 * VTR_ERR_FORMAT, so that callers never see a NULL they were promised a string for. */
static vtr_status copy_texts(vtr_catalog *cat, sqlite3_stmt *s, int n, const int *cols,
                             unsigned nullable, const char **const *fields, void **storage,
                             vtr_error *err)
{
    size_t total = 1;
    for (int i = 0; i < n; i++) {
        if (sqlite3_column_type(s, cols[i]) == SQLITE_NULL) {
            if (!(nullable >> i & 1u))
                return null_column(cat, s, cols[i], err);
            continue;
        }
        if (!sqlite3_column_text(s, cols[i])) /* text first, then bytes: SQLite's rule */
            return nomem(cat, err);
        total += (size_t)sqlite3_column_bytes(s, cols[i]) + 1;
    }
    char *buf = malloc(total);
    if (!buf)
        return nomem(cat, err);
    char *p = buf;
    for (int i = 0; i < n; i++) {
        if (sqlite3_column_type(s, cols[i]) == SQLITE_NULL) {
            *fields[i] = NULL;
            continue;
        }
        size_t len = (size_t)sqlite3_column_bytes(s, cols[i]);
        memcpy(p, sqlite3_column_text(s, cols[i]), len);
        p[len] = '\0';
        *fields[i] = p;
        p += len + 1;
    }
    *storage = buf;
    return VTR_OK;
}

static char *column_strdup(sqlite3_stmt *s, int col)
{
    const unsigned char *text = sqlite3_column_text(s, col);
    return text ? strdup((const char *)text) : strdup("");
}

/* Runs a statement that returns no rows (or whose rows are not wanted). */
static vtr_status stmt_exec_cached(vtr_catalog *cat, enum stmt_id id, const char *what,
                                   vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, id, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "%s", what);
    stmt_release(s);
    return st;
}

/* Steps a bound statement that looks up one row (rc: the binding result): VTR_OK with the
 * row current, VTR_ERR_NOT_FOUND "catalog PATH: no WHAT" when there is none, else the
 * database's error. The caller releases the statement. */
static vtr_status step_row(vtr_catalog *cat, sqlite3_stmt *s, int rc, const char *what,
                           vtr_error *err)
{
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        return VTR_OK;
    if (rc == SQLITE_DONE)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "catalog %s: no %s", cat->path, what);
    return db_fail(cat, rc, err, "reading %s", what);
}

/* step_row for a "SELECT id ..." statement, which it releases: *out gets the first column
 * of the row. */
static vtr_status step_id(vtr_catalog *cat, sqlite3_stmt *s, int rc, int64_t *out,
                          const char *what, vtr_error *err)
{
    vtr_status st = step_row(cat, s, rc, what, err);
    if (st == VTR_OK)
        *out = sqlite3_column_int64(s, 0);
    stmt_release(s);
    return st;
}

/* Runs statement id, of one integer parameter (a row id), for its one row and copies the
 * row's first column, a text, into *out (malloc'ed; SQL NULL: NULL when null_ok, else "").
 * VTR_ERR_NOT_FOUND "no WHAT" when there is no row. */
static vtr_status query_text(vtr_catalog *cat, enum stmt_id id, int64_t row_id,
                             const char *what, bool null_ok, char **out, vtr_error *err)
{
    *out = NULL;
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, id, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, row_id, &rc);
    st = step_row(cat, s, rc, what, err);
    bool null = st == VTR_OK && sqlite3_column_type(s, 0) == SQLITE_NULL;
    if (st == VTR_OK && !(null && null_ok) && !(*out = column_strdup(s, 0)))
        st = nomem(cat, err);
    stmt_release(s);
    return st;
}

/* ---- opening ---------------------------------------------------------------------- */

/* Runs a one-row PRAGMA (or other query) and returns its integer. */
static vtr_status query_int(vtr_catalog *cat, const char *sql, const char *what,
                            int64_t *value, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = VTR_OK;
    int rc = sqlite3_prepare_v2(cat->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = db_fail(cat, rc, err, "%s", what);
        goto end;
    }
    *value = sqlite3_column_int64(s, 0);
end:
    sqlite3_finalize(s);
    return st;
}

static vtr_status exec_sql(vtr_catalog *cat, const char *sql, const char *what,
                           vtr_error *err)
{
    int rc = sqlite3_exec(cat->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? VTR_OK : db_fail(cat, rc, err, "%s", what);
}

/* Refuses a schema version this code cannot migrate from: a newer one, or a negative one
 * (no vtr writes it; it would index the migrations before their start). */
static vtr_status check_version(vtr_catalog *cat, int64_t version, vtr_error *err)
{
    if (version < 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "catalog %s has schema version %lld (corrupt?)",
                        cat->path, (long long)version);
    if (version > VTR_CATALOG_SCHEMA_VERSION)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "catalog %s has schema version %lld; this vtr knows up to %d", cat->path,
                        (long long)version, VTR_CATALOG_SCHEMA_VERSION);
    return VTR_OK;
}

static vtr_status set_wal_mode(vtr_catalog *cat, vtr_error *err)
{
    const char *file = sqlite3_db_filename(cat->db, "main");
    if (!file || !*file) /* in-memory: no other connection can see it anyway */
        return VTR_OK;
    sqlite3_stmt *s = NULL;
    vtr_status st = VTR_OK;
    int rc = sqlite3_prepare_v2(cat->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = db_fail(cat, rc, err, "setting WAL journal mode");
        goto end;
    }
    const char *mode = (const char *)sqlite3_column_text(s, 0);
    if (!mode || strcmp(mode, "wal") != 0)
        st = vtr_fail(err, VTR_ERR_DB, "catalog %s: cannot use WAL journal mode (got %s)",
                      cat->path, mode ? mode : "nothing");
end:
    sqlite3_finalize(s);
    return st;
}

/* Refuses SQLite files that are not vtr catalogs: one with another application id, or
 * one without ours that already has tables. An empty file is a new catalog. */
static vtr_status check_application(vtr_catalog *cat, int64_t version, vtr_error *err)
{
    int64_t app_id = 0, tables = 0;
    vtr_status st = query_int(cat, "PRAGMA application_id", "reading the application id",
                              &app_id, err);
    if (st != VTR_OK)
        return st;
    if (app_id == CATALOG_APPLICATION_ID)
        return VTR_OK;
    if (app_id == 0 && version == 0) {
        st = query_int(cat, "SELECT count(*) FROM sqlite_master", "listing the tables",
                       &tables, err);
        if (st != VTR_OK || tables == 0)
            return st;
    }
    return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                    "catalog %s: an SQLite database of another application, not a vtr "
                    "catalog",
                    cat->path);
}

/* Applies the missing migrations. Each runs under BEGIN IMMEDIATE and re-reads the
 * version inside the transaction, so that two processes opening a new catalog at once
 * migrate it once. */
static vtr_status migrate(vtr_catalog *cat, vtr_error *err)
{
    vtr_status st = VTR_OK;
    for (;;) {
        st = exec_sql(cat, "BEGIN IMMEDIATE", "locking the catalog to update its schema",
                      err);
        if (st != VTR_OK)
            return st;
        int64_t version = 0;
        st = query_int(cat, "PRAGMA user_version", "reading the schema version", &version,
                       err);
        if (st != VTR_OK)
            goto fail;
        if ((st = check_version(cat, version, err)) != VTR_OK)
            goto fail;
        if (version == VTR_CATALOG_SCHEMA_VERSION)
            break;
        char what[64];
        snprintf(what, sizeof what, "migrating the schema to version %d", (int)version + 1);
        st = exec_sql(cat, migrations[version], what, err);
        if (st != VTR_OK)
            goto fail;
        /* PRAGMA takes no parameters; the value is this code's own constant */
        char *sql = sqlite3_mprintf("PRAGMA user_version = %d", (int)version + 1);
        if (!sql) {
            st = nomem(cat, err);
            goto fail;
        }
        st = exec_sql(cat, sql, what, err);
        sqlite3_free(sql);
        if (st != VTR_OK)
            goto fail;
        st = exec_sql(cat, "COMMIT", what, err);
        if (st != VTR_OK)
            goto fail;
    }
fail:
    if (!sqlite3_get_autocommit(cat->db))
        sqlite3_exec(cat->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static vtr_status open_catalog(const char *path, bool create, vtr_catalog **out, vtr_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return vtr_fail(err, VTR_ERR_INVALID, "catalog: no path given");
    if (!create && strcmp(path, ":memory:") != 0 && access(path, F_OK) != 0)
        return errno == ENOENT
                   ? vtr_fail(err, VTR_ERR_NOT_FOUND,
                              "catalog %s does not exist (vtr-import fills one)", path)
                   : vtr_fail_errno(err, "catalog %s", path);
    vtr_status st = VTR_OK;
    vtr_catalog *cat = calloc(1, sizeof *cat);
    if (!cat)
        return vtr_fail(err, VTR_ERR_NOMEM, "catalog %s: out of memory", path);
    cat->path = strdup(path);
    if (!cat->path) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "catalog %s: out of memory", path);
        goto end;
    }
    int rc = sqlite3_open_v2(path, &cat->db,
                             SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0), NULL);
    if (rc != SQLITE_OK) {
        st = vtr_fail(err, VTR_ERR_DB, "catalog %s: %s", path,
                      cat->db ? sqlite3_errmsg(cat->db) : sqlite3_errstr(rc));
        goto end;
    }
    sqlite3_extended_result_codes(cat->db, 1);
    sqlite3_busy_timeout(cat->db, VTR_CATALOG_BUSY_MS);

    /* The first read of the file: a file that is not a database fails here. */
    int64_t version = 0;
    st = query_int(cat, "PRAGMA user_version", "reading the schema version", &version, err);
    if (st != VTR_OK)
        goto end;
    if ((st = check_version(cat, version, err)) != VTR_OK)
        goto end;
    st = check_application(cat, version, err);
    if (st != VTR_OK)
        goto end;
    if (!create && version == 0) { /* an empty file, or an empty SQLite database */
        st = vtr_fail(err, VTR_ERR_FORMAT, "catalog %s is empty, not a vtr catalog (vtr-import "
                      "fills one)", path);
        goto end;
    }

    /* foreign_keys is per connection and off by default; read it back, since a SQLite
     * built without them accepts the PRAGMA silently */
    int64_t fk = 0;
    st = exec_sql(cat, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
    if (st == VTR_OK)
        st = query_int(cat, "PRAGMA foreign_keys", "enabling foreign keys", &fk, err);
    if (st != VTR_OK)
        goto end;
    if (fk != 1) {
        st = vtr_fail(err, VTR_ERR_UNSUPPORTED,
                      "catalog %s: this SQLite does not enforce foreign keys", path);
        goto end;
    }
    st = set_wal_mode(cat, err);
    if (st != VTR_OK)
        goto end;
    /* In WAL mode NORMAL cannot corrupt the database; a power loss may only undo the last
     * commits. FULL would fsync on every commit of an indexer's per-item writes. */
    st = exec_sql(cat, "PRAGMA synchronous = NORMAL", "setting synchronous mode", err);
    if (st != VTR_OK)
        goto end;

    if (version < VTR_CATALOG_SCHEMA_VERSION) {
        st = migrate(cat, err);
        if (st != VTR_OK)
            goto end;
    }
end:
    if (st != VTR_OK) {
        vtr_catalog_close(cat);
        return st;
    }
    *out = cat;
    return VTR_OK;
}

vtr_status vtr_catalog_open(const char *path, vtr_catalog **out, vtr_error *err)
{
    return open_catalog(path, true, out, err);
}

vtr_status vtr_catalog_open_existing(const char *path, vtr_catalog **out, vtr_error *err)
{
    return open_catalog(path, false, out, err);
}

void vtr_catalog_close(vtr_catalog *cat)
{
    if (!cat)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(cat->stmts[i]);
    /* closing rolls back an open transaction */
    sqlite3_close(cat->db);
    free(cat->path);
    free(cat);
}

/* ---- transactions ----------------------------------------------------------------- */

vtr_status vtr_catalog_begin(vtr_catalog *cat, vtr_error *err)
{
    if (!sqlite3_get_autocommit(cat->db))
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: a transaction is already open",
                        cat->path);
    return stmt_exec_cached(cat, ST_BEGIN, "beginning a transaction", err);
}

vtr_status vtr_catalog_commit(vtr_catalog *cat, vtr_error *err)
{
    if (sqlite3_get_autocommit(cat->db))
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: no transaction to commit",
                        cat->path);
    vtr_status st = stmt_exec_cached(cat, ST_COMMIT, "committing", err);
    if (st != VTR_OK && !sqlite3_get_autocommit(cat->db))
        sqlite3_exec(cat->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

vtr_status vtr_catalog_rollback(vtr_catalog *cat, vtr_error *err)
{
    if (sqlite3_get_autocommit(cat->db))
        return VTR_OK;
    return stmt_exec_cached(cat, ST_ROLLBACK, "rolling back", err);
}

/* ---- datasets --------------------------------------------------------------------- */

vtr_status vtr_catalog_add_dataset(vtr_catalog *cat, const char *name, const char *root,
                                   int64_t *id, vtr_error *err)
{
    vtr_status st = require_text(cat, name, "dataset name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_DATASET_INSERT, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_text(s, 1, name, &rc);
    bind_text(s, 2, root, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "adding dataset \"%s\"", name);
    stmt_release(s);
    if (st != VTR_OK)
        return st;
    return vtr_catalog_find_dataset(cat, name, id, err);
}

vtr_status vtr_catalog_find_dataset(vtr_catalog *cat, const char *name, int64_t *id,
                                    vtr_error *err)
{
    vtr_status st = require_text(cat, name, "dataset name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_DATASET_FIND, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_text(s, 1, name, &rc);
    char what[300];
    snprintf(what, sizeof what, "dataset \"%s\"", name);
    return step_id(cat, s, rc, id, what, err);
}

vtr_status vtr_catalog_dataset_root(vtr_catalog *cat, int64_t dataset_id, char **root,
                                    vtr_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "dataset %lld", (long long)dataset_id);
    return query_text(cat, ST_DATASET_ROOT, dataset_id, what, true, root, err);
}

/* ---- items ------------------------------------------------------------------------ */

vtr_status vtr_catalog_upsert_item(vtr_catalog *cat, const vtr_item *item, int64_t *id,
                                   vtr_error *err)
{
    vtr_status st = require_text(cat, item->key, "item key", err);
    if (st != VTR_OK)
        return st;
    if ((unsigned)item->status >= (unsigned)COUNT_OF(item_status_names))
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: item \"%s\": bad status %d",
                        cat->path, item->key, (int)item->status);
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_ITEM_UPSERT, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item->dataset_id, &rc);
    bind_text(s, 2, item->key, &rc);
    bind_text(s, 3, item->path, &rc);
    bind_opt_int64(s, 4, item->size_bytes, &rc);
    bind_opt_int64(s, 5, item->mtime_ns, &rc);
    bind_opt_double(s, 6, item->duration_s, &rc);
    bind_text(s, 7, item_status_names[item->status], &rc);
    bind_text(s, 8, item->error, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "storing item \"%s\" of dataset %lld", item->key,
                     (long long)item->dataset_id);
    stmt_release(s);
    if (st != VTR_OK || !id)
        return st;
    /* last_insert_rowid is not set when the upsert updated: look the id up */
    st = stmt_get(cat, ST_ITEM_ID, &s, err);
    if (st != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, item->dataset_id, &rc);
    bind_text(s, 2, item->key, &rc);
    char what[300];
    snprintf(what, sizeof what, "item \"%s\" in dataset %lld", item->key,
             (long long)item->dataset_id);
    return step_id(cat, s, rc, id, what, err);
}

/* The current row of an ST_ITEM_FIND or ST_ITEMS_OF_DATASET statement (the same
 * columns) into *out; its strings in one allocation that out owns. */
static vtr_status read_item_row(vtr_catalog *cat, sqlite3_stmt *s, vtr_item *out,
                                vtr_error *err)
{
    const char *status = NULL;
    const int cols[] = {2, 3, 7, 8, 9};
    const char **const fields[] = {&out->key, &out->path, &status, &out->error,
                                   &out->updated_at};
    vtr_status st = copy_texts(cat, s, COUNT_OF(cols), cols, 1u << 1 | 1u << 3, fields,
                               &out->storage, err);
    if (st != VTR_OK)
        return st;
    out->id = sqlite3_column_int64(s, 0);
    out->dataset_id = sqlite3_column_int64(s, 1);
    out->size_bytes = column_opt_int64(s, 4);
    out->mtime_ns = column_opt_int64(s, 5);
    out->duration_s = column_opt_double(s, 6);
    int status_index = name_index(item_status_names, COUNT_OF(item_status_names), status);
    if (status_index < 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "catalog %s: item \"%s\" has unknown status \"%s\"",
                        cat->path, out->key ? out->key : "", status ? status : "");
    out->status = (vtr_item_status)status_index;
    return VTR_OK;
}

vtr_status vtr_catalog_find_item(vtr_catalog *cat, int64_t dataset_id, const char *key,
                                 vtr_item *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = require_text(cat, key, "item key", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_ITEM_FIND, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, key, &rc);
    char what[600];
    snprintf(what, sizeof what, "item \"%s\" in dataset %lld", key, (long long)dataset_id);
    if ((st = step_row(cat, s, rc, what, err)) != VTR_OK)
        goto end;
    st = read_item_row(cat, s, out, err);
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_item_free(out);
    return st;
}

vtr_status vtr_catalog_set_item_status(vtr_catalog *cat, int64_t item_id,
                                       vtr_item_status status, const char *error,
                                       vtr_error *err)
{
    if ((unsigned)status >= (unsigned)COUNT_OF(item_status_names))
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: item %lld: bad status %d",
                        cat->path, (long long)item_id, (int)status);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_ITEM_SET_STATUS, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    bind_text(s, 2, item_status_names[status], &rc);
    bind_text(s, 3, error, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "setting the status of item %lld", (long long)item_id);
    else if (sqlite3_changes(cat->db) == 0)
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "catalog %s: no item with id %lld", cat->path,
                      (long long)item_id);
    stmt_release(s);
    return st;
}

void vtr_item_free(vtr_item *item)
{
    if (!item)
        return;
    free(item->storage);
    memset(item, 0, sizeof *item);
}

vtr_status vtr_catalog_dataset_items(vtr_catalog *cat, int64_t dataset_id, vtr_item_list *out,
                                     vtr_error *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_ITEMS_OF_DATASET, &s, err);
    if (st != VTR_OK)
        return st;
    size_t cap = 0;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((st = grow_list(cat, &out->items, &cap, out->n, sizeof *out->items, 64, err)) != VTR_OK)
            goto end;
        vtr_item *it = &out->items[out->n];
        memset(it, 0, sizeof *it);
        st = read_item_row(cat, s, it, err);
        if (st != VTR_OK) {
            vtr_item_free(it);
            goto end;
        }
        out->n++;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "listing the items of dataset %lld", (long long)dataset_id);
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_item_list_free(out);
    return st;
}

void vtr_item_list_free(vtr_item_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->n; i++)
        vtr_item_free(&list->items[i]);
    free(list->items);
    memset(list, 0, sizeof *list);
}

vtr_status vtr_catalog_delete_item(vtr_catalog *cat, int64_t item_id, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_ITEM_DELETE, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "deleting item %lld", (long long)item_id);
    else if (sqlite3_changes(cat->db) == 0)
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "catalog %s: no item with id %lld", cat->path,
                      (long long)item_id);
    stmt_release(s);
    return st;
}

/* ---- captions --------------------------------------------------------------------- */

vtr_status vtr_catalog_add_caption(vtr_catalog *cat, int64_t item_id, int64_t ordinal,
                                   const char *text, int64_t *caption_id, vtr_error *err)
{
    if (!text)
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: item %lld: caption text is missing",
                        cat->path, (long long)item_id);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ordinal < 0 ? ST_CAPTION_APPEND : ST_CAPTION_PUT, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    if (ordinal < 0) {
        bind_text(s, 2, text, &rc);
    } else {
        bind_int64(s, 2, ordinal, &rc);
        bind_text(s, 3, text, &rc);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "adding a caption to item %lld", (long long)item_id);
    stmt_release(s);
    if (st != VTR_OK || !caption_id)
        return st;
    if (ordinal < 0) {
        *caption_id = sqlite3_last_insert_rowid(cat->db);
        return VTR_OK;
    }
    /* the upsert may have updated an existing row, which leaves last_insert_rowid alone */
    st = stmt_get(cat, ST_CAPTION_ID, &s, err);
    if (st != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    bind_int64(s, 2, ordinal, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *caption_id = sqlite3_column_int64(s, 0);
    else
        st = db_fail(cat, rc, err, "reading caption %lld of item %lld", (long long)ordinal,
                     (long long)item_id);
    stmt_release(s);
    return st;
}

vtr_status vtr_catalog_item_captions(vtr_catalog *cat, int64_t item_id,
                                     vtr_caption_list *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_CAPTIONS_OF_ITEM, &s, err);
    if (st != VTR_OK)
        return st;
    size_t cap = 0;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((st = grow_list(cat, &out->captions, &cap, out->n, sizeof *out->captions, 8, err)) != VTR_OK)
            goto end;
        vtr_caption *c = &out->captions[out->n];
        c->id = sqlite3_column_int64(s, 0);
        c->ordinal = sqlite3_column_int64(s, 1);
        c->text = column_strdup(s, 2);
        if (!c->text) {
            st = nomem(cat, err);
            goto end;
        }
        out->n++;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "reading the captions of item %lld", (long long)item_id);
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_caption_list_free(out);
    return st;
}

void vtr_caption_list_free(vtr_caption_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->n; i++)
        free(list->captions[i].text);
    free(list->captions);
    memset(list, 0, sizeof *list);
}

/* ---- splits ----------------------------------------------------------------------- */

vtr_status vtr_catalog_set_split(vtr_catalog *cat, int64_t item_id, const char *split,
                                 vtr_error *err)
{
    vtr_status st = require_text(cat, split, "split name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_SPLIT_SET, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    bind_text(s, 2, split, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(cat->db) : 0;
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "adding item %lld to split \"%s\"", (long long)item_id,
                     split);
    stmt_release(s);
    if (st != VTR_OK || changed)
        return st;
    /* nothing inserted: either already in the split, or no such item */
    st = stmt_get(cat, ST_ITEM_EXISTS, &s, err);
    if (st != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    char what[64];
    snprintf(what, sizeof what, "item with id %lld", (long long)item_id);
    int64_t one = 0;
    return step_id(cat, s, rc, &one, what, err);
}

vtr_status vtr_catalog_split_names(vtr_catalog *cat, int64_t dataset_id, char *buf,
                                   size_t size, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_SPLIT_NAMES, &s, err);
    if (st != VTR_OK)
        return st;
    size_t n = 0;
    int rc = SQLITE_OK;
    buf[0] = 0;
    bind_int64(s, 1, dataset_id, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        int w = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", name ? name : "");
        n = w < 0 || (size_t)w >= size - n ? size - 1 : n + (size_t)w;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "listing the splits of dataset %lld", (long long)dataset_id);
    stmt_release(s);
    return st;
}

vtr_status vtr_catalog_split_items(vtr_catalog *cat, int64_t dataset_id, const char *split,
                                   vtr_item_ref_list *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = require_text(cat, split, "split name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_SPLIT_ITEMS, &s, err);
    if (st != VTR_OK)
        return st;
    size_t cap = 0;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, split, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((st = grow_list(cat, &out->items, &cap, out->n, sizeof *out->items, 64, err)) != VTR_OK)
            goto end;
        vtr_item_ref *r = &out->items[out->n];
        r->id = sqlite3_column_int64(s, 0);
        r->key = column_strdup(s, 1);
        if (!r->key) {
            st = nomem(cat, err);
            goto end;
        }
        out->n++;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "listing split \"%s\" of dataset %lld", split,
                     (long long)dataset_id);
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_item_ref_list_free(out);
    return st;
}

void vtr_item_ref_list_free(vtr_item_ref_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->n; i++)
        free(list->items[i].key);
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* ---- feature stores --------------------------------------------------------------- */

vtr_status vtr_catalog_put_feature_store(vtr_catalog *cat, const vtr_feature_store *fs,
                                         int64_t *id, vtr_error *err)
{
    vtr_status st = require_text(cat, fs->name, "feature store name", err);
    if (st == VTR_OK)
        st = require_text(cat, fs->path, "feature store path", err);
    if (st == VTR_OK)
        st = require_text(cat, fs->extractor, "feature store extractor", err);
    if (st != VTR_OK)
        return st;
    if (fs->dim <= 0 || fs->rows < 0 || fs->items < 0 ||
        (unsigned)fs->dtype >= (unsigned)VTR_DTYPE_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "catalog %s: feature store \"%s\": bad shape or dtype (dim %lld, "
                        "rows %lld, items %lld, dtype %d)",
                        cat->path, fs->name, (long long)fs->dim, (long long)fs->rows,
                        (long long)fs->items, (int)fs->dtype);
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_STORE_UPSERT, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, fs->dataset_id, &rc);
    bind_text(s, 2, fs->name, &rc);
    bind_text(s, 3, fs->path, &rc);
    bind_text(s, 4, fs->extractor, &rc);
    bind_int64(s, 5, fs->dim, &rc);
    bind_text(s, 6, vtr_dtype_name(fs->dtype), &rc);
    bind_int64(s, 7, fs->rows, &rc);
    bind_int64(s, 8, fs->items, &rc);
    bind_text(s, 9, fs->config, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "storing feature store \"%s\" of dataset %lld", fs->name,
                     (long long)fs->dataset_id);
    stmt_release(s);
    if (st != VTR_OK || !id)
        return st;
    st = stmt_get(cat, ST_STORE_ID, &s, err);
    if (st != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, fs->dataset_id, &rc);
    bind_text(s, 2, fs->name, &rc);
    char what[300];
    snprintf(what, sizeof what, "feature store \"%s\" in dataset %lld", fs->name,
             (long long)fs->dataset_id);
    return step_id(cat, s, rc, id, what, err);
}

vtr_status vtr_catalog_find_feature_store(vtr_catalog *cat, int64_t dataset_id,
                                          const char *name, vtr_feature_store *out,
                                          vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = require_text(cat, name, "feature store name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_STORE_FIND, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, name, &rc);
    char what[600];
    snprintf(what, sizeof what, "feature store \"%s\" in dataset %lld", name,
             (long long)dataset_id);
    if ((st = step_row(cat, s, rc, what, err)) != VTR_OK)
        goto end;
    const char *dtype = NULL;
    const int cols[] = {2, 3, 4, 6, 9, 10};
    const char **const fields[] = {&out->name,  &out->path,   &out->extractor,
                                   &dtype,      &out->config, &out->created_at};
    st = copy_texts(cat, s, COUNT_OF(cols), cols, 1u << 4, fields, &out->storage, err);
    if (st != VTR_OK)
        goto end;
    out->id = sqlite3_column_int64(s, 0);
    out->dataset_id = sqlite3_column_int64(s, 1);
    out->dim = sqlite3_column_int64(s, 5);
    out->rows = sqlite3_column_int64(s, 7);
    out->items = sqlite3_column_int64(s, 8);
    int d = 0;
    while (d < VTR_DTYPE_COUNT && strcmp(vtr_dtype_name((vtr_dtype)d), dtype ? dtype : "") != 0)
        d++;
    if (d == VTR_DTYPE_COUNT) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "catalog %s: feature store \"%s\" has unknown dtype \"%s\"", cat->path,
                      name, dtype ? dtype : "");
        goto end;
    }
    out->dtype = (vtr_dtype)d;
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_feature_store_free(out);
    return st;
}

void vtr_feature_store_free(vtr_feature_store *fs)
{
    if (!fs)
        return;
    free(fs->storage);
    memset(fs, 0, sizeof *fs);
}

/* ---- runs ------------------------------------------------------------------------- */

/* What check_json requires of a value besides being JSON. */
enum json_shape {
    JSON_ANY_VALUE,
    JSON_STRING_OBJECT, /* an object whose values are all strings (the data hashes) */
    JSON_ARRAY_VALUE,   /* an array (a role graph) */
};

/* VTR_ERR_INVALID unless text parses as JSON of the given shape. */
static vtr_status check_json(vtr_catalog *cat, const char *text, enum json_shape shape,
                             const char *what, vtr_error *err)
{
    json_error_t jerr;
    json_t *value = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!value)
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: %s: bad JSON at line %d: %s",
                        cat->path, what, jerr.line, jerr.text);
    vtr_status st = VTR_OK;
    if (shape == JSON_ARRAY_VALUE && !json_is_array(value))
        st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: %s: not a JSON array", cat->path,
                      what);
    if (shape == JSON_STRING_OBJECT) {
        const char *key;
        json_t *v;
        if (!json_is_object(value))
            st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: %s: not a JSON object",
                          cat->path, what);
        else
            json_object_foreach(value, key, v)
            {
                if (!json_is_string(v)) {
                    st = vtr_fail(err, VTR_ERR_INVALID,
                                  "catalog %s: %s: the value of \"%s\" is not a string",
                                  cat->path, what, key);
                    break;
                }
            }
    }
    json_decref(value);
    return st;
}

vtr_status vtr_catalog_begin_run(vtr_catalog *cat, const vtr_run *run, int64_t *id,
                                 vtr_error *err)
{
    vtr_status st = require_text(cat, run->kind, "run kind", err);
    if (st == VTR_OK)
        st = require_text(cat, run->code_version, "run code version", err);
    if (st == VTR_OK && !run->config)
        st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: %s run: config is missing",
                      cat->path, run->kind);
    const char *hashes = run->data_hashes ? run->data_hashes : "{}";
    if (st == VTR_OK)
        st = check_json(cat, hashes, JSON_STRING_OBJECT, "run data hashes", err);
    if (st != VTR_OK)
        return st;
    char host[256];
    const char *host_name = run->host;
    if (!host_name) {
        if (gethostname(host, sizeof host) != 0)
            host[0] = '\0';
        host[sizeof host - 1] = '\0';
        host_name = host;
    }
    sqlite3_stmt *s = NULL;
    st = stmt_get(cat, ST_RUN_INSERT, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_text(s, 1, run->kind, &rc);
    bind_text(s, 2, run->config, &rc);
    bind_int64(s, 3, run->seed, &rc);
    bind_text(s, 4, run->code_version, &rc);
    bind_text(s, 5, hashes, &rc);
    bind_text(s, 6, host_name, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "recording the start of a %s run", run->kind);
    else
        *id = sqlite3_last_insert_rowid(cat->db);
    stmt_release(s);
    return st;
}

vtr_status vtr_catalog_finish_run(vtr_catalog *cat, int64_t run_id, vtr_run_status status,
                                  const char *result_json, vtr_error *err)
{
    if (status != VTR_RUN_DONE && status != VTR_RUN_FAILED)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "catalog %s: run %lld: a run finishes as done or failed, not %s",
                        cat->path, (long long)run_id, vtr_run_status_name(status));
    if (result_json) {
        char what[64];
        snprintf(what, sizeof what, "run %lld result", (long long)run_id);
        vtr_status st = check_json(cat, result_json, JSON_ANY_VALUE, what, err);
        if (st != VTR_OK)
            return st;
    }
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_RUN_FINISH, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, run_id, &rc);
    bind_text(s, 2, run_status_names[status], &rc);
    bind_text(s, 3, result_json, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(cat->db) : 0;
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "recording the end of run %lld", (long long)run_id);
    stmt_release(s);
    if (st != VTR_OK || changed)
        return st;

    /* nothing updated: no such run, or it has already finished */
    st = stmt_get(cat, ST_RUN_STATUS, &s, err);
    if (st != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, run_id, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const char *was = (const char *)sqlite3_column_text(s, 0);
        st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: run %lld has already finished (%s)",
                      cat->path, (long long)run_id, was ? was : "?");
    }
    else if (rc == SQLITE_DONE)
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "catalog %s: no run with id %lld", cat->path,
                      (long long)run_id);
    else
        st = db_fail(cat, rc, err, "reading run %lld", (long long)run_id);
    stmt_release(s);
    return st;
}

vtr_status vtr_catalog_get_run(vtr_catalog *cat, int64_t run_id, vtr_run *out,
                               vtr_error *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_RUN_GET, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, run_id, &rc);
    char what[64];
    snprintf(what, sizeof what, "run with id %lld", (long long)run_id);
    if ((st = step_row(cat, s, rc, what, err)) != VTR_OK)
        goto end;
    const char *status = NULL;
    const int cols[] = {1, 2, 4, 5, 6, 7, 8, 9, 10};
    const char **const fields[] = {&out->kind,       &out->config,      &out->code_version,
                                   &out->data_hashes, &out->host,       &out->started_at,
                                   &out->finished_at, &status,          &out->result};
    st = copy_texts(cat, s, COUNT_OF(cols), cols, 1u << 4 | 1u << 6 | 1u << 8, fields,
                    &out->storage, err);
    if (st != VTR_OK)
        goto end;
    out->id = sqlite3_column_int64(s, 0);
    out->seed = sqlite3_column_int64(s, 3);
    int status_index = name_index(run_status_names, COUNT_OF(run_status_names), status);
    if (status_index < 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "catalog %s: run %lld has unknown status \"%s\"",
                      cat->path, (long long)run_id, status ? status : "");
        goto end;
    }
    out->status = (vtr_run_status)status_index;
end:
    stmt_release(s);
    if (st != VTR_OK)
        vtr_run_free(out);
    return st;
}

void vtr_run_free(vtr_run *run)
{
    if (!run)
        return;
    free(run->storage);
    memset(run, 0, sizeof *run);
}

/* ---- role graphs of captions ------------------------------------------------------ */

vtr_status vtr_catalog_set_caption_graph(vtr_catalog *cat, int64_t caption_id,
                                         const char *graph, vtr_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "role graph of caption %lld", (long long)caption_id);
    vtr_status st = graph ? check_json(cat, graph, JSON_ARRAY_VALUE, what, err) : VTR_OK;
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    if ((st = stmt_get(cat, graph ? ST_GRAPH_PUT : ST_GRAPH_DELETE, &s, err)) != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, caption_id, &rc);
    if (graph)
        bind_text(s, 2, graph, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(cat->db) : 0;
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "storing the %s", what);
    stmt_release(s);
    if (st != VTR_OK || graph || changed)
        return st;
    /* nothing removed: no graph, or no such caption */
    if ((st = stmt_get(cat, ST_CAPTION_EXISTS, &s, err)) != VTR_OK)
        return st;
    rc = SQLITE_OK;
    bind_int64(s, 1, caption_id, &rc);
    snprintf(what, sizeof what, "caption with id %lld", (long long)caption_id);
    int64_t one = 0;
    return step_id(cat, s, rc, &one, what, err);
}

vtr_status vtr_catalog_caption_graph(vtr_catalog *cat, int64_t caption_id, char **graph,
                                     vtr_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "role graph of caption %lld", (long long)caption_id);
    return query_text(cat, ST_GRAPH_GET, caption_id, what, false, graph, err);
}

/* Prepared per call rather than cached, so that the callback may use the cached
 * statements (and even walk another split) while this one is being stepped. */
static const char split_captions_sql[] =
    "SELECT items.id, items.key, captions.id, captions.ordinal, captions.text,"
    " caption_graphs.graph FROM splits"
    " JOIN items ON items.id = splits.item_id"
    " JOIN captions ON captions.item_id = splits.item_id"
    " LEFT JOIN caption_graphs ON caption_graphs.caption_id = captions.id"
    " WHERE splits.dataset_id = ?1 AND splits.split = ?2"
    " ORDER BY splits.item_id, captions.ordinal";

vtr_status vtr_catalog_split_caption_graphs(vtr_catalog *cat, int64_t dataset_id,
                                            const char *split, vtr_split_caption_fn fn,
                                            void *ctx, vtr_error *err)
{
    vtr_status st = require_text(cat, split, "split name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(cat->db, split_captions_sql, -1, &s, NULL);
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, split, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        vtr_split_caption c = {
            .item_id = sqlite3_column_int64(s, 0),
            .key = (const char *)sqlite3_column_text(s, 1),
            .caption_id = sqlite3_column_int64(s, 2),
            .ordinal = sqlite3_column_int64(s, 3),
            .text = (const char *)sqlite3_column_text(s, 4),
            .graph = (const char *)sqlite3_column_text(s, 5),
        };
        if (!c.key || !c.text) {
            int col = !c.key ? 1 : 4;
            st = sqlite3_column_type(s, col) == SQLITE_NULL ? null_column(cat, s, col, err)
                                                             : nomem(cat, err);
            goto end;
        }
        if ((st = fn(ctx, &c, err)) != VTR_OK)
            goto end;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "reading the captions of split \"%s\" of dataset %lld",
                     split, (long long)dataset_id);
end:
    sqlite3_finalize(s);
    return st;
}

/* ---- vocabularies ----------------------------------------------------------------- */

vtr_status vtr_catalog_put_vocabulary(vtr_catalog *cat, int64_t dataset_id, const char *name,
                                      const char *const *words, size_t n, vtr_error *err)
{
    vtr_status st = require_text(cat, name, "vocabulary name", err);
    if (st != VTR_OK)
        return st;
    if (n == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "catalog %s: vocabulary \"%s\" has no words",
                        cat->path, name);
    json_t *array = json_array();
    char *text = NULL;
    if (!array)
        return nomem(cat, err);
    for (size_t i = 0; i < n; i++) {
        if (!words[i] || !words[i][0]) {
            st = vtr_fail(err, VTR_ERR_INVALID, "catalog %s: vocabulary \"%s\": word %zu is %s",
                          cat->path, name, i, words[i] ? "empty" : "missing");
            goto end;
        }
        json_t *w = json_string(words[i]); /* NULL for invalid UTF-8 */
        if (!w) {
            st = vtr_fail(err, VTR_ERR_INVALID,
                          "catalog %s: vocabulary \"%s\": word %zu is not valid UTF-8",
                          cat->path, name, i);
            goto end;
        }
        if (json_array_append_new(array, w) != 0) {
            st = nomem(cat, err);
            goto end;
        }
    }
    if (!(text = json_dumps(array, JSON_COMPACT))) {
        st = nomem(cat, err);
        goto end;
    }
    sqlite3_stmt *s = NULL;
    if ((st = stmt_get(cat, ST_VOCAB_PUT, &s, err)) != VTR_OK)
        goto end;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, name, &rc);
    bind_text(s, 3, text, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "storing vocabulary \"%s\" of dataset %lld", name,
                     (long long)dataset_id);
    stmt_release(s);
end:
    free(text);
    json_decref(array);
    return st;
}

vtr_status vtr_catalog_get_vocabulary(vtr_catalog *cat, int64_t dataset_id, const char *name,
                                      vtr_word_list *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = require_text(cat, name, "vocabulary name", err);
    if (st != VTR_OK)
        return st;
    sqlite3_stmt *s = NULL;
    if ((st = stmt_get(cat, ST_VOCAB_GET, &s, err)) != VTR_OK)
        return st;
    json_t *array = NULL;
    int rc = SQLITE_OK;
    bind_int64(s, 1, dataset_id, &rc);
    bind_text(s, 2, name, &rc);
    char what[600];
    snprintf(what, sizeof what, "vocabulary \"%s\" in dataset %lld", name,
             (long long)dataset_id);
    if ((st = step_row(cat, s, rc, what, err)) != VTR_OK)
        goto end;
    const char *text = (const char *)sqlite3_column_text(s, 0);
    json_error_t jerr;
    array = text ? json_loads(text, 0, &jerr) : NULL;
    size_t n = json_array_size(array), total = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *w = json_array_get(array, i);
        if (!json_is_string(w) || json_string_length(w) == 0 ||
            strlen(json_string_value(w)) != json_string_length(w)) {
            n = 0;
            break;
        }
        total += json_string_length(w) + 1;
    }
    if (n == 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "catalog %s: vocabulary \"%s\" of dataset %lld is not a JSON array of "
                      "words",
                      cat->path, name, (long long)dataset_id);
        goto end;
    }
    char *buf = malloc(n * sizeof(char *) + total);
    if (!buf) {
        st = nomem(cat, err);
        goto end;
    }
    out->words = (const char **)(void *)buf;
    char *p = buf + n * sizeof(char *);
    for (size_t i = 0; i < n; i++) {
        size_t len = json_string_length(json_array_get(array, i));
        memcpy(p, json_string_value(json_array_get(array, i)), len + 1);
        out->words[i] = p;
        p += len + 1;
    }
    out->n = n;
    out->storage = buf;
end:
    json_decref(array);
    stmt_release(s);
    return st;
}

void vtr_word_list_free(vtr_word_list *list)
{
    if (!list)
        return;
    free(list->storage);
    memset(list, 0, sizeof *list);
}

/* ---- item frames ---------------------------------------------------------------- */

/* Binds a blob (NULL data: SQL NULL), copied by SQLite. */
static void bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = v ? sqlite3_bind_blob64(s, i, v, n, SQLITE_TRANSIENT) : sqlite3_bind_null(s, i);
}

vtr_status vtr_catalog_put_item_frames(vtr_catalog *cat, int64_t item_id, size_t n,
                                       const vtr_item_frame *frames, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_FRAMES_DELETE, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    stmt_release(s);
    if (rc != SQLITE_DONE)
        return db_fail(cat, rc, err, "clearing the frames of item %lld", (long long)item_id);
    for (size_t i = 0; i < n; i++) {
        const vtr_item_frame *f = &frames[i];
        if ((st = stmt_get(cat, ST_FRAME_PUT, &s, err)) != VTR_OK)
            return st;
        rc = SQLITE_OK;
        bind_int64(s, 1, item_id, &rc);
        bind_int64(s, 2, (int64_t)i, &rc);
        bind_opt_double(s, 3, f->time_s, &rc);
        bind_blob(s, 4, f->jpeg, f->jpeg_size, &rc);
        bind_blob(s, 5, f->vector, (size_t)f->dim * sizeof *f->vector, &rc);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(s);
        stmt_release(s);
        if (rc != SQLITE_DONE)
            return db_fail(cat, rc, err, "storing frame %zu of item %lld", i,
                           (long long)item_id);
    }
    return VTR_OK;
}

void vtr_item_frame_list_free(vtr_item_frame_list *list)
{
    for (size_t i = 0; list && list->frames && i < list->n; i++)
        free((void *)list->frames[i].vector);
    if (list) {
        free(list->frames);
        memset(list, 0, sizeof *list);
    }
}

vtr_status vtr_catalog_item_frames(vtr_catalog *cat, int64_t item_id, vtr_item_frame_list *out,
                                   vtr_error *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_FRAMES_OF_ITEM, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    size_t cap = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((st = grow_list(cat, &out->frames, &cap, out->n, sizeof *out->frames, 16, err)))
            break;
        vtr_item_frame *f = &out->frames[out->n];
        memset(f, 0, sizeof *f);
        f->time_s = column_opt_double(s, 0);
        f->jpeg_size = (size_t)sqlite3_column_int64(s, 1);
        size_t bytes = (size_t)sqlite3_column_bytes(s, 2);
        const void *v = sqlite3_column_blob(s, 2);
        out->n++;
        if (v && bytes >= sizeof *f->vector) {
            uint16_t *copy = malloc(bytes);
            if (!copy) {
                st = nomem(cat, err);
                break;
            }
            memcpy(copy, v, bytes);
            f->vector = copy;
            f->dim = (int64_t)(bytes / sizeof *f->vector);
        }
        rc = SQLITE_OK;
    }
    if (st == VTR_OK && rc != SQLITE_DONE)
        st = db_fail(cat, rc, err, "reading the frames of item %lld", (long long)item_id);
    stmt_release(s);
    if (st != VTR_OK)
        vtr_item_frame_list_free(out);
    return st;
}

vtr_status vtr_catalog_item_frame_jpeg(vtr_catalog *cat, int64_t item_id, int64_t position,
                                       void **jpeg, size_t *size, vtr_error *err)
{
    *jpeg = NULL;
    *size = 0;
    sqlite3_stmt *s = NULL;
    vtr_status st = stmt_get(cat, ST_FRAME_JPEG, &s, err);
    if (st != VTR_OK)
        return st;
    int rc = SQLITE_OK;
    bind_int64(s, 1, item_id, &rc);
    bind_int64(s, 2, position, &rc);
    char what[96];
    snprintf(what, sizeof what, "picture of frame %lld of item %lld", (long long)position,
             (long long)item_id);
    if ((st = step_row(cat, s, rc, what, err)) == VTR_OK) {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        if (!(*jpeg = malloc(n ? n : 1))) {
            st = nomem(cat, err);
        } else {
            memcpy(*jpeg, sqlite3_column_blob(s, 0), n);
            *size = n;
        }
    }
    stmt_release(s);
    return st;
}
