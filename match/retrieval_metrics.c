#include "retrieval_metrics.h"

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "match/set_similarity.h"

#define DEFAULT_TILE_ITEMS 256
#define DEFAULT_TILE_CAPS 4096
#define DEFAULT_CACHE_BYTES ((size_t)256 << 20)
/* captions per OpenMP work unit of the t2v count */
#define T2V_CHUNK 256

/* ---- block functions ---- */

vtr_status vtr_similarity_matrix_block(void *ctx, int item0, int n_items, const int *caps,
                                       int n_caps, float *S, vtr_error *err)
{
    (void)err; /* copying cannot fail */
    const vtr_similarity_matrix *m = ctx;
    for (int a = 0; a < n_items; a++) {
        const float *row = m->S + (size_t)(item0 + a) * (size_t)m->ld;
        float *out = S + (size_t)a * (size_t)n_caps;
        for (int b = 0; b < n_caps; b++)
            out[b] = row[caps[b]];
    }
    return VTR_OK;
}

static int model_set_size(const vtr_embedding_model *m)
{
    return m->set_size > 1 ? m->set_size : 1;
}

/* A set model's scores of items item0 .. + n_items and captions B (n_caps, K, dim) into S
 * (= them for the first model, += after): smooth-Chamfer through a scratch (and, after the
 * first model, a buffer for the scores) of its own. */
static vtr_status set_model_block(const vtr_embedding_model *model, int item0, int n_items,
                                  const float *B, int n_caps, bool first, float *S,
                                  vtr_error *err)
{
    int K = model->set_size;
    size_t total = (size_t)n_items * (size_t)n_caps;
    void *scratch = malloc(vtr_smooth_chamfer_scratch_size(n_items, n_caps, K, K));
    float *scores = first ? S : malloc(total * sizeof *scores);
    if (!scratch || !scores) {
        free(scratch);
        if (!first)
            free(scores);
        return vtr_fail(err, VTR_ERR_NOMEM, "scoring %d x %d sets", n_items, n_caps);
    }
    vtr_smooth_chamfer_forward(scores, n_caps, scratch,
                               model->items + (size_t)item0 * K * (size_t)model->dim, B,
                               n_items, n_caps, K, K, model->dim, model->set_alpha);
    if (!first) {
        for (size_t k = 0; k < total; k++)
            S[k] += scores[k];
        free(scores);
    }
    free(scratch);
    return VTR_OK;
}

vtr_status vtr_similarity_ensemble_block(void *ctx, int item0, int n_items, const int *caps,
                                         int n_caps, float *S, vtr_error *err)
{
    const vtr_similarity_ensemble *e = ctx;
    int contiguous = 1;
    for (int b = 1; b < n_caps && contiguous; b++)
        contiguous = caps[b] == caps[0] + b;
    size_t max_row = 0;
    for (int m = 0; m < e->n_models; m++) {
        size_t row = (size_t)e->models[m].dim * (size_t)model_set_size(&e->models[m]);
        max_row = row > max_row ? row : max_row;
    }
    float *gathered = NULL;
    if (!contiguous) {
        gathered = malloc((size_t)n_caps * max_row * sizeof *gathered);
        if (!gathered)
            return vtr_fail(err, VTR_ERR_NOMEM, "gathering %d caption embeddings", n_caps);
    }
    vtr_status st = VTR_OK;
    for (int m = 0; m < e->n_models && st == VTR_OK; m++) {
        const vtr_embedding_model *model = &e->models[m];
        int dim = model->dim;
        size_t row = (size_t)dim * (size_t)model_set_size(model);
        const float *B = model->captions + (size_t)caps[0] * row;
        if (!contiguous) {
            for (int b = 0; b < n_caps; b++)
                memcpy(gathered + (size_t)b * row, model->captions + (size_t)caps[b] * row,
                       row * sizeof *gathered);
            B = gathered;
        }
        if (model->set_size > 1) {
            st = set_model_block(model, item0, n_items, B, n_caps, m == 0, S, err);
            continue;
        }
        // S (n_items, n_caps) (+)= items[item0 ..] (n_items, dim) · B (n_caps, dim)ᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_items, n_caps, dim, 1.0f,
                    model->items + (size_t)item0 * (size_t)dim, dim, B, dim, m == 0 ? 0.0f : 1.0f,
                    S, n_caps);
    }
    if (st == VTR_OK && e->n_models > 1) {
        float n = (float)e->n_models;
        size_t total = (size_t)n_items * (size_t)n_caps;
        for (size_t k = 0; k < total; k++)
            S[k] /= n;
    }
    free(gathered);
    return st;
}

/* ---- one evaluation (a fold, or the whole set) ----
 *
 * Rows are items item0 .. item0 + n_rows - 1; columns are the candidates/queries on the
 * text side (captions, or de-duplicated texts), col_cap[c] the caption whose column of S
 * stands for column c. Relevance is a set of (row, col) pairs kept twice, as row lists
 * and as column lists; once the scores are known each list is sorted in ranking order
 * (score descending, index ascending), and entry e's pos counts the candidates ranked
 * before it. */

