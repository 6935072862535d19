/* The embedding index (index/embedding_index.h): float16 round trip, add / remove /
 * replace / commit / reopen / compact, snapshots that outlive commits and compactions,
 * writers killed at every step of a commit (and at random moments), searches through the
 * index's matrix, and the refusals (bad input, corrupt or missing files). */
#define _GNU_SOURCE /* kill, usleep */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "index/embedding_index.h"
#include "lib/tensor.h"

#define DIM 24

/* The vector of item "item<i>", version v (a replaced item changes version): values in
 * [-1, 1), never all zero. */
static void vector_of(int i, int v, float *x)
{
    uint64_t s = (uint64_t)i * 7919 + (uint64_t)v * 104729 + 1;
    for (int d = 0; d < DIM; d++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[d] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 23);
    }
    x[i % DIM] += 2; /* keeps the norm away from zero */
}

/* What the index stores for x: float16 of x / ||x|| (norm in double). */
static void stored(const float *x, float *out)
{
    double ss = 0;
    for (int d = 0; d < DIM; d++)
        ss += (double)x[d] * x[d];
    for (int d = 0; d < DIM; d++)
        out[d] = vtr_half_to_float(vtr_float_to_half((float)(x[d] / sqrt(ss))));
}

static void key_of(int i, char *key, size_t size)
{
    snprintf(key, size, "item%d", i);
}

static vtr_embedding_index_writer *open_writer(const char *dir)
{
    vtr_error err;
    vtr_embedding_index_options opt = {.dim = DIM, .model = "test-model"};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(dir, &opt, &w, &err));
    return w;
}

static void add_item(vtr_embedding_index_writer *w, int i, int v)
{
    vtr_error err;
    float x[DIM];
    char key[32];
    vector_of(i, v, x);
    key_of(i, key, sizeof key);
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
    CHECK_OK(vtr_embedding_index_writer_add(w, key, &t, &err));
}

/* Checks that the live item "item<i>" of the snapshot holds version v. */
static void check_item(vtr_embedding_index *ix, int i, int v)
{
    vtr_error err;
    char key[32];
    key_of(i, key, sizeof key);
    int64_t row, n;
    CHECK_OK(vtr_embedding_index_find(ix, key, &row, &n, &err));
    CHECK_EQ_INT(n, 1);
    float x[DIM], want[DIM], got[DIM];
    vector_of(i, v, x);
    stored(x, want);
    CHECK_OK(vtr_embedding_index_row(ix, row, got, &err));
    CHECK_MSG(memcmp(want, got, sizeof got) == 0, "%s: stored vector differs", key);
    char *k = NULL;
    bool live = false;
    int64_t vec = -1;
    CHECK_OK(vtr_embedding_index_key(ix, row, &k, &vec, &live, &err));
    CHECK_STR(k, key);
    free(k);
    CHECK(live && vec == 0);
}

static void check_absent(vtr_embedding_index *ix, int i)
{
    vtr_error err;
    char key[32];
    key_of(i, key, sizeof key);
    int64_t row;
    CHECK_FAILS(vtr_embedding_index_find(ix, key, &row, NULL, &err), VTR_ERR_NOT_FOUND, key);
}

/* The top-1 of each live item's own stored vector is that item's row (through the matrix
 * view, so tombstones must be skipped: a replaced item's old row is an exact match too). */
static void check_self_search(vtr_embedding_index *ix, const int *items, const int *versions,
                              int n)
{
    vtr_error err;
    for (int j = 0; j < n; j++) {
        float x[DIM], q[DIM];
        vector_of(items[j], versions[j], x);
        stored(x, q);
        vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = q};
        int64_t row;
        float score;
        CHECK_OK(vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, 1, NULL, &row, &score,
                                 NULL, &err));
        char *k = NULL;
        bool live;
        CHECK_OK(vtr_embedding_index_key(ix, row, &k, NULL, &live, &err));
        char want[32];
        key_of(items[j], want, sizeof want);
        CHECK_STR(k, want);
        free(k);
        CHECK(live);
    }
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    CHECK(d);
    int n = 0;
    struct dirent *e;
    size_t ls = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        n += strncmp(e->d_name, "seg-", 4) == 0 && l >= ls && strcmp(e->d_name + l - ls, suffix) == 0;
    }
    closedir(d);
    return n;
}

