/* The embedding index: segment files + index.sqlite manifest (embedding_index.h,
 * docs/index.md). */
#define _GNU_SOURCE /* open_memstream, flock, strndup */
#include "embedding_index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/npy.h"
#include "lib/string_table.h"
#include "lib/file.h"

#define DB_FILE "index.sqlite"
#define LOCK_FILE "writer.lock"
#define APPLICATION_ID 1987342921LL /* "vtrI" */
#define BUSY_MS 5000
#define OPEN_ATTEMPTS 8 /* snapshot retries when a compaction removes a file being mapped */
#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

static const char schema_sql[] =
    "CREATE TABLE meta ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  format TEXT NOT NULL,"
    "  dim INTEGER NOT NULL CHECK (dim > 0),"
    "  model TEXT NOT NULL,"
    "  generation INTEGER NOT NULL,"
    "  next_segment INTEGER NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  committed_at TEXT NOT NULL);"
    "CREATE TABLE segments ("
    "  id INTEGER PRIMARY KEY,"
    "  rows INTEGER NOT NULL CHECK (rows > 0),"
    "  generation INTEGER NOT NULL);"
    "CREATE TABLE entries ("
    "  segment INTEGER NOT NULL REFERENCES segments(id),"
    "  row INTEGER NOT NULL,"
    "  key TEXT NOT NULL,"
    "  vector INTEGER NOT NULL,"
    "  live INTEGER NOT NULL CHECK (live IN (0, 1)),"
    "  PRIMARY KEY (segment, row)) WITHOUT ROWID;"
    "CREATE UNIQUE INDEX entries_live_key ON entries(key, vector) WHERE live = 1;"
    "CREATE INDEX entries_dead ON entries(segment, row) WHERE live = 0;";

/* ---- small helpers ---- */

/* "seg-000012.npy" (and with ".tmp" when tmp), malloc'ed. */
static char *segment_path(const char *dir, int64_t id, bool tmp)
{
    char name[64];
    snprintf(name, sizeof name, "seg-%06lld.npy%s", (long long)id, tmp ? ".tmp" : "");
    return vtr_path_join(dir, name);
}

/* The id of a segment file name "seg-<digits>.npy" (*tmp set for "seg-<digits>.npy.tmp"),
 * or -1 for any other name. */
static int64_t parse_segment_name(const char *name, bool *tmp)
{
    if (strncmp(name, "seg-", 4) != 0)
        return -1;
    const char *p = name + 4;
    int64_t id = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
        id = id * 10 + (*p - '0');
    if (digits == 0)
        return -1;
    if (strcmp(p, ".npy") == 0)
        *tmp = false;
    else if (strcmp(p, ".npy.tmp") == 0)
        *tmp = true;
    else
        return -1;
    return id;
}

static vtr_status sync_dir(const char *path, vtr_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return vtr_fail_errno(err, "index %s", path);
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) /* some file systems cannot sync directories */
        return vtr_fail_errno(err, "index %s: fsync", path);
    return VTR_OK;
}

static vtr_status db_fail(sqlite3 *db, const char *dir, vtr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* VTR_ERR_DB "index DIR: index.sqlite: <what>: <SQLite's message>". */
static vtr_status db_fail(sqlite3 *db, const char *dir, vtr_error *err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vtr_fail(err, VTR_ERR_DB, "index %s: %s: %s: %s", dir, DB_FILE, what,
                    db ? sqlite3_errmsg(db) : "out of memory");
}

static vtr_status exec_sql(sqlite3 *db, const char *dir, const char *sql, const char *what,
                           vtr_error *err)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(db, dir, err, "%s", what);
    return VTR_OK;
}

static void rollback(sqlite3 *db)
{
    if (db && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

/* Runs a query of one integer result. */
static vtr_status query_int(sqlite3 *db, const char *dir, const char *sql, const char *what,
                            int64_t *value, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = VTR_OK;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW)
        st = db_fail(db, dir, err, "%s", what);
    else
        *value = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return st;
}

static vtr_status prepare(sqlite3 *db, const char *dir, const char *sql, sqlite3_stmt **s,
                          vtr_error *err)
{
    if (sqlite3_prepare_v2(db, sql, -1, s, NULL) != SQLITE_OK)
        return db_fail(db, dir, err, "preparing \"%.60s\"", sql);
    return VTR_OK;
}

/* Steps a statement that returns no rows, then resets it for the next bindings. */
static vtr_status step_done(sqlite3 *db, const char *dir, sqlite3_stmt *s, const char *what,
                            vtr_error *err)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return db_fail(db, dir, err, "%s", what);
    return VTR_OK;
}

/* The NPY header of a (rows, dim) float16 array, malloc'ed. Its length does not depend on
 * rows: numpy (and vtr_npy_write_stream) pad the first dimension to a fixed width, so a
 * segment is written behind the header of (0, dim) and the header is rewritten in place
 * once the rows are counted. */
static vtr_status segment_header(int64_t rows, int64_t dim, char **hdr, size_t *len,
                                 vtr_error *err)
{
    vtr_tensor t = {.dtype = VTR_F16, .ndim = 2, .shape = {0, dim}, .data = NULL};
    *hdr = NULL;
    *len = 0;
    FILE *mem = open_memstream(hdr, len);
    if (!mem)
        return vtr_fail(err, VTR_ERR_NOMEM, "NPY header: out of memory");
    vtr_status st = vtr_npy_write_stream(mem, &t, 1, "NPY header", err);
    if (fclose(mem) != 0 && st == VTR_OK)
        st = vtr_fail(err, VTR_ERR_NOMEM, "NPY header: out of memory");
    if (st != VTR_OK)
        goto fail;
    /* "'shape': (0, D), <padding>\n": the digits of rows replace the 0, the padding
     * gives up the extra columns */
    static const char field[] = "'shape': (0";
    char *p = memmem(*hdr, *len, field, sizeof field - 1);
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%lld", (long long)rows);
    char *nl = *hdr + *len - 1;
    bool room = p && *nl == '\n';
    p = room ? p + sizeof field - 2 : NULL; /* the '0' */
    for (int k = 1; room && k < nd; k++)
        room = nl - k > p && nl[-k] == ' ';
    if (!room) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "NPY header of (%lld, %lld): no room for the row count",
                      (long long)rows, (long long)dim);
        goto fail;
    }
    memmove(p + nd, p + 1, (size_t)(nl - (nd - 1) - (p + 1)));
    memcpy(p, digits, (size_t)nd);
    return VTR_OK;
fail:
    free(*hdr);
    *hdr = NULL;
    return st;
}

