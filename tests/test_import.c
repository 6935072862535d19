/* Importers: each layout's tiny fixture (tests/interop/import_fixtures.py, written with
 * numpy, h5py and json exactly as the releases are) lands in the catalog and the feature
 * store with the right items, captions, splits and rows; malformed inputs fail with one
 * line naming the file and the item and leave nothing behind; the numpy string-array
 * reader of the HGR names files. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "import/import.h"
#include "lib/catalog.h"
#include "lib/feature_store.h"
#include "text/role_graph.h"
#include "text/vocab.h"

#define PYTHON "/usr/bin/python3"
#define FIXTURES "tests/interop/import_fixtures.py"

static void need_fixtures(void)
{
    if (access(FIXTURES, R_OK) != 0)
        test_skip("run from the top of the source tree to find " FIXTURES);
    if (test_run(PYTHON " -c 'import numpy, h5py' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy and h5py is not available (python3-h5py)");
}

/* Writes the fixture of layout (variant may be "") into a fresh directory. */
static const char *fixture(const char *layout, const char *variant)
{
    static char dirs[8][512];
    static int next;
    char *d = dirs[next++ % 8];
    snprintf(d, sizeof dirs[0], "%s/fx-%s-%s", test_tmpdir(), layout, variant[0] ? variant : "ok");
    CHECK_EQ_INT(
        test_run("rm -rf '%s' && " PYTHON " " FIXTURES " %s '%s' %s", d, layout, d, variant), 0);
    return d;
}

static vtr_catalog *new_catalog(const char *name)
{
    vtr_error err;
    const char *path = test_path(name);
    unlink(path);
    vtr_catalog *cat;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    return cat;
}

static vtr_import_options options(vtr_catalog *cat, const char *store)
{
    return (vtr_import_options){.catalog = cat, .dataset = "ds", .store = store};
}

static int64_t dataset_id(vtr_catalog *cat)
{
    vtr_error err;
    int64_t id;
    CHECK_OK(vtr_catalog_find_dataset(cat, "ds", &id, &err));
    return id;
}

/* The split holds n items, the first and last with these keys (NULL: not checked). */
static void check_split(vtr_catalog *cat, const char *split, size_t n, const char *first,
                        const char *last)
{
    vtr_error err;
    vtr_item_ref_list l;
    CHECK_OK(vtr_catalog_split_items(cat, dataset_id(cat), split, &l, &err));
    CHECK_MSG(l.n == n, "split %s has %zu items, expected %zu", split, l.n, n);
    if (first)
        CHECK_STR(l.items[0].key, first);
    if (last)
        CHECK_STR(l.items[n - 1].key, last);
    vtr_item_ref_list_free(&l);
}

/* The item has n captions; caption `which` reads `text` (NULL: not checked). */
static void check_captions(vtr_catalog *cat, const char *key, size_t n, size_t which,
                           const char *text)
{
    vtr_error err;
    vtr_item it;
    CHECK_OK(vtr_catalog_find_item(cat, dataset_id(cat), key, &it, &err));
    vtr_caption_list l;
    CHECK_OK(vtr_catalog_item_captions(cat, it.id, &l, &err));
    CHECK_MSG(l.n == n, "item %s has %zu captions, expected %zu", key, l.n, n);
    if (text)
        CHECK_STR(l.captions[which].text, text);
    vtr_caption_list_free(&l);
    vtr_item_free(&it);
}

static vtr_item_status item_status(vtr_catalog *cat, const char *key, char *error, size_t size)
{
    vtr_error err;
    vtr_item it;
    CHECK_OK(vtr_catalog_find_item(cat, dataset_id(cat), key, &it, &err));
    vtr_item_status s = it.status;
    if (error)
        snprintf(error, size, "%s", it.error ? it.error : "");
    vtr_item_free(&it);
    return s;
}

static int64_t split_count(const vtr_import_stats *s, const char *split)
{
    return json_integer_value(json_object_get(s->splits, split));
}

/* Item key's rows in the store: n rows, and row r column c holds want. */
static void check_rows(vtr_feature_store_reader *r, const char *key, int64_t n, int64_t row,
                       int64_t col, double want)
{
    vtr_error err;
    int64_t i = vtr_feature_store_reader_find(r, key);
    CHECK_MSG(i >= 0, "store lacks item %s", key);
    vtr_tensor t;
    CHECK_OK(vtr_feature_store_reader_item(r, i, &t, &err));
    CHECK_MSG(t.shape[0] == n, "item %s has %lld rows, expected %lld", key, (long long)t.shape[0],
              (long long)n);
    float v = ((const float *)t.data)[row * t.shape[1] + col];
    CHECK_MSG(v == (float)want, "item %s row %lld col %lld: %g, expected %g", key, (long long)row,
              (long long)col, v, want);
}

/* After a failed import: no dataset in the catalog, no store and no temporary directory. */
static void check_nothing_left(vtr_catalog *cat, const char *store)
{
    vtr_error err;
    int64_t id;
    CHECK_FAILS(vtr_catalog_find_dataset(cat, "ds", &id, &err), VTR_ERR_NOT_FOUND, "ds");
    if (!store)
        return;
    CHECK(access(store, F_OK) != 0);
    const char *base = strrchr(store, '/') + 1;
    DIR *d = opendir(test_tmpdir());
    CHECK(d);
    struct dirent *de;
    while ((de = readdir(d)))
        CHECK_MSG(strncmp(de->d_name, base, strlen(base)) != 0, "%s left behind", de->d_name);
    closedir(d);
}

