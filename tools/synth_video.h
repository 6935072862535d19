/* Synthetic test and demo videos whose frames carry their own index.
 *
 * vtr_synth_write() encodes a video (H.264 through libx264, MPEG-4 Part 2, VP9) into the
 * container named by the path's extension (.mp4, .mkv, .webm, .avi, ...), or a single
 * image (PNG, JPEG, WebP, BMP), with libavcodec/libavformat. Every frame shows its index
 * as a 6 x 4 grid of big light/dark cells over the whole picture: 16 index bits and 8
 * check bits, row-major from the top-left cell, least significant bit first. The cells
 * carry a moving low-amplitude texture so that encoders do real work, yet the grid reads
 * back exactly after lossy compression and RGB conversion (vtr_synth_read_index). With a
 * draw callback (vtr_synth_options.draw) the frames show whatever it paints instead
 * (tools/synth_scene.h renders captioned scenes this way).
 *
 * Timing: constant frame rate fps_num/fps_den, or explicit per-frame pts (VFR) in units
 * of 1/timescale s; start_time shifts every timestamp; rotation writes a display matrix
 * (mp4/mov only) asking players to turn the picture `rotation` degrees clockwise, which
 * is what FFmpeg's autorotate does with it. An optional audio track is a sine tone.
 */
#ifndef VTR_SYNTH_VIDEO_H
#define VTR_SYNTH_VIDEO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define VTR_SYNTH_MAX_INDEX 65535

/* Draws video frame `frame` (0-based) as packed RGB24, rows `stride` bytes apart, w x h
 * pixels, into rgb; ctx is vtr_synth_options.draw_ctx. */
typedef void (*vtr_synth_draw_fn)(void *ctx, int frame, uint8_t *rgb, size_t stride, int w,
                                  int h);

typedef struct vtr_synth_options {
    const char *codec;       /* "h264", "mpeg4", "mpeg2video", "vp9", "png", "mjpeg",
                                "webp", "bmp"; NULL: chosen from the extension (.mpg,
                                .mpeg, .vob: MPEG-2 in an MPEG program stream) */
    int width, height;       /* pixels, even (default 160 x 120) */
    int frames;              /* number of video frames (default 50; images: 1) */
    int fps_num, fps_den;    /* constant frame rate (default 25/1) */
    const int64_t *pts;      /* NULL, or `frames` strictly increasing timestamps in
                                1/timescale s (variable frame rate) */
    int timescale;           /* ticks per second of `pts` (default 1000) */
    int gop;                 /* keyframe interval in frames (default 12) */
    int b_frames;            /* consecutive B-frames (default 0; VP9 has none) */
    bool closed_gop;         /* MPEG-2, MPEG-4: no B-frame references across a keyframe */
    bool packed_b_frames;    /* MPEG-4, constant rate: B-frames packed as DivX 5 and Xvid
                                store them in AVI (each P-frame and the B-frame after it
                                in one packet, an empty N-VOP after the run of B-frames;
                                every packet one display slot) */
    double start_time;       /* seconds added to every timestamp (CFR: rounded to frames) */
    int rotation;            /* 0, 90, 180 or 270: clockwise display rotation */
    int sar_num, sar_den;    /* sample (pixel) aspect ratio, as a DVD's or a DV camera's
                                (0/0: square pixels, unsaid) */
    int orientation;         /* HEIF images: an EXIF orientation, 1..8, written as the
                                irot/imir properties a phone writes; 0: none */
    const char *audio_codec; /* NULL or "none", "aac", "opus", "vorbis", "mp2" */
    int audio_rate;          /* Hz; 0: 48000 for opus, else 44100 */
    int audio_channels;      /* 1 or 2 (default 2, the same tone in both) */
    double tone_hz;          /* sine frequency (default 440) */
    int first_index;         /* index drawn into the first frame (default 0) */
    int quality;             /* 0: default; CRF for h264 and vp9, qscale for mpeg4/mjpeg */
    const char *preset;      /* libx264 preset (default "veryfast") */
    vtr_synth_draw_fn draw;  /* NULL: the index pattern; else the frames this draws (RGB,
                                converted to YUV 4:2:0 by libswscale, BT.601 limited) */
    void *draw_ctx;          /* passed to draw */
} vtr_synth_options;

/* Fills o with the defaults above. */
void vtr_synth_defaults(vtr_synth_options *o);

/* Writes the video or image to path. Fails with VTR_ERR_INVALID for inconsistent options,
 * VTR_ERR_UNSUPPORTED when an encoder is missing from this FFmpeg, VTR_ERR_CODEC when
 * FFmpeg fails, VTR_ERR_IO when the file cannot be written; no file is left on failure. */
vtr_status vtr_synth_write(const char *path, const vtr_synth_options *o, vtr_error *err);

/* Presentation time of frame i in seconds, as written (before any container rounding). */
double vtr_synth_frame_time(const vtr_synth_options *o, int i);

/* Draws the pattern of `index` into 8-bit planes of a YUV 4:2:0 picture of size w x h;
 * `phase` moves the texture (the frame number). */
void vtr_synth_draw_yuv420(uint8_t *y, int y_stride, uint8_t *u, int u_stride, uint8_t *v,
                           int v_stride, int w, int h, int index, int phase);

/* Reads the index back from an RGB24 picture (rows `stride` bytes apart). Returns -1 when
 * the check bits do not match (not a synthetic frame, wrong orientation, too damaged). */
int vtr_synth_read_index(const uint8_t *rgb, int width, int height, size_t stride);

#endif
