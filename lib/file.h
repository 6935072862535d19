/* Files: read-only mappings for readers, atomic replacement for writers.
 *
 * Readers map whole files (NPY, safetensors, feature stores) so that large arrays are
 * paged in on demand. Writers never leave a half-written file under the final name:
 * they write to "<path>.tmp.<pid>" in the same directory, fsync, then rename.
 */
#ifndef VTR_FILE_H
#define VTR_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef struct vtr_mapped_file {
    const void *data; /* NULL for an empty file */
    size_t size;
} vtr_mapped_file;

/* Inputs that are read as whole files (videos, images, audio, weights, NPY, safetensors,
 * index segments) must be regular files: a FIFO waits for a writer and a device such as
 * /dev/zero never ends. Streams (manifests, record streams, queries) are read with stdio
 * and may be pipes.
 *
 * vtr_regular_file checks path with stat before a library (FFmpeg, libsndfile, HDF5) opens
 * it by name; vtr_open_regular opens it itself (O_NONBLOCK, so that a FIFO does not block
 * the open, then fstat, so that what is read is what was checked) and returns a blocking
 * read-only descriptor. Both fail with VTR_ERR_IO naming path: "PATH: <strerror>", "PATH: is
 * a directory", "PATH: not a regular file (a FIFO)" (a character device, a block device, a
 * socket). *size (may be NULL) receives the file's size in bytes. */
vtr_status vtr_regular_file(const char *path, int64_t *size, vtr_error *err);
vtr_status vtr_open_regular(const char *path, int *fd, int64_t *size, vtr_error *err);

/* Maps `path` (vtr_open_regular) read-only. On failure `out` is left empty and err names
 * the path. */
vtr_status vtr_map_file(const char *path, vtr_mapped_file *out, vtr_error *err);

/* Unmaps; safe on an empty or already-unmapped value. */
void vtr_unmap_file(vtr_mapped_file *file);

typedef struct vtr_atomic_file {
    FILE *fp;         /* write here */
    char *path;       /* final name (owned) */
    char *tmp_path;   /* temporary name (owned); NULL when writing in place */
} vtr_atomic_file;

/* Opens a temporary file beside `path` for writing. When `path` exists and is not a
 * regular file (/dev/null, a FIFO, a terminal), it is written in place instead, and
 * commit only flushes and closes it. */
vtr_status vtr_atomic_open(vtr_atomic_file *file, const char *path, vtr_error *err);

/* Flushes, fsyncs and renames the temporary file to its final name, then frees `file`.
 * On failure the temporary file is removed and the final name is untouched. */
vtr_status vtr_atomic_commit(vtr_atomic_file *file, vtr_error *err);

/* Closes and removes the temporary file; safe after a failed open or a commit. */
void vtr_atomic_abort(vtr_atomic_file *file);

/* "dir/name", malloc'ed; NULL when out of memory. */
char *vtr_path_join(const char *dir, const char *name);

/* Reads the first n bytes of the file at path into buf (to tell its kind by them);
 * returns how many it read: fewer for a shorter file, 0 for one that cannot be opened. */
size_t vtr_read_head(const char *path, void *buf, size_t n);

/* mkdir -p: creates the directory path and its missing parents (mode 0777 less the
 * umask); an existing directory is fine. VTR_ERR_IO "cannot create DIR: ..." naming the
 * component that failed (one that exists and is not a directory included). */
vtr_status vtr_make_dirs(const char *path, vtr_error *err);

/* Removes the directory path and the files in it, as far as it can (for a directory
 * this process built, such as a store or an index being written, which has no
 * subdirectories): rm -r without the recursion. */
void vtr_remove_flat_dir(const char *path);

/* fsync of a directory, so that a rename in it is durable (a file system that cannot sync
 * directories is fine). VTR_ERR_IO "DIR: ..." naming it. */
vtr_status vtr_sync_dir(const char *path, vtr_error *err);

/* Flushes fp, a program's output (its stdout, named "stdout"), and checks that everything
 * written to it arrived: VTR_ERR_IO "NAME: <strerror>" ("stdout: No space left on
 * device") when the flush fails, "NAME: a write failed" when an earlier write did. Every
 * program calls it on what it printed before it reports success. */
vtr_status vtr_output_flush(FILE *fp, const char *name, vtr_error *err);

/* fwrite that reports a short write as an error naming `what`. */
vtr_status vtr_write_all(FILE *fp, const void *data, size_t size, const char *what,
                         vtr_error *err);

#endif
