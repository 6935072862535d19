#include "lib/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int vtr_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int vtr_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int vtr_parse_floats(const char *s, int n, float *out)
{
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        float v = strtof(s, &end);
        if (errno || end == s || !isfinite(v) || *end != (i + 1 < n ? ',' : '\0'))
            return -1;
        out[i] = v;
        s = end + 1;
    }
    return 0;
}
