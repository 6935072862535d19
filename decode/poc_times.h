/* Picture order times: presentation times for H.264 and HEVC packets whose container gives
 * none (AVI: decode times only), from the pictures' order counts.
 *
 * Each picture's slice header carries its picture order count (POC), which rises in the
 * order the pictures are shown and starts again at an IDR picture; FFmpeg's parser reads
 * it (AVCodecParserContext.output_picture_number). With decode times (one slot per packet)
 * the frames are placed as a decoder shows them: while more than VTR_POC_DEPTH packets wait,
 * the waiting one of lowest count is shown next and gets the earliest slot not yet given
 * (the dts of the packet that many places on in decode order); a keyframe whose count is
 * not above the last one shown starts a new run (an IDR), after all waiting ones; the end
 * of the stream shows all. So the first frame after an IDR is shown at the IDR's own dts,
 * the same after a jump to it as from the start. A packet whose count comes below one
 * already shown (a reorder deeper than the depth: none in a valid stream) is an error.
 *
 * Packets come out in decode order, each once its pts is known: at most VTR_POC_DEPTH + 1
 * packets of delay.
 */
#ifndef VTR_POC_TIMES_H
#define VTR_POC_TIMES_H

#include <libavcodec/avcodec.h>
#include <stdbool.h>

#include "lib/error.h"

/* Packets held before the lowest count is shown: H.264's and HEVC's deepest reorder. */
#define VTR_POC_DEPTH 16

typedef struct vtr_poc_times {
    AVCodecParserContext *parser;
    AVCodecContext *ctx; /* the parser's: the stream's parameters */
    const char *path;    /* for messages */
    AVPacket **queue;    /* decode order */
    int *poc;            /* queue[i]'s count */
    int len, cap;
    int waiting;    /* how many in the queue have no pts yet */
    int64_t *slots; /* the dts not yet given away, in order: as many as wait (each packet
                       brings one, each frame shown takes the earliest) */
    bool in_run;    /* a packet pushed since the last reset */
    int run_max;    /* the highest count pushed in this run */
    bool shown_any; /* a frame of this run shown */
    int last_shown; /* the count of the last frame shown */
} vtr_poc_times;

/* Whether the packets of this stream (parameters par, of a container in format fmt) get
 * their times here: H.264 or HEVC that may reorder, in AVI. */
bool vtr_poc_times_applies(const AVCodecParameters *par, const char *fmt);

vtr_status vtr_poc_times_init(vtr_poc_times *pt, const AVCodecParameters *par, const char *path,
                              vtr_error *err);
/* Drops the queued packets and the counts seen (after a seek; the parser keeps its state:
 * counts after a jump may all be off by one constant, which leaves their order). */
void vtr_poc_times_reset(vtr_poc_times *pt);
void vtr_poc_times_free(vtr_poc_times *pt);

/* Takes pkt (its reference moves into the queue; pkt is left blank). */
vtr_status vtr_poc_times_push(vtr_poc_times *pt, AVPacket *pkt, vtr_error *err);

/* Moves the next packet whose pts is known into out; at the end of the stream (end set)
 * every queued packet gets its pts. False when none is ready. */
bool vtr_poc_times_pop(vtr_poc_times *pt, AVPacket *out, bool end);

#endif
