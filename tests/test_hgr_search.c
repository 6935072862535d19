/* An HGR model through the embedder and the index (index/embedder.h, index/text_search.h):
 * items give 1 + 2n vectors and texts 1 + NV + NN with their phrase counts, the bytes of
 * the model's own encoders; the embedder's scores are vtr_hgr_score_block's; an index of
 * those vectors (unit rows and their norms) searched by text gives each item's fused score
 * to float16 precision, ranks by it, and reports the levels; a query's role graph adds
 * the verb and noun levels; wrong vector counts are refused naming the item; a searcher
 * on the GPU runs the model there (one line without a GPU). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "index/embedder.h"
#include "index/embedding_index.h"
#include "index/text_search.h"
#include "lib/checkpoint.h"
#include "lib/device.h"
#include "lib/rng.h"
#include "match/run_dir.h"
#include "match/run_model.h"
#include "match/train_data.h"
#include "match/trained_model.h"

enum { F = 24, E = 16, CAP = 6, NV = 4, NN = 6, P = 1 + NV + NN };

static const char *const words[] = {"<bos>", "<eos>", "<unk>", "a", "man", "rides",
                                    "horse", "woman", "cooks", "food", "dog", "runs"};

/* "a man rides a horse": one verb (rides) with two arguments */
static const char *const graph_rides =
    "[{\"ROOT\": {\"role\": \"ROOT\", \"spans\": [0, 1, 2, 3, 4], \"words\": [\"a\", \"man\", "
    "\"rides\", \"a\", \"horse\"]}, \"1\": {\"role\": \"V\", \"spans\": [2], \"words\": "
    "[\"rides\"]}, \"2\": {\"role\": \"ARG0\", \"spans\": [0, 1], \"words\": [\"a\", \"man\"]}, "
    "\"3\": {\"role\": \"ARG1\", \"spans\": [3, 4], \"words\": [\"a\", \"horse\"]}}, "
    "[[\"1\", \"2\", \"ARG0\"], [\"1\", \"3\", \"ARG1\"]]]";

/* An HGR∞ (gpo) or HGR (attention) checkpoint with random parameters, its config and the
 * vocabulary beside it. */
static const char *hgr_checkpoint(const char *pool)
{
    static char ckpt[2][600];
    char (*out)[600] = &ckpt[strcmp(pool, "gpo") == 0];
    if ((*out)[0])
        return *out;
    vtr_error err;
    char dir[400], vocab_path[512], text[1024];
    snprintf(dir, sizeof dir, "%s/hgr-%s", test_tmpdir(), pool);
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(text, sizeof text,
             "data: {catalog: c.db, dataset: x, features: f, vocab: '', tokenizer: whitespace,\n"
             "       max_frames: %d}\n"
             "model: {kind: hgr, global_pool: %s, feature_dim: %d, embed_size: %d, word_dim: 8,\n"
             "        gpo_pe: 8, gpo_hidden: 8}\n"
             "loss: {reduction: mean, warmup_epochs: 0}\n"
             "train: {size_augment: false}\n",
             CAP, pool, F, E);
    vtr_config *cfg = NULL;
    vtr_train_options o;
    vtr_vocab *vocab = NULL;
    vtr_run_model m;
    char *cfg_text = NULL;
    CHECK_OK(vtr_train_config_new(&cfg, &err));
    CHECK_OK(vtr_config_load_string(cfg, "hgr", text, strlen(text), &err));
    CHECK_OK(vtr_train_options_from_config(cfg, &o, &err));
    CHECK_OK(vtr_vocab_hgr_from_words(words, sizeof words / sizeof words[0], "test", &vocab,
                                      &err));
    CHECK_OK(vtr_run_model_init(&m, &o, vocab, VTR_DEVICE_CPU, 2, CAP, 30, &err));
    vtr_run_model_init_params(&m, 7);
    CHECK_OK(vtr_config_dump_string(cfg, &cfg_text, &err));
    snprintf(vocab_path, sizeof vocab_path, "%s/%s", dir, VTR_RUN_VOCAB);
    CHECK_OK(vtr_run_vocab_save(vocab, vocab_path, &err));
    snprintf(*out, sizeof *out, "%s/model.safetensors", dir);
    vtr_checkpoint_state state = {.config = cfg_text};
    CHECK_OK(vtr_checkpoint_save(*out, vtr_run_model_params(&m), NULL, &state, &err));
    free(cfg_text);
    vtr_run_model_free(&m);
    vtr_vocab_free(vocab);
    vtr_config_free(cfg);
    return *out;
}

