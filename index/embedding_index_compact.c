/* The embedding index's compaction: the live rows of all segments rewritten into one
 * new segment, as a new generation (embedding_index.h, docs/index.md). */
#include "embedding_index_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/file.h"

vtr_status vtr_embedding_index_writer_compact(vtr_embedding_index_writer *w, vtr_error *err)
{
    if (w->broken)
        return eix_broken_writer(w, err);
    if (w->n_rows > 0 || vtr_string_table_count(w->staged) > 0)
        return vtr_fail(err, VTR_ERR_INVALID, "index %s: cannot compact with changes staged "
                        "(commit them first)", w->dir);
    int64_t n_segments = 0, dead = 0;
    vtr_status st = eix_query_int(w->db, w->dir, "SELECT count(*) FROM segments",
                                  "counting segments", &n_segments, err);
    if (st == VTR_OK)
        st = eix_query_int(w->db, w->dir, "SELECT count(*) FROM entries WHERE live = 0",
                           "counting tombstones", &dead, err);
    if (st != VTR_OK)
        return st;
    if (n_segments <= 1 && dead == 0)
        return VTR_OK;

    eix_segment_list old = {0};
    sqlite3_stmt *live = NULL, *keep = NULL;
    int64_t n = 0;
    bool missing;
    if ((st = eix_start_segment(w, err)) != VTR_OK)
        goto fail;
    if ((st = eix_exec_sql(w->db, w->dir, "BEGIN IMMEDIATE", "starting the compaction", err)) !=
            VTR_OK ||
        (st = eix_load_segments(w->db, w->dir, w->dim, &old, &missing, err)) != VTR_OK ||
        (st = eix_exec_sql(w->db, w->dir, "CREATE TEMP TABLE compacted (row INTEGER PRIMARY KEY, "
                           "key TEXT NOT NULL, vector INTEGER NOT NULL, norm REAL)",
                           "staging the rows",
                           err)) != VTR_OK ||
        (st = eix_prepare(w->db, w->dir, "SELECT segment, row, key, vector, norm FROM entries "
                          "WHERE live = 1 ORDER BY segment, row", &live, err)) != VTR_OK ||
        (st = eix_prepare(w->db, w->dir, "INSERT INTO temp.compacted VALUES (?1, ?2, ?3, ?4)",
                          &keep,
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
        sqlite3_bind_value(keep, 4, sqlite3_column_value(live, 4));
        if ((st = eix_step_done(w->db, w->dir, keep, "staging the rows", err)) != VTR_OK)
            goto fail;
        n++;
    }
    if (rc != SQLITE_DONE) {
        st = eix_db_fail(w->db, w->dir, err, "reading the live rows");
        goto fail;
    }
    sqlite3_finalize(live);
    live = NULL;
    if (fflush(w->seg) != 0) {
        st = vtr_fail_errno(err, "index %s: %s", w->dir, w->tmp_path);
        goto fail;
    }
    eix_step(w, "segment-data");
    if (n > 0) {
        if ((st = eix_finish_segment(w, n, err)) != VTR_OK)
            goto fail;
        eix_step(w, "segment-file");
    }
    /* the new segment replaces every listed one (their live rows are in it) */
    char sql[512];
    if (n > 0)
        snprintf(sql, sizeof sql,
                 "DELETE FROM entries; DELETE FROM segments; "
                 "INSERT INTO segments VALUES (%lld, %lld, %lld); "
                 "INSERT INTO entries SELECT %lld, row, key, vector, 1, norm FROM temp.compacted; "
                 "DROP TABLE temp.compacted",
                 (long long)w->seg_id, (long long)n, (long long)w->generation + 1,
                 (long long)w->seg_id);
    else
        snprintf(sql, sizeof sql, "DELETE FROM entries; DELETE FROM segments; "
                 "DROP TABLE temp.compacted");
    if ((st = eix_exec_sql(w->db, w->dir, sql, "replacing the segments", err)) != VTR_OK ||
        (st = eix_exec_sql(w->db, w->dir, "UPDATE meta SET generation = generation + 1, "
                           "committed_at = " NOW_SQL " WHERE id = 1", "recording the generation",
                           err)) != VTR_OK)
        goto fail;
    eix_step(w, "manifest-staged");
    if ((st = eix_exec_sql(w->db, w->dir, "COMMIT", "committing the compaction", err)) != VTR_OK)
        goto fail;
    w->generation++;
    eix_step(w, "committed");
    sqlite3_finalize(keep);
    keep = NULL;
    /* the old files: readers that mapped them keep their pages */
    for (int64_t i = 0; i < old.n; i++) {
        char *path = eix_segment_path(w->dir, old.ids[i], false);
        if (path)
            unlink(path);
        free(path);
    }
    eix_segment_list_free(&old);
    eix_step(w, "cleaned");
    if (n == 0) { /* nothing was live: the new segment was never written */
        fclose(w->seg);
        w->seg = NULL;
    } else {
        free(w->seg_path);
        w->seg_path = NULL;
    }
    if ((st = eix_reset_staged(w, err)) != VTR_OK)
        w->broken = true;
    return st;
fail:
    sqlite3_finalize(live);
    sqlite3_finalize(keep);
    eix_segment_list_free(&old);
    eix_drop_new_segment(w);
    return st;
}
