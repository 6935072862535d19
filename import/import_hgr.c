/* hgr: the release layout of HGR (Chen et al., CVPR 2020; cshizhe/hgr_v2t):
 *   ROOT/annotation/RET/ref_captions.json          {video: [caption, ...]}
 *   ROOT/annotation/RET/sent2rolegraph.augment.json  {caption: [nodes, edges]} (optional)
 *   ROOT/annotation/RET/word2int.json, int2word.npy  the vocabulary (optional, both or
 *                                                  neither)
 *   ROOT/public_split/{trn,val,tst}_names.npy      numpy str arrays of video names
 *   ROOT/ordered_feature/SA/NAME/{set}_ft.hdf5     one (frames, dim) dataset per video,
 *                                                  named with '/' replaced by '_'
 *   ROOT/ordered_feature/MP/NAME/{set}_ft.npy      (n, dim), row i = names[i]
 * The names files are read by lib/npy's string-array reader. */
#define _POSIX_C_SOURCE 200809L
#include "import.h"

#include <dirent.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/file.h"
#include "lib/json.h"
#include "lib/npy.h"
#include "text/role_graph.h"
#include "text/vocab.h"

/* ---- the release layout ------------------------------------------------------------- */

static const struct {
    const char *set, *split;
} hgr_sets[] = {
    {"trn", "train"},
    {"val", "val"},
    {"tst", "test"},
};
#define HGR_SETS (sizeof hgr_sets / sizeof hgr_sets[0])

/* Limits what one corrupt HDF5 header can make us allocate: 2^32 floats (16 GiB). */
#define HGR_MAX_ELEMENTS ((hsize_t)1 << 32)

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

/* The one feature directory under dir, into *name (malloc'd). */
static vtr_status only_subdir(const char *dir, char **name, vtr_error *err)
{
    *name = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return vtr_fail_errno(err, "%s", dir);
    vtr_status st = VTR_OK;
    char found[2][256] = {"", ""};
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *p = vtr_path_join(dir, de->d_name);
        struct stat sb;
        bool sub = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (!sub)
            continue;
        if (count < 2)
            snprintf(found[count], sizeof found[count], "%s", de->d_name);
        count++;
    }
    closedir(d);
    if (count == 0)
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: no feature directory in it", dir);
    else if (count > 1)
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "%s: %d feature directories (%s, %s%s); choose one by name", dir, count,
                      found[0], found[1], count > 2 ? ", ..." : "");
    else if (!(*name = strdup(found[0])))
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return st;
}

/* Reads video `name`'s dataset from an open HDF5 file into *buf (grown as needed).
 * Failures are the item's, in *why. */
static vtr_status read_h5_video(hid_t file, const char *h5_path, const char *name, float **buf,
                                size_t *cap, vtr_tensor *rows, vtr_error *why)
{
    char *key = strdup(name);
    if (!key)
        return vtr_fail(why, VTR_ERR_NOMEM, "out of memory");
    for (char *p = key; *p; p++)
        if (*p == '/')
            *p = '_';
    /* names are valid UTF-8 without line breaks (vtr_import_item checked them) */
    const char *shown = key;
    vtr_status st = VTR_OK;
    hid_t ds = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID;
    htri_t exists = strcmp(key, ".") ? H5Lexists(file, key, H5P_DEFAULT) : 0;
    if (exists <= 0) {
        st = vtr_fail(why, VTR_ERR_NOT_FOUND, "%s: no dataset \"%s\" for video \"%s\"", h5_path,
                      shown, name);
        goto end;
    }
    if ((ds = H5Dopen2(file, key, H5P_DEFAULT)) < 0) {
        st = vtr_fail(why, VTR_ERR_FORMAT, "%s: \"%s\" is not a dataset", h5_path, shown);
        goto end;
    }
    space = H5Dget_space(ds);
    type = H5Dget_type(ds);
    int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[2] = {0, 0};
    if (ndims != 1 && ndims != 2) {
        st = vtr_fail(why, VTR_ERR_FORMAT,
                      "%s: dataset \"%s\" has %d dimensions; expected "
                      "(frames, dim)",
                      h5_path, shown, ndims);
        goto end;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (ndims == 1) { /* one vector: one frame */
        dims[1] = dims[0];
        dims[0] = 1;
    }
    if (type < 0 || H5Tget_class(type) != H5T_FLOAT) {
        st = vtr_fail(why, VTR_ERR_UNSUPPORTED, "%s: dataset \"%s\" is not of a float type",
                      h5_path, shown);
        goto end;
    }
    if (dims[1] == 0 || (dims[0] && dims[1] > HGR_MAX_ELEMENTS / dims[0])) {
        st = vtr_fail(why, VTR_ERR_FORMAT,
                      "%s: dataset \"%s\" has an implausible shape (%llu, "
                      "%llu)",
                      h5_path, shown, (unsigned long long)dims[0], (unsigned long long)dims[1]);
        goto end;
    }
    size_t count = (size_t)(dims[0] * dims[1]);
    if (count > *cap) {
        float *p = realloc(*buf, count * sizeof *p);
        if (!p) {
            st = vtr_fail(why, VTR_ERR_NOMEM, "%s: out of memory for dataset \"%s\"", h5_path,
                          shown);
            goto end;
        }
        *buf = p;
        *cap = count;
    }
    if (count > 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, *buf) < 0) {
        st = vtr_fail(why, VTR_ERR_FORMAT, "%s: cannot read dataset \"%s\"", h5_path, shown);
        goto end;
    }
    *rows = (vtr_tensor){
        .dtype = VTR_F32, .ndim = 2, .shape = {(int64_t)dims[0], (int64_t)dims[1]}, .data = *buf};
end:
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (ds >= 0)
        H5Dclose(ds);
    free(key);
    return st;
}