/* n_items sets of random rows, item i of lengths[i] rows. */
static float *random_sets(int n_items, const int64_t *lengths, uint64_t seed)
{
    int64_t total = 0;
    for (int i = 0; i < n_items; i++)
        total += lengths[i];
    float *rows = malloc((size_t)(total * F) * sizeof *rows);
    CHECK(rows != NULL);
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    for (int64_t j = 0; j < total * F; j++)
        rows[j] = vtr_rng_normal(&rng);
    return rows;
}

static const char *const texts[] = {"a man rides a horse", "a woman cooks food",
                                    "a dog runs", "a man rides a horse"};

TEST(hgr_embedder_gives_the_model_encoders_vectors_and_scores)
{
    vtr_error err;
    const char *ckpt = hgr_checkpoint("gpo");
    vtr_embedder *e = NULL;
    CHECK_OK(vtr_embedder_open(ckpt, NULL, 1, &e, &err));
    CHECK_EQ_INT(vtr_embedder_dim(e), E);
    CHECK_EQ_INT(vtr_embedder_text_vectors(e), P);
    CHECK_EQ_INT(vtr_embedder_item_vectors(e, 3), 7);
    CHECK_EQ_INT(vtr_embedder_item_vectors(e, 40), 1 + 2 * CAP);
    CHECK_FAILS(vtr_embedder_check_text(e, "  ", NULL, NULL, &err), VTR_ERR_INVALID, "no word");

    /* sets of 3, 1 and 9 rows (the last keeps 6): the encoder's bytes, one set a call */
    const int64_t counts[] = {3, 1, 9};
    float *rows = random_sets(3, counts, 1);
    float got[(7 + 3 + 13) * E];
    CHECK_OK(vtr_embedder_embed_sets(e, 3, counts, rows, got, &err));
    vtr_trained_model t;
    vtr_run_model m;
    CHECK_OK(vtr_trained_model_open(ckpt, NULL, NULL, 0, NULL, &t, &err));
    CHECK_OK(vtr_trained_model_build_run(&t, VTR_DEVICE_CPU, 4, CAP, 30, &m, &err));
    const float *src = rows, *at = got;
    for (int i = 0; i < 3; i++) {
        int idx[CAP], len = vtr_frame_subsample(idx, (int)counts[i], CAP);
        float frames[CAP * F], glob[E], verb[CAP * E], noun[CAP * E];
        for (int k = 0; k < len; k++)
            memcpy(frames + k * F, src + idx[k] * F, sizeof(float) * F);
        CHECK_OK(vtr_hgr_encode_videos(&m.hgr, glob, verb, noun, frames, &len, 1, len, &err));
        CHECK_MSG(memcmp(at, glob, sizeof glob) == 0, "set %d: global", i);
        CHECK_MSG(memcmp(at + E, verb, sizeof(float) * len * E) == 0, "set %d: verb level", i);
        CHECK_MSG(memcmp(at + (1 + len) * E, noun, sizeof(float) * len * E) == 0,
                  "set %d: noun level", i);
        at += (1 + 2 * len) * E;
        src += counts[i] * F;
    }

    /* texts: the first with its graph (1 verb, 2 nouns), the others with none */
    const char *graphs[] = {graph_rides, NULL, NULL, NULL};
    float q[4 * P * E];
    int ph[8];
    CHECK_OK(vtr_embedder_embed_texts(e, 4, texts, graphs, q, ph, &err));
    CHECK(ph[0] == 1 && ph[1] == 2);
    for (int i = 1; i < 4; i++)
        CHECK_MSG(ph[2 * i] == 0 && ph[2 * i + 1] == 0, "text %d without a graph", i);
    /* the same text without its graph: the same root, other phrase nodes */
    CHECK(memcmp(q, q + 3 * P * E, sizeof(float) * E) != 0 ||
          memcmp(q + E, q + 3 * P * E + E, sizeof(float) * NV * E) != 0);

    /* scores: the model's scorer on the same vectors */
    const int64_t vectors[] = {7, 3, 13};
    float scores[4 * 3], levels[3 * 4 * 3];
    CHECK_OK(vtr_embedder_score(e, 4, q, ph, 3, vectors, got, scores, levels, &err));
    for (int i = 0; i < 3; i++) {
        const float *item = got;
        for (int j = 0; j < i; j++)
            item += vectors[j] * E;
        int len = (int)(vectors[i] - 1) / 2;
        for (int c = 0; c < 4; c++) {
            const float *tq = q + c * P * E;
            float fused, lv[3];
            CHECK_OK(vtr_hgr_score_block(&m.hgr, &fused, lv, item, item + E, item + (1 + len) * E,
                                         &len, 1, len, tq, tq + E, tq + (1 + NV) * E, &ph[2 * c],
                                         &ph[2 * c + 1], 1, &err));
            CHECK_MSG(fabsf(scores[c * 3 + i] - fused) < 1e-6f, "text %d, item %d: %g vs %g", c,
                      i, scores[c * 3 + i], fused);
            for (int l = 0; l < 3; l++)
                CHECK(fabsf(levels[l * 12 + c * 3 + i] - lv[l]) < 1e-6f);
            /* a text without a graph scores by the global level alone */
            if (ph[2 * c] == 0)
                CHECK(lv[1] == 0 && lv[2] == 0 &&
                      fabsf(fused - lv[0] / 3) < 1e-6f);
        }
    }
    /* wrong vector counts and phrase counts */
    const int64_t bad[] = {7, 4, 13};
    CHECK_FAILS(vtr_embedder_score(e, 4, q, ph, 3, bad, got, scores, NULL, &err), VTR_ERR_INVALID,
                "item 1 has 4 vectors");
    CHECK_FAILS(vtr_embedder_score(e, 4, q, NULL, 3, vectors, got, scores, NULL, &err),
                VTR_ERR_INVALID, "phrase counts");
    vtr_run_model_free(&m);
    vtr_trained_model_close(&t);
    free(rows);
    vtr_embedder_close(e);
}

