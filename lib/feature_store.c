/* Feature stores: streaming writer (NAME.tmp.PID/ then rename), mapped reader, and the
 * builder from record streams. Layout in feature_store.h and docs/feature-store.md. */
#define _GNU_SOURCE /* renameat2 */
#include "feature_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "npy.h"
#include "record.h"
#include "string_table.h"

#define ROWS_FILE "rows.npy"
#define OFFSETS_FILE "offsets.npy"
#define KEYS_FILE "keys.txt"
#define META_FILE "meta.json"
#define CONVERT_ELEMS 16384 /* elements converted per write when the dtype changes */

/* The directory that holds path ("." when it has no '/'), malloc'ed. */
static char *parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* ---- writer ---- */

struct vtr_feature_store_writer {
    char *path;     /* NAME */
    char *tmp_dir;  /* NAME.tmp.PID */
    FILE *rows, *offsets, *keys;
    /* rows.npy and offsets.npy: headers written before the data, their row count
     * rewritten at the end (lib/npy.h) */
    vtr_npy_header rows_header, offsets_header;
    vtr_dtype dtype;
    int64_t dim;    /* 0 until known */
    int64_t items, nrows;
    vtr_string_table *seen;
    char *extractor;
    json_t *source;
    bool replace;
    bool broken;    /* a write failed: only abort remains */
    void *convert;  /* CONVERT_ELEMS elements of the storage dtype */
};

static vtr_status open_in_tmp(vtr_feature_store_writer *w, const char *name, FILE **fp,
                              vtr_error *err)
{
    char *p = vtr_path_join(w->tmp_dir, name);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "feature store %s: out of memory", w->path);
    *fp = fopen(p, "wb");
    vtr_status st = *fp ? VTR_OK : vtr_fail_errno(err, "feature store %s: %s", w->path, p);
    free(p);
    return st;
}

/* Reserves rows.npy's header once D is known. */
static vtr_status start_rows(vtr_feature_store_writer *w, vtr_error *err)
{
    vtr_status st = vtr_npy_header_init(&w->rows_header, w->dtype, 2, (int64_t[]){0, w->dim},
                                        err);
    if (st == VTR_OK)
        st = vtr_write_all(w->rows, w->rows_header.bytes, w->rows_header.len, ROWS_FILE, err);
    if (st != VTR_OK)
        vtr_error_context(err, "feature store %s", w->path);
    return st;
}

vtr_status vtr_feature_store_writer_open(const char *path, const vtr_feature_store_options *opt,
                                         vtr_feature_store_writer **out, vtr_error *err)
{
    *out = NULL;
    if (opt->dtype != VTR_F32 && opt->dtype != VTR_F16)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: storage dtype %s (use float32 or float16)", path,
                        vtr_dtype_name(opt->dtype));
    if (opt->dim < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: dim %lld", path,
                        (long long)opt->dim);
    struct stat sb;
    if (stat(path, &sb) == 0 && !opt->replace)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: already exists (replace it, or remove it first)",
                        path);
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: exists and is not a directory",
                        path);
    vtr_status st = VTR_OK;
    vtr_feature_store_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(path) + 32;
    if (!w || !(w->path = strdup(path)) || !(w->tmp_dir = malloc(n)) ||
        !(w->seen = vtr_string_table_new()) ||
        !(w->extractor = strdup(opt->extractor ? opt->extractor : "")) ||
        !(w->convert = malloc(CONVERT_ELEMS * sizeof(float)))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "feature store %s: out of memory", path);
        goto fail;
    }
    snprintf(w->tmp_dir, n, "%s.tmp.%ld", path, (long)getpid());
    w->dtype = opt->dtype;
    w->dim = opt->dim;
    w->replace = opt->replace;
    if (opt->source && !(w->source = json_deep_copy(opt->source))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "feature store %s: out of memory", path);
        goto fail;
    }
    char *parent = parent_dir(path);
    st = parent ? vtr_make_dirs(parent, err)
                : vtr_fail(err, VTR_ERR_NOMEM, "feature store %s: out of memory", path);
    free(parent);
    if (st != VTR_OK) {
        vtr_error_context(err, "feature store %s", path);
        goto fail;
    }
    int rc = mkdir(w->tmp_dir, 0777);
    if (rc != 0 && errno == EEXIST) { /* left by a killed build of a process with our pid */
        vtr_remove_flat_dir(w->tmp_dir);
        rc = mkdir(w->tmp_dir, 0777);
    }
    if (rc != 0) {
        st = vtr_fail_errno(err, "feature store %s: %s", path, w->tmp_dir);
        free(w->tmp_dir); /* nothing to remove */
        w->tmp_dir = NULL;
        goto fail;
    }
    if ((st = open_in_tmp(w, ROWS_FILE, &w->rows, err)) != VTR_OK ||
        (st = open_in_tmp(w, OFFSETS_FILE, &w->offsets, err)) != VTR_OK ||
        (st = open_in_tmp(w, KEYS_FILE, &w->keys, err)) != VTR_OK)
        goto fail;
    if (w->dim > 0 && (st = start_rows(w, err)) != VTR_OK)
        goto fail;
    /* offsets.npy: header for (0,), patched at the end, then offsets[0] = 0 */
    int64_t zero = 0;
    st = vtr_npy_header_init(&w->offsets_header, VTR_I64, 1, &zero, err);
    if (st == VTR_OK)
        st = vtr_write_all(w->offsets, w->offsets_header.bytes, w->offsets_header.len,
                           OFFSETS_FILE, err);
    if (st == VTR_OK)
        st = vtr_write_all(w->offsets, &zero, sizeof zero, OFFSETS_FILE, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "feature store %s", path);
        goto fail;
    }
    *out = w;
    return VTR_OK;
