/* Fuzz target: the importers of feature layouts, npy-dir (import/import_npy_dir.c), SCAN
 * precomp (import/import_precomp.c) and the HGR release (import/import_hgr.c), each on
 * the same directory, each into its own dataset of one in-memory catalog and a feature
 * store in the scratch directory. The input is a multi-file input (fuzz_util.h):
 *   npy-dir  reads the directories a/ (split "train") and b/ (no split) into a float16
 *            store, reporting bad items through on_skip (vtr-import --keep-going);
 *   precomp  reads the top directory ({train,dev,test,testall}_ims.npy, _caps.txt,
 *            _ids.txt; 5 captions per image) into a float32 store, failing on the first
 *            bad item;
 *   hgr      reads the top directory as the release root (annotation/RET/...,
 *            public_split/..., the mean-pooled ordered_feature/MP/NAME/{set}_ft.npy)
 *            into a float32 store, with on_skip.
 * A failure must come with one line (fuzz_check_message) and leave neither store nor items;
 * a success leaves a store that opens with the counts of the stats.
 *
 * Not fuzzed: HGR's per-video HDF5 frames (VTR_HGR_FRAMES). libhdf5 (Debian's 1.10, not
 * instrumented) trusts sizes in the file: within minutes the fuzzer has it ask malloc for
 * 0xc800000000000058 bytes in H5C_protect, which ASan aborts on (allocation-size-too-big),
 * while the normal build gets NULL and vtr-import reports the file as bad. That is inside
 * libhdf5, beyond what vtr can bound; tests/test_import.c covers the HDF5 path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "import/import.h"
#include "lib/feature_store.h"

static void on_skip(void *ctx, const char *key, const vtr_error *why)
{
    (void)ctx;
    if (!key || !*key)
        abort();
    fuzz_check_message(why, NULL);
}

/* The store an import left (or did not leave) at store_path, against its stats. */
static void check_store(vtr_catalog *cat, const char *name, vtr_status st, const char *store_path,
                        bool had_store, const vtr_import_stats *stats)
{
    vtr_error err;
    int64_t dataset;
    vtr_status found = vtr_catalog_find_dataset(cat, name, &dataset, &err);
    if (st != VTR_OK) {
        if (found != VTR_ERR_NOT_FOUND || (!had_store && fuzz_exists("store")))
            abort();
        return;
    }
    if (found != VTR_OK)
        abort();
    vtr_feature_store_reader *r = NULL;
    if (vtr_feature_store_reader_open(store_path, &r, &err) != VTR_OK) {
        fprintf(stderr, "the imported store does not open: %s\n", err.msg);
        abort();
    }
    if (vtr_feature_store_reader_items(r) != stats->feature_items ||
        vtr_feature_store_reader_rows(r) != stats->feature_rows)
        abort();
    vtr_feature_store_reader_close(r);
}

static void run(vtr_catalog *cat, int layout, const char *dir)
{
    static const char *const datasets[] = {"npy-dir", "precomp", "hgr"};
    vtr_error err;
    char *store = fuzz_path("store");
    vtr_import_options opt = {.catalog = cat, .dataset = datasets[layout], .store = store};
    vtr_import_stats stats = {0};
    bool had_store = fuzz_exists("store"); /* the input's: the import must refuse it */
    vtr_status st;
    if (layout == 0) {
        char *a = fuzz_path("a"), *b = fuzz_path("b");
        vtr_import_source dirs[] = {{a, "train"}, {b, NULL}};
        opt.store_dtype = VTR_F16;
        opt.on_skip = on_skip;
        st = vtr_import_npy_dir(dirs, 2, &opt, &stats, &err);
        free(a);
        free(b);
    } else if (layout == 1) {
        st = vtr_import_precomp(dir, 0, &opt, &stats, &err);
    } else {
        opt.on_skip = on_skip;
        st = vtr_import_hgr(dir, VTR_HGR_MEAN, NULL, &opt, &stats, &err);
    }
    if (st != VTR_OK)
        fuzz_check_message(&err, NULL);
    check_store(cat, datasets[layout], st, store, had_store, &stats);
    vtr_import_stats_free(&stats);
    free(store);
    fuzz_remove("store"); /* the next layout starts without this one's store */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_scratch();
    fuzz_write_files(data, size, NULL);
    vtr_error err;
    vtr_catalog *cat = NULL; /* one per input (a new catalog costs more than an import) */
    if (vtr_catalog_open(":memory:", &cat, &err) != VTR_OK)
        abort();
    for (int layout = 0; layout < 3; layout++)
        run(cat, layout, dir);
    vtr_catalog_close(cat);
    return 0;
}
