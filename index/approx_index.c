/* The approximate index: its file, its consistency with the embedding index, and the
 * exact re-ranking of FAISS's candidates (approx_index.h, docs/index.md). */
#define _POSIX_C_SOURCE 200809L
#include "approx_index.h"

#include <dirent.h>
#include <errno.h>
#include <libavutil/adler32.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/blas_threads.h"
#include "lib/file.h"

/* The file, little-endian:
 *   0   magic "vtrann2\n" (the format version is its 7th byte)
 *   8   int64 kind (vtr_ann_kind), dim, generation, segments S, labels M, payload bytes P
 *   56  S x (int64 segment id, int64 rows)
 *       M x int64 the global row of each label, increasing
 *       P bytes: FAISS's serialization (vtr_ann_write)
 *       uint64 checksum of everything before it (file_checksum) */
static const char magic[8] = {'v', 't', 'r', 'a', 'n', 'n', '2', '\n'};
#define HEADER_FIELDS 6
#define HEADER_BYTES (8 + 8 * HEADER_FIELDS)
#define TMP_PREFIX VTR_APPROX_FILE ".tmp."
#define ADD_BLOCK 16384         /* rows converted to float32 and added at a time */
#define HNSW_TRAIN_ROWS 65536   /* the scalar quantizer's ranges */
#define IVF_TRAIN_ROWS 65536    /* at least; and 64 per list */
#define DEAD_SHARE_REBUILD 0.25 /* update rebuilds when this share of labels is tombstones */
#define TAIL_THREADS_ROWS 65536 /* a tail from which one query's re-ranking takes threads */

struct vtr_approx_index {
    vtr_ann_kind kind;
    int64_t dim, generation;
    int64_t n_segs;
    int64_t *seg_ids, *seg_rows; /* (n_segs) the segments it was built over */
    int64_t n_labels;
    int64_t *row_of;             /* (n_labels) global row of each FAISS label */
    vtr_ann *ann;
};

const char *vtr_ann_kind_name(vtr_ann_kind kind)
{
    return kind == VTR_ANN_HNSW ? "HNSW" : kind == VTR_ANN_IVFPQ ? "IVF-PQ" : "unknown";
}

vtr_ann_kind vtr_approx_index_kind(const vtr_approx_index *a)
{
    return a->kind;
}

int64_t vtr_approx_index_generation(const vtr_approx_index *a)
{
    return a->generation;
}

int64_t vtr_approx_index_labels(const vtr_approx_index *a)
{
    return a->n_labels;
}

void vtr_approx_index_close(vtr_approx_index *a)
{
    if (!a)
        return;
    vtr_ann_free(a->ann);
    free(a->seg_ids);
    free(a->seg_rows);
    free(a->row_of);
    free(a);
}

/* The file's checksum: Adler-32 of n bytes (libavutil; about 4 GB/s here, as fast as a
 * read of the file), widened to the uint64 field. It catches a flipped bit or a changed
 * byte; a cut is caught before, by the header's sizes. */
static uint64_t file_checksum(const unsigned char *p, size_t n)
{
    return av_adler32_update(1, p, n);
}

/* ---- the segments: the snapshot's against the file's ---- */

/* The snapshot's first row of each segment, (S + 1), malloc'ed; NULL when out of memory. */
static int64_t *segment_starts(const vtr_embedding_index *ix)
{
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(ix);
    int64_t *first = malloc((size_t)(m->n_parts + 1) * sizeof *first);
    if (!first)
        return NULL;
    first[0] = 0;
    for (int64_t p = 0; p < m->n_parts; p++)
        first[p + 1] = first[p] + m->parts[p].rows;
    return first;
}

/* The segments both lists start with: *common of them, covering *common_rows rows; false
 * when the lists differ before one of them ends. */
static bool common_segments(const vtr_approx_index *a, const vtr_embedding_index *ix,
                            int64_t *common, int64_t *common_rows)
{
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(ix);
    int64_t n = a->n_segs < m->n_parts ? a->n_segs : m->n_parts, rows = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a->seg_ids[i] != vtr_embedding_index_segment_id(ix, i) ||
            a->seg_rows[i] != m->parts[i].rows)
            return false;
        rows += a->seg_rows[i];
    }
    *common = n;
    *common_rows = rows;
    return true;
}

