/* Item inputs with their keys (keyed_files.h). */
#define _POSIX_C_SOURCE 200809L
#include "keyed_files.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/stat.h>

#include "file.h"

char *vtr_key_from_path(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return strndup(base, len);
}

vtr_status vtr_key_check_file_name(const char *key, const char *where, vtr_error *err)
{
    size_t len = strlen(key);
    const char *why = NULL;
    if (len == 0)
        why = "it is empty";
    else if (strchr(key, '/'))
        why = "it holds a '/'";
    else if (!strcmp(key, ".") || !strcmp(key, ".."))
        why = "it names a directory";
    else if (len > VTR_KEY_FILE_NAME_MAX)
        why = "it is too long";
    if (!why)
        return VTR_OK;
    char shown[96];
    return vtr_fail(err, VTR_ERR_INVALID,
                    "key '%s' cannot name a file in %s: %s (at most %d bytes, no '/', not '.' "
                    "or '..')",
                    vtr_printable(key, len, shown, sizeof shown), where, why,
                    VTR_KEY_FILE_NAME_MAX);
}

vtr_status vtr_keyed_files_add(vtr_keyed_files *l, const char *key, const char *path,
                               vtr_error *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        vtr_keyed_file *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    char *k = key ? strdup(key) : vtr_key_from_path(path);
    char *p = strdup(path);
    if (!k || !p) {
        free(k);
        free(p);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    l->v[l->n++] = (vtr_keyed_file){k, p};
    return VTR_OK;
}

static bool has_suffix(const char *name, const char *const *suffixes, size_t n)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        size_t sl = strlen(suffixes[i]);
        if (len > sl && !strcasecmp(name + len - sl, suffixes[i]))
            return true;
    }
    return false;
}

static int by_key(const void *a, const void *b)
{
    const vtr_keyed_file *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->path, y->path);
}

vtr_status vtr_keyed_files_add_dir(vtr_keyed_files *l, const char *dir, const char *const *suffixes,
                                   size_t n, vtr_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return vtr_fail_errno(err, "%s", dir);
    vtr_status st = VTR_OK;
    size_t first = l->n;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.' || !has_suffix(name, suffixes, n)) {
            errno = 0;
            continue;
        }
        char *path = vtr_path_join(dir, name);
        if (!path) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        struct stat sb;
        if (!(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
            st = vtr_keyed_files_add(l, NULL, path, err);
        free(path);
        if (st != VTR_OK)
            break;
        errno = 0;
    }
    if (st == VTR_OK && errno != 0)
        st = vtr_fail_errno(err, "%s", dir);
    closedir(d);
    if (st != VTR_OK) {
        for (size_t i = first; i < l->n; i++) {
            free(l->v[i].key);
            free(l->v[i].path);
        }
        l->n = first;
        return st;
    }
    qsort(l->v + first, l->n - first, sizeof *l->v, by_key);
    return VTR_OK;
}

void vtr_keyed_files_free(vtr_keyed_files *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].path);
    }
    free(l->v);
    *l = (vtr_keyed_files){0};
}