typedef struct skip_log {
    int count;
    char key[256];
    char msg[VTR_ERROR_MSG_MAX];
} skip_log;

static void record_skip(void *ctx, const char *key, const vtr_error *why)
{
    skip_log *l = ctx;
    l->count++;
    snprintf(l->key, sizeof l->key, "%s", key);
    snprintf(l->msg, sizeof l->msg, "%s", why->msg);
}

/* ---- npy-dir ------------------------------------------------------------------------ */

TEST(import_npy_dir)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("npy-dir", "");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a", fx);
    snprintf(b, sizeof b, "%s/b", fx);
    vtr_import_source src[] = {{a, "train"}, {b, NULL}};
    vtr_catalog *cat = new_catalog("npy.db");
    const char *store = test_path("npy-store");
    vtr_import_options o = options(cat, store);
    o.store_dtype = VTR_F16;
    vtr_import_stats s;
    CHECK_OK(vtr_import_npy_dir(src, 2, &o, &s, &err));
    CHECK_EQ_INT(s.items, 4);
    CHECK_EQ_INT(s.new_items, 4);
    CHECK_EQ_INT(s.captions, 0);
    CHECK_EQ_INT(s.feature_items, 4);
    CHECK_EQ_INT(s.feature_rows, 2 + 3 + 1 + 4);
    CHECK_EQ_INT(s.dim, 8);
    CHECK_EQ_INT(split_count(&s, "train"), 3);
    vtr_import_stats_free(&s);
    check_split(cat, "train", 3, "v0", "v2");
    CHECK_EQ_INT(item_status(cat, "v3", NULL, 0), VTR_ITEM_OK);

    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(store, &r, &err));
    CHECK_EQ_INT(vtr_feature_store_reader_items(r), 4);
    CHECK_EQ_INT(vtr_feature_store_reader_dtype(r), VTR_F16);
    CHECK_STR(vtr_feature_store_reader_key(r, 0), "v0");
    CHECK_STR(vtr_feature_store_reader_key(r, 3), "v3");
    vtr_feature_store_reader_close(r);

    vtr_feature_store fs;
    CHECK_OK(vtr_catalog_find_feature_store(cat, dataset_id(cat), "npy-store", &fs, &err));
    CHECK_EQ_INT(fs.dim, 8);
    CHECK_EQ_INT(fs.rows, 10);
    CHECK_EQ_INT(fs.items, 4);
    CHECK_EQ_INT(fs.dtype, VTR_F16);
    CHECK_STR(fs.extractor, "imported:npy-dir");
    CHECK(fs.path[0] == '/' && strstr(fs.path, "/npy-store"));
    vtr_feature_store_free(&fs);

    /* float32, and the values */
    const char *store32 = test_path("npy-store32");
    o = options(cat, store32);
    CHECK_OK(vtr_import_npy_dir(src, 2, &o, &s, &err));
    CHECK_EQ_INT(s.new_items, 0);
    vtr_import_stats_free(&s);
    CHECK_OK(vtr_feature_store_reader_open(store32, &r, &err));
    check_rows(r, "v0", 2, 1, 3, 13);
    check_rows(r, "v1", 3, 2, 0, 1020);
    check_rows(r, "v2", 1, 0, 7, 2007);
    check_rows(r, "v3", 4, 3, 5, 3035);
    vtr_feature_store_reader_close(r);
    vtr_catalog_close(cat);
}

TEST(import_npy_dir_bad_items)
{
    need_fixtures();
    vtr_error err;
    vtr_import_stats s;
    const char *variants[] = {"bad-dim", "bad-npy", "dup"};
    const char *needles[] = {"item \"v4\": array (2, 5), expected (n, 8)", "v4.npy",
                             "b/v1.npy: key \"v1\" is also in an earlier directory"};
    vtr_status status[] = {VTR_ERR_INVALID, VTR_ERR_FORMAT, VTR_ERR_INVALID};
    for (int i = 0; i < 3; i++) {
        const char *fx = fixture("npy-dir", variants[i]);
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/a", fx);
        snprintf(b, sizeof b, "%s/b", fx);
        vtr_import_source src[] = {{a, NULL}, {b, NULL}};
        vtr_catalog *cat = new_catalog("npy-bad.db");
        const char *store = test_path("npy-bad-store");
        vtr_import_options o = options(cat, store);
        CHECK_FAILS(vtr_import_npy_dir(src, 2, &o, &s, &err), status[i], needles[i]);
        check_nothing_left(cat, store);
        vtr_catalog_close(cat);
    }
    /* with a skip callback the bad item is reported, stored without features, and the
     * import goes on */
    const char *fx = fixture("npy-dir", "bad-dim");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a", fx);
    snprintf(b, sizeof b, "%s/b", fx);
    vtr_import_source src[] = {{a, NULL}, {b, NULL}};
    vtr_catalog *cat = new_catalog("npy-skip.db");
    const char *store = test_path("npy-skip-store");
    vtr_import_options o = options(cat, store);
    skip_log log = {0};
    o.on_skip = record_skip;
    o.skip_ctx = &log;
    CHECK_OK(vtr_import_npy_dir(src, 2, &o, &s, &err));
    CHECK_EQ_INT(log.count, 1);
    CHECK_STR(log.key, "v4");
    CHECK_EQ_INT(s.items, 5);
    CHECK_EQ_INT(s.skipped, 1);
    CHECK_EQ_INT(s.feature_items, 4);
    vtr_import_stats_free(&s);
    char why[VTR_ERROR_MSG_MAX];
    CHECK_EQ_INT(item_status(cat, "v4", why, sizeof why), VTR_ITEM_FAILED);
    CHECK(strstr(why, "expected (n, 8)"));
    /* no store, no directory */
    o = options(cat, NULL);
    CHECK_FAILS(vtr_import_npy_dir(src, 2, &o, &s, &err), VTR_ERR_INVALID, "feature store");
    vtr_import_source missing = {test_path("nowhere"), NULL};
    o = options(cat, test_path("npy-none"));
    CHECK_FAILS(vtr_import_npy_dir(&missing, 1, &o, &s, &err), VTR_ERR_IO, "nowhere");
    vtr_catalog_close(cat);
}

