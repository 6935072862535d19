/* Importers: annotations and features that others released, brought into the catalog
 * (lib/catalog.h) and, where the layout carries features, a feature store
 * (lib/feature_store.h). Layouts, split mappings and commands: docs/importers.md.
 *
 * One function per layout (import_LAYOUT.c):
 *   npy-dir   DIR/KEY.npy per item, (N, D) or (D,)             features only
 *   precomp   SCAN: {split}_ims.npy (N, R, D) + {split}_caps.txt  captions, splits, features
 *   hgr       HGR release root: ref_captions.json, {trn,val,tst}_names.npy, per-video
 *             HDF5 frame features or mean-pooled NPY                captions, splits, features
 *             [+ sent2rolegraph.augment.json, word2int.json + int2word.npy]
 *                                                       role graphs, vocabulary
 *   msrvtt    MSR-VTT videodatainfo JSON                        captions, splits
 *             [+ sent2rolegraph.augment.json beside it]         role graphs
 *   vatex     VATEX JSON                                         captions, splits
 *   karpathy  COCO / Flickr30K Karpathy JSON                     captions, splits
 *
 * Every importer reads and checks all of its input first, streaming features into a new
 * store as it goes, and then writes the items, captions (with their role graphs, where the
 * layout has them), splits, the vocabulary (hgr) and the store's entry in one catalog
 * transaction, finishing the store (an atomic rename) just before the commit. A failure
 * anywhere leaves the catalog as it was and no store behind.
 *
 * What the catalog gets:
 * - the dataset, created when absent (with opt->root as its root);
 * - every item, in the order of the layout's files (so split lists keep the reference
 *   order); an item already in the catalog keeps its row (path, status) untouched, a new
 *   one is added with no path, status "ok" when the import stored its features, "failed"
 *   (with the cause) when they were skipped, else "pending";
 * - captions at ordinals 0, 1, ... in file order (re-importing replaces them in place);
 * - split memberships, named by the mapping of docs/importers.md ("train", "val",
 *   "test", ...);
 * - the feature store under opt->store_name, with its absolute path, extractor
 *   ("imported:LAYOUT..."), dim, dtype, rows, items and the import's source as config.
 *
 * Errors are one line naming the file and the item: "data/test_caps.txt: 4999 lines for
 * 1000 images of test_ims.npy; expected 5 per image (5000)". Per-item feature problems (an
 * unreadable NPY of one item, a video missing from the HDF5, a dim that differs) fail the
 * import, unless opt->on_skip is set: then the item is reported through it, stored
 * without features (status "failed"), and the import goes on.
 */
#ifndef VTR_IMPORT_H
#define VTR_IMPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/catalog.h"
#include "lib/error.h"
#include "lib/tensor.h"

/* Told about an item whose features were skipped, and why. */
typedef void (*vtr_import_skip_fn)(void *ctx, const char *key, const vtr_error *why);

/* Told how far feature copying has come (items done of total; total -1 when unknown). */
typedef void (*vtr_import_progress_fn)(void *ctx, int64_t done, int64_t total);

typedef struct vtr_import_options {
    vtr_catalog *catalog;   /* open catalog; not owned; required */
    const char *dataset;    /* dataset name; required; created when absent */
    const char *root;       /* root directory recorded when the dataset is created; may be NULL */
    const char *store;      /* feature store directory to build; NULL: annotations only
                               (npy-dir requires one) */
    const char *store_name; /* its name in the catalog; NULL: the directory's base name */
    vtr_dtype store_dtype;  /* VTR_F32 (0) or VTR_F16 */
    bool replace_store;     /* replace an existing store (lib/feature_store.h) */
    vtr_import_skip_fn on_skip; /* NULL: a bad feature item fails the import */
    void *skip_ctx;
    vtr_import_progress_fn on_progress; /* may be NULL */
    void *progress_ctx;
} vtr_import_options;

