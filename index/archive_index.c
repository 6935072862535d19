/* Incremental indexing of a video archive (archive_index.h, docs/indexing.md). */
#define _XOPEN_SOURCE 700 /* realpath, strdup */
#include "archive_index.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decode/decode_ahead.h"
#include "index/archive_source.h"
#include "index/embedder.h"
#include "index/embedding_index.h"
#include "index/media_embedder.h"
#include "index/thumbnail.h"
#include "lib/catalog.h"
#include "lib/file.h"
#include "lib/hash.h"
#include "lib/json.h"

/* Compact when the index has more segments than this, or more tombstones than a quarter
 * of its live rows. */
#define COMPACT_SEGMENTS 8

static const char *const outcome_names[] = {"added", "updated", "failed", "removed"};

const char *vtr_archive_outcome_name(vtr_archive_outcome o)
{
    return (unsigned)o < sizeof outcome_names / sizeof *outcome_names ? outcome_names[o] : "?";
}

void vtr_archive_options_defaults(vtr_archive_options *o)
{
    memset(o, 0, sizeof *o);
    o->device = VTR_DEVICE_CPU;
    o->resize = -1;
    o->crop = -1;
    o->commit_items = 32;
    o->decode_ahead = 2;
}

/* ---- the recorded model ----------------------------------------------------------- */

void vtr_archive_model_free(vtr_archive_model *m)
{
    if (!m)
        return;
    free(m->model_id);
    free(m->checkpoint);
    free(m->arch);
    free(m->weights);
    free(m->weights_sha256);
    memset(m, 0, sizeof *m);
}

vtr_status vtr_archive_model_parse(const char *text, vtr_archive_model *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loads(text ? text : "", 0, &je);
    const char *format = json_string_value(json_object_get(root, "format"));
    const char *id = NULL, *ckpt = NULL, *arch = NULL, *w = NULL, *sha = NULL;
    int frames = 0, resize = 0, crop = 0;
    const char *why = !root ? "not JSON"
                      : !format || strcmp(format, VTR_ARCHIVE_INDEX_FORMAT) != 0
                          ? "another format"
                          : NULL;
    if (!why && json_unpack_ex(root, &je, 0,
                               "{s:s, s:s, s:{s:s, s:s, s:s}, s:i, s:{s:i, s:i}}",
                               "model_id", &id, "checkpoint", &ckpt, "backbone", "arch", &arch,
                               "weights", &w, "sha256", &sha, "frames", &frames, "preprocess",
                               "resize", &resize, "crop", &crop) != 0)
        why = je.text;
    if (why) {
        vtr_fail(err, VTR_ERR_FORMAT, "the index's model record is not one vtr-index wrote (%s)",
                 why);
        json_decref(root);
        return VTR_ERR_FORMAT;
    }
    out->model_id = strdup(id);
    out->checkpoint = strdup(ckpt);
    out->arch = strdup(arch);
    out->weights = strdup(w);
    out->weights_sha256 = strdup(sha);
    out->frames = frames;
    out->resize = resize;
    out->crop = crop;
    json_decref(root);
    if (!out->model_id || !out->checkpoint || !out->arch || !out->weights ||
        !out->weights_sha256) {
        vtr_archive_model_free(out);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    return VTR_OK;
}

/* The model text of a new index (malloc'ed), NULL when out of memory. */
static char *model_text(const char *model_id, const char *checkpoint, const char *arch,
                        const char *weights, const char *sha, int frames, int resize, int crop)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:i, s:{s:i, s:i}}", "format",
                          VTR_ARCHIVE_INDEX_FORMAT, "model_id", model_id, "checkpoint",
                          checkpoint, "backbone", "arch", arch, "weights", weights, "sha256",
                          sha, "frames", frames, "preprocess", "resize", resize, "crop", crop);
    char *text = j ? json_dumps(j, VTR_JSON_FLAGS | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return text;
}

/* Reads the model record of the index at dir into *rec; *exists false (and rec zeroed)
 * when dir holds no index yet. */
static vtr_status read_recorded_model(const char *dir, bool *exists, vtr_archive_model *rec,
                                      vtr_error *err)
{
    memset(rec, 0, sizeof *rec);
    *exists = false;
    char *manifest = vtr_path_join(dir, "index.sqlite");
    if (!manifest)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    struct stat sb;
    bool present = stat(manifest, &sb) == 0;
    free(manifest);
    if (!present)
        return VTR_OK;
    vtr_embedding_index *ix = NULL;
    vtr_status st = vtr_embedding_index_open(dir, &ix, err);
    if (st != VTR_OK)
        return st;
    *exists = true;
    st = vtr_archive_model_parse(vtr_embedding_index_model(ix), rec, err);
    if (st != VTR_OK)
        vtr_error_context(err, "index %s", dir);
    vtr_embedding_index_close(ix);
    return st;
}