typedef struct rel_entry {
    int idx;     /* the col (row lists) or the row (column lists) */
    float score; /* S of the pair */
    int64_t pos; /* zero-based position in the query's ranking */
} rel_entry;

typedef struct eval_task {
    int item0, n_rows, n_cols;
    int *col_cap;       /* (n_cols) */
    int64_t *row_off;   /* (n_rows + 1) into row_rel */
    rel_entry *row_rel; /* (n_pairs) */
    int64_t *col_off;   /* (n_cols + 1) into col_rel */
    rel_entry *col_rel; /* (n_pairs) */
    int64_t *col_pair;  /* (n_pairs) the row_rel index of each col_rel entry */
    int64_t n_pairs;
} eval_task;

static void task_free(eval_task *t)
{
    free(t->col_cap);
    free(t->row_off);
    free(t->row_rel);
    free(t->col_off);
    free(t->col_rel);
    free(t->col_pair);
    memset(t, 0, sizeof *t);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ranking order: higher score first, then lower index. */
static int cmp_rank_order(const void *a, const void *b)
{
    const rel_entry *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Builds the task of items [item0, item0 + n_rows): columns are the texts (cap_text, or
 * the captions themselves) of those items' captions in increasing id order. text_col
 * (n_texts, all -1 on entry) maps text id -> column; the caller resets it after use. */
static vtr_status task_build(eval_task *t, int item0, int n_rows, int n_caps, const int *cap_item,
                             const int *cap_text, int *text_col, int n_texts, vtr_error *err)
{
    vtr_status st = VTR_OK;
    int *pair_col = NULL; /* (fold captions) col of each, grouped by row */
    memset(t, 0, sizeof *t);
    t->item0 = item0;
    t->n_rows = n_rows;

    /* columns: mark the texts present, number them in increasing text id */
    for (int j = 0; j < n_caps; j++) {
        int i = cap_item[j] - item0;
        if (i < 0 || i >= n_rows)
            continue;
        int x = cap_text ? cap_text[j] : j;
        if (text_col[x] < 0)
            text_col[x] = j; /* lowest caption of the text, for now */
    }
    int n_cols = 0;
    for (int x = 0; x < n_texts; x++)
        n_cols += text_col[x] >= 0;
    t->n_cols = n_cols;
    t->col_cap = malloc((size_t)n_cols * sizeof *t->col_cap);
    t->row_off = calloc((size_t)n_rows + 1, sizeof *t->row_off);
    if (!t->col_cap || !t->row_off)
        goto nomem;
    for (int x = 0, c = 0; x < n_texts; x++)
        if (text_col[x] >= 0) {
            t->col_cap[c] = text_col[x];
            text_col[x] = c++;
        }

    /* pairs grouped by row (counting sort), then sorted and de-duplicated per row */
    int64_t n_fold_caps = 0;
    for (int j = 0; j < n_caps; j++) {
        int i = cap_item[j] - item0;
        if (i >= 0 && i < n_rows) {
            t->row_off[i + 1]++;
            n_fold_caps++;
        }
    }
    for (int i = 0; i < n_rows; i++)
        t->row_off[i + 1] += t->row_off[i];
    pair_col = malloc((size_t)(n_fold_caps ? n_fold_caps : 1) * sizeof *pair_col);
    if (!pair_col)
        goto nomem;
    {
        int64_t *fill = t->row_off; /* advanced per row, restored below */
        for (int j = 0; j < n_caps; j++) {
            int i = cap_item[j] - item0;
            if (i >= 0 && i < n_rows)
                pair_col[fill[i]++] = text_col[cap_text ? cap_text[j] : j];
        }
        for (int i = n_rows; i > 0; i--)
            fill[i] = fill[i - 1];
        fill[0] = 0;
    }
    int64_t n_pairs = 0;
    for (int i = 0; i < n_rows; i++) {
        int64_t b = t->row_off[i], e = t->row_off[i + 1];
        qsort(pair_col + b, (size_t)(e - b), sizeof *pair_col, cmp_int);
        t->row_off[i] = n_pairs;
        for (int64_t k = b; k < e; k++)
            if (k == b || pair_col[k] != pair_col[k - 1])
                pair_col[n_pairs++] = pair_col[k];
    }
    t->row_off[n_rows] = n_pairs;
    t->n_pairs = n_pairs;

    size_t np = (size_t)(n_pairs ? n_pairs : 1);
    t->row_rel = calloc(np, sizeof *t->row_rel);
    t->col_rel = calloc(np, sizeof *t->col_rel);
    t->col_pair = malloc(np * sizeof *t->col_pair);
    t->col_off = calloc((size_t)n_cols + 1, sizeof *t->col_off);
    if (!t->row_rel || !t->col_rel || !t->col_pair || !t->col_off)
        goto nomem;
    for (int64_t p = 0; p < n_pairs; p++) {
        t->row_rel[p].idx = pair_col[p];
        t->col_off[pair_col[p] + 1]++;
    }
    for (int c = 0; c < n_cols; c++)
        t->col_off[c + 1] += t->col_off[c];
    {
        int64_t *fill = t->col_off;
        for (int i = 0; i < n_rows; i++) /* rows ascending: column lists come out sorted */
            for (int64_t p = t->row_off[i]; p < t->row_off[i + 1]; p++) {
                int64_t e = fill[t->row_rel[p].idx]++;
                t->col_rel[e].idx = i;
                t->col_pair[e] = p;
            }
        for (int c = n_cols; c > 0; c--)
            fill[c] = fill[c - 1];
        fill[0] = 0;
    }
    goto end;
nomem:
    st = vtr_fail(err, VTR_ERR_NOMEM, "relevance lists of %d items", n_rows);
    task_free(t);
end:
    free(pair_col);
    return st;
}

/* ---- tiles ---- */

typedef struct tiling {
    vtr_similarity_block_fn fn;
    void *ctx;
    vtr_similarity_cuda *gpu; /* not NULL: fn is vtr_similarity_cuda_block, ctx gpu, and
                                 phase 2 counts on the GPU */
    int tile_rows, tile_cols, n_rt, n_ct;
    size_t cache_bytes, cached_bytes;
    float **cache; /* (n_rt * n_ct) tiles kept from phase 1, or NULL */
    float *band;   /* tile_rows x n_cols: the tiles of one row of tiles, tile ct at
                      tile_rows * (its first column) */
} tiling;

static vtr_status tile_compute(const eval_task *t, tiling *tl, int rt, int ct, float *S,
                               vtr_error *err)
{
    int r0 = rt * tl->tile_rows, c0 = ct * tl->tile_cols;
    int nr = t->n_rows - r0 < tl->tile_rows ? t->n_rows - r0 : tl->tile_rows;
    int nc = t->n_cols - c0 < tl->tile_cols ? t->n_cols - c0 : tl->tile_cols;
    vtr_status st = tl->fn(tl->ctx, t->item0 + r0, nr, t->col_cap + c0, nc, S, err);
    if (st != VTR_OK)
        vtr_error_context(err, "similarity of items %d..%d x %d captions", t->item0 + r0,
                          t->item0 + r0 + nr - 1, nc);
    return st;
}

/* Phase 1: the scores of the relevant pairs, from the tiles that hold them; tiles are
 * kept in the cache while it has room. Then every list is sorted in ranking order. */
static vtr_status read_relevant_scores(eval_task *t, tiling *tl, vtr_error *err)
{
    vtr_status st = VTR_OK;
    unsigned char *has_pair = malloc((size_t)tl->n_ct);
    if (!has_pair)
        return vtr_fail(err, VTR_ERR_NOMEM, "tile map");
    size_t tile_bytes = (size_t)tl->tile_rows * (size_t)tl->tile_cols * sizeof(float);
    for (int rt = 0; rt < tl->n_rt; rt++) {
        int r0 = rt * tl->tile_rows;
        int r1 = r0 + tl->tile_rows < t->n_rows ? r0 + tl->tile_rows : t->n_rows;
        memset(has_pair, 0, (size_t)tl->n_ct);
        for (int r = r0; r < r1; r++)
            for (int64_t p = t->row_off[r]; p < t->row_off[r + 1]; p++)
                has_pair[t->row_rel[p].idx / tl->tile_cols] = 1;
        for (int ct = 0; ct < tl->n_ct; ct++) {
            if (!has_pair[ct])
                continue;
            float *slot = tl->band + (size_t)tl->tile_rows * (size_t)ct * (size_t)tl->tile_cols;
            float *S = slot;
            if (tl->cached_bytes + tile_bytes <= tl->cache_bytes) {
                S = malloc(tile_bytes);
                if (!S) { /* no room after all: go on without caching */
                    tl->cache_bytes = 0;
                    S = slot;
                }
            }
            st = tile_compute(t, tl, rt, ct, S, err);
            if (st != VTR_OK) {
                if (S != slot)
                    free(S);
                goto end;
            }
            if (S != slot) {
                tl->cache[(size_t)rt * (size_t)tl->n_ct + (size_t)ct] = S;
                tl->cached_bytes += tile_bytes;
            }
            int c0 = ct * tl->tile_cols;
            int nc = t->n_cols - c0 < tl->tile_cols ? t->n_cols - c0 : tl->tile_cols;
            for (int r = r0; r < r1; r++)
                for (int64_t p = t->row_off[r]; p < t->row_off[r + 1]; p++) {
                    int c = t->row_rel[p].idx;
                    if (c < c0 || c >= c0 + nc)
                        continue;
                    float s = S[(size_t)(r - r0) * (size_t)nc + (size_t)(c - c0)];
                    if (isnan(s)) {
                        st = vtr_fail(err, VTR_ERR_INVALID,
                                      "similarity of item %d and caption %d is NaN", t->item0 + r,
                                      t->col_cap[c]);
                        goto end;
                    }
                    t->row_rel[p].score = s;
                }
        }
    }
    for (int64_t e = 0; e < t->n_pairs; e++)
        t->col_rel[e].score = t->row_rel[t->col_pair[e]].score;
    for (int r = 0; r < t->n_rows; r++)
        qsort(t->row_rel + t->row_off[r], (size_t)(t->row_off[r + 1] - t->row_off[r]),
              sizeof *t->row_rel, cmp_rank_order);
    for (int c = 0; c < t->n_cols; c++)
        qsort(t->col_rel + t->col_off[c], (size_t)(t->col_off[c + 1] - t->col_off[c]),
              sizeof *t->col_rel, cmp_rank_order);
end:
    free(has_pair);
    return st;
}

/* The counting loops are most of the work after the products; where the compiler and the
 * C library support it, they are built for AVX2 as well and picked at load time. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VTR_COUNT_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VTR_COUNT_CLONES
#define VTR_COUNT_CLONES
#endif

/* Candidates before (score t, index at) among x[0 .. n) with indices base + k:
 * s > t, or s == t with a lower index. The entry itself (s == t, same index) is not. */
VTR_COUNT_CLONES static int count_before(const float *x, int n, int base, float t, int at)
{
    int split = at - base;
    split = split < 0 ? 0 : split > n ? n : split;
    int count = 0; /* 32-bit lanes, as wide as the floats */
#pragma omp simd reduction(+ : count)
    for (int k = 0; k < split; k++)
        count += x[k] >= t;
#pragma omp simd reduction(+ : count)
    for (int k = split; k < n; k++)
        count += x[k] > t;
    return count;
}

/* One row x[0 .. w) of candidate (row r) scores against w columns' first entries (score
 * thr[b], row at[b]): cnt[b] += 1 where the candidate comes before the entry. */
VTR_COUNT_CLONES static void count_row_against_columns(const float *x, int w, int r,
                                                       const float *thr, const int *at,
                                                       int32_t *cnt)
{
#pragma omp simd
    for (int b = 0; b < w; b++)
        cnt[b] += (x[b] > thr[b]) | ((x[b] == thr[b]) & (r < at[b]));
}

/* Phase 2 for one row of tiles (rows r0 .. r0 + nr - 1; tile ct is tiles[ct], nr x its
 * width): v2t counts along each row (rows split among threads), t2v counts down each
 * column (chunks of columns split among threads). Every counter belongs to one thread,
 * and integer sums do not depend on order. One parallel region per row of tiles: OpenMP's
 * idle threads spin for a while after a region and would slow the BLAS threads of the
 * next products, so regions are few and long. */
static void count_band(eval_task *t, const tiling *tl, float *const *tiles, int r0, int nr)
{
    int chunks_per_tile = (tl->tile_cols + T2V_CHUNK - 1) / T2V_CHUNK;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int a = 0; a < nr; a++) {
            int r = r0 + a;
            for (int ct = 0; ct < tl->n_ct; ct++) {
                int c0 = ct * tl->tile_cols;
                int nc = t->n_cols - c0 < tl->tile_cols ? t->n_cols - c0 : tl->tile_cols;
                const float *row = tiles[ct] + (size_t)a * (size_t)nc;
                for (int64_t p = t->row_off[r]; p < t->row_off[r + 1]; p++)
                    t->row_rel[p].pos +=
                        count_before(row, nc, c0, t->row_rel[p].score, t->row_rel[p].idx);
            }
        }
#pragma omp for schedule(static)
        for (int k = 0; k < tl->n_ct * chunks_per_tile; k++) {
            int ct = k / chunks_per_tile, c0 = ct * tl->tile_cols;
            int nc = t->n_cols - c0 < tl->tile_cols ? t->n_cols - c0 : tl->tile_cols;
            int ca = c0 + k % chunks_per_tile * T2V_CHUNK;
            if (ca >= c0 + nc)
                continue;
            int cb = ca + T2V_CHUNK < c0 + nc ? ca + T2V_CHUNK : c0 + nc;
            const float *S = tiles[ct];
            /* the first (best) entry of each column, vectorized across columns */
            float thr[T2V_CHUNK];
            int at[T2V_CHUNK];
            int32_t cnt[T2V_CHUNK];
            int w = cb - ca;
            for (int b = 0; b < w; b++) {
                const rel_entry *first = &t->col_rel[t->col_off[ca + b]];
                thr[b] = first->score;
                at[b] = first->idx;
                cnt[b] = 0;
            }
            for (int a = 0; a < nr; a++)
                count_row_against_columns(S + (size_t)a * (size_t)nc + (size_t)(ca - c0), w, r0 + a,
                                          thr, at, cnt);
            for (int b = 0; b < w; b++)
                t->col_rel[t->col_off[ca + b]].pos += cnt[b];
            /* further entries (texts relevant to several items, de-duplicated mode) */
            for (int c = ca; c < cb; c++)
                for (int64_t e = t->col_off[c] + 1; e < t->col_off[c + 1]; e++) {
                    float th = t->col_rel[e].score;
                    int ar = t->col_rel[e].idx;
                    int64_t n = 0;
                    for (int a = 0; a < nr; a++) {
                        float x = S[(size_t)a * (size_t)nc + (size_t)(c - c0)];
                        n += x > th || (x == th && r0 + a < ar);
                    }
                    t->col_rel[e].pos += n;
                }
        }
    }
}

