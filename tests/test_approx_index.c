/* The approximate index (index/approx_index.h, index/ann_faiss.h) on generated clustered
 * embeddings: recall@10 of HNSW and IVF-PQ against exact search, re-ranked scores equal to
 * the exact scores bit for bit, tombstones never returned, the rows of later commits
 * searched exactly, an update (FAISS's add) and a rebuild after a compaction, a stale file
 * refused with its reason, and damaged files (cut at every length, flipped bytes). */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "index/ann_faiss.h"
#include "index/approx_index.h"
#include "index/embedding_index.h"
#include "index/topk.h"
#include "lib/file.h"

#define DIM 64
#define ROWS 10000
#define CLUSTERS 500
#define QUERIES 100
#define K 10
#define MIN_RECALL 0.9
#define UPDATE_ROWS 6000 /* the incremental test's final size */

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* A standard normal value (Box-Muller). */
static float gauss(uint64_t *s)
{
    double u = ((double)rng_next(s) + 1.0) / 9007199254740993.0;
    double v = (double)rng_next(s) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Row i of the clustered data: centre i % CLUSTERS plus noise (the index normalizes). */
static void clustered_row(uint64_t seed, int64_t i, float *x)
{
    uint64_t c = (uint64_t)(i % CLUSTERS) * 7919 + seed, s = (uint64_t)i * 104729 + seed * 31 + 7;
    for (int d = 0; d < DIM; d++)
        x[d] = gauss(&c) + 0.8f * gauss(&s);
}

/* Writes rows [from, to) of the clustered data as items "row<i>", committed. */
static void add_rows(const char *dir, uint64_t seed, int64_t from, int64_t to)
{
    vtr_error err;
    vtr_embedding_index_options opt = {.dim = DIM, .model = "test-approx"};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(dir, &opt, &w, &err));
    float x[DIM];
    for (int64_t i = from; i < to; i++) {
        char key[32];
        snprintf(key, sizeof key, "row%lld", (long long)i);
        clustered_row(seed, i, x);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
        CHECK_OK(vtr_embedding_index_writer_add(w, key, &t, &err));
    }
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
}

static void remove_rows(const char *dir, int64_t from, int64_t to, int64_t step)
{
    vtr_error err;
    vtr_embedding_index_options opt = {0};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(dir, &opt, &w, &err));
    for (int64_t i = from; i < to; i += step) {
        char key[32];
        snprintf(key, sizeof key, "row%lld", (long long)i);
        CHECK_OK(vtr_embedding_index_writer_remove(w, key, &err));
    }
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
}

/* Builds the approximate index of kind over the index at dir as it is now. */
static void build_approx(const char *dir, vtr_ann_kind kind)
{
    vtr_error err;
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_OK(vtr_approx_index_build(ix, dir, kind, &err));
    vtr_embedding_index_close(ix);
}

/* Queries near the clusters, unit length: (QUERIES, DIM). */
static float *make_queries(uint64_t seed)
{
    float *q = malloc(QUERIES * DIM * sizeof *q);
    uint64_t s = seed * 977 + 5;
    for (int i = 0; i < QUERIES; i++) {
        clustered_row(seed, (int64_t)rng_next(&s) % ROWS, q + i * DIM);
        double n = 0;
        for (int d = 0; d < DIM; d++) {
            q[i * DIM + d] += 0.5f * gauss(&s);
            n += (double)q[i * DIM + d] * q[i * DIM + d];
        }
        for (int d = 0; d < DIM; d++)
            q[i * DIM + d] = (float)(q[i * DIM + d] / sqrt(n));
    }
    return q;
}

/* The exact top K of query q, one query at a time (the fused path). */
static void exact_one(const vtr_embedding_index *ix, const float *q, int64_t *rows, float *scores)
{
    vtr_error err;
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = (float *)q};
    CHECK_OK(vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, K, NULL, rows, scores, NULL,
                             &err));
}

static bool is_live(const vtr_embedding_index *ix, int64_t r)
{
    const uint64_t *skip = vtr_embedding_index_matrix(ix)->skip;
    return r >= 0 && r < vtr_embedding_index_rows(ix) && !(skip && (skip[r >> 6] >> (r & 63) & 1));
}

