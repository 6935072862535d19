/* Frame picker: decodes exactly the frames a sampler picks, and as few others as it can.
 *
 * The choice is made on packet timestamps before anything is decoded (see
 * presentation_order.h): for a target time t the picked frame is the last one whose
 * pts <= t (the first frame when t precedes them all); for --every K the frames whose
 * presentation rank is a multiple of K; for --keyframes the packets the container marks
 * as keyframes. Then:
 *   - a packet whose frame is not picked is decoded only if other frames reference it
 *     (AVDISCARD_NONREF), so B-frames nobody needs cost nothing;
 *   - timed modes jump: when the container's index shows a keyframe after the current
 *     decode position and at or before the next target, the decoder is drained, the
 *     demuxer seeks back to that keyframe (AVSEEK_FLAG_BACKWARD) and decoding resumes
 *     there; otherwise decoding goes straight on;
 *   - after a jump, if the target's frame lies before the landing keyframe (a seek by
 *     dts, open GOPs) or the decoder drops a picked frame (its references were before the
 *     keyframe), the picker seeks one keyframe further back, finally to the start of the
 *     file, so the result is always that of a straight decode;
 *   - --keyframes decodes only keyframe packets; --every and all frames decode straight.
 * Frames come out in presentation order; every picked frame goes to the sink once, with
 * the range of output slots it fills (timed modes: the targets it answers, so a frame
 * answering several targets is delivered once with a wider range).
 */
#ifndef VTR_FRAME_PICKER_H
#define VTR_FRAME_PICKER_H

#include <libavutil/frame.h>
#include <stdbool.h>
#include <stdint.h>

#include "decode/frame_sampler.h"
#include "decode/video_reader.h"
#include "lib/error.h"

typedef struct vtr_pick_plan {
    vtr_sampler sampler;
    const int64_t *targets; /* timed modes: ascending target times in ticks */
    int64_t n_targets;
    bool seek;              /* allow jumps (timed modes) */
    bool skip_nonref;       /* allow skipping unpicked unreferenced frames */
} vtr_pick_plan;

/* Receives a picked frame (valid during the call): its pts (ticks), its presentation
 * index in the file (-1 when unknown, after a jump in a container that does not index
 * every frame) and the output slots [first_slot, first_slot + n_slots) it fills. */
typedef vtr_status (*vtr_frame_sink)(void *ctx, const AVFrame *frame, int64_t pts,
                                     int64_t frame_index, int64_t first_slot, int64_t n_slots,
                                     vtr_error *err);

/* Decodes r's picked frames into sink; for frame modes *delivered is the number of slots
 * filled (timed modes: n_targets). Errors name the file: read and decode failures
 * (VTR_ERR_CODEC), a truncated or corrupt file (VTR_ERR_FORMAT), a picked frame that
 * cannot be decoded from the start of the file (VTR_ERR_CODEC), and what sink returns. */
vtr_status vtr_pick_frames(vtr_video_reader *r, const vtr_pick_plan *plan, vtr_frame_sink sink,
                           void *ctx, int64_t *delivered, vtr_error *err);

#endif
