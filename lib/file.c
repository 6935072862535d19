#define _POSIX_C_SOURCE 200809L
#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The refusal of a path whose stat is sb, or VTR_OK for a regular file. */
static vtr_status check_regular(const char *path, const struct stat *sb, vtr_error *err)
{
    if (S_ISREG(sb->st_mode))
        return VTR_OK;
    if (S_ISDIR(sb->st_mode))
        return vtr_fail(err, VTR_ERR_IO, "%s: is a directory", path);
    const char *kind = S_ISFIFO(sb->st_mode)   ? "a FIFO"
                       : S_ISCHR(sb->st_mode)  ? "a character device"
                       : S_ISBLK(sb->st_mode)  ? "a block device"
                       : S_ISSOCK(sb->st_mode) ? "a socket"
                                               : "of an unknown kind";
    return vtr_fail(err, VTR_ERR_IO, "%s: not a regular file (%s)", path, kind);
}

vtr_status vtr_regular_file(const char *path, int64_t *size, vtr_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vtr_fail_errno(err, "%s", path);
    vtr_status st = check_regular(path, &sb, err);
    if (st == VTR_OK && size)
        *size = (int64_t)sb.st_size;
    return st;
}

vtr_status vtr_open_regular(const char *path, int *fd, int64_t *size, vtr_error *err)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0)
        return vtr_fail_errno(err, "%s", path);
    struct stat sb;
    vtr_status st = fstat(*fd, &sb) == 0 ? check_regular(path, &sb, err)
                                        : vtr_fail_errno(err, "%s", path);
    int flags;
    if (st == VTR_OK && ((flags = fcntl(*fd, F_GETFL)) < 0 ||
                         fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0))
        st = vtr_fail_errno(err, "%s", path);
    if (st != VTR_OK) {
        close(*fd);
        *fd = -1;
        return st;
    }
    if (size)
        *size = (int64_t)sb.st_size;
    return VTR_OK;
}

vtr_status vtr_map_file(const char *path, vtr_mapped_file *out, vtr_error *err)
{
    out->data = NULL;
    out->size = 0;
    int fd;
    int64_t size;
    vtr_status st = vtr_open_regular(path, &fd, &size, err);
    if (st != VTR_OK || size == 0)
        goto end;
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        st = vtr_fail_errno(err, "%s: mmap", path);
        goto end;
    }
    out->data = p;
    out->size = (size_t)size;
end:
    if (fd >= 0)
        close(fd);
    return st;
}

void vtr_unmap_file(vtr_mapped_file *file)
{
    if (file->data)
        munmap((void *)file->data, file->size);
    file->data = NULL;
    file->size = 0;
}

vtr_status vtr_atomic_open(vtr_atomic_file *file, const char *path, vtr_error *err)
{
    memset(file, 0, sizeof *file);
    size_t n = strlen(path) + 32;
    file->path = strdup(path);
    file->tmp_path = malloc(n);
    if (!file->path || !file->tmp_path) {
        vtr_atomic_abort(file);
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* /dev/null, a FIFO, a terminal: written in place; renaming over it would
         * replace the device with a plain file */
        free(file->tmp_path);
        file->tmp_path = NULL;
        file->fp = fopen(path, "wb");
    } else {
        snprintf(file->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
        file->fp = fopen(file->tmp_path, "wb");
    }
    if (!file->fp) {
        vtr_status st = vtr_fail_errno(err, "%s", path);
        vtr_atomic_abort(file);
        return st;
    }
    return VTR_OK;
}

vtr_status vtr_atomic_commit(vtr_atomic_file *file, vtr_error *err)
{
    vtr_status st = VTR_OK;
    if (fflush(file->fp) != 0 || (file->tmp_path && fsync(fileno(file->fp)) != 0)) {
        st = vtr_fail_errno(err, "%s", file->path);
        goto fail;
    }
    int rc = fclose(file->fp);
    file->fp = NULL;
    if (rc != 0) {
        st = vtr_fail_errno(err, "%s", file->path);
        goto fail;
    }
    if (file->tmp_path && rename(file->tmp_path, file->path) != 0) {
        st = vtr_fail_errno(err, "%s: rename", file->path);
        goto fail;
    }
    free(file->path);
    free(file->tmp_path);
    memset(file, 0, sizeof *file);
    return VTR_OK;
fail:
    vtr_atomic_abort(file);
    return st;
}

void vtr_atomic_abort(vtr_atomic_file *file)
{
    if (file->fp)
        fclose(file->fp);
    if (file->tmp_path)
        unlink(file->tmp_path);
    free(file->path);
    free(file->tmp_path);
    memset(file, 0, sizeof *file);
}

vtr_status vtr_output_flush(FILE *fp, const char *name, vtr_error *err)
{
    if (fflush(fp) != 0) /* stdio keeps what it could not write: errno is this flush's */
        return vtr_fail_errno(err, "%s", name);
    if (ferror(fp))
        return vtr_fail(err, VTR_ERR_IO, "%s: a write failed", name);
    return VTR_OK;
}

vtr_status vtr_write_all(FILE *fp, const void *data, size_t size, const char *what,
                         vtr_error *err)
{
    if (size && fwrite(data, 1, size, fp) != size)
        return vtr_fail_errno(err, "%s: write", what);
    return VTR_OK;
}

size_t vtr_read_head(const char *path, void *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got;
}

char *vtr_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

vtr_status vtr_make_dirs(const char *path, vtr_error *err)
{
    char *p = strdup(path);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = VTR_OK;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))) {
            if (errno == EEXIST)
                errno = ENOTDIR;
            st = vtr_fail_errno(err, "cannot create %s", p);
            break;
        }
        *s = c;
        if (!c)
            break;
    }
    free(p);
    return st;
}

vtr_status vtr_sync_dir(const char *path, vtr_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return vtr_fail_errno(err, "%s", path);
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) /* some file systems cannot sync directories */
        return vtr_fail_errno(err, "%s: fsync", path);
    return VTR_OK;
}

void vtr_remove_flat_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char *f = vtr_path_join(path, e->d_name);
            if (f)
                unlink(f);
            free(f);
        }
        closedir(d);
    }
    rmdir(path);
}
