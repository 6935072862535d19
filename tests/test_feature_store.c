/* Feature stores: write/read round trips (float32, float16), numpy reading what vtr wrote,
 * writer refusals, atomicity of the build, readers refusing inconsistent stores, and the
 * builder from record streams. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#include <math.h>
#include "lib/feature_store.h"
#include "lib/npy.h"
#include "lib/record.h"

#define PYTHON "/usr/bin/python3"
#define STORE_SCRIPT "tests/interop/feature_store_check.py"
#define DIM 8

static void need_numpy(void)
{
    if (access(STORE_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " STORE_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The items every test writes (as feature_store_check.py expects them): item i is keyed
 * "video<i>" and has rows_of(i) rows of value(i, r, c), exact in float16. */
static int rows_of(int i)
{
    return i % 4;
}

static float value(int i, int r, int c)
{
    return (float)i + (float)r / 4 + (float)c / 16;
}

/* Item i as a (rows_of(i), DIM) float32 tensor over buf (room for 4 * DIM floats). */
static vtr_tensor item_tensor(int i, float *buf)
{
    for (int r = 0; r < rows_of(i); r++)
        for (int c = 0; c < DIM; c++)
            buf[r * DIM + c] = value(i, r, c);
    return (vtr_tensor){.dtype = VTR_F32, .ndim = 2, .shape = {rows_of(i), DIM}, .data = buf};
}

static void key_of(int i, char *key, size_t size)
{
    snprintf(key, size, "video%d", i);
}

/* Writes items 0..n-1 into a store at path. */
static void write_store(const char *path, int n, vtr_dtype dtype)
{
    vtr_error err;
    vtr_feature_store_options opt = {.dtype = dtype, .extractor = "test/pattern"};
    vtr_feature_store_writer *w;
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));
    for (int i = 0; i < n; i++) {
        float buf[4 * DIM];
        char key[32];
        vtr_tensor t = item_tensor(i, buf);
        key_of(i, key, sizeof key);
        CHECK_OK(vtr_feature_store_writer_add(w, key, &t, &err));
    }
    CHECK_EQ_INT(vtr_feature_store_writer_items(w), n);
    CHECK_OK(vtr_feature_store_writer_finish(w, &err));
}

static float element(const vtr_tensor *t, int64_t k)
{
    if (t->dtype == VTR_F16)
        return vtr_half_to_float(((const uint16_t *)t->data)[k]);
    return ((const float *)t->data)[k];
}

/* Opens the store at path and checks it holds items 0..n-1. */
static void check_store(const char *path, int n, vtr_dtype dtype)
{
    vtr_error err;
    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(path, &r, &err));
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows_of(i);
    CHECK_EQ_INT(vtr_feature_store_reader_items(r), n);
    CHECK_EQ_INT(vtr_feature_store_reader_rows(r), total);
    CHECK_EQ_INT(vtr_feature_store_reader_dim(r), DIM);
    CHECK_EQ_INT(vtr_feature_store_reader_dtype(r), dtype);
    vtr_tensor m = vtr_feature_store_reader_matrix(r);
    CHECK(m.ndim == 2 && m.shape[0] == total && m.shape[1] == DIM && m.dtype == dtype);
    const int64_t *off = vtr_feature_store_reader_offsets(r);
    CHECK_EQ_INT(off[0], 0);
    CHECK_EQ_INT(off[n], total);
    for (int i = 0; i < n; i++) {
        char key[32];
        key_of(i, key, sizeof key);
        CHECK_STR(vtr_feature_store_reader_key(r, i), key);
        CHECK_EQ_INT(vtr_feature_store_reader_find(r, key), i);
        vtr_tensor t;
        CHECK_OK(vtr_feature_store_reader_item(r, i, &t, &err));
        CHECK(t.ndim == 2 && t.shape[0] == rows_of(i) && t.shape[1] == DIM && t.dtype == dtype);
        for (int row = 0; row < rows_of(i); row++)
            for (int c = 0; c < DIM; c++)
                CHECK(element(&t, row * DIM + c) == value(i, row, c));
    }
    CHECK_EQ_INT(vtr_feature_store_reader_find(r, "video-1"), -1);
    CHECK_EQ_INT(vtr_feature_store_reader_find(r, ""), -1);
    vtr_tensor t;
    CHECK_FAILS(vtr_feature_store_reader_item(r, n, &t, &err), VTR_ERR_INVALID, "item");
    const json_t *meta = vtr_feature_store_reader_meta(r);
    CHECK_STR(json_string_value(json_object_get(meta, "extractor")), "test/pattern");
    CHECK(json_string_value(json_object_get(meta, "created")));
    vtr_feature_store_reader_close(r);
}

