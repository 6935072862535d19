/* The files of a video archive, as vtr-index sees them: a directory walked recursively,
 * or a manifest of paths, with each file's size and modification time.
 *
 * Directory: every regular file (or symbolic link to one) whose extension, case
 * insensitively, is a video or image one (vtr_archive_is_media_name); directories and
 * files whose name starts with '.' are skipped, and symbolic links to directories are not
 * followed (no cycles). Key: the path relative to the directory, '/'-separated.
 * Manifest: PATH or KEY<TAB>PATH lines, '#' comments (the grammar of lib/manifest.h, as
 * for vtr-decode; relative paths are relative to the working directory). Key: KEY when
 * given, else the path as written. Every listed path is an item whatever its extension;
 * one that cannot be stat'ed is kept with size and mtime -1 (its decoding then fails and
 * says why). An item listed twice (same key and path) counts once; a key given to two
 * paths is an error.
 *
 * The list is sorted by key (strcmp order), so runs visit files in a stable order.
 */
#ifndef VTR_ARCHIVE_SOURCE_H
#define VTR_ARCHIVE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

typedef struct vtr_archive_file {
    char *key;        /* the item key (see above) */
    char *path;       /* the path to open */
    int64_t size;     /* bytes, -1 when it could not be stat'ed */
    int64_t mtime_ns; /* ns since the epoch, -1 when it could not be stat'ed */
} vtr_archive_file;

typedef struct vtr_archive_files {
    size_t n;
    vtr_archive_file *files;
    bool is_dir;      /* the source was a directory */
    char *root;       /* the source's absolute path */
} vtr_archive_files;

/* Whether a file name has a video or image extension vtr-index takes (docs/indexing.md
 * lists them; .webp although FFmpeg cannot decode an animated one: its failure is
 * reported, not the file skipped). */
bool vtr_archive_is_media_name(const char *name);

/* Lists the files of source (a directory or a manifest); free them with
 * vtr_archive_files_free. VTR_ERR_IO naming the path when the source, or a directory under
 * it, cannot be read; VTR_ERR_FORMAT for a manifest line that breaks the grammar
 * ("MANIFEST:LINE: ...") or a key given to two paths ("MANIFEST: key 'K' names two paths:
 * A and B"); VTR_ERR_NOMEM. *out is empty on failure. */
vtr_status vtr_archive_files_list(const char *source, vtr_archive_files *out, vtr_error *err);

void vtr_archive_files_free(vtr_archive_files *files);

#endif