typedef struct vtr_import_stats {
    int64_t items;                  /* items imported (new or already in the catalog) */
    int64_t new_items;              /* of them, items the catalog did not have */
    int64_t captions;               /* captions written */
    int64_t skipped;                /* items whose features were skipped through on_skip */
    int64_t feature_items;          /* items in the store */
    int64_t feature_rows;           /* rows in the store */
    int64_t dim;                    /* the store's dim; 0 without a store */
    bool graphs_read;               /* the layout's role graphs were read (hgr) */
    int64_t graphs;                 /* captions stored with a role graph */
    int64_t captions_without_graph; /* with graphs_read: captions that have none; else 0 */
    int64_t vocabulary_words;       /* words of the vocabulary stored; 0: none */
    json_t *splits;                 /* {split name: items}, in first-seen order; owned */
} vtr_import_stats;

/* Frees stats->splits; safe on a zeroed or already-freed value. */
void vtr_import_stats_free(vtr_import_stats *stats);

/* A source file or directory with the split its items belong to; split NULL: none given
 * (the importer may infer one; see each layout). */
typedef struct vtr_import_source {
    const char *path;
    const char *split;
} vtr_import_source;

/* ---- the layouts ------------------------------------------------------------------- */

/* npy-dir: each DIR/KEY.npy (float32 or float16, (N, D) or (D,) as one row) is item KEY,
 * files in byte order of their names; files not ending in ".npy" and hidden files are
 * ignored. A source's split, when given, is set on its items. Requires opt->store.
 * A key found in two directories is an error. */
vtr_status vtr_import_npy_dir(const vtr_import_source *dirs, size_t n,
                              const vtr_import_options *opt, vtr_import_stats *stats,
                              vtr_error *err);

/* precomp (SCAN / VSE++ / VSE∞): for each split of train, dev, test, testall whose files
 * are in dir, {split}_ims.npy (N, R, D) or (N, D), and {split}_caps.txt, with exactly
 * captions_per_image (0: 5) lines per image, image i owning lines i*k .. i*k+k-1. Keys are
 * the lines of {split}_ids.txt when present (N lines, or k*N with each id repeated k
 * times), else "{split}_{i}"; an image already imported from an earlier split (the same
 * id) only gains the split. Splits: train -> train, dev -> val, test -> test, testall ->
 * testall. */
vtr_status vtr_import_precomp(const char *dir, int captions_per_image,
                              const vtr_import_options *opt, vtr_import_stats *stats,
                              vtr_error *err);

/* Which features of the HGR release go into the store. */
typedef enum vtr_hgr_features {
    VTR_HGR_FRAMES, /* ordered_feature/SA/NAME/{set}_ft.hdf5: (frames, dim) per video */
    VTR_HGR_MEAN,   /* ordered_feature/MP/NAME/{set}_ft.npy: (n, dim), one row per video */
} vtr_hgr_features;

/* hgr: the release directory root (annotation/RET/ref_captions.json and
 * public_split/{trn,val,tst}_names.npy, of which at least one split; sets trn -> train,
 * val -> val, tst -> test). Items are the named videos, split after split; each needs
 * captions in ref_captions.json. With opt->store, features of kind `kind` from the
 * directory `feature_name` (e.g. "resnet152.pth"; NULL: the only one there). HDF5
 * datasets are looked up by the name with '/' replaced by '_', as the HGR code does.
 * Beside ref_captions.json, when present:
 * - sent2rolegraph.augment.json {caption: [nodes, edges]}, read as Python's json reads it
 *   (a duplicate key's last value counts): each imported caption's graph is validated with
 *   vtr_role_graph_parse and stored with the caption (vtr_catalog_set_caption_graph) as
 *   compact JSON. An invalid graph fails the import with one line naming the file, the
 *   caption and the cause, as a malformed caption does (opt->on_skip is for features).
 *   Graphs of captions that are not imported are not read. Captions the file has no
 *   graph for are counted (stats->captions_without_graph); training gives them the
 *   reference's fallback graph.
 * - word2int.json and int2word.npy (both, or neither): read and checked against each
 *   other by vtr_vocab_load_hgr_release and stored in the catalog as the dataset's
 *   vocabulary VTR_IMPORT_HGR_VOCABULARY. */
