/* The Range header of vtr-serve's media requests (index/http_range.h): every form the
 * RFC gives, clamping, suffixes, and the headers that must be ignored or refused. */
#include "check.h"
#include "index/http_range.h"

/* kind, start and length of header against a file of size bytes */
static void expect(const char *header, int64_t size, vtr_http_range_kind kind, int64_t start,
                   int64_t length)
{
    int64_t s = -1, n = -1;
    vtr_http_range_kind k = vtr_http_range_parse(header, size, &s, &n);
    CHECK_MSG(k == kind, "'%s' of %lld bytes: kind %d, not %d", header ? header : "(none)",
              (long long)size, (int)k, (int)kind);
    if (k == VTR_RANGE_PARTIAL)
        CHECK_MSG(s == start && n == length, "'%s' of %lld bytes: %lld+%lld, not %lld+%lld",
                  header, (long long)size, (long long)s, (long long)n, (long long)start,
                  (long long)length);
    if (k == VTR_RANGE_NONE)
        CHECK(s == 0 && n == size);
}

TEST(http_range_forms)
{
    expect(NULL, 100, VTR_RANGE_NONE, 0, 100);
    expect("bytes=0-9", 100, VTR_RANGE_PARTIAL, 0, 10);
    expect("bytes=10-19", 100, VTR_RANGE_PARTIAL, 10, 10);
    expect("bytes=99-99", 100, VTR_RANGE_PARTIAL, 99, 1);
    expect("bytes=50-", 100, VTR_RANGE_PARTIAL, 50, 50);
    expect("bytes=0-", 100, VTR_RANGE_PARTIAL, 0, 100); /* what browsers send first */
    expect("bytes=90-1000", 100, VTR_RANGE_PARTIAL, 90, 10); /* clamped to the end */
    expect("bytes=-10", 100, VTR_RANGE_PARTIAL, 90, 10);
    expect("bytes=-100", 100, VTR_RANGE_PARTIAL, 0, 100);
    expect("bytes=-500", 100, VTR_RANGE_PARTIAL, 0, 100);
    expect("bytes= 5-6 ", 100, VTR_RANGE_PARTIAL, 5, 2);
}

TEST(http_range_unsatisfiable)
{
    expect("bytes=100-", 100, VTR_RANGE_UNSATISFIABLE, 0, 0);
    expect("bytes=100-200", 100, VTR_RANGE_UNSATISFIABLE, 0, 0);
    expect("bytes=-0", 100, VTR_RANGE_UNSATISFIABLE, 0, 0);
    expect("bytes=0-0", 0, VTR_RANGE_UNSATISFIABLE, 0, 0);
    expect("bytes=-5", 0, VTR_RANGE_UNSATISFIABLE, 0, 0);
}

TEST(http_range_ignored_headers)
{
    /* not bytes, several ranges, reversed, junk, signs, overflow: the whole file */
    const char *ignored[] = {"items=0-9", "bytes=0-9,20-29", "bytes=9-0", "bytes=a-b",
                             "bytes=", "bytes=-", "bytes=1-2x", "bytes=+1-2", "bytes=--3",
                             "bytes=99999999999999999999-", "bytes=0-99999999999999999999",
                             "Bytes=0-9", ""};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        expect(ignored[i], 100, VTR_RANGE_NONE, 0, 100);
}