/* Everything a split needs, opened. */
typedef struct hgr_set {
    const char *set, *split;
    char *names_path;
    vtr_npy_strings names;
    char *features_path;
    hid_t h5;          /* VTR_HGR_FRAMES */
    vtr_npy_file mean; /* VTR_HGR_MEAN */
} hgr_set;

static void close_set(hgr_set *s)
{
    free(s->names_path);
    vtr_npy_strings_free(&s->names);
    free(s->features_path);
    if (s->h5 >= 0)
        H5Fclose(s->h5);
    vtr_npy_close(&s->mean);
}

static vtr_status open_features(hgr_set *s, vtr_hgr_features kind, vtr_error *err)
{
    if (!is_file(s->features_path))
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: missing (features of %s)", s->features_path,
                        strrchr(s->names_path, '/') + 1);
    if (kind == VTR_HGR_FRAMES) {
        vtr_status st = vtr_regular_file(s->features_path, NULL, err); /* HDF5 would block */
        if (st != VTR_OK)
            return st;
        if (H5Fis_hdf5(s->features_path) <= 0 ||
            (s->h5 = H5Fopen(s->features_path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an HDF5 file", s->features_path);
        return VTR_OK;
    }
    vtr_status st = vtr_npy_load(s->features_path, &s->mean, err);
    if (st != VTR_OK)
        return st;
    const vtr_tensor *t = &s->mean.tensor;
    char shape[160];
    vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: dtype %s; features are float32 or float16",
                        s->features_path, vtr_dtype_name(t->dtype));
    if (t->ndim != 2 || t->shape[0] != (int64_t)s->names.n)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: shape %s; expected (%zu, dim), a row per name "
                        "in %s",
                        s->features_path, shape, s->names.n, strrchr(s->names_path, '/') + 1);
    return VTR_OK;
}

/* The annotation files of annotation/RET. */
typedef struct hgr_annotations {
    char *captions_path, *graphs_path, *word2int_path, *int2word_path;
    json_t *captions;
    json_t *graphs; /* NULL when the release has no graph file */
} hgr_annotations;