vtr_status vtr_approx_index_check(const vtr_approx_index *a, const vtr_embedding_index *ix,
                                  int64_t *tail_rows, vtr_error *err)
{
    int64_t common, rows;
    if (a->dim != vtr_embedding_index_dim(ix))
        return vtr_fail(err, VTR_ERR_INVALID, "%s has %lld columns; the index has %lld",
                        VTR_APPROX_FILE, (long long)a->dim,
                        (long long)vtr_embedding_index_dim(ix));
    if (!common_segments(a, ix, &common, &rows))
        return vtr_fail(err, VTR_ERR_INVALID, "%s was built for generation %lld, and the "
                        "index has renumbered its rows since (a compaction; generation %lld "
                        "now): update it (vtr-approx)", VTR_APPROX_FILE,
                        (long long)a->generation, (long long)vtr_embedding_index_generation(ix));
    if (tail_rows)
        *tail_rows = vtr_embedding_index_rows(ix) - rows;
    return VTR_OK;
}

/* ---- reading ---- */

/* Reads the file's contents (size bytes at p) into a. */
static vtr_status parse_file(vtr_approx_index *a, const unsigned char *p, size_t size,
                             vtr_error *err)
{
    if (size < HEADER_BYTES + 8)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: cut short (%zu bytes)", VTR_APPROX_FILE, size);
    if (memcmp(p, magic, 6) != 0 || p[7] != magic[7])
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an approximate index (bad magic)",
                        VTR_APPROX_FILE);
    if (memcmp(p, magic, 8) != 0)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: format version '%c'; this vtr reads "
                        "version %c: build it again", VTR_APPROX_FILE, p[6], magic[6]);
    int64_t h[HEADER_FIELDS];
    memcpy(h, p + 8, sizeof h);
    int64_t kind = h[0], n_segs = h[3], n_labels = h[4], payload = h[5];
    a->dim = h[1];
    a->generation = h[2];
    if ((kind != VTR_ANN_HNSW && kind != VTR_ANN_IVFPQ) || a->dim < 1 || a->generation < 0 ||
        n_segs < 0 || n_labels < 0 || payload < 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: the header is out of range (kind %lld, dim "
                        "%lld, %lld segments, %lld labels, %lld payload bytes)",
                        VTR_APPROX_FILE, (long long)kind, (long long)a->dim, (long long)n_segs,
                        (long long)n_labels, (long long)payload);
    /* each part no larger than what is left, so that the sum cannot overflow */
    uint64_t left = (uint64_t)(size - HEADER_BYTES - 8);
    if ((uint64_t)n_segs > left / 16 || (uint64_t)n_labels > left / 8 || (uint64_t)payload > left)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: cut short (%zu bytes; the header lists %lld "
                        "segments, %lld labels and %lld payload bytes)", VTR_APPROX_FILE, size,
                        (long long)n_segs, (long long)n_labels, (long long)payload);
    uint64_t want = 16 * (uint64_t)n_segs + 8 * (uint64_t)n_labels + (uint64_t)payload;
    if (want != left)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: %s (%zu bytes; the header says %llu)",
                        VTR_APPROX_FILE, want > left ? "cut short" : "trailing bytes", size,
                        (unsigned long long)(want + HEADER_BYTES + 8));
    uint64_t sum;
    memcpy(&sum, p + size - 8, 8);
    if (file_checksum(p, size - 8) != sum)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: checksum mismatch (the file is damaged): "
                        "build it again", VTR_APPROX_FILE);
    a->kind = (vtr_ann_kind)kind;
    a->n_segs = n_segs;
    a->n_labels = n_labels;
    a->seg_ids = malloc((size_t)(n_segs ? n_segs : 1) * sizeof *a->seg_ids);
    a->seg_rows = malloc((size_t)(n_segs ? n_segs : 1) * sizeof *a->seg_rows);
    a->row_of = malloc((size_t)(n_labels ? n_labels : 1) * sizeof *a->row_of);
    if (!a->seg_ids || !a->seg_rows || !a->row_of)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading %s", VTR_APPROX_FILE);
    const unsigned char *q = p + HEADER_BYTES;
    int64_t rows = 0;
    for (int64_t i = 0; i < n_segs; i++, q += 16) {
        memcpy(&a->seg_ids[i], q, 8);
        memcpy(&a->seg_rows[i], q + 8, 8);
        if (a->seg_rows[i] < 0 || a->seg_rows[i] > INT64_MAX / 2 - rows)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: segment %lld has %lld rows",
                            VTR_APPROX_FILE, (long long)i, (long long)a->seg_rows[i]);
        rows += a->seg_rows[i];
    }
    memcpy(a->row_of, q, (size_t)n_labels * 8);
    q += (size_t)n_labels * 8;
    for (int64_t i = 0; i < n_labels; i++)
        if (a->row_of[i] < 0 || a->row_of[i] >= rows || (i > 0 && a->row_of[i] <= a->row_of[i - 1]))
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: label %lld maps to row %lld (of %lld)",
                            VTR_APPROX_FILE, (long long)i, (long long)a->row_of[i],
                            (long long)rows);
    vtr_status st = vtr_ann_read(q, (size_t)payload, a->kind, a->dim, &a->ann, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", VTR_APPROX_FILE);
        return st;
    }
    if (vtr_ann_size(a->ann) != n_labels)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: FAISS holds %lld rows; the header says %lld",
                        VTR_APPROX_FILE, (long long)vtr_ann_size(a->ann), (long long)n_labels);
    return VTR_OK;
}

