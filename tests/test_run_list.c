/* The training runs of vtr-serve's runs page (index/run_list.h): runs found under roots,
 * named by as much of their path as tells them apart, never listed twice. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "index/run_list.h"

/* A directory (with its parents) under the test's folder; with metrics, a run. */
static void make_dir(const char *rel, int metrics)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/runs-test", test_tmpdir());
    mkdir(path, 0755);
    for (const char *p = rel; (p = strchr(p, '/')); p++) {
        snprintf(path, sizeof path, "%s/runs-test/%.*s", test_tmpdir(), (int)(p - rel), rel);
        mkdir(path, 0755);
    }
    snprintf(path, sizeof path, "%s/runs-test/%s", test_tmpdir(), rel);
    mkdir(path, 0755);
    if (metrics) {
        strcat(path, "/metrics.jsonl");
        FILE *fp = fopen(path, "w");
        CHECK(fp != NULL);
        fputs("{\"epoch\": 1, \"loss\": 1.5}\n", fp);
        fclose(fp);
    }
}

TEST(run_list_finds_and_names_runs)
{
    make_dir("seed-2/runs/vse-inf", 1);
    make_dir("seed-3/runs/vse-inf", 1);
    make_dir("seed-3/runs/hgr", 1);
    make_dir("seed-3/runs/.hidden", 1);
    make_dir("seed-3/runs/notes", 0);
    char a[1024], b[1024], c[1024], d[1024];
    snprintf(a, sizeof a, "%s/runs-test/seed-2/runs", test_tmpdir());
    snprintf(b, sizeof b, "%s/runs-test/seed-3/runs/", test_tmpdir());
    snprintf(c, sizeof c, "%s/runs-test/seed-3/runs/hgr", test_tmpdir()); /* a run again */
    snprintf(d, sizeof d, "%s/runs-test/seed-3/runs/notes", test_tmpdir()); /* no runs */
    const char *roots[] = {a, b, c, d};
    vtr_run_list l;
    vtr_error err;
    CHECK_OK(vtr_run_list_scan(roots, 4, &l, &err));
    CHECK(l.n == 3);
    if (l.n == 3) {
        CHECK_STR(l.names[0], "seed-2/runs/vse-inf");
        CHECK_STR(l.names[1], "hgr");
        CHECK_STR(l.names[2], "seed-3/runs/vse-inf");
        CHECK(strstr(l.dirs[1], "seed-3/runs/hgr") != NULL);
        CHECK(vtr_run_list_find(&l, "hgr") == l.dirs[1]);
    }
    CHECK(vtr_run_list_find(&l, "vse-inf") == NULL);
    CHECK(vtr_run_list_find(&l, "../runs-test/seed-3/runs/hgr") == NULL);
    vtr_run_list_free(&l);
    /* a root that is not there */
    const char *missing[] = {"/nonexistent/runs"};
    CHECK_FAILS(vtr_run_list_scan(missing, 1, &l, &err), VTR_ERR_IO, "runs /nonexistent/runs");
    CHECK(l.n == 0);
}
