/* safetensors: round trips, interop with a Python reference both ways, malformed input. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "interop/pattern.h"
#include "lib/safetensors.h"

#define PYTHON "/usr/bin/python3"
#define ST_SCRIPT "tests/interop/safetensors_ref.py"

/* The tensors of tests/interop/safetensors_ref.py's REF_TENSORS, in the same order. */
static const struct {
    const char *name, *dtype_name;
    vtr_dtype dtype;
    int ndim;
    int64_t shape[3];
} ref[] = {
    {"encoder.weight", "F32", VTR_F32, 3, {2, 3, 4}},
    {"encoder.bias", "F16", VTR_F16, 1, {5}},
    {"gpo.gru.weight_ih", "BF16", VTR_BF16, 2, {3, 2}},
    {"step", "I64", VTR_I64, 0, {0}},
    {"tokens", "I32", VTR_I32, 2, {2, 2}},
    {"mask", "U8", VTR_U8, 1, {7}},
    {"empty", "F32", VTR_F32, 2, {0, 3}},
    {"caf\xc3\xa9", "I64", VTR_I64, 1, {2}},
};
#define N_REF (sizeof ref / sizeof ref[0])
#define REF_NOTE "caf\xc3\xa9 \"quoted\""

typedef struct ref_set {
    const char *names[N_REF];
    vtr_tensor tensors[N_REF];
    json_t *metadata;
} ref_set;

static void ref_make(ref_set *s)
{
    for (size_t i = 0; i < N_REF; i++) {
        s->names[i] = ref[i].name;
        s->tensors[i] = pattern_tensor(ref[i].dtype, ref[i].ndim, ref[i].shape);
    }
    s->metadata = json_pack("{s:s, s:s}", "format", "pt", "note", REF_NOTE);
}

static void ref_free(ref_set *s)
{
    for (size_t i = 0; i < N_REF; i++)
        free(s->tensors[i].data);
    json_decref(s->metadata);
}