TEST(float16_round_trip)
{
    const char *dir = test_path("ix_roundtrip");
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 0);
    /* one at a time, as a float16 tensor, as a bfloat16 tensor, and as a batch */
    for (int i = 0; i < 5; i++)
        add_item(w, i, 0);
    float x[DIM];
    uint16_t h[DIM];
    vector_of(5, 0, x);
    for (int d = 0; d < DIM; d++)
        h[d] = vtr_float_to_half(x[d]);
    vtr_tensor th = {.dtype = VTR_F16, .ndim = 1, .shape = {DIM}, .data = h};
    CHECK_OK(vtr_embedding_index_writer_add(w, "half", &th, &err));
    float batch[3 * DIM];
    const char *keys[3] = {"item6", "item7", "item8"};
    for (int i = 0; i < 3; i++)
        vector_of(6 + i, 0, batch + i * DIM);
    vtr_tensor tb = {.dtype = VTR_F32, .ndim = 2, .shape = {3, DIM}, .data = batch};
    CHECK_OK(vtr_embedding_index_writer_add_batch(w, 3, keys, &tb, &err));
    CHECK_EQ_INT(vtr_embedding_index_writer_pending_rows(w), 9);

    /* nothing is visible before the commit */
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 0);
    CHECK_EQ_INT(vtr_embedding_index_generation(ix), 0);
    vtr_embedding_index_close(ix);

    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 1);
    CHECK_EQ_INT(vtr_embedding_index_writer_pending_rows(w), 0);
    vtr_embedding_index_writer_close(w);

    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_dim(ix), DIM);
    CHECK_STR(vtr_embedding_index_model(ix), "test-model");
    CHECK_EQ_INT(vtr_embedding_index_generation(ix), 1);
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 9);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), 9);
    CHECK_EQ_INT(vtr_embedding_index_segments(ix), 1);
    for (int i = 0; i < 9; i++)
        if (i != 5)
            check_item(ix, i, 0);
    /* the float16 input went through float32 normalization like the others */
    int64_t row;
    float got[DIM], want[DIM], hx[DIM];
    CHECK_OK(vtr_embedding_index_find(ix, "half", &row, NULL, &err));
    CHECK_EQ_INT(row, 5);
    for (int d = 0; d < DIM; d++)
        hx[d] = vtr_half_to_float(h[d]);
    stored(hx, want);
    CHECK_OK(vtr_embedding_index_row(ix, row, got, &err));
    CHECK(memcmp(want, got, sizeof got) == 0);
    /* unit norm up to float16 rounding */
    double ss = 0;
    for (int d = 0; d < DIM; d++)
        ss += (double)got[d] * got[d];
    CHECK(fabs(ss - 1) < 2e-3);
    vtr_embedding_index_close(ix);

    /* numpy reads a segment as the (rows, D) float16 matrix */
    if (test_run("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0)
        CHECK_EQ_INT(test_run("/usr/bin/python3 -c \"import numpy as np; m = np.load('%s/"
                              "seg-000001.npy', mmap_mode='r'); assert m.dtype == np.float16 "
                              "and m.shape == (9, %d), m.shape; "
                              "n = np.linalg.norm(m.astype(np.float64), axis=1); "
                              "assert abs(n - 1).max() < 2e-3\"", dir, DIM), 0);
}

TEST(add_remove_replace_reopen_compact)
{
    const char *dir = test_path("ix_update");
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    for (int i = 0; i < 6; i++)
        add_item(w, i, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);

    /* a second session: remove 1 and 4, replace 2, add 6 and 7 */
    w = open_writer(dir);
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 1);
    CHECK_OK(vtr_embedding_index_writer_remove(w, "item1", &err));
    CHECK_OK(vtr_embedding_index_writer_remove(w, "item4", &err));
    CHECK_FAILS(vtr_embedding_index_writer_remove(w, "item4", &err), VTR_ERR_NOT_FOUND,
                "item4");
    CHECK_FAILS(vtr_embedding_index_writer_remove(w, "nothing", &err), VTR_ERR_NOT_FOUND,
                "no item nothing");
    add_item(w, 2, 1);
    add_item(w, 6, 0);
    add_item(w, 7, 0);
    /* staged and then removed, and staged twice: the last one wins */
    add_item(w, 8, 0);
    CHECK_OK(vtr_embedding_index_writer_remove(w, "item8", &err));
    add_item(w, 3, 1);
    add_item(w, 3, 2);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err)); /* nothing staged: no generation */
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 2);

    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 6 + 6);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), 6);
    CHECK_EQ_INT(vtr_embedding_index_segments(ix), 2);
    const int items[] = {0, 2, 3, 5, 6, 7}, versions[] = {0, 1, 2, 0, 0, 0};
    for (int j = 0; j < 6; j++)
        check_item(ix, items[j], versions[j]);
    check_absent(ix, 1);
    check_absent(ix, 4);
    check_absent(ix, 8);
    check_self_search(ix, items, versions, 6);
    /* a tombstone still names its item */
    char *k = NULL;
    bool live = true;
    CHECK_OK(vtr_embedding_index_key(ix, 1, &k, NULL, &live, &err));
    CHECK_STR(k, "item1");
    CHECK(!live);
    free(k);
    CHECK_FAILS(vtr_embedding_index_key(ix, 12, &k, NULL, NULL, &err), VTR_ERR_INVALID,
                "row 12 out of range");
    vtr_embedding_index_close(ix);

    /* compaction: one segment of the live rows in the same order, no tombstones */
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err));
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 3);
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err)); /* nothing to do */
    CHECK_EQ_INT(vtr_embedding_index_writer_generation(w), 3);
    CHECK_EQ_INT(count_files(dir, ".npy"), 1);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 6);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), 6);
    CHECK_EQ_INT(vtr_embedding_index_segments(ix), 1);
    /* the live rows in (segment, row) order: item0 and item5 from the first segment,
     * then item2 (v1), item6, item7, item3 (v2) from the second */
    const int order[] = {0, 5, 2, 6, 7, 3};
    for (int j = 0; j < 6; j++) {
        check_item(ix, items[j], versions[j]);
        char want[32];
        key_of(order[j], want, sizeof want);
        CHECK_OK(vtr_embedding_index_key(ix, j, &k, NULL, NULL, &err));
        CHECK_STR(k, want);
        free(k);
    }
    vtr_embedding_index_close(ix);

    /* removing everything, then compacting, leaves an empty index */
    for (int j = 0; j < 6; j++) {
        char key[32];
        key_of(items[j], key, sizeof key);
        CHECK_OK(vtr_embedding_index_writer_remove(w, key, &err));
    }
    CHECK_FAILS(vtr_embedding_index_writer_compact(w, &err), VTR_ERR_INVALID, "commit");
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err));
    vtr_embedding_index_writer_close(w);
    CHECK_EQ_INT(count_files(dir, ".npy"), 0);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 0);
    CHECK_EQ_INT(vtr_embedding_index_generation(ix), 5);
    float q[DIM] = {1};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = q};
    int64_t row, found;
    float score;
    CHECK_OK(vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, 1, NULL, &row, &score,
                             &found, &err));
    CHECK(found == 0 && row == -1);
    vtr_embedding_index_close(ix);
}

