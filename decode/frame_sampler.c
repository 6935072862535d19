#include "frame_sampler.h"

#include <ctype.h>
#include <inttypes.h>
#include <libavutil/mathematics.h>
#include <stdio.h>
#include <stdlib.h>

bool vtr_sampler_is_timed(const vtr_sampler *s)
{
    return s->mode == VTR_SAMPLE_FRAMES || s->mode == VTR_SAMPLE_FPS;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

vtr_status vtr_sampler_parse_rate(const char *text, int64_t *num, int64_t *den, vtr_error *err)
{
    const char *p = text;
    int64_t n = 0, d = 1;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        if (n > INT64_MAX / 100)
            goto bad;
        n = n * 10 + (*p++ - '0');
        digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (n > INT64_MAX / 100 || d > INT64_MAX / 100)
                goto bad;
            n = n * 10 + (*p++ - '0');
            d *= 10;
            digits++;
        }
    } else if (*p == '/' && digits) {
        p++;
        char *end;
        long long dd = strtoll(p, &end, 10);
        if (end == p || dd <= 0)
            goto bad;
        d = dd;
        p = end;
    }
    if (*p || !digits || n <= 0)
        goto bad;
    int64_t g = gcd64(n, d);
    *num = n / g;
    *den = d / g;
    return VTR_OK;
bad:
    return vtr_fail(err, VTR_ERR_INVALID, "rate '%s': expected a positive number or N/D", text);
}

void vtr_sampler_describe(const vtr_sampler *s, char *buf, size_t size)
{
    switch (s->mode) {
    case VTR_SAMPLE_FRAMES: snprintf(buf, size, "frames:%" PRId64, s->n); break;
    case VTR_SAMPLE_FPS:
        if (s->fps_den == 1)
            snprintf(buf, size, "fps:%" PRId64, s->fps_num);
        else
            snprintf(buf, size, "fps:%" PRId64 "/%" PRId64, s->fps_num, s->fps_den);
        break;
    case VTR_SAMPLE_EVERY: snprintf(buf, size, "every:%" PRId64, s->n); break;
    case VTR_SAMPLE_KEYFRAMES: snprintf(buf, size, "keyframes"); break;
    default: snprintf(buf, size, "all"); break;
    }
}

vtr_status vtr_sampler_targets(const vtr_sampler *s, int64_t start, int64_t duration, int tb_num,
                               int tb_den, int64_t max, int64_t **targets, int64_t *count,
                               vtr_error *err)
{
    *targets = NULL;
    *count = 0;
    if (!vtr_sampler_is_timed(s))
        return vtr_fail(err, VTR_ERR_INVALID, "sampler has no target times");
    if (duration < 0)
        duration = 0;
    int64_t n;
    if (s->mode == VTR_SAMPLE_FRAMES) {
        n = s->n;
    } else {
        /* k / R < duration * tb  <=>  k < duration * tb_num * R_num / (tb_den * R_den) */
        int64_t ticks_per_step_num = (int64_t)tb_den * s->fps_den; /* step = num/den ticks */
        int64_t ticks_per_step_den = (int64_t)tb_num * s->fps_num;
        if (ticks_per_step_num <= 0 || ticks_per_step_den <= 0)
            return vtr_fail(err, VTR_ERR_INVALID, "bad time base or rate");
        /* n = ceil(duration / step) = ceil(duration * den / num), at least 1 */
        n = av_rescale_rnd(duration, ticks_per_step_den, ticks_per_step_num, AV_ROUND_UP);
        if (n < 1)
            n = 1;
    }
    if (n < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "%" PRId64 " target frames: at least 1", n);
    if (n > max)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "the sampler asks for %" PRId64 " frames over the %.0f s the file "
                        "declares, more than %" PRId64,
                        n, (double)duration * tb_num / tb_den, max);
    int64_t *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %" PRId64 " targets", n);
    for (int64_t i = 0; i < n; i++) {
        if (s->mode == VTR_SAMPLE_FRAMES)
            t[i] = start + av_rescale_rnd(duration, 2 * i + 1, 2 * n, AV_ROUND_DOWN);
        else
            t[i] = start + av_rescale_rnd(i, (int64_t)tb_den * s->fps_den,
                                          (int64_t)tb_num * s->fps_num, AV_ROUND_DOWN);
    }
    *targets = t;
    *count = n;
    return VTR_OK;
}

int64_t vtr_targets_lower_bound(const int64_t *targets, int64_t count, int64_t t)
{
    int64_t lo = 0, hi = count;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (targets[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
