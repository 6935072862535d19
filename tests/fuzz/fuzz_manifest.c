/* Fuzz target: the line reader (lib/lines.h) and the manifest grammar (lib/manifest.h)
 * on arbitrary bytes: the manifest read from memory to its end, going on past the lines
 * it refuses, and the same bytes as a file through vtr_line_list_read. A refusal must
 * come with one line (lib/error.h) starting with "NAME:LINE: "; an item has a non-empty path
 * and no key or a non-empty one without a tab; lines never hold their end ("\n", a '\r'
 * before it), and a file without NUL bytes has as many lines as line ends (plus a last
 * line without one). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/lines.h"
#include "lib/manifest.h"

static void read_manifest(const uint8_t *data, size_t size)
{
    FILE *fp = fmemopen((void *)data, size, "rb");
    if (!fp)
        return;
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, "fuzz");
    int64_t last = 0;
    for (size_t guard = 0; guard <= size + 1; guard++) {
        const char *key, *path;
        vtr_error err;
        vtr_status st = vtr_manifest_next(&r, &key, &path, &err);
        if (r.line < last)
            abort();
        last = r.line;
        if (st != VTR_OK) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "fuzz:%lld: ", (long long)r.line);
            fuzz_check_message(&err, prefix);
            continue;
        }
        if (!path)
            break;
        if (!*path || strchr(path, '\n') || (key && (!*key || strchr(key, '\t'))))
            abort();
    }
    vtr_line_reader_free(&r);
    fclose(fp);
}

static void read_list(const uint8_t *data, size_t size)
{
    fuzz_scratch();
    fuzz_write_file("lines.txt", data, size);
    char *path = fuzz_path("lines.txt");
    for (int skip_blank = 0; skip_blank < 2; skip_blank++) {
        vtr_line_list l = {0};
        vtr_error err;
        vtr_status st = vtr_line_list_read(&l, path, skip_blank, &err);
        bool has_nul = memchr(data, '\0', size) != NULL;
        if (st != VTR_OK) {
            fuzz_check_message(&err, path);
            if (!has_nul)
                abort();
        } else {
            size_t ends = 0;
            for (size_t i = 0; i < size; i++)
                ends += data[i] == '\n';
            size_t lines = ends + (size > 0 && data[size - 1] != '\n');
            if (has_nul || (skip_blank ? l.n > lines : l.n != lines))
                abort();
            for (size_t i = 0; i < l.n; i++) {
                size_t len = strlen(l.v[i]);
                if (strchr(l.v[i], '\n') || (len && l.v[i][len - 1] == '\r') ||
                    (skip_blank && vtr_line_is_blank(l.v[i])))
                    abort();
            }
        }
        vtr_line_list_free(&l);
    }
    free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_manifest(data, size);
    read_list(data, size);
    return 0;
}