vtr_status vtr_approx_index_open(const char *dir, vtr_approx_index **out, vtr_error *err)
{
    *out = NULL;
    char *path = vtr_path_join(dir, VTR_APPROX_FILE);
    vtr_approx_index *a = calloc(1, sizeof *a);
    vtr_mapped_file f = {0};
    vtr_status st = VTR_OK;
    if (!path || !a) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "index %s has no approximate index (%s): build "
                      "one with vtr-approx", dir, VTR_APPROX_FILE);
        goto end;
    }
    if ((st = vtr_map_file(path, &f, err)) == VTR_OK)
        st = parse_file(a, f.data, f.size, err);
    if (st != VTR_OK)
        vtr_error_context(err, "index %s", dir);
end:
    vtr_unmap_file(&f);
    free(path);
    if (st != VTR_OK)
        vtr_approx_index_close(a);
    else
        *out = a;
    return st;
}

/* ---- writing ---- */

/* Removes temporary files of a killed builder (the caller holds the writer lock). */
static void remove_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
            continue;
        char *p = vtr_path_join(dir, e->d_name);
        if (p)
            unlink(p);
        free(p);
    }
    closedir(d);
}

/* Writes a (its ann, labels and the segments of snapshot ix) as DIR/approx.ann, whole or
 * not at all. */