/* ---- one run ---------------------------------------------------------------------- */

typedef struct work_item {
    const vtr_archive_file *file;
    const vtr_item *known;    /* its catalog row, NULL for a new file */
    /* the outcome, filled by process_item */
    vtr_archive_outcome outcome;
    double duration;
    vtr_error error;
    /* its sampled frames for the catalog (an embedded item only; freed by record_batch) */
    size_t n_frames;
    vtr_item_frame *frames; /* each jpeg malloc'ed; vector points into vectors */
    uint16_t *vectors;      /* (n_frames, E) float16 */
} work_item;

typedef struct indexer {
    const vtr_archive_options *o;
    vtr_archive_stats stats;
    vtr_archive_files files;
    vtr_backbone *backbone;
    vtr_embedder *embedder;
    vtr_media_embedder *media;
    vtr_decode_ahead *ahead;   /* the files to embed, decoded o->decode_ahead ahead */
    vtr_embedding_index_writer *writer;
    vtr_catalog *catalog;
    int64_t dataset;
    vtr_item_list known;       /* the catalog's items */
    const vtr_item **by_key;   /* known.items sorted by key */
    const work_item *marked;   /* the item recorded in progress (see mark_in_progress) */
} indexer;

static int item_key_cmp(const void *a, const void *b)
{
    return strcmp((*(const vtr_item *const *)a)->key, (*(const vtr_item *const *)b)->key);
}

static int string_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether key is one of the source's files (files are sorted by key). */
static bool in_source(const indexer *ix, const char *key)
{
    size_t lo = 0, hi = ix->files.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix->files.files[mid].key, key);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static const vtr_item *find_known(const indexer *ix, const char *key)
{
    vtr_item probe = {.key = key};
    const vtr_item *p = &probe;
    const vtr_item **hit =
        bsearch(&p, ix->by_key, ix->known.n, sizeof *ix->by_key, item_key_cmp);
    return hit ? *hit : NULL;
}

static void free_frames(work_item *w)
{
    for (size_t i = 0; i < w->n_frames; i++)
        free((void *)w->frames[i].jpeg);
    free(w->frames);
    free(w->vectors);
    w->frames = NULL;
    w->vectors = NULL;
    w->n_frames = 0;
}

/* Keeps what the catalog records of an embedded item's sampled frames: their times, a
 * picture of each (index/thumbnail.h) and their one-frame embeddings as float16. A frame
 * whose picture cannot be made keeps none (the item is not failed for it). */
