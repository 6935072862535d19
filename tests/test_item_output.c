/* The item-output layer: each destination, float16 conversion, refused items against a
 * broken output, and what commit and close leave behind. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "lib/feature_store.h"
#include "lib/item_output.h"
#include "lib/npy_item.h"
#include "lib/record.h"

/* a (2, 3) float32 item */
static const float rows[6] = {0.5f, -1.0f, 2.0f, 0.25f, 65504.0f, 1e-3f};
static const vtr_tensor item = {.dtype = VTR_F32, .ndim = 2, .shape = {2, 3}, .data = (void *)rows};

/* Loads DIR/KEY.npy into *f, checking that its metadata names source. */
static void load_item(const char *dir, const char *key, const char *source, vtr_npy_file *f)
{
    vtr_error err;
    json_t *m;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, key);
    CHECK_OK(vtr_npy_item_load(path, f, &m, &err));
    CHECK_STR(json_string_value(json_object_get(m, "source")), source);
    json_decref(m);
}

TEST(item_output_dir_writes_npy_and_json_in_float16)
{
    vtr_error err;
    vtr_item_output *o;
    const char *dir = test_path("items/sub");
    vtr_item_output_options opt = {.dir = dir, .half = true};
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    json_t *meta = json_pack("{s:s}", "source", "a.mp4");
    CHECK_OK(vtr_item_output_write(o, "a", &item, meta, &err));
    /* a key that cannot name a file is refused; the output goes on */
    CHECK_FAILS(vtr_item_output_write(o, "x/y", &item, meta, &err), VTR_ERR_INVALID,
                "cannot name a file");
    CHECK(!vtr_item_output_broken(o));
    CHECK_OK(vtr_item_output_commit(o, &err));
    vtr_item_output_close(o);
    json_decref(meta);

    vtr_npy_file f;
    load_item(dir, "a", "a.mp4", &f);
    CHECK(f.tensor.dtype == VTR_F16 && f.tensor.ndim == 2 && f.tensor.shape[1] == 3);
    const uint16_t *h = f.tensor.data;
    for (int i = 0; i < 6; i++)
        CHECK(h[i] == vtr_float_to_half(rows[i]));
    vtr_npy_close(&f);
}

/* The record file at path holds n records: keys[i], its array's first value firsts[i]. */
static void check_records(const char *path, size_t n, const char *const *keys,
                          const float *firsts)
{
    vtr_error err;
    FILE *fp = fopen(path, "rb");
    CHECK(fp);
    vtr_record_reader *r = vtr_record_reader_new(fp, path);
    vtr_record rec;
    bool got;
    for (size_t i = 0; i < n; i++) {
        CHECK_OK(vtr_record_read(r, &rec, &got, &err));
        CHECK(got && !strcmp(rec.key, keys[i]) && ((const float *)rec.array.data)[0] == firsts[i]);
    }
    CHECK_OK(vtr_record_read(r, &rec, &got, &err));
    CHECK(!got);
    vtr_record_reader_free(r);
    fclose(fp);
}

/* key (of an item from source, with meta) is refused before it is made and when written,
 * with a message holding needle; the output goes on. */
static void check_refused(vtr_item_output *o, const char *key, const char *source,
                          const json_t *meta, const char *needle)
{
    vtr_error err;
    CHECK_FAILS(vtr_item_output_check(o, key, source, &err), VTR_ERR_INVALID, needle);
    CHECK_FAILS(vtr_item_output_write(o, key, &item, meta, &err), VTR_ERR_INVALID, needle);
    CHECK(!vtr_item_output_broken(o));
}

/* Two files of one name in different folders (a/x.jpg, b/x.jpg: key x): the second is
 * refused, naming both, before it is made (check) and when written; the first stays and
 * the output goes on. */
TEST(item_output_takes_each_key_once)
{
    vtr_error err;
    vtr_item_output *o;
    const char *dir = test_path("twice");
    const float other_rows[6] = {0};
    const vtr_tensor other = {.dtype = VTR_F32, .ndim = 2, .shape = {2, 3},
                              .data = (void *)other_rows};
    json_t *first = json_pack("{s:s}", "source", "a/x.jpg");
    json_t *second = json_pack("{s:s}", "source", "b/x.jpg");
    const char *refusal = "x: a/x.jpg and b/x.jpg have the same key; the second is not written";
    vtr_item_output_options opts[] = {{.dir = dir}, {.path = test_path("twice.vtr")}};
    for (size_t i = 0; i < 2; i++) {
        CHECK_OK(vtr_item_output_open(&opts[i], &o, &err));
        CHECK_OK(vtr_item_output_check(o, "x", "a/x.jpg", &err));
        CHECK_OK(vtr_item_output_write(o, "x", &item, first, &err));
        check_refused(o, "x", "b/x.jpg", second, refusal);
        check_refused(o, "x", NULL, NULL,
                      "x: an item of this key was written before; this one is not");
        CHECK_OK(vtr_item_output_write(o, "y", &other, second, &err));
        CHECK_OK(vtr_item_output_commit(o, &err));
        vtr_item_output_close(o);
    }
    json_decref(first);
    json_decref(second);

    vtr_npy_file f;
    load_item(dir, "x", "a/x.jpg", &f);
    CHECK(((const float *)f.tensor.data)[0] == rows[0]); /* the first item's */
    vtr_npy_close(&f);
    static const char *const keys[] = {"x", "y"};
    const float firsts[] = {rows[0], other_rows[0]}; /* x: the first item's */
    check_records(test_path("twice.vtr"), 2, keys, firsts);
}