static vtr_status write_file(const vtr_approx_index *a, const char *dir, vtr_error *err)
{
    char *path = vtr_path_join(dir, VTR_APPROX_FILE);
    if (!path)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_atomic_file f = {0};
    vtr_mapped_file back = {0};
    int64_t h[HEADER_FIELDS] = {a->kind, a->dim, a->generation, a->n_segs, a->n_labels, 0};
    vtr_status st = vtr_atomic_open(&f, path, err);
    if (st != VTR_OK)
        goto end;
    if (!f.tmp_path) {
        st = vtr_fail(err, VTR_ERR_IO, "%s is not a regular file", path);
        goto end;
    }
    if ((st = vtr_write_all(f.fp, magic, 8, path, err)) ||
        (st = vtr_write_all(f.fp, h, sizeof h, path, err)))
        goto end;
    for (int64_t i = 0; i < a->n_segs && st == VTR_OK; i++) {
        int64_t s[2] = {a->seg_ids[i], a->seg_rows[i]};
        st = vtr_write_all(f.fp, s, sizeof s, path, err);
    }
    if (st || (st = vtr_write_all(f.fp, a->row_of, (size_t)a->n_labels * 8, path, err)))
        goto end;
    long start = ftell(f.fp);
    if ((st = vtr_ann_write(a->ann, f.fp, err)))
        goto end;
    long stop = ftell(f.fp);
    h[HEADER_FIELDS - 1] = stop - start;
    if (start < 0 || stop < 0 || fseek(f.fp, 8, SEEK_SET) != 0 ||
        (st = vtr_write_all(f.fp, h, sizeof h, path, err)) || fflush(f.fp) != 0) {
        st = st ? st : vtr_fail_errno(err, "%s", path);
        goto end;
    }
    /* the checksum, over the bytes as they are in the file */
    if ((st = vtr_map_file(f.tmp_path, &back, err)))
        goto end;
    uint64_t sum = file_checksum(back.data, back.size);
    vtr_unmap_file(&back);
    if (fseek(f.fp, 0, SEEK_END) != 0) {
        st = vtr_fail_errno(err, "%s", path);
        goto end;
    }
    if ((st = vtr_write_all(f.fp, &sum, 8, path, err)) || (st = vtr_atomic_commit(&f, err)))
        goto end;
    st = vtr_sync_dir(dir, err);
end:
    if (st != VTR_OK)
        vtr_atomic_abort(&f);
    free(path);
    return st;
}

/* Adds rows[0 .. n-1] of ix to a->ann (converted to float32, ADD_BLOCK at a time) and
 * appends them to its labels (a->row_of has room). */
static vtr_status add_rows(vtr_approx_index *a, const vtr_embedding_index *ix,
                           const int64_t *rows, int64_t n, vtr_error *err)
{
    size_t D = (size_t)a->dim;
    float *x = malloc(ADD_BLOCK * D * sizeof *x);
    if (!x)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory adding rows");
    vtr_status st = VTR_OK;
    for (int64_t i0 = 0; i0 < n && st == VTR_OK; i0 += ADD_BLOCK) {
        int64_t m = n - i0 < ADD_BLOCK ? n - i0 : ADD_BLOCK;
        for (int64_t j = 0; j < m && st == VTR_OK; j++)
            st = vtr_embedding_index_row(ix, rows[i0 + j], x + (size_t)j * D, err);
        if (st == VTR_OK && (st = vtr_ann_add(a->ann, m, x, err)) == VTR_OK) {
            memcpy(a->row_of + a->n_labels, rows + i0, (size_t)m * sizeof *rows);
            a->n_labels += m;
        }
    }
    free(x);
    return st;
}

/* The live rows of ix in [from, to), malloc'ed into *rows (*n of them). */
static vtr_status live_rows(const vtr_embedding_index *ix, int64_t from, int64_t to,
                            int64_t **rows, int64_t *n, vtr_error *err)
{
    const uint64_t *skip = vtr_embedding_index_matrix(ix)->skip;
    *n = 0;
    *rows = malloc((size_t)(to > from ? to - from : 1) * sizeof **rows);
    if (!*rows)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory listing rows");
    for (int64_t r = from; r < to; r++)
        if (!vtr_topk_skipped(skip, r))
            (*rows)[(*n)++] = r;
    return VTR_OK;
}

/* Sets a's segments to ix's and its generation to ix's. */
static vtr_status take_segments(vtr_approx_index *a, const vtr_embedding_index *ix,
                                vtr_error *err)
{
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(ix);
    int64_t n = m->n_parts;
    int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    int64_t *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
    if (!ids || !rows) {
        free(ids);
        free(rows);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        ids[i] = vtr_embedding_index_segment_id(ix, i);
        rows[i] = m->parts[i].rows;
    }
    free(a->seg_ids);
    free(a->seg_rows);
    a->seg_ids = ids;
    a->seg_rows = rows;
    a->n_segs = n;
    a->generation = vtr_embedding_index_generation(ix);
    return VTR_OK;
}

