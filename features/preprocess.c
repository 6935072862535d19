/* torchvision's eval transform on uint8 frames, resampling as Pillow does
 * (features/preprocess.h; Pillow's src/libImaging/Resample.c). */
#include "preprocess.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 65536
#define PRECISION_BITS (32 - 8 - 2) /* Pillow's fixed-point weights */

void vtr_preprocess_defaults(vtr_preprocess_options *opt)
{
    *opt = (vtr_preprocess_options){
        .resize = 256,
        .crop = 224,
        .mean = {0.485f, 0.456f, 0.406f},
        .std = {0.229f, 0.224f, 0.225f},
    };
}

void vtr_preprocess_unset(vtr_preprocess_options *opt)
{
    *opt = (vtr_preprocess_options){
        .resize = -1,
        .crop = -1,
        .mean = {NAN, NAN, NAN},
        .std = {NAN, NAN, NAN},
    };
}

void vtr_preprocess_fill(vtr_preprocess_options *opt, const vtr_preprocess_options *defaults)
{
    if (opt->resize < 0)
        opt->resize = defaults->resize;
    if (opt->crop < 0)
        opt->crop = defaults->crop;
    for (int c = 0; c < 3; c++) {
        if (isnan(opt->mean[c]))
            opt->mean[c] = defaults->mean[c];
        if (isnan(opt->std[c]))
            opt->std[c] = defaults->std[c];
    }
}

vtr_status vtr_preprocess_check(const vtr_preprocess_options *opt, vtr_error *err)
{
    if (opt->resize < 0 || opt->resize > MAX_SIDE)
        return vtr_fail(err, VTR_ERR_INVALID, "preprocess: resize %d is not in 0..%d",
                        opt->resize, MAX_SIDE);
    if (opt->crop < 0 || opt->crop > MAX_SIDE)
        return vtr_fail(err, VTR_ERR_INVALID, "preprocess: crop %d is not in 0..%d", opt->crop,
                        MAX_SIDE);
    for (int c = 0; c < 3; c++) {
        if (!isfinite(opt->mean[c]))
            return vtr_fail(err, VTR_ERR_INVALID, "preprocess: mean[%d] is not finite", c);
        if (!isfinite(opt->std[c]) || !(opt->std[c] > 0))
            return vtr_fail(err, VTR_ERR_INVALID, "preprocess: std[%d] = %g is not positive",
                            c, opt->std[c]);
    }
    return VTR_OK;
}

/* Size after Resize: torchvision's _compute_resized_output_size; 0 x 0 when too large. */
static void resized_size(const vtr_preprocess_options *opt, int h, int w, int *rh, int *rw)
{
    *rh = h;
    *rw = w;
    if (opt->resize <= 0 || h < 1 || w < 1)
        return;
    int shorter = h < w ? h : w, longer = h < w ? w : h;
    /* int(requested * long / short): an exact integer product, then a true division */
    double l = (double)((long long)opt->resize * longer) / shorter;
    if (l > MAX_SIDE) {
        *rh = *rw = 0;
        return;
    }
    int new_long = (int)l;
    if (w <= h) {
        *rw = opt->resize;
        *rh = new_long;
    } else {
        *rh = opt->resize;
        *rw = new_long;
    }
}

static bool prepared(const vtr_preprocess_options *opt, int h, int w)
{
    return opt->crop > 0 && h == opt->crop && w == opt->crop;
}

void vtr_preprocess_size(const vtr_preprocess_options *opt, int h, int w, int *oh, int *ow)
{
    if (h < 1 || w < 1) {
        *oh = *ow = 0;
        return;
    }
    if (prepared(opt, h, w)) {
        *oh = h;
        *ow = w;
        return;
    }
    resized_size(opt, h, w, oh, ow);
    if (*oh > 0 && opt->crop > 0)
        *oh = *ow = opt->crop;
}

/* Python's round(n / 2) for n >= 0: halves to even */
static int half_round_even(int n)
{
    int k = n / 2;
    return n % 2 && k % 2 ? k + 1 : k;
}

/* Where the crop window starts in resized coordinates (may be negative: zero padding),
 * torchvision's center_crop along one axis of length `side`. */