/* Phase 2: every row of tiles, from the cache or computed again into the band. */
static vtr_status count_positions(eval_task *t, tiling *tl, vtr_error *err)
{
    vtr_status st = VTR_OK;
    float **tiles = malloc((size_t)tl->n_ct * sizeof *tiles);
    if (!tiles)
        return vtr_fail(err, VTR_ERR_NOMEM, "tile list");
    for (int rt = 0; rt < tl->n_rt; rt++) {
        int r0 = rt * tl->tile_rows;
        int nr = t->n_rows - r0 < tl->tile_rows ? t->n_rows - r0 : tl->tile_rows;
        float **cached = tl->cache + (size_t)rt * (size_t)tl->n_ct;
        for (int ct = 0; ct < tl->n_ct; ct++) {
            tiles[ct] = cached[ct];
            if (!tiles[ct]) {
                tiles[ct] = tl->band + (size_t)tl->tile_rows * (size_t)ct * (size_t)tl->tile_cols;
                st = tile_compute(t, tl, rt, ct, tiles[ct], err);
                if (st != VTR_OK)
                    goto end;
            }
        }
        count_band(t, tl, tiles, r0, nr);
        for (int ct = 0; ct < tl->n_ct; ct++) { /* done with these */
            free(cached[ct]);
            cached[ct] = NULL;
        }
    }
end:
    free(tiles);
    return st;
}