/* Builds a new index of kind over the live rows of ix into *out (not written). */
static vtr_status build(vtr_embedding_index *ix, vtr_ann_kind kind, vtr_approx_index **out,
                        vtr_error *err)
{
    *out = NULL;
    vtr_embedding_index_items items;
    vtr_status st = vtr_embedding_index_items_read(ix, &items, err);
    if (st != VTR_OK)
        return st;
    if (items.n != vtr_embedding_index_live_rows(ix))
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "its items have several vectors each (%lld "
                        "items, %lld rows; an HGR or set model): an approximate index is for "
                        "one vector per item (HGR: use pre-selection)", (long long)items.n,
                        (long long)vtr_embedding_index_live_rows(ix));
    int64_t D = vtr_embedding_index_dim(ix), n = 0, *rows = NULL;
    float *train = NULL;
    vtr_approx_index *a = calloc(1, sizeof *a);
    if (!a)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    a->kind = kind;
    a->dim = D;
    if ((st = live_rows(ix, 0, vtr_embedding_index_rows(ix), &rows, &n, err)) ||
        (st = take_segments(a, ix, err)))
        goto end;
    if (n == 0) {
        st = vtr_fail(err, VTR_ERR_INVALID, "the index has no live rows");
        goto end;
    }
    int64_t lists = kind == VTR_ANN_IVFPQ ? vtr_ann_ivf_lists(n) : 0;
    int64_t t = HNSW_TRAIN_ROWS; /* the training sample */
    if (kind == VTR_ANN_IVFPQ)
        t = 64 * lists > IVF_TRAIN_ROWS ? 64 * lists : IVF_TRAIN_ROWS;
    t = t < n ? t : n;
    a->row_of = malloc((size_t)n * sizeof *a->row_of);
    train = malloc((size_t)t * (size_t)D * sizeof *train);
    if (!a->row_of || !train) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
        goto end;
    }
    for (int64_t i = 0; i < t && st == VTR_OK; i++) /* an evenly spaced sample */
        st = vtr_embedding_index_row(ix, rows[(int64_t)((double)i * (double)n / (double)t)],
                                     train + (size_t)i * (size_t)D, err);
    if (st || (st = vtr_ann_create(kind, D, lists, &a->ann, err)) ||
        (st = vtr_ann_train(a->ann, t, train, err)))
        goto end;
    free(train);
    train = NULL;
    st = add_rows(a, ix, rows, n, err);
end:
    free(rows);
    free(train);
    if (st != VTR_OK)
        vtr_approx_index_close(a);
    else
        *out = a;
    return st;
}

vtr_status vtr_approx_index_build(vtr_embedding_index *ix, const char *dir, vtr_ann_kind kind,
                                  vtr_error *err)
{
    vtr_approx_index *a;
    remove_leftovers(dir);
    int blas = vtr_blas_set_threads(1);
    vtr_status st = build(ix, kind, &a, err);
    if (blas > 0)
        vtr_blas_set_threads(blas);
    if (st == VTR_OK)
        st = write_file(a, dir, err);
    vtr_approx_index_close(a);
    if (st != VTR_OK)
        vtr_error_context(err, "index %s: approximate index", dir);
    return st;
}

/* The kind that the header of DIR/approx.ann names, when its first 16 bytes are whole. */
static bool header_kind(const char *dir, vtr_ann_kind *kind)
{
    char *path = vtr_path_join(dir, VTR_APPROX_FILE);
    FILE *f = path ? fopen(path, "rb") : NULL;
    unsigned char h[16];
    bool ok = f && fread(h, 1, sizeof h, f) == sizeof h && memcmp(h, magic, 8) == 0;
    int64_t k = 0;
    if (ok)
        memcpy(&k, h + 8, 8);
    if (f)
        fclose(f);
    free(path);
    *kind = (vtr_ann_kind)k;
    return ok && (k == VTR_ANN_HNSW || k == VTR_ANN_IVFPQ);
}

/* Labels of a whose rows are tombstones in ix (or beyond its common rows). */
static int64_t dead_labels(const vtr_approx_index *a, const vtr_embedding_index *ix,
                           int64_t common_rows)
{
    const uint64_t *skip = vtr_embedding_index_matrix(ix)->skip;
    int64_t dead = 0;
    for (int64_t i = 0; i < a->n_labels; i++)
        dead += a->row_of[i] >= common_rows || vtr_topk_skipped(skip, a->row_of[i]);
    return dead;
}

