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
 *            into a float32 store, with on_skip;
 *   hgr-h5   the same root with HGR's per-video frames (VTR_HGR_FRAMES), the HDF5 files
 *            ordered_feature/SA/NAME/{set}_ft.hdf5 made first from the input's recipes
 *            (below), with on_skip.
 * A failure must come with one line (fuzz_check_message) and leave neither store nor items;
 * a success leaves a store that opens with the counts of the stats.
 *
 * HDF5 recipes. libhdf5's own parser is not fuzzed here: Debian's 1.10 (not instrumented)
 * trusts sizes in the file, and within minutes the fuzzer had it ask malloc for
 * 0xc800000000000058 bytes in H5C_protect, which ASan aborts on while the normal build gets
 * NULL and vtr-import reports the file as bad: inside libhdf5, beyond what vtr can bound.
 * What is fuzzed is vtr's reader of the files libhdf5 parses: a file
 * ordered_feature/SA/NAME/SET_ft.hdf5.recipe becomes SET_ft.hdf5 beside it, written through
 * the HDF5 API, one object per record of the recipe:
 *     byte    n, then n bytes: the object's name (any bytes; '/' makes groups on the way)
 *     byte    kind % 5: 0 float32, 1 float64, 2 int32 and 3 variable-length string
 *             datasets, 4 a group
 *     byte    rank % 4, then rank bytes: the dimensions (each % 9)
 *     then    the dataset's values from the following bytes (as many as its size takes,
 *             reused from the start of the recipe when they run out)
 * A record the HDF5 API refuses (a name it cannot take) is skipped, as is a recipe whose
 * SET_ft.hdf5 the input made a directory. So names, ranks,
 * shapes, types and values (NaN and infinities included) reach vtr's reader in every
 * combination, through valid files. */
#include <dirent.h>
#include <hdf5.h>
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

/* The object of one recipe record at off in r (n bytes) into file; returns the offset of
 * the next record. */
static size_t h5_object(hid_t file, const uint8_t *r, size_t n, size_t off)
{
    char name[257];
    size_t len = r[off++ % n];
    for (size_t i = 0; i < len; i++)
        name[i] = (char)r[off++ % n];
    name[len] = '\0';
    int kind = r[off++ % n] % 5, rank = r[off++ % n] % 4;
    hsize_t dims[3] = {0, 0, 0}, count = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = r[off++ % n] % 9;
        count *= dims[d];
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (kind == 4) {
        hid_t g = H5Gcreate2(file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        if (g >= 0)
            H5Gclose(g);
        H5Pclose(lcpl);
        return off;
    }
    hid_t types[4] = {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT32, H5T_C_S1};
    hid_t type = kind == 3 ? H5Tcopy(H5T_C_S1) : H5Tcopy(types[kind]);
    if (kind == 3)
        H5Tset_size(type, H5T_VARIABLE);
    hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(file, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    size_t bytes = kind == 3 ? 0 : (size_t)count * H5Tget_size(type);
    uint8_t *values = bytes ? malloc(bytes) : NULL;
    if (ds >= 0 && values) {
        for (size_t i = 0; i < bytes; i++)
            values[i] = r[off++ % n];
        H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    }
    free(values);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(type);
    H5Pclose(lcpl);
    return off;
}

/* SET_ft.hdf5 from every SET_ft.hdf5.recipe under ordered_feature/SA/NAME/: at most 16
 * objects, as many as the recipe's bytes start. */
static void h5_from_recipes(void)
{
    char *sa = fuzz_path("ordered_feature/SA");
    DIR *top = opendir(sa);
    struct dirent *e;
    while (top && (e = readdir(top))) {
        if (e->d_name[0] == '.')
            continue;
        for (int k = 0; k < 3; k++) {
            static const char *const sets[] = {"trn", "val", "tst"};
            char path[4096], h5[4096];
            snprintf(h5, sizeof h5, "%s/%s/%s_ft.hdf5", sa, e->d_name, sets[k]);
            snprintf(path, sizeof path, "%s.recipe", h5);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            uint8_t r[4096];
            size_t n = fread(r, 1, sizeof r, f);
            fclose(f);
            hid_t file = H5Fcreate(h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            if (file < 0) /* the input made SET_ft.hdf5 a directory: no file to write */
                continue;
            for (size_t off = 0, i = 0; n > 0 && off < n && i < 16; i++)
                off = h5_object(file, r, n, off);
            H5Fclose(file);
        }
    }
    if (top)
        closedir(top);
    free(sa);
}

static void run(vtr_catalog *cat, int layout, const char *dir)
{
    static const char *const datasets[] = {"npy-dir", "precomp", "hgr", "hgr-h5"};
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
        st = vtr_import_hgr(dir, layout == 2 ? VTR_HGR_MEAN : VTR_HGR_FRAMES, NULL, &opt,
                            &stats, &err);
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
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the recipes' refusals are not to be printed */
    h5_from_recipes();
    for (int layout = 0; layout < 4; layout++)
        run(cat, layout, dir);
    vtr_catalog_close(cat);
    return 0;
}
