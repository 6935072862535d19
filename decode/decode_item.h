/* Decoding one item: a video or image file to its sampled frames and metadata, the unit
 * of work of vtr-decode (which adds only argument parsing and output).
 *
 * The frames are one array (N, H, W, 3) of RGB, uint8, or float32 (x / 255 - mean) / std
 * when normalising; N is the number of targets in timed modes, the number of frames
 * picked otherwise. The metadata object holds (times in seconds, from the pts):
 *   source, width, height, frames (N), timestamps (one per frame), pts and time_base
 *   (the exact integer timestamps: seconds = pts * num / den), frame_indices
 *   (presentation-order frame numbers, or null when a jump left them unknown),
 *   target_times (timed modes), start_time, duration, fps (null when unknown),
 *   rotation (clockwise degrees applied), mirrored, source_width, source_height, codec,
 *   sampler {mode, n | rate}, decode {packets_read, packets_sent, frames_decoded, seeks,
 *   stretches} (summed over the stretches decoded at once: see threads below),
 *   audio (the path written, or null with audio_reason: "no audio stream", "not
 *   requested"), and with audio audio_rate, audio_samples, audio_start_time, audio_codec.
 */
#ifndef VTR_DECODE_ITEM_H
#define VTR_DECODE_ITEM_H

#include <jansson.h>
#include <stdbool.h>

#include "decode/frame_convert.h"
#include "decode/frame_sampler.h"
#include "lib/error.h"
#include "lib/tensor.h"

typedef struct vtr_decode_options {
    vtr_sampler sampler;           /* default: all frames */
    vtr_geometry_request geometry; /* default: displayed size */
    bool normalize;                /* float32 output with mean/std */
    float mean[3], std[3];
    int threads;                   /* threads, 0: one per core. Timed samplers decode up
                                      to this many stretches of the file at once, each
                                      on its own reader (decode/stretch_plan.h: the same
                                      bytes and metadata as one decoder, but for the
                                      decode counts); the readers share the threads as
                                      slice threads */
    bool straight;                 /* decode every frame in order: no jumps, no skipping */
    int audio_rate;                /* Hz for the audio track (default 16000) */
    int64_t max_frames;            /* most frames an item may give (default
                                      VTR_SAMPLER_MAX_TARGETS): a sampler asking for more
                                      (a header declaring days of video) fails the item */
} vtr_decode_options;

void vtr_decode_options_defaults(vtr_decode_options *o);

typedef struct vtr_decoded_item {
    vtr_tensor frames; /* data owned (malloc) */
    json_t *meta;      /* owned reference */
} vtr_decoded_item;

/* Decodes path. When audio_path is non-NULL the audio track is also written there (see
 * audio_track.h); a file without audio still succeeds, with "audio": null. On failure
 * nothing is allocated in out and no audio file is left. */
vtr_status vtr_decode_item(const char *path, const vtr_decode_options *o,
                           const char *audio_path, vtr_decoded_item *out, vtr_error *err);

/* Frees what vtr_decode_item allocated; safe on a zeroed or freed item. */
void vtr_decoded_item_free(vtr_decoded_item *item);

#endif
