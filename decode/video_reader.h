/* Video reader: one video (or image) file opened with libavformat and its video stream's
 * decoder, with packet-level access so that the sampler decides what to decode.
 *
 * Images (PNG, JPEG, WebP, BMP, ...) open through libavformat's image demuxers as
 * single-frame videos. Streams other than the chosen video stream are discarded at the
 * demuxer. Cover art (an attached picture) is not a video stream.
 *
 * Lifetime: vtr_video_reader_open() returns a reader that owns the demuxer and decoder;
 * vtr_video_reader_close() frees everything (safe on NULL). A reader is used by one
 * thread at a time; the decoder itself runs `threads` threads (0: one per core).
 */
#ifndef VTR_VIDEO_READER_H
#define VTR_VIDEO_READER_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <stdbool.h>
#include <stdint.h>

#include "decode/orientation.h"
#include "lib/error.h"

typedef struct vtr_video_info {
    int width, height;     /* coded picture size */
    int tb_num, tb_den;    /* stream time base: one tick is tb_num / tb_den seconds */
    int64_t start;         /* ticks: the stream's first presentation time */
    int64_t duration;      /* ticks from start to the end of the last frame, as the stream
                              declares it; -1 unknown, or only estimated (an MPEG program
                              stream): see vtr_video_reader_measure */
    double fps;            /* average frame rate; 0 when unknown (and for images) */
    int64_t nb_frames;     /* frame count the container declares; 0 when unknown */
    int sar_num, sar_den;  /* sample aspect ratio (a pixel's width over its height): what
                              the stream or its codec says, 1:1 when neither says */
    vtr_orientation orientation; /* from the display matrix: a video's (stream side data)
                                    at open; a photo's (its EXIF orientation, which
                                    FFmpeg's JPEG decoder exports with the picture) once
                                    its frame is decoded (vtr_video_reader_receive) */
    const char *codec;           /* decoder name ("h264", "vp9", "png", ...; "heif") */
    const char *format;    /* demuxer name ("mov,mp4,m4a,3gp,3g2,mj2", "png_pipe", ...) */
    const char *hdr;       /* "pq" or "hlg": HDR video, made SDR (decode/hdr_tone.h); NULL */
    bool is_image;
    bool intra_only;       /* every frame is a keyframe (images, MJPEG, ...) */
    int64_t declared_end;  /* ticks: where the container says the video ends (the stream's
                              duration, else the file's, read as the earlier of span and end
                              time); INT64_MIN unknown. Only for spotting truncation. */
} vtr_video_info;

typedef struct vtr_decode_stats {
    int64_t packets_read;   /* video packets demuxed */
    int64_t packets_sent;   /* video packets given to the decoder */
    int64_t frames_decoded; /* frames the decoder returned */
    int64_t seeks;
} vtr_decode_stats;

typedef struct vtr_video_reader vtr_video_reader;

/* Opens path. Errors name the path: a missing or unreadable file (VTR_ERR_IO), an empty
 * file, a file no demuxer recognises or with no video stream (VTR_ERR_FORMAT), a codec
 * with no decoder here (VTR_ERR_UNSUPPORTED), other FFmpeg failures (VTR_ERR_CODEC). */
vtr_status vtr_video_reader_open(const char *path, int threads, vtr_video_reader **out,
                                 vtr_error *err);
void vtr_video_reader_close(vtr_video_reader *r);

const vtr_video_info *vtr_video_reader_info(const vtr_video_reader *r);
const vtr_decode_stats *vtr_video_reader_stats(const vtr_video_reader *r);
const char *vtr_video_reader_path(const vtr_video_reader *r);

/* For a stream that declares no duration (Matroska/WebM, image pipes, MPEG program
 * streams): reads, without decoding, the packets from the last indexed keyframe (a program
 * stream: its last MiB; from the start, without an index or for a smaller file) to the end
 * of the file, sets info.duration to the end of the last frame (and
 * info.start when unknown), then goes back to the start, keeping the keyframe index it
 * found (Matroska's cues, read at a first seek, or the keyframes read). */
vtr_status vtr_video_reader_measure(vtr_video_reader *r, vtr_error *err);

/* For a container without a keyframe index (MPEG-TS, MPEG-PS): reads, without decoding,
 * the video packets of the whole file and keeps each keyframe's dts, pts, byte position
 * and frame number as the reader's own index, which vtr_video_reader_keyframe_before,
 * _preceding, _frame_number and _seek then use (a seek goes to the keyframe's byte; the
 * next read skips what precedes the keyframe there and gives it the times the index saw);
 * then goes back to the start. Keeps none when the keyframes' dts do not rise with their
 * positions (time stamps reset or wrapped) or a position is unknown (a program stream's
 * pictures several to a packet), when reading fails (decoding will say why) or memory
 * runs short: the file then decodes as without an index. Other containers: nothing. */