/* Maps segment `path` and checks that it is a (rows, dim) float16 NPY array. */
static vtr_status map_segment(const char *dir, const char *path, int64_t rows, int64_t dim,
                              vtr_npy_file *file, vtr_error *err)
{
    vtr_status st = vtr_npy_load(path, file, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "index %s: segment", dir);
        return st;
    }
    const vtr_tensor *t = &file->tensor;
    if (t->dtype != VTR_F16 || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != dim) {
        char shape[64];
        vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "index %s: segment %s: %s %s, but the manifest lists (%lld, %lld) float16",
                      dir, path, shape, vtr_dtype_name(t->dtype), (long long)rows,
                      (long long)dim);
        vtr_npy_close(file);
    }
    return st;
}

static float tensor_value(const vtr_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case VTR_F16: return vtr_half_to_float(((const uint16_t *)t->data)[i]);
    case VTR_BF16: return vtr_bf16_to_float(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
    }
}

/* Checks vectors ((D,) or (n, D), float32/16/bf16) of `key`, setting *n. */
static vtr_status check_vectors(const char *dir, const char *key, const vtr_tensor *t,
                                int64_t dim, int64_t *n, vtr_error *err)
{
    char kbuf[128];
    vtr_printable(key, strlen(key), kbuf, sizeof kbuf);
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16 && t->dtype != VTR_BF16)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: %s vectors (float32, "
                        "float16 or bfloat16 only)", dir, kbuf, vtr_dtype_name(t->dtype));
    if (t->ndim != 1 && t->ndim != 2)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: vectors with %d dimensions "
                        "((D,) or (n, D) only)", dir, kbuf, t->ndim);
    int64_t cols = t->shape[t->ndim - 1];
    *n = t->ndim == 2 ? t->shape[0] : 1;
    if (cols != dim)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: %lld columns; the index has "
                        "%lld", dir, kbuf, (long long)cols, (long long)dim);
    if (*n < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: no vectors", dir, kbuf);
    if (!t->data)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: tensor without data", dir,
                        kbuf);
    for (int64_t r = 0; r < *n; r++) {
        double ss = 0;
        for (int64_t d = 0; d < dim; d++) {
            double x = tensor_value(t, r * dim + d);
            ss += x * x;
        }
        if (!isfinite(ss) || ss == 0)
            return vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s: vector %lld is %s", dir,
                            kbuf, (long long)r, ss == 0 ? "zero" : "not finite");
    }
    return VTR_OK;
}

static vtr_status check_key(const char *dir, const char *key, vtr_error *err)
{
    if (!key || !*key)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: empty item key", dir);
    json_t *utf8 = json_stringn(key, strlen(key)); /* jansson validates UTF-8 */
    if (!utf8) {
        char kbuf[128];
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: item key \"%s\" is not valid UTF-8",
                        dir, vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
    }
    json_decref(utf8);
    return VTR_OK;
}

/* ---- writer ---- */

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
    /* every key added or removed since the last commit, with its staged live rows
     * (key_count 0: removed); at commit, their committed rows become tombstones */
    vtr_string_table *staged;
    int64_t *key_first, *key_count;
    int64_t key_cap;
    uint16_t *convert; /* (D) one normalized row */
};

static void step(vtr_embedding_index_writer *w, const char *name)
{
    if (w->on_step)
        w->on_step(w->step_ctx, name);
}

static vtr_status broken_writer(const vtr_embedding_index_writer *w, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_INVALID,
                    "index %s: the writer failed earlier; close it and open the index again",
                    w->dir);
}

/* Drops the staged segment file and the staged bookkeeping. */
static vtr_status reset_staged(vtr_embedding_index_writer *w, vtr_error *err)
{
    if (w->seg)
        fclose(w->seg);
    w->seg = NULL;
    if (w->tmp_path)
        unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->seg_path);
    w->tmp_path = w->seg_path = NULL;
    w->seg_id = 0;
    w->n_rows = 0;
    vtr_string_table_free(w->staged);
    w->staged = vtr_string_table_new();
    if (!w->staged)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
    return VTR_OK;
}

void vtr_embedding_index_writer_close(vtr_embedding_index_writer *w)
{
    if (!w)
        return;
    reset_staged(w, NULL);
    vtr_string_table_free(w->staged);
    rollback(w->db);
    sqlite3_close(w->db);
    if (w->lock_fd >= 0)
        close(w->lock_fd); /* releases the lock */
    free(w->row_key);
    free(w->row_vec);
    free(w->row_live);
    free(w->key_first);
    free(w->key_count);
    free(w->convert);
    free(w->dir);
    free(w);
}

/* Creates the schema in a new (empty) index.sqlite. */
static vtr_status create_schema(vtr_embedding_index_writer *w, const char *model,
                                vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "creating the index", err);
    if (st != VTR_OK)
        return st;
    int64_t version = 0, tables = 0;
    if ((st = query_int(w->db, w->dir, "PRAGMA user_version", "reading the format version",
                        &version, err)) != VTR_OK ||
        (st = query_int(w->db, w->dir, "SELECT count(*) FROM sqlite_master", "listing tables",
                        &tables, err)) != VTR_OK)
        goto end;
    if (version != 0 || tables != 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: %s is not an embedding index", w->dir,
                      DB_FILE);
        goto end;
    }
    if ((st = exec_sql(w->db, w->dir, schema_sql, "creating the tables", err)) != VTR_OK)
        goto end;
    if ((st = prepare(w->db, w->dir,
                      "INSERT INTO meta VALUES (1, ?1, ?2, ?3, 0, 1, " NOW_SQL ", " NOW_SQL ")", &s,
                      err)) != VTR_OK)
        goto end;
    sqlite3_bind_text(s, 1, VTR_EMBEDDING_INDEX_FORMAT, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, w->dim);
    sqlite3_bind_text(s, 3, model ? model : "", -1, SQLITE_TRANSIENT);
    if ((st = step_done(w->db, w->dir, s, "recording the dimension and model", err)) != VTR_OK)
        goto end;
    char pragmas[128];
    snprintf(pragmas, sizeof pragmas, "PRAGMA application_id = %lld; PRAGMA user_version = %d",
             APPLICATION_ID, VTR_EMBEDDING_INDEX_VERSION);
    if ((st = exec_sql(w->db, w->dir, pragmas, "setting the format version", err)) != VTR_OK)
        goto end;
    st = exec_sql(w->db, w->dir, "COMMIT", "creating the index", err);
end:
    sqlite3_finalize(s);
    if (st != VTR_OK)
        rollback(w->db);
    return st;
}

/* Checks the format version and meta of an opened index.sqlite: the reader's and the
 * writer's common check. Reads dim, model (malloc'ed; may be NULL) and generation. */