/* ---- precomp ------------------------------------------------------------------------ */

TEST(import_precomp)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("precomp", "");
    vtr_catalog *cat = new_catalog("precomp.db");
    const char *store = test_path("precomp-store");
    vtr_import_options o = options(cat, store);
    vtr_import_stats s;
    CHECK_OK(vtr_import_precomp(fx, 0, &o, &s, &err));
    CHECK_EQ_INT(s.items, 9);
    CHECK_EQ_INT(s.captions, 45);
    CHECK_EQ_INT(s.feature_items, 9);
    CHECK_EQ_INT(s.feature_rows, 27);
    CHECK_EQ_INT(split_count(&s, "train"), 4);
    CHECK_EQ_INT(split_count(&s, "val"), 2);
    CHECK_EQ_INT(split_count(&s, "test"), 2);
    CHECK_EQ_INT(split_count(&s, "testall"), 3);
    CHECK(!json_object_get(s.splits, "dev"));
    vtr_import_stats_free(&s);
    check_split(cat, "train", 4, "train_0", "train_3");
    check_split(cat, "val", 2, "501", "502");
    check_split(cat, "testall", 3, "601", "603");
    check_captions(cat, "train_2", 5, 4, "train image 2 caption 4");
    check_captions(cat, "502", 5, 0, "dev image 1 caption 0");
    check_captions(cat, "601", 5, 2, "test image 0 caption 2"); /* from test, first seen */
    check_captions(cat, "603", 5, 0, "testall image 2 caption 0");
    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(store, &r, &err));
    CHECK_EQ_INT(vtr_feature_store_reader_dim(r), 8);
    check_rows(r, "train_1", 3, 2, 6, 11026);
    check_rows(r, "502", 3, 0, 0, 21000);
    check_rows(r, "603", 3, 2, 1, 32021);
    vtr_feature_store_reader_close(r);
    /* annotations only, a second time: nothing new, captions replaced in place */
    o = options(cat, NULL);
    CHECK_OK(vtr_import_precomp(fx, 5, &o, &s, &err));
    CHECK_EQ_INT(s.new_items, 0);
    CHECK_EQ_INT(s.feature_items, 0);
    vtr_import_stats_free(&s);
    check_captions(cat, "train_2", 5, 4, "train image 2 caption 4");
    /* 5 captions per image do not divide into 3 */
    CHECK_FAILS(vtr_import_precomp(fx, 3, &o, &s, &err), VTR_ERR_FORMAT,
                "train_caps.txt: 20 lines for 4 images of train_ims.npy; expected 3 per image");
    vtr_catalog_close(cat);
}

TEST(import_precomp_bad)
{
    need_fixtures();
    vtr_error err;
    vtr_import_stats s;
    vtr_catalog *cat = new_catalog("precomp-bad.db");
    const char *store = test_path("precomp-bad-store");
    vtr_import_options o = options(cat, store);
    const char *fx = fixture("precomp", "caps-mismatch");
    CHECK_FAILS(vtr_import_precomp(fx, 0, &o, &s, &err), VTR_ERR_FORMAT,
                "test_caps.txt: 9 lines for 2 images of test_ims.npy; expected 5 per image (10)");
    check_nothing_left(cat, store);
    fx = fixture("precomp", "no-caps");
    CHECK_FAILS(vtr_import_precomp(fx, 0, &o, &s, &err), VTR_ERR_NOT_FOUND,
                "test_caps.txt: missing");
    check_nothing_left(cat, store);
    CHECK_FAILS(vtr_import_precomp(test_path("absent"), 0, &o, &s, &err), VTR_ERR_IO, "absent");
    CHECK_EQ_INT(test_run("mkdir -p '%s'", test_path("empty-precomp")), 0);
    CHECK_FAILS(vtr_import_precomp(test_path("empty-precomp"), 0, &o, &s, &err), VTR_ERR_NOT_FOUND,
                "no precomp split");
    vtr_catalog_close(cat);
}

/* ---- HGR ---------------------------------------------------------------------------- */

