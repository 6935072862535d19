/* HDR video to SDR pictures (hdr_tone.h). */
#include "hdr_tone.h"

#include <libavutil/mastering_display_metadata.h>
#include <libavutil/pixdesc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REFERENCE_WHITE 203.0 /* cd/m², BT.2408's HDR reference white */
#define HLG_PEAK 1000.0       /* cd/m², the display HLG's OOTF is for */
#define KNEE 0.9f
/* the output table's steps over the square root of linear light [0, 1]: fine enough near
 * black, where the curve is steep */
#define OUT_STEPS 16384

struct vtr_hdr_tone {
    vtr_hdr_signal s;
    float peak;                 /* in units of reference white */
    float y_scale, y_offset;    /* a 16-bit Y sample -> Y' in [0, 1] */
    float c_scale, c_offset;    /* a 16-bit Cb or Cr sample -> [-0.5, 0.5] */
    float signal[65536];        /* R'G'B' [0, 1] in 65535 steps -> PQ: display light;
                                   HLG: scene light */
    uint8_t out[OUT_STEPS + 1]; /* sqrt(linear SDR light) -> 8-bit BT.709 signal */
};

vtr_hdr_kind vtr_hdr_kind_of(enum AVColorTransferCharacteristic trc)
{
    return trc == AVCOL_TRC_SMPTE2084      ? VTR_HDR_PQ
           : trc == AVCOL_TRC_ARIB_STD_B67 ? VTR_HDR_HLG
                                           : VTR_HDR_NONE;
}

const char *vtr_hdr_name(vtr_hdr_kind kind)
{
    return kind == VTR_HDR_PQ ? "pq" : kind == VTR_HDR_HLG ? "hlg" : NULL;
}

/* PQ's peak from the frame's side data (hdr_tone.h), cd/m². */
static double peak_nits(const AVFrame *frame)
{
    const AVFrameSideData *sd = av_frame_get_side_data(frame, AV_FRAME_DATA_CONTENT_LIGHT_LEVEL);
    if (sd && sd->size >= sizeof(AVContentLightMetadata)) {
        const AVContentLightMetadata *cll = (const AVContentLightMetadata *)sd->data;
        if (cll->MaxCLL > 0)
            return cll->MaxCLL;
    }
    sd = av_frame_get_side_data(frame, AV_FRAME_DATA_MASTERING_DISPLAY_METADATA);
    if (sd && sd->size >= sizeof(AVMasteringDisplayMetadata)) {
        const AVMasteringDisplayMetadata *m = (const AVMasteringDisplayMetadata *)sd->data;
        if (m->has_luminance && m->max_luminance.num > 0 && m->max_luminance.den > 0)
            return av_q2d(m->max_luminance);
    }
    return 1000.0;
}

void vtr_hdr_signal_of(const AVFrame *frame, vtr_hdr_signal *s)
{
    memset(s, 0, sizeof *s);
    s->kind = vtr_hdr_kind_of(frame->color_trc);
    s->peak_nits = s->kind == VTR_HDR_HLG ? HLG_PEAK : peak_nits(frame);
    s->bt2020 = frame->color_primaries != AVCOL_PRI_BT709;
    bool bt709 = frame->colorspace == AVCOL_SPC_BT709;
    s->kr = bt709 ? 0.2126f : 0.2627f;
    s->kb = bt709 ? 0.0722f : 0.0593f;
    s->full_range = frame->color_range == AVCOL_RANGE_JPEG;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)frame->format);
    s->depth = d ? d->comp[0].depth : 10;
}

/* BT.2100 PQ: signal [0, 1] -> display light, cd/m² */
static double pq_eotf(double e)
{
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096,
                 c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32;
    double p = pow(e, 1 / m2);
    double num = p - c1 > 0 ? p - c1 : 0;
    return 10000 * pow(num / (c2 - c3 * p), 1 / m1);
}

/* BT.2100 HLG: signal [0, 1] -> scene light [0, 1] */
static double hlg_inverse_oetf(double e)
{
    const double a = 0.17883277, b = 1 - 4 * a, c = 0.5 - a * log(4 * a);
    return e <= 0.5 ? e * e / 3 : (exp((e - c) / a) + b) / 12;
}