static int crop_start(int side, int crop)
{
    int pad_before = crop > side ? (crop - side) / 2 : 0;
    int pad_after = crop > side ? (crop - side + 1) / 2 : 0;
    int padded = side + pad_before + pad_after;
    return half_round_even(padded - crop) - pad_before;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for BILINEAR over a whole axis:
 * output cell i reads input cells bounds[2i] .. bounds[2i] + bounds[2i+1] - 1 with the
 * fixed-point weights k[i*ksize ..]. */
typedef struct axis_coeffs {
    int ksize;
    int *bounds;
    int32_t *k;
} axis_coeffs;

static double bilinear_filter(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static bool axis_coeffs_make(int in_size, int out_size, axis_coeffs *c)
{
    double scale = (double)((float)in_size - 0.0f) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    c->ksize = ksize;
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * ksize * sizeof *c->k);
    double *kk = malloc((size_t)ksize * sizeof *kk);
    if (!c->bounds || !c->k || !kk) {
        free(kk);
        return false;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = 0.0 + (xx + 0.5) * scale;
        double ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        int x = 0;
        for (; x < xmax; x++) {
            double wgt = bilinear_filter((x + xmin - center + 0.5) * ss);
            kk[x] = wgt;
            ww += wgt;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0)
                kk[x] /= ww;
        for (; x < ksize; x++)
            kk[x] = 0;
        int32_t *k = c->k + (size_t)xx * ksize;
        for (x = 0; x < ksize; x++)
            k[x] = kk[x] < 0 ? (int32_t)(-0.5 + kk[x] * (1 << PRECISION_BITS))
                             : (int32_t)(0.5 + kk[x] * (1 << PRECISION_BITS));
        c->bounds[2 * xx] = xmin;
        c->bounds[2 * xx + 1] = xmax;
    }
    free(kk);
    return true;
}

static void axis_coeffs_free(axis_coeffs *c)
{
    free(c->bounds);
    free(c->k);
}

static inline uint8_t clip8(int32_t ss)
{
    int32_t v = ss >> PRECISION_BITS; /* arithmetic shift, as Pillow's table lookup */
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

vtr_status vtr_preprocess_geometry(const uint8_t *frame, int h, int w,
                                   const vtr_preprocess_options *opt, uint8_t *out,
                                   vtr_error *err)
{
    vtr_status st = VTR_OK;
    int oh, ow, rh, rw;
    if (h < 1 || w < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "preprocess: empty frame (%dx%d)", w, h);
    vtr_preprocess_size(opt, h, w, &oh, &ow);
    if (oh < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "preprocess: resizing a %dx%d frame to a shorter "
                        "side of %d makes it too large", w, h, opt->resize);
    if (prepared(opt, h, w)) {
        memcpy(out, frame, (size_t)h * w * 3);
        return VTR_OK;
    }
    resized_size(opt, h, w, &rh, &rw);
    /* the window of the resized picture that the crop keeps: rows y0.., columns x0.. */
    int y0 = opt->crop > 0 ? crop_start(rh, opt->crop) : 0;
    int x0 = opt->crop > 0 ? crop_start(rw, opt->crop) : 0;
    /* the part of that window inside the resized picture: [ya, yb) x [xa, xb) */
    int ya = y0 < 0 ? 0 : y0, yb = y0 + oh > rh ? rh : y0 + oh;
    int xa = x0 < 0 ? 0 : x0, xb = x0 + ow > rw ? rw : x0 + ow;
    bool horizontal = rw != w, vertical = rh != h;
    axis_coeffs hc = {0}, vc = {0};
    uint8_t *tmp = NULL;
    memset(out, 0, (size_t)oh * ow * 3);
    if (ya >= yb || xa >= xb)
        return VTR_OK; /* all padding */
    if ((horizontal && !axis_coeffs_make(w, rw, &hc)) ||
        (vertical && !axis_coeffs_make(h, rh, &vc))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    /* input rows that the vertical pass reads: [r0, r1) */
    int r0 = ya, r1 = yb;
    if (vertical) {
        r0 = vc.bounds[2 * ya];
        r1 = vc.bounds[2 * (yb - 1)] + vc.bounds[2 * (yb - 1) + 1];
    }
    /* horizontal pass: rows r0..r1 of the frame, columns xa..xb of the result */
    const uint8_t *rows = frame; /* row r of the horizontal result at rows + (r - base) */
    size_t row_stride = (size_t)w * 3;
    int base = 0, col0 = 0;
    if (horizontal) {
        size_t tw = (size_t)(xb - xa);
        if (!(tmp = malloc((size_t)(r1 - r0) * tw * 3))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        for (int y = r0; y < r1; y++) {
            const uint8_t *src = frame + (size_t)y * w * 3;
            uint8_t *dst = tmp + (size_t)(y - r0) * tw * 3;
            for (int xx = xa; xx < xb; xx++) {
                int xmin = hc.bounds[2 * xx], n = hc.bounds[2 * xx + 1];
                const int32_t *k = hc.k + (size_t)xx * hc.ksize;
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int x = 0; x < n; x++) {
                    const uint8_t *p = src + (size_t)(xmin + x) * 3;
                    s0 += p[0] * k[x];
                    s1 += p[1] * k[x];
                    s2 += p[2] * k[x];
                }
                uint8_t *q = dst + (size_t)(xx - xa) * 3;
                q[0] = clip8(s0);
                q[1] = clip8(s1);
                q[2] = clip8(s2);
            }
        }
        rows = tmp;
        row_stride = tw * 3;
        base = r0;
        col0 = xa;
    }
    /* vertical pass (or a copy) into the window */
    for (int yy = ya; yy < yb; yy++) {
        uint8_t *dst = out + ((size_t)(yy - y0) * ow + (size_t)(xa - x0)) * 3;
        if (!vertical) {
            memcpy(dst, rows + (size_t)(yy - base) * row_stride + (size_t)(xa - col0) * 3,
                   (size_t)(xb - xa) * 3);
            continue;
        }
        int ymin = vc.bounds[2 * yy], n = vc.bounds[2 * yy + 1];
        const int32_t *k = vc.k + (size_t)yy * vc.ksize;
        for (int xx = xa; xx < xb; xx++) {
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            const uint8_t *col = rows + (size_t)(xx - col0) * 3;
            for (int y = 0; y < n; y++) {
                const uint8_t *p = col + (size_t)(ymin + y - base) * row_stride;
                s0 += p[0] * k[y];
                s1 += p[1] * k[y];
                s2 += p[2] * k[y];
            }
            uint8_t *q = dst + (size_t)(xx - xa) * 3;
            q[0] = clip8(s0);
            q[1] = clip8(s1);
            q[2] = clip8(s2);
        }
    }
end:
    axis_coeffs_free(&hc);
    axis_coeffs_free(&vc);
    free(tmp);
    return st;
}

void vtr_preprocess_normalize(const uint8_t *img, int h, int w, const float mean[3],
                              const float std[3], float *out)
{
    size_t n = (size_t)h * w;
    for (int c = 0; c < 3; c++) {
        float m = mean[c], s = std[c];
        float *o = out + (size_t)c * n;
        for (size_t i = 0; i < n; i++)
            o[i] = ((float)img[3 * i + c] / 255.0f - m) / s;
    }
}

vtr_status vtr_preprocess_frame(const uint8_t *frame, int h, int w,
                                const vtr_preprocess_options *opt, float *out, vtr_error *err)
{
    int oh, ow;
    vtr_preprocess_size(opt, h, w, &oh, &ow);
    if (prepared(opt, h, w)) {
        vtr_preprocess_normalize(frame, h, w, opt->mean, opt->std, out);
        return VTR_OK;
    }
    if (oh < 1)
        return vtr_preprocess_geometry(frame, h, w, opt, NULL, err); /* its error */
    uint8_t *img = malloc((size_t)oh * ow * 3);
    if (!img)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = vtr_preprocess_geometry(frame, h, w, opt, img, err);
    if (st == VTR_OK)
        vtr_preprocess_normalize(img, oh, ow, opt->mean, opt->std, out);
    free(img);
    return st;
}