/* The name under which vtr_import_hgr stores the release's vocabulary in the catalog
 * (vtr_catalog_get_vocabulary, then vtr_vocab_hgr_from_words). */
#define VTR_IMPORT_HGR_VOCABULARY "hgr"

vtr_status vtr_import_hgr(const char *root, vtr_hgr_features kind, const char *feature_name,
                          const vtr_import_options *opt, vtr_import_stats *stats, vtr_error *err);

/* msrvtt: videodatainfo JSON files ({"videos": [{video_id, split}], "sentences":
 * [{video_id, caption}]}); splits train -> train, validate -> val, test -> test. A
 * video's captions in the order of "sentences". When a sent2rolegraph.augment.json
 * {caption: [nodes, edges]} lies beside a file (as `vtr-synth --scenes` writes it), the
 * graphs of that file's captions are read, validated and stored as vtr_import_hgr does,
 * and the stats count them (graphs_read). */
vtr_status vtr_import_msrvtt(const char *const *paths, size_t n, const vtr_import_options *opt,
                             vtr_import_stats *stats, vtr_error *err);

/* vatex: JSON arrays of {videoID, enCap: [captions], chCap}; the English captions are
 * imported (a file without enCap, like the unannotated test set, gives items without
 * captions). A source without a split gets it from the official file names:
 * vatex_training* -> train, vatex_validation* -> val, vatex_public_test* and
 * vatex_private_test* -> test; other names get none. */
vtr_status vtr_import_vatex(const vtr_import_source *files, size_t n, const vtr_import_options *opt,
                            vtr_import_stats *stats, vtr_error *err);

/* karpathy: {"images": [{filename, split, sentences: [{raw, tokens}]}]} (dataset_coco.json,
 * dataset_flickr30k.json). Keys are the file names without extension (what vtr-decode
 * names the image). Captions are "raw" (the tokens joined by spaces when raw is absent).
 * Splits: train -> train, val -> val, test -> test, restval -> train and restval (the VSE
 * references train on train + restval: 113,287 COCO images). */
vtr_status vtr_import_karpathy(const char *const *paths, size_t n, const vtr_import_options *opt,
                               vtr_import_stats *stats, vtr_error *err);

/* ---- for the importers: one import in progress -------------------------------------- */

typedef struct vtr_import vtr_import;

/* Starts an import: checks opt, and when `features` is true and opt->store is set opens
 * the store writer. `layout` names the layout ("hgr"), `extractor` the store's extractor
 * string, `source` (copied; may be NULL) the provenance put into meta.json and the
 * catalog's config. *out is NULL on failure. */
vtr_status vtr_import_begin(const vtr_import_options *opt, const char *layout, bool features,
                            const char *extractor, const json_t *source, vtr_import **out,
                            vtr_error *err);

/* Whether features are being stored. */
bool vtr_import_has_store(const vtr_import *im);

/* The item with this key (UTF-8, non-empty, no tab, CR or LF): its index in the import,
 * and *added says whether it is new to this import. VTR_ERR_INVALID for a bad key. */
vtr_status vtr_import_item(vtr_import *im, const char *key, int64_t *index, bool *added,
                           vtr_error *err);

int64_t vtr_import_items(const vtr_import *im);
const char *vtr_import_key(const vtr_import *im, int64_t index);

/* Appends a caption to item `index` (the next ordinal). */
vtr_status vtr_import_caption(vtr_import *im, int64_t index, const char *text, vtr_error *err);

/* Attaches a role graph (JSON text [nodes, edges], valid UTF-8; copied) to the caption
 * last given by vtr_import_caption; VTR_ERR_INVALID when there is none or it has one. It
 * is stored in the catalog with the caption (vtr_catalog_set_caption_graph). */
vtr_status vtr_import_caption_graph(vtr_import *im, const char *graph, vtr_error *err);