TEST(import_hgr_frames)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("hgr", "");
    vtr_catalog *cat = new_catalog("hgr.db");
    const char *store = test_path("hgr-sa");
    vtr_import_options o = options(cat, store);
    vtr_import_stats s;
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(s.items, 6);
    CHECK_EQ_INT(s.captions, 2 + 3 + 1 + 2 + 2 + 3);
    CHECK_EQ_INT(s.feature_items, 6);
    CHECK_EQ_INT(s.feature_rows, 5 + 3 + 2 + 4 + 1 + 6);
    CHECK_EQ_INT(split_count(&s, "train"), 3);
    CHECK_EQ_INT(split_count(&s, "val"), 1);
    CHECK_EQ_INT(split_count(&s, "test"), 2);
    vtr_import_stats_free(&s);
    check_split(cat, "train", 3, "video0", "clips/v2");
    check_split(cat, "test", 2, "video4",
                "vid\xc3\xa9"
                "5");
    check_captions(cat, "video1", 3, 2, "a video1 caption number 2");
    check_captions(cat,
                   "vid\xc3\xa9"
                   "5",
                   3, 0,
                   "a vid\xc3\xa9"
                   "5 caption number 0");
    vtr_item it;
    CHECK_FAILS(vtr_catalog_find_item(cat, dataset_id(cat), "extra", &it, &err), VTR_ERR_NOT_FOUND,
                "extra");
    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(store, &r, &err));
    check_rows(r, "video0", 5, 4, 7, 47);
    check_rows(r, "clips/v2", 2, 1, 4, 2014);
    check_rows(r,
               "vid\xc3\xa9"
               "5",
               6, 5, 7, 5057);
    vtr_feature_store_reader_close(r);
    vtr_feature_store fs;
    CHECK_OK(vtr_catalog_find_feature_store(cat, dataset_id(cat), "hgr-sa", &fs, &err));
    CHECK_STR(fs.extractor, "imported:hgr/SA/resnet152.pth");
    vtr_feature_store_free(&fs);

    /* the mean-pooled features into a second store, under a chosen name */
    o = options(cat, test_path("hgr-mp"));
    o.store_name = "resnet152-mean";
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_MEAN, "resnet152.pth", &o, &s, &err));
    CHECK_EQ_INT(s.new_items, 0);
    CHECK_EQ_INT(s.feature_rows, 6);
    vtr_import_stats_free(&s);
    CHECK_OK(vtr_feature_store_reader_open(test_path("hgr-mp"), &r, &err));
    check_rows(r, "video1", 1, 0, 2, 1012); /* mean of rows 1000+c, 1010+c, 1020+c */
    check_rows(r, "video4", 1, 0, 0, 4000);
    vtr_feature_store_reader_close(r);
    CHECK_OK(vtr_catalog_find_feature_store(cat, dataset_id(cat), "resnet152-mean", &fs, &err));
    CHECK_EQ_INT(fs.rows, 6);
    vtr_feature_store_free(&fs);

    /* annotations only */
    vtr_catalog *cat2 = new_catalog("hgr-anno.db");
    o = options(cat2, NULL);
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(s.items, 6);
    CHECK_EQ_INT(s.feature_items, 0);
    vtr_import_stats_free(&s);
    CHECK_EQ_INT(item_status(cat2, "video0", NULL, 0), VTR_ITEM_PENDING);
    vtr_catalog_close(cat2);
    vtr_catalog_close(cat);
}

/* The graph stored for caption `which` of item key; NULL when it has none (free it). */
static char *caption_graph(vtr_catalog *cat, const char *key, size_t which)
{
    vtr_error err;
    vtr_item it;
    CHECK_OK(vtr_catalog_find_item(cat, dataset_id(cat), key, &it, &err));
    vtr_caption_list l;
    CHECK_OK(vtr_catalog_item_captions(cat, it.id, &l, &err));
    CHECK(which < l.n);
    char *graph = NULL;
    vtr_status st = vtr_catalog_caption_graph(cat, l.captions[which].id, &graph, &err);
    CHECK(st == VTR_OK || st == VTR_ERR_NOT_FOUND);
    vtr_caption_list_free(&l);
    vtr_item_free(&it);
    return graph;
}

typedef struct graph_walk {
    int captions, graphs;
    char first[64];
} graph_walk;

/* Counts a split's captions and graphs; each graph parses by the reader's rules. */
static vtr_status count_graph(void *ctx, const vtr_split_caption *c, vtr_error *err)
{
    graph_walk *w = ctx;
    if (w->captions++ == 0)
        snprintf(w->first, sizeof w->first, "%s/%lld", c->key, (long long)c->ordinal);
    if (!c->graph)
        return VTR_OK;
    w->graphs++;
    vtr_role_graph g;
    vtr_status st = vtr_role_graph_parse_text(c->graph, strlen(c->graph), c->text, &g, err);
    vtr_role_graph_free(&g);
    return st;
}

/* The fixture's annotation file PATH (in fx) removed. */
static void remove_annotation(const char *fx, const char *file)
{
    CHECK_EQ_INT(test_run("rm '%s/annotation/RET/%s'", fx, file), 0);
}