static vtr_status read_meta(sqlite3 *db, const char *dir, int64_t *dim, char **model,
                            int64_t *generation, vtr_error *err)
{
    int64_t version = 0, app_id = 0;
    vtr_status st = query_int(db, dir, "PRAGMA user_version", "reading the format version",
                              &version, err);
    if (st == VTR_OK)
        st = query_int(db, dir, "PRAGMA application_id", "reading the application id", &app_id,
                       err);
    if (st != VTR_OK)
        return st;
    if (version == 0 && app_id == 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "index %s: %s is not initialized (not an "
                        "embedding index, or its creation was interrupted)", dir, DB_FILE);
    if (app_id != APPLICATION_ID)
        return vtr_fail(err, VTR_ERR_FORMAT, "index %s: %s is an SQLite database of another "
                        "application, not an embedding index", dir, DB_FILE);
    if (version > VTR_EMBEDDING_INDEX_VERSION)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "index %s: format version %lld; this vtr "
                        "knows up to %d", dir, (long long)version, VTR_EMBEDDING_INDEX_VERSION);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT format, dim, model, generation FROM meta WHERE id = 1",
                           -1, &s, NULL) != SQLITE_OK ||
        sqlite3_step(s) != SQLITE_ROW) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: %s has no readable meta row: %s", dir,
                      DB_FILE, sqlite3_errmsg(db));
        goto end;
    }
    const char *format = (const char *)sqlite3_column_text(s, 0);
    if (!format || strcmp(format, VTR_EMBEDDING_INDEX_FORMAT) != 0) {
        char fbuf[64];
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: format \"%s\", expected \"%s\"", dir,
                      format ? vtr_printable(format, strlen(format), fbuf, sizeof fbuf) : "",
                      VTR_EMBEDDING_INDEX_FORMAT);
        goto end;
    }
    *dim = sqlite3_column_int64(s, 1);
    *generation = sqlite3_column_int64(s, 3);
    if (model) {
        const char *m = (const char *)sqlite3_column_text(s, 2);
        *model = strdup(m ? m : "");
        if (!*model)
            st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
    }
end:
    sqlite3_finalize(s);
    return st;
}

/* Removes temporary segment files and segment files no generation lists: what a killed
 * writer leaves. Only the writer (holding the lock) calls this. A reader that listed a
 * segment before a compaction dropped it and finds the file gone retries on the newer
 * generation (see vtr_embedding_index_open). */
static vtr_status remove_leftovers(vtr_embedding_index_writer *w, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = prepare(w->db, w->dir, "SELECT 1 FROM segments WHERE id = ?1", &s, err);
    if (st != VTR_OK)
        return st;
    DIR *d = opendir(w->dir);
    if (!d) {
        sqlite3_finalize(s);
        return vtr_fail_errno(err, "index %s", w->dir);
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == VTR_OK) {
        bool tmp;
        int64_t id = parse_segment_name(e->d_name, &tmp);
        if (id < 0)
            continue;
        bool listed = false;
        if (!tmp) {
            sqlite3_bind_int64(s, 1, id);
            int rc = sqlite3_step(s);
            sqlite3_reset(s);
            if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
                st = db_fail(w->db, w->dir, err, "listing segments");
                break;
            }
            listed = rc == SQLITE_ROW;
        }
        if (!listed) {
            char *p = vtr_path_join(w->dir, e->d_name);
            if (!p)
                st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
            else if (unlink(p) != 0 && errno != ENOENT)
                st = vtr_fail_errno(err, "index %s: removing %s", w->dir, e->d_name);
            free(p);
        }
    }
    closedir(d);
    sqlite3_finalize(s);
    return st;
}

/* Whether dir holds a file named like a segment. */
static bool has_segment_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        bool tmp;
        found = parse_segment_name(e->d_name, &tmp) >= 0 && !tmp;
    }
    closedir(d);
    return found;
}

vtr_status vtr_embedding_index_writer_open(const char *dir, const vtr_embedding_index_options *opt,
                                           vtr_embedding_index_writer **out, vtr_error *err)
{
    *out = NULL;
    if (!dir || !*dir || !opt)
        return vtr_fail(err, VTR_ERR_INVALID, "index: no %s given", opt ? "directory" : "options");
    vtr_status st = VTR_OK;
    char *lock_path = NULL, *db_path = NULL, *model = NULL;
    vtr_embedding_index_writer *w = calloc(1, sizeof *w);
    if (!w)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
    w->lock_fd = -1;
    w->on_step = opt->on_step;
    w->step_ctx = opt->step_ctx;
    w->dir = strdup(dir);
    lock_path = vtr_path_join(dir, LOCK_FILE);
    db_path = vtr_path_join(dir, DB_FILE);
    w->staged = vtr_string_table_new();
    if (!w->dir || !lock_path || !db_path || !w->staged) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
        goto end;
    }
    if ((st = vtr_make_dirs(dir, err))) {
        vtr_error_context(err, "index %s", dir);
        goto end;
    }
    w->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (w->lock_fd < 0) {
        st = vtr_fail_errno(err, "index %s: %s", dir, LOCK_FILE);
        goto end;
    }
    if (flock(w->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        st = errno == EWOULDBLOCK
                 ? vtr_fail(err, VTR_ERR_IO, "index %s is being written by another process "
                            "(it holds %s)", dir, LOCK_FILE)
                 : vtr_fail_errno(err, "index %s: locking %s", dir, LOCK_FILE);
        goto end;
    }

    bool exists = access(db_path, F_OK) == 0;
    if (!exists && has_segment_files(dir)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: segment files but no %s (the manifest "
                      "is missing)", dir, DB_FILE);
        goto end;
    }
    if (sqlite3_open_v2(db_path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        st = db_fail(w->db, dir, err, "opening %s", DB_FILE);
        goto end;
    }
    sqlite3_busy_timeout(w->db, BUSY_MS);
    int64_t version = 0, app_id = 0;
    if ((st = query_int(w->db, dir, "PRAGMA user_version", "reading the format version",
                        &version, err)) != VTR_OK ||
        (st = query_int(w->db, dir, "PRAGMA application_id", "reading the application id",
                        &app_id, err)) != VTR_OK)
        goto end;
    /* an existing file is checked before anything is changed in it */
    bool fresh = version == 0 && app_id == 0;
    if (!fresh && (st = read_meta(w->db, dir, &w->dim, &model, &w->generation, err)) != VTR_OK)
        goto end;
    if ((st = exec_sql(w->db, dir, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
                       "PRAGMA foreign_keys = ON", "setting up SQLite", err)) != VTR_OK)
        goto end;
    if (fresh) {
        if (opt->dim < 1) {
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s: creating an index needs its "
                          "dimension (got %lld)", dir, (long long)opt->dim);
            goto end;
        }
        w->dim = opt->dim;
        if ((st = create_schema(w, opt->model, err)) != VTR_OK ||
            (st = read_meta(w->db, dir, &w->dim, &model, &w->generation, err)) != VTR_OK)
            goto end;
    }
    if (opt->dim != 0 && opt->dim != w->dim) {
        st = vtr_fail(err, VTR_ERR_INVALID, "index %s has dimension %lld; the writer was "
                      "asked for %lld", dir, (long long)w->dim, (long long)opt->dim);
        goto end;
    }
    if (opt->model && strcmp(opt->model, model) != 0) {
        char a[128], b[128];
        st = vtr_fail(err, VTR_ERR_INVALID, "index %s holds embeddings of model \"%s\"; the "
                      "writer has model \"%s\"", dir, vtr_printable(model, strlen(model), a, sizeof a),
                      vtr_printable(opt->model, strlen(opt->model), b, sizeof b));
        goto end;
    }
    w->convert = malloc((size_t)w->dim * sizeof *w->convert);
    if (!w->convert) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
        goto end;
    }
    st = remove_leftovers(w, err);