fail:
    vtr_feature_store_writer_abort(w);
    return st;
}

int64_t vtr_feature_store_writer_items(const vtr_feature_store_writer *w)
{
    return w->items;
}

/* Item-level checks of a key: VTR_ERR_INVALID when it cannot be stored. */
static vtr_status check_key(const vtr_feature_store_writer *w, const char *key,
                            vtr_error *err)
{
    size_t len = strlen(key);
    char shown[96];
    vtr_printable(key, len, shown, sizeof shown);
    if (len == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: empty key", w->path);
    if (strpbrk(key, "\t\r\n"))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: key \"%s\" contains a tab or a line break", w->path,
                        shown);
    json_t *utf8 = json_stringn(key, len); /* jansson validates UTF-8 */
    if (!utf8)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: key \"%s\" is not valid UTF-8",
                        w->path, shown);
    json_decref(utf8);
    if (vtr_string_table_find(w->seen, key, len) >= 0)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: key \"%s\" added twice",
                        w->path, shown);
    return VTR_OK;
}

/* Writes n elements of src (dtype from) as the storage dtype. */
static vtr_status write_converted(vtr_feature_store_writer *w, const void *src, vtr_dtype from,
                                  size_t n, vtr_error *err)
{
    if (from == w->dtype)
        return vtr_write_all(w->rows, src, n * vtr_dtype_size(from), ROWS_FILE, err);
    for (size_t done = 0; done < n;) {
        size_t m = n - done < CONVERT_ELEMS ? n - done : CONVERT_ELEMS;
        for (size_t i = 0; i < m; i++) {
            float v;
            if (from == VTR_F32)
                v = ((const float *)src)[done + i];
            else if (from == VTR_F16)
                v = vtr_half_to_float(((const uint16_t *)src)[done + i]);
            else
                v = vtr_bf16_to_float(((const uint16_t *)src)[done + i]);
            if (w->dtype == VTR_F16)
                ((uint16_t *)w->convert)[i] = vtr_float_to_half(v);
            else
                ((float *)w->convert)[i] = v;
        }
        vtr_status st = vtr_write_all(w->rows, w->convert, m * vtr_dtype_size(w->dtype),
                                      ROWS_FILE, err);
        if (st != VTR_OK)
            return st;
        done += m;
    }
    return VTR_OK;
}

/* vtr_feature_store_writer_add; *refused says whether a failure was an item-level
 * refusal that left the writer usable. */
