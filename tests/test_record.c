#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "lib/record.h"
#include "lib/record_output.h"

/* Writes n records "item0".. with float arrays (i+1, 3) holding i*100 + j and
 * metadata {"index": i, "name": "caf\u00e9"}; returns the stream in a malloc'ed buffer. */
static unsigned char *make_stream(int n, size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    vtr_error err;
    for (int i = 0; i < n; i++) {
        float data[64];
        for (int j = 0; j < 3 * (i + 1); j++)
            data[j] = (float)(i * 100 + j);
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {i + 1, 3}, .data = data};
        json_t *meta = json_pack("{s:i, s:s}", "index", i, "name", "caf\xc3\xa9");
        char key[32];
        snprintf(key, sizeof key, "item%d", i);
        CHECK_OK(vtr_record_write(fp, key, meta, &t, "memory", &err));
        json_decref(meta);
    }
    fclose(fp);
    return (unsigned char *)buf;
}

/* Reads all records of buf[0..len); returns how many, or -1 with err set. */
static int read_all(const unsigned char *buf, size_t len, vtr_error *err)
{
    FILE *fp = fmemopen((void *)buf, len, "rb");
    if (len == 0)
        fp = fopen("/dev/null", "rb");
    vtr_record_reader *r = vtr_record_reader_new(fp, "stream");
    int count = 0;
    for (;;) {
        vtr_record rec;
        bool got;
        if (vtr_record_read(r, &rec, &got, err) != VTR_OK) {
            count = -1;
            break;
        }
        if (!got)
            break;
        count++;
    }
    vtr_record_reader_free(r);
    fclose(fp);
    return count;
}

TEST(record_round_trip)
{
    size_t len;
    unsigned char *buf = make_stream(3, &len);
    FILE *fp = fmemopen(buf, len, "rb");
    vtr_record_reader *r = vtr_record_reader_new(fp, "stream");
    vtr_error err;
    for (int i = 0; i < 3; i++) {
        vtr_record rec;
        bool got;
        CHECK_OK(vtr_record_read(r, &rec, &got, &err));
        CHECK(got);
        char key[32];
        snprintf(key, sizeof key, "item%d", i);
        CHECK_STR(rec.key, key);
        CHECK_EQ_INT(json_integer_value(json_object_get(rec.meta, "index")), i);
        CHECK_STR(json_string_value(json_object_get(rec.meta, "name")), "caf\xc3\xa9");
        CHECK(rec.array.dtype == VTR_F32 && rec.array.ndim == 2);
        CHECK_EQ_INT(rec.array.shape[0], i + 1);
        CHECK_EQ_INT(rec.array.shape[1], 3);
        const float *d = rec.array.data;
        for (int j = 0; j < 3 * (i + 1); j++)
            CHECK(d[j] == (float)(i * 100 + j));
    }
    vtr_record rec;
    bool got = true;
    CHECK_OK(vtr_record_read(r, &rec, &got, &err));
    CHECK(!got);
    vtr_record_reader_free(r);
    fclose(fp);
    free(buf);
}