TEST(feature_store_round_trip_f32)
{
    need_numpy();
    const char *path = test_path("store_f32");
    write_store(path, 13, VTR_F32);
    check_store(path, 13, VTR_F32);
    CHECK_EQ_INT(test_run(PYTHON " " STORE_SCRIPT " check %s float32 13 %d", path, DIM), 0);
}

TEST(feature_store_round_trip_f16)
{
    need_numpy();
    const char *path = test_path("store_f16");
    write_store(path, 13, VTR_F16); /* float32 input, converted on write */
    check_store(path, 13, VTR_F16);
    CHECK_EQ_INT(test_run(PYTHON " " STORE_SCRIPT " check %s float16 13 %d", path, DIM), 0);

    /* float16 and bfloat16 input, into float16 and float32 stores */
    vtr_error err;
    for (int store = 0; store < 2; store++) {
        const char *p = test_path(store ? "store_mixed_f32" : "store_mixed_f16");
        vtr_feature_store_options opt = {.dtype = store ? VTR_F32 : VTR_F16, .dim = DIM};
        vtr_feature_store_writer *w;
        CHECK_OK(vtr_feature_store_writer_open(p, &opt, &w, &err));
        uint16_t h[2 * DIM], b[2 * DIM];
        for (int k = 0; k < 2 * DIM; k++) {
            h[k] = vtr_float_to_half(value(0, k / DIM, k % DIM));
            b[k] = vtr_float_to_bf16(value(5, k / DIM, k % DIM));
        }
        vtr_tensor th = {.dtype = VTR_F16, .ndim = 2, .shape = {2, DIM}, .data = h};
        vtr_tensor tb = {.dtype = VTR_BF16, .ndim = 2, .shape = {2, DIM}, .data = b};
        CHECK_OK(vtr_feature_store_writer_add(w, "half", &th, &err));
        CHECK_OK(vtr_feature_store_writer_add(w, "bfloat", &tb, &err));
        CHECK_OK(vtr_feature_store_writer_finish(w, &err));
        vtr_feature_store_reader *r;
        CHECK_OK(vtr_feature_store_reader_open(p, &r, &err));
        vtr_tensor t;
        CHECK_OK(vtr_feature_store_reader_item(r, vtr_feature_store_reader_find(r, "bfloat"), &t,
                                               &err));
        for (int k = 0; k < 2 * DIM; k++)
            CHECK(element(&t, k) == value(5, k / DIM, k % DIM));
        CHECK_OK(vtr_feature_store_reader_item(r, 0, &t, &err));
        CHECK(element(&t, DIM + 3) == value(0, 1, 3));
        vtr_feature_store_reader_close(r);
    }
}

TEST(feature_store_empty_store_with_dim)
{
    need_numpy();
    vtr_error err;
    const char *path = test_path("store_empty");
    vtr_feature_store_options opt = {.dtype = VTR_F32, .dim = DIM, .extractor = "test/pattern"};
    vtr_feature_store_writer *w;
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));
    CHECK_OK(vtr_feature_store_writer_finish(w, &err));
    check_store(path, 0, VTR_F32);
    CHECK_EQ_INT(test_run(PYTHON " " STORE_SCRIPT " check %s float32 0 %d", path, DIM), 0);

    /* without a dim there is nothing to write, and nothing is left behind */
    const char *none = test_path("store_none");
    opt.dim = 0;
    CHECK_OK(vtr_feature_store_writer_open(none, &opt, &w, &err));
    CHECK_FAILS(vtr_feature_store_writer_finish(w, &err), VTR_ERR_INVALID, "no items");
    CHECK(!exists(none));
}