static vtr_status add_item(vtr_feature_store_writer *w, const char *key, const vtr_tensor *rows,
                           bool *refused, vtr_error *err)
{
    *refused = false;
    if (w->broken)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: an earlier write failed; the build must be aborted",
                        w->path);
    *refused = true;
    vtr_status st = check_key(w, key, err);
    if (st != VTR_OK)
        return st;
    char shown[96], shape[160];
    vtr_printable(key, strlen(key), shown, sizeof shown);
    vtr_shape_str(rows->ndim, rows->shape, shape, sizeof shape);
    if (rows->ndim != 2)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: item \"%s\": array %s is not 2-D (rows, dim)",
                        w->path, shown, shape);
    if (rows->dtype != VTR_F32 && rows->dtype != VTR_F16 && rows->dtype != VTR_BF16)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: item \"%s\": dtype %s (features are float32, "
                        "float16 or bfloat16)",
                        w->path, shown, vtr_dtype_name(rows->dtype));
    if (rows->shape[0] < 0 || rows->shape[1] <= 0 || (w->dim && rows->shape[1] != w->dim))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: item \"%s\": array %s, expected (n, %lld)", w->path,
                        shown, shape, (long long)(w->dim ? w->dim : 1));
    size_t n = (size_t)rows->shape[0] * (size_t)rows->shape[1];
    if (n > 0 && !rows->data)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: item \"%s\": no data",
                        w->path, shown);
    int64_t bad = n > 0 ? vtr_tensor_first_non_finite(rows) : -1;
    if (bad >= 0)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: item \"%s\": row %lld has a "
                        "non-finite value (NaN or infinity)", w->path, shown,
                        (long long)(bad / rows->shape[1]));

    /* from here on a failure breaks the writer */
    *refused = false;
    w->broken = true;
    if (!w->dim) {
        w->dim = rows->shape[1];
        if ((st = start_rows(w, err)) != VTR_OK)
            return st;
    }
    int64_t end = w->nrows + rows->shape[0];
    if ((st = write_converted(w, rows->data, rows->dtype, n, err)) != VTR_OK ||
        (st = vtr_write_all(w->offsets, &end, sizeof end, OFFSETS_FILE, err)) != VTR_OK ||
        (st = vtr_write_all(w->keys, key, strlen(key), KEYS_FILE, err)) != VTR_OK ||
        (st = vtr_write_all(w->keys, "\n", 1, KEYS_FILE, err)) != VTR_OK) {
        vtr_error_context(err, "feature store %s: item \"%s\"", w->path, shown);
        return st;
    }
    if ((st = vtr_string_table_insert(w->seen, key, strlen(key), NULL, NULL, err)) != VTR_OK)
        return st;
    w->nrows = end;
    w->items++;
    w->broken = false;
    return VTR_OK;
}

vtr_status vtr_feature_store_writer_add(vtr_feature_store_writer *w, const char *key,
                                        const vtr_tensor *rows, vtr_error *err)
{
    bool refused;
    return add_item(w, key, rows, &refused, err);
}

/* Rewrites the reserved header with the final first dimension, then flushes, syncs and
 * closes the file. */
static vtr_status close_array(FILE **fp, vtr_npy_header *hdr, int64_t n, const char *name,
                              vtr_error *err)
{
    FILE *f = *fp;
    *fp = NULL;
    vtr_status st = vtr_npy_header_set_rows(hdr, n, err);
    if (st != VTR_OK)
        vtr_error_context(err, "%s", name);
    else if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0)
        st = vtr_fail_errno(err, "%s", name);
    else
        st = vtr_write_all(f, hdr->bytes, hdr->len, name, err);
    if (st == VTR_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        st = vtr_fail_errno(err, "%s", name);
    if (fclose(f) != 0 && st == VTR_OK)
        st = vtr_fail_errno(err, "%s", name);
    return st;
}

static vtr_status close_text(FILE **fp, const char *name, vtr_error *err)
{
    FILE *f = *fp;
    *fp = NULL;
    vtr_status st = VTR_OK;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        st = vtr_fail_errno(err, "%s", name);
    if (fclose(f) != 0 && st == VTR_OK)
        st = vtr_fail_errno(err, "%s", name);
    return st;
}

/* UTC now as "2024-05-01T12:34:56.789Z" (the catalog's format). */
static void utc_now(char *buf, size_t size)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static vtr_status write_meta(vtr_feature_store_writer *w, vtr_error *err)
{
    char created[40];
    utc_now(created, sizeof created);
    vtr_status st = VTR_OK;
    FILE *fp = NULL;
    json_t *meta = json_pack("{s:s, s:i, s:I, s:s, s:s, s:I, s:I, s:s, s:O?}", "format",
                             VTR_FEATURE_STORE_FORMAT, "version", VTR_FEATURE_STORE_VERSION,
                             "dim", (json_int_t)w->dim, "dtype", vtr_dtype_name(w->dtype),
                             "extractor", w->extractor, "items", (json_int_t)w->items, "rows",
                             (json_int_t)w->nrows, "created", created, "source", w->source);
    if (!meta)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: extractor \"%s\" is not valid UTF-8", w->path,
                        w->extractor);
    if ((st = open_in_tmp(w, META_FILE, &fp, err)) != VTR_OK)
        goto end;
    if (json_dumpf(meta, fp, JSON_INDENT(2)) != 0 || fputc('\n', fp) == EOF) {
        st = vtr_fail_errno(err, "feature store %s: %s", w->path, META_FILE);
        fclose(fp);
        goto end;
    }
    st = close_text(&fp, META_FILE, err);
