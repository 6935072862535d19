/* The embedding index's merge: another index's live items staged bit for bit
 * (embedding_index.h, vtr_embedding_index_writer_add_index). */
#define _POSIX_C_SOURCE 200809L
#include "embedding_index_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/file.h"

/* A part opened for reading: one read transaction, its segments mapped. */
typedef struct part_index {
    const char *dir;
    sqlite3 *db;
    int64_t dim, version;
    char *model;
    eix_segment_list segs;
} part_index;

static void part_close(part_index *p)
{
    eix_segment_list_free(&p->segs);
    eix_rollback(p->db);
    sqlite3_close(p->db);
    free(p->model);
}

static vtr_status part_open(const char *dir, part_index *p, vtr_error *err)
{
    memset(p, 0, sizeof *p);
    p->dir = dir;
    char *db_path = vtr_path_join(dir, DB_FILE);
    if (!db_path)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", dir);
    struct stat sb;
    vtr_status st = VTR_OK;
    int64_t generation;
    bool missing;
    if (stat(db_path, &sb) != 0)
        st = errno == ENOENT ? vtr_fail(err, VTR_ERR_IO, "index %s: no %s (not an embedding "
                                        "index, or the manifest is missing)", dir, DB_FILE)
                             : vtr_fail_errno(err, "index %s: %s", dir, DB_FILE);
    else if (sqlite3_open_v2(db_path, &p->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        st = eix_db_fail(p->db, dir, err, "opening %s", DB_FILE);
    else {
        sqlite3_busy_timeout(p->db, BUSY_MS);
        if ((st = eix_exec_sql(p->db, dir, "BEGIN", "starting a read", err)) == VTR_OK &&
            (st = eix_read_meta(p->db, dir, &p->dim, &p->model, &generation, &p->version,
                                err)) == VTR_OK)
            st = eix_load_segments(p->db, dir, p->dim, &p->segs, &missing, err);
    }
    free(db_path);
    if (st != VTR_OK)
        part_close(p);
    return st;
}

/* Refuses a part of another dimension or model than the writer's index. */
static vtr_status check_fit(vtr_embedding_index_writer *w, const part_index *p, vtr_error *err)
{
    if (p->dim != w->dim)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s has dimension %lld; index %s has %lld",
                        p->dir, (long long)p->dim, w->dir, (long long)w->dim);
    sqlite3_stmt *s = NULL;
    vtr_status st = eix_prepare(w->db, w->dir, "SELECT model FROM meta WHERE id = 1", &s, err);
    if (st == VTR_OK && sqlite3_step(s) != SQLITE_ROW)
        st = eix_db_fail(w->db, w->dir, err, "reading the model");
    const char *mine = st == VTR_OK ? (const char *)sqlite3_column_text(s, 0) : NULL;
    if (st == VTR_OK && strcmp(mine ? mine : "", p->model) != 0) {
        char a[200], b[200];
        st = vtr_fail(err, VTR_ERR_INVALID, "index %s holds embeddings of another model than "
                      "index %s: \"%s\", not \"%s\"", p->dir, w->dir,
                      vtr_printable(p->model, strlen(p->model), a, sizeof a),
                      vtr_printable(mine ? mine : "", mine ? strlen(mine) : 0, b, sizeof b));
    }
    sqlite3_finalize(s);
    return st;
}

/* Refuses a part with a key that the writer's index has, committed or staged. */
static vtr_status check_keys(vtr_embedding_index_writer *w, const part_index *p, vtr_error *err)
{
    sqlite3_stmt *keys = NULL, *have = NULL;
    vtr_status st = eix_prepare(p->db, p->dir, "SELECT DISTINCT key FROM entries WHERE live = 1",
                                &keys, err);
    if (st == VTR_OK)
        st = eix_prepare(w->db, w->dir,
                         "SELECT 1 FROM entries WHERE key = ?1 AND live = 1 LIMIT 1", &have, err);
    int rc = SQLITE_DONE;
    while (st == VTR_OK && (rc = sqlite3_step(keys)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(keys, 0);
        int64_t k = vtr_string_table_find(w->staged, key, strlen(key));
        bool found = k >= 0 && w->key_count[k] > 0;
        if (!found && k < 0) {
            sqlite3_bind_text(have, 1, key, -1, SQLITE_TRANSIENT);
            int hrc = sqlite3_step(have);
            sqlite3_reset(have);
            if (hrc != SQLITE_ROW && hrc != SQLITE_DONE)
                st = eix_db_fail(w->db, w->dir, err, "looking up keys");
            found = hrc == SQLITE_ROW;
        }
        if (st == VTR_OK && found) {
            char kbuf[128];
            st = vtr_fail(err, VTR_ERR_INVALID, "index %s: item %s is in %s already", p->dir,
                          vtr_printable(key, strlen(key), kbuf, sizeof kbuf), w->dir);
        }
    }
    if (st == VTR_OK && rc != SQLITE_DONE)
        st = eix_db_fail(p->db, p->dir, err, "listing keys");
    sqlite3_finalize(keys);
    sqlite3_finalize(have);
    return st;
}

/* Stages the part's live items in (segment, row) order: an item's vectors are consecutive
 * rows of one segment (vector 0, 1, ...). */
static vtr_status copy_items(vtr_embedding_index_writer *w, const part_index *p, int64_t *items,
                             vtr_error *err)
{
    sqlite3_stmt *live = NULL;
    double *norms = NULL;
    int64_t norms_cap = 0, n = 0, si = 0, first_row = 0;
    char *key = NULL;
    const uint16_t *first = NULL;
    vtr_status st = eix_prepare(p->db, p->dir,
                                p->version >= 2
                                    ? "SELECT segment, row, key, vector, norm FROM entries "
                                      "WHERE live = 1 ORDER BY segment, row"
                                    : "SELECT segment, row, key, vector, NULL FROM entries "
                                      "WHERE live = 1 ORDER BY segment, row",
                                &live, err);
    int rc = SQLITE_DONE;
    while (st == VTR_OK && (rc = sqlite3_step(live)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(live, 0), row = sqlite3_column_int64(live, 1);
        const char *k = (const char *)sqlite3_column_text(live, 2);
        int64_t vector = sqlite3_column_int64(live, 3);
        double norm = sqlite3_column_type(live, 4) == SQLITE_NULL ? NAN
                                                                  : sqlite3_column_double(live, 4);
        while (si < p->segs.n && p->segs.ids[si] < id)
            si++;
        if (si == p->segs.n || p->segs.ids[si] != id || row < 0 || row >= p->segs.rows[si]) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: entry (segment %lld, row %lld) is "
                          "outside the listed segments", p->dir, (long long)id, (long long)row);
            break;
        }
        const uint16_t *data = (const uint16_t *)p->segs.files[si].tensor.data;
        bool next_of_item = key && vector == n && !strcmp(k, key) && row == first_row + n &&
                            data + row * w->dim == first + n * w->dim;
        if (!next_of_item && key) { /* the item before is complete */
            if ((st = eix_stage_stored(w, key, first, norms, n, err)) != VTR_OK)
                break;
            (*items)++;
        }
        if (!next_of_item) {
            free(key);
            if (!(key = strdup(k))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
                break;
            }
            first = data + row * w->dim;
            first_row = row;
            n = 0;
        }
        if (n == norms_cap) {
            int64_t cap = norms_cap ? 2 * norms_cap : 16;
            double *grown = realloc(norms, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", w->dir);
                break;
            }
            norms = grown;
            norms_cap = cap;
        }
        norms[n++] = norm;
    }
    if (st == VTR_OK && rc != SQLITE_DONE)
        st = eix_db_fail(p->db, p->dir, err, "reading the live rows");
    if (st == VTR_OK && key && (st = eix_stage_stored(w, key, first, norms, n, err)) == VTR_OK)
        (*items)++;
    sqlite3_finalize(live);
    free(key);
    free(norms);
    return st;
}

vtr_status vtr_embedding_index_writer_add_index(vtr_embedding_index_writer *w, const char *part,
                                                int64_t *items, vtr_error *err)
{
    int64_t staged = 0;
    if (items)
        *items = 0;
    if (w->broken)
        return eix_broken_writer(w, err);
    part_index p;
    vtr_status st = part_open(part, &p, err);
    if (st != VTR_OK)
        return st;
    if ((st = check_fit(w, &p, err)) == VTR_OK && (st = check_keys(w, &p, err)) == VTR_OK &&
        (st = copy_items(w, &p, &staged, err)) != VTR_OK)
        w->broken = true;
    part_close(&p);
    if (items)
        *items = staged;
    return st;
}
