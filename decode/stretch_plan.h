/* Stretch plan: where a timed item's targets split into stretches of the file that
 * separate decoders can take at once.
 *
 * A stretch begins only at a target whose keyframe (the container index's last keyframe
 * at or before it) comes after the previous target's: there the picker (frame_picker.h)
 * jumps to that keyframe anyway, so a decoder that starts the stretch with that jump
 * decodes what the single decoder would have, and the frames are the same bytes. The
 * cost of a target is the video its decoder goes through to reach it, in seconds (from
 * the previous target, or from its keyframe where the picker jumps), plus a constant for
 * the frame itself; the stretches are cut near equal shares of the total. One stretch
 * (no split) when the index offers no such target, when the longest stretch would keep
 * more than 80% of the cost, or when the total is under two seconds of video, which is
 * not worth opening the file again.
 *
 * Where a jump loses what one decoder reading through keeps (the frame numbers, in a
 * container that numbers no frames, with B-frames), a split costs nothing only if the one
 * decoder jumps somewhere anyway: it surely does at a target whose keyframe comes after
 * the previous target's and more than a lead after the previous target itself, for then
 * the previous target's frame is no leading picture of that keyframe (one decoded after
 * it and shown before it, as in an open GOP) and was decoded before it. Otherwise one
 * stretch. (Surely where the index's byte positions are the keyframes' own, or those of
 * clusters that begin at keyframes; where the rule misjudges, the frames are the same
 * and only the numbers are lost.)
 */
#ifndef VTR_STRETCH_PLAN_H
#define VTR_STRETCH_PLAN_H

#include <stdint.h>

/* No keyframe before a target: the container index has none at or before it. */
#define VTR_STRETCH_NO_KEYFRAME INT64_MIN

/* A lead for streams whose jumps lose nothing. */
#define VTR_STRETCH_JUMPS_LOSE_NOTHING (-1)

/* targets[0 .. n-1]: ascending target times (ticks); keyframes[k]: the index timestamp of
 * targets[k]'s keyframe (ticks; VTR_STRETCH_NO_KEYFRAME when none); start: the stream's
 * first time (ticks); tick_s: seconds per tick; lead: the longest a keyframe's leading
 * pictures can last (ticks) where jumps lose frame numbers, else
 * VTR_STRETCH_JUMPS_LOSE_NOTHING; at most max stretches. Writes the first target of each
 * stretch to first[] (first[0] = 0; ascending; stretch i ends where stretch i + 1 begins,
 * the last at n) and returns their count, 1 to max. */
int vtr_stretch_plan(const int64_t *targets, const int64_t *keyframes, int64_t n, int64_t start,
                     double tick_s, int64_t lead, int max, int64_t *first);

#endif
