/* The unit-test runner. Usage: unit-tests [SUBSTRING...]
 * Runs every registered test whose "file:name" contains one of the substrings (all when
 * none are given), prints "ok", "FAIL" or "skip" per test, then "N passed, N failed". */
#define _GNU_SOURCE
#include "check.h"
#include "../lib/device.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TESTS 2048

static struct {
    const char *file;
    const char *name;
    test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static jmp_buf test_jump;
static char tmpdir[256];
static int any_failed;

void test_register(const char *file, const char *name, test_fn fn)
{
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        exit(1);
    }
    const char *slash = strrchr(file, '/');
    tests[n_tests].file = slash ? slash + 1 : file;
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *slash = strrchr(file, '/');
    printf("    %s:%d: %s\n", slash ? slash + 1 : file, line, msg);
    longjmp(test_jump, 1);
}

void test_skip(const char *why)
{
    printf("    skipped: %s\n", why);
    longjmp(test_jump, 2);
}

const char *test_tmpdir(void)
{
    return tmpdir;
}

const char *test_path(const char *name)
{
    static char slots[8][512];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, sizeof slots[0], "%s/%s", tmpdir, name);
    return p;
}

/* LeakSanitizer's suppressions (builds with --enable-sanitizers): x265, which libheif's
 * HEVC encoder runs when vtr-synth writes a HEIC fixture, leaks about 1.2 kB per picture
 * in Debian 12's libx265 199 (its own allocations, not vtr's; vtr decodes HEIF without
 * it). A hook the sanitizer runtime looks up; unused in other builds. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libx265\n";
}

void test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "%s: %s", path, strerror(errno));
    CHECK_MSG(fwrite(data, 1, n, f) == n && fclose(f) == 0, "%s: writing failed", path);
}

void test_write_text(const char *path, const char *text)
{
    test_write_file(path, text, strlen(text));
}

double test_rel_error(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > diff || isnan(d))
            diff = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > scale)
            scale = fabs(b[i]);
    }
    return scale > 0 ? diff / scale : diff;
}

int test_run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fflush(stdout);
    int rc = system(cmd);
    if (rc == -1)
        return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

void test_fixture(int *state, const char *script, const char *modules, const char *make)
{
    enum { NOT_TRIED, MADE, NO_SCRIPT, NO_MODULES, FAILED };
    if (*state == NOT_TRIED) {
        *state = access(script, R_OK) != 0 ? NO_SCRIPT
                 : test_run("/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", modules) != 0
                     ? NO_MODULES
                     : FAILED;
        if (*state == FAILED) {
            if (test_run("%s", make) != 0)
                test_fail(__FILE__, __LINE__, "making a fixture failed: %s", make);
            *state = MADE;
        }
    }
    char why[256];
    if (*state == NO_SCRIPT)
        snprintf(why, sizeof why, "run from the top of the source tree to find %s", script);
    else if (*state == NO_MODULES)
        snprintf(why, sizeof why, "/usr/bin/python3 cannot import %s", modules);
    else if (*state == FAILED)
        snprintf(why, sizeof why, "the fixture failed before: %s", make);
    if (*state != MADE)
        test_skip(why);
}

static int selected(const char *file, const char *name, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    char full[512];
    snprintf(full, sizeof full, "%s:%s", file, name);
    for (int i = 1; i < argc; i++)
        if (strstr(full, argv[i]))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    /* --list [FILTER...]: the selected tests' names, file:name, one per line */
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < n_tests; i++)
            if (selected(tests[i].file, tests[i].name, argc - 1, argv + 1))
                printf("%s:%s\n", tests[i].file, tests[i].name);
        return 0;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/vtr-test-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        if (!selected(tests[i].file, tests[i].name, argc, argv))
            continue;
        int outcome = setjmp(test_jump);
        if (outcome == 0) {
            tests[i].fn();
            printf("ok   %s:%s\n", tests[i].file, tests[i].name);
            passed++;
        } else if (outcome == 1) {
            printf("FAIL %s:%s\n", tests[i].file, tests[i].name);
            failed++;
        } else {
            printf("skip %s:%s\n", tests[i].file, tests[i].name);
            skipped++;
        }
    }
    any_failed = failed > 0;
    if (!any_failed)
        test_run("rm -rf '%s'", tmpdir);
    else
        printf("test files kept in %s\n", tmpdir);
    if (skipped)
        printf("%d skipped\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

void test_need_cuda(void)
{
    vtr_error err;
    char name[256];
    if (!vtr_cuda_available()) {
        vtr_cuda_init(0, name, sizeof name, &err); /* fails, saying why */
        test_skip(err.msg);
    }
    CHECK_OK(vtr_cuda_init(0, name, sizeof name, &err));
}