end:
    free(lock_path);
    free(db_path);
    free(model);
    if (st != VTR_OK)
        vtr_embedding_index_writer_close(w);
    else
        *out = w;
    return st;
}

int64_t vtr_embedding_index_writer_generation(const vtr_embedding_index_writer *w)
{
    return w->generation;
}

int64_t vtr_embedding_index_writer_pending_rows(const vtr_embedding_index_writer *w)
{
    return w->n_rows;
}

/* Takes a new segment id (ids are never reused, even when the segment never commits),
 * then opens its temporary file behind a (0, D) header. */
static vtr_status start_segment(vtr_embedding_index_writer *w, vtr_error *err)
{
    int64_t id = 0;
    char *hdr = NULL;
    size_t hdr_len = 0;
    vtr_status st = query_int(w->db, w->dir,
                              "UPDATE meta SET next_segment = next_segment + 1 WHERE id = 1 "
                              "RETURNING next_segment - 1",
                              "numbering a new segment", &id, err);
    if (st != VTR_OK)
        return st;
    w->seg_path = segment_path(w->dir, id, false);
    w->tmp_path = segment_path(w->dir, id, true);
    if (!w->seg_path || !w->tmp_path) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
        goto end;
    }
    if ((st = segment_header(0, w->dim, &hdr, &hdr_len, err)) != VTR_OK)
        goto end;
    w->seg = fopen(w->tmp_path, "wb");
    if (!w->seg) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto end;
    }
    w->seg_id = id;
    st = vtr_write_all(w->seg, hdr, hdr_len, w->tmp_path, err);
end:
    free(hdr);
    return st;
}

/* Room for n more staged rows and one more staged key. */
static vtr_status grow(vtr_embedding_index_writer *w, int64_t n, vtr_error *err)
{
    if (w->n_rows + n > w->cap_rows) {
        int64_t cap = w->cap_rows ? w->cap_rows : 256;
        while (cap < w->n_rows + n)
            cap *= 2;
        int64_t *k = realloc(w->row_key, (size_t)cap * sizeof *k);
        if (k)
            w->row_key = k;
        int64_t *v = realloc(w->row_vec, (size_t)cap * sizeof *v);
        if (v)
            w->row_vec = v;
        uint8_t *l = realloc(w->row_live, (size_t)cap);
        if (l)
            w->row_live = l;
        if (!k || !v || !l)
            return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
        w->cap_rows = cap;
    }
    int64_t keys = vtr_string_table_count(w->staged);
    if (keys + 1 > w->key_cap) {
        int64_t cap = w->key_cap ? w->key_cap * 2 : 256;
        int64_t *f = realloc(w->key_first, (size_t)cap * sizeof *f);
        if (f)
            w->key_first = f;
        int64_t *c = realloc(w->key_count, (size_t)cap * sizeof *c);
        if (c)
            w->key_count = c;
        if (!f || !c)
            return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
        w->key_cap = cap;
    }
    return VTR_OK;
}

/* Stages checked vectors rows [r0, r0 + n) of t under key. */
static vtr_status stage(vtr_embedding_index_writer *w, const char *key, const vtr_tensor *t,
                        int64_t r0, int64_t n, vtr_error *err)
{
    vtr_status st = grow(w, n, err);
    if (st == VTR_OK && !w->seg)
        st = start_segment(w, err);
    if (st != VTR_OK)
        return st;
    int64_t dim = w->dim;
    for (int64_t r = r0; r < r0 + n; r++) {
        double ss = 0;
        for (int64_t d = 0; d < dim; d++) {
            double x = tensor_value(t, r * dim + d);
            ss += x * x;
        }
        double norm = sqrt(ss);
        for (int64_t d = 0; d < dim; d++)
            w->convert[d] = vtr_float_to_half((float)(tensor_value(t, r * dim + d) / norm));
        if ((st = vtr_write_all(w->seg, w->convert, (size_t)dim * sizeof *w->convert,
                                w->tmp_path, err)) != VTR_OK)
            return st;
    }
    int64_t k;
    bool added;
    if ((st = vtr_string_table_insert(w->staged, key, strlen(key), &k, &added, err)) != VTR_OK)
        return st;
    if (!added) /* staged before: those rows are replaced */
        for (int64_t i = 0; i < w->key_count[k]; i++)
            w->row_live[w->key_first[k] + i] = 0;
    w->key_first[k] = w->n_rows;
    w->key_count[k] = n;
    for (int64_t i = 0; i < n; i++) {
        w->row_key[w->n_rows + i] = k;
        w->row_vec[w->n_rows + i] = i;
        w->row_live[w->n_rows + i] = 1;
    }
    w->n_rows += n;
    return VTR_OK;
}

vtr_status vtr_embedding_index_writer_add(vtr_embedding_index_writer *w, const char *key,
                                          const vtr_tensor *vectors, vtr_error *err)
{
    if (w->broken)
        return broken_writer(w, err);
    int64_t n;
    vtr_status st = check_key(w->dir, key, err);
    if (st == VTR_OK && !vectors)
        st = vtr_fail(err, VTR_ERR_INVALID, "index %s: no vectors", w->dir);
    if (st == VTR_OK)
        st = check_vectors(w->dir, key, vectors, w->dim, &n, err);
    if (st != VTR_OK)
        return st;
    if ((st = stage(w, key, vectors, 0, n, err)) != VTR_OK)
        w->broken = true;
    return st;
}

