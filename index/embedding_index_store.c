/* The embedding index's storage, shared by its writer, compaction and reader: segment
 * file names and mapping, the index.sqlite helpers and meta check
 * (embedding_index_internal.h). */
#define _GNU_SOURCE /* strdup */
#include "embedding_index_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/file.h"

char *eix_segment_path(const char *dir, int64_t id, bool tmp)
{
    char name[64];
    snprintf(name, sizeof name, "seg-%06lld.npy%s", (long long)id, tmp ? ".tmp" : "");
    return vtr_path_join(dir, name);
}

vtr_status eix_db_fail(sqlite3 *db, const char *dir, vtr_error *err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vtr_fail(err, VTR_ERR_DB, "index %s: %s: %s: %s", dir, DB_FILE, what,
                    db ? sqlite3_errmsg(db) : "out of memory");
}

vtr_status eix_exec_sql(sqlite3 *db, const char *dir, const char *sql, const char *what,
                        vtr_error *err)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return eix_db_fail(db, dir, err, "%s", what);
    return VTR_OK;
}

void eix_rollback(sqlite3 *db)
{
    if (db && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

vtr_status eix_query_int(sqlite3 *db, const char *dir, const char *sql, const char *what,
                         int64_t *value, vtr_error *err)
{
    sqlite3_stmt *s = NULL;
    vtr_status st = VTR_OK;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW)
        st = eix_db_fail(db, dir, err, "%s", what);
    else
        *value = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return st;
}

vtr_status eix_prepare(sqlite3 *db, const char *dir, const char *sql, sqlite3_stmt **s,
                       vtr_error *err)
{
    if (sqlite3_prepare_v2(db, sql, -1, s, NULL) != SQLITE_OK)
        return eix_db_fail(db, dir, err, "preparing \"%.60s\"", sql);
    return VTR_OK;
}

vtr_status eix_step_done(sqlite3 *db, const char *dir, sqlite3_stmt *s, const char *what,
                         vtr_error *err)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return eix_db_fail(db, dir, err, "%s", what);
    return VTR_OK;
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

vtr_status eix_read_meta(sqlite3 *db, const char *dir, int64_t *dim, char **model,
                         int64_t *generation, int64_t *version_out, vtr_error *err)
{
    int64_t version = 0, app_id = 0;
    vtr_status st = eix_query_int(db, dir, "PRAGMA user_version", "reading the format version",
                                  &version, err);
    *version_out = version;
    if (st == VTR_OK)
        st = eix_query_int(db, dir, "PRAGMA application_id", "reading the application id", &app_id,
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

void eix_segment_list_free(eix_segment_list *l)
{
    for (int64_t i = 0; i < l->n; i++)
        vtr_npy_close(&l->files[i]);
    free(l->ids);
    free(l->rows);
    free(l->files);
    memset(l, 0, sizeof *l);
}

vtr_status eix_load_segments(sqlite3 *db, const char *dir, int64_t dim, eix_segment_list *l,
                             bool *missing, vtr_error *err)
{
    memset(l, 0, sizeof *l);
    *missing = false;
    sqlite3_stmt *s = NULL;
    int64_t count = 0;
    vtr_status st = eix_query_int(db, dir, "SELECT count(*) FROM segments", "listing segments",
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
    if ((st = eix_prepare(db, dir, "SELECT id, rows FROM segments ORDER BY id", &s, err)) != VTR_OK)
        goto end;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && l->n < count) {
        int64_t id = sqlite3_column_int64(s, 0), rows = sqlite3_column_int64(s, 1);
        char *path = eix_segment_path(dir, id, false);
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
        st = eix_db_fail(db, dir, err, "listing segments");
end:
    sqlite3_finalize(s);
    if (st != VTR_OK)
        eix_segment_list_free(l);
    return st;
}