TEST(item_output_records_are_complete_at_commit_only)
{
    vtr_error err;
    vtr_item_output *o;
    const char *path = test_path("items.vtr");
    vtr_item_output_options opt = {.path = path, .alternatives = "-o FILE"};
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    CHECK_OK(vtr_item_output_write(o, "k", &item, NULL, &err));
    vtr_item_output_close(o); /* not committed: nothing left */
    CHECK(access(path, F_OK) != 0);

    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    CHECK_OK(vtr_item_output_write(o, "k", &item, NULL, &err));
    CHECK_OK(vtr_item_output_commit(o, &err));
    vtr_item_output_close(o);
    FILE *fp = fopen(path, "rb");
    CHECK(fp);
    vtr_record_reader *r = vtr_record_reader_new(fp, path);
    vtr_record rec;
    bool got;
    CHECK_OK(vtr_record_read(r, &rec, &got, &err));
    CHECK(got && !strcmp(rec.key, "k") && rec.array.dtype == VTR_F32 && rec.array.shape[0] == 2);
    CHECK(((const float *)rec.array.data)[4] == 65504.0f);
    vtr_record_reader_free(r);
    fclose(fp);

    /* a key that cannot be a record's (a file name that is not UTF-8) is refused before
     * a byte is written: the stream goes on */
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    check_refused(o, "bad\xff", NULL, NULL, "record key 'bad\\xff' is not valid UTF-8");
    CHECK_OK(vtr_item_output_write(o, "good", &item, NULL, &err));
    CHECK_OK(vtr_item_output_commit(o, &err));
    vtr_item_output_close(o);
    static const char *const good[] = {"good"};
    check_records(path, 1, good, rows);

    opt.path = test_path("items.npy"); /* a record stream is not NPY */
    CHECK_FAILS(vtr_item_output_open(&opt, &o, &err), VTR_ERR_INVALID, "not NPY");
    CHECK(o == NULL);
}

TEST(item_output_store_refuses_a_duplicate_and_stores_float16)
{
    vtr_error err;
    vtr_item_output *o;
    const char *store = test_path("items.store");
    vtr_feature_store_options so = {.extractor = "test"};
    vtr_item_output_options opt = {.store = store, .store_options = &so, .half = true};
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    CHECK_OK(vtr_item_output_write(o, "a", &item, NULL, &err));
    CHECK_FAILS(vtr_item_output_write(o, "a", &item, NULL, &err), VTR_ERR_INVALID,
                "a: an item of this key was written before; this one is not");
    CHECK(!vtr_item_output_broken(o));
    CHECK_OK(vtr_item_output_commit(o, &err));
    vtr_item_output_close(o);
    vtr_feature_store_reader *r;
    CHECK_OK(vtr_feature_store_reader_open(store, &r, &err));
    CHECK(vtr_feature_store_reader_items(r) == 1 && vtr_feature_store_reader_rows(r) == 2);
    CHECK(vtr_feature_store_reader_dtype(r) == VTR_F16);
    vtr_feature_store_reader_close(r);
}

/* a sink that refuses key "bad", breaks on key "io" and records what it saw */
typedef struct fake_sink {
    int added, commits, closes;
    vtr_dtype dtype;
} fake_sink;

static vtr_status fake_add(void *ctx, const char *key, const vtr_tensor *t, const json_t *meta,
                           vtr_error *err)
{
    fake_sink *s = ctx;
    if (!strcmp(key, "bad"))
        return vtr_fail(err, VTR_ERR_INVALID, "%s: refused", key);
    if (!strcmp(key, "io"))
        return vtr_fail(err, VTR_ERR_IO, "%s: disk full", key);
    s->added++;
    s->dtype = t->dtype;
    return VTR_OK;
}

static vtr_status fake_commit(void *ctx, vtr_error *err)
{
    ((fake_sink *)ctx)->commits++;
    return VTR_OK;
}

static void fake_close(void *ctx)
{
    ((fake_sink *)ctx)->closes++;
}

TEST(item_output_sink_refusals_and_breaks)
{
    vtr_error err;
    fake_sink s = {0};
    vtr_item_sink sink = {.add = fake_add, .commit = fake_commit, .close = fake_close, .ctx = &s};
    vtr_item_output_options opt = {.sink = &sink, .half = true};
    vtr_item_output *o;
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    CHECK_OK(vtr_item_output_write(o, "a", &item, NULL, &err));
    CHECK(s.added == 1 && s.dtype == VTR_F16);
    CHECK_FAILS(vtr_item_output_write(o, "bad", &item, NULL, &err), VTR_ERR_INVALID, "refused");
    CHECK(!vtr_item_output_broken(o));
    CHECK_FAILS(vtr_item_output_write(o, "io", &item, NULL, &err), VTR_ERR_IO, "disk full");
    CHECK(vtr_item_output_broken(o));
    CHECK(vtr_item_output_write(o, "b", &item, NULL, &err) != VTR_OK && s.added == 1);
    vtr_item_output_close(o);
    CHECK(s.commits == 0 && s.closes == 1);

    fake_sink t = {0};
    sink.ctx = &t;
    CHECK_OK(vtr_item_output_open(&opt, &o, &err));
    CHECK_OK(vtr_item_output_commit(o, &err));
    vtr_item_output_close(o);
    CHECK(t.commits == 1 && t.closes == 1);
}