vtr_status vtr_embedding_index_writer_add_batch(vtr_embedding_index_writer *w, int64_t n,
                                                const char *const *keys,
                                                const vtr_tensor *embeddings, vtr_error *err)
{
    if (w->broken)
        return broken_writer(w, err);
    if (n < 0 || (n > 0 && (!keys || !embeddings)))
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: a batch of %lld items without %s",
                        w->dir, (long long)n, keys ? "embeddings" : "keys");
    if (n == 0)
        return VTR_OK;
    if (embeddings->ndim != 2 || embeddings->shape[0] != n)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: a batch of %lld keys needs (%lld, D) "
                        "embeddings; got %d dimensions", w->dir, (long long)n, (long long)n,
                        embeddings->ndim);
    vtr_status st;
    for (int64_t i = 0; i < n; i++) {
        if ((st = check_key(w->dir, keys[i], err)) != VTR_OK)
            return st;
    }
    int64_t rows;
    if ((st = check_vectors(w->dir, keys[0], embeddings, w->dim, &rows, err)) != VTR_OK) {
        /* name the item of the bad row */
        for (int64_t i = 0; i < n; i++) {
            vtr_tensor row = *embeddings;
            row.ndim = 1;
            row.shape[0] = w->dim;
            row.data = (char *)embeddings->data +
                       (size_t)i * (size_t)w->dim * vtr_dtype_size(embeddings->dtype);
            vtr_error row_err;
            if (embeddings->data && embeddings->shape[1] == w->dim &&
                check_vectors(w->dir, keys[i], &row, w->dim, &rows, &row_err) != VTR_OK) {
                if (err)
                    *err = row_err;
                break;
            }
        }
        return st;
    }
    for (int64_t i = 0; i < n; i++)
        if ((st = stage(w, keys[i], embeddings, i, 1, err)) != VTR_OK) {
            w->broken = true;
            return st;
        }
    return VTR_OK;
}

vtr_status vtr_embedding_index_writer_remove(vtr_embedding_index_writer *w, const char *key,
                                             vtr_error *err)
{
    if (w->broken)
        return broken_writer(w, err);
    vtr_status st = check_key(w->dir, key, err);
    if (st != VTR_OK)
        return st;
    char kbuf[128];
    vtr_printable(key, strlen(key), kbuf, sizeof kbuf);
    int64_t k = vtr_string_table_find(w->staged, key, strlen(key));
    if (k >= 0) {
        /* staged: its committed rows die at commit anyway; kill the staged ones now */
        if (w->key_count[k] == 0)
            return vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s: no item %s (removed already)",
                            w->dir, kbuf);
        for (int64_t i = 0; i < w->key_count[k]; i++)
            w->row_live[w->key_first[k] + i] = 0;
        w->key_count[k] = 0;
        return VTR_OK;
    }
    sqlite3_stmt *s = NULL;
    if ((st = prepare(w->db, w->dir, "SELECT 1 FROM entries WHERE key = ?1 AND live = 1 LIMIT 1",
                      &s, err)) != VTR_OK)
        goto fail;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(s);
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s: no item %s", w->dir, kbuf);
    }
    if (rc != SQLITE_ROW) {
        st = db_fail(w->db, w->dir, err, "looking up item %s", kbuf);
        goto fail;
    }
    sqlite3_finalize(s);
    s = NULL;
    if ((st = grow(w, 0, err)) != VTR_OK ||
        (st = vtr_string_table_insert(w->staged, key, strlen(key), &k, NULL, err)) != VTR_OK)
        goto fail;
    w->key_first[k] = 0;
    w->key_count[k] = 0;
    return VTR_OK;
fail:
    sqlite3_finalize(s);
    w->broken = true;
    return st;
}

/* Completes the staged segment file: the real header, fsync, rename, fsync of the
 * directory. Afterwards the file is the final one (w->tmp_path is cleared). */
static vtr_status finish_segment(vtr_embedding_index_writer *w, int64_t rows, vtr_error *err)
{
    char *hdr = NULL;
    size_t hdr_len = 0;
    vtr_status st = segment_header(rows, w->dim, &hdr, &hdr_len, err);
    if (st != VTR_OK)
        return st;
    if (fflush(w->seg) != 0 || fseek(w->seg, 0, SEEK_SET) != 0) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto end;
    }
    if ((st = vtr_write_all(w->seg, hdr, hdr_len, w->tmp_path, err)) != VTR_OK)
        goto end;
    if (fflush(w->seg) != 0 || fsync(fileno(w->seg)) != 0) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto end;
    }
    int rc = fclose(w->seg);
    w->seg = NULL;
    if (rc != 0) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto end;
    }
    if (rename(w->tmp_path, w->seg_path) != 0) {
        st = vtr_fail_errno(err, "index %s: renaming %s", w->dir, w->tmp_path);
        goto end;
    }
    free(w->tmp_path);
    w->tmp_path = NULL;
    st = sync_dir(w->dir, err);
end:
    free(hdr);
    return st;
}

/* After a failed commit or compaction: no generation lists the new segment, so its file
 * goes (unlinked here, or by the next writer). */
static void drop_new_segment(vtr_embedding_index_writer *w)
{
    rollback(w->db);
    if (w->seg_path && !w->tmp_path)
        unlink(w->seg_path);
    w->broken = true;
}

vtr_status vtr_embedding_index_writer_commit(vtr_embedding_index_writer *w, vtr_error *err)
{
    if (w->broken)
        return broken_writer(w, err);
    int64_t n_keys = vtr_string_table_count(w->staged);
    if (w->n_rows == 0 && n_keys == 0)
        return VTR_OK;
    vtr_status st = VTR_OK;
    sqlite3_stmt *kill = NULL, *ins = NULL, *seg = NULL;
    if (w->n_rows > 0) {
        if (fflush(w->seg) != 0) {
            st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
            goto fail;
        }
        step(w, "segment-data");
        if ((st = finish_segment(w, w->n_rows, err)) != VTR_OK)
            goto fail;
        step(w, "segment-file");
    }
    if ((st = exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "starting the commit", err)) != VTR_OK ||
        (st = prepare(w->db, w->dir, "UPDATE entries SET live = 0 WHERE key = ?1 AND live = 1",
                      &kill, err)) != VTR_OK ||
        (st = prepare(w->db, w->dir, "INSERT INTO entries VALUES (?1, ?2, ?3, ?4, ?5)", &ins,
                      err)) != VTR_OK ||
        (st = prepare(w->db, w->dir, "INSERT INTO segments VALUES (?1, ?2, ?3)", &seg, err)) !=
            VTR_OK)
        goto fail;
    for (int64_t k = 0; k < n_keys; k++) {
        sqlite3_bind_text(kill, 1, vtr_string_table_key(w->staged, k, NULL), -1, SQLITE_STATIC);
        if ((st = step_done(w->db, w->dir, kill, "marking replaced rows", err)) != VTR_OK)
            goto fail;
    }
    if (w->n_rows > 0) {
        sqlite3_bind_int64(seg, 1, w->seg_id);
        sqlite3_bind_int64(seg, 2, w->n_rows);
        sqlite3_bind_int64(seg, 3, w->generation + 1);
        if ((st = step_done(w->db, w->dir, seg, "listing the segment", err)) != VTR_OK)
            goto fail;
        sqlite3_bind_int64(ins, 1, w->seg_id);
        for (int64_t r = 0; r < w->n_rows; r++) {
            sqlite3_bind_int64(ins, 2, r);
            sqlite3_bind_text(ins, 3, vtr_string_table_key(w->staged, w->row_key[r], NULL), -1,
                              SQLITE_STATIC);
            sqlite3_bind_int64(ins, 4, w->row_vec[r]);
            sqlite3_bind_int(ins, 5, w->row_live[r]);
            if ((st = step_done(w->db, w->dir, ins, "recording rows", err)) != VTR_OK)
                goto fail;
        }
    }
    if ((st = exec_sql(w->db, w->dir, "UPDATE meta SET generation = generation + 1, "
                       "committed_at = " NOW_SQL " WHERE id = 1", "recording the generation",
                       err)) != VTR_OK)
        goto fail;
    step(w, "manifest-staged");
    if ((st = exec_sql(w->db, w->dir, "COMMIT", "committing", err)) != VTR_OK)
        goto fail;
    w->generation++;
    step(w, "committed");
    sqlite3_finalize(kill);
    sqlite3_finalize(ins);
    sqlite3_finalize(seg);
    free(w->seg_path); /* the file is listed now: reset_staged must not touch it */
    w->seg_path = NULL;
    if ((st = reset_staged(w, err)) != VTR_OK)
        w->broken = true;
    return st;