TEST(import_hgr_role_graphs_and_vocabulary)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("hgr", "");
    vtr_catalog *cat = new_catalog("hgr-graphs.db");
    vtr_import_options o = options(cat, NULL);
    vtr_import_stats s;
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(s.captions, 13);
    CHECK(s.graphs_read);
    CHECK_EQ_INT(s.graphs, 11);
    CHECK_EQ_INT(s.captions_without_graph, 2);
    CHECK_EQ_INT(s.vocabulary_words, 16);
    vtr_import_stats_free(&s);

    /* a key given twice: the last value, as Python's json.load (the first is invalid) */
    char *graph = caption_graph(cat, "video0", 0);
    CHECK_STR(graph, "[{\"ROOT\":{\"role\":\"ROOT\",\"spans\":[0,1,2,3,4],\"words\":[\"a\","
                     "\"video0\",\"caption\",\"number\",\"0\"]},\"1\":{\"role\":\"V\",\"spans\":"
                     "[2],\"words\":[\"caption\"]},\"2\":{\"role\":\"ARGM-LOC\",\"spans\":[0,1],"
                     "\"words\":[\"a\",\"video0\"]},\"3\":{\"role\":\"ARG1\",\"spans\":[3,4],"
                     "\"words\":[\"number\",\"0\"]}},[[\"1\",\"2\",\"ARGM-LOC\"],[\"1\",\"3\","
                     "\"ARG1\"]]]");
    free(graph);
    CHECK((graph = caption_graph(cat, "video1", 1)) != NULL);
    free(graph);
    CHECK(caption_graph(cat, "video1", 2) == NULL);
    CHECK(caption_graph(cat, "video4", 1) == NULL);

    /* the train split in order: video0 (2 captions), video1 (3, one without), clips/v2 */
    graph_walk w = {0};
    CHECK_OK(
        vtr_catalog_split_caption_graphs(cat, dataset_id(cat), "train", count_graph, &w, &err));
    CHECK_EQ_INT(w.captions, 6);
    CHECK_EQ_INT(w.graphs, 5);
    CHECK_STR(w.first, "video0/0");

    /* the vocabulary, from the catalog alone */
    vtr_word_list words;
    CHECK_OK(
        vtr_catalog_get_vocabulary(cat, dataset_id(cat), VTR_IMPORT_HGR_VOCABULARY, &words, &err));
    vtr_vocab *v;
    CHECK_OK(vtr_vocab_hgr_from_words(words.words, words.n, "catalog", &v, &err));
    vtr_word_list_free(&words);
    CHECK_EQ_INT(vtr_vocab_size(v), 16);
    CHECK_EQ_INT(vtr_vocab_id(v, "video0"), 4);
    CHECK_EQ_INT(vtr_vocab_id(v, "vid\xc3\xa9"
                                 "5"),
                 14);
    CHECK_EQ_INT(vtr_vocab_special_ids(v).unk, 2);
    vtr_vocab_free(v);

    /* re-imported without the graph file: the stored graphs stay */
    remove_annotation(fx, "sent2rolegraph.augment.json");
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK(!s.graphs_read);
    CHECK_EQ_INT(s.graphs, 0);
    CHECK_EQ_INT(s.captions_without_graph, 0);
    vtr_import_stats_free(&s);
    CHECK((graph = caption_graph(cat, "video1", 1)) != NULL);
    free(graph);
    /* with a graph file that lacks a caption: its old graph goes */
    CHECK_EQ_INT(test_run("printf '{}' > '%s/annotation/RET/sent2rolegraph.augment.json'", fx), 0);
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(s.graphs, 0);
    CHECK_EQ_INT(s.captions_without_graph, 13);
    vtr_import_stats_free(&s);
    CHECK(caption_graph(cat, "video1", 1) == NULL);
    vtr_catalog_close(cat);

    /* a release without the vocabulary: none stored */
    cat = new_catalog("hgr-novocab.db");
    o = options(cat, NULL);
    remove_annotation(fx, "word2int.json");
    remove_annotation(fx, "int2word.npy");
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(s.vocabulary_words, 0);
    vtr_import_stats_free(&s);
    CHECK_FAILS(vtr_catalog_get_vocabulary(cat, dataset_id(cat), "hgr", &words, &err),
                VTR_ERR_NOT_FOUND, "no vocabulary");
    vtr_catalog_close(cat);
}

TEST(import_hgr_bad_graphs_and_vocabulary_fail_the_import)
{
    need_fixtures();
    vtr_error err;
    vtr_import_stats s;
    vtr_catalog *cat = new_catalog("hgr-bad-graphs.db");
    const char *store = test_path("hgr-bad-graph-store");
    vtr_import_options o = options(cat, store);
    const char *fx = fixture("hgr", "bad-graph");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "sent2rolegraph.augment.json: role graph of caption \"a video3 caption number "
                "1\": node \"3\": spans[0] is -3");
    CHECK(!strchr(err.msg, '\n'));
    check_nothing_left(cat, store);
    /* skipping bad features does not skip bad graphs */
    skip_log log = {0};
    o.on_skip = record_skip;
    o.skip_ctx = &log;
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "caption number 1");
    CHECK_EQ_INT(log.count, 0);
    check_nothing_left(cat, store);
    o.on_skip = NULL;

    fx = fixture("hgr", "bad-vocab");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "int2word.npy: id 4 is \"caption\", but \"video0\" in");
    check_nothing_left(cat, store);
    fx = fixture("hgr", "no-int2word");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_NOT_FOUND,
                "int2word.npy: missing (the vocabulary needs it beside word2int.json)");
    check_nothing_left(cat, store);
    CHECK_EQ_INT(test_run("printf '[]' > '%s/annotation/RET/sent2rolegraph.augment.json'", fx), 0);
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "sent2rolegraph.augment.json: not an object {caption: [nodes, edges]}");
    CHECK_EQ_INT(
        test_run("printf '{\"a\": [' > '%s/annotation/RET/sent2rolegraph.augment.json'", fx), 0);
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "sent2rolegraph.augment.json: line 1 column");
    check_nothing_left(cat, store);
    vtr_catalog_close(cat);
}