end:
    json_decref(meta);
    return st;
}

/* Moves tmp_dir to path: an atomic exchange when path exists and may be replaced. */
static vtr_status publish(vtr_feature_store_writer *w, vtr_error *err)
{
    if (renameat2(AT_FDCWD, w->tmp_dir, AT_FDCWD, w->path, RENAME_NOREPLACE) == 0)
        return VTR_OK;
    if (errno != EEXIST && errno != ENOTEMPTY && errno != EINVAL && errno != ENOSYS)
        return vtr_fail_errno(err, "feature store %s: rename", w->path);
    if (errno == EINVAL || errno == ENOSYS) { /* no renameat2 here: plain rename */
        struct stat sb;
        if (stat(w->path, &sb) != 0 && rename(w->tmp_dir, w->path) == 0)
            return VTR_OK;
        if (!w->replace)
            return vtr_fail(err, VTR_ERR_INVALID,
                            "feature store %s: appeared while it was being built", w->path);
        /* move the old store aside, then the new one in (not atomic: a short gap) */
        char aside[4096];
        snprintf(aside, sizeof aside, "%s.old.%ld", w->path, (long)getpid());
        if (rename(w->path, aside) != 0)
            return vtr_fail_errno(err, "feature store %s: rename", w->path);
        if (rename(w->tmp_dir, w->path) != 0) {
            vtr_status st = vtr_fail_errno(err, "feature store %s: rename", w->path);
            rename(aside, w->path);
            return st;
        }
        vtr_remove_flat_dir(aside);
        return VTR_OK;
    }
    if (!w->replace)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "feature store %s: appeared while it was being built", w->path);
    if (renameat2(AT_FDCWD, w->tmp_dir, AT_FDCWD, w->path, RENAME_EXCHANGE) != 0)
        return vtr_fail_errno(err, "feature store %s: rename", w->path);
    vtr_remove_flat_dir(w->tmp_dir); /* now the old store */
    return VTR_OK;
}

/* Reads back the shapes of what finish wrote. */
static vtr_status verify(const char *path, vtr_error *err)
{
    vtr_feature_store_reader *r;
    vtr_status st = vtr_feature_store_reader_open(path, &r, err);
    vtr_feature_store_reader_close(r);
    return st;
}

vtr_status vtr_feature_store_writer_finish(vtr_feature_store_writer *w, vtr_error *err)
{
    vtr_status st = VTR_OK;
    if (w->broken) {
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "feature store %s: an earlier write failed; the build must be aborted",
                      w->path);
        goto fail;
    }
    if (w->dim == 0) {
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "feature store %s: no items and no dim given: nothing to store", w->path);
        goto fail;
    }
    if ((st = close_array(&w->rows, &w->rows_header, w->nrows, ROWS_FILE, err)) != VTR_OK ||
        (st = close_array(&w->offsets, &w->offsets_header, w->items + 1, OFFSETS_FILE, err)) !=
            VTR_OK ||
        (st = close_text(&w->keys, KEYS_FILE, err)) != VTR_OK) {
        vtr_error_context(err, "feature store %s", w->path);
        goto fail;
    }
    if ((st = write_meta(w, err)) != VTR_OK || (st = vtr_sync_dir(w->tmp_dir, err)) != VTR_OK ||
        (st = verify(w->tmp_dir, err)) != VTR_OK || (st = publish(w, err)) != VTR_OK)
        goto fail;
    char *parent = parent_dir(w->path);
    if (parent) {
        st = vtr_sync_dir(parent, err);
        free(parent);
    }
    free(w->tmp_dir); /* renamed: nothing to remove */
    w->tmp_dir = NULL;
    vtr_feature_store_writer_abort(w);
    return st;
fail:
    vtr_feature_store_writer_abort(w);
    return st;
}

