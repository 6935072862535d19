/* The unit-test harness: TEST(name) registers a test; CHECK* fail it with file:line.
 *
 * Tests self-register (a constructor per TEST), so a test file needs no central list.
 * A failed CHECK jumps back to the runner; the test's remaining code does not run.
 * test_tmpdir() is a fresh directory per run, removed at exit unless a test failed.
 * test_skip() marks a test as skipped (e.g. no GPU); it counts as neither pass nor fail.
 *
 * unit-tests [FILTER...] runs the tests whose file:name contains one of the FILTERs (all
 * without one); unit-tests --list [FILTER...] prints those names instead.
 */
#ifndef VTR_CHECK_H
#define VTR_CHECK_H

#include <stdio.h>
#include <string.h>

#include "../lib/error.h"

typedef void (*test_fn)(void);

void test_register(const char *file, const char *name, test_fn fn);
_Noreturn void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void test_skip(const char *why);
const char *test_tmpdir(void);
/* Joins test_tmpdir() and name into a static rotating buffer (8 slots). */
const char *test_path(const char *name);
/* Writes the n bytes at data to path, replacing it; failing to fails the test. */
void test_write_file(const char *path, const void *data, size_t n);
/* test_write_file of a string without its NUL. */
void test_write_text(const char *path, const char *text);
/* max|a - b| / max|b| over n floats (infinite when a holds a NaN where b does not). */
double test_rel_error(const float *a, const float *b, size_t n);
/* Skips the calling test unless a CUDA GPU is visible (lib/device.h), then selects GPU 0
 * (vtr_cuda_init), failing the test when that fails. */
void test_need_cuda(void);
/* Runs a shell command; returns its exit status (or -1). */
int test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A fixture made once per run by a script of the tree that needs Python modules: the
 * first call for *state (a static int, 0 before) runs the shell command `make`, which must
 * succeed; every call skips the calling test when `script` is not at hand (not run from
 * the top of the tree) or /usr/bin/python3 cannot import `modules` ("numpy", "torch,
 * torchvision"), or making it failed before. */
void test_fixture(int *state, const char *script, const char *modules, const char *make);

#define TEST(name)                                                                      \
    static void test_##name(void);                                                      \
    __attribute__((constructor)) static void register_##name(void)                     \
    {                                                                                   \
        test_register(__FILE__, #name, test_##name);                                    \
    }                                                                                   \
    static void test_##name(void)

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond))                                                                    \
            test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (!(cond))                                                                    \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                                 \
    } while (0)

/* expr returns vtr_status; err is a vtr_error in scope. */
#define CHECK_OK(expr)                                                                  \
    do {                                                                                \
        vtr_status check_st_ = (expr);                                                  \
        if (check_st_ != VTR_OK)                                                        \
            test_fail(__FILE__, __LINE__, "%s failed: %s", #expr, err.msg);             \
    } while (0)

/* expr must fail with `status` and a message containing `needle`. */
#define CHECK_FAILS(expr, status, needle)                                               \
    do {                                                                                \
        vtr_error_clear(&err);                                                          \
        vtr_status check_st_ = (expr);                                                  \
        if (check_st_ != (status))                                                      \
            test_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #expr,    \
                      vtr_status_name(check_st_), vtr_status_name(status), err.msg);    \
        if (!strstr(err.msg, (needle)))                                                 \
            test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", #expr,     \
                      err.msg, (needle));                                               \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                 \
        if (check_a_ != check_b_)                                                       \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, check_a_,   \
                      check_b_);                                                        \
    } while (0)

#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *check_a_ = (a), *check_b_ = (b);                                    \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0)                  \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,         \
                      check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");  \
    } while (0)

#endif