TEST(feature_store_writer_refusals)
{
    vtr_error err;
    const char *path = test_path("store_refusals");
    vtr_feature_store_options opt = {.dtype = VTR_F16, .extractor = "test/pattern"};
    vtr_feature_store_writer *w;
    CHECK_FAILS(vtr_feature_store_writer_open(path, &(vtr_feature_store_options){.dtype = VTR_U8},
                                              &w, &err),
                VTR_ERR_INVALID, "storage dtype uint8");
    CHECK(w == NULL);
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));
    float buf[4 * DIM], wide[2 * (DIM + 1)] = {0};
    vtr_tensor t = item_tensor(1, buf);
    CHECK_OK(vtr_feature_store_writer_add(w, "video0", &(vtr_tensor){.dtype = VTR_F32, .ndim = 2,
                                                                      .shape = {0, DIM}},
                                          &err));
    CHECK_OK(vtr_feature_store_writer_add(w, "video1", &t, &err));
    CHECK_FAILS(vtr_feature_store_writer_add(w, "video1", &t, &err), VTR_ERR_INVALID,
                "key \"video1\" added twice");
    vtr_tensor bad = {.dtype = VTR_F32, .ndim = 2, .shape = {2, DIM + 1}, .data = wide};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "wide", &bad, &err), VTR_ERR_INVALID,
                "item \"wide\": array (2, 9), expected (n, 8)");
    bad = (vtr_tensor){.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = buf};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "flat", &bad, &err), VTR_ERR_INVALID,
                "array (8,) is not 2-D");
    bad = (vtr_tensor){.dtype = VTR_F32, .ndim = 3, .shape = {1, 1, DIM}, .data = buf};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "cube", &bad, &err), VTR_ERR_INVALID,
                "array (1, 1, 8) is not 2-D");
    bad = (vtr_tensor){.dtype = VTR_U8, .ndim = 2, .shape = {1, DIM}, .data = buf};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "bytes", &bad, &err), VTR_ERR_INVALID,
                "dtype uint8");
    CHECK_FAILS(vtr_feature_store_writer_add(w, "", &t, &err), VTR_ERR_INVALID, "empty key");
    CHECK_FAILS(vtr_feature_store_writer_add(w, "a\tb", &t, &err), VTR_ERR_INVALID,
                "contains a tab or a line break");
    CHECK_FAILS(vtr_feature_store_writer_add(w, "a\nb", &t, &err), VTR_ERR_INVALID,
                "contains a tab or a line break");
    CHECK_FAILS(vtr_feature_store_writer_add(w, "caf\xC3", &t, &err), VTR_ERR_INVALID,
                "not valid UTF-8");
    /* a NaN or an infinity is refused with its item and row (it turned embeddings NaN) */
    float nan_rows[2 * DIM] = {0};
    nan_rows[DIM + 3] = NAN;
    bad = (vtr_tensor){.dtype = VTR_F32, .ndim = 2, .shape = {2, DIM}, .data = nan_rows};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "nan", &bad, &err), VTR_ERR_INVALID,
                "item \"nan\": row 1 has a non-finite value");
    uint16_t inf_rows[DIM] = {0};
    inf_rows[5] = 0x7c00; /* float16 +infinity */
    bad = (vtr_tensor){.dtype = VTR_F16, .ndim = 2, .shape = {1, DIM}, .data = inf_rows};
    CHECK_FAILS(vtr_feature_store_writer_add(w, "inf", &bad, &err), VTR_ERR_INVALID,
                "item \"inf\": row 0 has a non-finite value");
    /* the refusals left the writer usable */
    t = item_tensor(2, buf);
    CHECK_OK(vtr_feature_store_writer_add(w, "video2", &t, &err));
    CHECK_OK(vtr_feature_store_writer_finish(w, &err));
    check_store(path, 3, VTR_F16);

    /* an existing store is not overwritten unless asked */
    CHECK_FAILS(vtr_feature_store_writer_open(path, &opt, &w, &err), VTR_ERR_INVALID,
                "already exists");
}