/* Imports the videos of one split. */
static vtr_status import_set(vtr_import *im, hgr_set *s, vtr_hgr_features kind,
                             const hgr_annotations *a, int64_t *done, int64_t total, float **buf,
                             size_t *cap, vtr_error *err)
{
    const json_t *captions = a->captions;
    const char *captions_path = a->captions_path;
    const char *names_file = strrchr(s->names_path, '/') + 1;
    for (size_t i = 0; i < s->names.n; i++) {
        const char *name = s->names.items[i];
        int64_t index;
        bool added;
        vtr_status st = vtr_import_item(im, name, &index, &added, err);
        if (st != VTR_OK) {
            vtr_error_context(err, "%s: name %zu", s->names_path, i);
            return st;
        }
        if ((st = vtr_import_split(im, index, s->split, err)) != VTR_OK)
            return st;
        if (!added) {
            vtr_import_progress(im, ++*done, total);
            continue;
        }
        const json_t *caps = json_object_get(captions, name);
        if (!caps)
            return vtr_fail(err, VTR_ERR_NOT_FOUND,
                            "%s: no captions for video \"%s\" (named in %s)", captions_path, name,
                            names_file);
        if (!json_is_array(caps))
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: video \"%s\": captions are not a list",
                            captions_path, name);
        size_t j;
        const json_t *cap_text;
        json_array_foreach(caps, j, cap_text)
        {
            if (!json_is_string(cap_text))
                return vtr_fail(err, VTR_ERR_FORMAT,
                                "%s: video \"%s\": caption %zu is not a string", captions_path,
                                name, j);
            if ((st = vtr_import_caption(im, index, json_string_value(cap_text), err)) != VTR_OK ||
                (st = vtr_import_graph_of_caption(im, a->graphs, a->graphs_path,
                                                 json_string_value(cap_text), err)) != VTR_OK)
                return st;
        }
        if (vtr_import_has_store(im)) {
            vtr_tensor rows;
            if (kind == VTR_HGR_FRAMES) {
                vtr_error why;
                vtr_error_clear(&why);
                if (read_h5_video(s->h5, s->features_path, name, buf, cap, &rows, &why) != VTR_OK) {
                    if (why.status == VTR_ERR_NOMEM) {
                        if (err)
                            *err = why;
                        return why.status;
                    }
                    if ((st = vtr_import_item_failed(im, index, &why, err)) != VTR_OK)
                        return st;
                    vtr_import_progress(im, ++*done, total);
                    continue;
                }
            } else {
                const vtr_tensor *t = &s->mean.tensor;
                rows = (vtr_tensor){.dtype = t->dtype,
                                    .ndim = 2,
                                    .shape = {1, t->shape[1]},
                                    .data = (char *)t->data +
                                            i * (size_t)t->shape[1] * vtr_dtype_size(t->dtype)};
            }
            if ((st = vtr_import_features(im, index, &rows, err)) != VTR_OK) {
                vtr_error_context(err, "%s", s->features_path);
                return st;
            }
        }
        vtr_import_progress(im, ++*done, total);
    }
    return VTR_OK;
}

/* Reads the graph file and the vocabulary, where the release has them. */
static vtr_status load_optional_annotations(hgr_annotations *a, vtr_vocab **vocab, vtr_error *err)
{
    *vocab = NULL;
    vtr_status st;
    if ((st = vtr_import_load_graphs(a->graphs_path, true, &a->graphs, err)) != VTR_OK)
        return st;
    bool w2i = is_file(a->word2int_path), i2w = is_file(a->int2word_path);
    if (w2i != i2w)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: missing (the vocabulary needs it beside %s)",
                        w2i ? a->int2word_path : a->word2int_path,
                        strrchr(w2i ? a->word2int_path : a->int2word_path, '/') + 1);
    return w2i ? vtr_vocab_load_hgr_release(a->word2int_path, a->int2word_path, vocab, err)
               : VTR_OK;
}

/* Gives the import the vocabulary's words by id. */
static vtr_status import_vocabulary(vtr_import *im, const vtr_vocab *vocab, vtr_error *err)
{
    size_t n = (size_t)vtr_vocab_size(vocab);
    const char **words = malloc(n * sizeof *words);
    if (!words)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        words[i] = vtr_vocab_word(vocab, (int)i);
    vtr_status st = vtr_import_vocabulary(im, VTR_IMPORT_HGR_VOCABULARY, words, n, err);
    free(words);
    return st;
}

