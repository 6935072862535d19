/* Presentation order: what the demuxed packets of a stretch of video say about the order
 * in which their frames are shown, before anything is decoded.
 *
 * Packets come in decode order; with B-frames a frame may be shown before frames decoded
 * earlier. The decoder's reordering is bounded: H.264 and HEVC hold at most 16 frames
 * (MPEG-4 Part 2 one, VP8/VP9/AV1 none), so a packet decoded after 17 packets shown
 * later than t cannot itself be shown at or before t (it would follow 17 frames in
 * decode order yet precede them in presentation order). This structure keeps the sorted
 * pts of the packets read since a starting point (the file's start or a seek) and
 * answers, once that bound (or the end of the stream) makes the answer final:
 *   - the pts shown next after a pts p (so the frame p is on screen during [p, next));
 *   - the frame on screen at a time t (the last pts <= t);
 *   - the rank of a pts among all frames since the starting point.
 */
#ifndef VTR_PRESENTATION_ORDER_H
#define VTR_PRESENTATION_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"

#define VTR_MAX_REORDER 16

typedef struct vtr_presentation_order {
    int64_t *pts;   /* ascending */
    int64_t count;
    int64_t capacity;
    bool complete;  /* the stream ended: every pts after the starting point is known */
} vtr_presentation_order;

/* Empties (keeps the memory). */
void vtr_presentation_order_reset(vtr_presentation_order *po);
void vtr_presentation_order_free(vtr_presentation_order *po);

/* Whether a packet with this pts can come next: no known frame has the same pts, and
 * at most VTR_MAX_REORDER known pts are later (else frames already settled would move).
 * False for timestamps that repeat or go back (files joined end to end, damage). */
bool vtr_presentation_order_fits(const vtr_presentation_order *po, int64_t pts);

/* Records the pts of one more packet in decode order. */
vtr_status vtr_presentation_order_add(vtr_presentation_order *po, int64_t pts, vtr_error *err);

/* Whether every frame with pts <= t has been seen: VTR_MAX_REORDER + 1 later pts known,
 * or the stream ended. */
bool vtr_presentation_order_settled(const vtr_presentation_order *po, int64_t t);

/* The smallest known pts > p, or INT64_MAX when none (final once settled(p)). */
int64_t vtr_presentation_order_next(const vtr_presentation_order *po, int64_t p);

/* The largest known pts <= t; false when none is known (final once settled(t)). */
bool vtr_presentation_order_at(const vtr_presentation_order *po, int64_t t, int64_t *pts);

/* Number of known pts < p (the presentation rank since the starting point, final once
 * settled(p)). */
int64_t vtr_presentation_order_rank(const vtr_presentation_order *po, int64_t p);

#endif