/* Phase 2 on the GPU: the tiles stay there (vtr_similarity_cuda_count). */
static vtr_status count_positions_cuda(eval_task *t, const tiling *tl, vtr_error *err)
{
    vtr_status st = VTR_OK;
    size_t n = (size_t)(t->n_pairs ? t->n_pairs : 1);
    int *idx[2] = {malloc(n * sizeof(int)), malloc(n * sizeof(int))};
    float *score[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    int64_t *pos[2] = {calloc(n, sizeof(int64_t)), calloc(n, sizeof(int64_t))};
    const rel_entry *lists[2] = {t->row_rel, t->col_rel};
    if (!idx[0] || !idx[1] || !score[0] || !score[1] || !pos[0] || !pos[1])
        st = vtr_fail(err, VTR_ERR_NOMEM, "relevance lists of %d items", t->n_rows);
    for (int k = 0; k < 2 && st == VTR_OK; k++)
        for (int64_t e = 0; e < t->n_pairs; e++) {
            idx[k][e] = lists[k][e].idx;
            score[k][e] = lists[k][e].score;
        }
    vtr_rank_lists rows = {t->row_off, idx[0], score[0], pos[0], t->n_rows};
    vtr_rank_lists cols = {t->col_off, idx[1], score[1], pos[1], t->n_cols};
    if (st == VTR_OK &&
        (st = vtr_similarity_cuda_count(tl->gpu, t->item0, t->col_cap, tl->tile_rows, tl->tile_cols,
                                        &rows, &cols, err)) == VTR_OK)
        for (int64_t e = 0; e < t->n_pairs; e++) {
            t->row_rel[e].pos += pos[0][e];
            t->col_rel[e].pos += pos[1][e];
        }
    for (int k = 0; k < 2; k++) {
        free(idx[k]);
        free(score[k]);
        free(pos[k]);
    }
    return st;
}

/* ---- metrics ---- */

typedef struct query_result {
    int64_t rank;
    double ap, ndcg;
} query_result;

/* One query from its relevant entries in ranking order (positions increasing). */
static query_result query_metrics(const rel_entry *rel, int64_t m, int cutoff)
{
    query_result q = {rel[0].pos, 0.0, 0.0};
    double dcg = 0.0, idcg = 0.0;
    for (int64_t k = 0; k < m; k++) {
        q.ap += (double)(k + 1) / (double)(rel[k].pos + 1);
        if (cutoff == 0 || rel[k].pos < cutoff)
            dcg += 1.0 / log2((double)rel[k].pos + 2.0);
        if (cutoff == 0 || k < cutoff)
            idcg += 1.0 / log2((double)k + 2.0);
    }
    q.ap /= (double)m;
    q.ndcg = dcg / idcg;
    return q;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Direction metrics over n queries; sorts `ranks` (a scratch copy). */
static void summarize(vtr_retrieval_direction *d, int64_t *ranks, const double *ap,
                      const double *ndcg, int64_t n, int no_floor)
{
    int64_t hit1 = 0, hit5 = 0, hit10 = 0;
    double rank_sum = 0.0, ap_sum = 0.0, ndcg_sum = 0.0;
    for (int64_t q = 0; q < n; q++) {
        hit1 += ranks[q] < 1;
        hit5 += ranks[q] < 5;
        hit10 += ranks[q] < 10;
        rank_sum += (double)ranks[q];
        ap_sum += ap[q];
        ndcg_sum += ndcg[q];
    }
    qsort(ranks, (size_t)n, sizeof *ranks, cmp_i64);
    double median =
        n % 2 ? (double)ranks[n / 2] : ((double)ranks[n / 2 - 1] + (double)ranks[n / 2]) / 2.0;
    d->r1 = 100.0 * (double)hit1 / (double)n;
    d->r5 = 100.0 * (double)hit5 / (double)n;
    d->r10 = 100.0 * (double)hit10 / (double)n;
    d->median_rank = (no_floor ? median : floor(median)) + 1.0;
    d->mean_rank = rank_sum / (double)n + 1.0;
    d->map = 100.0 * ap_sum / (double)n;
    d->ndcg = 100.0 * ndcg_sum / (double)n;
    d->n_queries = n;
}

static void direction_add(vtr_retrieval_direction *sum, const vtr_retrieval_direction *d)
{
    sum->r1 += d->r1;
    sum->r5 += d->r5;
    sum->r10 += d->r10;
    sum->median_rank += d->median_rank;
    sum->mean_rank += d->mean_rank;
    sum->map += d->map;
    sum->ndcg += d->ndcg;
    sum->n_queries += d->n_queries;
}

static void direction_scale(vtr_retrieval_direction *d, double s)
{
    d->r1 *= s;
    d->r5 *= s;
    d->r10 *= s;
    d->median_rank *= s;
    d->mean_rank *= s;
    d->map *= s;
    d->ndcg *= s;
}

/* Evaluates one task: both phases, then the per-query and per-direction metrics;
 * per-query values are written for the task's items and for the captions whose text maps
 * (text_col) to one of its columns. */
static vtr_status evaluate_task(eval_task *t, tiling *tl, const vtr_retrieval_options *o,
                                int n_caps, const int *cap_item, const int *cap_text,
                                const int *text_col, vtr_retrieval_direction *v2t,
                                vtr_retrieval_direction *t2v, vtr_retrieval_per_query *pq,
                                vtr_error *err)
{
    vtr_status st = VTR_OK;
    int n_max = t->n_rows > t->n_cols ? t->n_rows : t->n_cols;
    int64_t *ranks = malloc((size_t)n_max * sizeof *ranks);
    double *ap = malloc((size_t)n_max * sizeof *ap);
    double *ndcg = malloc((size_t)n_max * sizeof *ndcg);
    query_result *col_q = malloc((size_t)t->n_cols * sizeof *col_q);
    if (!ranks || !ap || !ndcg || !col_q) {
        st =
            vtr_fail(err, VTR_ERR_NOMEM, "metrics of %d items x %d captions", t->n_rows, t->n_cols);
        goto end;
    }
    tl->n_rt = (t->n_rows + tl->tile_rows - 1) / tl->tile_rows;
    tl->n_ct = (t->n_cols + tl->tile_cols - 1) / tl->tile_cols;
    tl->cached_bytes = 0;
    tl->cache = calloc((size_t)tl->n_rt * (size_t)tl->n_ct, sizeof *tl->cache);
    tl->band = malloc((size_t)tl->tile_rows * (size_t)t->n_cols * sizeof *tl->band);
    if (!tl->cache || !tl->band) {
        free(tl->cache);
        free(tl->band);
        tl->cache = NULL;
        tl->band = NULL;
        st = vtr_fail(err, VTR_ERR_NOMEM, "similarity tiles: %d x %d floats", tl->tile_rows,
                      t->n_cols);
        goto end;
    }
    st = read_relevant_scores(t, tl, err);
    if (st == VTR_OK)
        st = tl->gpu ? count_positions_cuda(t, tl, err) : count_positions(t, tl, err);
    for (size_t k = 0; k < (size_t)tl->n_rt * (size_t)tl->n_ct; k++)
        free(tl->cache[k]);
    free(tl->cache);
    free(tl->band);
    tl->cache = NULL;
    tl->band = NULL;
    if (st != VTR_OK)
        goto end;

    for (int r = 0; r < t->n_rows; r++) {
        query_result q = query_metrics(t->row_rel + t->row_off[r],
                                       t->row_off[r + 1] - t->row_off[r], o->ndcg_cutoff);
        ranks[r] = q.rank;
        ap[r] = q.ap;
        ndcg[r] = q.ndcg;
        int item = t->item0 + r;
        if (pq && pq->v2t_rank)
            pq->v2t_rank[item] = q.rank;
        if (pq && pq->v2t_ap)
            pq->v2t_ap[item] = q.ap;
        if (pq && pq->v2t_ndcg)
            pq->v2t_ndcg[item] = q.ndcg;
    }
    summarize(v2t, ranks, ap, ndcg, t->n_rows, o->median_no_floor);

    for (int c = 0; c < t->n_cols; c++) {
        col_q[c] = query_metrics(t->col_rel + t->col_off[c], t->col_off[c + 1] - t->col_off[c],
                                 o->ndcg_cutoff);
        ranks[c] = col_q[c].rank;
        ap[c] = col_q[c].ap;
        ndcg[c] = col_q[c].ndcg;
    }
    summarize(t2v, ranks, ap, ndcg, t->n_cols, o->median_no_floor);

    if (pq && (pq->t2v_rank || pq->t2v_ap || pq->t2v_ndcg))
        for (int j = 0; j < n_caps; j++) {
            int i = cap_item[j] - t->item0;
            if (i < 0 || i >= t->n_rows)
                continue;
            const query_result *q = &col_q[text_col[cap_text ? cap_text[j] : j]];
            if (pq->t2v_rank)
                pq->t2v_rank[j] = q->rank;
            if (pq->t2v_ap)
                pq->t2v_ap[j] = q->ap;
            if (pq->t2v_ndcg)
                pq->t2v_ndcg[j] = q->ndcg;
        }
end:
    free(ranks);
    free(ap);
    free(ndcg);
    free(col_q);
    return st;
}

static vtr_status check_inputs(int n_items, int n_caps, const int *cap_item,
                               const vtr_retrieval_options *o, vtr_error *err)
{
    if (n_items < 1 || n_caps < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "%d items and %d captions: need at least one each",
                        n_items, n_caps);
    if (!cap_item)
        return vtr_fail(err, VTR_ERR_INVALID, "no caption -> item index");
    if (o->fold_items < 0 || o->ndcg_cutoff < 0 || o->tile_items < 0 || o->tile_caps < 0)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "negative option (fold_items %d, ndcg_cutoff %d, tiles %d x %d)",
                        o->fold_items, o->ndcg_cutoff, o->tile_items, o->tile_caps);
    if (o->fold_items > 0 && n_items % o->fold_items != 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%d items do not split into folds of %d", n_items,
                        o->fold_items);
    if (o->cap_text && o->n_texts < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "de-duplicated mode needs n_texts >= 1, not %d",
                        o->n_texts);
    for (int j = 0; j < n_caps; j++) {
        if (cap_item[j] < 0 || cap_item[j] >= n_items)
            return vtr_fail(err, VTR_ERR_INVALID, "caption %d: item %d out of range [0, %d)", j,
                            cap_item[j], n_items);
        if (o->cap_text && (o->cap_text[j] < 0 || o->cap_text[j] >= o->n_texts))
            return vtr_fail(err, VTR_ERR_INVALID, "caption %d: text id %d out of range [0, %d)", j,
                            o->cap_text[j], o->n_texts);
    }
    unsigned char *has_caption = calloc((size_t)n_items, 1);
    if (!has_caption)
        return vtr_fail(err, VTR_ERR_NOMEM, "caption counts of %d items", n_items);
    for (int j = 0; j < n_caps; j++)
        has_caption[cap_item[j]] = 1;
    int missing = -1;
    for (int i = 0; i < n_items && missing < 0; i++)
        if (!has_caption[i])
            missing = i;
    free(has_caption);
    if (missing >= 0)
        return vtr_fail(err, VTR_ERR_INVALID, "item %d has no captions", missing);
    return VTR_OK;
}

/* vtr_retrieval_evaluate, counting on the GPU when gpu is not NULL (fn and ctx its). */
static vtr_status evaluate(vtr_similarity_block_fn fn, void *ctx, vtr_similarity_cuda *gpu,
                           int n_items, int n_caps, const int *cap_item,
                           const vtr_retrieval_options *opt, vtr_retrieval_metrics *out,
                           vtr_retrieval_per_query *per_query, vtr_error *err)
{
    static const vtr_retrieval_options defaults;
    const vtr_retrieval_options *o = opt ? opt : &defaults;
    if (!fn || !out)
        return vtr_fail(err, VTR_ERR_INVALID, "no similarity function or no output");
    vtr_status st = check_inputs(n_items, n_caps, cap_item, o, err);
    if (st != VTR_OK)
        return st;

    const int *cap_text = o->cap_text;
    int n_texts = cap_text ? o->n_texts : n_caps;
    int fold_items = o->fold_items ? o->fold_items : n_items;
    int n_folds = n_items / fold_items;
    tiling tl = {fn,
                 ctx,
                 gpu,
                 o->tile_items ? o->tile_items : DEFAULT_TILE_ITEMS,
                 o->tile_caps ? o->tile_caps : DEFAULT_TILE_CAPS,
                 0,
                 0,
                 gpu              ? 1
                 : o->cache_bytes ? o->cache_bytes
                                  : DEFAULT_CACHE_BYTES,
                 0,
                 NULL,
                 NULL};
    eval_task task = {0};
    vtr_retrieval_metrics m = {0};
    int *text_col = malloc((size_t)n_texts * sizeof *text_col);
    if (tl.tile_rows > fold_items)
        tl.tile_rows = fold_items;
    if (tl.tile_cols > n_caps)
        tl.tile_cols = n_caps;
    if (!text_col) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "evaluation buffers for %d captions", n_caps);
        goto end;
    }
    for (int x = 0; x < n_texts; x++)
        text_col[x] = -1;

    for (int f = 0; f < n_folds; f++) {
        vtr_retrieval_direction v2t, t2v;
        st = task_build(&task, f * fold_items, fold_items, n_caps, cap_item, cap_text, text_col,
                        n_texts, err);
        if (st == VTR_OK)
            st = evaluate_task(&task, &tl, o, n_caps, cap_item, cap_text, text_col, &v2t, &t2v,
                               per_query, err);
        for (int c = 0; c < task.n_cols; c++) /* reset the text -> column map */
            text_col[cap_text ? cap_text[task.col_cap[c]] : task.col_cap[c]] = -1;
        task_free(&task);
        if (st != VTR_OK) {
            if (n_folds > 1)
                vtr_error_context(err, "fold %d", f);
            goto end;
        }
        direction_add(&m.v2t, &v2t);
        direction_add(&m.t2v, &t2v);
    }
    direction_scale(&m.v2t, 1.0 / n_folds);
    direction_scale(&m.t2v, 1.0 / n_folds);
    m.rsum = m.v2t.r1 + m.v2t.r5 + m.v2t.r10 + m.t2v.r1 + m.t2v.r5 + m.t2v.r10;
    m.n_folds = n_folds;
    *out = m;