TEST(record_reads_from_a_pipe)
{
    size_t len;
    unsigned char *buf = make_stream(4, &len);
    const char *path = test_path("stream.vtr");
    FILE *fp = fopen(path, "wb");
    fwrite(buf, 1, len, fp);
    fclose(fp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cat '%s'", path);
    FILE *pipe = popen(cmd, "r");
    vtr_record_reader *r = vtr_record_reader_new(pipe, "pipe");
    vtr_error err;
    int n = 0;
    for (;;) {
        vtr_record rec;
        bool got;
        CHECK_OK(vtr_record_read(r, &rec, &got, &err));
        if (!got)
            break;
        CHECK_EQ_INT(rec.array.shape[0], n + 1);
        n++;
    }
    CHECK_EQ_INT(n, 4);
    vtr_record_reader_free(r);
    CHECK(pclose(pipe) == 0);
    free(buf);
}

TEST(record_truncated_anywhere_is_an_error)
{
    size_t len;
    unsigned char *buf = make_stream(2, &len);
    vtr_error err;
    CHECK_EQ_INT(read_all(buf, len, &err), 2);
    CHECK_EQ_INT(read_all(buf, 0, &err), 0);
    size_t first_len = 0;
    {
        size_t l1;
        unsigned char *one = make_stream(1, &l1);
        first_len = l1;
        free(one);
    }
    for (size_t cut = 1; cut < len; cut++) {
        int n = read_all(buf, cut, &err);
        if (cut == first_len) {
            CHECK_EQ_INT(n, 1); /* a clean boundary between records */
            continue;
        }
        CHECK_MSG(n == -1, "cut at %zu of %zu read %d records", cut, len, n);
        CHECK_MSG(err.status == VTR_ERR_FORMAT && strstr(err.msg, "truncated"),
                  "cut at %zu: %s", cut, err.msg);
    }
    free(buf);
}

TEST(record_rejects_bad_headers)
{
    size_t len;
    unsigned char *buf = make_stream(1, &len);
    unsigned char *bad = malloc(len);
    vtr_error err;

    memcpy(bad, buf, len);
    bad[0] = 'X';
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "bad magic"));

    memcpy(bad, buf, len);
    bad[4] = 2; /* version 2 */
    CHECK(read_all(bad, len, &err) == -1 && err.status == VTR_ERR_UNSUPPORTED &&
          strstr(err.msg, "version 2"));

    memcpy(bad, buf, len);
    bad[6] = 1; /* unknown flag */
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "flags"));

    memcpy(bad, buf, len);
    memset(bad + 8, 0, 4); /* empty key */
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "key length 0"));

    memcpy(bad, buf, len);
    bad[24] = 0xff; /* key "item0" -> invalid UTF-8 */
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "not valid UTF-8"));

    memcpy(bad, buf, len);
    bad[24 + 5] = '['; /* metadata no longer a JSON object */
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "metadata is not a JSON object"));

    memcpy(bad, buf, len);
    memset(bad + 16, 0xff, 8); /* absurd payload length */
    CHECK(read_all(bad, len, &err) == -1 && strstr(err.msg, "too large"));

    memcpy(bad, buf, len);
    bad[len - 4 * 3 - 1] ^= 0; /* unchanged data still parses */
    CHECK(read_all(bad, len, &err) == 1);
    free(bad);
    free(buf);
}

TEST(record_duplicate_metadata_keys_rejected)
{
    char *buf = NULL;
    size_t len;
    FILE *fp = open_memstream(&buf, &len);
    const char meta[] = "{\"a\":1,\"a\":2}";
    unsigned char header[24] = {'V', 'T', 'R', 'R', 1, 0, 0, 0, 1, 0, 0, 0,
                                sizeof meta - 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    fwrite(header, 1, 24, fp);
    fwrite("k", 1, 1, fp);
    fwrite(meta, 1, sizeof meta - 1, fp);
    fclose(fp);
    vtr_error err;
    CHECK(read_all((unsigned char *)buf, len, &err) == -1);
    CHECK_MSG(strstr(err.msg, "duplicate"), "%s", err.msg);
    free(buf);
}

TEST(record_writer_refuses_bad_keys_and_meta)
{
    vtr_error err;
    uint8_t px[3] = {1, 2, 3};
    vtr_tensor t = {.dtype = VTR_U8, .ndim = 1, .shape = {3}, .data = px};
    FILE *fp = fopen("/dev/null", "wb");
    /* refused before a byte is written (VTR_ERR_INVALID): the stream goes on */
    CHECK_FAILS(vtr_record_write(fp, "", NULL, &t, "out", &err), VTR_ERR_INVALID, "empty");
    CHECK_FAILS(vtr_record_write(fp, "\xff\xfe", NULL, &t, "out", &err), VTR_ERR_INVALID,
                "out: record key '\\xff\\xfe' is not valid UTF-8");
    json_t *arr = json_array();
    CHECK_FAILS(vtr_record_write(fp, "k", arr, &t, "out", &err), VTR_ERR_INVALID,
                "not a JSON object");
    json_decref(arr);
    uint16_t bf[2] = {0x3f80, 0};
    vtr_tensor bt = {.dtype = VTR_BF16, .ndim = 1, .shape = {2}, .data = bf};
    CHECK_FAILS(vtr_record_write(fp, "k", NULL, &bt, "out", &err), VTR_ERR_INVALID,
                "bfloat16 array cannot be stored");
    fclose(fp);
}

TEST(record_output_refuses_an_npy_name)
{
    vtr_error err;
    vtr_record_output o;
    const char *path = test_path("features.npy");
    CHECK_FAILS(vtr_record_output_open(&o, path, "-o FILE or a pipe", &err), VTR_ERR_INVALID,
                "features.npy: -o writes a record stream, not NPY: name it .vtr, or write "
                "KEY.npy files with --out-dir DIR");
    CHECK(access(path, F_OK) != 0 && o.fp == NULL);
    CHECK_OK(vtr_record_output_open(&o, test_path("features.vtr"), "-o FILE", &err));
    CHECK_OK(vtr_record_output_commit(&o, &err));
    CHECK(access(test_path("features.vtr"), F_OK) == 0);
}
