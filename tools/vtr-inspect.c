/* vtr-inspect: show what an NPY file, a safetensors file or a record stream holds.
 *
 *   vtr-inspect [--json] [FILE...]      (no FILE or "-": a record stream on stdin)
 *
 * One line per array (dtype and shape), per tensor, or per record (key, dtype, shape,
 * metadata); --json prints one JSON object per line instead. Exit status: 0 when every
 * input was read, 2 when some could not be (each reported on stderr), 1 on bad usage or
 * when the output could not be written. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/npy.h"
#include "lib/record.h"
#include "lib/safetensors.h"

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

static vtr_status inspect_safetensors(const char *path, vtr_error *err)
{
    vtr_safetensors st;
    vtr_status rc = vtr_safetensors_open(path, &st, err);
    if (rc != VTR_OK)
        return rc;
    if (!json_output) {
        char *meta = st.metadata ? json_dumps(st.metadata, VTR_JSON_FLAGS) : NULL;
        char shown[1024];
        printf("%s: safetensors, %zu tensors%s%s\n", vtr_shown(path, shown, sizeof shown),
               st.count, meta ? ", metadata " : "", meta ? meta : "");
        free(meta);
    }
    for (size_t i = 0; i < st.count; i++)
        print_array(path, "safetensors", st.entries[i].name, &st.entries[i].tensor, NULL);
    vtr_safetensors_close(&st);
    return VTR_OK;
}

static vtr_status inspect_path(const char *path, vtr_error *err)
{
    if (strcmp(path, "-") == 0)
        return inspect_records(stdin, "stdin", err);
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
    fputs("usage: vtr-inspect [--json] [--log-json] [FILE...]\n"
          "Show the arrays in NPY files, safetensors files and vtr record streams\n"
          "(no FILE or '-': a record stream on stdin).\n"
          "  --json      one JSON object per array, tensor or record\n"
          "  --log-json  errors as JSON events on stderr\n"
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
        {NULL, 0, NULL, 0},
    };
    bool log_json = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'j': json_output = true; break;
        case 'L': log_json = true; break;
        case 'h': usage(stdout); return 0;
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