void vtr_feature_store_writer_abort(vtr_feature_store_writer *w)
{
    if (!w)
        return;
    if (w->rows)
        fclose(w->rows);
    if (w->offsets)
        fclose(w->offsets);
    if (w->keys)
        fclose(w->keys);
    if (w->tmp_dir)
        vtr_remove_flat_dir(w->tmp_dir);
    free(w->tmp_dir);
    free(w->path);
    vtr_string_table_free(w->seen);
    free(w->extractor);
    json_decref(w->source);
    free(w->convert);
    free(w);
}

/* ---- reader ---- */

struct vtr_feature_store_reader {
    char *path;
    vtr_npy_file rows, offsets;
    vtr_string_table *keys; /* entry i is item i's key */
    json_t *meta;
    int64_t items, nrows, dim;
    vtr_dtype dtype;
    const int64_t *off;
};

void vtr_feature_store_reader_close(vtr_feature_store_reader *r)
{
    if (!r)
        return;
    vtr_npy_close(&r->rows);
    vtr_npy_close(&r->offsets);
    vtr_string_table_free(r->keys);
    json_decref(r->meta);
    free(r->path);
    free(r);
}

/* An integer member of meta.json, or an error naming it. */
static vtr_status meta_int(const json_t *meta, const char *name, int64_t *v, vtr_error *err)
{
    json_t *j = json_object_get(meta, name);
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: \"%s\" is not a non-negative integer",
                        META_FILE, name);
    *v = json_integer_value(j);
    return VTR_OK;
}

static vtr_status read_meta(vtr_feature_store_reader *r, const char *dir, vtr_error *err)
{
    char *p = vtr_path_join(dir, META_FILE);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    json_error_t jerr;
    r->meta = json_load_file(p, JSON_REJECT_DUPLICATES, &jerr);
    free(p);
    if (!r->meta) {
        if (json_error_code(&jerr) == json_error_cannot_open_file)
            return vtr_fail(err, VTR_ERR_IO, "%s: %s", META_FILE, jerr.text);
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: line %d: %s", META_FILE, jerr.line,
                        jerr.text);
    }
    const char *format = json_string_value(json_object_get(r->meta, "format"));
    if (!json_is_object(r->meta) || !format || strcmp(format, VTR_FEATURE_STORE_FORMAT) != 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: not a vtr feature store (\"format\" is not "
                        "\"" VTR_FEATURE_STORE_FORMAT "\")", META_FILE);
    int64_t version;
    vtr_status st = meta_int(r->meta, "version", &version, err);
    if (st != VTR_OK)
        return st;
    if (version > VTR_FEATURE_STORE_VERSION || version < 1)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: version %lld (this vtr reads version %d)", META_FILE,
                        (long long)version, VTR_FEATURE_STORE_VERSION);
    if ((st = meta_int(r->meta, "dim", &r->dim, err)) != VTR_OK ||
        (st = meta_int(r->meta, "items", &r->items, err)) != VTR_OK ||
        (st = meta_int(r->meta, "rows", &r->nrows, err)) != VTR_OK)
        return st;
    const char *dtype = json_string_value(json_object_get(r->meta, "dtype"));
    if (dtype && strcmp(dtype, "float32") == 0)
        r->dtype = VTR_F32;
    else if (dtype && strcmp(dtype, "float16") == 0)
        r->dtype = VTR_F16;
    else
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: \"dtype\" is not \"float32\" or \"float16\"",
                        META_FILE);
    return VTR_OK;
}

