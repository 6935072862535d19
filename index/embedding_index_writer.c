/* The embedding index's writer: opening (creating) an index, staging items in a new
 * segment, commit, set_model (embedding_index.h, docs/index.md). */
#define _GNU_SOURCE /* flock, strdup */
#include "embedding_index_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "lib/file.h"

#define LOCK_FILE "writer.lock"

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
    "  norm REAL,"
    "  PRIMARY KEY (segment, row)) WITHOUT ROWID;"
    "CREATE UNIQUE INDEX entries_live_key ON entries(key, vector) WHERE live = 1;"
    "CREATE INDEX entries_dead ON entries(segment, row) WHERE live = 0;";

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

void eix_step(vtr_embedding_index_writer *w, const char *name)
{
    if (w->on_step)
        w->on_step(w->step_ctx, name);
}

vtr_status eix_broken_writer(const vtr_embedding_index_writer *w, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_INVALID,
                    "index %s: the writer failed earlier; close it and open the index again",
                    w->dir);
}

vtr_status eix_reset_staged(vtr_embedding_index_writer *w, vtr_error *err)
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
    eix_reset_staged(w, NULL);
    vtr_string_table_free(w->staged);
    eix_rollback(w->db);
    sqlite3_close(w->db);
    if (w->lock_fd >= 0)
        close(w->lock_fd); /* releases the lock */
    free(w->row_key);
    free(w->row_vec);
    free(w->row_live);
    free(w->row_norm);
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
    vtr_status st = eix_exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "creating the index", err);
    if (st != VTR_OK)
        return st;
    int64_t version = 0, tables = 0;
    if ((st = eix_query_int(w->db, w->dir, "PRAGMA user_version", "reading the format version",
                            &version, err)) != VTR_OK ||
        (st = eix_query_int(w->db, w->dir, "SELECT count(*) FROM sqlite_master", "listing tables",
                            &tables, err)) != VTR_OK)
        goto end;
    if (version != 0 || tables != 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: %s is not an embedding index", w->dir,
                      DB_FILE);
        goto end;
    }
    if ((st = eix_exec_sql(w->db, w->dir, schema_sql, "creating the tables", err)) != VTR_OK)
        goto end;
    if ((st = eix_prepare(w->db, w->dir,
                          "INSERT INTO meta VALUES (1, ?1, ?2, ?3, 0, 1, " NOW_SQL ", " NOW_SQL ")",
                          &s, err)) != VTR_OK)
        goto end;
    sqlite3_bind_text(s, 1, VTR_EMBEDDING_INDEX_FORMAT, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, w->dim);
    sqlite3_bind_text(s, 3, model ? model : "", -1, SQLITE_TRANSIENT);
    if ((st = eix_step_done(w->db, w->dir, s, "recording the dimension and model", err)) != VTR_OK)
        goto end;
    char pragmas[128];
    snprintf(pragmas, sizeof pragmas, "PRAGMA application_id = %lld; PRAGMA user_version = %d",
             APPLICATION_ID, VTR_EMBEDDING_INDEX_VERSION);
    if ((st = eix_exec_sql(w->db, w->dir, pragmas, "setting the format version", err)) != VTR_OK)
        goto end;
    st = eix_exec_sql(w->db, w->dir, "COMMIT", "creating the index", err);
end:
    sqlite3_finalize(s);
    if (st != VTR_OK)
        eix_rollback(w->db);
    return st;
}

/* VTR_ERR_INVALID unless opt gives the dimension a new index needs. */
static vtr_status check_new_dim(const char *dir, const vtr_embedding_index_options *opt,
                                vtr_error *err)
{
    if (opt->dim < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: creating an index needs its "
                        "dimension (got %lld)", dir, (long long)opt->dim);
    return VTR_OK;
}

/* Creates db_path whole or not at all: the schema is written to DB_FILE.tmp (rollback
 * journal, synchronous commit), which is then renamed into place and the directory
 * synced. A failure (a full disk) leaves no manifest, so the next writer starts afresh
 * and readers see no index rather than an uninitialized one. */