TEST(feature_store_replace_existing)
{
    const char *path = test_path("store_replace");
    write_store(path, 5, VTR_F32);
    vtr_error err;
    vtr_feature_store_options opt = {.dtype = VTR_F32, .replace = true, .extractor = "test/pattern"};
    vtr_feature_store_writer *w;
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));
    for (int i = 0; i < 9; i++) {
        float buf[4 * DIM];
        char key[32];
        vtr_tensor t = item_tensor(i, buf);
        key_of(i, key, sizeof key);
        CHECK_OK(vtr_feature_store_writer_add(w, key, &t, &err));
    }
    /* until finish the old store is intact */
    check_store(path, 5, VTR_F32);
    CHECK_OK(vtr_feature_store_writer_finish(w, &err));
    check_store(path, 9, VTR_F32);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(!exists(tmp));
}

TEST(feature_store_abandoned_build_leaves_nothing)
{
    vtr_error err;
    const char *path = test_path("store_abandoned");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    vtr_feature_store_options opt = {.dtype = VTR_F32};
    vtr_feature_store_writer *w;
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));
    float buf[4 * DIM];
    vtr_tensor t = item_tensor(3, buf);
    CHECK_OK(vtr_feature_store_writer_add(w, "video3", &t, &err));
    CHECK(exists(tmp));
    CHECK(!exists(path));
    vtr_feature_store_writer_abort(w);
    CHECK(!exists(tmp));
    CHECK(!exists(path));
    vtr_feature_store_writer_abort(NULL);

    /* a process that dies in the middle of a build leaves no store */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        vtr_feature_store_writer *cw;
        if (vtr_feature_store_writer_open(path, &opt, &cw, NULL) != VTR_OK ||
            vtr_feature_store_writer_add(cw, "video3", &t, NULL) != VTR_OK)
            _exit(2);
        _exit(0); /* killed before finish */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(!exists(path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    CHECK(exists(tmp)); /* the child's work directory, which a later build may delete */
    CHECK_EQ_INT(test_run("rm -r '%s'", tmp), 0);
}

/* Copies the good store src to a fresh dst (cp -r). */
static void copy_store(const char *src, const char *dst)
{
    CHECK_EQ_INT(test_run("rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst), 0);
}

static void check_open_fails(const char *path, vtr_status status, const char *needle)
{
    vtr_error err;
    vtr_feature_store_reader *r = (vtr_feature_store_reader *)1;
    CHECK_FAILS(vtr_feature_store_reader_open(path, &r, &err), status, needle);
    CHECK(r == NULL);
    CHECK(strstr(err.msg, "feature store "));
}

TEST(feature_store_reader_rejects_inconsistent_stores)
{
    need_numpy();
    const char *good = test_path("store_good");
    const char *bad = test_path("store_bad");
    write_store(good, 10, VTR_F32);
    char file[512];

    /* truncated rows.npy */
    copy_store(good, bad);
    snprintf(file, sizeof file, "%s/rows.npy", bad);
    CHECK_EQ_INT(truncate(file, 200), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "truncated NPY data");

    static const struct {
        const char *corruption, *needle;
    } offsets_cases[] = {
        {"offsets-decreasing", "offsets.npy decreases at item 2 (0 after 3)"},
        {"offsets-start", "offsets.npy starts at 1, not 0"},
        {"offsets-end", "offsets.npy ends at 14 but rows.npy has 13 rows"},
        {"offsets-count", "offsets.npy has 10 entries for 10 items (expected 11)"},
        {"offsets-dtype", "offsets.npy: int32 (11,), expected 1-D int64"},
    };
    for (size_t i = 0; i < sizeof offsets_cases / sizeof offsets_cases[0]; i++) {
        copy_store(good, bad);
        CHECK_EQ_INT(test_run(PYTHON " " STORE_SCRIPT " corrupt %s %s", bad,
                              offsets_cases[i].corruption),
                     0);
        check_open_fails(bad, VTR_ERR_FORMAT, offsets_cases[i].needle);
    }

    /* keys.txt: a key missing, a key twice, a missing newline, an empty line, too many */
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i '$d' '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "keys.txt has 9 keys for 10 items");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i '5s/.*/video1/' '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "keys.txt: key \"video1\" on lines 2 and 5");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("printf 'extra' >> '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "keys.txt: line 11 does not end with a newline");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i '3s/.*//' '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "keys.txt: line 3: empty key");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("echo video99 >> '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "keys.txt has more keys than the 10 items");
    /* a key that is not UTF-8 (the writer refuses one; found by fuzz_feature_store) */
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i '4s/.*/caf\\xe9/' '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT,
                     "keys.txt: line 4: key \"caf\\xe9\" is not valid UTF-8");

    /* meta.json */
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i 's/\"dim\": 8/\"dim\": 9/' '%s/meta.json'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "rows.npy is float32 (13, 8) but meta.json says float32 (13, 9)");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i 's/\"version\": 1/\"version\": 2/' '%s/meta.json'", bad), 0);
    check_open_fails(bad, VTR_ERR_UNSUPPORTED, "meta.json: version 2");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("sed -i 's/vtr-feature-store/other/' '%s/meta.json'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "not a vtr feature store");
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("echo '{' > '%s/meta.json'", bad), 0);
    check_open_fails(bad, VTR_ERR_FORMAT, "meta.json: line");

    /* missing files */
    copy_store(good, bad);
    CHECK_EQ_INT(test_run("rm '%s/keys.txt'", bad), 0);
    check_open_fails(bad, VTR_ERR_IO, "keys.txt");
    check_open_fails(test_path("no_such_store"), VTR_ERR_IO, "meta.json");
}

/* ---- the builder from record streams ---- */

/* Writes items 0..n-1 as records (item 1 as a (D,) array when one_row_as_vector), with
 * meta {"extractor": "test/pattern"}, plus the extra records given. */
static char *make_records(int n, bool one_row_as_vector, size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    vtr_error err;
    json_t *meta = json_pack("{s:s}", "extractor", "test/pattern");
    for (int i = 0; i < n; i++) {
        float data[4 * DIM];
        char key[32];
        vtr_tensor t = item_tensor(i, data);
        if (one_row_as_vector && rows_of(i) == 1) {
            t.ndim = 1;
            t.shape[0] = DIM;
        }
        key_of(i, key, sizeof key);
        CHECK_OK(vtr_record_write(fp, key, meta, &t, "memory", &err));
    }
    json_decref(meta);
    fclose(fp);
    return buf;
}

typedef struct skips {
    int count;
    char last_key[64];
    char last_msg[VTR_ERROR_MSG_MAX];
} skips;

static void on_skip(void *ctx, const char *key, const vtr_error *why)
{
    skips *s = ctx;
    s->count++;
    snprintf(s->last_key, sizeof s->last_key, "%s", key);
    snprintf(s->last_msg, sizeof s->last_msg, "%s", why->msg);
}

TEST(feature_store_build_from_records)
{
    need_numpy();
    vtr_error err;
    size_t len;
    char *buf = make_records(11, true, &len);
    FILE *in = fmemopen(buf, len, "rb");
    const char *path = test_path("store_records");
    vtr_feature_store_options opt = {.dtype = VTR_F16};
    vtr_feature_store_build_stats stats;
    CHECK_OK(vtr_feature_store_build_from_records(in, "records.vtr", path, &opt, NULL, NULL,
                                                  &stats, &err));
    fclose(in);
    free(buf);
    CHECK_EQ_INT(stats.records, 11);
    CHECK_EQ_INT(stats.items, 11);
    CHECK_EQ_INT(stats.rows, 0 + 1 + 2 + 3 + 0 + 1 + 2 + 3 + 0 + 1 + 2);
    CHECK_EQ_INT(stats.skipped, 0);
    check_store(path, 11, VTR_F16); /* the extractor came from the records */
    CHECK_EQ_INT(test_run(PYTHON " " STORE_SCRIPT " check %s float16 11 %d", path, DIM), 0);
    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(path, &r, &err));
    const json_t *source = json_object_get(vtr_feature_store_reader_meta(r), "source");
    CHECK_STR(json_string_value(json_object_get(source, "records")), "records.vtr");
    vtr_feature_store_reader_close(r);
}