static vtr_status check_arrays(vtr_feature_store_reader *r, vtr_error *err)
{
    const vtr_tensor *rows = &r->rows.tensor, *off = &r->offsets.tensor;
    char shape[160];
    vtr_shape_str(rows->ndim, rows->shape, shape, sizeof shape);
    if (rows->ndim != 2 || (rows->dtype != VTR_F32 && rows->dtype != VTR_F16))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: %s %s, expected a 2-D float32 or float16 "
                        "matrix", ROWS_FILE, vtr_dtype_name(rows->dtype), shape);
    if (rows->dtype != r->dtype || rows->shape[0] != r->nrows || rows->shape[1] != r->dim)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s is %s %s but %s says %s (%lld, %lld)", ROWS_FILE,
                        vtr_dtype_name(rows->dtype), shape, META_FILE, vtr_dtype_name(r->dtype),
                        (long long)r->nrows, (long long)r->dim);
    vtr_shape_str(off->ndim, off->shape, shape, sizeof shape);
    if (off->ndim != 1 || off->dtype != VTR_I64)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: %s %s, expected 1-D int64", OFFSETS_FILE,
                        vtr_dtype_name(off->dtype), shape);
    if (off->shape[0] != r->items + 1)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s has %lld entries for %lld items (expected %lld)",
                        OFFSETS_FILE, (long long)off->shape[0], (long long)r->items,
                        (long long)r->items + 1);
    r->off = off->data;
    if (r->off[0] != 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s starts at %lld, not 0", OFFSETS_FILE,
                        (long long)r->off[0]);
    for (int64_t i = 0; i < r->items; i++)
        if (r->off[i + 1] < r->off[i])
            return vtr_fail(err, VTR_ERR_FORMAT,
                            "%s decreases at item %lld (%lld after %lld)", OFFSETS_FILE,
                            (long long)i, (long long)r->off[i + 1], (long long)r->off[i]);
    if (r->off[r->items] != r->nrows)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s ends at %lld but %s has %lld rows",
                        OFFSETS_FILE, (long long)r->off[r->items], ROWS_FILE,
                        (long long)r->nrows);
    return VTR_OK;
}

static vtr_status read_keys(vtr_feature_store_reader *r, const char *dir, vtr_error *err)
{
    char *p = vtr_path_join(dir, KEYS_FILE);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_mapped_file map;
    vtr_status st = vtr_map_file(p, &map, err);
    free(p);
    if (st != VTR_OK)
        return st;
    const char *s = map.data, *end = s + map.size;
    int64_t line = 0;
    char shown[96];
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        line++;
        if (!nl) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: line %lld does not end with a newline",
                          KEYS_FILE, (long long)line);
            goto end;
        }
        size_t len = (size_t)(nl - s);
        if (len == 0 || memchr(s, '\t', len) || memchr(s, '\r', len) || memchr(s, '\0', len)) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: line %lld: %s", KEYS_FILE, (long long)line,
                          len ? "key with a tab, CR or NUL" : "empty key");
            goto end;
        }
        if (!vtr_utf8_valid(s, len)) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: line %lld: key \"%s\" is not valid UTF-8",
                          KEYS_FILE, (long long)line, vtr_printable(s, len, shown, sizeof shown));
            goto end;
        }
        if (line > r->items) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s has more keys than the %lld items",
                          KEYS_FILE, (long long)r->items);
            goto end;
        }
        int64_t index;
        bool added;
        if ((st = vtr_string_table_insert(r->keys, s, len, &index, &added, err)) != VTR_OK)
            goto end;
        if (!added) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: key \"%s\" on lines %lld and %lld",
                          KEYS_FILE, vtr_printable(s, len, shown, sizeof shown),
                          (long long)index + 1, (long long)line);
            goto end;
        }
        s = nl + 1;
    }
    if (line != r->items)
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s has %lld keys for %lld items", KEYS_FILE,
                      (long long)line, (long long)r->items);
end:
    vtr_unmap_file(&map);
    return st;
}

vtr_status vtr_feature_store_reader_open(const char *path, vtr_feature_store_reader **out,
                                         vtr_error *err)
{
    *out = NULL;
    vtr_status st = VTR_OK;
    char *p = NULL;
    vtr_feature_store_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path)) || !(r->keys = vtr_string_table_new())) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = read_meta(r, path, err)) != VTR_OK)
        goto fail;
    if (!(p = vtr_path_join(path, ROWS_FILE))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = vtr_npy_load(p, &r->rows, err)) != VTR_OK)
        goto fail;
    free(p);
    if (!(p = vtr_path_join(path, OFFSETS_FILE))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = vtr_npy_load(p, &r->offsets, err)) != VTR_OK ||
        (st = check_arrays(r, err)) != VTR_OK || (st = read_keys(r, path, err)) != VTR_OK)
        goto fail;
    free(p);
    *out = r;
    return VTR_OK;
fail:
    free(p);
    vtr_error_context(err, "feature store %s", path);
    vtr_feature_store_reader_close(r);
    return st;
}

int64_t vtr_feature_store_reader_items(const vtr_feature_store_reader *r)
{
    return r->items;
}

int64_t vtr_feature_store_reader_rows(const vtr_feature_store_reader *r)
{
    return r->nrows;
}

int64_t vtr_feature_store_reader_dim(const vtr_feature_store_reader *r)
{
    return r->dim;
}

vtr_dtype vtr_feature_store_reader_dtype(const vtr_feature_store_reader *r)
{
    return r->dtype;
}

