/* vtr-import: annotations and features released by others -> the catalog and a feature
 * store. Argument parsing and reporting only; the work is in import/import.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/catalog.h"
#include "lib/log.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-import LAYOUT SRC... --catalog FILE --dataset NAME [OPTION]...\n"
    "Imports a dataset's items, captions and splits into the catalog in one transaction,\n"
    "and, with --store, the features the layout carries into a new feature store.\n"
    "Layouts and splits: docs/importers.md.\n"
    "\n"
    "Layouts:\n"
    "  npy-dir [SPLIT=]DIR...  DIR/KEY.npy per item, (N, D) or (D,) float32/float16;\n"
    "                          features only (needs --store)\n"
    "  precomp DIR             SCAN/VSE precomp: {train,dev,test,testall}_ims.npy (N, R, D)\n"
    "                          + _caps.txt (--captions-per-image lines per image) [+ _ids.txt];\n"
    "                          dev -> val\n"
    "  hgr ROOT                HGR release: annotation/RET/ref_captions.json (and, when\n"
    "                          there, sent2rolegraph.augment.json, word2int.json and\n"
    "                          int2word.npy: role graphs and the vocabulary),\n"
    "                          public_split/{trn,val,tst}_names.npy, features from\n"
    "                          ordered_feature/SA/NAME/{set}_ft.hdf5 (or MP/NAME/{set}_ft.npy\n"
    "                          with --hgr-mean-pooled); trn -> train, tst -> test\n"
    "  msrvtt FILE...          train_val_videodatainfo.json, test_videodatainfo.json;\n"
    "                          validate -> val\n"
    "  vatex [SPLIT=]FILE...   vatex_*.json (English captions); the split comes from\n"
    "                          SPLIT= or the official file name (vatex_training* -> train,\n"
    "                          vatex_validation* -> val, vatex_*_test* -> test)\n"
    "  karpathy FILE...        dataset_coco.json, dataset_flickr30k.json; restval -> train\n"
    "                          (and restval)\n"
    "\n"
    "Options:\n"
    "  -c, --catalog FILE        the catalog (SQLite; created when missing) [required]\n"
    "  -d, --dataset NAME        the dataset (created when missing) [required]\n"
    "      --root DIR            root directory recorded for a new dataset\n"
    "  -s, --store DIR           build the feature store DIR (its parent must exist)\n"
    "      --store-name NAME     its name in the catalog [DIR's base name]\n"
    "      --half                store float16 [float32]\n"
    "      --replace             replace an existing store DIR\n"
    "      --captions-per-image K  precomp: caption lines per image [5]\n"
    "      --hgr-features NAME   hgr: the feature directory, e.g. resnet152.pth [the only one]\n"
    "      --hgr-mean-pooled     hgr: store the mean-pooled NPY (one row per video) instead\n"
    "                            of the per-frame HDF5 features\n"
    "  -k, --keep-going          report an item whose features cannot be read, import it\n"
    "                            without them (status failed) and go on\n"
    "      --log-json            log events as JSON lines on stderr\n"
    "  -h, --help                this text\n"
    "      --version             the version\n"
    "\n"
    "Exit status: 0 imported; 2 imported, but --keep-going skipped some items' features;\n"
    "1 bad usage, or the import failed (then the catalog is unchanged and no store is left).\n";

typedef struct cli_progress {
    vtr_progress p;
    bool begun;
} cli_progress;

static void on_progress(void *ctx, int64_t done, int64_t total)
{
    cli_progress *cp = ctx;
    if (!cp->begun) {
        vtr_progress_begin(&cp->p, "items", total);
        cp->begun = true;
    }
    if (done > cp->p.done)
        vtr_progress_step(&cp->p, done - cp->p.done);
}

static void on_skip(void *ctx, const char *key, const vtr_error *why)
{
    (void)ctx;
    vtr_log_item_error(key, why);
}

/* Reports bad usage; returns the exit status 1. */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vtr-import: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    return 1;
}