/* Searches all queries with a; checks the results against exact search (the rows both
 * return have the same score bit for bit, and the order is the exact order: scores
 * descending, ties by row; only live rows) and returns recall@K. */
static double check_against_exact(const vtr_approx_index *a, const vtr_embedding_index *ix,
                                  const float *q, const vtr_approx_search_options *opt)
{
    vtr_error err;
    int64_t rows[QUERIES * K], found[QUERIES], er[K];
    float scores[QUERIES * K], es[K];
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {QUERIES, DIM}, .data = (float *)q};
    CHECK_OK(vtr_approx_search(a, ix, &qt, K, opt, rows, scores, found, &err));
    int64_t hits = 0;
    for (int i = 0; i < QUERIES; i++) {
        CHECK_EQ_INT(found[i], K);
        exact_one(ix, q + i * DIM, er, es);
        for (int j = 0; j < K; j++) {
            int64_t r = rows[i * K + j];
            CHECK_MSG(is_live(ix, r), "query %d rank %d: row %lld is not live", i, j, (long long)r);
            if (j > 0) {
                float p = scores[i * K + j - 1], s = scores[i * K + j];
                CHECK(p > s || (p == s && rows[i * K + j - 1] < r));
            }
            for (int l = 0; l < K; l++)
                if (er[l] == r) {
                    hits++;
                    CHECK_MSG(memcmp(&es[l], &scores[i * K + j], sizeof(float)) == 0,
                              "query %d row %lld: approximate score %.9g, exact %.9g", i,
                              (long long)r, (double)scores[i * K + j], (double)es[l]);
                }
        }
    }
    return (double)hits / (QUERIES * K);
}

static void recall_of_kind(vtr_ann_kind kind, const char *name)
{
    vtr_error err;
    const char *dir = test_path(name);
    add_rows(dir, 1, 0, ROWS);
    build_approx(dir, kind);
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    vtr_approx_index *a;
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_kind(a), kind);
    CHECK_EQ_INT(vtr_approx_index_labels(a), ROWS);
    CHECK_EQ_INT(vtr_approx_index_generation(a), vtr_embedding_index_generation(ix));
    float *q = make_queries(1);
    double recall = check_against_exact(a, ix, q, NULL);
    CHECK_MSG(recall >= MIN_RECALL, "%s recall@10 %.3f < %.1f", vtr_ann_kind_name(kind), recall,
              MIN_RECALL);
    /* rows of the index as queries, as vtr-approx measures it */
    double self;
    CHECK_OK(vtr_approx_recall(a, ix, 50, K, NULL, &self, &err));
    CHECK_MSG(self >= MIN_RECALL, "recall@10 over the index's rows %.3f", self);
    free(q);
    vtr_approx_index_close(a);
    vtr_embedding_index_close(ix);
}

TEST(approx_hnsw_recall_and_exact_scores)
{
    recall_of_kind(VTR_ANN_HNSW, "approx-hnsw");
}

TEST(approx_ivfpq_recall_and_exact_scores)
{
    recall_of_kind(VTR_ANN_IVFPQ, "approx-ivfpq");
}

/* With every row a candidate (every list probed), the approximate search is the exact
 * search: the same rows, the same scores, the same order; also after rows were added to
 * the trained IVF-PQ index. */
TEST(approx_all_candidates_is_exact)
{
    vtr_error err;
    const char *dir = test_path("approx-all");
    add_rows(dir, 2, 0, 1000);
    remove_rows(dir, 0, 1000, 7);
    build_approx(dir, VTR_ANN_IVFPQ);
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    vtr_approx_index *a;
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_labels(a), vtr_embedding_index_live_rows(ix));
    vtr_approx_search_options opt = {.candidates = 1000, .effort = 1000};
    float *q = make_queries(2);
    int64_t rows[K], er[K];
    float scores[K], es[K];
    for (int i = 0; i < QUERIES; i++) {
        vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = q + i * DIM};
        CHECK_OK(vtr_approx_search(a, ix, &qt, K, &opt, rows, scores, NULL, &err));
        exact_one(ix, q + i * DIM, er, es);
        CHECK(memcmp(rows, er, sizeof rows) == 0);
        CHECK(memcmp(scores, es, sizeof scores) == 0);
    }
    vtr_approx_index_close(a);
    vtr_embedding_index_close(ix);
    /* IVF-PQ takes new rows into its trained lists (FAISS's add) */
    add_rows(dir, 2, 1000, 1100);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    vtr_approx_update what;
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_ADDED);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_labels(a), vtr_embedding_index_live_rows(ix));
    opt.candidates = 1100;
    for (int i = 0; i < QUERIES; i++) {
        vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = q + i * DIM};
        CHECK_OK(vtr_approx_search(a, ix, &qt, K, &opt, rows, scores, NULL, &err));
        exact_one(ix, q + i * DIM, er, es);
        CHECK(memcmp(rows, er, sizeof rows) == 0);
    }
    free(q);
    vtr_approx_index_close(a);
    vtr_embedding_index_close(ix);
}

