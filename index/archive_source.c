/* The files of an archive: directory walk or manifest (archive_source.h). */
#define _XOPEN_SOURCE 700 /* realpath, strdup, getline */
#include "archive_source.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "lib/file.h"

static const char *const media_extensions[] = {
    "mp4", "m4v", "mov", "mkv", "webm", "avi", "mpg", "mpeg", "ts", "mts", "m2ts", "flv",
    "wmv", "3gp", "ogv", "jpg", "jpeg", "png", "bmp", "webp", "tif", "tiff",
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

static vtr_status read_manifest(file_list *l, const char *manifest, vtr_error *err)
{
    FILE *fp = fopen(manifest, "r");
    if (!fp)
        return vtr_fail_errno(err, "%s", manifest);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    vtr_status st = VTR_OK;
    while (st == VTR_OK && (len = getline(&line, &cap, fp)) != -1) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        struct stat sb;
        bool known = stat(line, &sb) == 0;
        st = append(l, line, line, known ? &sb : NULL, err);
    }
    if (st == VTR_OK && ferror(fp))
        st = vtr_fail_errno(err, "%s", manifest);
    free(line);
    fclose(fp);
    return st;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const vtr_archive_file *)a)->key, ((const vtr_archive_file *)b)->key);
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
    /* a manifest may list a path twice: keep one */
    size_t kept = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (kept && !strcmp(out->files[kept - 1].key, out->files[i].key)) {
            free(out->files[i].key);
            free(out->files[i].path);
            continue;
        }
        out->files[kept++] = out->files[i];
    }
    out->n = kept;
    return VTR_OK;
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