/* "SPLIT=PATH" (SPLIT of [A-Za-z0-9_-]) or a plain PATH; arg is cut in place. */
static vtr_import_source parse_source(char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return (vtr_import_source){arg, NULL};
    for (const char *p = arg; p < eq; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return (vtr_import_source){arg, NULL};
    *eq = '\0';
    return (vtr_import_source){eq + 1, arg};
}

/* "train 6513, val 497, test 2990" */
static void split_summary(const json_t *splits, char *buf, size_t size)
{
    size_t used = 0;
    const char *name;
    const json_t *count;
    buf[0] = '\0';
    json_object_foreach((json_t *)splits, name, count)
    {
        int n = snprintf(buf + used, size - used, "%s%s %lld", used ? ", " : "", name,
                         (long long)json_integer_value(count));
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
}

static void report(const char *layout, const char *dataset, const char *store,
                   const vtr_import_stats *s)
{
    json_t *f =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:O}", "layout", layout, "dataset", dataset,
                  "items", (json_int_t)s->items, "new_items", (json_int_t)s->new_items, "captions",
                  (json_int_t)s->captions, "skipped", (json_int_t)s->skipped, "splits", s->splits);
    if (f && store) {
        json_object_set_new(f, "store", json_string(store));
        json_object_set_new(f, "feature_items", json_integer(s->feature_items));
        json_object_set_new(f, "feature_rows", json_integer(s->feature_rows));
        json_object_set_new(f, "dim", json_integer(s->dim));
    }
    if (f && s->graphs_read) {
        json_object_set_new(f, "graphs", json_integer(s->graphs));
        json_object_set_new(f, "captions_without_graph", json_integer(s->captions_without_graph));
    }
    if (f && s->vocabulary_words)
        json_object_set_new(f, "vocabulary_words", json_integer(s->vocabulary_words));
    vtr_log_event("imported", f);
    json_decref(f);
    char splits[512];
    split_summary(s->splits, splits, sizeof splits);
    char features[512] = "";
    if (store)
        snprintf(features, sizeof features, "; store %s: %lld items, %lld rows of dim %lld", store,
                 (long long)s->feature_items, (long long)s->feature_rows, (long long)s->dim);
    char skipped[64] = "";
    if (s->skipped)
        snprintf(skipped, sizeof skipped, "; skipped the features of %lld item%s",
                 (long long)s->skipped, s->skipped == 1 ? "" : "s");
    /* HGR: role graphs and vocabulary, or that the release had none */
    char graphs[128] = "", vocabulary[64] = "";
    if (s->graphs_read)
        snprintf(graphs, sizeof graphs, "; role graphs for %lld captions, %lld without one",
                 (long long)s->graphs, (long long)s->captions_without_graph);
    else if (!strcmp(layout, "hgr"))
        snprintf(graphs, sizeof graphs, "; no role graphs (no sent2rolegraph.augment.json)");
    if (s->vocabulary_words)
        snprintf(vocabulary, sizeof vocabulary, "; vocabulary of %lld words",
                 (long long)s->vocabulary_words);
    vtr_log_info("%s: %lld items (%lld new), %lld captions; splits: %s%s%s%s%s", dataset,
                 (long long)s->items, (long long)s->new_items, (long long)s->captions,
                 splits[0] ? splits : "none", graphs, vocabulary, features, skipped);
}