TEST(import_hgr_bad)
{
    need_fixtures();
    vtr_error err;
    vtr_import_stats s;
    vtr_catalog *cat = new_catalog("hgr-bad.db");
    const char *store = test_path("hgr-bad-store");
    vtr_import_options o = options(cat, store);

    const char *fx = fixture("hgr", "missing-video");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_NOT_FOUND,
                "tst_ft.hdf5: no dataset \"vid\xc3\xa9"
                "5\" for video \"vid\xc3\xa9"
                "5\"");
    check_nothing_left(cat, store);
    /* skipped with a callback: the item is imported with status failed */
    skip_log log = {0};
    o.on_skip = record_skip;
    o.skip_ctx = &log;
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err));
    CHECK_EQ_INT(log.count, 1);
    CHECK_EQ_INT(s.skipped, 1);
    CHECK_EQ_INT(s.feature_items, 5);
    CHECK_EQ_INT(s.items, 6);
    vtr_import_stats_free(&s);
    char why[VTR_ERROR_MSG_MAX];
    CHECK_EQ_INT(item_status(cat,
                             "vid\xc3\xa9"
                             "5",
                             why, sizeof why),
                 VTR_ITEM_FAILED);
    CHECK(strstr(why, "no dataset"));
    CHECK_EQ_INT(test_run("rm -rf '%s'", store), 0);
    vtr_catalog_close(cat);

    cat = new_catalog("hgr-bad2.db");
    o = options(cat, store);
    fx = fixture("hgr", "no-caption");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_NOT_FOUND,
                "ref_captions.json: no captions for video \"video4\" (named in tst_names.npy)");
    check_nothing_left(cat, store);
    fx = fixture("hgr", "object-names");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_UNSUPPORTED,
                "tst_names.npy: an object array");
    check_nothing_left(cat, store);
    fx = fixture("hgr", "two-features");
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_INVALID,
                "2 feature directories");
    check_nothing_left(cat, store);
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, "vgg", &o, &s, &err), VTR_ERR_NOT_FOUND,
                "SA/vgg/trn_ft.hdf5: missing");
    CHECK_OK(vtr_import_hgr(fx, VTR_HGR_FRAMES, "resnet152.pth", &o, &s, &err));
    vtr_import_stats_free(&s);
    /* an HDF5 file that is not one */
    fx = fixture("hgr", "");
    char h5[700];
    snprintf(h5, sizeof h5, "%s/ordered_feature/SA/resnet152.pth/val_ft.hdf5", fx);
    CHECK_EQ_INT(test_run("echo garbage > '%s'", h5), 0);
    o.replace_store = true;
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_FRAMES, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "val_ft.hdf5: not an HDF5 file");
    /* a mean-pooled file with a row too few */
    snprintf(h5, sizeof h5, "%s/ordered_feature/MP/resnet152.pth/trn_ft.npy", fx);
    CHECK_EQ_INT(test_run(PYTHON " -c 'import numpy as np; np.save(\"%s\", np.zeros((2, 8), "
                                 "np.float32))'",
                          h5),
                 0);
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_MEAN, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "trn_ft.npy: shape (2, 8); expected (3, dim), a row per name in trn_names.npy");
    /* a broken captions file */
    char caps[700];
    snprintf(caps, sizeof caps, "%s/annotation/RET/ref_captions.json", fx);
    CHECK_EQ_INT(test_run("printf '{\"video0\": [\"a\",' > '%s'", caps), 0);
    CHECK_FAILS(vtr_import_hgr(fx, VTR_HGR_MEAN, NULL, &o, &s, &err), VTR_ERR_FORMAT,
                "ref_captions.json: line 1 column");
    vtr_catalog_close(cat);
}

/* ---- MSR-VTT, VATEX, Karpathy --------------------------------------------------------- */

