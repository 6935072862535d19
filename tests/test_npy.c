/* NPY: round trips, numpy interop both ways, header variants, and malformed input. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "interop/pattern.h"
#include "lib/npy.h"

#define PYTHON "/usr/bin/python3"
#define NPY_SCRIPT "tests/interop/npy_check.py"

static const vtr_dtype npy_dtypes[] = {VTR_F32, VTR_F16, VTR_U8, VTR_I32, VTR_I64};
#define N_DTYPES (sizeof npy_dtypes / sizeof npy_dtypes[0])

/* The shapes every round trip covers: scalar, 1-D, 0-length, 3-D. */
static const struct {
    int ndim;
    int64_t shape[3];
    const char *arg; /* for npy_check.py */
    const char *tag; /* in the names of the files npy_check.py writes */
} shapes[] = {
    {0, {0}, "", "scalar"},
    {1, {5}, "5,", "5"},
    {1, {0}, "0,", "0"},
    {3, {2, 3, 4}, "2,3,4", "2x3x4"},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Skips the calling test unless the interop scripts and numpy are at hand. */
static void need_numpy(void)
{
    if (access(NPY_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " NPY_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

static void check_pattern(const vtr_tensor *t, vtr_dtype dtype, int ndim, const int64_t *shape)
{
    CHECK_EQ_INT(t->dtype, dtype);
    CHECK_EQ_INT(t->ndim, ndim);
    for (int d = 0; d < ndim; d++)
        CHECK_EQ_INT(t->shape[d], shape[d]);
    long bad = pattern_mismatch(t);
    CHECK_MSG(bad < 0, "%s: element %ld differs", vtr_dtype_name(dtype), bad);
}

/* An NPY image with the given header text: pad64 pads it as numpy does (spaces, '\n',
 * data at a multiple of 64); otherwise the text is used as is. Appends nbytes of data.
 * Returns a malloc'ed buffer and sets *len. */
static unsigned char *make_npy(const char *header, int major, const void *data, size_t nbytes,
                               int pad64, size_t *len)
{
    size_t preamble = major == 1 ? 10 : 12, text = strlen(header);
    size_t header_len = pad64 ? text + 1 + (64 - (preamble + text + 1) % 64) % 64 : text;
    unsigned char *buf = malloc(preamble + header_len + nbytes + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < preamble - 8; i++)
        buf[8 + i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + preamble, header, text);
    if (pad64) {
        memset(buf + preamble + text, ' ', header_len - text);
        buf[preamble + header_len - 1] = '\n';
    }
    if (nbytes)
        memcpy(buf + preamble + header_len, data, nbytes);
    *len = preamble + header_len + nbytes;
    return buf;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    CHECK(fp);
    unsigned char *buf = malloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, fp);
    fclose(fp);
    return buf;
}

TEST(npy_roundtrip_every_dtype_shape_version)
{
    vtr_error err;
    for (size_t d = 0; d < N_DTYPES; d++) {
        for (size_t s = 0; s < N_SHAPES; s++) {
            vtr_tensor t = pattern_tensor(npy_dtypes[d], shapes[s].ndim, shapes[s].shape);
            for (int version = 0; version <= 3; version++) {
                const char *path = test_path("roundtrip.npy");
                CHECK_OK(vtr_npy_save(path, &t, version, &err));
                struct stat sb;
                CHECK(stat(path, &sb) == 0);
                CHECK_EQ_INT(sb.st_size, vtr_npy_serialized_size(&t, version));

                vtr_npy_file f;
                CHECK_OK(vtr_npy_load(path, &f, &err));
                const unsigned char *bytes = f.map.data;
                CHECK_EQ_INT(bytes[6], version ? version : 1);
                size_t offset = (size_t)((const unsigned char *)f.tensor.data - bytes);
                CHECK_EQ_INT(offset % 64, 0);
                CHECK_EQ_INT(offset + vtr_tensor_nbytes(&t), f.map.size);
                check_pattern(&f.tensor, t.dtype, t.ndim, t.shape);
                vtr_npy_close(&f);
                vtr_npy_close(&f); /* closing twice is safe */
            }
            free(t.data);
        }
    }
}

TEST(npy_write_stream_matches_serialized_size)
{
    vtr_error err;
    int64_t shape[2] = {3, 7};
    vtr_tensor t = pattern_tensor(VTR_I32, 2, shape);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    CHECK_OK(vtr_npy_write_stream(fp, &t, 2, "memory", &err));
    fclose(fp);
    CHECK_EQ_INT(len, vtr_npy_serialized_size(&t, 2));
    vtr_tensor back;
    CHECK_OK(vtr_npy_parse(buf, len, &back, &err));
    check_pattern(&back, VTR_I32, 2, shape);
    free(buf);
    free(t.data);
}

TEST(npy_writer_refuses_bad_tensors)
{
    vtr_error err;
    const char *path = test_path("refused.npy");
    int64_t shape[1] = {4};
    vtr_tensor bf16 = pattern_tensor(VTR_BF16, 1, shape);
    CHECK_FAILS(vtr_npy_save(path, &bf16, 0, &err), VTR_ERR_UNSUPPORTED, "no bfloat16 dtype");
    CHECK_EQ_INT(vtr_npy_serialized_size(&bf16, 0), 0);
    CHECK(access(path, F_OK) != 0);
    CHECK_EQ_INT(test_run("ls '%s' | grep -q tmp", test_tmpdir()), 1); /* no temp file */

    vtr_tensor t = bf16;
    t.dtype = VTR_F16;
    CHECK_FAILS(vtr_npy_save(path, &t, 4, &err), VTR_ERR_INVALID, "NPY version 4");
    CHECK_FAILS(vtr_npy_save(path, &t, -1, &err), VTR_ERR_INVALID, "NPY version -1");
    t.shape[0] = -3;
    CHECK_FAILS(vtr_npy_save(path, &t, 0, &err), VTR_ERR_INVALID, "negative dimension -3");
    t.shape[0] = 4;
    t.ndim = VTR_MAX_DIMS + 1;
    CHECK_FAILS(vtr_npy_save(path, &t, 0, &err), VTR_ERR_INVALID, "9 dimensions");
    t.ndim = 1;
    t.data = NULL;
    CHECK_FAILS(vtr_npy_save(path, &t, 0, &err), VTR_ERR_INVALID, "no data");
    t.dtype = (vtr_dtype)99;
    CHECK_FAILS(vtr_npy_write_stream(stdout, &t, 0, "stdout", &err), VTR_ERR_INVALID,
                "stdout: invalid dtype 99");
    CHECK(access(path, F_OK) != 0);

    /* a 0-length tensor needs no data */
    vtr_tensor empty = {.dtype = VTR_F32, .ndim = 2, .shape = {0, 5}};
    CHECK_OK(vtr_npy_save(path, &empty, 0, &err));
    free(bf16.data);
}

TEST(npy_save_into_missing_directory)
{
    vtr_error err;
    vtr_tensor t = {.dtype = VTR_U8, .ndim = 0, .data = "x"};
    const char *path = test_path("no/such/dir/a.npy");
    CHECK_FAILS(vtr_npy_save(path, &t, 0, &err), VTR_ERR_IO, path);
    CHECK(strstr(err.msg, "No such file or directory"));
}

TEST(npy_save_replaces_existing_file)
{
    vtr_error err;
    const char *path = test_path("replace.npy");
    int64_t a[1] = {100}, b[2] = {2, 2};
    vtr_tensor big = pattern_tensor(VTR_I64, 1, a), small = pattern_tensor(VTR_F32, 2, b);
    CHECK_OK(vtr_npy_save(path, &big, 0, &err));
    CHECK_OK(vtr_npy_save(path, &small, 0, &err));
    vtr_npy_file f;
    CHECK_OK(vtr_npy_load(path, &f, &err));
    check_pattern(&f.tensor, VTR_F32, 2, b);
    vtr_npy_close(&f);
    free(big.data);
    free(small.data);
}

TEST(npy_numpy_reads_vtr_files)
{
    need_numpy();
    vtr_error err;
    const char *dir = test_path("for_numpy");
    CHECK(mkdir(dir, 0777) == 0);
    /* one python run checks every file: "FILE DTYPE SHAPE VERSION" each */
    static char args[16384];
    size_t used = 0;
    for (size_t d = 0; d < N_DTYPES; d++) {
        for (size_t s = 0; s < N_SHAPES; s++) {
            vtr_tensor t = pattern_tensor(npy_dtypes[d], shapes[s].ndim, shapes[s].shape);
            for (int version = 1; version <= 3; version++) {
                char path[600];
                snprintf(path, sizeof path, "%s/%s_%s_v%d.npy", dir, vtr_dtype_name(t.dtype),
                         shapes[s].tag, version);
                CHECK_OK(vtr_npy_save(path, &t, version, &err));
                used += (size_t)snprintf(args + used, sizeof args - used, " '%s' %s '%s' %d",
                                         path, vtr_dtype_name(t.dtype), shapes[s].arg, version);
                CHECK(used < sizeof args);
            }
            free(t.data);
        }
    }
    CHECK_EQ_INT(test_run(PYTHON " " NPY_SCRIPT " check%s", args), 0);
}

TEST(npy_vtr_reads_numpy_files)
{
    need_numpy();
    vtr_error err;
    const char *dir = test_path("from_numpy");
    CHECK(mkdir(dir, 0777) == 0);
    CHECK_EQ_INT(test_run(PYTHON " " NPY_SCRIPT " write '%s'", dir), 0);

    char path[600];
    vtr_npy_file f;
    for (size_t d = 0; d < N_DTYPES; d++) {
        for (size_t s = 0; s < N_SHAPES; s++) {
            snprintf(path, sizeof path, "%s/good_%s_%s_v1.npy", dir,
                     vtr_dtype_name(npy_dtypes[d]), shapes[s].tag);
            CHECK_OK(vtr_npy_load(path, &f, &err));
            check_pattern(&f.tensor, npy_dtypes[d], shapes[s].ndim, shapes[s].shape);
            vtr_npy_close(&f);
        }
    }
    static const struct {
        const char *file;
        vtr_dtype dtype;
        int ndim;
        int64_t shape[2];
    } versioned[] = {
        {"good_float32_3x4_v2.npy", VTR_F32, 2, {3, 4}},
        {"good_float32_3x4_v3.npy", VTR_F32, 2, {3, 4}},
        {"good_int64_7_v2.npy", VTR_I64, 1, {7}},
        {"good_int64_7_v3.npy", VTR_I64, 1, {7}},
    };
    for (size_t i = 0; i < sizeof versioned / sizeof versioned[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, versioned[i].file);
        CHECK_OK(vtr_npy_load(path, &f, &err));
        check_pattern(&f.tensor, versioned[i].dtype, versioned[i].ndim, versioned[i].shape);
        vtr_npy_close(&f);
    }

    static const struct {
        const char *cause, *needle;
    } refused[] = {
        {"fortran", "Fortran order is not supported"},
        {"object", "NPY dtype '|O': object arrays are not supported"},
        {"bigendian", "NPY dtype '>f4': big-endian data is not supported"},
        {"structured", "NPY structured dtypes are not supported"},
        {"float64", "NPY dtype '<f8' is not supported"},
        {"bool", "NPY dtype '|b1' is not supported"},
        {"unicode", "NPY dtype '<U2' is not supported"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(path, sizeof path, "%s/bad_%s.npy", dir, refused[i].cause);
        CHECK_FAILS(vtr_npy_load(path, &f, &err), VTR_ERR_UNSUPPORTED, refused[i].needle);
        CHECK(strncmp(err.msg, path, strlen(path)) == 0); /* the path comes first */
        CHECK(f.map.data == NULL && f.tensor.data == NULL);
    }
}

TEST(npy_header_variants)
{
    vtr_error err;
    static const struct {
        const char *header;
        vtr_dtype dtype;
        int ndim;
        int64_t shape[3];
    } cases[] = {
        {"{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}", VTR_F32, 2, {2, 3}},
        {"{\"descr\":\"<i8\",\"fortran_order\":False,\"shape\":(2,)}", VTR_I64, 1, {2}},
        {"  {  'descr' : 'u1' ,\n\t'fortran_order' : False , 'shape' : ( 4 , ) , }  \r\n",
         VTR_U8, 1, {4}},
        {"{'descr': '<u1', 'fortran_order': False, 'shape': (3L, 2L), }", VTR_U8, 2, {3, 2}},
        {"{'descr': '>u1', 'fortran_order': False, 'shape': (1, 1, 3,), }", VTR_U8, 3,
         {1, 1, 3}},
        {"{'descr': '=f2', 'fortran_order': False, 'shape': (), }", VTR_F16, 0, {0}},
        {"{'descr': 'f4', 'fortran_order': False, 'shape': (0, 0), }", VTR_F32, 2, {0, 0}},
        {"{'descr': '|i4', 'fortran_order': False, 'shape': (+2,), }", VTR_I32, 1, {2}},
        /* with fewer than two dimensions Fortran order is C order */
        {"{'descr': '|u1', 'fortran_order': True, 'shape': (6,), }", VTR_U8, 1, {6}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vtr_tensor want = pattern_tensor(cases[i].dtype, cases[i].ndim, cases[i].shape);
        for (int pad = 0; pad <= 1; pad++) {
            size_t len;
            unsigned char *buf = make_npy(cases[i].header, 1 + pad, want.data,
                                          vtr_tensor_nbytes(&want), pad, &len);
            vtr_tensor t;
            vtr_status st = vtr_npy_parse(buf, len, &t, &err);
            CHECK_MSG(st == VTR_OK, "case %zu: %s", i, err.msg);
            check_pattern(&t, cases[i].dtype, cases[i].ndim, cases[i].shape);
            free(buf);
        }
        free(want.data);
    }
}

/* Parses a 1.0 file with header text[0..len) and one float of data; expects failure. */
static void check_header_error(const char *text, size_t len, vtr_status status,
                               const char *needle)
{
    vtr_error err;
    float one = 1;
    unsigned char *buf = malloc(10 + len + sizeof one);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)len;
    buf[9] = 0;
    memcpy(buf + 10, text, len);
    memcpy(buf + 10 + len, &one, sizeof one); /* as shape (1,) needs */
    vtr_tensor t;
    vtr_error_clear(&err);
    vtr_status st = vtr_npy_parse(buf, 10 + len + sizeof one, &t, &err);
    free(buf);
    CHECK_MSG(st == status && strstr(err.msg, needle),
              "header \"%.*s\": got %s \"%s\", expected %s \"%s\"", (int)len, text,
              vtr_status_name(st), err.msg, vtr_status_name(status), needle);
    for (const char *c = err.msg; *c; c++) /* one line of ASCII */
        CHECK(*c >= 0x20 && *c < 0x7f);
    CHECK(t.data == NULL);
}

TEST(npy_header_errors)
{
    static const struct {
        const char *header;
        vtr_status status;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
         VTR_ERR_FORMAT, "NPY header: duplicate key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}",
         VTR_ERR_FORMAT, "duplicate key 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, }", VTR_ERR_FORMAT,
         "NPY header: missing key 'shape'"},
        {"{}", VTR_ERR_FORMAT, "missing key 'descr'"},
        {"{'descr': '<f4', 'shape': (1,)}", VTR_ERR_FORMAT, "missing key 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
         VTR_ERR_FORMAT, "NPY header: unexpected key 'extra'"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", VTR_ERR_UNSUPPORTED,
         "Fortran order is not supported"},
        {"{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "NPY dtype '>i4': big-endian data is not supported"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "object arrays are not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
         VTR_ERR_UNSUPPORTED, "structured dtypes are not supported"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "NPY dtype '<f8' is not supported (vtr reads <f4, <f2, |u1, <i4, <i8)"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "'<c8' is not supported"},
        {"{'descr': '', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "NPY dtype '' is not supported"},
        {"{'descr': '<f44', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "'<f44' is not supported"},
        {"{'descr': '\xff\n', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_FORMAT,
         "expected a string without escapes or line breaks"},
        {"{'descr': '\xff<f4', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_UNSUPPORTED,
         "NPY dtype '\\xff<f4' is not supported"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5), }", VTR_ERR_FORMAT,
         "shape (5) is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [5], }", VTR_ERR_FORMAT,
         "expected a shape tuple at byte"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9), }",
         VTR_ERR_UNSUPPORTED, "NPY shape has more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", VTR_ERR_FORMAT,
         "NPY header: negative dimension -1"},
        {"{'descr': '<f4', 'fortran_order': False, "
         "'shape': (4611686018427387904, 4611686018427387904), }",
         VTR_ERR_FORMAT, "NPY header: shape (4611686018427387904, 4611686018427387904) is too "
                         "large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
         VTR_ERR_FORMAT, "does not fit in 64 bits"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }", VTR_ERR_FORMAT,
         "expected ',' or ')' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }", VTR_ERR_FORMAT,
         "expected ',' or ')' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", VTR_ERR_FORMAT,
         "expected an integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1x,), }", VTR_ERR_FORMAT,
         "expected an integer"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }", VTR_ERR_FORMAT,
         "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", VTR_ERR_FORMAT,
         "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,), }", VTR_ERR_FORMAT,
         "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", VTR_ERR_FORMAT,
         "unexpected bytes after the dictionary at byte"},
        {"{'descr", VTR_ERR_FORMAT, "expected the end of a string"},
        {"('descr': '<f4')", VTR_ERR_FORMAT, "NPY header: expected '{' at byte 10"},
        {"", VTR_ERR_FORMAT, "NPY header: expected '{', found the end"},
        {"{'descr' '<f4'}", VTR_ERR_FORMAT, "expected ':'"},
        {"{descr: '<f4'}", VTR_ERR_FORMAT, "expected a quoted string"},
        {"{'descr': '<f4' 'shape': (1,)}", VTR_ERR_FORMAT, "expected ',' or '}'"},
        {"{'descr': '<f4',, }", VTR_ERR_FORMAT, "expected a quoted string"},
        {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,), }", VTR_ERR_FORMAT,
         "expected a string without escapes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", VTR_ERR_FORMAT,
         "expected ',' or '}', found the end"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_header_error(cases[i].header, strlen(cases[i].header), cases[i].status,
                           cases[i].needle);
    }
    /* NUL bytes: inside the dtype string it is no byte-order mark; after the dict,
     * no padding */
    static const char nul_descr[] = "{'descr': '\0f4', 'fortran_order': False, 'shape': (1,), }";
    check_header_error(nul_descr, sizeof nul_descr - 1, VTR_ERR_UNSUPPORTED,
                       "NPY dtype '\\x00f4' is not supported");
    static const char nul_after[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\0";
    check_header_error(nul_after, sizeof nul_after - 1, VTR_ERR_FORMAT,
                       "unexpected bytes after the dictionary");
}

