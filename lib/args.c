#include "lib/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

int vtr_parse_ints(const char *s, int n, long long lo, long long hi, long long *out)
{
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || v < lo || v > hi || *end != (i + 1 < n ? ',' : '\0'))
            return -1;
        out[i] = v;
        s = end + 1;
    }
    return 0;
}

int vtr_parse_size(const char *s, int max, int *width, int *height)
{
    const char *x = strchr(s, 'x');
    char w[16];
    long long v[2];
    if (!x || (size_t)(x - s) >= sizeof w)
        return -1;
    memcpy(w, s, (size_t)(x - s));
    w[x - s] = '\0';
    if (vtr_parse_int(w, 1, max, &v[0]) || vtr_parse_int(x + 1, 1, max, &v[1]))
        return -1;
    *width = (int)v[0];
    *height = (int)v[1];
    return 0;
}
