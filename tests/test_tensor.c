#include <errno.h>
#include <math.h>

#include "check.h"
#include "lib/tensor.h"

TEST(half_round_trips_every_value)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = vtr_half_to_float((uint16_t)h);
        if (isnan(f)) {
            CHECK(isnan(vtr_half_to_float(vtr_float_to_half(f))));
            continue;
        }
        CHECK_MSG(vtr_float_to_half(f) == h, "half 0x%04x -> %g -> 0x%04x", h, f,
                  vtr_float_to_half(f));
    }
}

TEST(half_rounds_to_nearest_even)
{
    /* between every pair of neighbouring positive finite halves a < b */
    for (uint16_t a = 0; a < 0x7bff; a++) {
        uint16_t b = a + 1;
        float fa = vtr_half_to_float(a), fb = vtr_half_to_float(b);
        float mid = (fa + fb) / 2; /* exact in float */
        uint16_t even = (a & 1) ? b : a;
        CHECK_MSG(vtr_float_to_half(mid) == even, "midpoint of 0x%04x", a);
        CHECK(vtr_float_to_half(nextafterf(mid, 0)) == a);
        CHECK(vtr_float_to_half(nextafterf(mid, INFINITY)) == b);
        CHECK(vtr_float_to_half(-mid) == (even | 0x8000));
    }
    CHECK(vtr_float_to_half(65504.0f) == 0x7bff);
    CHECK(vtr_float_to_half(65520.0f) == 0x7c00); /* rounds up to infinity */
    CHECK(vtr_float_to_half(1e10f) == 0x7c00);
    CHECK(vtr_float_to_half(-INFINITY) == 0xfc00);
    CHECK(vtr_float_to_half(1e-10f) == 0);
}

TEST(bf16_conversions)
{
    CHECK(vtr_float_to_bf16(1.0f) == 0x3f80);
    CHECK(vtr_bf16_to_float(0x3f80) == 1.0f);
    CHECK(vtr_float_to_bf16(-2.5f) == 0xc020);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0) */
    CHECK(vtr_float_to_bf16(1.0f + 1.0f / 256) == 0x3f80);
    CHECK(vtr_float_to_bf16(1.0f + 3.0f / 256) == 0x3f82);
    CHECK(isnan(vtr_bf16_to_float(vtr_float_to_bf16(NAN))));
    for (uint32_t b = 0; b < 65536; b++) {
        float f = vtr_bf16_to_float((uint16_t)b);
        if (!isnan(f))
            CHECK(vtr_float_to_bf16(f) == b);
    }
}

TEST(shape_nbytes_rejects_overflow_and_negatives)
{
    vtr_error err;
    size_t n = 0;
    int64_t ok[3] = {2, 3, 4};
    CHECK_OK(vtr_shape_nbytes(VTR_F32, 3, ok, SIZE_MAX, &n, &err));
    CHECK(n == 96);
    int64_t zero[2] = {0, (int64_t)1 << 62};
    CHECK_OK(vtr_shape_nbytes(VTR_F32, 2, zero, SIZE_MAX, &n, &err));
    CHECK(n == 0);
    int64_t huge[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
    CHECK_FAILS(vtr_shape_nbytes(VTR_F32, 2, huge, SIZE_MAX, &n, &err), VTR_ERR_FORMAT,
                "too large");
    int64_t neg[2] = {3, -1};
    CHECK_FAILS(vtr_shape_nbytes(VTR_U8, 2, neg, SIZE_MAX, &n, &err), VTR_ERR_FORMAT,
                "negative dimension -1");
    CHECK_FAILS(vtr_shape_nbytes(VTR_U8, 3, ok, 10, &n, &err), VTR_ERR_FORMAT, "too large");
    CHECK_FAILS(vtr_shape_nbytes(VTR_U8, 9, ok, 10, &n, &err), VTR_ERR_FORMAT, "9 dimensions");
}

TEST(shape_str_formats_like_numpy)
{
    char buf[64];
    int64_t s[3] = {2, 3, 4};
    CHECK_STR(vtr_shape_str(3, s, buf, sizeof buf), "(2, 3, 4)");
    CHECK_STR(vtr_shape_str(1, s, buf, sizeof buf), "(2,)");
    CHECK_STR(vtr_shape_str(0, s, buf, sizeof buf), "()");
}

TEST(error_context_prefixes_and_truncates_safely)
{
    vtr_error err;
    vtr_fail(&err, VTR_ERR_FORMAT, "bad magic");
    vtr_error_context(&err, "%s", "a.npy");
    CHECK_STR(err.msg, "a.npy: bad magic");
    CHECK(err.status == VTR_ERR_FORMAT);
    char long_prefix[2000];
    memset(long_prefix, 'x', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = '\0';
    vtr_error_context(&err, "%s", long_prefix);
    CHECK(strlen(err.msg) == VTR_ERROR_MSG_MAX - 1);
    CHECK(vtr_fail(NULL, VTR_ERR_IO, "no crash without an error value") == VTR_ERR_IO);
}

/* What a message quotes from its input stays one line of UTF-8: SQLite's message on a
 * corrupt schema quoted its bytes raw, jansson's quotes the token it choked on (found by
 * fuzz_catalog, fuzz_embedding_index and the JSON readers' fuzz targets). */
TEST(error_messages_are_one_line_of_utf8)
{
    vtr_error err;
    vtr_fail(&err, VTR_ERR_DB, "schema (it\xff\xfe) near \"a\nb\tc\x1b[1m\x7f\": "
                               "caf\xc3\xa9 \xe2\x82");
    CHECK_STR(err.msg, "schema (it\\xff\\xfe) near \"a\\x0ab\\x09c\\x1b[1m\\x7f\": "
                       "caf\xc3\xa9 \\xe2\\x82");
    vtr_error_context(&err, "in \xc0\xafx");
    CHECK_STR(err.msg, "in \\xc0\\xafx: "
                       "schema (it\\xff\\xfe) near \"a\\x0ab\\x09c\\x1b[1m\\x7f\": "
                       "caf\xc3\xa9 \\xe2\\x82");
    errno = ENOENT;
    vtr_fail_errno(&err, "open \n");
    CHECK_STR(err.msg, "open \\x0a: No such file or directory");
    /* cut before a character that does not fit, never inside one */
    char long_text[VTR_ERROR_MSG_MAX + 8];
    memset(long_text, 'x', VTR_ERROR_MSG_MAX - 2);
    memcpy(long_text + VTR_ERROR_MSG_MAX - 2, "\xc3\xa9", 3);
    vtr_fail(&err, VTR_ERR_FORMAT, "%s", long_text);
    CHECK(strlen(err.msg) == VTR_ERROR_MSG_MAX - 2);
}
