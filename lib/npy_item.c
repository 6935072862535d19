/* One item of an --out-dir output (npy_item.h). */
#define _POSIX_C_SOURCE 200809L
#include "lib/npy_item.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/file.h"
#include "lib/keyed_files.h"
#include "lib/npy.h"

vtr_status vtr_npy_item_save(const char *dir, const char *key, const vtr_tensor *t,
                             const json_t *meta, vtr_error *err)
{
    vtr_status st = vtr_key_check_file_name(key, "--out-dir", err);
    if (st != VTR_OK)
        return st;
    size_t n = strlen(dir) + strlen(key) + 8;
    char *npy = malloc(n), *js = malloc(n);
    if (!npy || !js) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    snprintf(npy, n, "%s/%s.npy", dir, key);
    snprintf(js, n, "%s/%s.json", dir, key);
    if ((st = vtr_npy_save(npy, t, 0, err)) != VTR_OK)
        goto end;
    vtr_atomic_file f;
    if ((st = vtr_atomic_open(&f, js, err)) != VTR_OK) {
        unlink(npy);
        goto end;
    }
    if (json_dumpf(meta, f.fp, JSON_INDENT(1)) != 0 || fputc('\n', f.fp) == EOF) {
        st = vtr_fail(err, VTR_ERR_IO, "%s: write failed", js);
        vtr_atomic_abort(&f);
        unlink(npy);
        goto end;
    }
    if ((st = vtr_atomic_commit(&f, err)) != VTR_OK)
        unlink(npy);
end:
    free(npy);
    free(js);
    return st;
}

vtr_status vtr_npy_item_load(const char *npy_path, vtr_npy_file *file, json_t **meta,
                             vtr_error *err)
{
    *meta = NULL;
    vtr_status st = vtr_npy_load(npy_path, file, err);
    if (st != VTR_OK)
        return st;
    size_t n = strlen(npy_path);
    char *js = malloc(n + 2);
    if (!js) {
        vtr_npy_close(file);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    /* KEY.npy -> KEY.json */
    memcpy(js, npy_path, n - 4);
    strcpy(js + n - 4, ".json");
    if (access(js, F_OK) != 0) {
        free(js);
        if (!(*meta = json_object())) {
            vtr_npy_close(file);
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        }
        return VTR_OK;
    }
    json_error_t je;
    json_t *m = json_load_file(js, JSON_REJECT_DUPLICATES, &je);
    if (!m || !json_is_object(m)) {
        st = m ? vtr_fail(err, VTR_ERR_FORMAT, "%s: not a JSON object", js)
               : vtr_fail(err, VTR_ERR_FORMAT, "%s:%d: %s", js, je.line, je.text);
        json_decref(m);
        free(js);
        vtr_npy_close(file);
        return st;
    }
    free(js);
    *meta = m;
    return VTR_OK;
}