static void need_numpy(void)
{
    if (access(ST_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " ST_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

static void check_pattern(const vtr_tensor *t, vtr_dtype dtype, int ndim, const int64_t *shape)
{
    CHECK(t);
    CHECK_EQ_INT(t->dtype, dtype);
    CHECK_EQ_INT(t->ndim, ndim);
    for (int d = 0; d < ndim; d++)
        CHECK_EQ_INT(t->shape[d], shape[d]);
    long bad = pattern_mismatch(t);
    CHECK_MSG(bad < 0, "%s: element %ld differs", vtr_dtype_name(dtype), bad);
}

/* Checks that st holds exactly the reference tensors, sorted by name. */
static void check_ref(const vtr_safetensors *st)
{
    CHECK_EQ_INT(st->count, N_REF);
    for (size_t i = 0; i + 1 < st->count; i++)
        CHECK(strcmp(st->entries[i].name, st->entries[i + 1].name) < 0);
    for (size_t i = 0; i < N_REF; i++)
        check_pattern(vtr_safetensors_find(st, ref[i].name), ref[i].dtype, ref[i].ndim,
                      ref[i].shape);
    CHECK(vtr_safetensors_find(st, "missing") == NULL);
    CHECK(vtr_safetensors_find(st, "") == NULL);
}

/* The image: an 8-byte size, the JSON text as is, then `buffer` zero bytes. */
static unsigned char *make_st(const char *json, size_t buffer, size_t *len)
{
    size_t n = strlen(json);
    unsigned char *buf = calloc(1, 8 + n + buffer + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, json, n);
    *len = 8 + n + buffer;
    return buf;
}

static unsigned char *write_to_memory(size_t count, const char *const *names,
                                      const vtr_tensor *tensors, const json_t *meta,
                                      size_t *len)
{
    vtr_error err;
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    CHECK_OK(vtr_safetensors_write_stream(fp, count, names, tensors, meta, "memory", &err));
    fclose(fp);
    return (unsigned char *)buf;
}

static uint64_t header_size(const unsigned char *buf)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | buf[i];
    return n;
}

TEST(safetensors_roundtrip)
{
    vtr_error err;
    ref_set s;
    ref_make(&s);
    const char *path = test_path("model.safetensors");
    CHECK_OK(vtr_safetensors_save(path, N_REF, s.names, s.tensors, s.metadata, &err));
    vtr_safetensors st;
    CHECK_OK(vtr_safetensors_open(path, &st, &err));
    check_ref(&st);
    for (size_t i = 0; i < st.count; i++) {
        const vtr_tensor *t = &st.entries[i].tensor;
        CHECK_MSG((uintptr_t)t->data % vtr_dtype_size(t->dtype) == 0, "%s is misaligned",
                  st.entries[i].name);
    }
    CHECK_STR(vtr_safetensors_meta(&st, "format"), "pt");
    CHECK_STR(vtr_safetensors_meta(&st, "note"), REF_NOTE);
    CHECK(vtr_safetensors_meta(&st, "missing") == NULL);
    CHECK(json_object_size(st.metadata) == 2);

    uint64_t n = header_size(st.map.data);
    CHECK_EQ_INT(n % 8, 0);
    size_t data = 0;
    for (size_t i = 0; i < N_REF; i++)
        data += vtr_tensor_nbytes(&s.tensors[i]);
    CHECK_EQ_INT(st.map.size, 8 + n + data);
    vtr_safetensors_close(&st);
    vtr_safetensors_close(&st); /* closing twice is safe */
    CHECK(st.entries == NULL && st.map.data == NULL);
    ref_free(&s);
}

/* The header lists __metadata__, then the tensors as given; the buffer holds them without
 * gaps, largest element size first, the given order among equal sizes. */
TEST(safetensors_writer_layout)
{
    vtr_error err;
    ref_set s;
    ref_make(&s);
    size_t len;
    unsigned char *buf = write_to_memory(N_REF, s.names, s.tensors, s.metadata, &len);
    uint64_t n = header_size(buf);
    json_t *root = json_loadb((const char *)buf + 8, n, 0, NULL);
    CHECK(root);
    const char *key;
    json_t *value;
    size_t k = 0;
    json_object_foreach(root, key, value) {
        CHECK_STR(key, k == 0 ? "__metadata__" : ref[k - 1].name);
        k++;
    }
    CHECK_EQ_INT(k, N_REF + 1);
    uint64_t offset = 0;
    for (size_t size = 8; size >= 1; size /= 2) {
        for (size_t i = 0; i < N_REF; i++) {
            if (vtr_dtype_size(ref[i].dtype) != size)
                continue;
            json_t *range = json_object_get(json_object_get(root, ref[i].name), "data_offsets");
            CHECK_EQ_INT(json_integer_value(json_array_get(range, 0)), offset);
            offset += vtr_tensor_nbytes(&s.tensors[i]);
            CHECK_EQ_INT(json_integer_value(json_array_get(range, 1)), offset);
        }
    }
    CHECK_EQ_INT(8 + n + offset, len);
    json_decref(root);
    for (uint64_t i = 8; i < 8 + n; i++) /* compact JSON, padded with spaces */
        CHECK(buf[i] != '\n');

    vtr_safetensors st;
    CHECK_OK(vtr_safetensors_parse(buf, len, &st, &err));
    check_ref(&st);
    CHECK(st.map.data == NULL);
    vtr_safetensors_close(&st);
    free(buf);
    ref_free(&s);
}

TEST(safetensors_no_tensors)
{
    vtr_error err;
    size_t len;
    unsigned char *buf = write_to_memory(0, NULL, NULL, NULL, &len);
    CHECK_EQ_INT(len, 16);
    CHECK(memcmp(buf + 8, "{}      ", 8) == 0);
    vtr_safetensors st;
    CHECK_OK(vtr_safetensors_parse(buf, len, &st, &err));
    CHECK_EQ_INT(st.count, 0);
    CHECK(st.metadata == NULL);
    CHECK(vtr_safetensors_find(&st, "a") == NULL);
    CHECK(vtr_safetensors_meta(&st, "a") == NULL);
    vtr_safetensors_close(&st);
    free(buf);

    json_t *meta = json_object();
    buf = write_to_memory(0, NULL, NULL, meta, &len);
    CHECK_OK(vtr_safetensors_parse(buf, len, &st, &err));
    CHECK(json_is_object(st.metadata) && json_object_size(st.metadata) == 0);
    vtr_safetensors_close(&st);
    json_decref(meta);
    free(buf);
}

TEST(safetensors_reference_reads_vtr_files)
{
    need_numpy();
    vtr_error err;
    ref_set s;
    ref_make(&s);
    /* the spec handed to the Python reader: {"tensors": [[name, dtype, shape]...], ...} */
    json_t *list = json_array();
    for (size_t i = 0; i < N_REF; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < ref[i].ndim; d++)
            json_array_append_new(shape, json_integer(ref[i].shape[d]));
        json_array_append_new(list, json_pack("[s,s,o]", ref[i].name, ref[i].dtype_name, shape));
    }
    for (int with_meta = 0; with_meta <= 1; with_meta++) {
        const char *path = test_path(with_meta ? "meta.safetensors" : "plain.safetensors");
        json_t *meta = with_meta ? s.metadata : NULL;
        CHECK_OK(vtr_safetensors_save(path, N_REF, s.names, s.tensors, meta, &err));
        json_t *spec = json_pack("{s:O, s:O*}", "tensors", list, "metadata", meta);
        char *text = json_dumps(spec, JSON_COMPACT | JSON_ENSURE_ASCII);
        CHECK(!strchr(text, '\'')); /* it travels in single quotes */
        CHECK_EQ_INT(test_run(PYTHON " " ST_SCRIPT " check '%s' '%s'", path, text), 0);
        free(text);
        json_decref(spec);
    }
    json_decref(list);
    ref_free(&s);
}

TEST(safetensors_vtr_reads_reference_files)
{
    need_numpy();
    vtr_error err;
    const char *dir = test_path("from_reference");
    CHECK(mkdir(dir, 0777) == 0);
    CHECK_EQ_INT(test_run(PYTHON " " ST_SCRIPT " write '%s'", dir), 0);
    char path[600];
    vtr_safetensors st;
    snprintf(path, sizeof path, "%s/ref.safetensors", dir);
    CHECK_OK(vtr_safetensors_open(path, &st, &err));
    check_ref(&st);
    CHECK_STR(vtr_safetensors_meta(&st, "format"), "pt");
    CHECK_STR(vtr_safetensors_meta(&st, "note"), REF_NOTE);
    for (size_t i = 0; i < st.count; i++) {
        const vtr_tensor *t = &st.entries[i].tensor;
        CHECK((uintptr_t)t->data % vtr_dtype_size(t->dtype) == 0);
    }
    vtr_safetensors_close(&st);

    /* the same tensors at unaligned offsets still read right (pattern uses memcpy) */
    snprintf(path, sizeof path, "%s/unaligned.safetensors", dir);
    CHECK_OK(vtr_safetensors_open(path, &st, &err));
    check_ref(&st);
    CHECK(st.metadata == NULL);
    int misaligned = 0;
    for (size_t i = 0; i < st.count; i++) {
        const vtr_tensor *t = &st.entries[i].tensor;
        misaligned += (uintptr_t)t->data % vtr_dtype_size(t->dtype) != 0;
    }
    CHECK(misaligned > 0);
    vtr_safetensors_close(&st);
}

TEST(safetensors_header_errors)
{
    vtr_error err;
#define T(name, dtype, shape, offsets)                                                      \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"
    static const struct {
        const char *json;
        size_t buffer;
        vtr_status status;
        const char *needle;
    } cases[] = {
        {"[]", 0, VTR_ERR_FORMAT, "safetensors header is not a JSON object"},
        {"{", 0, VTR_ERR_FORMAT, "safetensors header: "},
        {"", 0, VTR_ERR_FORMAT, "safetensors header: '[' or '{' expected"},
        {"{}x", 0, VTR_ERR_FORMAT, "end of file expected"},
        {"{}\n\t\0", 0, VTR_ERR_FORMAT, "safetensors header: "},
        {"{\"__metadata__\":[]}", 0, VTR_ERR_FORMAT, "__metadata__ is not an object"},
        {"{\"__metadata__\":{\"epoch\":3}}", 0, VTR_ERR_FORMAT,
         "__metadata__ value of 'epoch' is not a string"},
        {"{\"a\":5}", 0, VTR_ERR_FORMAT, "tensor 'a': not an object"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, VTR_ERR_FORMAT,
         "tensor 'a': dtype missing or not a string"},
        {"{" T("a", "F64", "[1]", "[0,8]") "}", 8, VTR_ERR_UNSUPPORTED,
         "tensor 'a': dtype F64 is not supported (vtr reads F32, F16, BF16, U8, I32, I64)"},
        {"{" T("w", "f32", "[1]", "[0,4]") "}", 4, VTR_ERR_UNSUPPORTED,
         "tensor 'w': dtype f32 is not supported"},
        {"{" T("a\\nb", "F8_E4M3", "[1]", "[0,1]") "}", 1, VTR_ERR_UNSUPPORTED,
         "tensor 'a\\x0ab': dtype F8_E4M3"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, VTR_ERR_FORMAT,
         "tensor 'a': shape missing or not a list"},
        {"{" T("a", "F32", "[1.5]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "tensor 'a': shape is not a list of integers"},
        {"{" T("a", "F32", "[\"1\"]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "shape is not a list of integers"},
        {"{" T("a", "F32", "[2,-1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "tensor 'a': negative dimension -1"},
        {"{" T("a", "F32", "[4611686018427387904,4611686018427387904]", "[0,4]") "}", 4,
         VTR_ERR_FORMAT, "tensor 'a': shape (4611686018427387904, 4611686018427387904) is too large"},
        {"{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, VTR_ERR_UNSUPPORTED,
         "tensor 'a': 9 dimensions (vtr handles at most 8)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, VTR_ERR_FORMAT,
         "tensor 'a': data_offsets missing or not two non-negative integers"},
        {"{" T("a", "F32", "[1]", "[0]") "}", 4, VTR_ERR_FORMAT, "data_offsets missing or not"},
        {"{" T("a", "F32", "[1]", "[0,4,8]") "}", 8, VTR_ERR_FORMAT, "data_offsets missing or"},
        {"{" T("a", "F32", "[1]", "[-4,0]") "}", 4, VTR_ERR_FORMAT, "data_offsets missing or"},
        {"{" T("a", "F32", "[1]", "[\"0\",\"4\"]") "}", 4, VTR_ERR_FORMAT,
         "data_offsets missing or"},
        {"{" T("a", "F32", "[1]", "{}") "}", 4, VTR_ERR_FORMAT, "data_offsets missing or"},
        {"{" T("a", "F32", "[1]", "[8,4]") "}", 8, VTR_ERR_FORMAT,
         "tensor 'a': data_offsets [8, 4] end before they begin"},
        {"{" T("a", "F32", "[100]", "[0,400]") "}", 16, VTR_ERR_FORMAT,
         "tensor 'a': data_offsets [0, 400] run past the end of the 16-byte buffer"},
        {"{" T("a", "F32", "[1]", "[9223372036854775800,9223372036854775804]") "}", 16,
         VTR_ERR_FORMAT, "run past the end of the 16-byte buffer"},
        {"{" T("a", "F32", "[2]", "[0,12]") "}", 12, VTR_ERR_FORMAT,
         "tensor 'a': data_offsets [0, 12] hold 12 bytes, but F32 (2,) needs 8"},
        {"{" T("a", "BF16", "[]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "hold 4 bytes, but BF16 () needs 2"},
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("b", "F32", "[2]", "[4,12]") "}", 12,
         VTR_ERR_FORMAT, "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
        {"{" T("b", "U8", "[4]", "[2,6]") "," T("a", "I64", "[1]", "[0,8]") "}", 8,
         VTR_ERR_FORMAT, "tensors 'a' [0, 8] and 'b' [2, 6] overlap"},
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("a", "F32", "[2]", "[8,16]") "}", 16,
         VTR_ERR_FORMAT, "duplicate object key"},
        {"{" T("", "F32", "[1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "safetensors header: a tensor has an empty name"},
        {"{" T("a\\u0000b", "F32", "[1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "NUL byte in object key not supported"},
        {"{" T("bad\xff\xfe", "F32", "[1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "unable to decode byte 0xff"},
        {"{" T("\xc3\x28", "F32", "[1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "unable to decode byte 0xc3"},
        {"{" T("over\xed\xa0\x80long", "F32", "[1]", "[0,4]") "}", 4, VTR_ERR_FORMAT,
         "unable to decode byte 0xed"},
    };
#undef T
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        unsigned char *buf = make_st(cases[i].json, cases[i].buffer, &len);
        if (strstr(cases[i].json, "\n\t")) /* the case with a NUL byte inside the JSON */
            buf[0] += 1, len += 1;
        vtr_safetensors st;
        vtr_error_clear(&err);
        vtr_status status = vtr_safetensors_parse(buf, len, &st, &err);
        CHECK_MSG(status == cases[i].status && strstr(err.msg, cases[i].needle),
                  "case %zu: got %s \"%s\", expected %s \"%s\"", i, vtr_status_name(status),
                  err.msg, vtr_status_name(cases[i].status), cases[i].needle);
        for (const char *c = err.msg; *c; c++) /* one line of ASCII */
            CHECK_MSG(*c >= 0x20 && *c < 0x7f, "case %zu: byte 0x%02x in the message", i,
                      (unsigned char)*c);
        CHECK(st.count == 0 && st.entries == NULL && st.metadata == NULL);
        free(buf);
    }
}

/* jansson bounds the nesting depth, so a deep header cannot exhaust the stack. */
TEST(safetensors_deeply_nested_header)
{
    vtr_error err;
    size_t depth = 100000;
    char *json = malloc(2 * depth + 16);
    size_t n = 0;
    n += (size_t)sprintf(json, "{\"a\":");
    memset(json + n, '[', depth), n += depth;
    memset(json + n, ']', depth), n += depth;
    strcpy(json + n, "}");
    size_t len;
    unsigned char *buf = make_st(json, 0, &len);
    vtr_safetensors st;
    CHECK_FAILS(vtr_safetensors_parse(buf, len, &st, &err), VTR_ERR_FORMAT,
                "safetensors header: maximum parsing depth reached");
    free(buf);
    free(json);
}

TEST(safetensors_accepted_layouts)
{
    vtr_error err;
    vtr_safetensors st;
    size_t len;
    /* an empty tensor inside another's range, a gap, unused bytes at the end, __metadata__
     * anywhere, unknown fields, leading white space, no padding */
    unsigned char *buf =
        make_st(" {\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20],\"x\":1},"
                "\"__metadata__\":{},"
                "\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                "\"e\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[4,4]}}",
                24, &len);
    CHECK_OK(vtr_safetensors_parse(buf, len, &st, &err));
    CHECK_EQ_INT(st.count, 3);
    CHECK_STR(st.entries[0].name, "a");
    CHECK_STR(st.entries[1].name, "b");
    CHECK_STR(st.entries[2].name, "e");
    const unsigned char *data = buf + len - 24;
    CHECK(st.entries[0].tensor.data == data);
    CHECK(st.entries[1].tensor.data == data + 12);
    CHECK(st.entries[2].tensor.data == data + 4);
    CHECK_EQ_INT(vtr_tensor_numel(&st.entries[2].tensor), 0);
    CHECK(st.metadata && json_object_size(st.metadata) == 0);
    vtr_safetensors_close(&st);
    free(buf);
}

TEST(safetensors_header_size_errors)
{
    vtr_error err;
    vtr_safetensors st;
    CHECK_FAILS(vtr_safetensors_parse(NULL, 0, &st, &err), VTR_ERR_FORMAT,
                "empty file, not a safetensors file");
    CHECK_FAILS(vtr_safetensors_parse("\2\0\0", 3, &st, &err), VTR_ERR_FORMAT,
                "truncated safetensors file: 3 bytes, the header size needs 8");
    unsigned char buf[16] = {0};
    memcpy(buf + 8, "{}      ", 8);
    buf[0] = 8;
    CHECK_OK(vtr_safetensors_parse(buf, 16, &st, &err));
    vtr_safetensors_close(&st);
    buf[0] = 9;
    CHECK_FAILS(vtr_safetensors_parse(buf, 16, &st, &err), VTR_ERR_FORMAT,
                "truncated safetensors header: it claims 9 bytes, 8 are present");
    memset(buf, 0xff, 8);
    CHECK_FAILS(vtr_safetensors_parse(buf, 16, &st, &err), VTR_ERR_FORMAT,
                "safetensors header size 18446744073709551615 exceeds the limit of 100000000");
    memset(buf, 0, 8);
    buf[7] = 0x80;
    CHECK_FAILS(vtr_safetensors_parse(buf, 16, &st, &err), VTR_ERR_FORMAT,
                "header size 9223372036854775808 exceeds the limit");
    memset(buf, 0, 8);
    buf[0] = 0x01, buf[1] = 0xe1, buf[2] = 0xf5, buf[3] = 0x05; /* 100000001 */
    CHECK_FAILS(vtr_safetensors_parse(buf, 16, &st, &err), VTR_ERR_FORMAT,
                "header size 100000001 exceeds the limit of 100000000 bytes");
    buf[0] = 0x00; /* exactly the limit: allowed, but past the end of this buffer */
    CHECK_FAILS(vtr_safetensors_parse(buf, 16, &st, &err), VTR_ERR_FORMAT,
                "it claims 100000000 bytes, 8 are present");
}

/* A valid file cut at every length fails with a specific message, never a crash. */
TEST(safetensors_truncated_at_every_length)
{
    vtr_error err;
    int64_t s1[2] = {2, 2}, s2[1] = {3};
    vtr_tensor tensors[2] = {pattern_tensor(VTR_F32, 2, s1), pattern_tensor(VTR_U8, 1, s2)};
    const char *names[2] = {"weight", "mask"};
    json_t *meta = json_pack("{s:s}", "k", "v");
    size_t len;
    unsigned char *buf = write_to_memory(2, names, tensors, meta, &len);
    size_t data_start = 8 + header_size(buf);
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *part = malloc(cut ? cut : 1); /* exactly cut bytes, for ASan */
        memcpy(part, buf, cut);
        vtr_safetensors st;
        CHECK_FAILS(vtr_safetensors_parse(part, cut, &st, &err), VTR_ERR_FORMAT,
                    cut == 0            ? "empty file"
                    : cut < 8           ? "truncated safetensors file"
                    : cut < data_start  ? "truncated safetensors header"
                                        : "run past the end of the");
        free(part);
    }
    vtr_safetensors st;
    CHECK_OK(vtr_safetensors_parse(buf, len, &st, &err));
    check_pattern(vtr_safetensors_find(&st, "weight"), VTR_F32, 2, s1);
    check_pattern(vtr_safetensors_find(&st, "mask"), VTR_U8, 1, s2);
    CHECK_STR(vtr_safetensors_meta(&st, "k"), "v");
    vtr_safetensors_close(&st);
    free(buf);
    free(tensors[0].data);
    free(tensors[1].data);
    json_decref(meta);
}

TEST(safetensors_empty_and_missing_files)
{
    vtr_error err;
    vtr_safetensors st;
    const char *path = test_path("empty.safetensors");
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    CHECK_FAILS(vtr_safetensors_open(path, &st, &err), VTR_ERR_FORMAT,
                "empty file, not a safetensors file");
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);

    path = test_path("missing.safetensors");
    CHECK_FAILS(vtr_safetensors_open(path, &st, &err), VTR_ERR_IO, path);
    CHECK(strstr(err.msg, "No such file or directory"));

    path = test_path("garbage.safetensors");
    fp = fopen(path, "wb");
    fwrite("\x10\0\0\0\0\0\0\0{\"a\":1}         ", 1, 24, fp);
    fclose(fp);
    CHECK_FAILS(vtr_safetensors_open(path, &st, &err), VTR_ERR_FORMAT, "tensor 'a': not an");
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    CHECK(st.map.data == NULL);
}

TEST(safetensors_writer_refuses_bad_input)
{
    vtr_error err;
    const char *path = test_path("refused.safetensors");
    int64_t shape[1] = {2};
    vtr_tensor t[2] = {pattern_tensor(VTR_F32, 1, shape), pattern_tensor(VTR_F32, 1, shape)};
    const char *dup[2] = {"w", "w"};
    CHECK_FAILS(vtr_safetensors_save(path, 2, dup, t, NULL, &err), VTR_ERR_INVALID,
                "refused.safetensors: two tensors named 'w'");
    const char *empty[1] = {""};
    CHECK_FAILS(vtr_safetensors_save(path, 1, empty, t, NULL, &err), VTR_ERR_INVALID,
                "tensor 0: invalid name ''");
    const char *null_name[1] = {NULL};
    CHECK_FAILS(vtr_safetensors_save(path, 1, null_name, t, NULL, &err), VTR_ERR_INVALID,
                "tensor 0: invalid name '(null)'");
    const char *reserved[1] = {"__metadata__"};
    CHECK_FAILS(vtr_safetensors_save(path, 1, reserved, t, NULL, &err), VTR_ERR_INVALID,
                "invalid name '__metadata__'");
    const char *bad_utf8[2] = {"ok", "caf\xe9"};
    CHECK_FAILS(vtr_safetensors_save(path, 2, bad_utf8, t, NULL, &err), VTR_ERR_INVALID,
                "tensor name 'caf\\xe9' is not valid UTF-8");

    const char *names[2] = {"a", "b"};
    json_t *meta = json_pack("{s:s, s:i}", "ok", "x", "epoch", 3);
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, t, meta, &err), VTR_ERR_INVALID,
                "__metadata__ value of 'epoch' is not a string");
    json_decref(meta);
    meta = json_array();
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, t, meta, &err), VTR_ERR_INVALID,
                "__metadata__ is not an object");
    json_decref(meta);

    vtr_tensor bad[2] = {t[0], t[1]};
    bad[1].shape[0] = -2;
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, bad, NULL, &err), VTR_ERR_INVALID,
                "tensor 'b': negative dimension -2");
    bad[1] = t[1];
    bad[1].ndim = 9;
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, bad, NULL, &err), VTR_ERR_INVALID,
                "tensor 'b': 9 dimensions");
    bad[1] = t[1];
    bad[1].dtype = VTR_DTYPE_COUNT;
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, bad, NULL, &err), VTR_ERR_INVALID,
                "tensor 'b': invalid dtype");
    bad[1] = t[1];
    bad[1].data = NULL;
    CHECK_FAILS(vtr_safetensors_save(path, 2, names, bad, NULL, &err), VTR_ERR_INVALID,
                "tensor 'b' has no data");
    CHECK(access(path, F_OK) != 0); /* nothing left behind, not even a temp file */
    CHECK_EQ_INT(test_run("ls '%s' | grep -q 'refused.*tmp'", test_tmpdir()), 1);

    CHECK_FAILS(vtr_safetensors_save(test_path("no/dir/x.safetensors"), 2, names, t, NULL,
                                     &err),
                VTR_ERR_IO, "no/dir/x.safetensors: No such file or directory");
    free(t[0].data);
    free(t[1].data);
}