fail:
    sqlite3_finalize(kill);
    sqlite3_finalize(ins);
    sqlite3_finalize(seg);
    drop_new_segment(w);
    return st;
}

/* The listed segments of the current generation, in id order, mapped. */
typedef struct segment_list {
    int64_t n;
    int64_t *ids, *rows;
    vtr_npy_file *files;
} segment_list;

static void segment_list_free(segment_list *l)
{
    for (int64_t i = 0; i < l->n; i++)
        vtr_npy_close(&l->files[i]);
    free(l->ids);
    free(l->rows);
    free(l->files);
    memset(l, 0, sizeof *l);
}

/* Reads the segment list (inside the caller's transaction) and maps each file. A missing
 * file is VTR_ERR_IO with errno ENOENT kept in *missing (the reader retries on that). */
static vtr_status load_segments(sqlite3 *db, const char *dir, int64_t dim, segment_list *l,
                                bool *missing, vtr_error *err)
{
    memset(l, 0, sizeof *l);
    *missing = false;
    sqlite3_stmt *s = NULL;
    int64_t count = 0;
    vtr_status st = query_int(db, dir, "SELECT count(*) FROM segments", "listing segments",
                              &count, err);
    if (st != VTR_OK)
        return st;
    size_t n = count > 0 ? (size_t)count : 1;
    l->ids = malloc(n * sizeof *l->ids);
    l->rows = malloc(n * sizeof *l->rows);
    l->files = calloc(n, sizeof *l->files);
    if (!l->ids || !l->rows || !l->files) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
        goto end;
    }
    if ((st = prepare(db, dir, "SELECT id, rows FROM segments ORDER BY id", &s, err)) != VTR_OK)
        goto end;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && l->n < count) {
        int64_t id = sqlite3_column_int64(s, 0), rows = sqlite3_column_int64(s, 1);
        char *path = segment_path(dir, id, false);
        if (!path) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
            goto end;
        }
        st = map_segment(dir, path, rows, dim, &l->files[l->n], err);
        if (st != VTR_OK && access(path, F_OK) != 0 && errno == ENOENT) {
            *missing = true;
            st = vtr_fail(err, VTR_ERR_IO, "index %s: segment %s listed in %s is missing", dir,
                          path, DB_FILE);
        }
        free(path);
        if (st != VTR_OK)
            goto end;
        l->ids[l->n] = id;
        l->rows[l->n] = rows;
        l->n++;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        st = db_fail(db, dir, err, "listing segments");
end:
    sqlite3_finalize(s);
    if (st != VTR_OK)
        segment_list_free(l);
    return st;
}

vtr_status vtr_embedding_index_writer_set_model(vtr_embedding_index_writer *w, const char *model,
                                                vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = prepare(w->db, w->dir, "UPDATE meta SET model = ?1 WHERE id = 1", &s, err);
    if (st == VTR_OK) {
        sqlite3_bind_text(s, 1, model ? model : "", -1, SQLITE_TRANSIENT);
        st = step_done(w->db, w->dir, s, "recording the model", err);
    }
    sqlite3_finalize(s);
    return st;
}

