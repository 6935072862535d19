/* Shared helpers of the decode tests: synthetic inputs made once per run in
 * test_tmpdir(), decoding through the library, and reading frame indices back from the
 * pixels (tools/synth_video.h draws them). */
#ifndef VTR_TEST_DECODE_FIXTURES_H
#define VTR_TEST_DECODE_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "decode/decode_item.h"
#include "tools/synth_video.h"

/* One synthetic input: its options, and where vtr_synth_write put it. */
typedef struct decode_fixture {
    const char *name;      /* file name in test_tmpdir() */
    vtr_synth_options opt;
    int64_t pts_ms[64];    /* VFR timestamps when opt.pts is set */
    int cut;               /* > 0: the file shows the synthetic video from frame `cut` on,
                              as `ffmpeg -ss T -i in -c copy out.mov` cuts it: every
                              packet kept, the timestamps moved back by T, the frames
                              before T hidden by the edit list; opt then describes what
                              is shown (first_index, frames) */
    const char *path;      /* set by fixture_get */
} decode_fixture;

/* The named fixture, written on first use ("h264", "h264_cut", "h264_mkv", "h264_avi", "mpeg4",
 * "mpeg4_avi", "divx_avi", "vp9", "vfr", "start", "start_webm", "rot90", "rot180", "rot270",
 * "audio", "ts", "mpeg4_ts", "mpeg2_ps", "gif_anim", "png", "jpeg", "webp", "bmp", "tiff", "heif",
 * "avif", "gif"). */
decode_fixture *fixture_get(const char *name);

/* Every image fixture's name, NULL-terminated. */
extern const char *const fixture_images[];

/* Copies src's streams packet by packet into dst (the container from dst's extension),
 * with one muxer option (key NULL: none), e.g. "movflags" "+faststart". CHECKs success. */
void fixture_remux(const char *src, const char *dst, const char *key, const char *value);

/* The WebM fixture vp9 remuxed with its cues (the index) before the clusters, as mkvmerge
 * writes it: a new path (free it). */
char *fixture_cues_in_front(const decode_fixture *vp9);

/* Quiet FFmpeg's own logging (tests read errors from vtr_error only). */
void fixture_quiet(void);

/* Decodes path with sampler s; straight: no jumps or skipping. CHECKs success. */
void fixture_decode(const char *path, const vtr_sampler *s, bool straight,
                    const vtr_geometry_request *g, vtr_decoded_item *out);

/* Decodes path with timed sampler s on one thread (one decoder) and on four (up to four
 * stretches of the file at once, decode/stretch_plan.h): CHECKs the same frames, byte for
 * byte, and the same metadata but for the decoding counts. Returns how many stretches the
 * second took. */
int fixture_check_stretches(const char *path, const vtr_sampler *s);

/* Frame k of a decoded item (uint8), its size in bytes. */
const uint8_t *fixture_frame(const vtr_decoded_item *it, int64_t k);
size_t fixture_frame_bytes(const vtr_decoded_item *it);

/* The index drawn into frame k, after turning the picture back by `rotation` degrees
 * counter-clockwise (the synthetic video's display rotation); -1 when unreadable. */
int fixture_index(const vtr_decoded_item *it, int64_t k, int rotation);

/* Checks a decoded photo (one frame) against the picture as stored (RGB, w x h) for EXIF
 * orientation `exif` (1-8): its size, its rotation and mirrored metadata, and that pixel
 * (x, y) shown is the stored pixel EXIF puts there; `what` names it in messages. */
void fixture_check_exif_display(const vtr_decoded_item *shown, const uint8_t *stored, int w,
                                int h, int exif, const char *what);

/* The same but for the metadata: the size and the pixels only. */
void fixture_check_exif_pixels(const vtr_decoded_item *shown, const uint8_t *stored, int w, int h,
                               int exif, const char *what);

/* meta[key][k] as an integer / a real. */
int64_t fixture_meta_int(const vtr_decoded_item *it, const char *key, int64_t k);
double fixture_meta_real(const vtr_decoded_item *it, const char *key, int64_t k);

#endif
