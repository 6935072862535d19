/* HDR video to SDR pictures: what a phone's HDR clip (HLG, BT.2020) or an HDR10 film (PQ)
 * should look like to a model trained on SDR frames.
 *
 * Decoded with the SDR path, an HDR frame's R'G'B' signal is read as if it were BT.709:
 * darker and paler than the picture it shows (mean |difference| 15 levels for HLG and 28
 * for PQ on a photo converted to HDR with zimg). Here, from the frame's YUV scaled to
 * 4:4:4 at 16 bits by libswscale:
 *   0. to R'G'B' by BT.2100's formulas for the frame's matrix, range and bit depth, in
 *      float (libswscale's own YUV to 16-bit RGB comes out 0.4% dark for limited range,
 *      which PQ turns into 2.5% of light);
 *   1. to display light, in units of HDR reference white (203 cd/m², BT.2408): PQ's EOTF
 *      (BT.2100) / 203; HLG's inverse OETF, then its OOTF for a 1000 cd/m² display
 *      (gamma 1.2 on the BT.2020 luminance), / 203;
 *   2. BT.2020 primaries to BT.709 in linear light (BT.2087's matrix), negatives (colours
 *      outside BT.709) clipped to 0;
 *   3. highlights over reference white rolled off to fit SDR: the largest of R, G and B
 *      is kept below a knee of 0.9 and mapped from [0.9, peak] onto [0.9, 1] above it
 *      (extended Reinhard, continuous in value and slope at the knee, peak to 1), the
 *      three scaled alike (hue kept); peak: the content's MaxCLL when the stream gives
 *      it, else the mastering display's, else 1000 cd/m² (HLG's: always 1000);
 *   4. to BT.709 R'G'B' by the inverse of BT.1886's display gamma 2.4 (SDR reference
 *      white at 1), 8 bits.
 * A picture that zimg (FFmpeg's zscale) turned from SDR into PQ comes back as it was but
 * for its brightest parts (over the knee, a few levels darker); from HLG, strong colours
 * also come back more saturated (mean |difference| 1.2 levels on a photo, 22 on a test
 * pattern of pure colours), since Debian 12's zimg (3.0.4) applied HLG's OOTF channel by
 * channel in making it, not on the luminance as BT.2100 does. The reference of the tests
 * (tests/fixtures/hdr/hdr_reference.py) follows BT.2100.
 */
#ifndef VTR_HDR_TONE_H
#define VTR_HDR_TONE_H

#include <libavutil/frame.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The transfer functions handled here. */
typedef enum vtr_hdr_kind { VTR_HDR_NONE, VTR_HDR_PQ, VTR_HDR_HLG } vtr_hdr_kind;

/* The kind of a frame's (or stream's) transfer characteristic. */
vtr_hdr_kind vtr_hdr_kind_of(enum AVColorTransferCharacteristic trc);

/* "pq", "hlg" or NULL. */
const char *vtr_hdr_name(vtr_hdr_kind kind);

/* What the conversion of a frame depends on. */
typedef struct vtr_hdr_signal {
    vtr_hdr_kind kind;
    double peak_nits; /* the brightest light of the content: PQ's MaxCLL, else the
                         mastering display's peak, else 1000 cd/m²; HLG's: 1000 */
    bool bt2020;      /* BT.2020 primaries (the default); false: BT.709's */
    float kr, kb;     /* the YUV matrix's red and blue weights (BT.2020's by default) */
    bool full_range;
    int depth; /* bits per sample of the source */
} vtr_hdr_signal;

/* The signal of an HDR frame (its kind not VTR_HDR_NONE), from its tags and side data;
 * padding zeroed, so that two compare with memcmp. */
void vtr_hdr_signal_of(const AVFrame *frame, vtr_hdr_signal *s);

/* The tables (about 272 KiB) for one signal. */
typedef struct vtr_hdr_tone vtr_hdr_tone;

/* NULL when out of memory. */
vtr_hdr_tone *vtr_hdr_tone_new(const vtr_hdr_signal *s);
void vtr_hdr_tone_free(vtr_hdr_tone *t);

/* Highlight roll-off (step 3) of x, in units of reference white, for peak p > 1. */
float vtr_hdr_rolloff(float x, float peak);

/* Converts w x h pixels of YUV 4:4:4, three planes of native 16-bit samples (the source's
 * shifted left to 16 bits, as libswscale writes YUV444P16; strides in bytes), to SDR
 * BT.709 RGB24 (out_stride bytes a row). */
void vtr_hdr_tone_map(const vtr_hdr_tone *t, const uint8_t *const planes[3], const int strides[3],
                      int w, int h, uint8_t *out, size_t out_stride);

#endif