/* The snapshot's items: item0 (one vector, version 0) first, then "set" (the vectors of
 * items 100 .. 103, version 0), with each row's norm. */
static void check_items(vtr_embedding_index *ix)
{
    const int n_set = 4;
    vtr_error err;
    vtr_embedding_index_items items;
    CHECK_OK(vtr_embedding_index_items_read(ix, &items, &err));
    CHECK_EQ_INT(items.n, 2);
    CHECK_EQ_INT(items.count[0], 1);
    CHECK_EQ_INT(items.count[1], n_set);
    CHECK_EQ_INT(items.first[1] - items.first[0], vtr_embedding_index_rows(ix) - n_set);
    for (int j = 0; j < 1 + n_set; j++) {
        float x[DIM];
        vector_of(j == 0 ? 0 : 100 + j - 1, 0, x);
        double ss = 0;
        for (int d = 0; d < DIM; d++)
            ss += (double)x[d] * x[d];
        int64_t r = j == 0 ? items.first[0] : items.first[1] + j - 1;
        CHECK_MSG(fabs(items.norm[r] - sqrt(ss)) <= 1e-6 * sqrt(ss), "row %lld: norm %g, want %g",
                  (long long)r, items.norm[r], sqrt(ss));
    }
}

TEST(multi_vector_item)
{
    const char *dir = test_path("ix_multi");
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    add_item(w, 0, 0);
    float x[4 * DIM];
    for (int j = 0; j < 4; j++)
        vector_of(100 + j, 0, x + j * DIM);
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {3, DIM}, .data = x};
    CHECK_OK(vtr_embedding_index_writer_add(w, "set", &t, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    /* replacing the set with 4 vectors tombstones all 3 old ones */
    t.shape[0] = 4;
    CHECK_OK(vtr_embedding_index_writer_add(w, "set", &t, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 8);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), 5);
    int64_t first, n;
    CHECK_OK(vtr_embedding_index_find(ix, "set", &first, &n, &err));
    CHECK_EQ_INT(first, 4);
    CHECK_EQ_INT(n, 4);
    for (int j = 0; j < 4; j++) {
        char *k;
        int64_t vec;
        CHECK_OK(vtr_embedding_index_key(ix, first + j, &k, &vec, NULL, &err));
        CHECK_STR(k, "set");
        CHECK_EQ_INT(vec, j);
        free(k);
    }
    check_items(ix);
    vtr_embedding_index_close(ix);
    /* compaction keeps the norms with their rows */
    w = open_writer(dir);
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err));
    vtr_embedding_index_writer_close(w);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_EQ_INT(vtr_embedding_index_rows(ix), 5);
    check_items(ix);
    vtr_embedding_index_close(ix);
}

/* add_index: another index's live items (a multi-vector one included) staged bit for bit
 * with their norms, in its row order; parts that do not fit are refused, unchanged. */