/* What a parser says of the first cut bytes of a valid NPY image (version `version`, data
 * from data_offset): data_error once the header is whole. */
static const char *truncation_error(size_t cut, int version, size_t data_offset,
                                    const char *data_error)
{
    return cut == 0                         ? "empty file"
           : cut < (version == 1 ? 10 : 12) ? "truncated NPY file"
           : cut < data_offset              ? "truncated NPY header"
                                            : data_error;
}

/* A valid file cut at every length fails with "empty" or "truncated", never a crash. */
TEST(npy_truncated_at_every_length)
{
    vtr_error err;
    int64_t shape[2] = {2, 3};
    vtr_tensor t = pattern_tensor(VTR_F32, 2, shape);
    for (int version = 1; version <= 3; version++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        CHECK_OK(vtr_npy_write_stream(fp, &t, version, "memory", &err));
        fclose(fp);
        size_t data_offset = len - vtr_tensor_nbytes(&t);
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly cut bytes, so that ASan sees any read past the end */
            unsigned char *part = malloc(cut ? cut : 1);
            memcpy(part, buf, cut);
            vtr_tensor back;
            CHECK_FAILS(vtr_npy_parse(part, cut, &back, &err), VTR_ERR_FORMAT,
                        truncation_error(cut, version, data_offset, "truncated NPY data"));
            free(part);
        }
        vtr_tensor back;
        CHECK_OK(vtr_npy_parse(buf, len, &back, &err));
        free(buf);
    }
    free(t.data);
}

