/* Where a program writes its record stream (lib/record.h): a named file, written
 * atomically (complete at commit, nothing left behind on abort), or stdout, which must not
 * be a terminal (records are binary). Programs reach it through their item output
 * (lib/item_output.h), which opens it for -o. */
#ifndef VTR_RECORD_OUTPUT_H
#define VTR_RECORD_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/error.h"
#include "lib/file.h"

typedef struct vtr_record_output {
    FILE *fp;          /* where vtr_record_write writes */
    const char *name;  /* "stdout" or the path, for messages */
    vtr_atomic_file file;
    bool atomic;       /* a file not yet committed */
} vtr_record_output;

/* Opens path (NULL or "-": stdout). VTR_ERR_INVALID "refusing to write records to a
 * terminal: use <alternatives>" when stdout is one (alternatives, e.g. "-o FILE, --out-dir
 * DIR or a pipe"), and for a path ending in ".npy" (a record stream is not NPY: every
 * program that writes records has --out-dir for NPY files); vtr_atomic_open's errors. On
 * failure o is zeroed. */
vtr_status vtr_record_output_open(vtr_record_output *o, const char *path,
                                  const char *alternatives, vtr_error *err);

/* Commits the file (renames it into place) or flushes stdout. VTR_ERR_IO naming it. */
vtr_status vtr_record_output_commit(vtr_record_output *o, vtr_error *err);

/* Removes an uncommitted file; nothing for stdout. Safe on a zeroed or committed value. */
void vtr_record_output_abort(vtr_record_output *o);

#endif