static vtr_status create_manifest(vtr_embedding_index_writer *w, const char *db_path,
                                  const vtr_embedding_index_options *opt, vtr_error *err)
{
    vtr_status st = check_new_dim(w->dir, opt, err);
    if (st != VTR_OK)
        return st;
    size_t n = strlen(db_path) + sizeof ".tmp-journal";
    char *tmp = malloc(n), *journal = malloc(n);
    if (!tmp || !journal) {
        free(tmp);
        free(journal);
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
    }
    snprintf(tmp, n, "%s.tmp", db_path);
    snprintf(journal, n, "%s.tmp-journal", db_path);
    unlink(tmp); /* a killed writer's */
    unlink(journal);
    w->dim = opt->dim;
    if (sqlite3_open_v2(tmp, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        st = eix_db_fail(w->db, w->dir, err, "creating %s.tmp", DB_FILE);
    if (st == VTR_OK)
        st = create_schema(w, opt->model, err);
    sqlite3_close(w->db);
    w->db = NULL;
    if (st == VTR_OK && rename(tmp, db_path) != 0)
        st = vtr_fail_errno(err, "index %s: renaming %s.tmp", w->dir, DB_FILE);
    if (st == VTR_OK)
        st = vtr_sync_dir(w->dir, err);
    if (st != VTR_OK) {
        unlink(tmp);
        unlink(journal);
    }
    free(tmp);
    free(journal);
    return st;
}

/* Removes temporary segment files and segment files no generation lists: what a killed
 * writer leaves. Only the writer (holding the lock) calls this. A reader that listed a
 * segment before a compaction dropped it and finds the file gone retries on the newer
 * generation (see vtr_embedding_index_open). */
static vtr_status remove_leftovers(vtr_embedding_index_writer *w, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = eix_prepare(w->db, w->dir, "SELECT 1 FROM segments WHERE id = ?1", &s, err);
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
                st = eix_db_fail(w->db, w->dir, err, "listing segments");
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
    if (!exists && (st = create_manifest(w, db_path, opt, err)) != VTR_OK)
        goto end;
    if (sqlite3_open_v2(db_path, &w->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        st = eix_db_fail(w->db, dir, err, "opening %s", DB_FILE);
        goto end;
    }
    sqlite3_busy_timeout(w->db, BUSY_MS);
    int64_t version = 0, app_id = 0;
    if ((st = eix_query_int(w->db, dir, "PRAGMA user_version", "reading the format version",
                            &version, err)) != VTR_OK ||
        (st = eix_query_int(w->db, dir, "PRAGMA application_id", "reading the application id",
                            &app_id, err)) != VTR_OK)
        goto end;
    /* an existing file is checked before anything is changed in it; one without a schema
     * is a creation an older vtr left half done (it created the manifest in place) */
    bool fresh = version == 0 && app_id == 0;
    if (!fresh && (st = eix_read_meta(w->db, dir, &w->dim, &model, &w->generation, &version,
                                      err)) != VTR_OK)
        goto end;
    if ((st = eix_exec_sql(w->db, dir, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
                           "PRAGMA foreign_keys = ON", "setting up SQLite", err)) != VTR_OK)
        goto end;
    if (!fresh && version < 2 &&
        (st = eix_exec_sql(w->db, dir, "BEGIN IMMEDIATE; ALTER TABLE entries ADD COLUMN norm REAL; "
                           "PRAGMA user_version = 2; COMMIT", "upgrading the index to version 2",
                           err)) != VTR_OK) {
        eix_rollback(w->db);
        goto end;
    }
    if (fresh) {
        if ((st = check_new_dim(dir, opt, err)) != VTR_OK)
            goto end;
        w->dim = opt->dim;
        if ((st = create_schema(w, opt->model, err)) != VTR_OK ||
            (st = eix_read_meta(w->db, dir, &w->dim, &model, &w->generation, &version, err)) !=
                VTR_OK)
            goto end;
    }
    if (opt->dim != 0 && opt->dim != w->dim) {
        st = vtr_fail(err, VTR_ERR_INVALID, "index %s has dimension %lld; the writer was "
                      "asked for %lld", dir, (long long)w->dim, (long long)opt->dim);
        goto end;
    }
    if (opt->model && strcmp(opt->model, model) != 0) {
        char a[128], b[128];
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "index %s holds embeddings of model \"%s\"; the writer has model \"%s\"",
                      dir, vtr_printable(model, strlen(model), a, sizeof a),
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

vtr_status eix_start_segment(vtr_embedding_index_writer *w, vtr_error *err)
{
    int64_t id = 0;
    vtr_npy_header hdr;
    vtr_status st = eix_query_int(w->db, w->dir,
                                  "UPDATE meta SET next_segment = next_segment + 1 WHERE id = 1 "
                                  "RETURNING next_segment - 1",
                                  "numbering a new segment", &id, err);
    if (st != VTR_OK)
        return st;
    w->seg_path = eix_segment_path(w->dir, id, false);
    w->tmp_path = eix_segment_path(w->dir, id, true);
    if (!w->seg_path || !w->tmp_path)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
    if ((st = vtr_npy_header_init(&hdr, VTR_F16, 2, (int64_t[]){0, w->dim}, err)) != VTR_OK)
        return st;
    w->seg = fopen(w->tmp_path, "wb");
    if (!w->seg)
        return vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
    w->seg_id = id;
    return vtr_write_all(w->seg, hdr.bytes, hdr.len, w->tmp_path, err);
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
        double *nr = realloc(w->row_norm, (size_t)cap * sizeof *nr);
        if (nr)
            w->row_norm = nr;
        if (!k || !v || !l || !nr)
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

/* Room for an item of n rows in the staged segment (started when there is none). */
static vtr_status stage_begin(vtr_embedding_index_writer *w, int64_t n, vtr_error *err)
{
    vtr_status st = grow(w, n, err);
    if (st == VTR_OK && !w->seg)
        st = eix_start_segment(w, err);
    return st;
}

/* Records the n rows just written (and their norms) as item key's. */
static vtr_status stage_end(vtr_embedding_index_writer *w, const char *key, int64_t n,
                            vtr_error *err)
{
    int64_t k;
    bool added;
    vtr_status st = vtr_string_table_insert(w->staged, key, strlen(key), &k, &added, err);
    if (st != VTR_OK)
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

vtr_status eix_stage_stored(vtr_embedding_index_writer *w, const char *key, const uint16_t *rows,
                            const double *norms, int64_t n, vtr_error *err)
{
    vtr_status st = stage_begin(w, n, err);
    if (st == VTR_OK)
        st = vtr_write_all(w->seg, rows, (size_t)n * (size_t)w->dim * sizeof *rows, w->tmp_path,
                           err);
    if (st != VTR_OK)
        return st;
    memcpy(w->row_norm + w->n_rows, norms, (size_t)n * sizeof *norms);
    return stage_end(w, key, n, err);
}

/* Stages checked vectors rows [r0, r0 + n) of t under key. */
static vtr_status stage(vtr_embedding_index_writer *w, const char *key, const vtr_tensor *t,
                        int64_t r0, int64_t n, vtr_error *err)
{
    vtr_status st = stage_begin(w, n, err);
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
        w->row_norm[w->n_rows + (r - r0)] = norm;
        for (int64_t d = 0; d < dim; d++)
            w->convert[d] = vtr_float_to_half((float)(tensor_value(t, r * dim + d) / norm));
        if ((st = vtr_write_all(w->seg, w->convert, (size_t)dim * sizeof *w->convert,
                                w->tmp_path, err)) != VTR_OK)
            return st;
    }
    return stage_end(w, key, n, err);
}

vtr_status vtr_embedding_index_writer_add(vtr_embedding_index_writer *w, const char *key,
                                          const vtr_tensor *vectors, vtr_error *err)
{
    if (w->broken)
        return eix_broken_writer(w, err);
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
        return eix_broken_writer(w, err);
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
        return eix_broken_writer(w, err);
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
    if ((st = eix_prepare(w->db, w->dir,
                          "SELECT 1 FROM entries WHERE key = ?1 AND live = 1 LIMIT 1", &s, err)) !=
        VTR_OK)
        goto fail;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(s);
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s: no item %s", w->dir, kbuf);
    }
    if (rc != SQLITE_ROW) {
        st = eix_db_fail(w->db, w->dir, err, "looking up item %s", kbuf);
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

vtr_status eix_finish_segment(vtr_embedding_index_writer *w, int64_t rows, vtr_error *err)
{
    vtr_npy_header hdr;
    vtr_status st = vtr_npy_header_init(&hdr, VTR_F16, 2, (int64_t[]){rows, w->dim}, err);
    if (st != VTR_OK)
        return st;
    if (fflush(w->seg) != 0 || fseek(w->seg, 0, SEEK_SET) != 0)
        return vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
    if ((st = vtr_write_all(w->seg, hdr.bytes, hdr.len, w->tmp_path, err)) != VTR_OK)
        return st;
    if (fflush(w->seg) != 0 || fsync(fileno(w->seg)) != 0)
        return vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
    int rc = fclose(w->seg);
    w->seg = NULL;
    if (rc != 0)
        return vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
    if (rename(w->tmp_path, w->seg_path) != 0)
        return vtr_fail_errno(err, "index %s: renaming %s", w->dir, w->tmp_path);
    free(w->tmp_path);
    w->tmp_path = NULL;
    return vtr_sync_dir(w->dir, err);
}

void eix_drop_new_segment(vtr_embedding_index_writer *w)
{
    eix_rollback(w->db);
    if (w->seg_path && !w->tmp_path)
        unlink(w->seg_path);
    w->broken = true;
}

vtr_status vtr_embedding_index_writer_commit(vtr_embedding_index_writer *w, vtr_error *err)
{
    if (w->broken)
        return eix_broken_writer(w, err);
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
        eix_step(w, "segment-data");
        if ((st = eix_finish_segment(w, w->n_rows, err)) != VTR_OK)
            goto fail;
        eix_step(w, "segment-file");
    }
    if ((st = eix_exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "starting the commit", err)) !=
            VTR_OK ||
        (st = eix_prepare(w->db, w->dir, "UPDATE entries SET live = 0 WHERE key = ?1 AND live = 1",
                          &kill, err)) != VTR_OK ||
        (st = eix_prepare(w->db, w->dir, "INSERT INTO entries VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                          &ins,
                          err)) != VTR_OK ||
        (st = eix_prepare(w->db, w->dir, "INSERT INTO segments VALUES (?1, ?2, ?3)", &seg, err)) !=
            VTR_OK)
        goto fail;
    for (int64_t k = 0; k < n_keys; k++) {
        sqlite3_bind_text(kill, 1, vtr_string_table_key(w->staged, k, NULL), -1, SQLITE_STATIC);
        if ((st = eix_step_done(w->db, w->dir, kill, "marking replaced rows", err)) != VTR_OK)
            goto fail;
    }
    if (w->n_rows > 0) {
        sqlite3_bind_int64(seg, 1, w->seg_id);
        sqlite3_bind_int64(seg, 2, w->n_rows);
        sqlite3_bind_int64(seg, 3, w->generation + 1);
        if ((st = eix_step_done(w->db, w->dir, seg, "listing the segment", err)) != VTR_OK)
            goto fail;
        sqlite3_bind_int64(ins, 1, w->seg_id);
        for (int64_t r = 0; r < w->n_rows; r++) {
            sqlite3_bind_int64(ins, 2, r);
            sqlite3_bind_text(ins, 3, vtr_string_table_key(w->staged, w->row_key[r], NULL), -1,
                              SQLITE_STATIC);
            sqlite3_bind_int64(ins, 4, w->row_vec[r]);
            sqlite3_bind_int(ins, 5, w->row_live[r]);
            sqlite3_bind_double(ins, 6, w->row_norm[r]);
            if ((st = eix_step_done(w->db, w->dir, ins, "recording rows", err)) != VTR_OK)
                goto fail;
        }
    }
    if ((st = eix_exec_sql(w->db, w->dir, "UPDATE meta SET generation = generation + 1, "
                           "committed_at = " NOW_SQL " WHERE id = 1", "recording the generation",
                           err)) != VTR_OK)
        goto fail;
    eix_step(w, "manifest-staged");
    if ((st = eix_exec_sql(w->db, w->dir, "COMMIT", "committing", err)) != VTR_OK)
        goto fail;
    w->generation++;
    eix_step(w, "committed");
    sqlite3_finalize(kill);
    sqlite3_finalize(ins);
    sqlite3_finalize(seg);
    free(w->seg_path); /* the file is listed now: reset_staged must not touch it */
    w->seg_path = NULL;
    if ((st = eix_reset_staged(w, err)) != VTR_OK)
        w->broken = true;
    return st;
fail:
    sqlite3_finalize(kill);
    sqlite3_finalize(ins);
    sqlite3_finalize(seg);
    eix_drop_new_segment(w);
    return st;
}

vtr_status vtr_embedding_index_writer_set_model(vtr_embedding_index_writer *w, const char *model,
                                                vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = eix_prepare(w->db, w->dir, "UPDATE meta SET model = ?1 WHERE id = 1", &s, err);
    if (st == VTR_OK) {
        sqlite3_bind_text(s, 1, model ? model : "", -1, SQLITE_TRANSIENT);
        st = eix_step_done(w->db, w->dir, s, "recording the model", err);
    }
    sqlite3_finalize(s);
    return st;
}