static vtr_status keep_frames(indexer *ix, work_item *w, const vtr_media_embedding *me,
                              vtr_error *err)
{
    const vtr_tensor *fr = &me->decoded->frames;
    size_t n = (size_t)fr->shape[0], E = (size_t)vtr_embedder_dim(ix->embedder);
    int h = (int)fr->shape[1], wd = (int)fr->shape[2];
    const json_t *times = json_object_get(me->decoded->meta, "timestamps");
    w->frames = calloc(n, sizeof *w->frames);
    w->vectors = malloc(n * E * sizeof *w->vectors);
    if (!w->frames || !w->vectors) {
        free_frames(w);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    w->n_frames = n;
    for (size_t i = 0; i < n; i++) {
        vtr_item_frame *f = &w->frames[i];
        const json_t *t = json_array_get(times, i);
        f->time_s = json_is_number(t) ? json_number_value(t) : -1;
        for (size_t d = 0; d < E; d++)
            w->vectors[i * E + d] = vtr_float_to_half(me->frame_vectors[i * E + d]);
        f->vector = w->vectors + i * E;
        f->dim = (int64_t)E;
        uint8_t *jpeg = NULL;
        vtr_error pic;
        vtr_status st = vtr_thumbnail_jpeg((const uint8_t *)fr->data + i * (size_t)h * wd * 3,
                                           h, wd, VTR_THUMBNAIL_WIDTH, VTR_THUMBNAIL_HEIGHT,
                                           VTR_THUMBNAIL_QUALITY, &jpeg, &f->jpeg_size, &pic);
        if (st == VTR_ERR_NOMEM) {
            free_frames(w);
            *err = pic;
            return st;
        }
        f->jpeg = jpeg;
    }
    return VTR_OK;
}

/* Decodes, extracts, embeds and stages one file. An item failure fills w->error and
 * returns VTR_OK with outcome FAILED; a failure of the run (the backbone, the model or
 * the index writer broke) is returned. */
static vtr_status process_item(indexer *ix, work_item *w, vtr_error *err)
{
    const vtr_archive_file *f = w->file;
    w->duration = -1;
    vtr_status st;
    if (w->outcome == VTR_ARCHIVE_FAILED)
        goto failed; /* the last run died on it: w->error says so (plan) */
    vtr_error_clear(&w->error);
    vtr_media_embedding me;
    vtr_decoded_item item;
    st = vtr_decode_ahead_next(ix->ahead, &item, &w->error);
    if (st == VTR_ERR_NOMEM) {
        *err = w->error;
        return st;
    }
    if (st != VTR_OK)
        goto failed;
    st = vtr_media_embedder_embed_decoded(ix->media, f->path, f->key, &item, &me, &w->error);
    w->duration = me.duration;
    if (st != VTR_OK && vtr_media_embedder_broken(ix->media)) {
        *err = w->error;
        return st;
    }
    if (st != VTR_OK)
        goto failed;
    vtr_tensor t = {.dtype = VTR_F32,
                    .ndim = 2,
                    .shape = {me.vectors, vtr_embedder_dim(ix->embedder)},
                    .data = (float *)me.embedding};
    st = vtr_embedding_index_writer_add(ix->writer, f->key, &t, &w->error);
    if (st == VTR_ERR_INVALID) /* refused (a key that is not UTF-8, a zero vector) */
        goto failed;
    if (st != VTR_OK) {
        *err = w->error;
        return st;
    }
    w->outcome = w->known ? VTR_ARCHIVE_UPDATED : VTR_ARCHIVE_ADDED;
    return keep_frames(ix, w, &me, err);
failed:
    w->outcome = VTR_ARCHIVE_FAILED;
    /* an embedding of an earlier version of the file must not stay searchable */
    st = vtr_embedding_index_writer_remove(ix->writer, f->key, err);
    /* not there, or a key the index refuses (so never stored): nothing to remove */
    return st == VTR_ERR_NOT_FOUND || st == VTR_ERR_INVALID ? VTR_OK : st;
}

/* The path the catalog records for a file (malloc'ed): absolute where it can be. */
static char *catalog_path(const indexer *ix, const vtr_archive_file *f)
{
    if (ix->files.is_dir)
        return vtr_path_join(ix->files.root, f->key);
    char *abs = realpath(f->path, NULL);
    return abs ? abs : strdup(f->path);
}

/* The catalog row of one file (in the caller's transaction). */
static vtr_status record_item(indexer *ix, const vtr_archive_file *f, double duration,
                              vtr_item_status status, const char *error, int64_t *id,
                              vtr_error *err)
{
    char *path = catalog_path(ix, f);
    if (!path)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_item it = {.dataset_id = ix->dataset,
                   .key = f->key,
                   .path = path,
                   .size_bytes = f->size,
                   .mtime_ns = f->mtime_ns,
                   .duration_s = duration,
                   .status = status,
                   .error = error};
    vtr_status st = vtr_catalog_upsert_item(ix->catalog, &it, id, err);
    free(path);
    return st;
}

/* Records a batch's outcomes in the catalog, in one transaction. */
static vtr_status record_batch(indexer *ix, work_item *batch, size_t n, vtr_error *err)
{
    vtr_status st = vtr_catalog_begin(ix->catalog, err);
    for (size_t i = 0; i < n && st == VTR_OK; i++) {
        const work_item *w = &batch[i];
        bool failed = w->outcome == VTR_ARCHIVE_FAILED;
        int64_t id;
        st = record_item(ix, w->file, w->duration, failed ? VTR_ITEM_FAILED : VTR_ITEM_OK,
                         failed ? w->error.msg : NULL, &id, err);
        if (st == VTR_OK) /* a failed file keeps no frames */
            st = vtr_catalog_put_item_frames(ix->catalog, id, w->n_frames, w->frames, err);
    }
    for (size_t i = 0; i < n; i++)
        free_frames(&batch[i]);
    if (st == VTR_OK && (st = vtr_catalog_commit(ix->catalog, err)) == VTR_OK)
        ix->marked = NULL; /* its mark is replaced by its outcome */
    if (st != VTR_OK)
        vtr_catalog_rollback(ix->catalog, NULL);
    return st;
}

/* Decoding a file runs FFmpeg on whatever the file holds, and a library can crash the
 * process. So before an item's work the catalog records it "pending" with this reason,
 * and the item done before it goes back to plain "pending" (its batch is not committed
 * yet: a rerun redoes it). A run that dies leaves exactly one item marked; the next run
 * records it failed with the reason instead of dying on it again (plan). */
#define IN_PROGRESS "vtr-index stopped while processing this file (it crashed or was killed)"

/* A run that stops with an error of its own (not the item's) takes the mark back. */
static void clear_mark(indexer *ix)
{
    vtr_error ignored;
    if (vtr_catalog_begin(ix->catalog, &ignored) != VTR_OK)
        return;
    if (record_item(ix, ix->marked->file, -1, VTR_ITEM_PENDING, NULL, NULL, &ignored) == VTR_OK &&
        vtr_catalog_commit(ix->catalog, &ignored) == VTR_OK)
        ix->marked = NULL;
    else
        vtr_catalog_rollback(ix->catalog, NULL);
}

static vtr_status mark_in_progress(indexer *ix, const work_item *w, vtr_error *err)
{
    vtr_status st = vtr_catalog_begin(ix->catalog, err);
    if (st == VTR_OK && ix->marked)
        st = record_item(ix, ix->marked->file, -1, VTR_ITEM_PENDING, NULL, NULL, err);
    if (st == VTR_OK)
        st = record_item(ix, w->file, -1, VTR_ITEM_PENDING, IN_PROGRESS, NULL, err);
    if (st == VTR_OK && (st = vtr_catalog_commit(ix->catalog, err)) == VTR_OK)
        ix->marked = w;
    if (st != VTR_OK)
        vtr_catalog_rollback(ix->catalog, NULL);
    return st;
}

/* Updates the catalog's path of items that are unchanged but found at another path (the
 * archive's directory was moved or renamed), in one transaction. */
static vtr_status record_moved(indexer *ix, vtr_error *err)
{
    vtr_status st = VTR_OK;
    bool begun = false;
    for (size_t i = 0; i < ix->files.n && st == VTR_OK; i++) {
        const vtr_archive_file *f = &ix->files.files[i];
        const vtr_item *k = find_known(ix, f->key);
        if (!k || k->size_bytes != f->size || k->mtime_ns != f->mtime_ns)
            continue;
        char *path = catalog_path(ix, f);
        if (!path)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        if (!k->path || strcmp(k->path, path) != 0) {
            if (!begun && (st = vtr_catalog_begin(ix->catalog, err)) == VTR_OK)
                begun = true;
            vtr_item it = *k;
            it.path = path;
            if (st == VTR_OK)
                st = vtr_catalog_upsert_item(ix->catalog, &it, NULL, err);
        }
        free(path);
    }
    if (!begun)
        return st;
    if (st == VTR_OK)
        return vtr_catalog_commit(ix->catalog, err);
    vtr_catalog_rollback(ix->catalog, NULL);
    return st;
}

/* Publishes what the writer staged; counts a new generation. */
static vtr_status commit_index(indexer *ix, vtr_error *err)
{
    int64_t before = vtr_embedding_index_writer_generation(ix->writer);
    vtr_status st = vtr_embedding_index_writer_commit(ix->writer, err);
    if (st == VTR_OK && vtr_embedding_index_writer_generation(ix->writer) != before)
        ix->stats.commits++;
    return st;
}

/* The live keys of the index's last generation, sorted (for items the catalog lost in
 * a crash between the two commits). */
static vtr_status index_keys(const char *dir, char ***keys, size_t *n, vtr_error *err)
{
    *keys = NULL;
    *n = 0;
    vtr_embedding_index *ix = NULL;
    vtr_status st = vtr_embedding_index_open(dir, &ix, err);
    if (st != VTR_OK)
        return st;
    int64_t rows = vtr_embedding_index_rows(ix);
    char **v = calloc(rows > 0 ? (size_t)rows : 1, sizeof *v);
    if (!v) {
        vtr_embedding_index_close(ix);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    size_t count = 0;
    for (int64_t r = 0; r < rows && st == VTR_OK; r++) {
        char *key = NULL;
        int64_t vector = 0;
        bool live = false;
        st = vtr_embedding_index_key(ix, r, &key, &vector, &live, err);
        if (st == VTR_OK && live && vector == 0)
            v[count++] = key;
        else
            free(key);
    }
    vtr_embedding_index_close(ix);
    if (st != VTR_OK) {
        for (size_t i = 0; i < count; i++)
            free(v[i]);
        free(v);
        return st;
    }
    qsort(v, count, sizeof *v, string_cmp);
    *keys = v;
    *n = count;
    return VTR_OK;
}

static void emit(const indexer *ix, const char *key, vtr_archive_outcome o, const vtr_error *e)
{
    if (ix->o->on_item)
        ix->o->on_item(ix->o->ctx, key, o, e);
}

/* Drops what the source no longer has: from the index (also rows the catalog does not
 * know, left by a run killed between its two commits), then from the catalog. */
static vtr_status remove_gone(indexer *ix, vtr_error *err)
{
    char **keys = NULL;
    size_t n_keys = 0;
    vtr_status st = index_keys(ix->o->index_dir, &keys, &n_keys, err);
    if (st != VTR_OK)
        return st;
    int64_t staged = 0;
    for (size_t i = 0; i < n_keys && st == VTR_OK; i++) {
        if (in_source(ix, keys[i]))
            continue;
        st = vtr_embedding_index_writer_remove(ix->writer, keys[i], err);
        staged++;
        if (st == VTR_OK && !find_known(ix, keys[i])) { /* unknown to the catalog */
            ix->stats.removed++;
            emit(ix, keys[i], VTR_ARCHIVE_REMOVED, NULL);
        }
    }
    for (size_t i = 0; i < n_keys; i++)
        free(keys[i]);
    free(keys);
    if (st == VTR_OK && staged)
        st = commit_index(ix, err);
    if (st != VTR_OK)
        return st;
    bool any = false;
    for (size_t i = 0; i < ix->known.n && !any; i++)
        any = !in_source(ix, ix->known.items[i].key);
    if (!any)
        return VTR_OK;
    if ((st = vtr_catalog_begin(ix->catalog, err)) != VTR_OK)
        return st;
    for (size_t i = 0; i < ix->known.n && st == VTR_OK; i++)
        if (!in_source(ix, ix->known.items[i].key))
            st = vtr_catalog_delete_item(ix->catalog, ix->known.items[i].id, err);
    if (st == VTR_OK)
        st = vtr_catalog_commit(ix->catalog, err);
    else
        vtr_catalog_rollback(ix->catalog, NULL);
    if (st != VTR_OK)
        return st;
    for (size_t i = 0; i < ix->known.n; i++)
        if (!in_source(ix, ix->known.items[i].key)) {
            ix->stats.removed++;
            emit(ix, ix->known.items[i].key, VTR_ARCHIVE_REMOVED, NULL);
        }
    return VTR_OK;
}

/* Compacts when tombstones or segments have piled up. */
static vtr_status maybe_compact(indexer *ix, vtr_error *err)
{
    vtr_embedding_index *r = NULL;
    vtr_status st = vtr_embedding_index_open(ix->o->index_dir, &r, err);
    if (st != VTR_OK)
        return st;
    int64_t segments = vtr_embedding_index_segments(r);
    int64_t live = vtr_embedding_index_live_rows(r);
    int64_t dead = vtr_embedding_index_rows(r) - live;
    vtr_embedding_index_close(r);
    if (segments <= COMPACT_SEGMENTS && (dead == 0 || dead <= live / 4))
        return VTR_OK;
    st = vtr_embedding_index_writer_compact(ix->writer, err);
    if (st == VTR_OK)
        ix->stats.compacted = true;
    return st;
}

/* Brings the approximate index, when the index has one, to the last generation
 * (approx_index.h: FAISS's add for the new rows, or a rebuild after a compaction). */
static vtr_status update_approx(indexer *ix, vtr_error *err)
{
    vtr_embedding_index *r = NULL;
    vtr_status st = vtr_embedding_index_open(ix->o->index_dir, &r, err);
    if (st == VTR_OK)
        st = vtr_approx_index_update(r, ix->o->index_dir, &ix->stats.approx, err);
    vtr_embedding_index_close(r);
    return st;
}

/* Opens the model, the backbone, the index and the catalog, checking the model against
 * the index's record. */
static vtr_status open_all(indexer *ix, vtr_error *err)
{
    const vtr_archive_options *o = ix->o;
    vtr_archive_model rec;
    bool exists = false;
    char *text = NULL, *weights_abs = NULL, *ckpt_abs = NULL, *catalog = NULL;
    vtr_status st = read_recorded_model(o->index_dir, &exists, &rec, err);
    if (st != VTR_OK)
        return st;

    /* the settings: given, else recorded, else the defaults */
    const char *arch_name = o->arch ? o->arch : exists ? rec.arch : NULL; /* NULL: the weights' */
    const char *weights = o->weights ? o->weights : exists ? rec.weights : NULL;
    int frames = o->frames > 0 ? o->frames : exists ? rec.frames : VTR_ARCHIVE_DEFAULT_FRAMES;
    vtr_preprocess_options pre;
    vtr_preprocess_unset(&pre); /* the backbone's, unless given or recorded */
    if (o->resize >= 0 || exists)
        pre.resize = o->resize >= 0 ? o->resize : rec.resize;
    if (o->crop >= 0 || exists)
        pre.crop = o->crop >= 0 ? o->crop : rec.crop;
    vtr_backbone_arch arch = VTR_BACKBONE_ARCH_INFER;
    char sha[VTR_SHA256_HEX_SIZE];
    if (arch_name && (st = vtr_backbone_arch_parse(arch_name, &arch, err)) != VTR_OK)
        goto end;
    if (!weights) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND,
                      "index %s is new: name the backbone weights (--weights FILE)",
                      o->index_dir);
        goto end;
    }
    if ((st = vtr_file_sha256(weights, sha, err)) != VTR_OK) {
        if (!o->weights) /* the recorded file moved or went since the index was made */
            vtr_error_context(err, "index %s: its backbone weights (name them with --weights "
                              "if they moved)", o->index_dir);
        goto end;
    }
    if ((st = vtr_embedder_open(o->checkpoint, o->vocab, o->threads, &ix->embedder, err)) !=
        VTR_OK)
        goto end;
    const char *model_id = vtr_embedder_model_id(ix->embedder);
    if (exists) {
        const char *what = NULL;
        char given[160] = "", recorded[160] = "";
        if (strcmp(model_id, rec.model_id) != 0) {
            what = "model";
            snprintf(given, sizeof given, "%.12s (%s)", model_id, o->checkpoint);
            snprintf(recorded, sizeof recorded, "%.12s (%s)", rec.model_id, rec.checkpoint);
        } else if (strcmp(arch_name, rec.arch) != 0 || strcmp(sha, rec.weights_sha256) != 0) {
            what = "backbone";
            snprintf(given, sizeof given, "%s, weights %.12s", arch_name, sha);
            snprintf(recorded, sizeof recorded, "%s, weights %.12s (%s)", rec.arch,
                     rec.weights_sha256, rec.weights);
        } else if (frames != rec.frames || pre.resize != rec.resize ||
                   pre.crop != rec.crop) {
            what = "sampling";
            snprintf(given, sizeof given, "--frames %d --resize %d --crop %d", frames,
                     pre.resize, pre.crop);
            snprintf(recorded, sizeof recorded, "--frames %d --resize %d --crop %d",
                     rec.frames, rec.resize, rec.crop);
        }
        if (what) {
            st = vtr_fail(err, VTR_ERR_INVALID,
                          "index %s was built with another %s: %s, not %s; embeddings of "
                          "two models must not share an index: use a new --index directory",
                          o->index_dir, what, recorded, given);
            goto end;
        }
    }
    if ((o->device == VTR_DEVICE_CUDA &&
         (st = vtr_cuda_init(o->device_index, NULL, 0, err)) != VTR_OK) ||
        (st = vtr_backbone_load(weights, arch, o->device, &ix->backbone, err)) != VTR_OK ||
        (o->device == VTR_DEVICE_CUDA &&
         (st = vtr_embedder_use_device(ix->embedder, o->device, err)) != VTR_OK) ||
        (o->bf16 && (st = vtr_backbone_set_bf16(ix->backbone, true, err)) != VTR_OK))
        goto end;
    vtr_preprocess_options theirs;
    vtr_backbone_preprocess(ix->backbone, &theirs);
    vtr_preprocess_fill(&pre, &theirs);
    arch_name = vtr_backbone_arch_name(vtr_backbone_get_arch(ix->backbone));
    if ((st = vtr_media_embedder_new(ix->embedder, ix->backbone, &pre, frames, o->threads,
                                     &ix->media, err)) != VTR_OK)
        goto end;
    weights_abs = realpath(weights, NULL);
    ckpt_abs = realpath(o->checkpoint, NULL);
    const char *ckpt_path = ckpt_abs ? ckpt_abs : o->checkpoint;
    const char *weights_path = weights_abs ? weights_abs : weights;
    text = model_text(model_id, ckpt_path, arch_name, weights_path, sha, frames, pre.resize,
                      pre.crop);
    if (!text) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    /* a new index records the model; an existing one was checked above (NULL: any) */
    vtr_embedding_index_options io = {.dim = vtr_embedder_dim(ix->embedder),
                                      .model = exists ? NULL : text};
    if ((st = vtr_embedding_index_writer_open(o->index_dir, &io, &ix->writer, err)) != VTR_OK)
        goto end;
    /* the same model and backbone found at other paths (moved): later runs and vtr-search
     * find them there */
    if (exists && (strcmp(ckpt_path, rec.checkpoint) != 0 || strcmp(weights_path, rec.weights)) &&
        (st = vtr_embedding_index_writer_set_model(ix->writer, text, err)) != VTR_OK)
        goto end;
    if (!(catalog = vtr_path_join(o->index_dir, VTR_ARCHIVE_CATALOG))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = vtr_catalog_open(catalog, &ix->catalog, err)) != VTR_OK)
        goto end;

