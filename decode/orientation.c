#include "orientation.h"

#include <libavutil/display.h>
#include <math.h>
#include <string.h>

vtr_orientation vtr_orientation_identity(void)
{
    return (vtr_orientation){0};
}

vtr_orientation vtr_orientation_from_rotation(int degrees)
{
    vtr_orientation o = {0};
    degrees = ((degrees % 360) + 360) % 360;
    o.rotation = degrees;
    switch (degrees) {
    case 90: o.transpose = true; o.flip_y = true; break;   /* transpose=clock */
    case 180: o.flip_x = o.flip_y = true; break;           /* hflip + vflip */
    case 270: o.transpose = true; o.flip_x = true; break;  /* transpose=cclock */
    default: o.rotation = 0; break;
    }
    return o;
}

vtr_orientation vtr_orientation_from_matrix(const int32_t *m)
{
    if (!m)
        return vtr_orientation_identity();
    double angle = av_display_rotation_get(m);
    if (isnan(angle))
        return vtr_orientation_identity();
    /* as fftools' get_rotation(): clockwise degrees in [0, 360), then to the nearest
     * multiple of 90 */
    double theta = -round(angle);
    theta -= 360 * floor(theta / 360 + 0.9 / 360);
    int quarter = (int)lround(theta / 90) % 4;
    vtr_orientation o = vtr_orientation_from_rotation(quarter * 90);
    /* mirror images, following FFmpeg 6.1's autorotate */
    switch (quarter) {
    case 1:
        if (m[3] > 0) { /* transpose=cclock_flip: a plain transpose */
            o.flip_y = false;
            o.mirrored = true;
        }
        break;
    case 2:
        o.flip_x = m[0] < 0;
        o.flip_y = m[4] < 0;
        o.mirrored = o.flip_x != o.flip_y;
        break;
    case 3:
        if (m[3] < 0) { /* transpose=clock_flip */
            o.flip_y = true;
            o.mirrored = true;
        }
        break;
    default:
        if (m[4] < 0) { /* vflip */
            o.flip_y = true;
            o.mirrored = true;
        }
        break;
    }
    return o;
}

vtr_orientation vtr_orientation_from_exif(int value)
{
    /* FFmpeg 5.1's mjpegdec.c: the matrix's rotation (counterclockwise degrees) and
     * whether it is mirrored left to right */
    static const struct {
        double degrees;
        bool flip;
    } exif[9] = {[2] = {0, true},   [3] = {180, false}, [4] = {180, true}, [5] = {90, true},
                 [6] = {90, false}, [7] = {-90, true},  [8] = {-90, false}};
    if (value < 2 || value > 8)
        return vtr_orientation_identity();
    int32_t m[9];
    av_display_rotation_set(m, exif[value].degrees);
    if (exif[value].flip)
        av_display_matrix_flip(m, 1, 0);
    return vtr_orientation_from_matrix(m);
}

void vtr_orientation_display_size(const vtr_orientation *o, int w, int h, int *dw, int *dh)
{
    *dw = o->transpose ? h : w;
    *dh = o->transpose ? w : h;
}

void vtr_orientation_copy_rgb(const vtr_orientation *o, const uint8_t *src, int sw, int sh,
                              size_t src_stride, int x0, int y0, int ow, int oh, uint8_t *dst)
{
    if (!o->transpose && !o->flip_x && !o->flip_y) {
        for (int y = 0; y < oh; y++)
            memcpy(dst + (size_t)y * ow * 3, src + (size_t)(y0 + y) * src_stride + (size_t)x0 * 3,
                   (size_t)ow * 3);
        return;
    }
    for (int y = 0; y < oh; y++) {
        uint8_t *out = dst + (size_t)y * ow * 3;
        for (int x = 0; x < ow; x++) {
            int u = o->transpose ? y0 + y : x0 + x;
            int v = o->transpose ? x0 + x : y0 + y;
            int sx = o->flip_x ? sw - 1 - u : u;
            int sy = o->flip_y ? sh - 1 - v : v;
            const uint8_t *p = src + (size_t)sy * src_stride + (size_t)sx * 3;
            out[3 * x] = p[0];
            out[3 * x + 1] = p[1];
            out[3 * x + 2] = p[2];
        }
    }
}