TEST(import_msrvtt)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("msrvtt", "");
    char tv[600], te[600];
    snprintf(tv, sizeof tv, "%s/train_val_videodatainfo.json", fx);
    snprintf(te, sizeof te, "%s/test_videodatainfo.json", fx);
    const char *files[] = {tv, te};
    vtr_catalog *cat = new_catalog("msrvtt.db");
    vtr_import_options o = options(cat, NULL);
    vtr_import_stats s;
    CHECK_OK(vtr_import_msrvtt(files, 2, &o, &s, &err));
    CHECK_EQ_INT(s.items, 4);
    CHECK_EQ_INT(s.captions, 9);
    CHECK_EQ_INT(split_count(&s, "train"), 2);
    CHECK_EQ_INT(split_count(&s, "val"), 1);
    CHECK_EQ_INT(split_count(&s, "test"), 1);
    CHECK(!json_object_get(s.splits, "validate"));
    vtr_import_stats_free(&s);
    check_split(cat, "train", 2, "video0", "video1");
    check_split(cat, "val", 1, "video2", NULL);
    check_split(cat, "test", 1, "video3", NULL);
    check_captions(cat, "video0", 3, 0, "video0 caption 0");
    check_captions(cat, "video0", 3, 2, "video0 caption 2 \xe2\x80\x94 caf\xc3\xa9");
    check_captions(cat, "video1", 2, 1, "video1 caption 1");
    check_captions(cat, "video3", 2, 1, "video3 caption 1");
    CHECK_EQ_INT(item_status(cat, "video2", NULL, 0), VTR_ITEM_PENDING);
    /* again: idempotent */
    CHECK_OK(vtr_import_msrvtt(files, 2, &o, &s, &err));
    CHECK_EQ_INT(s.new_items, 0);
    vtr_import_stats_free(&s);
    check_captions(cat, "video0", 3, 0, "video0 caption 0");
    check_split(cat, "train", 2, "video0", "video1");
    /* a store makes no sense here: it is not built */
    o = options(cat, test_path("msrvtt-store"));
    CHECK_OK(vtr_import_msrvtt(files, 1, &o, &s, &err));
    vtr_import_stats_free(&s);
    CHECK(access(test_path("msrvtt-store"), F_OK) != 0);
    vtr_catalog_close(cat);
}

TEST(import_msrvtt_bad)
{
    need_fixtures();
    vtr_error err;
    vtr_import_stats s;
    vtr_catalog *cat = new_catalog("msrvtt-bad.db");
    vtr_import_options o = options(cat, NULL);
    const char *fx = fixture("msrvtt", "bad-json");
    char tv[600], te[600];
    snprintf(tv, sizeof tv, "%s/train_val_videodatainfo.json", fx);
    snprintf(te, sizeof te, "%s/test_videodatainfo.json", fx);
    const char *files[] = {tv, te};
    CHECK_FAILS(vtr_import_msrvtt(files, 2, &o, &s, &err), VTR_ERR_FORMAT,
                "test_videodatainfo.json: line 1 column");
    check_nothing_left(cat, NULL);
    fx = fixture("msrvtt", "unknown-video");
    snprintf(tv, sizeof tv, "%s/train_val_videodatainfo.json", fx);
    CHECK_FAILS(vtr_import_msrvtt(files, 1, &o, &s, &err), VTR_ERR_FORMAT,
                "sentences[7]: video \"video9\" is not in \"videos\"");
    check_nothing_left(cat, NULL);
    const char *missing[] = {test_path("no.json")};
    CHECK_FAILS(vtr_import_msrvtt(missing, 1, &o, &s, &err), VTR_ERR_IO, "no.json");
    const char *wrong = test_path("wrong.json");
    CHECK_EQ_INT(test_run("echo '{\"videos\": [{\"video_id\": \"v\", \"split\": \"dev\"}], "
                          "\"sentences\": []}' > '%s'",
                          wrong),
                 0);
    CHECK_FAILS(vtr_import_msrvtt(&wrong, 1, &o, &s, &err), VTR_ERR_FORMAT,
                "video \"v\": unknown split \"dev\"");
    CHECK_EQ_INT(test_run("echo '[1, 2]' > '%s'", wrong), 0);
    CHECK_FAILS(vtr_import_msrvtt(&wrong, 1, &o, &s, &err), VTR_ERR_FORMAT,
                "wrong.json: expected an object");
    /* a key given twice: refused, as the record reader does (not the last value silently;
     * only the role graph file keeps Python's last-value reading) */
    CHECK_EQ_INT(test_run("echo '{\"videos\": [{\"video_id\": \"v\", \"split\": \"train\", "
                          "\"split\": \"test\"}], \"sentences\": []}' > '%s'",
                          wrong),
                 0);
    CHECK_FAILS(vtr_import_msrvtt(&wrong, 1, &o, &s, &err), VTR_ERR_FORMAT,
                "wrong.json: line 1 column");
    CHECK(strstr(err.msg, "duplicate object key"));
    check_nothing_left(cat, NULL);
    vtr_catalog_close(cat);
}

TEST(import_vatex)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("vatex", "");
    char tr[600], va[600], ot[600];
    snprintf(tr, sizeof tr, "%s/vatex_training_v1.0.json", fx);
    snprintf(va, sizeof va, "%s/vatex_validation_v1.0.json", fx);
    snprintf(ot, sizeof ot, "%s/other.json", fx);
    vtr_import_source src[] = {{tr, NULL}, {va, NULL}, {ot, "extra"}};
    vtr_catalog *cat = new_catalog("vatex.db");
    vtr_import_options o = options(cat, NULL);
    vtr_import_stats s;
    CHECK_OK(vtr_import_vatex(src, 3, &o, &s, &err));
    CHECK_EQ_INT(s.items, 6);
    CHECK_EQ_INT(s.captions, 3 + 3 + 2 + 2 + 1);
    CHECK_EQ_INT(split_count(&s, "train"), 2);
    CHECK_EQ_INT(split_count(&s, "val"), 2);
    CHECK_EQ_INT(split_count(&s, "extra"), 2);
    vtr_import_stats_free(&s);
    check_split(cat, "train", 2, "a_000001_000011", "b_000002_000012");
    check_captions(cat, "b_000002_000012", 3, 2, "b_000002_000012 english 2");
    check_captions(cat, "f", 0, 0, NULL);
    /* a file without a split given and an unofficial name: items without a split */
    vtr_catalog *cat2 = new_catalog("vatex2.db");
    o = options(cat2, NULL);
    vtr_import_source plain = {ot, NULL};
    CHECK_OK(vtr_import_vatex(&plain, 1, &o, &s, &err));
    CHECK_EQ_INT(s.items, 2);
    CHECK_EQ_INT(json_object_size(s.splits), 0);
    vtr_import_stats_free(&s);
    /* a video in two files */
    vtr_import_source twice[] = {{tr, NULL}, {tr, "again"}};
    CHECK_FAILS(vtr_import_vatex(twice, 2, &o, &s, &err), VTR_ERR_FORMAT,
                "video \"a_000001_000011\" appears twice");
    vtr_catalog_close(cat2);
    vtr_catalog_close(cat);
}