TEST(npy_bad_magic_and_version)
{
    vtr_error err;
    vtr_tensor t;
    int64_t shape[1] = {3};
    vtr_tensor good = pattern_tensor(VTR_U8, 1, shape);
    size_t len;
    unsigned char *buf = make_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
                                  1, good.data, 3, 1, &len);
    CHECK_OK(vtr_npy_parse(buf, len, &t, &err));

    CHECK_FAILS(vtr_npy_parse("hello, world\n", 13, &t, &err), VTR_ERR_FORMAT,
                "not an NPY file (bad magic)");
    CHECK_FAILS(vtr_npy_parse("PK\3\4", 4, &t, &err), VTR_ERR_FORMAT, "bad magic");
    CHECK_FAILS(vtr_npy_parse("\x93NUMPY", 6, &t, &err), VTR_ERR_FORMAT, "truncated");
    buf[1] = 'n';
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_FORMAT, "bad magic");
    buf[1] = 'N';
    buf[6] = 4;
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_UNSUPPORTED,
                "NPY version 4.0 is not supported");
    buf[6] = 0;
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_UNSUPPORTED, "NPY version 0.0");
    buf[6] = 1;
    buf[7] = 1;
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_UNSUPPORTED, "NPY version 1.1");
    free(buf);
    free(good.data);
}