TEST(add_index_copies_items_bit_for_bit)
{
    vtr_error err;
    const char *part = test_path("ix_part"), *out = test_path("ix_joined");
    vtr_embedding_index_writer *w = open_writer(part);
    add_item(w, 1, 0);
    add_item(w, 2, 0);
    float x[3 * DIM];
    for (int j = 0; j < 3; j++)
        vector_of(50 + j, 0, x + j * DIM);
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {3, DIM}, .data = x};
    CHECK_OK(vtr_embedding_index_writer_add(w, "set", &t, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    add_item(w, 1, 1); /* replaced: its old row is a tombstone, not copied */
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);

    w = open_writer(out);
    add_item(w, 9, 0);
    int64_t items = -1;
    CHECK_OK(vtr_embedding_index_writer_add_index(w, part, &items, &err));
    CHECK_EQ_INT(items, 3);
    CHECK_FAILS(vtr_embedding_index_writer_add_index(w, part, &items, &err), VTR_ERR_INVALID,
                "is in");
    CHECK_EQ_INT(vtr_embedding_index_writer_pending_rows(w), 6);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);

    vtr_embedding_index *a, *b;
    CHECK_OK(vtr_embedding_index_open(part, &a, &err));
    CHECK_OK(vtr_embedding_index_open(out, &b, &err));
    static const char *const keys[] = {"item2", "set", "item1"};
    for (int k = 0; k < 3; k++) {
        int64_t fa, na, fb, nb;
        CHECK_OK(vtr_embedding_index_find(a, keys[k], &fa, &na, &err));
        CHECK_OK(vtr_embedding_index_find(b, keys[k], &fb, &nb, &err));
        CHECK_EQ_INT(na, nb);
        for (int64_t r = 0; r < na; r++) {
            float ra[DIM], rb[DIM];
            CHECK_OK(vtr_embedding_index_row(a, fa + r, ra, &err));
            CHECK_OK(vtr_embedding_index_row(b, fb + r, rb, &err));
            CHECK(memcmp(ra, rb, sizeof ra) == 0);
        }
    }
    vtr_embedding_index_items ia, ib;
    CHECK_OK(vtr_embedding_index_items_read(a, &ia, &err));
    CHECK_OK(vtr_embedding_index_items_read(b, &ib, &err));
    CHECK_EQ_INT(ib.n, 4);
    /* rows 1.. of the joined index are the part's live rows, in order, with their norms */
    for (int64_t i = 0; i < ia.n; i++)
        for (int64_t r = 0; r < ia.count[i]; r++)
            CHECK(ia.norm[ia.first[i] + r] == ib.norm[ib.first[i + 1] + r]);
    vtr_embedding_index_close(a);
    vtr_embedding_index_close(b);

    /* another model or dimension: refused */
    vtr_embedding_index_options other = {.dim = DIM, .model = "other-model"};
    CHECK_OK(vtr_embedding_index_writer_open(test_path("ix_other"), &other, &w, &err));
    CHECK_FAILS(vtr_embedding_index_writer_add_index(w, part, &items, &err), VTR_ERR_INVALID,
                "another model");
    CHECK_EQ_INT(vtr_embedding_index_writer_pending_rows(w), 0);
    vtr_embedding_index_writer_close(w);
    other = (vtr_embedding_index_options){.dim = DIM + 1, .model = "test-model"};
    CHECK_OK(vtr_embedding_index_writer_open(test_path("ix_wide"), &other, &w, &err));
    CHECK_FAILS(vtr_embedding_index_writer_add_index(w, part, &items, &err), VTR_ERR_INVALID,
                "dimension");
    CHECK_FAILS(vtr_embedding_index_writer_add_index(w, test_path("nowhere"), &items, &err),
                VTR_ERR_IO, "no index.sqlite");
    vtr_embedding_index_writer_close(w);
}

/* A version 1 index (no norms) is upgraded by the next writer: its old rows have no norm
 * (NaN), new ones have theirs; readers read both versions. */
