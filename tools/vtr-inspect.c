/* vtr-inspect: show what an NPY file, a safetensors file, a record stream, an embedding
 * index or a feature store holds.
 *
 *   vtr-inspect [--json] [FILE|DIR...]      (no FILE or "-": a record stream on stdin)
 *
 * One line per array (dtype and shape), per tensor (after a line with the file's tensor
 * count and metadata), per record (key, dtype, shape, metadata), or per directory (an
 * index: rows, live rows, segments, dimension, generation, model; a store: items, rows,
 * dimension); --json prints one JSON object per line instead. Exit status: 0 when every
 * input was read, 2 when some could not be (each reported on stderr), 1 on bad usage or
 * when the output could not be written. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/embedding_index.h"
#include "lib/blas_kernel.h"
#include "lib/feature_store.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/npy.h"
#include "lib/record.h"
#include "lib/safetensors.h"
#include "lib/version.h"

static bool json_output;

static json_t *shape_json(const vtr_tensor *t)
{
    json_t *shape = json_array();
    for (int i = 0; i < t->ndim; i++)
        json_array_append_new(shape, json_integer(t->shape[i]));
    return shape;
}

/* Prints one array: "<prefix>  dtype (shape)[  extra]" or a JSON object; the names (a
 * path, a key, a tensor name) through vtr_shown, so that one that is not UTF-8 or holds a
 * line break is escaped. */
static void print_array(const char *source_text, const char *kind, const char *name_text,
                        const vtr_tensor *t, const json_t *meta)
{
    char source_shown[1024], name_shown[1024];
    const char *source = vtr_shown(source_text, source_shown, sizeof source_shown);
    const char *name = name_text ? vtr_shown(name_text, name_shown, sizeof name_shown) : NULL;
    if (json_output) {
        json_t *obj = json_pack("{s:s, s:s, s:s, s:o}", "source", source, "kind", kind, "dtype",
                                vtr_dtype_name(t->dtype), "shape", shape_json(t));
        if (name)
            json_object_set_new(obj, kind[0] == 'r' ? "key" : "name", json_string(name));
        if (meta)
            json_object_set(obj, "meta", (json_t *)meta);
        char *text = json_dumps(obj, VTR_JSON_FLAGS);
        puts(text);
        free(text);
        json_decref(obj);
        return;
    }
    char shape[160];
    vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
    char *meta_text = meta ? json_dumps(meta, VTR_JSON_FLAGS) : NULL;
    if (name)
        printf("  %s  %s %s", name, vtr_dtype_name(t->dtype), shape);
    else
        printf("%s: %s %s", source, vtr_dtype_name(t->dtype), shape);
    printf("%s%s\n", meta_text ? "  " : "", meta_text ? meta_text : "");
    free(meta_text);
}

static vtr_status inspect_records(FILE *in, const char *name, vtr_error *err)
{
    vtr_record_reader *reader = vtr_record_reader_new(in, name);
    if (!reader)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", name);
    vtr_status st;
    char shown[1024];
    if (!json_output)
        printf("%s: record stream\n", vtr_shown(name, shown, sizeof shown));
    for (;;) {
        vtr_record rec;
        bool got;
        st = vtr_record_read(reader, &rec, &got, err);
        if (st != VTR_OK || !got)
            break;
        print_array(name, "record", rec.key, &rec.array, rec.meta);
    }
    vtr_record_reader_free(reader);
    return st;
}

/* One line for a whole input (a file's header, a directory): "<source>: <fmt ...>" or, with
 * --json, {"source", "kind", ...fields}. Steals fields. */