int main(int argc, char **argv)
{
    enum {
        OPT_ROOT = 256,
        OPT_STORE_NAME,
        OPT_HALF,
        OPT_REPLACE,
        OPT_CAPTIONS,
        OPT_HGR_FEATURES,
        OPT_HGR_MEAN,
        OPT_LOG_JSON,
        OPT_VERSION
    };
    static const struct option options[] = {
        {"catalog", required_argument, NULL, 'c'},
        {"dataset", required_argument, NULL, 'd'},
        {"root", required_argument, NULL, OPT_ROOT},
        {"store", required_argument, NULL, 's'},
        {"store-name", required_argument, NULL, OPT_STORE_NAME},
        {"half", no_argument, NULL, OPT_HALF},
        {"replace", no_argument, NULL, OPT_REPLACE},
        {"captions-per-image", required_argument, NULL, OPT_CAPTIONS},
        {"hgr-features", required_argument, NULL, OPT_HGR_FEATURES},
        {"hgr-mean-pooled", no_argument, NULL, OPT_HGR_MEAN},
        {"keep-going", no_argument, NULL, 'k'},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_import_options o = {0};
    const char *catalog_path = NULL, *hgr_features = NULL;
    bool log_json = false, keep_going = false, hgr_mean = false;
    long long captions_per_image = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:d:s:kh", options, NULL)) != -1) {
        switch (opt) {
        case 'c': catalog_path = optarg; break;
        case 'd': o.dataset = optarg; break;
        case OPT_ROOT: o.root = optarg; break;
        case 's': o.store = optarg; break;
        case OPT_STORE_NAME: o.store_name = optarg; break;
        case OPT_HALF: o.store_dtype = VTR_F16; break;
        case OPT_REPLACE: o.replace_store = true; break;
        case OPT_CAPTIONS:
            if (vtr_parse_int(optarg, 1, 1000, &captions_per_image) != 0)
                return usage("--captions-per-image needs a count from 1 to 1000 (got '%s')",
                             optarg);
            break;
        case OPT_HGR_FEATURES: hgr_features = optarg; break;
        case OPT_HGR_MEAN: hgr_mean = true; break;
        case 'k': keep_going = true; break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-import %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-import --help'.\n", stderr); return 1;
        }
    }
    vtr_log_init("vtr-import", log_json);
    const char *layout = optind < argc ? argv[optind] : NULL;
    int nsrc = optind < argc ? argc - optind - 1 : 0;
    char **src = argv + optind + 1;
    static const char *const layouts[] = {"npy-dir", "precomp", "hgr",
                                          "msrvtt",  "vatex",   "karpathy"};
    bool known = false;
    for (size_t i = 0; layout && i < sizeof layouts / sizeof layouts[0]; i++)
        known |= !strcmp(layout, layouts[i]);
    bool features = layout && (!strcmp(layout, "npy-dir") || !strcmp(layout, "precomp") ||
                               !strcmp(layout, "hgr"));
    bool single = layout && (!strcmp(layout, "precomp") || !strcmp(layout, "hgr"));
    if (!layout)
        return usage("no layout: npy-dir, precomp, hgr, msrvtt, vatex or karpathy");
    if (!known)
        return usage("unknown layout '%s': npy-dir, precomp, hgr, msrvtt, vatex or karpathy",
                     layout);
    if (nsrc == 0)
        return usage("no source: name the layout's files or directory");
    if (single && nsrc != 1)
        return usage("%s takes one directory", layout);
    if (!catalog_path)
        return usage("--catalog FILE is required");
    if (!o.dataset || !o.dataset[0])
        return usage("--dataset NAME is required");
    if (!strcmp(layout, "npy-dir") && !o.store)
        return usage("npy-dir holds only features: give --store DIR");
    if (o.store && !features)
        return usage("%s carries no features: drop --store", layout);
    if (!o.store && (o.store_name || o.replace_store || o.store_dtype == VTR_F16))
        return usage("--store-name, --replace and --half go with --store");
    if (captions_per_image && strcmp(layout, "precomp"))
        return usage("--captions-per-image is for precomp");
    if ((hgr_features || hgr_mean) && strcmp(layout, "hgr"))
        return usage("--hgr-features and --hgr-mean-pooled are for hgr");

    cli_progress progress = {0};
    o.on_progress = on_progress;
    o.progress_ctx = &progress;
    if (keep_going)
        o.on_skip = on_skip;
    vtr_error err;
    vtr_error_clear(&err);
    vtr_import_stats stats = {0};
    vtr_import_source *sources = NULL;
    int rc = 1;
    vtr_status st = vtr_catalog_open(catalog_path, &o.catalog, &err);
    if (st != VTR_OK)
        goto end;
    if (!(sources = calloc((size_t)nsrc, sizeof *sources))) {
        st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (int i = 0; i < nsrc; i++)
        sources[i] = !strcmp(layout, "npy-dir") || !strcmp(layout, "vatex")
                         ? parse_source(src[i])
                         : (vtr_import_source){src[i], NULL};
    if (!strcmp(layout, "npy-dir"))
        st = vtr_import_npy_dir(sources, (size_t)nsrc, &o, &stats, &err);
    else if (!strcmp(layout, "precomp"))
        st = vtr_import_precomp(src[0], (int)captions_per_image, &o, &stats, &err);
    else if (!strcmp(layout, "hgr"))
        st = vtr_import_hgr(src[0], hgr_mean ? VTR_HGR_MEAN : VTR_HGR_FRAMES, hgr_features, &o,
                            &stats, &err);
    else if (!strcmp(layout, "msrvtt"))
        st = vtr_import_msrvtt((const char *const *)src, (size_t)nsrc, &o, &stats, &err);
    else if (!strcmp(layout, "vatex"))
        st = vtr_import_vatex(sources, (size_t)nsrc, &o, &stats, &err);
    else
        st = vtr_import_karpathy((const char *const *)src, (size_t)nsrc, &o, &stats, &err);
    if (progress.begun)
        vtr_progress_end(&progress.p);
    if (st != VTR_OK)
        goto end;
    report(layout, o.dataset, o.store, &stats);
    rc = stats.skipped ? 2 : 0;
end:
    if (st != VTR_OK)
        vtr_log_item_error(NULL, &err);
    vtr_import_stats_free(&stats);
    free(sources);
    vtr_catalog_close(o.catalog);
    return rc;
}
