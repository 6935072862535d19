/* HDR video made SDR (decode/hdr_tone.h): parity with a numpy reference written from the
 * standards (tests/fixtures/hdr/, made by make_hdr_fixtures.sh: an SDR picture turned into
 * PQ and HLG by zimg, and what each must give), the highlight roll-off, and the signal a
 * frame's tags and side data describe. */
#include <libavutil/frame.h>
#include <libavutil/mastering_display_metadata.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/decode_item.h"
#include "decode/hdr_tone.h"
#include "lib/npy.h"
#include "test_decode_fixtures.h"

#define FIXTURES "tests/fixtures/hdr/"

/* The 64 x 96 RGB picture of an NPY fixture. */
static const uint8_t *picture(vtr_npy_file *f, const char *name)
{
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_npy_load(name, f, &err));
    CHECK(f->tensor.dtype == VTR_U8 && f->tensor.ndim == 3 && f->tensor.shape[0] == 64 &&
          f->tensor.shape[1] == 96 && f->tensor.shape[2] == 3);
    return f->tensor.data;
}

/* Mean and largest |a - b| over n bytes. */
static double mean_difference(const uint8_t *a, const uint8_t *b, size_t n, int *largest)
{
    double sum = 0;
    *largest = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        sum += d;
        *largest = d > *largest ? d : *largest;
    }
    return sum / (double)n;
}

TEST(decode_hdr_video_made_sdr)
{
    static const struct {
        const char *kind;
        double from_sdr; /* mean |difference| to the SDR picture zimg started from */
    } cases[] = {
        /* only the brightest parts, over the roll-off's knee, a few levels darker */
        {"pq", 3.0},
        /* also more saturated where zimg (Debian 12's) inverted HLG's OOTF channel by
         * channel rather than on the luminance, as BT.2100 does */
        {"hlg", 25.0},
    };
    fixture_quiet();
    vtr_npy_file sdr_file, expected_file;
    const uint8_t *sdr = picture(&sdr_file, FIXTURES "sdr.npy");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[64], expected_path[64];
        snprintf(path, sizeof path, FIXTURES "%s.mp4", cases[c].kind);
        snprintf(expected_path, sizeof expected_path, FIXTURES "expected_%s.npy", cases[c].kind);
        const uint8_t *expected = picture(&expected_file, expected_path);
        vtr_sampler all = {.mode = VTR_SAMPLE_ALL};
        vtr_decoded_item it;
        fixture_decode(path, &all, false, NULL, &it);
        CHECK_STR(json_string_value(json_object_get(it.meta, "hdr")), cases[c].kind);
        CHECK_EQ_INT(it.frames.shape[1], 64);
        CHECK_EQ_INT(it.frames.shape[2], 96);
        int largest;
        double mean = mean_difference(fixture_frame(&it, 0), expected, 64 * 96 * 3, &largest);
        CHECK_MSG(largest <= 1 && mean < 0.01,
                  "%s: mean |difference| %.3f, largest %d to the "
                  "reference",
                  cases[c].kind, mean, largest);
        mean = mean_difference(fixture_frame(&it, 0), sdr, 64 * 96 * 3, &largest);
        CHECK_MSG(mean < cases[c].from_sdr, "%s: mean |difference| %.2f to the SDR picture",
                  cases[c].kind, mean);
        vtr_decoded_item_free(&it);
        vtr_npy_close(&expected_file);
    }
    vtr_npy_close(&sdr_file);
}

TEST(decode_hdr_rolloff)
{
    const float peak = 1000.0f / 203.0f;
    /* below the knee: untouched; the peak onto 1; brighter than the peak: 1 */
    CHECK(vtr_hdr_rolloff(0.5f, peak) == 0.5f);
    CHECK(vtr_hdr_rolloff(0.9f, peak) == 0.9f);
    CHECK(fabsf(vtr_hdr_rolloff(peak, peak) - 1.0f) < 1e-6f);
    CHECK(vtr_hdr_rolloff(2 * peak, peak) == 1.0f);
    /* increasing, below 1, and continuous in value and slope at the knee */
    float prev = 0.9f;
    for (float x = 0.9001f; x < peak; x += 0.001f) {
        float y = vtr_hdr_rolloff(x, peak);
        CHECK_MSG(y > prev && y < 1.0f, "%.4f -> %.6f after %.6f", x, y, prev);
        prev = y;
    }
    float h = 1e-3f;
    CHECK(fabsf((vtr_hdr_rolloff(0.9f + h, peak) - 0.9f) / h - 1) < 0.02f);
    /* content no brighter than reference white: clipped at 1 only */
    CHECK(vtr_hdr_rolloff(0.95f, 0.8f) == 0.95f);
    CHECK(vtr_hdr_rolloff(1.2f, 0.8f) == 1.0f);
}

TEST(decode_hdr_signal_from_tags_and_side_data)
{
    AVFrame *f = av_frame_alloc();
    CHECK(f);
    f->format = AV_PIX_FMT_YUV420P10;
    f->color_trc = AVCOL_TRC_SMPTE2084;
    f->color_primaries = AVCOL_PRI_BT2020;
    f->colorspace = AVCOL_SPC_BT2020_NCL;
    vtr_hdr_signal s;
    vtr_hdr_signal_of(f, &s);
    CHECK(s.kind == VTR_HDR_PQ && s.bt2020 && !s.full_range && s.depth == 10);
    CHECK(s.peak_nits == 1000.0 && fabsf(s.kr - 0.2627f) < 1e-6f);
    /* the mastering display's peak, then MaxCLL before it */
    AVMasteringDisplayMetadata *m = av_mastering_display_metadata_create_side_data(f);
    CHECK(m);
    m->has_luminance = 1;
    m->max_luminance = av_make_q(4000, 1);
    vtr_hdr_signal_of(f, &s);
    CHECK(s.peak_nits == 4000.0);
    AVContentLightMetadata *cll = av_content_light_metadata_create_side_data(f);
    CHECK(cll);
    cll->MaxCLL = 1500;
    vtr_hdr_signal_of(f, &s);
    CHECK(s.peak_nits == 1500.0);
    /* HLG's peak is its OOTF's display, whatever the side data */
    f->color_trc = AVCOL_TRC_ARIB_STD_B67;
    f->color_primaries = AVCOL_PRI_BT709;
    f->colorspace = AVCOL_SPC_BT709;
    f->color_range = AVCOL_RANGE_JPEG;
    f->format = AV_PIX_FMT_YUV420P12;
    vtr_hdr_signal_of(f, &s);
    CHECK(s.kind == VTR_HDR_HLG && s.peak_nits == 1000.0 && !s.bt2020 && s.full_range &&
          s.depth == 12 && fabsf(s.kr - 0.2126f) < 1e-6f);
    CHECK(vtr_hdr_kind_of(AVCOL_TRC_BT709) == VTR_HDR_NONE && !vtr_hdr_name(VTR_HDR_NONE));
    av_frame_free(&f);
}