TEST(npy_header_length_past_the_end)
{
    vtr_error err;
    vtr_tensor t;
    float data[3] = {1, 2, 3};
    size_t len;
    unsigned char *buf = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                  1, data, sizeof data, 1, &len);
    buf[8] = buf[9] = 0xff;
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_FORMAT,
                "truncated NPY header: it claims 65535 bytes, 130 are present");
    free(buf);
    buf = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 2, data,
                   sizeof data, 1, &len);
    memset(buf + 8, 0xff, 4);
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_FORMAT,
                "it claims 4294967295 bytes");
    free(buf);
}

TEST(npy_data_size_must_match_the_shape)
{
    vtr_error err;
    vtr_tensor t;
    int64_t data[4] = {1, 2, 3, 4};
    const char *header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
    size_t len;
    unsigned char *buf = make_npy(header, 1, data, sizeof data, 1, &len);
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_FORMAT,
                "NPY file has 8 trailing bytes after the int64 (3,) data");
    CHECK_OK(vtr_npy_parse(buf, len - 8, &t, &err));
    CHECK_FAILS(vtr_npy_parse(buf, len - 9, &t, &err), VTR_ERR_FORMAT,
                "truncated NPY data: int64 (3,) needs 24 bytes, 23 are present");
    free(buf);
    /* a header claiming far more data than the file holds */
    buf = make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1000000, 1000000), }", 1,
                   data, sizeof data, 1, &len);
    CHECK_FAILS(vtr_npy_parse(buf, len, &t, &err), VTR_ERR_FORMAT,
                "needs 8000000000000 bytes, 32 are present");
    free(buf);
}