/* Says that the layout's role graphs were read: the stats count the captions without one,
 * and a graph that an earlier import stored for such a caption is removed. Without this
 * call the captions' stored graphs are left as they are (unless the text changes). */
void vtr_import_graphs_read(vtr_import *im);

/* Gives the dataset's vocabulary (words by id; copied), stored in the catalog under name
 * (vtr_catalog_put_vocabulary) in the import's transaction. Once per import. */
vtr_status vtr_import_vocabulary(vtr_import *im, const char *name, const char *const *words,
                                 size_t n, vtr_error *err);

/* Captions given to item `index` so far. */
int64_t vtr_import_caption_count(const vtr_import *im, int64_t index);

/* Puts item `index` into split (non-empty); twice is a no-op. */
vtr_status vtr_import_split(vtr_import *im, int64_t index, const char *split, vtr_error *err);

/* Stores item `index`'s features: rows (n, D) float32/float16. A refusal of the store
 * (dim differs, not 2-D, ...) is an item error: it goes to vtr_import_item_failed; other
 * failures (I/O) end the import. */
vtr_status vtr_import_features(vtr_import *im, int64_t index, const vtr_tensor *rows,
                               vtr_error *err);

/* An item-level failure `why` of item `index`: with opt->on_skip, reports it, marks the
 * item failed and returns VTR_OK; without, copies why into err and returns its status. */
vtr_status vtr_import_item_failed(vtr_import *im, int64_t index, const vtr_error *why,
                                  vtr_error *err);

/* Calls opt->on_progress, if any. */
void vtr_import_progress(vtr_import *im, int64_t done, int64_t total);

/* Writes everything in one transaction and finishes the store (see the top of this
 * file); fills stats (may be NULL; free with vtr_import_stats_free). Always frees im. */
vtr_status vtr_import_finish(vtr_import *im, vtr_import_stats *stats, vtr_error *err);

/* Abandons the import: nothing is written, the store build is removed. Safe on NULL. */
void vtr_import_abort(vtr_import *im);

/* ---- helpers shared by the importers ------------------------------------------------- */

/* Loads a JSON file: VTR_ERR_IO when it cannot be read, VTR_ERR_FORMAT with line and
 * column when it is not JSON or an object repeats a key (as the record reader, an
 * annotation file's duplicate key is an error, not a silent choice of one value). Errors
 * start with path. */
vtr_status vtr_import_load_json(const char *path, json_t **out, vtr_error *err);

/* Loads a role graph file {caption: [nodes, edges]} (HGR's sent2rolegraph.augment.json,
 * vtr-search --graphs) into *graphs as Python's json reads it: a duplicate key's last
 * value counts (HGR's file repeats captions; the one exception to
 * vtr_import_load_json's rule). When optional, a path that is no file gives *graphs
 * NULL and VTR_OK. VTR_ERR_FORMAT when it is not JSON or not an object. */
vtr_status vtr_import_load_graphs(const char *path, bool optional, json_t **graphs,
                                  vtr_error *err);

/* Attaches the role graph of the caption just given by vtr_import_caption, when graphs
 * (may be NULL) has one: validated with vtr_role_graph_parse (an invalid graph is
 * VTR_ERR_FORMAT naming path, the caption and the cause) and stored as compact JSON in
 * the file's node order (vtr_import_caption_graph). */
vtr_status vtr_import_graph_of_caption(vtr_import *im, const json_t *graphs, const char *path,
                                       const char *caption, vtr_error *err);

/* Imports annotation files that carry no features (msrvtt, karpathy): begins an import of
 * `layout` with the paths as provenance, calls import_file on each path in order, and
 * finishes (or abandons it on the first error). */
typedef vtr_status (*vtr_import_file_fn)(vtr_import *im, const char *path, vtr_error *err);
vtr_status vtr_import_annotation_files(const char *layout, const char *const *paths, size_t n,
                                       vtr_import_file_fn import_file,
                                       const vtr_import_options *opt, vtr_import_stats *stats,
                                       vtr_error *err);

#endif