vtr_hdr_tone *vtr_hdr_tone_new(const vtr_hdr_signal *s)
{
    vtr_hdr_tone *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    t->s = *s;
    t->peak = (float)(s->peak_nits / REFERENCE_WHITE);
    /* BT.2100: limited range puts black at 16 and white at 235 (chroma 16..240) times
     * 2^(depth - 8); full range spans 0 .. 2^depth - 1; a sample shifted to 16 bits is
     * 2^(16 - depth) times the source's */
    int depth = s->depth >= 8 && s->depth <= 16 ? s->depth : 8;
    double unit = 65536.0 / (1 << depth);
    double steps = s->full_range ? ((1 << depth) - 1) * unit : 219 * 256.0;
    t->y_scale = (float)(1 / steps);
    t->y_offset = s->full_range ? 0.0f : (float)(-16 * 256.0 / steps);
    double c_steps = s->full_range ? steps : 224 * 256.0;
    t->c_scale = (float)(1 / c_steps);
    t->c_offset = (float)(-32768.0 / c_steps);
    for (int i = 0; i < 65536; i++) {
        double e = i / 65535.0;
        t->signal[i] =
            (float)(s->kind == VTR_HDR_PQ ? pq_eotf(e) / REFERENCE_WHITE : hlg_inverse_oetf(e));
    }
    for (int i = 0; i <= OUT_STEPS; i++)
        t->out[i] = (uint8_t)lrint(255 * pow((double)i / OUT_STEPS, 2 / 2.4));
    return t;
}

void vtr_hdr_tone_free(vtr_hdr_tone *t)
{
    free(t);
}

float vtr_hdr_rolloff(float x, float peak)
{
    if (x <= KNEE)
        return x;
    if (peak <= 1.0f || x >= peak)
        return x < 1.0f ? x : 1.0f;
    /* t in [0, tp]: k + (1 - k) t (1 + t / tp^2) / (1 + t), slope 1 at t = 0, 1 at tp */
    float t = (x - KNEE) / (1 - KNEE), tp = (peak - KNEE) / (1 - KNEE);
    return KNEE + (1 - KNEE) * t * (1 + t / (tp * tp)) / (1 + t);
}

/* Linear BT.2020 RGB to linear BT.709 RGB (BT.2087), from the two sets of primaries and
 * D65 */
static const float to_709[3][3] = {
    {1.660491f, -0.5876411f, -0.0728499f},
    {-0.1245505f, 1.1328999f, -0.0083494f},
    {-0.0181508f, -0.1005789f, 1.1187297f},
};

/* The table entry of an R'G'B' value, clamped to [0, 1]. */
static int step(float v)
{
    return v <= 0 ? 0 : v >= 1 ? 65535 : (int)(v * 65535 + 0.5f);
}

void vtr_hdr_tone_map(const vtr_hdr_tone *t, const uint8_t *const planes[3], const int strides[3],
                      int w, int h, uint8_t *out, size_t out_stride)
{
    const vtr_hdr_signal *s = &t->s;
    const float kr = s->kr, kb = s->kb, kg = 1 - kr - kb;
    const float hlg_gain = (float)(HLG_PEAK / REFERENCE_WHITE);
    /* the luminance HLG's OOTF weighs scene light by: of the primaries */
    const float lr = s->bt2020 ? 0.2627f : 0.2126f, lb = s->bt2020 ? 0.0593f : 0.0722f;
    const float lg = 1 - lr - lb;
    for (int y = 0; y < h; y++) {
        const uint16_t *py = (const uint16_t *)(planes[0] + (size_t)y * strides[0]);
        const uint16_t *pu = (const uint16_t *)(planes[1] + (size_t)y * strides[1]);
        const uint16_t *pv = (const uint16_t *)(planes[2] + (size_t)y * strides[2]);
        uint8_t *dst = out + (size_t)y * out_stride;
        for (int x = 0; x < w; x++) {
            float luma = py[x] * t->y_scale + t->y_offset;
            float cb = pu[x] * t->c_scale + t->c_offset, cr = pv[x] * t->c_scale + t->c_offset;
            float r = luma + 2 * (1 - kr) * cr, b = luma + 2 * (1 - kb) * cb;
            float g = (luma - kr * r - kb * b) / kg;
            float c[3] = {t->signal[step(r)], t->signal[step(g)], t->signal[step(b)]};
            if (s->kind == VTR_HDR_HLG) { /* OOTF: Lw Ys^(gamma - 1) E, gamma 1.2 */
                float ys = lr * c[0] + lg * c[1] + lb * c[2];
                float gain = ys > 0 ? hlg_gain * powf(ys, 0.2f) : 0;
                for (int k = 0; k < 3; k++)
                    c[k] *= gain;
            }
            float v[3], m = 0;
            for (int k = 0; k < 3; k++) {
                v[k] = s->bt2020 ? to_709[k][0] * c[0] + to_709[k][1] * c[1] + to_709[k][2] * c[2]
                                 : c[k];
                v[k] = v[k] > 0 ? v[k] : 0;
                m = v[k] > m ? v[k] : m;
            }
            float scale = m > KNEE ? vtr_hdr_rolloff(m, t->peak) / m : 1.0f;
            for (int k = 0; k < 3; k++) {
                float o = v[k] * scale;
                dst[3 * x + k] = t->out[(int)(sqrtf(o < 1 ? o : 1) * OUT_STEPS + 0.5f)];
            }
        }
    }
}