/* A header whose length is not padded leaves the data unaligned; it still reads right. */
TEST(npy_unaligned_data)
{
    vtr_error err;
    int64_t shape[1] = {5};
    vtr_tensor want = pattern_tensor(VTR_I64, 1, shape);
    size_t len;
    unsigned char *buf = make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (5,)}\n",
                                  1, want.data, 40, 0, &len);
    vtr_tensor t;
    CHECK_OK(vtr_npy_parse(buf, len, &t, &err));
    CHECK((uintptr_t)t.data % 8 != 0);
    check_pattern(&t, VTR_I64, 1, shape);
    free(buf);
    free(want.data);
}

TEST(npy_empty_missing_and_directory)
{
    vtr_error err;
    vtr_npy_file f;
    const char *path = test_path("empty.npy");
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    CHECK_FAILS(vtr_npy_load(path, &f, &err), VTR_ERR_FORMAT, "empty file, not an NPY array");
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);

    path = test_path("missing.npy");
    CHECK_FAILS(vtr_npy_load(path, &f, &err), VTR_ERR_IO, path);
    CHECK(strstr(err.msg, "No such file or directory"));

    CHECK_FAILS(vtr_npy_load(test_tmpdir(), &f, &err), VTR_ERR_IO, "is a directory");
}

/* numpy's own bytes for a small array, checked in as a literal: vtr reads them and writes
 * the same bytes back. */
TEST(npy_bytes_equal_numpy)
{
    vtr_error err;
    size_t len;
    int64_t shape[2] = {2, 3};
    vtr_tensor t = pattern_tensor(VTR_F32, 2, shape);
    unsigned char *buf = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
                                  "}                    ",
                                  1, t.data, 24, 1, &len);
    CHECK_EQ_INT(len, 128 + 24);
    const char *path = test_path("same.npy");
    CHECK_OK(vtr_npy_save(path, &t, 1, &err));
    size_t file_len;
    unsigned char *file = read_file(path, &file_len);
    CHECK_EQ_INT(file_len, len);
    CHECK(memcmp(file, buf, len) == 0);
    free(file);
    free(buf);
    free(t.data);
}

/* ---- headers written before the data ---- */

/* A header reserved for (0, D) and rewritten with the final row count has the same length
 * and the bytes vtr_npy_write_stream writes for the final array (numpy's). */
TEST(npy_header_rows_rewritten_in_place)
{
    vtr_error err;
    static const struct {
        vtr_dtype dtype;
        int ndim;
        int64_t dim;
    } cases[] = {{VTR_F16, 2, 512}, {VTR_F32, 2, 3}, {VTR_I64, 1, 0}, {VTR_U8, 3, 7}};
    static const int64_t rows[] = {0, 1, 9, 10, 123456, INT64_C(1) << 40};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t shape[3] = {0, cases[c].dim, cases[c].dim};
        vtr_npy_header h;
        CHECK_OK(vtr_npy_header_init(&h, cases[c].dtype, cases[c].ndim, shape, &err));
        size_t reserved = h.len;
        CHECK_EQ_INT(reserved % 64, 0);
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            CHECK_OK(vtr_npy_header_set_rows(&h, rows[r], &err));
            CHECK_EQ_INT(h.len, reserved);
            CHECK_EQ_INT(h.shape[0], rows[r]);
            /* the bytes numpy writes for the final shape: the header of a 1-row array
             * with its first dimension changed, data left out */
            vtr_tensor t = {.dtype = cases[c].dtype, .ndim = cases[c].ndim};
            memcpy(t.shape, shape, sizeof shape);
            t.shape[0] = 1;
            t.data = calloc(1, vtr_tensor_nbytes(&t) + 1);
            char *buf = NULL;
            size_t len = 0;
            FILE *fp = open_memstream(&buf, &len);
            CHECK_OK(vtr_npy_write_stream(fp, &t, 1, "memory", &err));
            fclose(fp);
            vtr_npy_header one;
            shape[0] = 1;
            CHECK_OK(vtr_npy_header_init(&one, cases[c].dtype, cases[c].ndim, shape, &err));
            shape[0] = 0;
            CHECK_EQ_INT(len, one.len + vtr_tensor_nbytes(&t));
            CHECK(memcmp(buf, one.bytes, one.len) == 0);
            free(buf);
            free(t.data);
            /* and the rewritten header parses as the final shape */
            if (rows[r] == 1) {
                CHECK(memcmp(h.bytes, one.bytes, h.len) == 0);
            } else if (rows[r] == 0) {
                vtr_tensor back;
                CHECK_OK(vtr_npy_parse(h.bytes, h.len, &back, &err));
                CHECK_EQ_INT(back.shape[0], 0);
                CHECK_EQ_INT(back.ndim, cases[c].ndim);
            }
        }
    }
}

