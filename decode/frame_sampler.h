/* Frame sampling: which frames of a video vtr-decode delivers.
 *
 * Time-based modes give target times; the frame for a target time t is the one displayed
 * at t: the last frame in presentation order whose pts <= t, or the first frame when t
 * precedes every frame. All times are integer ticks of the video stream's time base
 * (tb_num / tb_den seconds), so selection is exact, with no floating point.
 *
 *   VTR_SAMPLE_FRAMES  N targets, segment centres: t_i = start + (i + 0.5) * duration / N,
 *                      i = 0 .. N-1, computed as start + floor(duration_ticks * (2i + 1) /
 *                      (2N)) (MSR-VTT/VATEX-style uniform sampling; a video shorter than
 *                      N frames repeats frames);
 *   VTR_SAMPLE_FPS     t_k = start + k / R for k = 0, 1, ... while t_k < start + duration,
 *                      as start + floor(k * tb_den * R_den / (tb_num * R_num));
 * and frame-based modes:
 *   VTR_SAMPLE_ALL       every frame;
 *   VTR_SAMPLE_EVERY     presentation-order frames 0, K, 2K, ... (HGR's "every 16th");
 *   VTR_SAMPLE_KEYFRAMES every keyframe (intra frames the container marks as keyframes).
 */
#ifndef VTR_FRAME_SAMPLER_H
#define VTR_FRAME_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"

typedef enum vtr_sample_mode {
    VTR_SAMPLE_ALL,
    VTR_SAMPLE_FRAMES,
    VTR_SAMPLE_FPS,
    VTR_SAMPLE_EVERY,
    VTR_SAMPLE_KEYFRAMES,
} vtr_sample_mode;

typedef struct vtr_sampler {
    vtr_sample_mode mode;
    int64_t n;               /* FRAMES: the count N; EVERY: the step K */
    int64_t fps_num, fps_den; /* FPS: the rate R = fps_num / fps_den, both > 0 */
} vtr_sampler;

/* Most targets one item may ask for (vtr-decode's --max-frames lowers it). */
#define VTR_SAMPLER_MAX_TARGETS 10000000

/* True for FRAMES and FPS. */
bool vtr_sampler_is_timed(const vtr_sampler *s);

/* Parses a rate "25", "29.97", "0.5" or "30000/1001" exactly into num/den (> 0). */
vtr_status vtr_sampler_parse_rate(const char *text, int64_t *num, int64_t *den, vtr_error *err);

/* Describes the sampler: "frames:20", "fps:30000/1001", "every:16", "keyframes", "all".
 * Writes at most size bytes (always NUL-terminated). */
void vtr_sampler_describe(const vtr_sampler *s, char *buf, size_t size);

/* The target times of a timed sampler, ascending, in ticks. start and duration are in
 * ticks (duration >= 0; 0 gives the single target `start` for FPS and N targets at start
 * for FRAMES). *targets is malloc'd (free it); fails with VTR_ERR_INVALID, saying how many
 * the sampler asks for over how long, beyond max targets (at most VTR_SAMPLER_MAX_TARGETS:
 * a header declaring days of video). */
vtr_status vtr_sampler_targets(const vtr_sampler *s, int64_t start, int64_t duration, int tb_num,
                               int tb_den, int64_t max, int64_t **targets, int64_t *count,
                               vtr_error *err);

/* Index of the first target >= t in the ascending array (count when none). */
int64_t vtr_targets_lower_bound(const int64_t *targets, int64_t count, int64_t t);

#endif