TEST(hgr_index_search_ranks_items_by_the_fused_score)
{
    vtr_error err;
    const char *ckpt = hgr_checkpoint("attention");
    vtr_embedder *e = NULL;
    CHECK_OK(vtr_embedder_open(ckpt, NULL, 1, &e, &err));
    /* 70 items (three blocks of the scan) of 1 .. 9 rows */
    enum { N = 70 };
    int64_t counts[N], vectors[N], total = 0;
    for (int i = 0; i < N; i++) {
        counts[i] = 1 + i % 9;
        vectors[i] = vtr_embedder_item_vectors(e, counts[i]);
        total += vectors[i];
    }
    float *rows = random_sets(N, counts, 2);
    float *vec = malloc((size_t)(total * E) * sizeof *vec);
    CHECK(vec != NULL);
    CHECK_OK(vtr_embedder_embed_sets(e, N, counts, rows, vec, &err));
    char dir[400];
    snprintf(dir, sizeof dir, "%s/hgr-index", test_tmpdir());
    char *model = vtr_index_model_text("test", vtr_embedder_model_id(e), ckpt);
    CHECK(model != NULL);
    vtr_embedding_index_options io = {.dim = E, .model = model};
    vtr_embedding_index_writer *w;
    CHECK_OK(vtr_embedding_index_writer_open(dir, &io, &w, &err));
    const float *at = vec;
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "item%02d", i);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {vectors[i], E}, .data = (void *)at};
        CHECK_OK(vtr_embedding_index_writer_add(w, key, &t, &err));
        at += vectors[i] * E;
    }
    CHECK_OK(vtr_embedding_index_writer_commit(w, &err));
    vtr_embedding_index_writer_close(w);

    /* the float32 scores of every item, the reference ranking */
    const char *graphs[] = {graph_rides, NULL, NULL, NULL};
    float q[4 * P * E], want[4 * N];
    int ph[8];
    CHECK_OK(vtr_embedder_embed_texts(e, 4, texts, graphs, q, ph, &err));
    CHECK_OK(vtr_embedder_score(e, 4, q, ph, N, vectors, vec, want, NULL, &err));

    vtr_embedding_index *ix;
    CHECK_OK(vtr_embedding_index_open(dir, &ix, &err));
    enum { K = 10 };
    vtr_search_result res[4 * K];
    int64_t found[4];
    int got_ph[8];
    CHECK_OK(vtr_text_search(e, ix, NULL, NULL, NULL, -1, 4, texts, graphs, K, 0, res, found, got_ph, &err));
    CHECK(memcmp(got_ph, ph, sizeof ph) == 0);
    for (int c = 0; c < 4; c++) {
        CHECK_EQ_INT(found[c], K);
        /* the k-th best float32 score: every hit scores at least about that */
        float sorted[N];
        memcpy(sorted, want + c * N, sizeof sorted);
        for (int a = 0; a < N; a++)
            for (int b = a + 1; b < N; b++)
                if (sorted[b] > sorted[a]) {
                    float tmp = sorted[a];
                    sorted[a] = sorted[b];
                    sorted[b] = tmp;
                }
        for (int j = 0; j < K; j++) {
            const vtr_search_result *r = &res[c * K + j];
            int i = atoi(r->key + 4);
            CHECK_MSG(fabsf(r->score - want[c * N + i]) < 3e-3f, "query %d, %s: %g vs %g", c,
                      r->key, r->score, want[c * N + i]);
            CHECK(j == 0 || r->score <= res[c * K + j - 1].score);
            CHECK(r->score >= sorted[K - 1] - 6e-3f);
            CHECK(fabsf((r->levels[0] + r->levels[1] + r->levels[2]) / 3 - r->score) < 1e-5f);
            if (ph[2 * c] == 0)
                CHECK(r->levels[1] == 0 && r->levels[2] == 0);
            int64_t first;
            CHECK_OK(vtr_embedding_index_find(ix, r->key, &first, NULL, &err));
            CHECK_EQ_INT(r->row, first);
        }
    }
    /* pre-selection by the global level: among each query's 20 best global scores; all
     * items: the full scan's results; fewer candidates than k: that many results */
    float glob[3 * 4 * N];
    CHECK_OK(vtr_embedder_score(e, 4, q, ph, N, vectors, vec, want, glob, &err));
    vtr_search_result pre[4 * K];
    CHECK_OK(vtr_text_search(e, ix, NULL, NULL, NULL, -1, 4, texts, graphs, K, 20, pre, found, NULL, &err));
    for (int c = 0; c < 4; c++) {
        float g[N];
        memcpy(g, glob + c * N, sizeof g);
        int above = 0; /* items with a global score above a hit's */
        for (int j = 0; j < K; j++) {
            const vtr_search_result *r = &pre[c * K + j];
            int i = atoi(r->key + 4);
            above = 0;
            for (int x = 0; x < N; x++)
                above += g[x] > g[i] + 3e-3f;
            CHECK_MSG(above < 20, "query %d: %s is not among the 20 best global scores", c,
                      r->key);
            CHECK(fabsf(r->score - want[c * N + i]) < 3e-3f);
        }
    }
    vtr_search_results_free(pre, 4 * K);
    CHECK_OK(vtr_text_search(e, ix, NULL, NULL, NULL, -1, 4, texts, graphs, K, N, pre, found, NULL, &err));
    for (int j = 0; j < 4 * K; j++)
        CHECK(strcmp(pre[j].key, res[j].key) == 0 && pre[j].score == res[j].score);
    vtr_search_results_free(pre, 4 * K);
    CHECK_OK(vtr_text_search(e, ix, NULL, NULL, NULL, -1, 4, texts, graphs, K, 3, pre, found, NULL, &err));
    CHECK(found[0] == 3 && pre[3].row == -1);
    vtr_search_results_free(pre, 4 * K);

    /* k above the item count: every item once */
    vtr_search_result all[N + 5];
    CHECK_OK(vtr_text_search(e, ix, NULL, NULL, NULL, -1, 1, texts, graphs, N + 5, 0, all, found, NULL, &err));
    CHECK_EQ_INT(found[0], N);
    CHECK(all[N].row == -1 && all[N].key == NULL);
    vtr_search_results_free(all, N + 5);

    /* --device cuda: the model on the GPU (the queries' encoders, the score blocks), the
     * CPU's hits to float32 rounding; without a GPU, one line that says to use the CPU */
    vtr_text_searcher_options so = {
        .index = dir, .model = ckpt, .threads = 1, .device = VTR_DEVICE_CUDA};
    vtr_text_searcher ts;
    if (!vtr_cuda_available()) {
        CHECK_FAILS(vtr_text_searcher_open(&so, &ts, &err), VTR_ERR_DEVICE, "--device cpu");
    } else {
        CHECK_OK(vtr_text_searcher_open(&so, &ts, &err));
        CHECK(ts.gpu == NULL && ts.approx == NULL);
        vtr_search_result on_gpu[4 * K];
        CHECK_OK(vtr_text_search(ts.e, ts.ix, NULL, NULL, NULL, -1, 4, texts, graphs, K, 0, on_gpu,
                                 found, got_ph, &err));
        CHECK(memcmp(got_ph, ph, sizeof ph) == 0);
        for (int j = 0; j < 4 * K; j++)
            CHECK_MSG(fabsf(on_gpu[j].score - res[j].score) < 1e-4f,
                      "hit %d: %g on the GPU, "
                      "%g on the CPU",
                      j, on_gpu[j].score, res[j].score);
        vtr_search_results_free(on_gpu, 4 * K);
        vtr_text_searcher_close(&ts);
    }
    vtr_search_results_free(res, 4 * K);
    vtr_embedding_index_close(ix);
    free(model);
    free(vec);
    free(rows);
    vtr_embedder_close(e);
}