/* A (rows, D) file written as a writer does it: the (0, D) header, the rows, then the
 * header rewritten at the start; vtr_npy_load reads it back. */
TEST(npy_header_streamed_file)
{
    vtr_error err;
    const char *path = test_path("streamed.npy");
    int64_t shape[2] = {0, 3};
    vtr_npy_header h;
    CHECK_OK(vtr_npy_header_init(&h, VTR_F32, 2, shape, &err));
    FILE *fp = fopen(path, "wb");
    CHECK(fp);
    CHECK(fwrite(h.bytes, 1, h.len, fp) == h.len);
    float rows[4][3];
    for (int i = 0; i < 12; i++)
        rows[i / 3][i % 3] = (float)i;
    CHECK(fwrite(rows, sizeof rows, 1, fp) == 1);
    CHECK_OK(vtr_npy_header_set_rows(&h, 4, &err));
    CHECK(fseek(fp, 0, SEEK_SET) == 0);
    CHECK(fwrite(h.bytes, 1, h.len, fp) == h.len);
    CHECK(fclose(fp) == 0);
    vtr_npy_file f;
    CHECK_OK(vtr_npy_load(path, &f, &err));
    CHECK_EQ_INT(f.tensor.shape[0], 4);
    CHECK_EQ_INT(f.tensor.shape[1], 3);
    CHECK(memcmp(f.tensor.data, rows, sizeof rows) == 0);
    vtr_npy_close(&f);
}

TEST(npy_reserved_header_errors)
{
    vtr_error err;
    vtr_npy_header h;
    int64_t shape[VTR_MAX_DIMS + 1] = {0, 4};
    CHECK_FAILS(vtr_npy_header_init(&h, VTR_F32, 0, shape, &err), VTR_ERR_INVALID,
                "NPY header: 0 dimensions");
    CHECK_EQ_INT(h.len, 0);
    CHECK_FAILS(vtr_npy_header_init(&h, VTR_F32, VTR_MAX_DIMS + 1, shape, &err),
                VTR_ERR_INVALID, "NPY header: 9 dimensions");
    CHECK_FAILS(vtr_npy_header_init(&h, VTR_BF16, 2, shape, &err), VTR_ERR_UNSUPPORTED,
                "NPY header: NPY has no bfloat16 dtype");
    CHECK_FAILS(vtr_npy_header_init(&h, (vtr_dtype)99, 2, shape, &err), VTR_ERR_INVALID,
                "NPY header: invalid dtype 99");
    shape[1] = -4;
    CHECK_FAILS(vtr_npy_header_init(&h, VTR_F32, 2, shape, &err), VTR_ERR_INVALID,
                "negative dimension -4");
    shape[1] = 4;
    CHECK_OK(vtr_npy_header_init(&h, VTR_F32, 2, shape, &err));
    vtr_npy_header before = h;
    CHECK_FAILS(vtr_npy_header_set_rows(&h, -1, &err), VTR_ERR_INVALID,
                "negative dimension -1");
    CHECK_FAILS(vtr_npy_header_set_rows(&h, INT64_MAX, &err), VTR_ERR_INVALID, "too large");
    CHECK(memcmp(&h, &before, sizeof h) == 0); /* a refusal leaves it as it was */
}

/* ---- string arrays ---- */

/* '<U3' of "ab" and "\u00e9x\U0001F600" */
static const uint32_t two_names[6] = {'a', 'b', 0, 0xE9, 'x', 0x1F600};
#define TWO_NAMES_HEADER "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }"