TEST(version_1_index_upgrades)
{
    const char *dir = test_path("ix_v1");
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    add_item(w, 0, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    /* what version 1 wrote: the same tables without entries.norm */
    sqlite3 *db;
    CHECK(sqlite3_open(test_path("ix_v1/index.sqlite"), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "ALTER TABLE entries DROP COLUMN norm; PRAGMA user_version = 1",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    vtr_embedding_index *ix;
    vtr_embedding_index_items items;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_OK(vtr_embedding_index_items_read(ix, &items, &err));
    CHECK(items.n == 1 && items.count[0] == 1 && isnan(items.norm[0]));
    vtr_embedding_index_close(ix);
    w = open_writer(dir);
    add_item(w, 1, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    CHECK(sqlite3_open(test_path("ix_v1/index.sqlite"), &db) == SQLITE_OK);
    sqlite3_stmt *s;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(s) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(s, 0), VTR_EMBEDDING_INDEX_VERSION);
    sqlite3_finalize(s);
    sqlite3_close(db);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_OK(vtr_embedding_index_items_read(ix, &items, &err));
    CHECK_EQ_INT(items.n, 2);
    CHECK(isnan(items.norm[0]) && !isnan(items.norm[1]));
    vtr_embedding_index_close(ix);
}

/* A reader keeps its generation while the writer commits and compacts (same process);
 * a reader opened afterwards sees the new rows. */
TEST(snapshot_survives_commits)
{
    const char *dir = test_path("ix_snapshot");
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    for (int i = 0; i < 4; i++)
        add_item(w, i, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index *old;
    CHECK_OK(vtr_embedding_index_open(dir, &old, &err));

    CHECK_OK(vtr_embedding_index_writer_remove(w, "item0", &err));
    add_item(w, 1, 1);
    for (int i = 4; i < 10; i++)
        add_item(w, i, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err)); /* deletes the first segment */
    add_item(w, 10, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));

    CHECK_EQ_INT(vtr_embedding_index_generation(old), 1);
    CHECK_EQ_INT(vtr_embedding_index_rows(old), 4);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(old), 4);
    for (int i = 0; i < 4; i++)
        check_item(old, i, 0); /* item0 and item1's first version, from a deleted file */
    check_absent(old, 5);
    const int items[] = {0, 1, 2, 3}, versions[] = {0, 0, 0, 0};
    check_self_search(old, items, versions, 4);

    vtr_embedding_index *now;
    CHECK_OK(vtr_embedding_index_open(dir, &now, &err));
    CHECK_EQ_INT(vtr_embedding_index_generation(now), 4);
    CHECK_EQ_INT(vtr_embedding_index_rows(now), 10);
    CHECK_EQ_INT(vtr_embedding_index_live_rows(now), 10);
    check_absent(now, 0);
    check_item(now, 1, 1);
    for (int i = 2; i <= 10; i++)
        check_item(now, i, 0);
    vtr_embedding_index_close(now);
    vtr_embedding_index_close(old);
    vtr_embedding_index_writer_close(w);
}

/* ---- interrupted writers ---- */

typedef struct kill_point {
    const char *step;
} kill_point;

static void exit_at_step(void *ctx, const char *step)
{
    const kill_point *k = ctx;
    if (strcmp(step, k->step) == 0)
        _exit(0);
}

/* Forks a writer that adds items 20..29 (and replaces item0, removes item1) and commits,
 * or compacts when compact is set, and _exits right after `step`. */
static void interrupted_child(const char *dir, const char *step, bool compact)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        vtr_error err;
        kill_point k = {step};
        vtr_embedding_index_options opt = {.dim = DIM, .on_step = exit_at_step, .step_ctx = &k};
        vtr_embedding_index_writer *w;
        if (vtr_embedding_index_writer_open(dir, &opt, &w, &err) != VTR_OK)
            _exit(2);
        if (compact) {
            vtr_embedding_index_writer_compact(w, &err);
            _exit(3); /* the step was never reached */
        }
        for (int i = 20; i < 30; i++) {
            float x[DIM];
            char key[32];
            vector_of(i, 0, x);
            key_of(i, key, sizeof key);
            vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
            if (vtr_embedding_index_writer_add(w, key, &t, &err) != VTR_OK)
                _exit(2);
        }
        float x[DIM];
        vector_of(0, 1, x);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
        if (vtr_embedding_index_writer_add(w, "item0", &t, &err) != VTR_OK ||
            vtr_embedding_index_writer_remove(w, "item1", &err) != VTR_OK)
            _exit(2);
        vtr_embedding_index_writer_commit(w, &err);
        _exit(3);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d at %s", status,
              step);
}

/* A disk that fills while an index is created (a file size limit in a child: writes past
 * it fail as on a full disk) leaves no half-made manifest: readers see no index (they saw
 * "index.sqlite is not initialized" for ever, and vtr-index with them), and the next
 * writer creates it. */
TEST(full_disk_while_creating_leaves_no_index)
{
    const char *dir = test_path("ix_full");
    int failed = 0;
    for (rlim_t limit = 512; limit <= 32768; limit *= 4) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            struct rlimit rl = {limit, limit};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(4);
            vtr_error err;
            vtr_embedding_index_options opt = {.dim = DIM, .model = "test-model"};
            vtr_embedding_index_writer *w;
            _exit(vtr_embedding_index_writer_open(dir, &opt, &w, &err) == VTR_OK ? 0 : 2);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
        if (WEXITSTATUS(status) == 0)
            break; /* the limit let it through */
        CHECK_MSG(WEXITSTATUS(status) == 2, "child status %d", WEXITSTATUS(status));
        failed++;
        vtr_error err;
        vtr_embedding_index *ix;
        CHECK_FAILS(vtr_embedding_index_open(dir, &ix, &err), VTR_ERR_IO, "no index.sqlite");
    }
    CHECK(failed > 0);
    vtr_embedding_index_writer *w = open_writer(dir);
    add_item(w, 0, 0);
    vtr_error err;
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    check_item(ix, 0, 0);
    vtr_embedding_index_close(ix);
}

TEST(interrupted_commit_keeps_last_generation)
{
    static const char *steps[] = {"segment-data", "segment-file", "manifest-staged",
                                  "committed"};
    vtr_error err;
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        char name[64];
        snprintf(name, sizeof name, "ix_killed_%zu", s);
        const char *dir = test_path(name);
        vtr_embedding_index_writer *w = open_writer(dir);
        for (int i = 0; i < 5; i++)
            add_item(w, i, 0);
        CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
        vtr_embedding_index_writer_close(w);

        interrupted_child(dir, steps[s], false);
        bool done = strcmp(steps[s], "committed") == 0;
        vtr_embedding_index *ix;
        CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
        CHECK_EQ_INT(vtr_embedding_index_generation(ix), done ? 2 : 1);
        CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), done ? 14 : 5);
        check_item(ix, 0, done ? 1 : 0);
        if (done)
            check_absent(ix, 1);
        else
            check_item(ix, 1, 0);
        for (int i = 20; i < 30; i++) {
            if (done)
                check_item(ix, i, 0);
            else
                check_absent(ix, i);
        }
        vtr_embedding_index_close(ix);

        /* the next writer removes what the killed one left, and carries on */
        w = open_writer(dir);
        CHECK_EQ_INT(count_files(dir, ".tmp"), 0);
        CHECK_EQ_INT(count_files(dir, ".npy"), done ? 2 : 1);
        add_item(w, 40, 0);
        CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
        vtr_embedding_index_writer_close(w);
        CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
        check_item(ix, 40, 0);
        check_item(ix, 2, 0);
        vtr_embedding_index_close(ix);
    }
}