TEST(import_karpathy)
{
    need_fixtures();
    vtr_error err;
    const char *fx = fixture("karpathy", "");
    char path[600];
    snprintf(path, sizeof path, "%s/dataset_coco.json", fx);
    const char *files[] = {path};
    vtr_catalog *cat = new_catalog("coco.db");
    vtr_import_options o = options(cat, NULL);
    vtr_import_stats s;
    CHECK_OK(vtr_import_karpathy(files, 1, &o, &s, &err));
    CHECK_EQ_INT(s.items, 5);
    CHECK_EQ_INT(s.captions, 26);
    CHECK_EQ_INT(split_count(&s, "train"), 2);
    CHECK_EQ_INT(split_count(&s, "restval"), 1);
    CHECK_EQ_INT(split_count(&s, "val"), 1);
    CHECK_EQ_INT(split_count(&s, "test"), 2);
    vtr_import_stats_free(&s);
    check_split(cat, "train", 2, "COCO_train2014_000000000009", "COCO_val2014_000000000042");
    check_split(cat, "test", 2, "COCO_val2014_000000000074", "COCO_val2014_000000000133");
    check_captions(cat, "COCO_val2014_000000000073", 5, 3, "Image 2, caption 3.");
    check_captions(cat, "COCO_val2014_000000000133", 6, 5, "only tokens here");

    fx = fixture("karpathy", "bad-split");
    snprintf(path, sizeof path, "%s/dataset_coco.json", fx);
    vtr_catalog *cat2 = new_catalog("coco-bad.db");
    o = options(cat2, NULL);
    CHECK_FAILS(vtr_import_karpathy(files, 1, &o, &s, &err), VTR_ERR_FORMAT,
                "image \"COCO_val2014_000000000073.jpg\": unknown split \"holdout\"");
    check_nothing_left(cat2, NULL);
    vtr_catalog_close(cat2);
    vtr_catalog_close(cat);
}

TEST(import_options_checked)
{
    vtr_error err;
    vtr_import *im;
    vtr_import_options o = {0};
    CHECK_FAILS(vtr_import_begin(&o, "x", false, NULL, NULL, &im, &err), VTR_ERR_INVALID,
                "no catalog");
    vtr_catalog *cat = new_catalog("opt.db");
    o.catalog = cat;
    CHECK_FAILS(vtr_import_begin(&o, "x", false, NULL, NULL, &im, &err), VTR_ERR_INVALID,
                "no dataset");
    o.dataset = "ds";
    o.store_dtype = VTR_U8;
    CHECK_FAILS(vtr_import_begin(&o, "x", false, NULL, NULL, &im, &err), VTR_ERR_INVALID,
                "float32 or float16");
    o.store_dtype = VTR_F32;
    FILE *fp = fopen(test_path("plain-file"), "w");
    fclose(fp);
    o.store = test_path("plain-file/parent/store");
    CHECK_FAILS(vtr_import_begin(&o, "x", true, NULL, NULL, &im, &err), VTR_ERR_IO,
                "plain-file: Not a directory");
    o.store = NULL;
    CHECK_OK(vtr_import_begin(&o, "x", false, NULL, NULL, &im, &err));
    int64_t idx;
    bool added;
    CHECK_FAILS(vtr_import_item(im, "", &idx, &added, &err), VTR_ERR_INVALID, "empty");
    CHECK_FAILS(vtr_import_item(im, "a\tb", &idx, &added, &err), VTR_ERR_INVALID, "tab");
    CHECK_FAILS(vtr_import_item(im, "\xff", &idx, &added, &err), VTR_ERR_INVALID, "UTF-8");
    CHECK_OK(vtr_import_item(im, "k", &idx, &added, &err));
    CHECK(added);
    CHECK_FAILS(vtr_import_caption(im, idx, "\xc3", &err), VTR_ERR_FORMAT, "caption");
    CHECK_OK(vtr_import_split(im, idx, "train", &err));
    CHECK_OK(vtr_import_split(im, idx, "train", &err));
    vtr_import_stats s;
    CHECK_OK(vtr_import_finish(im, &s, &err));
    CHECK_EQ_INT(split_count(&s, "train"), 1);
    vtr_import_stats_free(&s);
    vtr_catalog_close(cat);
}