vtr_status vtr_embedding_index_writer_compact(vtr_embedding_index_writer *w, vtr_error *err)
{
    if (w->broken)
        return broken_writer(w, err);
    if (w->n_rows > 0 || vtr_string_table_count(w->staged) > 0)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: cannot compact with changes staged "
                        "(commit them first)", w->dir);
    int64_t n_segments = 0, dead = 0;
    vtr_status st = query_int(w->db, w->dir, "SELECT count(*) FROM segments",
                              "counting segments", &n_segments, err);
    if (st == VTR_OK)
        st = query_int(w->db, w->dir, "SELECT count(*) FROM entries WHERE live = 0",
                       "counting tombstones", &dead, err);
    if (st != VTR_OK)
        return st;
    if (n_segments <= 1 && dead == 0)
        return VTR_OK;

    segment_list old = {0};
    sqlite3_stmt *live = NULL, *keep = NULL;
    int64_t n = 0;
    bool missing;
    if ((st = start_segment(w, err)) != VTR_OK)
        goto fail;
    if ((st = exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "starting the compaction", err)) !=
            VTR_OK ||
        (st = load_segments(w->db, w->dir, w->dim, &old, &missing, err)) != VTR_OK ||
        (st = exec_sql(w->db, w->dir, "CREATE TEMP TABLE compacted (row INTEGER PRIMARY KEY, "
                       "key TEXT NOT NULL, vector INTEGER NOT NULL)", "staging the rows",
                       err)) != VTR_OK ||
        (st = prepare(w->db, w->dir, "SELECT segment, row, key, vector FROM entries "
                      "WHERE live = 1 ORDER BY segment, row", &live, err)) != VTR_OK ||
        (st = prepare(w->db, w->dir, "INSERT INTO temp.compacted VALUES (?1, ?2, ?3)", &keep,
                      err)) != VTR_OK)
        goto fail;
    /* copy the live rows in order; segments and entries share the (segment, row) order */
    int64_t si = 0;
    size_t row_bytes = (size_t)w->dim * sizeof(uint16_t);
    int rc;
    while ((rc = sqlite3_step(live)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(live, 0), row = sqlite3_column_int64(live, 1);
        while (si < old.n && old.ids[si] < id)
            si++;
        if (si == old.n || old.ids[si] != id || row < 0 || row >= old.rows[si]) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: entry (segment %lld, row %lld) is "
                          "outside the listed segments", w->dir, (long long)id, (long long)row);
            goto fail;
        }
        const char *src = (const char *)old.files[si].tensor.data + (size_t)row * row_bytes;
        if ((st = vtr_write_all(w->seg, src, row_bytes, w->tmp_path, err)) != VTR_OK)
            goto fail;
        sqlite3_bind_int64(keep, 1, n);
        sqlite3_bind_value(keep, 2, sqlite3_column_value(live, 2));
        sqlite3_bind_value(keep, 3, sqlite3_column_value(live, 3));
        if ((st = step_done(w->db, w->dir, keep, "staging the rows", err)) != VTR_OK)
            goto fail;
        n++;
    }
    if (rc != SQLITE_DONE) {
        st = db_fail(w->db, w->dir, err, "reading the live rows");
        goto fail;
    }
    sqlite3_finalize(live);
    live = NULL;
    if (fflush(w->seg) != 0) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto fail;
    }
    step(w, "segment-data");
    if (n > 0) {
        if ((st = finish_segment(w, n, err)) != VTR_OK)
            goto fail;
        step(w, "segment-file");
    }
    /* the new segment replaces every listed one (their live rows are in it) */
    char sql[512];
    if (n > 0)
        snprintf(sql, sizeof sql,
                 "DELETE FROM entries; DELETE FROM segments; "
                 "INSERT INTO segments VALUES (%lld, %lld, %lld); "
                 "INSERT INTO entries SELECT %lld, row, key, vector, 1 FROM temp.compacted; "
                 "DROP TABLE temp.compacted",
                 (long long)w->seg_id, (long long)n, (long long)w->generation + 1,
                 (long long)w->seg_id);
    else
        snprintf(sql, sizeof sql, "DELETE FROM entries; DELETE FROM segments; "
                 "DROP TABLE temp.compacted");
    if ((st = exec_sql(w->db, w->dir, sql, "replacing the segments", err)) != VTR_OK ||
        (st = exec_sql(w->db, w->dir, "UPDATE meta SET generation = generation + 1, "
                       "committed_at = " NOW_SQL " WHERE id = 1", "recording the generation",
                       err)) != VTR_OK)
        goto fail;
    step(w, "manifest-staged");
    if ((st = exec_sql(w->db, w->dir, "COMMIT", "committing the compaction", err)) != VTR_OK)
        goto fail;
    w->generation++;
    step(w, "committed");
    sqlite3_finalize(keep);
    keep = NULL;
    /* the old files: readers that mapped them keep their pages */
    for (int64_t i = 0; i < old.n; i++) {
        char *path = segment_path(w->dir, old.ids[i], false);
        if (path)
            unlink(path);
        free(path);
    }
    segment_list_free(&old);
    step(w, "cleaned");
    if (n == 0) { /* nothing was live: the new segment was never written */
        fclose(w->seg);
        w->seg = NULL;
    } else {
        free(w->seg_path);
        w->seg_path = NULL;
    }
    if ((st = reset_staged(w, err)) != VTR_OK)
        w->broken = true;
    return st;
fail:
    sqlite3_finalize(live);
    sqlite3_finalize(keep);
    segment_list_free(&old);
    drop_new_segment(w);
    return st;
}

/* ---- reader ---- */

struct vtr_embedding_index {
    char *dir;
    sqlite3 *db;
    sqlite3_stmt *key_stmt, *find_stmt;
    int64_t dim, generation;
    char *model;
    segment_list segs;
    vtr_topk_part *parts;
    int64_t *first; /* (n + 1) global row of each segment's row 0 */
    uint64_t *skip;
    int64_t rows, live;
    vtr_topk_matrix matrix;
};

void vtr_embedding_index_close(vtr_embedding_index *ix)
{
    if (!ix)
        return;
    sqlite3_finalize(ix->key_stmt);
    sqlite3_finalize(ix->find_stmt);
    rollback(ix->db);
    sqlite3_close(ix->db);
    segment_list_free(&ix->segs);
    free(ix->parts);
    free(ix->first);
    free(ix->skip);
    free(ix->model);
    free(ix->dir);
    free(ix);
}

/* The position of segment id in the snapshot's list, or -1. */
static int64_t segment_index(const vtr_embedding_index *ix, int64_t id)
{
    int64_t lo = 0, hi = ix->segs.n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ix->segs.ids[mid] == id)
            return mid;
        if (ix->segs.ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* The segment holding global row r (0 <= r < rows). */
static int64_t segment_of_row(const vtr_embedding_index *ix, int64_t r)
{
    int64_t lo = 0, hi = ix->segs.n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (ix->first[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Reads the snapshot inside the open read transaction: meta, segments, tombstones. */
static vtr_status read_snapshot(vtr_embedding_index *ix, bool *missing, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = read_meta(ix->db, ix->dir, &ix->dim, &ix->model, &ix->generation, err);
    if (st == VTR_OK)
        st = load_segments(ix->db, ix->dir, ix->dim, &ix->segs, missing, err);
    if (st != VTR_OK)
        return st;
    int64_t n = ix->segs.n;
    ix->parts = malloc((size_t)(n > 0 ? n : 1) * sizeof *ix->parts);
    ix->first = malloc((size_t)(n + 1) * sizeof *ix->first);
    if (!ix->parts || !ix->first)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", ix->dir);
    ix->first[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        ix->parts[i] = (vtr_topk_part){ix->segs.files[i].tensor.data, ix->segs.rows[i]};
        ix->first[i + 1] = ix->first[i] + ix->segs.rows[i];
    }
    ix->rows = ix->first[n];
    ix->skip = calloc((size_t)(ix->rows / 64 + 1), sizeof *ix->skip);
    if (!ix->skip)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", ix->dir);
    int64_t dead = 0;
    if ((st = prepare(ix->db, ix->dir, "SELECT segment, row FROM entries WHERE live = 0", &s,
                      err)) != VTR_OK)
        return st;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0), row = sqlite3_column_int64(s, 1);
        int64_t si = segment_index(ix, id);
        if (si < 0 || row < 0 || row >= ix->segs.rows[si]) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: tombstone (segment %lld, row %lld) "
                          "is outside the listed segments", ix->dir, (long long)id,
                          (long long)row);
            goto end;
        }
        int64_t g = ix->first[si] + row;
        dead += !(ix->skip[g >> 6] >> (g & 63) & 1);
        ix->skip[g >> 6] |= UINT64_C(1) << (g & 63);
    }
    if (rc != SQLITE_DONE)
        st = db_fail(ix->db, ix->dir, err, "reading tombstones");
    ix->live = ix->rows - dead;
end:
    sqlite3_finalize(s);
    return st;
}