TEST(interrupted_compaction_keeps_last_generation)
{
    static const char *steps[] = {"segment-data", "segment-file", "manifest-staged",
                                  "committed"};
    vtr_error err;
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        char name[64];
        snprintf(name, sizeof name, "ix_killed_compact_%zu", s);
        const char *dir = test_path(name);
        vtr_embedding_index_writer *w = open_writer(dir);
        for (int i = 0; i < 5; i++)
            add_item(w, i, 0);
        CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
        CHECK_OK(vtr_embedding_index_writer_remove(w, "item3", &err));
        add_item(w, 6, 0);
        CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
        vtr_embedding_index_writer_close(w);

        interrupted_child(dir, steps[s], true);
        bool done = strcmp(steps[s], "committed") == 0;
        vtr_embedding_index *ix;
        CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
        CHECK_EQ_INT(vtr_embedding_index_generation(ix), done ? 3 : 2);
        CHECK_EQ_INT(vtr_embedding_index_rows(ix), done ? 5 : 6);
        CHECK_EQ_INT(vtr_embedding_index_live_rows(ix), 5);
        const int items[] = {0, 1, 2, 4, 6}, versions[] = {0, 0, 0, 0, 0};
        for (int j = 0; j < 5; j++)
            check_item(ix, items[j], 0);
        check_absent(ix, 3);
        check_self_search(ix, items, versions, 5);
        vtr_embedding_index_close(ix);
        w = open_writer(dir); /* cleans up: the old segments after "committed" */
        CHECK_EQ_INT(count_files(dir, ".tmp"), 0);
        CHECK_EQ_INT(count_files(dir, ".npy"), done ? 1 : 2);
        vtr_embedding_index_writer_close(w);
    }
}

/* Checks a snapshot of the index that killed_writer_at_random_moments's child writes:
 * whole batches only, each item with the vector of its last committed version. */
static void check_batches(vtr_embedding_index *ix)
{
    int64_t live = vtr_embedding_index_live_rows(ix);
    CHECK_MSG(live % 5 == 0, "%lld live rows", (long long)live);
    int batches = (int)(live / 5);
    for (int b = 0; b < batches; b++)
        for (int i = 5 * b; i < 5 * b + 5; i++)
            check_item(ix, i, i % 5 == 0 && b + 1 < batches ? b + 1 : 0);
    check_absent(ix, 5 * batches);
}

/* A writer committing small batches (and compacting now and then) in a loop: readers
 * opened while it runs, and after it is killed with SIGKILL at an arbitrary moment, see
 * consistent generations (whole batches; each live row holds the vector of its key as
 * committed), including readers that race a compaction deleting the files they list. */
TEST(killed_writer_at_random_moments)
{
    vtr_error err;
    for (int round = 0; round < 4; round++) {
        char name[64];
        snprintf(name, sizeof name, "ix_sigkill_%d", round);
        const char *dir = test_path(name);
        vtr_embedding_index_writer_close(open_writer(dir));
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            vtr_embedding_index_options opt = {.dim = DIM};
            vtr_embedding_index_writer *w;
            if (vtr_embedding_index_writer_open(dir, &opt, &w, &err) != VTR_OK)
                _exit(2);
            /* batch b: items 5b .. 5b+4, and replaces item 5(b-1) with version b */
            for (int b = 0;; b++) {
                for (int i = 5 * b; i < 5 * b + 5; i++) {
                    float x[DIM];
                    char key[32];
                    vector_of(i, 0, x);
                    key_of(i, key, sizeof key);
                    vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
                    if (vtr_embedding_index_writer_add(w, key, &t, &err) != VTR_OK)
                        _exit(2);
                }
                if (b > 0) {
                    float x[DIM];
                    char key[32];
                    vector_of(5 * (b - 1), b, x);
                    key_of(5 * (b - 1), key, sizeof key);
                    vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
                    if (vtr_embedding_index_writer_add(w, key, &t, &err) != VTR_OK)
                        _exit(2);
                }
                if (vtr_embedding_index_writer_commit(w, &err) != VTR_OK)
                    _exit(2);
                if (b % 7 == 6 && vtr_embedding_index_writer_compact(w, &err) != VTR_OK)
                    _exit(2);
            }
        }
        /* read while it writes, until it has committed a few batches */
        vtr_embedding_index *ix;
        int64_t generation = 0;
        for (int tries = 0; generation < 3 + 4 * round && tries < 2000; tries++) {
            CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
            generation = vtr_embedding_index_generation(ix);
            check_batches(ix);
            vtr_embedding_index_close(ix);
        }
        CHECK_MSG(generation >= 3 + 4 * round, "the writer is stuck at generation %lld",
                  (long long)generation);
        usleep(1000 + 7000 * round);
        kill(pid, SIGKILL);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFSIGNALED(status), "writer exited with %d", status);

        CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
        CHECK(vtr_embedding_index_live_rows(ix) > 0);
        check_batches(ix);
        vtr_embedding_index_close(ix);
        vtr_embedding_index_writer *w = open_writer(dir);
        CHECK_EQ_INT(count_files(dir, ".tmp"), 0);
        vtr_embedding_index_writer_close(w);
    }
}

