/* The files of an archive: directory walk or manifest (archive_source.h). */
#define _XOPEN_SOURCE 700 /* realpath, strdup */
#include "archive_source.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "lib/file.h"
#include "lib/manifest.h"

static const char *const media_extensions[] = {
    "mp4",  "m4v", "mov",  "mkv", "webm", "avi",  "mpg", "mpeg", "vob",  "m2v", "ts",   "mts",
    "m2ts", "mxf", "dv",   "flv", "f4v",  "wmv",  "asf", "rm",   "rmvb", "3gp", "3g2",  "ogv",
    "gif",  "jpg", "jpeg", "png", "bmp",  "webp", "tif", "tiff", "avif", "jxl", "heic", "heif",
};

bool vtr_archive_is_media_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return false;
    for (size_t i = 0; i < sizeof media_extensions / sizeof *media_extensions; i++)
        if (!strcasecmp(dot + 1, media_extensions[i]))
            return true;
    return false;
}

typedef struct file_list {
    vtr_archive_files *out;
    size_t cap;
} file_list;

/* Appends (key, path) with the facts of st (NULL: unknown); takes neither string. */
static vtr_status append(file_list *l, const char *key, const char *path, const struct stat *st,
                         vtr_error *err)
{
    vtr_archive_files *f = l->out;
    if (f->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        vtr_archive_file *grown = realloc(f->files, cap * sizeof *grown);
        if (!grown)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        f->files = grown;
        l->cap = cap;
    }
    vtr_archive_file *e = &f->files[f->n];
    e->key = strdup(key);
    e->path = strdup(path);
    if (!e->key || !e->path) {
        free(e->key);
        free(e->path);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    e->size = st ? (int64_t)st->st_size : -1;
    e->mtime_ns = st ? (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec : -1;
    f->n++;
    return VTR_OK;
}

/* Walks dir (the path to open; rel: its key prefix, "" at the top). */
static vtr_status walk(file_list *l, const char *dir, const char *rel, vtr_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return vtr_fail_errno(err, "%s", dir);
    vtr_status st = VTR_OK;
    struct dirent *e;
    errno = 0;
    while (st == VTR_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = vtr_path_join(dir, e->d_name);
        char *key = rel[0] ? vtr_path_join(rel, e->d_name) : strdup(e->d_name);
        struct stat sb;
        if (!path || !key) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        } else if (lstat(path, &sb) != 0) {
            if (errno != ENOENT) /* gone since readdir: not part of the archive */
                st = vtr_fail_errno(err, "%s", path);
        } else if (S_ISDIR(sb.st_mode)) {
            st = walk(l, path, key, err);
        } else if (vtr_archive_is_media_name(e->d_name)) {
            /* a symbolic link counts when it leads to a regular file */
            bool regular = S_ISREG(sb.st_mode) ||
                           (S_ISLNK(sb.st_mode) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
            if (regular)
                st = append(l, key, path, &sb, err);
        }
        free(path);
        free(key);
        errno = 0;
    }
    if (st == VTR_OK && errno != 0)
        st = vtr_fail_errno(err, "%s", dir);
    closedir(d);
    return st;
}

/* Lists a manifest's items (lib/manifest.h); a line without KEY is keyed by its path. */
static vtr_status read_manifest(file_list *l, const char *manifest, vtr_error *err)
{
    FILE *fp = fopen(manifest, "r");
    if (!fp)
        return vtr_fail_errno(err, "%s", manifest);
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, manifest);
    const char *key, *path;
    vtr_status st;
    while ((st = vtr_manifest_next(&r, &key, &path, err)) == VTR_OK && path) {
        struct stat sb;
        bool known = stat(path, &sb) == 0;
        if ((st = append(l, key ? key : path, path, known ? &sb : NULL, err)) != VTR_OK)
            break;
    }
    vtr_line_reader_free(&r);
    fclose(fp);
    return st;
}

/* By key, then by path (so that the paths of a key listed twice come in a stable order). */
static int by_key(const void *a, const void *b)
{
    const vtr_archive_file *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->path, y->path);
}

vtr_status vtr_archive_files_list(const char *source, vtr_archive_files *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    file_list l = {.out = out};
    struct stat sb;
    if (stat(source, &sb) != 0)
        return vtr_fail_errno(err, "%s", source);
    out->is_dir = S_ISDIR(sb.st_mode);
    out->root = realpath(source, NULL);
    if (!out->root)
        return vtr_fail_errno(err, "%s", source);
    vtr_status st = out->is_dir ? walk(&l, source, "", err) : read_manifest(&l, source, err);
    if (st != VTR_OK) {
        vtr_archive_files_free(out);
        return st;
    }
    qsort(out->files, out->n, sizeof *out->files, by_key);
    /* a manifest may list an item twice: keep one; one key for two paths is an error */
    size_t kept = 0;
    for (size_t i = 0; i < out->n; i++) {
        vtr_archive_file *prev = kept ? &out->files[kept - 1] : NULL, *f = &out->files[i];
        if (prev && !strcmp(prev->key, f->key)) {
            if (strcmp(prev->path, f->path) && st == VTR_OK)
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s: key '%s' names two paths: %s and %s",
                              source, f->key, prev->path, f->path);
            free(f->key);
            free(f->path);
            continue;
        }
        out->files[kept++] = *f;
    }
    out->n = kept;
    if (st != VTR_OK)
        vtr_archive_files_free(out);
    return st;
}

void vtr_archive_files_free(vtr_archive_files *files)
{
    if (!files)
        return;
    for (size_t i = 0; i < files->n; i++) {
        free(files->files[i].key);
        free(files->files[i].path);
    }
    free(files->files);
    free(files->root);
    memset(files, 0, sizeof *files);
}