const json_t *vtr_feature_store_reader_meta(const vtr_feature_store_reader *r)
{
    return r->meta;
}

const char *vtr_feature_store_reader_key(const vtr_feature_store_reader *r, int64_t i)
{
    return vtr_string_table_key(r->keys, i, NULL);
}

int64_t vtr_feature_store_reader_find(const vtr_feature_store_reader *r, const char *key)
{
    return vtr_string_table_find(r->keys, key, strlen(key));
}

const int64_t *vtr_feature_store_reader_offsets(const vtr_feature_store_reader *r)
{
    return r->off;
}

vtr_tensor vtr_feature_store_reader_matrix(const vtr_feature_store_reader *r)
{
    return r->rows.tensor;
}

vtr_status vtr_feature_store_reader_item(const vtr_feature_store_reader *r, int64_t i,
                                         vtr_tensor *rows, vtr_error *err)
{
    memset(rows, 0, sizeof *rows);
    if (i < 0 || i >= r->items)
        return vtr_fail(err, VTR_ERR_INVALID, "feature store %s: item %lld of %lld", r->path,
                        (long long)i, (long long)r->items);
    rows->dtype = r->dtype;
    rows->ndim = 2;
    rows->shape[0] = r->off[i + 1] - r->off[i];
    rows->shape[1] = r->dim;
    rows->data = (char *)r->rows.tensor.data +
                 (size_t)r->off[i] * (size_t)r->dim * vtr_dtype_size(r->dtype);
    return VTR_OK;
}

/* ---- builder ---- */

vtr_status vtr_feature_store_build_from_records(FILE *in, const char *in_name, const char *path,
                                                const vtr_feature_store_options *opt,
                                                vtr_feature_store_skip_fn on_skip, void *ctx,
                                                vtr_feature_store_build_stats *stats,
                                                vtr_error *err)
{
    vtr_feature_store_build_stats local = {0, 0, 0, 0};
    vtr_feature_store_build_stats *s = stats ? stats : &local;
    *s = local;
    vtr_feature_store_writer *w = NULL;
    json_t *source = NULL;
    char *extractor = NULL;
    vtr_status st = VTR_OK;
    vtr_record_reader *reader = vtr_record_reader_new(in, in_name);
    if (!reader)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", in_name);
    for (;;) {
        vtr_record rec;
        bool got;
        if ((st = vtr_record_read(reader, &rec, &got, err)) != VTR_OK)
            goto fail;
        if (!got)
            break;
        s->records++;
        if (!w) { /* the first record may name the extractor */
            vtr_feature_store_options o = *opt;
            const char *ex = json_string_value(json_object_get(rec.meta, "extractor"));
            if (!o.extractor && ex && !(o.extractor = extractor = strdup(ex))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto fail;
            }
            if (!o.source) {
                source = json_pack("{s:s}", "records", in_name);
                o.source = source;
            }
            if ((st = vtr_feature_store_writer_open(path, &o, &w, err)) != VTR_OK)
                goto fail;
        }
        vtr_tensor rows = rec.array;
        if (rows.ndim == 1) { /* (D,) is one row */
            rows.ndim = 2;
            rows.shape[1] = rows.shape[0];
            rows.shape[0] = 1;
        }
        vtr_error why;
        bool refused;
        if (add_item(w, rec.key, &rows, &refused, &why) == VTR_OK) {
            s->items++;
            s->rows += rows.shape[0];
        } else if (refused && on_skip) {
            on_skip(ctx, rec.key, &why);
            s->skipped++;
        } else {
            st = vtr_fail(err, why.status, "%s: record %lld: %s", in_name,
                          (long long)s->records, why.msg);
            goto fail;
        }
    }
    if (!w) {
        vtr_feature_store_options o = *opt;
        if (!o.source)
            o.source = source = json_pack("{s:s}", "records", in_name);
        if ((st = vtr_feature_store_writer_open(path, &o, &w, err)) != VTR_OK)
            goto fail;
    }
    st = vtr_feature_store_writer_finish(w, err);
    w = NULL;
    if (st != VTR_OK)
        goto fail;
    json_decref(source);
    free(extractor);
    vtr_record_reader_free(reader);
    return VTR_OK;
fail:
    vtr_feature_store_writer_abort(w);
    json_decref(source);
    free(extractor);
    vtr_record_reader_free(reader);
    return st;
}