vtr_status vtr_approx_index_update(vtr_embedding_index *ix, const char *dir,
                                   vtr_approx_update *what, vtr_error *err)
{
    vtr_approx_update done = VTR_APPROX_ABSENT;
    vtr_approx_index *a = NULL;
    int64_t *rows = NULL, n = 0, common, common_rows;
    vtr_ann_kind kind;
    vtr_status st = vtr_approx_index_open(dir, &a, err);
    if (st == VTR_ERR_NOT_FOUND) {
        st = VTR_OK;
        goto end;
    }
    if ((st == VTR_ERR_FORMAT || st == VTR_ERR_UNSUPPORTED) && header_kind(dir, &kind)) {
        done = VTR_APPROX_REBUILT; /* damaged past its header: built again, as it was */
        st = vtr_approx_index_build(ix, dir, kind, err);
        goto end;
    }
    if (st != VTR_OK)
        goto end;
    remove_leftovers(dir);
    int64_t N = vtr_embedding_index_rows(ix);
    bool same = common_segments(a, ix, &common, &common_rows) &&
                common == a->n_segs && a->dim == vtr_embedding_index_dim(ix);
    if (same && (double)dead_labels(a, ix, common_rows) <= DEAD_SHARE_REBUILD * (double)a->n_labels) {
        done = VTR_APPROX_CURRENT;
        if (common_rows == N)
            goto end;
        /* the tail: FAISS's add, then the file rewritten for ix's generation */
        done = VTR_APPROX_ADDED;
        int64_t *grown;
        if ((st = live_rows(ix, common_rows, N, &rows, &n, err)))
            goto context;
        if (!(grown = realloc(a->row_of, (size_t)(a->n_labels + n + 1) * sizeof *grown))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto context;
        }
        a->row_of = grown;
        if ((st = add_rows(a, ix, rows, n, err)) || (st = take_segments(a, ix, err)) ||
            (st = write_file(a, dir, err)))
            goto context;
        goto end;
    }
    done = VTR_APPROX_REBUILT;
    kind = a->kind;
    vtr_approx_index_close(a);
    a = NULL;
    st = vtr_approx_index_build(ix, dir, kind, err);
    goto end;
context:
    vtr_error_context(err, "index %s: approximate index", dir);
end:
    free(rows);
    vtr_approx_index_close(a);
    if (what)
        *what = done;
    return st;
}

vtr_status vtr_approx_index_remove(const char *dir, bool *removed, vtr_error *err)
{
    char *path = vtr_path_join(dir, VTR_APPROX_FILE);
    if (!path)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = VTR_OK;
    bool gone = unlink(path) == 0;
    if (!gone && errno != ENOENT)
        st = vtr_fail_errno(err, "index %s: removing %s", dir, VTR_APPROX_FILE);
    else if (gone)
        st = vtr_sync_dir(dir, err);
    free(path);
    if (removed)
        *removed = gone;
    return st;
}

/* ---- searching ---- */

/* One query's exact re-ranking: its candidate rows (sorted, live, below the common rows)
 * and the tail rows, as one top-k matrix view whose rows are in global row order, so that
 * vtr_topk_search ranks them as it ranks the whole index. */
typedef struct rerank {
    const vtr_topk_matrix *m;
    const int64_t *first;  /* (n_parts + 1) the snapshot's segment starts */
    int64_t common;        /* segments both lists start with */
    int64_t common_rows;   /* the rows they hold: the tail starts there */
    int64_t tail_rows;
    int64_t cap;           /* candidates per query */
} rerank;

