/* The Range header of a file request (http_range.h). */
#include "http_range.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* Reads the decimal number at *p (digits only, no sign) into *v, advancing *p; false when
 * there is none or it overflows. */
static bool read_number(const char **p, int64_t *v)
{
    const char *s = *p;
    int64_t x = 0;
    if (!isdigit((unsigned char)*s))
        return false;
    for (; isdigit((unsigned char)*s); s++) {
        if (x > (INT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (*s - '0');
    }
    *p = s;
    *v = x;
    return true;
}

vtr_http_range_kind vtr_http_range_parse(const char *header, int64_t size, int64_t *start,
                                         int64_t *length)
{
    *start = 0;
    *length = size;
    if (!header || strncmp(header, "bytes=", 6) != 0)
        return VTR_RANGE_NONE;
    const char *p = header + 6;
    while (*p == ' ')
        p++;
    int64_t a = -1, b = -1;
    if (*p == '-') { /* the last N bytes */
        p++;
        if (!read_number(&p, &b))
            return VTR_RANGE_NONE;
    } else {
        if (!read_number(&p, &a) || *p++ != '-')
            return VTR_RANGE_NONE;
        if (isdigit((unsigned char)*p) && !read_number(&p, &b))
            return VTR_RANGE_NONE;
        if (b >= 0 && b < a)
            return VTR_RANGE_NONE; /* invalid: ignored, per the RFC */
    }
    while (*p == ' ')
        p++;
    if (*p != '\0')
        return VTR_RANGE_NONE; /* several ranges, or text after the range */
    if (a < 0) { /* suffix */
        if (b == 0 || size == 0)
            return VTR_RANGE_UNSATISFIABLE;
        *start = b >= size ? 0 : size - b;
        *length = size - *start;
        return VTR_RANGE_PARTIAL;
    }
    if (a >= size)
        return VTR_RANGE_UNSATISFIABLE;
    int64_t last = b < 0 || b >= size ? size - 1 : b;
    *start = a;
    *length = last - a + 1;
    return VTR_RANGE_PARTIAL;
}