vtr_status vtr_video_reader_index(vtr_video_reader *r, vtr_error *err);

/* Gives dst, the same file opened again, src's own index (vtr_video_reader_index). */
vtr_status vtr_video_reader_share_index(vtr_video_reader *dst, const vtr_video_reader *src,
                                        vtr_error *err);

/* Fails with VTR_ERR_FORMAT ("truncated?") when the video data, read to the end of the
 * file, stops at `end` ticks well before info.declared_end (by more than half a second,
 * two frames and 2% of the duration). */
vtr_status vtr_video_reader_check_end(const vtr_video_reader *r, int64_t end, vtr_error *err);

/* Fails with VTR_ERR_UNSUPPORTED: a video packet without any timestamp (a raw elementary
 * stream), which no frame can be placed by. */
vtr_status vtr_video_reader_untimed(const vtr_video_reader *r, vtr_error *err);

/* Reads the next packet of the video stream into pkt (unreferenced first). At the end of
 * the file sets *eof and leaves pkt empty. Read errors are VTR_ERR_CODEC. */
vtr_status vtr_video_reader_read(vtr_video_reader *r, AVPacket *pkt, bool *eof,
                                 vtr_error *err);

/* The container index's entry for the last keyframe at or before ts: its timestamp in
 * the index's terms (dts for mp4/mov and the reader's own index, vtr_video_reader_index;
 * pts for Matroska/WebM) and its byte position (-1
 * when unknown; Matroska gives the cluster's); false when there is none. */
bool vtr_video_reader_keyframe_before(vtr_video_reader *r, int64_t ts, int64_t *kf_ts,
                                      int64_t *kf_pos);

/* The last indexed keyframe strictly before the packet at byte position pos (when pos >= 0)
 * or with index timestamp ts (otherwise); false when there is none. */
bool vtr_video_reader_keyframe_preceding(vtr_video_reader *r, int64_t pos, int64_t ts,
                                         int64_t *kf_ts);

/* The decode-order number of the packet with this dts when the container indexes every
 * frame (mp4/mov), or of a keyframe of the reader's own index; -1 otherwise. */
int64_t vtr_video_reader_frame_number(vtr_video_reader *r, int64_t dts);

/* Whether decoding that begins with a jump to a keyframe tells what decoding from the
 * start would (the frames' numbers): the container numbers every frame (mp4/mov, AVI),
 * the reader's own index numbers its keyframes, or the stream reorders no frames (none
 * decoded after a keyframe is shown before it, as an open GOP's are). Otherwise, e.g.
 * Matroska with B-frames, only one decoder from the start keeps the frame numbers where
 * its targets never make it jump. */
bool vtr_video_reader_jumps_tell_all(vtr_video_reader *r);

/* Seeks to the last keyframe at or before ts (av_seek_frame, AVSEEK_FLAG_BACKWARD; with
 * the reader's own index, to that keyframe's byte) and resets the decoder. */
vtr_status vtr_video_reader_seek(vtr_video_reader *r, int64_t ts, vtr_error *err);

/* Goes back to the first packet of the file (reopening the demuxer) and resets the
 * decoder. */
vtr_status vtr_video_reader_rewind(vtr_video_reader *r, vtr_error *err);

/* Gives pkt to the decoder (NULL: no more packets, drain). With decode_nonref false the
 * decoder skips the frame if nothing references it (AVDISCARD_NONREF). The caller must
 * take every available frame with vtr_video_reader_receive() before the next send. */
vtr_status vtr_video_reader_send(vtr_video_reader *r, const AVPacket *pkt, bool decode_nonref,
                                 vtr_error *err);

/* Takes the next decoded frame into frame (unreferenced first); *got is false when the
 * decoder needs more input or is drained. An image's frame sets info.orientation from
 * its display matrix (EXIF). */
vtr_status vtr_video_reader_receive(vtr_video_reader *r, AVFrame *frame, bool *got,
                                    vtr_error *err);

/* Resets the decoder after a drain or before a jump (avcodec_flush_buffers). */
void vtr_video_reader_flush(vtr_video_reader *r);

/* Seconds of a tick count, for messages and metadata. */
double vtr_video_reader_seconds(const vtr_video_reader *r, int64_t ticks);

#endif