/* ---- refusals ---- */

TEST(bad_inputs)
{
    const char *dir = test_path("ix_bad_inputs");
    vtr_error err;
    vtr_embedding_index_writer *w, *w2;
    vtr_embedding_index_options opt = {.dim = 0};
    CHECK_FAILS(vtr_embedding_index_writer_open(dir, &opt, &w, &err), VTR_ERR_INVALID,
                "needs its dimension");
    w = open_writer(dir);
    /* a second writer */
    opt.dim = DIM;
    CHECK_FAILS(vtr_embedding_index_writer_open(dir, &opt, &w2, &err), VTR_ERR_IO,
                "being written by another process");
    CHECK(w2 == NULL);

    float x[DIM + 1] = {0};
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "zero", &t, &err), VTR_ERR_INVALID,
                "item zero: vector 0 is zero");
    x[3] = NAN;
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "nan", &t, &err), VTR_ERR_INVALID,
                "not finite");
    x[3] = 1;
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "", &t, &err), VTR_ERR_INVALID, "empty");
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "bad\xff", &t, &err), VTR_ERR_INVALID,
                "not valid UTF-8");
    vtr_tensor wide = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM + 1}, .data = x};
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "wide", &wide, &err), VTR_ERR_INVALID,
                "item wide: 25 columns; the index has 24");
    vtr_tensor ints = {.dtype = VTR_I32, .ndim = 1, .shape = {DIM}, .data = x};
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "ints", &ints, &err), VTR_ERR_INVALID,
                "int32");
    vtr_tensor none = {.dtype = VTR_F32, .ndim = 2, .shape = {0, DIM}, .data = x};
    CHECK_FAILS(vtr_embedding_index_writer_add(w, "none", &none, &err), VTR_ERR_INVALID,
                "no vectors");
    /* a batch with one bad row stages nothing and names the item */
    float batch[2 * DIM] = {0};
    batch[0] = 1;
    const char *keys[2] = {"good", "bad"};
    vtr_tensor tb = {.dtype = VTR_F32, .ndim = 2, .shape = {2, DIM}, .data = batch};
    CHECK_FAILS(vtr_embedding_index_writer_add_batch(w, 2, keys, &tb, &err), VTR_ERR_INVALID,
                "item bad: vector 0 is zero");
    CHECK_EQ_INT(vtr_embedding_index_writer_pending_rows(w), 0);
    /* the writer still works after refusals */
    CHECK_OK(vtr_embedding_index_writer_add(w, "fine", &t, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);

    /* dimension and model are fixed at creation */
    opt = (vtr_embedding_index_options){.dim = 32};
    CHECK_FAILS(vtr_embedding_index_writer_open(dir, &opt, &w, &err), VTR_ERR_INVALID,
                "has dimension 24; the writer was asked for 32");
    opt = (vtr_embedding_index_options){.model = "other"};
    CHECK_FAILS(vtr_embedding_index_writer_open(dir, &opt, &w, &err), VTR_ERR_INVALID,
                "model \"test-model\"");
    /* ... except by set_model (the same model at another path, say), which readers see */
    vtr_embedding_index *ix;
    w = open_writer(dir);
    CHECK_OK(vtr_embedding_index_writer_set_model(w, "test-model, moved", &err));
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_STR(vtr_embedding_index_model(ix), "test-model, moved");
    vtr_embedding_index_close(ix);
    vtr_embedding_index_writer_close(w);
    opt = (vtr_embedding_index_options){.model = "test-model, moved"};
    CHECK_OK(vtr_embedding_index_writer_open(dir, &opt, &w, &err));
    vtr_embedding_index_writer_close(w);
    CHECK_FAILS(vtr_embedding_index_open(test_path("no_such_index"), &ix, &err), VTR_ERR_IO,
                "no_such_index");
    CHECK(ix == NULL);
}

/* Copies the index at src to dst with cp -r (for damaging copies). */
static const char *copy_of(const char *src, const char *name)
{
    const char *dst = test_path(name);
    CHECK_EQ_INT(test_run("cp -r '%s' '%s'", src, dst), 0);
    return dst;
}

