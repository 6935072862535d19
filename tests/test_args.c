#include "check.h"
#include "lib/args.h"

TEST(args_int_whole_string_in_range)
{
    long long v = 7;
    CHECK(vtr_parse_int("42", 1, 100, &v) == 0 && v == 42);
    CHECK(vtr_parse_int("-3", -5, 5, &v) == 0 && v == -3);
    v = 7;
    CHECK(vtr_parse_int("0", 1, 100, &v) == -1 && v == 7);
    CHECK(vtr_parse_int("101", 1, 100, &v) == -1);
    CHECK(vtr_parse_int("12x", 1, 100, &v) == -1);
    CHECK(vtr_parse_int("", 1, 100, &v) == -1);
    CHECK(vtr_parse_int("99999999999999999999", 1, 100, &v) == -1);
    CHECK(v == 7);
}

TEST(args_double_finite_only)
{
    double d = 0;
    CHECK(vtr_parse_double("0.25", &d) == 0 && d == 0.25);
    CHECK(vtr_parse_double("1e3", &d) == 0 && d == 1000);
    CHECK(vtr_parse_double("inf", &d) == -1);
    CHECK(vtr_parse_double("nan", &d) == -1);
    CHECK(vtr_parse_double("1.5s", &d) == -1);
    CHECK(d == 1000);
}

TEST(args_floats_exact_count)
{
    float f[3] = {0};
    CHECK(vtr_parse_floats("0.485,0.456,0.406", 3, f) == 0);
    CHECK(f[0] == 0.485f && f[1] == 0.456f && f[2] == 0.406f);
    CHECK(vtr_parse_floats("1,2", 3, f) == -1);
    CHECK(vtr_parse_floats("1,2,3,4", 3, f) == -1);
    CHECK(vtr_parse_floats("1,,3", 3, f) == -1);
    CHECK(vtr_parse_floats("1,2,3,", 3, f) == -1);
    CHECK(vtr_parse_floats("1,x,3", 3, f) == -1);
}

TEST(args_ints_exact_count_in_range)
{
    long long v[3] = {0};
    CHECK(vtr_parse_ints("1,40,95", 3, 0, 100, v) == 0);
    CHECK(v[0] == 1 && v[1] == 40 && v[2] == 95);
    CHECK(vtr_parse_ints("7", 1, 0, 100, v) == 0 && v[0] == 7);
    CHECK(vtr_parse_ints("1,40", 3, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,40,95,3", 3, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,,95", 3, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,40,", 2, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,-4,9", 3, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,400,9", 3, 0, 100, v) == -1);
    CHECK(vtr_parse_ints("1,4.5,9", 3, 0, 100, v) == -1);
}

TEST(args_size_width_x_height)
{
    int w = 7, h = 8;
    CHECK(vtr_parse_size("224x160", 32768, &w, &h) == 0 && w == 224 && h == 160);
    CHECK(vtr_parse_size("1x1", 1, &w, &h) == 0 && w == 1 && h == 1);
    w = 7, h = 8;
    CHECK(vtr_parse_size("224", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("224x", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("x224", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("0x224", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("224x-1", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("32769x2", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("2x2x2", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("2x2 ", 32768, &w, &h) == -1);
    CHECK(vtr_parse_size("123456789012345678x2", 32768, &w, &h) == -1);
    CHECK(w == 7 && h == 8);
}