static int compare_rows(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The top k of one query q (D floats) among its candidates cand[0 .. nc-1] (global rows,
 * sorted in place here) and the tail; rows / scores get k values, *found the count. */
static vtr_status rerank_query(const rerank *r, const float *q, int64_t *cand, int64_t nc,
                               int64_t k, int threads, int64_t *rows, float *scores,
                               int64_t *found, vtr_error *err)
{
    const vtr_topk_matrix *m = r->m;
    qsort(cand, (size_t)nc, sizeof *cand, compare_rows);
    int64_t n_tail_parts = m->n_parts - r->common, total = nc + r->tail_rows;
    vtr_topk_part *parts = malloc((size_t)(nc + n_tail_parts + 1) * sizeof *parts);
    uint64_t *skip = calloc((size_t)(total / 64 + 1), sizeof *skip);
    int64_t *vrows = malloc((size_t)k * sizeof *vrows);
    vtr_status st = VTR_OK;
    if (!parts || !skip || !vrows) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory re-ranking");
        goto end;
    }
    size_t row_bytes = (size_t)m->dim * 2;
    for (int64_t j = 0; j < nc; j++) { /* the segment holding cand[j], by bisection */
        int64_t lo = 0, hi = r->common - 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (r->first[mid] <= cand[j])
                lo = mid;
            else
                hi = mid - 1;
        }
        parts[j] = (vtr_topk_part){
            .data = (const unsigned char *)m->parts[lo].data +
                    (size_t)(cand[j] - r->first[lo]) * row_bytes,
            .rows = 1};
    }
    for (int64_t p = 0; p < n_tail_parts; p++)
        parts[nc + p] = m->parts[r->common + p];
    for (int64_t j = 0; j < r->tail_rows; j++)
        if (vtr_topk_skipped(m->skip, r->common_rows + j))
            vtr_topk_skip_row(skip, nc + j);
    vtr_topk_matrix view = {.dtype = m->dtype, .dim = m->dim, .n_parts = nc + n_tail_parts,
                            .parts = parts, .skip = skip};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {m->dim}, .data = (float *)q};
    /* one query: the fused path, whatever the batch size of the caller */
    vtr_topk_options opt = {.threads = threads};
    if ((st = vtr_topk_search(&view, &qt, k, &opt, vrows, scores, found, err)))
        goto end;
    for (int64_t j = 0; j < k; j++)
        rows[j] = vrows[j] < 0 ? -1 : vrows[j] < nc ? cand[vrows[j]] : r->common_rows + vrows[j] - nc;
end:
    free(parts);
    free(skip);
    free(vrows);
    return st;
}

vtr_status vtr_approx_search(const vtr_approx_index *a, const vtr_embedding_index *ix,
                             const vtr_tensor *queries, int64_t k,
                             const vtr_approx_search_options *opt, int64_t *rows, float *scores,
                             int64_t *found, vtr_error *err)
{
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "k = %lld is not >= 1", (long long)k);
    if (!queries || queries->dtype != VTR_F32 || queries->ndim < 1 || queries->ndim > 2 ||
        queries->shape[queries->ndim - 1] != a->dim)
        return vtr_fail(err, VTR_ERR_INVALID, "queries must be float32 (Q, %lld) or (%lld,)",
                        (long long)a->dim, (long long)a->dim);
    rerank r = {.m = vtr_embedding_index_matrix(ix)};
    vtr_status st = vtr_approx_index_check(a, ix, NULL, err);
    if (st != VTR_OK)
        return st;
    common_segments(a, ix, &r.common, &r.common_rows); /* true: check passed */
    int64_t nq = queries->ndim == 2 ? queries->shape[0] : 1;
    if (nq == 0)
        return VTR_OK;
    r.tail_rows = vtr_embedding_index_rows(ix) - r.common_rows;
    int64_t want = opt && opt->candidates > 0 ? opt->candidates : (10 * k > 100 ? 10 * k : 100);
    r.cap = want < a->n_labels ? want : a->n_labels;
    int effort = opt ? opt->effort : 0;
    int64_t *labels = malloc((size_t)(nq * (r.cap ? r.cap : 1)) * sizeof *labels);
    int64_t *qfound = malloc((size_t)nq * sizeof *qfound);
    int64_t *qrows = malloc((size_t)(nq * k) * sizeof *qrows);
    float *qscores = malloc((size_t)(nq * k) * sizeof *qscores);
    int64_t *first = segment_starts(ix);
    if (!labels || !qfound || !qrows || !qscores || !first) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld queries", (long long)nq);
        goto end;
    }
    r.first = first;
    const float *q = queries->data;
    if (r.cap > 0 && (st = vtr_ann_search(a->ann, nq, q, r.cap, effort, labels, err)))
        goto end;
    /* labels -> live rows of the snapshot, in place */
    const uint64_t *skip = r.m->skip;
    for (int64_t i = 0; i < nq; i++) {
        int64_t *l = labels + i * r.cap, nc = 0;
        for (int64_t j = 0; j < r.cap; j++) {
            if (l[j] < 0 || l[j] >= a->n_labels)
                continue;
            int64_t row = a->row_of[l[j]];
            if (row < r.common_rows && !vtr_topk_skipped(skip, row))
                l[nc++] = row;
        }
        qfound[i] = nc; /* the candidate count, until rerank_query's found replaces it */
    }
    /* a query per thread; one query alone uses every thread only for a large tail (waking
     * threads for a few hundred rows costs more than scoring them) */
    int threads = nq == 1 && r.tail_rows >= TAIL_THREADS_ROWS ? 0 : 1;
    vtr_error first_err = {0};
    int failed = 0;