/* A stream of items 0..3, then a record with a wrong dim, a duplicate and item 4. */
static char *make_bad_records(size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    vtr_error err;
    for (int i = 0; i < 6; i++) {
        float data[4 * (DIM + 1)] = {0};
        char key[32];
        vtr_tensor t = item_tensor(i < 4 ? i : 1, data);
        key_of(i < 4 ? i : 1, key, sizeof key);
        if (i == 4) {
            t.shape[1] = DIM + 1;
            snprintf(key, sizeof key, "wide");
        }
        if (i == 5)
            t = item_tensor(4, data), key_of(4, key, sizeof key);
        CHECK_OK(vtr_record_write(fp, key, NULL, &t, "memory", &err));
    }
    CHECK_OK(vtr_record_write(fp, "video1", NULL,
                              &(vtr_tensor){.dtype = VTR_F32, .ndim = 2, .shape = {0, DIM}},
                              "memory", &err));
    fclose(fp);
    return buf;
}

TEST(feature_store_build_from_records_bad_items)
{
    vtr_error err;
    size_t len;
    char *buf = make_bad_records(&len);
    const char *path = test_path("store_bad_records");
    vtr_feature_store_options opt = {.dtype = VTR_F32, .extractor = "test/pattern"};
    vtr_feature_store_build_stats stats;

    /* without on_skip the first refusal fails the build, and no store is left */
    FILE *in = fmemopen(buf, len, "rb");
    CHECK_FAILS(vtr_feature_store_build_from_records(in, "stdin", path, &opt, NULL, NULL, &stats,
                                                     &err),
                VTR_ERR_INVALID, "stdin: record 5: feature store");
    CHECK(strstr(err.msg, "item \"wide\": array (1, 9), expected (n, 8)"));
    fclose(in);
    CHECK(!exists(path));

    /* with on_skip the refused records are reported and skipped */
    skips s = {0};
    in = fmemopen(buf, len, "rb");
    CHECK_OK(vtr_feature_store_build_from_records(in, "stdin", path, &opt, on_skip, &s, &stats,
                                                  &err));
    fclose(in);
    CHECK_EQ_INT(s.count, 2);
    CHECK_STR(s.last_key, "video1");
    CHECK(strstr(s.last_msg, "key \"video1\" added twice"));
    CHECK_EQ_INT(stats.records, 7);
    CHECK_EQ_INT(stats.items, 5);
    CHECK_EQ_INT(stats.skipped, 2);
    check_store(path, 5, VTR_F32);

    /* a truncated stream fails the build whatever on_skip says */
    const char *cut = test_path("store_cut_records");
    in = fmemopen(buf, len - 10, "rb");
    CHECK_FAILS(vtr_feature_store_build_from_records(in, "stdin", cut, &opt, on_skip, &s, NULL,
                                                     &err),
                VTR_ERR_FORMAT, "stdin");
    fclose(in);
    CHECK(!exists(cut));
    free(buf);

    /* an empty stream without a dim: nothing to store */
    in = fopen("/dev/null", "rb");
    CHECK_FAILS(vtr_feature_store_build_from_records(in, "stdin", cut, &opt, NULL, NULL, NULL,
                                                     &err),
                VTR_ERR_INVALID, "no items");
    fclose(in);
    CHECK(!exists(cut));
}
