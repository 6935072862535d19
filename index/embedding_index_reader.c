/* The embedding index's reader: a snapshot of one generation, its rows as a top-k
 * matrix, and key lookups (embedding_index.h, docs/index.md). */
#define _GNU_SOURCE /* strdup */
#include "embedding_index_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/file.h"

#define OPEN_ATTEMPTS 8 /* snapshot retries when a compaction removes a file being mapped */

struct vtr_embedding_index {
    char *dir;
    sqlite3 *db;
    sqlite3_stmt *key_stmt, *find_stmt;
    int64_t dim, generation;
    char *model;
    eix_segment_list segs;
    vtr_topk_part *parts;
    int64_t *first; /* (n + 1) global row of each segment's row 0 */
    uint64_t *skip;
    int64_t rows, live;
    int64_t version;
    vtr_topk_matrix matrix;
    /* vtr_embedding_index_items_read, on its first call */
    bool items_read;
    int64_t n_items, *item_first, *item_count;
    float *norm;
};

void vtr_embedding_index_close(vtr_embedding_index *ix)
{
    if (!ix)
        return;
    sqlite3_finalize(ix->key_stmt);
    sqlite3_finalize(ix->find_stmt);
    eix_rollback(ix->db);
    sqlite3_close(ix->db);
    eix_segment_list_free(&ix->segs);
    free(ix->parts);
    free(ix->first);
    free(ix->skip);
    free(ix->item_first);
    free(ix->item_count);
    free(ix->norm);
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
    vtr_status st = eix_read_meta(ix->db, ix->dir, &ix->dim, &ix->model, &ix->generation,
                                  &ix->version, err);
    if (st == VTR_OK)
        st = eix_load_segments(ix->db, ix->dir, ix->dim, &ix->segs, missing, err);
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
    if ((st = eix_prepare(ix->db, ix->dir, "SELECT segment, row FROM entries WHERE live = 0", &s,
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
        dead += !vtr_topk_skipped(ix->skip, g);
        vtr_topk_skip_row(ix->skip, g);
    }
    if (rc != SQLITE_DONE)
        st = eix_db_fail(ix->db, ix->dir, err, "reading tombstones");
    ix->live = ix->rows - dead;
end:
    sqlite3_finalize(s);
    return st;
}

/* Forgets what read_snapshot read (before a retry). */
static void clear_snapshot(vtr_embedding_index *ix)
{
    eix_segment_list_free(&ix->segs);
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
        st = eix_db_fail(ix->db, dir, err, "opening %s", DB_FILE);
        goto end;
    }
    sqlite3_busy_timeout(ix->db, BUSY_MS);
    int64_t last_generation = -1;
    for (int attempt = 0;; attempt++) {
        bool missing = false;
        if ((st = eix_exec_sql(ix->db, dir, "BEGIN", "starting a read", err)) != VTR_OK)
            goto end;
        st = read_snapshot(ix, &missing, err);
        if (st == VTR_OK)
            break;
        /* a compaction deleted a file of the generation we read: read the newer one */
        bool retry = missing && ix->generation != last_generation && attempt < OPEN_ATTEMPTS;
        last_generation = ix->generation;
        eix_rollback(ix->db);
        clear_snapshot(ix);
        if (!retry)
            goto end;
    }
    ix->matrix = (vtr_topk_matrix){.dtype = VTR_F16, .dim = ix->dim, .n_parts = ix->segs.n,
                                   .parts = ix->parts, .skip = ix->skip};
    if ((st = eix_prepare(ix->db, dir,
                          "SELECT key, vector, live FROM entries "
                          "WHERE segment = ?1 AND row = ?2",
                          &ix->key_stmt, err)) != VTR_OK ||
        (st = eix_prepare(ix->db, dir,
                          "SELECT segment, min(row), max(row), count(*), "
                          "count(DISTINCT segment) FROM entries WHERE key = ?1 AND live = 1",
                          &ix->find_stmt, err)) != VTR_OK)
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

int64_t vtr_embedding_index_segment_id(const vtr_embedding_index *ix, int64_t i)
{
    return i >= 0 && i < ix->segs.n ? ix->segs.ids[i] : -1;
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

vtr_status vtr_embedding_index_items_read(vtr_embedding_index *ix, vtr_embedding_index_items *out,
                                          vtr_error *err)
{
    vtr_status st = VTR_OK;
    sqlite3_stmt *s = NULL;
    if (ix->items_read)
        goto done;
    size_t rows = (size_t)(ix->rows > 0 ? ix->rows : 1);
    free(ix->item_first); /* from a failed call */
    free(ix->item_count);
    free(ix->norm);
    ix->item_first = malloc(rows * sizeof *ix->item_first);
    ix->item_count = malloc(rows * sizeof *ix->item_count);
    ix->norm = malloc(rows * sizeof *ix->norm);
    if (!ix->item_first || !ix->item_count || !ix->norm)
        return vtr_fail(err, VTR_ERR_NOMEM, "index %s: out of memory", ix->dir);
    for (int64_t r = 0; r < ix->rows; r++)
        ix->norm[r] = NAN;
    ix->n_items = 0;
    if ((st = eix_prepare(ix->db, ix->dir,
                          ix->version < 2 ? "SELECT segment, row, vector, NULL FROM entries "
                                            "WHERE live = 1 ORDER BY segment, row"
                                          : "SELECT segment, row, vector, norm FROM entries "
                                            "WHERE live = 1 ORDER BY segment, row",
                          &s, err)) != VTR_OK)
        goto end;
    int rc;
    int64_t last = -1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0), row = sqlite3_column_int64(s, 1);
        int64_t si = segment_index(ix, id);
        if (si < 0 || row < 0 || row >= ix->segs.rows[si]) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: entry (segment %lld, row %lld) is "
                          "outside the listed segments", ix->dir, (long long)id, (long long)row);
            goto end;
        }
        int64_t g = ix->first[si] + row;
        bool starts = sqlite3_column_int64(s, 2) == 0 || ix->n_items == 0;
        /* rows come in order, once each, an item's vectors one run (a damaged manifest's
         * table can repeat or reorder them) */
        if (g <= last ||
            (!starts && g != ix->item_first[ix->n_items - 1] + ix->item_count[ix->n_items - 1])) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "index %s: entry (segment %lld, row %lld) is "
                          "out of order (a damaged index.sqlite?)",
                          ix->dir, (long long)id, (long long)row);
            goto end;
        }
        last = g;
        if (starts) {
            ix->item_first[ix->n_items] = g;
            ix->item_count[ix->n_items++] = 0;
        }
        ix->item_count[ix->n_items - 1]++;
        if (sqlite3_column_type(s, 3) != SQLITE_NULL)
            ix->norm[g] = (float)sqlite3_column_double(s, 3);
    }
    if (rc != SQLITE_DONE) {
        st = eix_db_fail(ix->db, ix->dir, err, "reading the items");
        goto end;
    }
    ix->items_read = true;