/* Forgets what read_snapshot read (before a retry). */
static void clear_snapshot(vtr_embedding_index *ix)
{
    segment_list_free(&ix->segs);
    free(ix->parts);
    free(ix->first);
    free(ix->skip);
    free(ix->model);
    ix->parts = NULL;
    ix->first = NULL;
    ix->skip = NULL;
    ix->model = NULL;
}

vtr_status vtr_embedding_index_open(const char *dir, vtr_embedding_index **out, vtr_error *err)
{
    *out = NULL;
    if (!dir || !*dir)
        return vtr_fail(err, VTR_ERR_INVALID, "index: no directory given");
    vtr_status st = VTR_OK;
    char *db_path = NULL;
    vtr_embedding_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
    ix->dir = strdup(dir);
    db_path = vtr_path_join(dir, DB_FILE);
    if (!ix->dir || !db_path) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
        goto end;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        st = errno == ENOENT ? vtr_fail(err, VTR_ERR_IO, "index %s does not exist (vtr-index "
                                                         "or vtr-aggregate --index builds one)",
                                        dir)
                             : vtr_fail_errno(err, "index %s", dir);
        goto end;
    }
    if (stat(db_path, &sb) != 0) {
        st = errno == ENOENT
                 ? vtr_fail(err, VTR_ERR_IO, "index %s: no %s (not an embedding index, or "
                            "the manifest is missing)", dir, DB_FILE)
                 : vtr_fail_errno(err, "index %s: %s", dir, DB_FILE);
        goto end;
    }
    if (sqlite3_open_v2(db_path, &ix->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        st = db_fail(ix->db, dir, err, "opening %s", DB_FILE);
        goto end;
    }
    sqlite3_busy_timeout(ix->db, BUSY_MS);
    int64_t last_generation = -1;
    for (int attempt = 0;; attempt++) {
        bool missing = false;
        if ((st = exec_sql(ix->db, dir, "BEGIN", "starting a read", err)) != VTR_OK)
            goto end;
        st = read_snapshot(ix, &missing, err);
        if (st == VTR_OK)
            break;
        /* a compaction deleted a file of the generation we read: read the newer one */
        bool retry = missing && ix->generation != last_generation && attempt < OPEN_ATTEMPTS;
        last_generation = ix->generation;
        rollback(ix->db);
        clear_snapshot(ix);
        if (!retry)
            goto end;
    }
    ix->matrix = (vtr_topk_matrix){.dtype = VTR_F16, .dim = ix->dim, .n_parts = ix->segs.n,
                                   .parts = ix->parts, .skip = ix->skip};
    if ((st = prepare(ix->db, dir, "SELECT key, vector, live FROM entries "
                      "WHERE segment = ?1 AND row = ?2", &ix->key_stmt, err)) != VTR_OK ||
        (st = prepare(ix->db, dir, "SELECT segment, min(row), count(*) FROM entries "
                      "WHERE key = ?1 AND live = 1", &ix->find_stmt, err)) != VTR_OK)
        goto end;
end:
    free(db_path);
    if (st != VTR_OK)
        vtr_embedding_index_close(ix);
    else
        *out = ix;
    return st;
}

int64_t vtr_embedding_index_dim(const vtr_embedding_index *ix)
{
    return ix->dim;
}

int64_t vtr_embedding_index_generation(const vtr_embedding_index *ix)
{
    return ix->generation;
}

const char *vtr_embedding_index_model(const vtr_embedding_index *ix)
{
    return ix->model;
}

int64_t vtr_embedding_index_rows(const vtr_embedding_index *ix)
{
    return ix->rows;
}

int64_t vtr_embedding_index_live_rows(const vtr_embedding_index *ix)
{
    return ix->live;
}

int64_t vtr_embedding_index_segments(const vtr_embedding_index *ix)
{
    return ix->segs.n;
}

const vtr_topk_matrix *vtr_embedding_index_matrix(const vtr_embedding_index *ix)
{
    return &ix->matrix;
}

vtr_status vtr_embedding_index_row(const vtr_embedding_index *ix, int64_t row, float *out,
                                   vtr_error *err)
{
    if (row < 0 || row >= ix->rows)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: row %lld out of range [0, %lld)",
                        ix->dir, (long long)row, (long long)ix->rows);
    int64_t si = segment_of_row(ix, row);
    const uint16_t *x = (const uint16_t *)ix->parts[si].data +
                        (size_t)(row - ix->first[si]) * (size_t)ix->dim;
    for (int64_t d = 0; d < ix->dim; d++)
        out[d] = vtr_half_to_float(x[d]);
    return VTR_OK;
}

vtr_status vtr_embedding_index_key(vtr_embedding_index *ix, int64_t row, char **key,
                                   int64_t *vector, bool *live, vtr_error *err)
{
    *key = NULL;
    if (row < 0 || row >= ix->rows)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: row %lld out of range [0, %lld)",
                        ix->dir, (long long)row, (long long)ix->rows);
    int64_t si = segment_of_row(ix, row);
    sqlite3_stmt *s = ix->key_stmt;
    sqlite3_bind_int64(s, 1, ix->segs.ids[si]);
    sqlite3_bind_int64(s, 2, row - ix->first[si]);
    vtr_status st = VTR_OK;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(s, 0);
        *key = strdup(k ? k : "");
        if (!*key)
            st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", ix->dir);
        if (vector)
            *vector = sqlite3_column_int64(s, 1);
        if (live)
            *live = sqlite3_column_int(s, 2) != 0;
    } else if (rc == SQLITE_DONE) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: row %lld (segment %lld, row %lld) has no "
                      "entry", ix->dir, (long long)row, (long long)ix->segs.ids[si],
                      (long long)(row - ix->first[si]));
    } else {
        st = db_fail(ix->db, ix->dir, err, "looking up row %lld", (long long)row);
    }
    sqlite3_reset(s);
    return st;
}

vtr_status vtr_embedding_index_find(vtr_embedding_index *ix, const char *key, int64_t *first,
                                    int64_t *n_rows, vtr_error *err)
{
    if (!key)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: no key", ix->dir);
    char kbuf[128];
    sqlite3_stmt *s = ix->find_stmt;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    vtr_status st = VTR_OK;
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st = db_fail(ix->db, ix->dir, err, "looking up item %s",
                     vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
    } else if (sqlite3_column_int64(s, 2) == 0) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s: no item %s", ix->dir,
                      vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
    } else {
        int64_t si = segment_index(ix, sqlite3_column_int64(s, 0));
        if (si < 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: item %s is in an unlisted segment",
                          ix->dir, vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
        } else {
            *first = ix->first[si] + sqlite3_column_int64(s, 1);
            if (n_rows)
                *n_rows = sqlite3_column_int64(s, 2);
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return st;
}