vtr_status vtr_import_hgr(const char *root, vtr_hgr_features kind, const char *feature_name,
                          const vtr_import_options *opt, vtr_import_stats *stats, vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    if (kind != VTR_HGR_FRAMES && kind != VTR_HGR_MEAN)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr import: unknown feature kind %d", (int)kind);
    const char *kind_dir = kind == VTR_HGR_FRAMES ? "SA" : "MP";
    const char *suffix = kind == VTR_HGR_FRAMES ? "_ft.hdf5" : "_ft.npy";
    hgr_set sets[HGR_SETS];
    for (size_t i = 0; i < HGR_SETS; i++)
        sets[i] =
            (hgr_set){.set = hgr_sets[i].set, .split = hgr_sets[i].split, .h5 = H5I_INVALID_HID};
    hgr_annotations anno = {
        .captions_path = vtr_path_join(root, "annotation/RET/ref_captions.json"),
        .graphs_path = vtr_path_join(root, "annotation/RET/sent2rolegraph.augment.json"),
        .word2int_path = vtr_path_join(root, "annotation/RET/word2int.json"),
        .int2word_path = vtr_path_join(root, "annotation/RET/int2word.npy"),
    };
    const char *captions_path = anno.captions_path;
    char *split_dir = vtr_path_join(root, "public_split");
    char *features_dir = NULL, *name = NULL, *extractor = NULL;
    json_t *source = NULL;
    vtr_vocab *vocab = NULL;
    vtr_import *im = NULL;
    float *buf = NULL;
    size_t cap = 0;
    vtr_status st = VTR_OK;

    /* the library prints its error stack by default; the library never prints */
    H5E_auto2_t saved_func = NULL;
    void *saved_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    if (!anno.captions_path || !anno.graphs_path || !anno.word2int_path || !anno.int2word_path ||
        !split_dir) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    struct stat sb;
    if (stat(root, &sb) != 0) {
        st = vtr_fail_errno(err, "%s", root);
        goto end;
    }
    if ((st = vtr_import_load_json(captions_path, &anno.captions, err)) != VTR_OK)
        goto end;
    if (!json_is_object(anno.captions)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: not an object {video: [captions]}", captions_path);
        goto end;
    }
    if ((st = load_optional_annotations(&anno, &vocab, err)) != VTR_OK)
        goto end;
    int64_t total = 0;
    size_t present = 0;
    for (size_t i = 0; i < HGR_SETS; i++) {
        char file[32];
        snprintf(file, sizeof file, "%s_names.npy", sets[i].set);
        if (!(sets[i].names_path = vtr_path_join(split_dir, file))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        if (!is_file(sets[i].names_path))
            continue;
        if ((st = vtr_npy_load_strings(sets[i].names_path, &sets[i].names, err)) != VTR_OK)
            goto end;
        total += (int64_t)sets[i].names.n;
        present++;
    }
    if (present == 0) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND,
                      "%s: no trn_names.npy, val_names.npy or "
                      "tst_names.npy",
                      split_dir);
        goto end;
    }
    if (opt->store) {
        char sub[32];
        snprintf(sub, sizeof sub, "ordered_feature/%s", kind_dir);
        if (!(features_dir = vtr_path_join(root, sub))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        if (feature_name)
            name = strdup(feature_name);
        else if ((st = only_subdir(features_dir, &name, err)) != VTR_OK)
            goto end;
        if (!name) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        for (size_t i = 0; i < HGR_SETS; i++) {
            if (!sets[i].names.items)
                continue;
            size_t n = strlen(features_dir) + strlen(name) + strlen(sets[i].set) + 16;
            if (!(sets[i].features_path = malloc(n))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
            snprintf(sets[i].features_path, n, "%s/%s/%s%s", features_dir, name, sets[i].set,
                     suffix);
            if ((st = open_features(&sets[i], kind, err)) != VTR_OK)
                goto end;
        }
        size_t n = strlen(kind_dir) + strlen(name) + 24;
        if (!(extractor = malloc(n))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        snprintf(extractor, n, "imported:hgr/%s/%s", kind_dir, name);
    }
    source = json_pack("{s:s, s:s, s:s?}", "layout", "hgr", "root", root, "features",
                       extractor ? extractor + strlen("imported:hgr/") : NULL);
    if (!source) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = vtr_import_begin(opt, "hgr", true, extractor, source, &im, err)) != VTR_OK)
        goto end;
    if (anno.graphs)
        vtr_import_graphs_read(im);
    if (vocab && (st = import_vocabulary(im, vocab, err)) != VTR_OK)
        goto end;
    int64_t done = 0;
    for (size_t i = 0; i < HGR_SETS; i++)
        if (sets[i].names.items &&
            (st = import_set(im, &sets[i], kind, &anno, &done, total, &buf, &cap, err)) != VTR_OK)
            goto end;
    st = vtr_import_finish(im, stats, err);
    im = NULL;
end:
    vtr_import_abort(im);
    for (size_t i = 0; i < HGR_SETS; i++)
        close_set(&sets[i]);
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    free(buf);
    json_decref(anno.captions);
    json_decref(anno.graphs);
    json_decref(source);
    vtr_vocab_free(vocab);
    free(anno.captions_path);
    free(anno.graphs_path);
    free(anno.word2int_path);
    free(anno.int2word_path);
    free(split_dir);
    free(features_dir);
    free(name);
    free(extractor);
    return st;
}
