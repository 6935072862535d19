/* Item inputs: files named on a command line or found in directories, each with its
 * item key (the file name without directory and extension, as vtr-decode names items).
 */
#ifndef VTR_KEYED_FILES_H
#define VTR_KEYED_FILES_H

#include <stddef.h>

#include "error.h"

typedef struct vtr_keyed_file {
    char *key;  /* owned */
    char *path; /* owned */
} vtr_keyed_file;

typedef struct vtr_keyed_files {
    vtr_keyed_file *v;
    size_t n, cap;
} vtr_keyed_files;

/* "dir/clip.01.wav" -> "clip.01" (a leading dot is not an extension: ".wav" -> ".wav").
 * malloc'd; NULL when out of memory. */
char *vtr_key_from_path(const char *path);

/* The longest key that names files: KEY.json and its temporary name KEY.json.tmp.PID stay
 * within the 255 bytes a file name may have. */
#define VTR_KEY_FILE_NAME_MAX 200

/* The one check of a key that becomes a file name in an output directory (DIR/KEY.npy of
 * --out-dir, DIR/KEY.wav of --audio-dir), so that no key writes (or removes) outside DIR:
 * not empty, no '/', not "." or "..", at most VTR_KEY_FILE_NAME_MAX bytes (a C string holds
 * no NUL). VTR_ERR_INVALID "key 'KEY' cannot name a file in WHERE: <why>" otherwise (KEY
 * escaped with vtr_printable; WHERE names the directory's option, e.g. "--audio-dir"). */
vtr_status vtr_key_check_file_name(const char *key, const char *where, vtr_error *err);

/* Appends (key, path); key NULL takes vtr_key_from_path(path). VTR_ERR_NOMEM only. */
vtr_status vtr_keyed_files_add(vtr_keyed_files *l, const char *key, const char *path,
                               vtr_error *err);

/* Appends the entries of dir whose names end in one of the n suffixes (compared without
 * case; e.g. ".wav"), sorted by key in byte order (then by name); hidden entries
 * ("."-names) and directories are skipped. VTR_ERR_IO names dir when it cannot be listed; on
 * failure nothing is appended. */
vtr_status vtr_keyed_files_add_dir(vtr_keyed_files *l, const char *dir, const char *const *suffixes,
                                   size_t n, vtr_error *err);

/* Frees the entries and the array and zeroes l; safe on a zeroed value. */
void vtr_keyed_files_free(vtr_keyed_files *l);

#endif