/* Removed items, added items and a compaction after the build, as docs/index.md says. */
TEST(approx_follows_incremental_updates)
{
    vtr_error err;
    const char *dir = test_path("approx-updates");
    add_rows(dir, 3, 0, UPDATE_ROWS / 2);
    build_approx(dir, VTR_ANN_HNSW);
    vtr_embedding_index *ix;
    float *q = make_queries(3);

    /* tombstones: a third of the rows removed, and the approximate index kept as it was */
    remove_rows(dir, 0, UPDATE_ROWS / 2, 3);
    /* new rows: a new segment, searched exactly until the update */
    add_rows(dir, 3, UPDATE_ROWS / 2, UPDATE_ROWS);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    vtr_approx_index *a;
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    int64_t tail;
    CHECK_OK(vtr_approx_index_check(a, ix, &tail, &err));
    CHECK_EQ_INT(tail, UPDATE_ROWS - UPDATE_ROWS / 2);
    double recall = check_against_exact(a, ix, q, NULL); /* no tombstone returned */
    CHECK_MSG(recall >= MIN_RECALL, "recall@10 with a tail and tombstones %.3f", recall);
    /* a new row as the query finds itself first: the tail is searched */
    float x[DIM];
    int64_t rows[K];
    float scores[K];
    CHECK_OK(vtr_embedding_index_row(ix, UPDATE_ROWS - 5, x, &err));
    vtr_tensor one = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = x};
    CHECK_OK(vtr_approx_search(a, ix, &one, K, NULL, rows, scores, NULL, &err));
    CHECK_EQ_INT(rows[0], UPDATE_ROWS - 5);
    vtr_approx_index_close(a);

    /* a third of the file's labels are tombstones now (more than a quarter): the update
     * builds it again, over every live row */
    vtr_approx_update what;
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_REBUILT);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_labels(a), vtr_embedding_index_live_rows(ix));
    CHECK_OK(vtr_approx_index_check(a, ix, &tail, &err));
    CHECK_EQ_INT(tail, 0);
    vtr_approx_index_close(a);
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_CURRENT);
    vtr_embedding_index_close(ix);

    /* a few rows more: added to FAISS */
    add_rows(dir, 3, UPDATE_ROWS, UPDATE_ROWS + 100);
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    int64_t before = vtr_embedding_index_live_rows(ix) - 100;
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_ADDED);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_labels(a), before + 100);
    CHECK_EQ_INT(vtr_approx_index_generation(a), vtr_embedding_index_generation(ix));
    CHECK_OK(vtr_embedding_index_row(ix, UPDATE_ROWS + 50, x, &err));
    CHECK_OK(vtr_approx_search(a, ix, &one, K, NULL, rows, scores, NULL, &err));
    CHECK_EQ_INT(rows[0], UPDATE_ROWS + 50);
    vtr_embedding_index_close(ix);

    /* a compaction renumbers the rows: the file is stale, refused with the reason, and an
     * update builds it again */
    vtr_embedding_index_options opt = {0};
    vtr_embedding_index_writer *w;
    remove_rows(dir, 1, 100, 3);
    CHECK_OK(vtr_embedding_index_writer_open(dir, &opt, &w, &err));
    CHECK_OK(vtr_embedding_index_writer_compact(w, &err));
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_FAILS(vtr_approx_index_check(a, ix, NULL, &err), VTR_ERR_INVALID, "compaction");
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {QUERIES, DIM}, .data = q};
    int64_t many[QUERIES * K];
    float many_s[QUERIES * K];
    CHECK_FAILS(vtr_approx_search(a, ix, &qt, K, NULL, many, many_s, NULL, &err),
                VTR_ERR_INVALID, "renumbered");
    vtr_approx_index_close(a);
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_REBUILT);
    vtr_embedding_index_writer_close(w);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    recall = check_against_exact(a, ix, q, NULL);
    CHECK_MSG(recall >= MIN_RECALL, "recall@10 after the rebuild %.3f", recall);
    vtr_approx_index_close(a);
    vtr_embedding_index_close(ix);

    bool removed;
    CHECK_OK(vtr_approx_index_remove(dir, &removed, &err));
    CHECK(removed);
    CHECK_FAILS(vtr_approx_index_open(dir, &a, &err), VTR_ERR_NOT_FOUND, "vtr-approx");
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_ABSENT);
    vtr_embedding_index_close(ix);
    free(q);
}

