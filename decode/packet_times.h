/* Packet times: presentation times for MPEG-1, MPEG-2 and MPEG-4 Part 2 video packets whose
 * container does not give them (AVI, MPEG program and elementary streams, Matroska in VfW
 * mode).
 *
 * These codecs, when their decoder delays output (a stream that may have B-frames:
 * AVCodecParameters.video_delay > 0), reorder by one frame: a B-frame is never a reference and is
 * shown as soon as it is decoded; a reference frame (I, P, S, D) is shown after the B-frames that
 * follow it in decode order, i.e. in the slot of the next reference frame. With decode times (dts,
 * one slot per packet, as containers and libavformat give them), a B-frame's pts is its dts and a
 * reference frame's pts is the dts of the next reference frame (after the last one, the last dts
 * plus one frame): the order FFmpeg's decoder outputs the frames in. Explicit pts that contradict
 * that order (a reference frame shown before the next reference frame is decoded: libavformat's
 * guesses for elementary streams) are replaced; the others are kept.
 *
 * Some containers' times are the frames' presentation times under the name of decode
 * times: Matroska in VfW mode (codec V_MS/VFW/FOURCC, mkvmerge's for MPEG-4 Part 2), which
 * libavformat reads as dts, holds presentation times when mkvmerge took the stream from a
 * container that had them (mp4), decode times when it took it from AVI. A decode time
 * never goes back; a B-frame's time earlier than that of the reference frame decoded just
 * before it does. So the first B-frame after a reference frame tells which the stream
 * has: then each frame is shown at its own time (a pts the container gives is kept).
 * Packets are held until it tells (at most 64, then decode times are taken).
 *
 * The picture type is read from the packet's picture header (MPEG-1/2 picture start code,
 * MPEG-4 VOP start code). A reference frame's packet is held back until the next reference
 * frame (or the end of the stream) fixes its pts, so packets come out in decode order with
 * at most one run of B-frames of delay.
 */
#ifndef VTR_PACKET_TIMES_H
#define VTR_PACKET_TIMES_H

#include <libavcodec/avcodec.h>
#include <stdbool.h>

#include "lib/error.h"

/* What the container's times (libavformat's dts) are. */
typedef enum vtr_times_given {
    VTR_TIMES_UNTOLD,       /* no B-frame after a reference frame seen yet */
    VTR_TIMES_DECODE,       /* decode times: AVI, MPEG program and elementary streams */
    VTR_TIMES_PRESENTATION, /* presentation times: Matroska in VfW mode, from mp4 */
} vtr_times_given;

typedef struct vtr_packet_times {
    enum AVCodecID codec;
    vtr_times_given given; /* the stream's: kept across seeks */
    AVPacket **queue;      /* decode order; the first reference frame in it may lack its pts
                              (all of them, while the times are untold) */
    int len, cap;
    int open; /* index of the reference frame waiting for its pts; -1 none */
} vtr_packet_times;

/* Whether an MPEG-1/2 (codec MPEG1VIDEO or MPEG2VIDEO) or MPEG-4 Part 2 (MPEG4) packet
 * holds a B-picture: the type field after its first picture start code. */
bool vtr_packet_is_b_picture(enum AVCodecID codec, const AVPacket *pkt);

/* Whether the packets of this stream get their times here. */
bool vtr_packet_times_applies(const AVCodecParameters *par);

void vtr_packet_times_init(vtr_packet_times *pt, enum AVCodecID codec);
/* Drops the queued packets (after a seek). */
void vtr_packet_times_reset(vtr_packet_times *pt);
void vtr_packet_times_free(vtr_packet_times *pt);

/* Takes pkt (its reference moves into the queue; pkt is left blank). */
vtr_status vtr_packet_times_push(vtr_packet_times *pt, AVPacket *pkt, vtr_error *err);

/* Moves the next packet whose time is settled into out; at the end of the stream (end
 * set) every queued packet is settled. False when none is ready. */
bool vtr_packet_times_pop(vtr_packet_times *pt, AVPacket *out, bool end);

#endif
