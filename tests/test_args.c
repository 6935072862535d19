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