TEST(approx_refusals)
{
    vtr_error err;
    /* IVF-PQ needs 256 training rows */
    const char *dir = test_path("approx-small");
    add_rows(dir, 4, 0, 100);
    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    CHECK_FAILS(vtr_approx_index_build(ix, dir, VTR_ANN_IVFPQ, &err), VTR_ERR_INVALID,
                "at least 256");
    CHECK(access(test_path("approx-small/" VTR_APPROX_FILE), F_OK) != 0);
    vtr_embedding_index_close(ix);

    /* items of several vectors */
    const char *multi = test_path("approx-multi");
    vtr_embedding_index_options opt = {.dim = DIM, .model = "test-approx"};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(multi, &opt, &w, &err));
    float x[3 * DIM];
    for (int i = 0; i < 3; i++)
        clustered_row(4, i, x + i * DIM);
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {3, DIM}, .data = x};
    CHECK_OK(vtr_embedding_index_writer_add(w, "item", &t, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    CHECK_OK(vtr_embedding_index_open(multi, &ix, &err));
    CHECK_FAILS(vtr_approx_index_build(ix, multi, VTR_ANN_HNSW, &err), VTR_ERR_UNSUPPORTED,
                "several vectors");
    vtr_embedding_index_close(ix);

    /* an approximate index of another index's dimension */
    const char *other = test_path("approx-other");
    vtr_embedding_index_options o2 = {.dim = DIM / 2, .model = "test-approx"};
    CHECK_OK(vtr_embedding_index_writer_open(other, &o2, &w, &err));
    vtr_tensor half = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM / 2}, .data = x};
    CHECK_OK(vtr_embedding_index_writer_add(w, "a", &half, &err));
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);
    build_approx(dir, VTR_ANN_HNSW);
    vtr_approx_index *a;
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_OK(vtr_embedding_index_open(other, &ix, &err));
    CHECK_FAILS(vtr_approx_index_check(a, ix, NULL, &err), VTR_ERR_INVALID, "columns");
    vtr_embedding_index_close(ix);
    vtr_approx_index_close(a);
}

static void write_whole(const char *path, const unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, n, f) == n);
    fclose(f);
}

/* A file cut at every length (in the header, the segment list and the first labels; then
 * every 61st), or with a byte changed anywhere, is refused as damaged. */