done:
    *out = (vtr_embedding_index_items){ix->n_items, ix->item_first, ix->item_count, ix->norm};
end:
    sqlite3_finalize(s);
    return st;
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
        st = eix_db_fail(ix->db, ix->dir, err, "looking up row %lld", (long long)row);
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
        st = eix_db_fail(ix->db, ix->dir, err, "looking up item %s",
                         vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
    } else if (sqlite3_column_int64(s, 3) == 0) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s: no item %s", ix->dir,
                      vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
    } else {
        /* an item's live rows are one run of one segment; a damaged manifest (its key
         * index out of step with its table) can say otherwise */
        int64_t si = segment_index(ix, sqlite3_column_int64(s, 0));
        int64_t lo = sqlite3_column_int64(s, 1), hi = sqlite3_column_int64(s, 2);
        int64_t n = sqlite3_column_int64(s, 3);
        if (si < 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "index %s: item %s is in an unlisted segment",
                          ix->dir, vtr_printable(key, strlen(key), kbuf, sizeof kbuf));
        } else if (sqlite3_column_int64(s, 4) != 1 || lo < 0 || hi >= ix->segs.rows[si] ||
                   hi - lo + 1 != n) {
            st =
                vtr_fail(err, VTR_ERR_FORMAT,
                         "index %s: item %s's %lld rows are not one run "
                         "of a segment (a damaged index.sqlite?)",
                         ix->dir, vtr_printable(key, strlen(key), kbuf, sizeof kbuf), (long long)n);
        } else {
            *first = ix->first[si] + lo;
            if (n_rows)
                *n_rows = n;
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return st;
}
