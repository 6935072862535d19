/* Fuzz target: lib/catalog's open and migrate path on an arbitrary file, as a reader
 * (vtr-search, vtr-eval, vtr-train) opens a catalog: the input, copied to a scratch file,
 * goes through vtr_catalog_open_existing (schema version, application id, migrations),
 * and what opens is read: the items, captions and graphs of the first datasets, two
 * splits (listed and walked), a vocabulary, a feature store and runs. Every failure must
 * come with one line (lib/error.h) starting with "catalog PATH". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/catalog.h"

static char prefix[600];

static void check(vtr_status st, const vtr_error *err)
{
    if (st != VTR_OK)
        fuzz_check_message(err, prefix);
}

static vtr_status count_caption(void *ctx, const vtr_split_caption *c, vtr_error *err)
{
    (void)err;
    if (!c->key || !c->text)
        abort();
    ++*(int64_t *)ctx;
    return VTR_OK;
}

static void read_dataset(vtr_catalog *cat, int64_t dataset)
{
    vtr_error err;
    vtr_item_list items = {0};
    vtr_status st = vtr_catalog_dataset_items(cat, dataset, &items, &err);
    check(st, &err);
    for (size_t i = 0; i < items.n && i < 16; i++) {
        const vtr_item *item = &items.items[i];
        if (!item->key || !item->updated_at)
            abort();
        vtr_item found = {0};
        check(vtr_catalog_find_item(cat, dataset, item->key, &found, &err), &err);
        vtr_item_free(&found);
        vtr_caption_list caps = {0};
        check(vtr_catalog_item_captions(cat, item->id, &caps, &err), &err);
        for (size_t c = 0; c < caps.n && c < 8; c++) {
            char *graph = NULL;
            st = vtr_catalog_caption_graph(cat, caps.captions[c].id, &graph, &err);
            check(st, &err);
            if ((st == VTR_OK) != (graph != NULL))
                abort();
            free(graph);
        }
        vtr_caption_list_free(&caps);
    }
    vtr_item_list_free(&items);

    static const char *const splits[] = {"train", "test"};
    for (size_t s = 0; s < 2; s++) {
        vtr_item_ref_list refs = {0};
        check(vtr_catalog_split_items(cat, dataset, splits[s], &refs, &err), &err);
        vtr_item_ref_list_free(&refs);
        int64_t n = 0;
        check(vtr_catalog_split_caption_graphs(cat, dataset, splits[s], count_caption, &n, &err),
              &err);
    }
    vtr_word_list words = {0};
    st = vtr_catalog_get_vocabulary(cat, dataset, "hgr", &words, &err);
    check(st, &err);
    for (size_t i = 0; i < words.n; i++)
        if (!words.words[i])
            abort();
    vtr_word_list_free(&words);
    vtr_feature_store fs = {0};
    st = vtr_catalog_find_feature_store(cat, dataset, "store", &fs, &err);
    check(st, &err);
    if (st == VTR_OK && (!fs.name || !fs.path || !fs.extractor || !fs.created_at))
        abort();
    vtr_feature_store_free(&fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_scratch();
    fuzz_write_file("catalog.sqlite", data, size);
    char *path = fuzz_path("catalog.sqlite");
    snprintf(prefix, sizeof prefix, "catalog %s", path);
    vtr_error err;
    vtr_catalog *cat = NULL;
    vtr_status st = vtr_catalog_open_existing(path, &cat, &err);
    check(st, &err);
    if (st == VTR_OK) {
        int64_t id;
        check(vtr_catalog_find_dataset(cat, "d", &id, &err), &err);
        for (int64_t dataset = 1; dataset <= 2; dataset++)
            read_dataset(cat, dataset);
        for (int64_t run = 1; run <= 2; run++) {
            vtr_run r = {0};
            st = vtr_catalog_get_run(cat, run, &r, &err);
            check(st, &err);
            if (st == VTR_OK &&
                (!r.kind || !r.config || !r.code_version || !r.data_hashes || !r.started_at))
                abort();
            vtr_run_free(&r);
        }
    }
    vtr_catalog_close(cat);
    free(path);
    return 0;
}
