/* The training runs of vtr-serve's runs page (run_list.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "run_list.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/file.h"
#include "match/run_dir.h"

void vtr_run_list_free(vtr_run_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->dirs[i]);
    }
    free(l->names);
    free(l->dirs);
    memset(l, 0, sizeof *l);
}

const char *vtr_run_list_find(const vtr_run_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return l->dirs[i];
    return NULL;
}

/* Whether dir holds a run's metrics. */
static int is_run(const char *dir)
{
    char *m = vtr_path_join(dir, VTR_RUN_METRICS);
    int yes = m && access(m, R_OK) == 0;
    free(m);
    return yes;
}

/* The last `parts` components of path dir (all of it when it has fewer), malloc'ed. */
static char *tail_of(const char *dir, int parts)
{
    const char *p = dir + strlen(dir);
    while (p > dir && parts > 0) {
        p--;
        if (*p == '/' && --parts == 0)
            p++;
    }
    return strdup(p);
}

/* Adds run dir (owned by the list from here on; a directory listed already is dropped);
 * names are given at the end (name_all). */
static vtr_status add(vtr_run_list *l, char *dir, vtr_error *err)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->dirs[i], dir) == 0) {
            free(dir);
            return VTR_OK;
        }
    char **names = realloc(l->names, (l->n + 1) * sizeof *names);
    if (names)
        l->names = names;
    char **dirs = realloc(l->dirs, (l->n + 1) * sizeof *dirs);
    if (dirs)
        l->dirs = dirs;
    if (!names || !dirs) {
        free(dir);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    l->names[l->n] = NULL;
    l->dirs[l->n++] = dir;
    return VTR_OK;
}

/* Names each run by the last component of its directory, or by as many more as tell it
 * from the runs of the same name ("seed-2/runs/vse-inf" and "seed-3/runs/vse-inf"). */
static vtr_status name_all(vtr_run_list *l, vtr_error *err)
{
    int *parts = malloc((l->n ? l->n : 1) * sizeof *parts);
    if (!parts)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < l->n; i++)
        parts[i] = 1;
    vtr_status st = VTR_OK;
    for (bool changed = true; changed && st == VTR_OK;) {
        changed = false;
        for (size_t i = 0; i < l->n && st == VTR_OK; i++) {
            free(l->names[i]);
            if (!(l->names[i] = tail_of(l->dirs[i], parts[i])))
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < l->n && st == VTR_OK; i++)
            for (size_t j = i + 1; j < l->n; j++)
                if (strcmp(l->names[i], l->names[j]) == 0 &&
                    strcmp(l->names[i], l->dirs[i]) != 0) { /* more of the path, if any */
                    parts[i]++;
                    parts[j]++;
                    changed = true;
                }
    }
    free(parts);
    return st;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The runs among root's subdirectories, in name order. */
static vtr_status scan_root(vtr_run_list *l, const char *root, vtr_error *err)
{
    DIR *d = opendir(root);
    if (!d)
        return vtr_fail_errno(err, "runs %s", root);
    char **subs = NULL;
    size_t n = 0;
    vtr_status st = VTR_OK;
    struct dirent *e;
    while (st == VTR_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *sub = vtr_path_join(root, e->d_name);
        char **grown = sub ? realloc(subs, (n + 1) * sizeof *subs) : NULL;
        if (!grown) {
            free(sub);
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            break;
        }
        subs = grown;
        subs[n++] = sub;
    }
    closedir(d);
    if (n)
        qsort(subs, n, sizeof *subs, name_cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (st == VTR_OK && stat(subs[i], &sb) == 0 && S_ISDIR(sb.st_mode) && is_run(subs[i])) {
            st = add(l, subs[i], err);
            subs[i] = NULL;
        }
        free(subs[i]);
    }
    free(subs);
    return st;
}

vtr_status vtr_run_list_scan(const char *const *roots, size_t n_roots, vtr_run_list *out,
                             vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < n_roots && st == VTR_OK; i++) {
        char *root = strdup(roots[i]);
        if (!root) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t n = strlen(root); n > 1 && root[n - 1] == '/'; n--)
            root[n - 1] = '\0'; /* "runs/a/" is run "a" */
        if (is_run(root)) {
            st = add(out, root, err);
        } else {
            st = scan_root(out, root, err);
            free(root);
        }
    }
    if (st == VTR_OK)
        st = name_all(out, err);
    if (st != VTR_OK)
        vtr_run_list_free(out);
    return st;
}
