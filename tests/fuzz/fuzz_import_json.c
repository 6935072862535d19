/* Fuzz target: the annotation importers of JSON layouts (import/import_msrvtt.c,
 * import_vatex.c, import_karpathy.c), each run on the same file. The input is a multi-file input
 * (fuzz_util.h): the annotation file (the bytes before the first "%%file " line, written as
 * vatex_training.json, a name from which the VATEX importer takes the split), optionally with the
 * MSR-VTT importer's sent2rolegraph.augment.json beside it; each importer fills its own dataset of
 * one in-memory catalog. A failure must come with one line (fuzz_check_message) and leave the
 * catalog without items; a success must store what its stats count: the items of every split the
 * stats list. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "import/import.h"

typedef vtr_status (*import_fn)(const char *path, const vtr_import_options *opt,
                                vtr_import_stats *stats, vtr_error *err);

static vtr_status import_msrvtt(const char *path, const vtr_import_options *opt,
                                vtr_import_stats *stats, vtr_error *err)
{
    return vtr_import_msrvtt(&path, 1, opt, stats, err);
}

static vtr_status import_vatex(const char *path, const vtr_import_options *opt,
                               vtr_import_stats *stats, vtr_error *err)
{
    vtr_import_source src = {path, NULL};
    return vtr_import_vatex(&src, 1, opt, stats, err);
}

static vtr_status import_karpathy(const char *path, const vtr_import_options *opt,
                                  vtr_import_stats *stats, vtr_error *err)
{
    return vtr_import_karpathy(&path, 1, opt, stats, err);
}

/* What a finished import of dataset `name` left in the catalog against its stats. */
static void check_catalog(vtr_catalog *cat, const char *name, vtr_status st,
                          const vtr_import_stats *stats)
{
    vtr_error err;
    int64_t dataset;
    vtr_status found = vtr_catalog_find_dataset(cat, name, &dataset, &err);
    if (st != VTR_OK) {
        if (found != VTR_ERR_NOT_FOUND) /* the transaction wrote nothing */
            abort();
        return;
    }
    if (found != VTR_OK)
        abort();
    vtr_item_list items = {0};
    if (vtr_catalog_dataset_items(cat, dataset, &items, &err) != VTR_OK ||
        (int64_t)items.n != stats->items)
        abort();
    vtr_item_list_free(&items);
    const char *split;
    json_t *count;
    json_object_foreach(stats->splits, split, count)
    {
        vtr_item_ref_list refs = {0};
        if (vtr_catalog_split_items(cat, dataset, split, &refs, &err) != VTR_OK ||
            (int64_t)refs.n != json_integer_value(count))
            abort();
        vtr_item_ref_list_free(&refs);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const import_fn importers[] = {import_msrvtt, import_vatex, import_karpathy};
    static const char *const datasets[] = {"msrvtt", "vatex", "karpathy"};
    fuzz_scratch();
    fuzz_write_files(data, size, "vatex_training.json");
    char *path = fuzz_path("vatex_training.json");
    vtr_error err;
    vtr_catalog *cat = NULL; /* one per input (a new catalog costs more than an import) */
    if (vtr_catalog_open(":memory:", &cat, &err) != VTR_OK)
        abort();
    for (size_t i = 0; i < sizeof importers / sizeof importers[0]; i++) {
        vtr_import_options opt = {.catalog = cat, .dataset = datasets[i]};
        vtr_import_stats stats = {0};
        vtr_status st = importers[i](path, &opt, &stats, &err);
        if (st != VTR_OK)
            fuzz_check_message(&err, NULL);
        check_catalog(cat, datasets[i], st, &stats);
        vtr_import_stats_free(&stats);
    }
    vtr_catalog_close(cat);
    free(path);
    return 0;
}