end:
    free(text);
    free(weights_abs);
    free(ckpt_abs);
    free(catalog);
    vtr_archive_model_free(&rec);
    return st;
}

static void close_all(indexer *ix)
{
    vtr_embedding_index_writer_close(ix->writer);
    vtr_catalog_close(ix->catalog);
    vtr_media_embedder_free(ix->media);
    vtr_backbone_free(ix->backbone);
    vtr_embedder_close(ix->embedder);
    vtr_archive_files_free(&ix->files);
    vtr_item_list_free(&ix->known);
    free(ix->by_key);
}

/* Keeps the shard's contiguous share of the source's files (sorted by key) and frees the
 * others. */
static void keep_share(vtr_archive_files *files, const vtr_shard *shard)
{
    int64_t first, count;
    vtr_shard_range(shard, (int64_t)files->n, &first, &count);
    for (size_t i = 0; i < files->n; i++)
        if (i < (size_t)first || i >= (size_t)(first + count)) {
            free(files->files[i].key);
            free(files->files[i].path);
        }
    memmove(files->files, files->files + first, (size_t)count * sizeof *files->files);
    files->n = (size_t)count;
}

/* Items to (re)do, in key order; counts the skipped ones. */
static vtr_status plan(indexer *ix, work_item **out, size_t *n_out, vtr_error *err)
{
    work_item *work = calloc(ix->files.n ? ix->files.n : 1, sizeof *work);
    if (!work)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    size_t n = 0;
    vtr_archive_stats p = {.files = (int64_t)ix->files.n};
    for (size_t i = 0; i < ix->files.n; i++) {
        const vtr_archive_file *f = &ix->files.files[i];
        const vtr_item *k = find_known(ix, f->key);
        /* a manifest's missing file (size and mtime -1) that failed stays skipped until
         * it appears */
        bool same = k && k->size_bytes == f->size && k->mtime_ns == f->mtime_ns;
        if (same && k->status == VTR_ITEM_OK) {
            p.unchanged++;
            continue;
        }
        if (same && k->status == VTR_ITEM_FAILED && !ix->o->retry_failed) {
            p.skipped_failed++;
            continue;
        }
        if (same && k->status == VTR_ITEM_PENDING && k->error &&
            !strcmp(k->error, IN_PROGRESS) && !ix->o->retry_failed) {
            /* the last run died on this file: a failure, not a file to die on again */
            work_item *w = &work[n++];
            *w = (work_item){.file = f, .known = k, .outcome = VTR_ARCHIVE_FAILED};
            vtr_fail(&w->error, VTR_ERR_FORMAT, "%s: %s; --retry-failed tries it again",
                     f->path, IN_PROGRESS);
            continue;
        }
        work[n++] = (work_item){.file = f, .known = k};
        if (k)
            p.updated++;
        else
            p.added++;
    }
    for (size_t i = 0; i < ix->known.n; i++)
        if (!in_source(ix, ix->known.items[i].key))
            p.removed++;
    if (ix->o->on_plan)
        ix->o->on_plan(ix->o->ctx, &p);
    ix->stats.files = p.files;
    ix->stats.unchanged = p.unchanged;
    ix->stats.skipped_failed = p.skipped_failed;
    *out = work;
    *n_out = n;
    return VTR_OK;
}