static void print_summary(const char *source_text, const char *kind, json_t *fields,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void print_summary(const char *source_text, const char *kind, json_t *fields,
                          const char *fmt, ...)
{
    char shown[1024];
    const char *source = vtr_shown(source_text, shown, sizeof shown);
    if (json_output) {
        json_t *obj = json_pack("{s:s, s:s}", "source", source, "kind", kind);
        json_object_update(obj, fields);
        char *line = json_dumps(obj, VTR_JSON_FLAGS);
        puts(line);
        free(line);
        json_decref(obj);
    } else {
        printf("%s: ", source);
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
    }
    json_decref(fields);
}

static vtr_status inspect_safetensors(const char *path, vtr_error *err)
{
    vtr_safetensors st;
    vtr_status rc = vtr_safetensors_open(path, &st, err);
    if (rc != VTR_OK)
        return rc;
    /* the table shows long values (a Keras graph) by their length; --json has them whole */
    json_t *shown = st.metadata ? json_deep_copy(st.metadata) : NULL;
    const char *key;
    json_t *value;
    json_object_foreach(shown, key, value) {
        if (json_string_length(value) > 200) {
            char what[64];
            snprintf(what, sizeof what, "<%zu bytes>", json_string_length(value));
            json_string_set(value, what);
        }
    }
    char *meta = shown ? json_dumps(shown, VTR_JSON_FLAGS) : NULL;
    json_decref(shown);
    print_summary(path, "safetensors file",
                  json_pack("{s:I, s:O?}", "tensors", (json_int_t)st.count, "metadata",
                            st.metadata),
                  "safetensors, %zu tensors%s%s", st.count, meta ? ", metadata " : "",
                  meta ? meta : "");
    free(meta);
    for (size_t i = 0; i < st.count; i++)
        print_array(path, "safetensors", st.entries[i].name, &st.entries[i].tensor, NULL);
    vtr_safetensors_close(&st);
    return VTR_OK;
}

static vtr_status inspect_index(const char *dir, vtr_error *err)
{
    vtr_embedding_index *ix;
    vtr_status st = vtr_embedding_index_open(dir, &ix, err);
    if (st != VTR_OK)
        return st;
    const char *model = vtr_embedding_index_model(ix);
    long long rows = vtr_embedding_index_rows(ix), live = vtr_embedding_index_live_rows(ix),
              segments = vtr_embedding_index_segments(ix), dim = vtr_embedding_index_dim(ix),
              generation = vtr_embedding_index_generation(ix);
    print_summary(dir, "embedding index",
                  json_pack("{s:I, s:I, s:I, s:I, s:I, s:s?}", "rows", (json_int_t)rows,
                            "live_rows", (json_int_t)live, "segments", (json_int_t)segments,
                            "dim", (json_int_t)dim, "generation", (json_int_t)generation,
                            "model", model && *model ? model : NULL),
                  "embedding index, %lld rows (%lld live) in %lld segments, dimension %lld, "
                  "generation %lld, model %s",
                  rows, live, segments, dim, generation, model && *model ? model : "-");
    vtr_embedding_index_close(ix);
    return VTR_OK;
}

static vtr_status inspect_store(const char *dir, vtr_error *err)
{
    vtr_feature_store_reader *r;
    vtr_status st = vtr_feature_store_reader_open(dir, &r, err);
    if (st != VTR_OK)
        return st;
    long long items = vtr_feature_store_reader_items(r), rows = vtr_feature_store_reader_rows(r),
              dim = vtr_feature_store_reader_dim(r);
    print_summary(dir, "feature store",
                  json_pack("{s:I, s:I, s:I}", "items", (json_int_t)items, "rows",
                            (json_int_t)rows, "dim", (json_int_t)dim),
                  "feature store, %lld items, %lld rows of dimension %lld", items, rows, dim);
    vtr_feature_store_reader_close(r);
    return VTR_OK;
}

/* A directory: an embedding index (DIR/index.sqlite) or a feature store (DIR/meta.json). */
static vtr_status inspect_dir(const char *dir, vtr_error *err)
{
    char *ix = vtr_path_join(dir, "index.sqlite"), *meta = vtr_path_join(dir, "meta.json");
    vtr_status st;
    if (!ix || !meta)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    else if (access(ix, F_OK) == 0)
        st = inspect_index(dir, err);
    else if (access(meta, F_OK) == 0)
        st = inspect_store(dir, err);
    else
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: a directory, but neither an embedding index "
                      "(index.sqlite) nor a feature store (meta.json)", dir);
    free(ix);
    free(meta);
    return st;
}

static vtr_status inspect_path(const char *path, vtr_error *err)
{
    if (strcmp(path, "-") == 0)
        return inspect_records(stdin, "stdin", err);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return inspect_dir(path, err);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return vtr_fail_errno(err, "%s", path);
    unsigned char magic[9] = {0};
    size_t n = fread(magic, 1, sizeof magic, fp);
    vtr_status st;
    if (n >= 6 && memcmp(magic, "\x93NUMPY", 6) == 0) {
        fclose(fp);
        vtr_npy_file npy;
        if ((st = vtr_npy_load(path, &npy, err)) != VTR_OK)
            return st;
        print_array(path, "npy", NULL, &npy.tensor, NULL);
        vtr_npy_close(&npy);
        return VTR_OK;
    }
    if (n >= 4 && memcmp(magic, "VTRR", 4) == 0) {
        rewind(fp);
        st = inspect_records(fp, path, err);
        fclose(fp);
        return st;
    }
    fclose(fp);
    if (n == 9 && magic[8] == '{')
        return inspect_safetensors(path, err);
    return vtr_fail(err, VTR_ERR_FORMAT,
                    "%s: not an NPY file, a safetensors file or a vtr record stream", path);
}

static void usage(FILE *out)
{
    fputs("usage: vtr-inspect [--json] [--log-json] [FILE|DIR...]\n"
          "Show the arrays in NPY files, safetensors files (and their metadata) and vtr\n"
          "record streams, and what an embedding index (vtr-index, vtr-aggregate --index)\n"
          "or a feature store (vtr-features --store) directory holds (no FILE or '-': a\n"
          "record stream on stdin).\n"
          "  --json      one JSON object per array, tensor, record, file header or directory\n"
          "  --log-json  errors as JSON events on stderr\n"
          "  --version   the version\n"
          "Exit status: 0 all inputs read, 2 some could not be read, 1 bad usage or the\n"
          "output could not be written (\"stdout: No space left on device\").\n",
          out);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"log-json", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    bool log_json = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'j': json_output = true; break;
        case 'L': log_json = true; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("vtr-inspect %s\n%s\n", vtr_version, vtr_blas_kernel_report()); return 0;
        default: usage(stderr); return 1;
        }
    }
    vtr_log_init(argv[0], log_json);
    int failed = 0;
    const char *stdin_only[] = {"-"};
    const char *const *paths = optind < argc ? (const char *const *)argv + optind : stdin_only;
    int count = optind < argc ? argc - optind : 1;
    for (int i = 0; i < count; i++) {
        vtr_error err;
        if (inspect_path(paths[i], &err) != VTR_OK) {
            vtr_log_item_error(paths[i], &err);
            failed++;
        }
    }
    vtr_error err;
    if (vtr_output_flush(stdout, "stdout", &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }
    return failed ? 2 : 0;
}