TEST(damaged_index_files)
{
    char dir[512]; /* test_path's buffers rotate */
    snprintf(dir, sizeof dir, "%s", test_path("ix_damage"));
    vtr_error err;
    vtr_embedding_index_writer *w = open_writer(dir);
    for (int i = 0; i < 10; i++)
        add_item(w, i, 0);
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    vtr_embedding_index *ix;
    char path[1024];

    /* a truncated segment */
    const char *d = copy_of(dir, "ix_truncated");
    snprintf(path, sizeof path, "%s/seg-000001.npy", d);
    CHECK(truncate(path, 128 + 9 * DIM * 2) == 0);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_FORMAT, "seg-000001.npy");
    CHECK(ix == NULL);

    /* a segment that is not NPY */
    d = copy_of(dir, "ix_garbage");
    snprintf(path, sizeof path, "%s/seg-000001.npy", d);
    FILE *fp = fopen(path, "r+b");
    CHECK(fp);
    fputs("garbage", fp);
    fclose(fp);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_FORMAT, "seg-000001.npy");

    /* a segment of the wrong shape (well-formed NPY) */
    d = copy_of(dir, "ix_shape");
    CHECK_EQ_INT(test_run("/usr/bin/python3 -c \"import numpy as np; "
                          "np.save('%s/seg-000001.npy', np.ones((10, %d), np.float16))\" "
                          ">/dev/null 2>&1", d, DIM + 1), 0);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_FORMAT,
                "(10, 25) float16, but the manifest lists (10, 24) float16");

    /* a missing segment */
    d = copy_of(dir, "ix_missing_segment");
    snprintf(path, sizeof path, "%s/seg-000001.npy", d);
    CHECK(unlink(path) == 0);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_IO,
                "seg-000001.npy listed in index.sqlite is missing");

    /* no directory at all: the reader says what builds one */
    snprintf(path, sizeof path, "%s/ix_never_built", dir);
    CHECK_FAILS(vtr_embedding_index_open(path, &ix, &err), VTR_ERR_IO,
                "ix_never_built does not exist (vtr-index or vtr-aggregate --index builds one)");

    /* a missing manifest: readers and writers refuse */
    d = copy_of(dir, "ix_missing_manifest");
    snprintf(path, sizeof path, "%s/index.sqlite", d);
    CHECK(unlink(path) == 0);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_IO, "no index.sqlite");
    vtr_embedding_index_options opt = {.dim = DIM};
    CHECK_FAILS(vtr_embedding_index_writer_open(d, &opt, &w, &err), VTR_ERR_FORMAT,
                "segment files but no index.sqlite");

    /* a manifest that is not SQLite, one of another application, one of a newer vtr */
    d = copy_of(dir, "ix_not_sqlite");
    snprintf(path, sizeof path, "%s/index.sqlite", d);
    fp = fopen(path, "wb");
    CHECK(fp);
    fputs("this is not a database, but it is long enough to look like one to SQLite? no......"
          "................................................................................",
          fp);
    fclose(fp);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_DB, "index.sqlite");

    d = test_path("ix_foreign");
    CHECK(mkdir(d, 0777) == 0);
    snprintf(path, sizeof path, "%s/index.sqlite", d);
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE t (x); PRAGMA user_version = 1", NULL, NULL, NULL) ==
          SQLITE_OK);
    sqlite3_close(db);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_FORMAT, "another application");
    CHECK_FAILS(vtr_embedding_index_writer_open(d, &opt, &w, &err), VTR_ERR_FORMAT,
                "another application");

    d = copy_of(dir, "ix_newer");
    snprintf(path, sizeof path, "%s/index.sqlite", d);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_FAILS(vtr_embedding_index_open(d, &ix, &err), VTR_ERR_UNSUPPORTED,
                "format version 99");
    CHECK_FAILS(vtr_embedding_index_writer_open(d, &opt, &w, &err), VTR_ERR_UNSUPPORTED,
                "format version 99");

    /* a manifest whose item has rows apart (the fuzzer's was a key index out of step with
     * its table): the item is refused, not given rows of others or past the end */
    d = copy_of(dir, "ix_split_item");
    snprintf(path, sizeof path, "%s/index.sqlite", d);
    char key3[32], key5[32], sql[256];
    key_of(3, key3, sizeof key3);
    key_of(5, key5, sizeof key5);
    snprintf(sql, sizeof sql, "UPDATE entries SET key = '%s', vector = 1 WHERE key = '%s'", key5,
             key3);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_OK(vtr_embedding_index_open(d, &ix, &err));
    int64_t first = -1, n = -1;
    CHECK_FAILS(vtr_embedding_index_find(ix, key5, &first, &n, &err), VTR_ERR_FORMAT,
                "'s 2 rows are not one run of a segment (a damaged index.sqlite?)");
    CHECK_OK(vtr_embedding_index_find(ix, "item4", &first, &n, &err));
    CHECK_EQ_INT(first, 4);
    vtr_embedding_index_close(ix);

    /* the original is untouched by all of this */
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    for (int i = 0; i < 10; i++)
        check_item(ix, i, 0);
    vtr_embedding_index_close(ix);
}