/* Starts decoding the files that process_item will embed (those plan did not fail), in
 * order, o->decode_ahead of them ahead, on a thread of their own: decoding the next files
 * overlaps the backbone and the model on this one (0: each decoded in its turn). */
static vtr_status decode_ahead(indexer *ix, const work_item *work, size_t n_work,
                               vtr_error *err)
{
    const char **paths = malloc((n_work ? n_work : 1) * sizeof *paths);
    if (!paths)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < n_work; i++)
        if (work[i].outcome != VTR_ARCHIVE_FAILED)
            paths[n++] = work[i].file->path;
    vtr_status st = vtr_decode_ahead_start(paths, n, vtr_media_embedder_decode_options(ix->media),
                                           ix->o->decode_ahead, &ix->ahead, err);
    free(paths);
    return st;
}

vtr_status vtr_archive_index_update(const vtr_archive_options *o, vtr_archive_stats *stats,
                                    vtr_error *err)
{
    indexer ix = {.o = o};
    work_item *work = NULL;
    size_t n_work = 0;
    vtr_status st;
    if (!o || !o->source || !o->index_dir || !o->checkpoint) {
        st = vtr_fail(err, VTR_ERR_INVALID, "indexing needs a source, a checkpoint and an "
                                            "index directory");
        goto end;
    }
    if (o->commit_items < 1 || o->frames < 0 || o->threads < 0 || o->decode_ahead < 0) {
        st = vtr_fail(err, VTR_ERR_INVALID, "bad options: commit_items %d, frames %d, threads "
                      "%d, decode_ahead %d", o->commit_items, o->frames, o->threads,
                      o->decode_ahead);
        goto end;
    }
    /* the source first: a typo in it must not cost loading a model */
    if ((st = vtr_archive_files_list(o->source, &ix.files, err)) != VTR_OK)
        goto end;
    if (o->shard)
        keep_share(&ix.files, o->shard);
    if ((st = open_all(&ix, err)) != VTR_OK)
        goto end;
    if ((st = vtr_catalog_add_dataset(ix.catalog, VTR_ARCHIVE_DATASET, ix.files.root,
                                      &ix.dataset, err)) != VTR_OK ||
        (st = vtr_catalog_dataset_items(ix.catalog, ix.dataset, &ix.known, err)) != VTR_OK)
        goto end;
    if (!(ix.by_key = malloc((ix.known.n ? ix.known.n : 1) * sizeof *ix.by_key))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (size_t i = 0; i < ix.known.n; i++)
        ix.by_key[i] = &ix.known.items[i];
    qsort(ix.by_key, ix.known.n, sizeof *ix.by_key, item_key_cmp);

    if ((st = plan(&ix, &work, &n_work, err)) != VTR_OK ||
        (st = remove_gone(&ix, err)) != VTR_OK || (st = record_moved(&ix, err)) != VTR_OK ||
        (st = decode_ahead(&ix, work, n_work, err)) != VTR_OK)
        goto end;
    for (size_t start = 0; start < n_work; start += (size_t)o->commit_items) {
        size_t end = start + (size_t)o->commit_items;
        if (end > n_work)
            end = n_work;
        for (size_t i = start; i < end; i++) {
            if (o->stop && *o->stop) { /* what is done so far is committed below */
                ix.stats.stopped = true;
                end = i;
                break;
            }
            work_item *w = &work[i];
            if ((w->outcome != VTR_ARCHIVE_FAILED &&
                 (st = mark_in_progress(&ix, w, err)) != VTR_OK) ||
                (st = process_item(&ix, w, err)) != VTR_OK) {
                vtr_error_context(err, "%s", w->file->key);
                goto end;
            }
            switch (w->outcome) {
            case VTR_ARCHIVE_ADDED: ix.stats.added++; break;
            case VTR_ARCHIVE_UPDATED: ix.stats.updated++; break;
            default: ix.stats.failed++; break;
            }
            emit(&ix, w->file->key, w->outcome,
                 w->outcome == VTR_ARCHIVE_FAILED ? &w->error : NULL);
        }
        /* the index first: a crash before the catalog's commit only redoes this batch */
        if ((st = commit_index(&ix, err)) != VTR_OK ||
            (st = record_batch(&ix, work + start, end - start, err)) != VTR_OK ||
            ix.stats.stopped)
            goto end;
    }
    if ((st = maybe_compact(&ix, err)) == VTR_OK)
        st = update_approx(&ix, err);
end:
    if (st != VTR_OK && ix.marked)
        clear_mark(&ix);
    if (stats)
        *stats = ix.stats;
    vtr_decode_ahead_free(ix.ahead);
    for (size_t i = 0; i < n_work; i++)
        free_frames(&work[i]);
    free(work);
    close_all(&ix);
    return st;
}
