/* Helpers shared by the fuzz targets: see fuzz_util.h. */
#define _XOPEN_SOURCE 700
#include "fuzz_util.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARK "%%file "
#define MARK_LEN (sizeof MARK - 1)
#define MAX_FILES 32
#define MAX_DEPTH 8
#define MAX_NAME 200

static char scratch[512];

/* LeakSanitizer's suppressions for the fuzz targets: the AV1 and HEVC decoders libheif
 * runs for HEIF and AVIF photos (libdav1d, libde265) leak a few bytes on some damaged
 * files (fuzz_decode: 40 bytes inside libdav1d), their own allocations, not vtr's. A hook
 * the sanitizer runtime looks up. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libdav1d\nleak:libde265\nleak:libaom\n";
}

static void harness_fail(const char *what, const char *path)
{
    fprintf(stderr, "fuzz harness: %s %s: %s\n", what, path, strerror(errno));
    abort();
}

/* With VTR_FUZZ_VERBOSE set, prints each message checked: to see which seeds go where. */
static void show(const vtr_error *err)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("VTR_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz: %s: %s\n", vtr_status_name(err->status), err->msg);
}

static bool is_utf8(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n); /* NULL for invalid UTF-8 */
    json_decref(j);
    return j != NULL;
}

void fuzz_check_message(const vtr_error *err, const char *prefix)
{
    const char *m = err->msg;
    show(err);
    bool ok = m[0] != '\0' && (!prefix || strncmp(m, prefix, strlen(prefix)) == 0) &&
              is_utf8(m, strlen(m));
    for (const unsigned char *c = (const unsigned char *)m; ok && *c; c++)
        ok = *c >= 0x20 && *c != 0x7f;
    if (!ok) {
        fprintf(stderr, "bad message (%s): \"%s\"\n", vtr_status_name(err->status), m);
        abort();
    }
}

void fuzz_check_utf8(const char *s, size_t n)
{
    if (!is_utf8(s, n)) {
        fprintf(stderr, "not UTF-8: %.*s\n", (int)n, s);
        abort();
    }
}

char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* nftw callbacks: remove what is below the top, or everything. */
static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    if (ftw->level > 0 && remove(path) != 0)
        harness_fail("cannot remove", path);
    return 0;
}

static int remove_all(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    if (remove(path) != 0)
        harness_fail("cannot remove", path);
    return 0;
}

static void remove_scratch(void)
{
    if (scratch[0]) {
        nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        rmdir(scratch);
    }
}

const char *fuzz_scratch(void)
{
    if (!scratch[0]) {
        /* /dev/shm: the catalog and the stores fsync, which costs nothing there */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(scratch, sizeof scratch, "%s/vtr-fuzz-scratch.XXXXXX", tmp);
        if (!mkdtemp(scratch))
            harness_fail("cannot make", scratch);
        atexit(remove_scratch);
    } else if (nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        harness_fail("cannot empty", scratch);
    }
    return scratch;
}

char *fuzz_path(const char *name)
{
    size_t n = strlen(scratch) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        abort();
    snprintf(p, n, "%s/%s", scratch, name);
    return p;
}

/* Writes SCRATCH/name, making its parent directories. A name that collides with what an
 * earlier part made (a file where a directory must go, or the reverse) returns false;
 * other failures abort. */
static bool write_file(const char *name, const void *data, size_t size)
{
    bool ok = true;
    char *path = fuzz_path(name);
    for (char *s = path + strlen(scratch) + 1; ok && (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            if (errno != ENOTDIR)
                harness_fail("cannot make", path);
            ok = false; /* a file above it */
        }
        *s = '/';
    }
    FILE *fp = ok ? fopen(path, "wb") : NULL;
    if (ok && !fp && (errno == ENOTDIR || errno == EISDIR || errno == EEXIST))
        ok = false;
    else if (ok && (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0))
        harness_fail("cannot write", path);
    free(path);
    return ok;
}

void fuzz_write_file(const char *name, const void *data, size_t size)
{
    if (!write_file(name, data, size)) {
        errno = EEXIST;
        harness_fail("cannot write", name);
    }
}

void fuzz_remove(const char *name)
{
    char *path = fuzz_path(name);
    struct stat sb;
    if (lstat(path, &sb) == 0)
        nftw(path, remove_all, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

bool fuzz_exists(const char *name)
{
    char *path = fuzz_path(name);
    bool there = access(path, F_OK) == 0;
    free(path);
    return there;
}

/* Whether name is a relative path fuzz_write_files may create. */
static bool good_name(const char *name)
{
    int depth = 1;
    const char *c = name;
    for (const char *part = name;; part = c + 1) {
        for (c = part; *c && *c != '/'; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
                return false;
        size_t len = (size_t)(c - part);
        if (len == 0 || (len == 1 && part[0] == '.') ||
            (len == 2 && part[0] == '.' && part[1] == '.'))
            return false;
        if (!*c)
            return true;
        if (++depth > MAX_DEPTH)
            return false;
    }
}

/* The next mark at or after p (at the input's start or after a newline), or NULL. */
static const uint8_t *next_mark(const uint8_t *data, const uint8_t *p, const uint8_t *end)
{
    for (; p + MARK_LEN <= end; p++)
        if ((p == data || p[-1] == '\n') && memcmp(p, MARK, MARK_LEN) == 0)
            return p;
    return NULL;
}

size_t fuzz_write_files(const uint8_t *data, size_t size, const char *first_name)
{
    const uint8_t *end = data + size, *mark = next_mark(data, data, end);
    size_t written = 0;
    if (first_name && mark != data) {
        const uint8_t *stop = mark ? mark - 1 : end; /* the newline before the mark */
        written += write_file(first_name, data, (size_t)(stop - data));
    }
    while (mark && written < MAX_FILES) {
        const uint8_t *name = mark + MARK_LEN;
        const uint8_t *eol = memchr(name, '\n', (size_t)(end - name));
        if (!eol)
            break;
        const uint8_t *body = eol + 1;
        mark = next_mark(data, body, end);
        const uint8_t *stop = mark ? mark - 1 : end;
        if (stop < body) /* "%%file a\n%%file b": a is empty */
            stop = body;
        char buf[MAX_NAME + 1];
        size_t len = (size_t)(eol - name);
        if (len == 0 || len > MAX_NAME)
            continue;
        memcpy(buf, name, len);
        buf[len] = '\0';
        if (!good_name(buf))
            continue;
        written += write_file(buf, body, (size_t)(stop - body));
    }
    return written;
}