TEST(npy_strings_read)
{
    vtr_error err;
    vtr_npy_strings l;
    size_t len;
    for (int version = 1; version <= 3; version++) {
        unsigned char *buf = make_npy(TWO_NAMES_HEADER, version, two_names, sizeof two_names,
                                      1, &len);
        CHECK_OK(vtr_npy_parse_strings(buf, len, &l, &err));
        CHECK_EQ_INT(l.n, 2);
        CHECK_STR(l.items[0], "ab");
        CHECK_STR(l.items[1], "\xc3\xa9x\xf0\x9f\x98\x80");
        free(buf); /* the strings are a copy */
        CHECK_STR(l.items[0], "ab");
        vtr_npy_strings_free(&l);
        CHECK(l.n == 0 && !l.items && !l.storage);
        vtr_npy_strings_free(&l); /* twice is safe */
    }
    /* bytes, read as UTF-8; trailing NULs cut */
    unsigned char *buf = make_npy("{'descr': '|S4', 'fortran_order': False, 'shape': (2,), }", 1,
                                  "abcdxy\0\0", 8, 1, &len);
    CHECK_OK(vtr_npy_parse_strings(buf, len, &l, &err));
    CHECK_STR(l.items[0], "abcd");
    CHECK_STR(l.items[1], "xy");
    vtr_npy_strings_free(&l);
    free(buf);
    /* other byte-order marks numpy accepts, Fortran order of one dimension */
    buf = make_npy("{'descr': '=U1', 'fortran_order': True, 'shape': (1,), }", 1, "z\0\0\0", 4,
                   1, &len);
    CHECK_OK(vtr_npy_parse_strings(buf, len, &l, &err));
    CHECK_STR(l.items[0], "z");
    vtr_npy_strings_free(&l);
    free(buf);
    /* no strings at all */
    buf = make_npy("{'descr': '<U1', 'fortran_order': False, 'shape': (0,), }", 1, "", 0, 1, &len);
    CHECK_OK(vtr_npy_parse_strings(buf, len, &l, &err));
    CHECK_EQ_INT(l.n, 0);
    vtr_npy_strings_free(&l);
    free(buf);
    vtr_npy_strings_free(NULL);
}

TEST(npy_strings_errors)
{
    vtr_error err;
    vtr_npy_strings l;
    struct {
        const char *dict;
        const void *data;
        size_t len;
        vtr_status status;
        const char *needle;
    } bad[] = {
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "12345678", 8,
         VTR_ERR_UNSUPPORTED, "an object array (pickled, dtype '|O'); re-save it as a str array"},
        {"{'descr': '>U2', 'fortran_order': False, 'shape': (1,), }", "\0\0\0a\0\0\0b", 8,
         VTR_ERR_UNSUPPORTED, "big-endian dtype '>U2'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "12345678", 8,
         VTR_ERR_UNSUPPORTED, "dtype '<f4'; expected a numpy string array"},
        {"{'descr': '<U0', 'fortran_order': False, 'shape': (0,), }", "", 0, VTR_ERR_UNSUPPORTED,
         "dtype '<U0'"},
        {"{'descr': '<U', 'fortran_order': False, 'shape': (0,), }", "", 0, VTR_ERR_UNSUPPORTED,
         "dtype '<U'"},
        {"{'descr': '<', 'fortran_order': False, 'shape': (0,), }", "", 0, VTR_ERR_UNSUPPORTED,
         "dtype '<'"},
        {"{'descr': '<U1x', 'fortran_order': False, 'shape': (0,), }", "", 0, VTR_ERR_UNSUPPORTED,
         "dtype '<U1x'"},
        {"{'descr': '<U1048577', 'fortran_order': False, 'shape': (0,), }", "", 0,
         VTR_ERR_UNSUPPORTED, "dtype '<U1048577'"},
        {"{'descr': '<U\xff', 'fortran_order': False, 'shape': (0,), }", "", 0,
         VTR_ERR_UNSUPPORTED, "dtype '<U\\xff'"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (1, 2), }", "a\0\0\0b\0\0\0", 8,
         VTR_ERR_FORMAT, "2-D array; expected a 1-D list of names"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (), }", "a\0\0\0", 4,
         VTR_ERR_FORMAT, "0-D array"},
        {"{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", "a\0\0\0b\0\0\0", 8,
         VTR_ERR_FORMAT, "8 data bytes for 2 names of 8 bytes (dtype '<U2')"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (-1,), }", "", 0, VTR_ERR_FORMAT,
         "0 data bytes for -1 names"},
        {"{'descr': '|S1048576', 'fortran_order': False, 'shape': (4611686018427387904,), }", "",
         0, VTR_ERR_FORMAT, "0 data bytes for 4611686018427387904 names of 1048576 bytes"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", "a\0\0\0\0\0\0\0", 8,
         VTR_ERR_FORMAT, "name 1 is empty"},
        {"{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", "\0\0\0\0b\0\0\0", 8,
         VTR_ERR_FORMAT, "name 0 holds a NUL"},
        {"{'descr': '|S2', 'fortran_order': False, 'shape': (1,), }", "\0b", 2, VTR_ERR_FORMAT,
         "name 0 holds a NUL"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", "\0\xd8\0\0", 4,
         VTR_ERR_FORMAT, "name 0 is not valid Unicode"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", "\0\0\x11\0", 4,
         VTR_ERR_FORMAT, "not valid Unicode"},
        {"{'descr': '|S2', 'fortran_order': False, 'shape': (1,), }", "\xc3(", 2, VTR_ERR_FORMAT,
         "name 0 is not valid UTF-8"},
        {"{'descr': '|S2', 'fortran_order': False, 'shape': (1,), }", "a\xc3", 2, VTR_ERR_FORMAT,
         "not valid UTF-8"},
        {"{'descr': '|S2', 'fortran_order': False, 'shape': (1,), }", "\xc0\x80", 2,
         VTR_ERR_FORMAT, "not valid UTF-8"}, /* overlong */
        /* the header is lib/npy's: the same parser and messages as for numbers */
        {"{'descr': '<U1', 'shape': (1,), }", "a\0\0\0", 4, VTR_ERR_FORMAT,
         "NPY header: missing key 'fortran_order'"},
        {"{'descr': '<U1', 'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", "a\0\0\0", 4,
         VTR_ERR_FORMAT, "NPY header: duplicate key 'descr'"},
        {"{'descr': '<U1', 'fortran_order': Maybe, 'shape': (1,), }", "a\0\0\0", 4, VTR_ERR_FORMAT,
         "expected True or False"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (1,), } x", "a\0\0\0", 4,
         VTR_ERR_FORMAT, "unexpected bytes after the dictionary"},
        {"['descr', '<U1']", "a\0\0\0", 4, VTR_ERR_FORMAT, "NPY header: expected '{'"},
        {"{'descr': '<U1', 'fortran_order': False, 'shape': (99999999999999999999,), }", "a\0\0\0",
         4, VTR_ERR_FORMAT, "does not fit in 64 bits"},
        {"{'descr': [('a', '<U1')], 'fortran_order': False, 'shape': (1,), }", "a\0\0\0", 4,
         VTR_ERR_UNSUPPORTED, "structured dtypes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len;
        unsigned char *buf = make_npy(bad[i].dict, 1, bad[i].data, bad[i].len, 1, &len);
        CHECK_FAILS(vtr_npy_parse_strings(buf, len, &l, &err), bad[i].status, bad[i].needle);
        CHECK(l.n == 0 && !l.items && !l.storage);
        free(buf);
    }
    CHECK_FAILS(vtr_npy_parse_strings("hello", 5, &l, &err), VTR_ERR_FORMAT,
                "not an NPY file (bad magic)");
    CHECK_FAILS(vtr_npy_parse_strings("", 0, &l, &err), VTR_ERR_FORMAT, "empty file");
}