TEST(approx_damaged_files)
{
    vtr_error err;
    const char *dir = test_path("approx-damaged");
    add_rows(dir, 5, 0, 40);
    build_approx(dir, VTR_ANN_HNSW);
    const char *path = test_path("approx-damaged/" VTR_APPROX_FILE);
    vtr_mapped_file f;
    CHECK_OK(vtr_map_file(path, &f, &err));
    size_t n = f.size;
    unsigned char *good = malloc(n);
    memcpy(good, f.data, n);
    vtr_unmap_file(&f);
    vtr_approx_index *a;
    for (size_t cut = 0; cut < n; cut += cut < 512 ? 1 : 61) {
        write_whole(path, good, cut);
        CHECK_FAILS(vtr_approx_index_open(dir, &a, &err), VTR_ERR_FORMAT, "cut short");
    }
    unsigned char *bad = malloc(n + 1);
    for (size_t at = 0; at < n; at += at < 128 ? 1 : 97) {
        memcpy(bad, good, n);
        bad[at] ^= 0x5a;
        write_whole(path, bad, n);
        vtr_status st = vtr_approx_index_open(dir, &a, &err);
        CHECK_MSG(st == (at == 6 ? VTR_ERR_UNSUPPORTED : VTR_ERR_FORMAT),
                  "byte %zu changed: %s", at, err.msg);
    }
    memcpy(bad, good, n);
    bad[n] = 0;
    write_whole(path, bad, n + 1);
    CHECK_FAILS(vtr_approx_index_open(dir, &a, &err), VTR_ERR_FORMAT, "trailing bytes");
    write_whole(path, good, n);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    vtr_approx_index_close(a);
    /* an update (vtr-index's, at the end of a run) builds a damaged file again as the kind
     * its header names; one without a whole header is an error to report */
    vtr_embedding_index *ix;
    vtr_approx_update what;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    write_whole(path, good, n / 2);
    CHECK_OK(vtr_approx_index_update(ix, dir, &what, &err));
    CHECK_EQ_INT(what, VTR_APPROX_REBUILT);
    CHECK_OK(vtr_approx_index_open(dir, &a, &err));
    CHECK_EQ_INT(vtr_approx_index_kind(a), VTR_ANN_HNSW);
    vtr_approx_index_close(a);
    write_whole(path, good, 12);
    CHECK_FAILS(vtr_approx_index_update(ix, dir, &what, &err), VTR_ERR_FORMAT, "cut short");
    vtr_embedding_index_close(ix);
    free(bad);
    free(good);
}

/* FAISS's own reader (below the checksum) refuses its serialization cut at every length
 * and another index type. */
TEST(ann_faiss_read_refuses_cut_bytes)
{
#ifdef __SANITIZE_ADDRESS__
    /* FAISS's reader (Debian's libfaiss.a) leaks the parts of an index it had read when
     * it refuses cut bytes (found by CI's leak checker: read_index, read_ivfpq,
     * read_InvertedLists); vtr never hands it damaged bytes (approx.ann's checksum is
     * checked first), so only this test does */
    test_skip("FAISS's reader leaks on cut bytes; checked in the build without sanitizers");
#endif
    vtr_error err;
    float x[300 * 16], row[DIM];
    for (int i = 0; i < 300; i++) { /* the first 16 values of the rows */
        clustered_row(6, i, row);
        memcpy(x + i * 16, row, 16 * sizeof *x);
    }
    for (int kind = VTR_ANN_HNSW; kind <= VTR_ANN_IVFPQ; kind++) {
        vtr_ann *ann;
        CHECK_OK(vtr_ann_create((vtr_ann_kind)kind, 16, vtr_ann_ivf_lists(300), &ann, &err));
        CHECK_OK(vtr_ann_train(ann, 300, x, &err));
        CHECK_OK(vtr_ann_add(ann, kind == VTR_ANN_HNSW ? 30 : 300, x, &err));
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        CHECK_OK(vtr_ann_write(ann, fp, &err));
        fclose(fp);
        vtr_ann *back;
        CHECK_OK(vtr_ann_read(buf, len, (vtr_ann_kind)kind, 16, &back, &err));
        CHECK_EQ_INT(vtr_ann_size(back), vtr_ann_size(ann));
        vtr_ann_free(back);
        for (size_t cut = 0; cut < len; cut++) {
            unsigned char *part = malloc(cut ? cut : 1);
            memcpy(part, buf, cut);
            CHECK_FAILS(vtr_ann_read(part, cut, (vtr_ann_kind)kind, 16, &back, &err),
                        VTR_ERR_FORMAT, "FAISS read_index");
            free(part);
        }
        CHECK_FAILS(vtr_ann_read(buf, len, (vtr_ann_kind)(3 - kind), 16, &back, &err),
                    VTR_ERR_FORMAT, "is not");
        CHECK_FAILS(vtr_ann_read(buf, len, (vtr_ann_kind)kind, 8, &back, &err),
                    VTR_ERR_FORMAT, "dimension");
        free(buf);
        vtr_ann_free(ann);
    }
}
