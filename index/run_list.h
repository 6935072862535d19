/* The training runs vtr-serve's runs page shows: run directories (vtr-train's, holding
 * metrics.jsonl: match/run_dir.h) found under the roots it was given. A root is a run
 * directory itself, or a directory whose subdirectories are runs (a demo's runs/). The
 * page names a run by its name here, never by a path. */
#ifndef VTR_RUN_LIST_H
#define VTR_RUN_LIST_H

#include <stddef.h>

#include "lib/error.h"

typedef struct vtr_run_list {
    size_t n;
    char **names; /* n: the directory's last component, or as many more as tell runs of
                   * the same name apart ("seed-2/runs/vse-inf", "seed-3/runs/vse-inf") */
    char **dirs;  /* n: the directory as found (a root joined with a subdirectory) */
} vtr_run_list;

/* Lists the runs under the n_roots roots: a root with metrics.jsonl is one run; else its
 * subdirectories that have one, in name order (names starting with '.' skipped); a
 * directory found twice (by the same path) is listed once. A root
 * that is not a directory: VTR_ERR_IO naming it; one without runs adds none. *out is
 * empty on failure. */
vtr_status vtr_run_list_scan(const char *const *roots, size_t n_roots, vtr_run_list *out,
                             vtr_error *err);

void vtr_run_list_free(vtr_run_list *l);

/* The directory of the run called name, or NULL. */
const char *vtr_run_list_find(const vtr_run_list *l, const char *name);

#endif