end:
    free(text_col);
    return st;
}

vtr_status vtr_retrieval_evaluate(vtr_similarity_block_fn fn, void *ctx, int n_items, int n_caps,
                                  const int *cap_item, const vtr_retrieval_options *opt,
                                  vtr_retrieval_metrics *out, vtr_retrieval_per_query *per_query,
                                  vtr_error *err)
{
    return evaluate(fn, ctx, NULL, n_items, n_caps, cap_item, opt, out, per_query, err);
}

vtr_status vtr_retrieval_evaluate_embeddings(const vtr_embedding_model *models, int n_models,
                                             int n_items, int n_caps, const int *cap_item,
                                             const vtr_retrieval_options *opt,
                                             vtr_retrieval_metrics *out,
                                             vtr_retrieval_per_query *per_query, vtr_error *err)
{
    if (!models || n_models < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "no models (%d)", n_models);
    for (int m = 0; m < n_models; m++)
        if (models[m].dim < 1 || !models[m].items || !models[m].captions ||
            (models[m].set_size > 1 && !(models[m].set_alpha > 0.0f)))
            return vtr_fail(err, VTR_ERR_INVALID, "model %d: dim %d, set size %d, alpha %g, "
                            "embeddings %s", m, models[m].dim, models[m].set_size,
                            (double)models[m].set_alpha,
                            models[m].items && models[m].captions ? "given" : "missing");
    vtr_similarity_ensemble ensemble = {models, n_models};
    if (!opt || opt->device == VTR_DEVICE_CPU)
        return vtr_retrieval_evaluate(vtr_similarity_ensemble_block, &ensemble, n_items, n_caps,
                                      cap_item, opt, out, per_query, err);
    vtr_similarity_cuda *gpu = NULL;
    vtr_status st = vtr_similarity_cuda_new(&ensemble, n_items, n_caps, &gpu, err);
    if (st == VTR_OK)
        st = evaluate(vtr_similarity_cuda_block, gpu, gpu, n_items, n_caps, cap_item, opt, out,
                      per_query, err);
    vtr_similarity_cuda_free(gpu);
    return st;
}

json_t *vtr_retrieval_direction_json(const vtr_retrieval_direction *d)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "r1", d->r1, "r5", d->r5, "r10",
                     d->r10, "medr", d->median_rank, "meanr", d->mean_rank, "map", d->map,
                     "ndcg", d->ndcg);
}

json_t *vtr_retrieval_metrics_json(const vtr_retrieval_metrics *m)
{
    return json_pack("{s:o, s:o, s:f}", "v2t", vtr_retrieval_direction_json(&m->v2t), "t2v",
                     vtr_retrieval_direction_json(&m->t2v), "rsum", m->rsum);
}