#pragma omp parallel for schedule(dynamic) if (nq > 1)
    for (int64_t i = 0; i < nq; i++) {
        vtr_error e;
        if (rerank_query(&r, q + i * a->dim, labels + i * r.cap, qfound[i], k, threads,
                         qrows + i * k, qscores + i * k, &qfound[i], &e) != VTR_OK) {
#pragma omp critical
            if (!failed++)
                first_err = e;
        }
    }
    if (failed) {
        if (err)
            *err = first_err;
        st = first_err.status;
        goto end;
    }
    memcpy(rows, qrows, (size_t)(nq * k) * sizeof *rows);
    memcpy(scores, qscores, (size_t)(nq * k) * sizeof *scores);
    if (found)
        memcpy(found, qfound, (size_t)nq * sizeof *found);
end:
    free(labels);
    free(qfound);
    free(qrows);
    free(qscores);
    free(first);
    return st;
}

double vtr_recall_at_k(const int64_t *rows, const int64_t *exact, int64_t n, int64_t k)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t hit = 0, real = 0;
        for (int64_t j = 0; j < k; j++) {
            if (exact[i * k + j] < 0)
                continue;
            real++;
            for (int64_t l = 0; l < k; l++)
                hit += rows[i * k + l] == exact[i * k + j];
        }
        sum += real ? (double)hit / (double)real : 1.0;
    }
    return n > 0 ? sum / (double)n : 1.0;
}

vtr_status vtr_approx_recall(const vtr_approx_index *a, const vtr_embedding_index *ix,
                             int64_t n, int64_t k, const vtr_approx_search_options *opt,
                             double *recall, vtr_error *err)
{
    *recall = NAN;
    int64_t *live = NULL, n_live = 0, D = a->dim;
    vtr_status st = live_rows(ix, 0, vtr_embedding_index_rows(ix), &live, &n_live, err);
    if (st != VTR_OK)
        return st;
    n = n < n_live ? n : n_live;
    float *q = malloc((size_t)(n ? n : 1) * (size_t)D * sizeof *q);
    int64_t *exact = malloc((size_t)(n ? n : 1) * (size_t)k * sizeof *exact);
    int64_t *approx = malloc((size_t)(n ? n : 1) * (size_t)k * sizeof *approx);
    float *scores = malloc((size_t)(n ? n : 1) * (size_t)k * sizeof *scores);
    if (!q || !exact || !approx || !scores) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (int64_t i = 0; i < n && st == VTR_OK; i++)
        st = vtr_embedding_index_row(ix, live[(int64_t)((double)i * (double)n_live / (double)n)],
                                     q + i * D, err);
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {n, D}, .data = q};
    if (st || n == 0 ||
        (st = vtr_topk_search(vtr_embedding_index_matrix(ix), &qt, k, NULL, exact, scores, NULL,
                              err)) ||
        (st = vtr_approx_search(a, ix, &qt, k, opt, approx, scores, NULL, err)))
        goto end;
    *recall = vtr_recall_at_k(approx, exact, n, k);
end:
    free(live);
    free(q);
    free(exact);
    free(approx);
    free(scores);
    return st;
}