/* A valid string array cut at every length fails with the cause of its length, never a
 * crash or an over-read. */
TEST(npy_strings_truncated_at_every_length)
{
    vtr_error err;
    for (int version = 1; version <= 3; version++) {
        size_t len;
        unsigned char *buf = make_npy(TWO_NAMES_HEADER, version, two_names, sizeof two_names, 1,
                                      &len);
        size_t data_offset = len - sizeof two_names;
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly cut bytes, so that ASan sees any read past the end */
            unsigned char *part = malloc(cut ? cut : 1);
            memcpy(part, buf, cut);
            vtr_npy_strings l;
            CHECK_FAILS(vtr_npy_parse_strings(part, cut, &l, &err), VTR_ERR_FORMAT,
                        truncation_error(cut, version, data_offset,
                                         "data bytes for 2 names of 12 bytes"));
            CHECK(l.n == 0 && !l.items);
            free(part);
        }
        vtr_npy_strings l;
        CHECK_OK(vtr_npy_parse_strings(buf, len, &l, &err));
        vtr_npy_strings_free(&l);
        free(buf);
    }
}

TEST(npy_strings_load)
{
    vtr_error err;
    vtr_npy_strings l;
    const char *path = test_path("names.npy");
    size_t len;
    unsigned char *buf = make_npy(TWO_NAMES_HEADER, 1, two_names, sizeof two_names, 1, &len);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(buf, 1, len, fp) == len);
    fclose(fp);
    CHECK_OK(vtr_npy_load_strings(path, &l, &err));
    CHECK_EQ_INT(l.n, 2);
    CHECK_STR(l.items[1], "\xc3\xa9x\xf0\x9f\x98\x80");
    vtr_npy_strings_free(&l);
    /* errors name the file */
    fp = fopen(path, "wb");
    CHECK(fp && fwrite(buf, 1, len - 1, fp) == len - 1);
    fclose(fp);
    CHECK_FAILS(vtr_npy_load_strings(path, &l, &err), VTR_ERR_FORMAT,
                "data bytes for 2 names");
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    free(buf);
    path = test_path("empty-names.npy");
    fp = fopen(path, "wb");
    fclose(fp);
    CHECK_FAILS(vtr_npy_load_strings(path, &l, &err), VTR_ERR_FORMAT, "empty file");
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    path = test_path("none.npy");
    CHECK_FAILS(vtr_npy_load_strings(path, &l, &err), VTR_ERR_IO, path);
    CHECK(l.n == 0 && !l.items);
}

/* What np.save writes for str and bytes arrays. */
TEST(npy_strings_from_numpy)
{
    need_numpy();
    vtr_error err;
    const char *path = test_path("numpy-names.npy");
    CHECK_EQ_INT(test_run(PYTHON " -c 'import numpy as np; np.save(\"%s\", np.array([\"video7\", "
                                 "\"a/b\", \"\\u4e2d\\u6587\", \"x\" * 40]))'",
                          path),
                 0);
    vtr_npy_strings l;
    CHECK_OK(vtr_npy_load_strings(path, &l, &err));
    CHECK_EQ_INT(l.n, 4);
    CHECK_STR(l.items[0], "video7");
    CHECK_STR(l.items[1], "a/b");
    CHECK_STR(l.items[2], "\xe4\xb8\xad\xe6\x96\x87");
    CHECK_EQ_INT(strlen(l.items[3]), 40);
    vtr_npy_strings_free(&l);
    CHECK_EQ_INT(test_run(PYTHON " -c 'import numpy as np; np.save(\"%s\", np.array([b\"v1\", "
                                 "b\"video22\"]))'",
                          path),
                 0);
    CHECK_OK(vtr_npy_load_strings(path, &l, &err));
    CHECK_STR(l.items[1], "video22");
    vtr_npy_strings_free(&l);
    /* numbers are not strings, and strings are not numbers */
    CHECK_EQ_INT(test_run(PYTHON " -c 'import numpy as np; np.save(\"%s\", np.arange(3))'", path),
                 0);
    CHECK_FAILS(vtr_npy_load_strings(path, &l, &err), VTR_ERR_UNSUPPORTED,
                "expected a numpy string array");
}
