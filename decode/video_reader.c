#define _POSIX_C_SOURCE 200809L
#include "video_reader.h"

#include <errno.h>
#include <libavcodec/bsf.h>
#include <libavutil/display.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"

#include "decode/gif_still.h"
#include "decode/hdr_tone.h"
#include "decode/heif_image.h"
#include "decode/packet_times.h"
#include "decode/poc_times.h"
#include "decode/tiff_orientation.h"

/* A keyframe of the reader's own index: its dts (the index's terms, as mp4's) and pts,
 * the byte where its packet begins, and the number of video packets before it (its frame
 * number in decode order). */
typedef struct {
    int64_t dts, pts, pos, num;
} own_keyframe;

struct vtr_video_reader {
    char *path;
    AVFormatContext *fmt;
    /* a HEIF image: its decoded picture, which the demuxer reads as raw RGB through mem
     * (at mem_pos) */
    vtr_heif_picture heif;
    AVIOContext *mem;
    int64_t mem_pos;
    AVCodecContext *dec;
    AVStream *st;
    int stream;
    vtr_video_info info;
    vtr_decode_stats stats;
    AVBSFContext *unpack;   /* MPEG-4 Part 2: mpeg4_unpack_bframes; NULL otherwise */
    bool unpack_flushed;    /* the demuxer ended and the filter was told */
    enum {
        TIMES_GIVEN,   /* the container's */
        TIMES_BY_TYPE, /* from the picture types (packet_times.h) */
        TIMES_BY_ORDER /* from the picture order counts (poc_times.h) */
    } times_from;
    bool reorders;          /* frames are shown in another order than decoded (probed at
                               opening: a reopened demuxer does not probe) */
    vtr_packet_times times;
    vtr_poc_times poc;
    bool pts_seen;          /* a packet of the stream has had a pts */
    bool source_eof;        /* no more packets from the demuxer (and the filter) */
    AVPacket *next;         /* a packet on its way from the demuxer */
    /* vtr_video_reader_index: the keyframes of a container without an index of its own,
     * in file order (dts and byte position both rising); n 0: the container's index */
    struct {
        own_keyframe *k;
        int n, cap;
        int landing; /* the keyframe vtr_video_reader_seek went to, until read; -1 none */
    } own;
};

static vtr_status codec_error(vtr_error *err, const char *path, const char *what, int ret)
{
    return vtr_fail(err, VTR_ERR_CODEC, "%s: %s: %s", path, what, av_err2str(ret));
}

/* MPEG program streams (.mpg, .vob): no index, times only in some packets. */
static bool is_program_stream(const vtr_video_reader *r)
{
    return strcmp(r->fmt->iformat->name, "mpeg") == 0;
}

static bool is_image_format(const char *name)
{
    size_t n = strlen(name);
    return !strcmp(name, "image2") || (n > 5 && !strcmp(name + n - 5, "_pipe"));
}

/* A GIF of one picture: an image, not a clip of one frame (FFmpeg's GIF demuxer makes
 * every GIF a video). */
static bool is_still_gif(const vtr_video_reader *r)
{
    if (strcmp(r->fmt->iformat->name, "gif"))
        return false;
    vtr_mapped_file m;
    vtr_error ignored;
    if (vtr_map_file(r->path, &m, &ignored) != VTR_OK)
        return false;
    bool still = vtr_gif_is_still(m.data, m.size);
    vtr_unmap_file(&m);
    return still;
}

/* Whether path is an animated WebP (its VP8X chunk's animation flag), which FFmpeg 5.1
 * cannot decode. */
static bool is_animated_webp(const char *path)
{
    uint8_t b[21];
    return vtr_read_head(path, b, sizeof b) == sizeof b && !memcmp(b, "RIFF", 4) &&
           !memcmp(b + 8, "WEBPVP8X", 8) && (b[20] & 2);
}

/* The error for a file FFmpeg cannot read: an animated WebP said as such, else what
 * (fallback) says. */
static vtr_status unreadable(const char *path, const char *fallback, vtr_error *err)
{
    if (is_animated_webp(path))
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: an animated WebP, which this FFmpeg cannot decode (convert it to "
                        "a video or to JPEG or PNG frames first)",
                        path);
    return vtr_fail(err, VTR_ERR_FORMAT, "%s: %s", path, fallback);
}

/* The demuxer's reads and seeks in a HEIF image's picture. */
static int mem_read(void *opaque, uint8_t *buf, int size)
{
    vtr_video_reader *r = opaque;
    int64_t total = (int64_t)r->heif.width * r->heif.height * 3;
    int n = (int)(total - r->mem_pos < size ? total - r->mem_pos : size);
    if (n <= 0)
        return AVERROR_EOF;
    memcpy(buf, r->heif.rgb + r->mem_pos, (size_t)n);
    r->mem_pos += n;
    return n;
}

static int64_t mem_seek(void *opaque, int64_t offset, int whence)
{
    vtr_video_reader *r = opaque;
    int64_t total = (int64_t)r->heif.width * r->heif.height * 3;
    if (whence == AVSEEK_SIZE)
        return total;
    int64_t to = (whence & ~AVSEEK_FORCE) == SEEK_CUR   ? r->mem_pos + offset
                 : (whence & ~AVSEEK_FORCE) == SEEK_END ? total + offset
                                                        : offset;
    if (to < 0 || to > total)
        return AVERROR(EINVAL);
    return r->mem_pos = to;
}

/* A HEIF image's demuxer: raw RGB frames of its size, read through r->mem. */
static vtr_status open_heif_demuxer(vtr_video_reader *r, const AVInputFormat **in,
                                    AVDictionary **opts, vtr_error *err)
{
    enum { BUFFER = 1 << 16 };
    uint8_t *buf = av_malloc(BUFFER);
    r->mem_pos = 0;
    r->mem = buf ? avio_alloc_context(buf, BUFFER, 0, r, mem_read, NULL, mem_seek) : NULL;
    r->fmt = r->mem ? avformat_alloc_context() : NULL;
    if (!r->fmt) {
        if (!r->mem)
            av_free(buf);
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", r->path);
    }
    r->fmt->pb = r->mem;
    r->fmt->flags |= AVFMT_FLAG_CUSTOM_IO; /* closing the demuxer leaves mem alone */
    *in = av_find_input_format("rawvideo");
    char size[32];
    snprintf(size, sizeof size, "%dx%d", r->heif.width, r->heif.height);
    if (!*in || av_dict_set(opts, "video_size", size, 0) < 0 ||
        av_dict_set(opts, "pixel_format", "rgb24", 0) < 0)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory (or no rawvideo demuxer)", r->path);
    return VTR_OK;
}

/* Closes the demuxer (and a HEIF image's reading context). */
static void close_demuxer(vtr_video_reader *r)
{
    avformat_close_input(&r->fmt);
    if (r->mem) {
        av_freep(&r->mem->buffer);
        avio_context_free(&r->mem);
    }
}

/* Opens the demuxer on r->path (and reads the stream parameters when probe is set). */
static vtr_status open_demuxer(vtr_video_reader *r, bool probe, vtr_error *err)
{
    const AVInputFormat *in = NULL;
    AVDictionary *opts = NULL;
    if (r->heif.rgb) {
        vtr_status st = open_heif_demuxer(r, &in, &opts, err);
        if (st != VTR_OK) {
            av_dict_free(&opts);
            return st;
        }
    }
    int ret = avformat_open_input(&r->fmt, r->path, in, &opts);
    av_dict_free(&opts);
    if (ret < 0) {
        if (ret == AVERROR_INVALIDDATA)
            return unreadable(r->path,
                              "not a video or image FFmpeg can read (unknown format, corrupt "
                              "or truncated)",
                              err);
        return vtr_fail(err, ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) ? VTR_ERR_IO
                                                                               : VTR_ERR_CODEC,
                        "%s: %s", r->path, av_err2str(ret));
    }
    if (probe && (ret = avformat_find_stream_info(r->fmt, NULL)) < 0)
        return codec_error(err, r->path, "reading stream parameters", ret);
    return VTR_OK;
}

static void discard_other_streams(vtr_video_reader *r)
{
    for (unsigned i = 0; i < r->fmt->nb_streams; i++)
        r->fmt->streams[i]->discard = (int)i == r->stream ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    r->st = r->fmt->streams[r->stream];
}

static void fill_info(vtr_video_reader *r)
{
    AVStream *st = r->st;
    vtr_video_info *in = &r->info;
    in->width = st->codecpar->width;
    in->height = st->codecpar->height;
    in->tb_num = st->time_base.num;
    in->tb_den = st->time_base.den;
    in->is_image = is_image_format(r->fmt->iformat->name) || r->heif.rgb || is_still_gif(r);
    in->start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    /* only the stream's own duration: the file's (AVFormatContext.duration) is the span
     * of all streams for some formats and the end time for others (Matroska) */
    in->duration = st->duration > 0 && st->duration != AV_NOPTS_VALUE ? st->duration : -1;
    in->declared_end = INT64_MIN;
    if (in->duration > 0) {
        in->declared_end = in->start + in->duration;
    } else if (r->fmt->duration > 0 && r->fmt->duration != AV_NOPTS_VALUE) {
        int64_t fstart = r->fmt->start_time != AV_NOPTS_VALUE ? r->fmt->start_time : 0;
        int64_t end = r->fmt->duration + (fstart < 0 ? fstart : 0);
        in->declared_end = av_rescale_q(end, AV_TIME_BASE_Q, st->time_base);
    }
    /* an MPEG program stream's duration is FFmpeg's estimate from the last time stamps of
     * the container, a frame or two short where a packet holds several pictures: it is
     * measured (vtr_video_reader_measure), against that estimate as the declared end */
    if (is_program_stream(r))
        in->duration = -1;
    AVRational rate = st->avg_frame_rate;
    in->fps = !in->is_image && rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0.0;
    in->nb_frames = st->nb_frames > 0 ? st->nb_frames : 0;
    AVRational sar = av_guess_sample_aspect_ratio(r->fmt, st, NULL);
    bool said = sar.num > 0 && sar.den > 0;
    in->sar_num = said ? sar.num : 1;
    in->sar_den = said ? sar.den : 1;
    size_t size = 0;
    const uint8_t *matrix = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
    in->orientation = matrix && size >= 9 * sizeof(int32_t)
                          ? vtr_orientation_from_matrix((const int32_t *)matrix)
                          : vtr_orientation_identity();
    const AVCodecDescriptor *desc = avcodec_descriptor_get(st->codecpar->codec_id);
    in->intra_only = in->is_image || (desc && (desc->props & AV_CODEC_PROP_INTRA_ONLY));
    /* a HEIF image: what the file holds, not the raw frame libheif made of it */
    in->codec = r->heif.rgb ? "heif" : r->dec->codec->name;
    in->format = r->heif.rgb ? "heif (libheif)" : r->fmt->iformat->name;
    in->hdr = vtr_hdr_name(vtr_hdr_kind_of(st->codecpar->color_trc));
}

/* DivX and Xvid store B-frames "packed" in AVI (a P-frame and the next B-frame in one
 * packet, an empty N-VOP later); FFmpeg's mpeg4_unpack_bframes filter gives every frame its
 * own packet again, and passes other MPEG-4 streams through unchanged. */
static vtr_status open_unpacker(vtr_video_reader *r, vtr_error *err)
{
    const AVBitStreamFilter *f = av_bsf_get_by_name("mpeg4_unpack_bframes");
    if (!f)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: this FFmpeg lacks the mpeg4_unpack_bframes filter", r->path);
    int ret = av_bsf_alloc(f, &r->unpack);
    if (ret >= 0)
        ret = avcodec_parameters_copy(r->unpack->par_in, r->st->codecpar);
    if (ret >= 0) {
        r->unpack->time_base_in = r->st->time_base;
        ret = av_bsf_init(r->unpack);
    }
    return ret < 0 ? codec_error(err, r->path, "unpacking B-frames", ret) : VTR_OK;
}

/* After a seek: no packet from before it may come out. */
static void reset_packets(vtr_video_reader *r)
{
    if (r->unpack)
        av_bsf_flush(r->unpack);
    r->unpack_flushed = false;
    vtr_packet_times_reset(&r->times);
    if (r->times_from == TIMES_BY_ORDER)
        vtr_poc_times_reset(&r->poc);
    r->source_eof = false;
    r->own.landing = -1;
}

vtr_status vtr_video_reader_open(const char *path, int threads, vtr_video_reader **out,
                                 vtr_error *err)
{
    *out = NULL;
    int64_t size;
    vtr_status st = vtr_regular_file(path, &size, err); /* a FIFO would block FFmpeg */
    if (st != VTR_OK)
        return st;
    if (size == 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: empty file", path);

    vtr_video_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    r->own.landing = -1;
    if (vtr_heif_is(path) && (st = vtr_heif_decode(path, &r->heif, err)) != VTR_OK)
        goto end;
    if ((st = open_demuxer(r, true, err)) != VTR_OK)
        goto end;
    /* the best video stream that is not cover art */
    const AVCodec *codec = NULL;
    int best = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (best < 0 || (r->fmt->streams[best]->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
        best = -1;
        for (unsigned i = 0; i < r->fmt->nb_streams; i++) {
            AVStream *s = r->fmt->streams[i];
            if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
                !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
                best = (int)i;
                break;
            }
        }
    }
    if (best < 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no video stream", path);
        goto end;
    }
    r->stream = best;
    discard_other_streams(r);
    AVCodecParameters *par = r->st->codecpar;
    codec = avcodec_find_decoder(par->codec_id);
    if (!codec) {
        if (par->codec_id == AV_CODEC_ID_NONE)
            st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: unknown video codec (tag %s)", path,
                          av_fourcc2str(par->codec_tag));
        else
            st = vtr_fail(err, VTR_ERR_UNSUPPORTED,
                          "%s: no decoder for codec '%s' in this FFmpeg", path,
                          avcodec_get_name(par->codec_id));
        goto end;
    }
    if (par->width <= 0 || par->height <= 0) {
        st = unreadable(path,
                        is_image_format(r->fmt->iformat->name)
                            ? "the picture's size is unreadable: a damaged header, or a "
                              "picture larger than FFmpeg decodes (over about 268 million pixels, "
                              "16384 x 16384)"
                            : "video stream without a frame size (corrupt?)",
                        err);
        goto end;
    }
    r->dec = avcodec_alloc_context3(codec);
    if (!r->dec) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    int ret;
    if (par->codec_id == AV_CODEC_ID_MPEG4 && (st = open_unpacker(r, err)) != VTR_OK)
        goto end;
    if ((ret = avcodec_parameters_to_context(r->dec, r->unpack ? r->unpack->par_out : par)) < 0) {
        st = codec_error(err, path, "decoder parameters", ret);
        goto end;
    }
    r->reorders = par->video_delay > 0;
    vtr_packet_times_init(&r->times, par->codec_id);
    if (vtr_packet_times_applies(par)) {
        r->times_from = TIMES_BY_TYPE;
    } else if (vtr_poc_times_applies(par, r->fmt->iformat->name)) {
        if ((st = vtr_poc_times_init(&r->poc, par, r->path, err)) != VTR_OK)
            goto end;
        r->times_from = TIMES_BY_ORDER;
    }
    if (!(r->next = av_packet_alloc())) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    r->dec->pkt_timebase = r->st->time_base;
    r->dec->thread_count = threads;
    /* slice threads only: FFmpeg 5.1's frame threads report a damaged frame late or not
     * at all, and with AV_EF_EXPLODE some damaged streams abort the process (an
     * assertion in libavcodec/decode.c) */
    r->dec->thread_type = FF_THREAD_SLICE;
    /* frames the decoder could only guess at (missing references) are not frames */
    r->dec->flags &= ~AV_CODEC_FLAG_OUTPUT_CORRUPT;
    /* damaged data is an error, not something to conceal and deliver; but TIFF's decoder
     * then refuses every tag it does not know, and nearly every TIFF (its own encoder's,
     * ImageMagick's, a scanner's) has one: ResolutionUnit */
    if (par->codec_id != AV_CODEC_ID_TIFF)
        r->dec->err_recognition |= AV_EF_EXPLODE;
    if ((ret = avcodec_open2(r->dec, codec, NULL)) < 0) {
        st = codec_error(err, path, "opening the decoder", ret);
        goto end;
    }
    fill_info(r);
    if (par->codec_id == AV_CODEC_ID_TIFF)
        r->info.orientation = vtr_orientation_from_exif(vtr_tiff_orientation(path));
end:
    if (st != VTR_OK) {
        vtr_video_reader_close(r);
        return st;
    }
    *out = r;
    return VTR_OK;
}

void vtr_video_reader_close(vtr_video_reader *r)
{
    if (!r)
        return;
    avcodec_free_context(&r->dec);
    av_bsf_free(&r->unpack);
    vtr_packet_times_free(&r->times);
    if (r->times_from == TIMES_BY_ORDER)
        vtr_poc_times_free(&r->poc);
    av_packet_free(&r->next);
    close_demuxer(r);
    vtr_heif_picture_free(&r->heif);
    free(r->own.k);
    free(r->path);
    free(r);
}

const vtr_video_info *vtr_video_reader_info(const vtr_video_reader *r)
{
    return &r->info;
}

const vtr_decode_stats *vtr_video_reader_stats(const vtr_video_reader *r)
{
    return &r->stats;
}

const char *vtr_video_reader_path(const vtr_video_reader *r)
{
    return r->path;
}

/* Bytes at the end of an MPEG program stream that hold its last frames' times (1 MiB:
 * 1 s of a DVD, 7 of a VCD). */
#define PROGRAM_STREAM_TAIL ((int64_t)1 << 20)

/* Seeks to the index's last keyframe that lies inside the file (a truncated file's
 * index may point past its end); again while a seek made the index longer (Matroska
 * reads its cues at the first seek), SEEKS_FOR_INDEX times at most (a damaged FLV's
 * index grew at every seek, for ever). An MPEG program stream goes to its last
 * PROGRAM_STREAM_TAIL bytes instead (or stays at the start of a shorter one): a keyframe
 * found by seeking to it there has lost its times (FFmpeg's parser gives them to the tail
 * of the frame before, which begins in the same packet of the container). True when no
 * seek failed (also when the index has no keyframe: the reader stays at the start). */
static bool seek_last_keyframe(vtr_video_reader *r)
{
    int64_t size = avio_size(r->fmt->pb);
    if (is_program_stream(r)) {
        if (size <= PROGRAM_STREAM_TAIL)
            return true;
        int ret = av_seek_frame(r->fmt, r->stream, size - PROGRAM_STREAM_TAIL, AVSEEK_FLAG_BYTE);
        reset_packets(r);
        return ret >= 0;
    }
    enum { SEEKS_FOR_INDEX = 4 };
    for (int seen = -1, n, seeks = 0;
         seeks < SEEKS_FOR_INDEX && (n = avformat_index_get_entries_count(r->st)) > seen;
         seen = n, seeks++) {
        const AVIndexEntry *last = NULL;
        for (int i = n - 1; i >= 0 && !last; i--) {
            const AVIndexEntry *e = avformat_index_get_entry(r->st, i);
            if (e && (e->flags & AVINDEX_KEYFRAME) && (size < 0 || e->pos < size))
                last = e;
        }
        if (!last)
            return true;
        int ret = av_seek_frame(r->fmt, r->stream, last->timestamp, AVSEEK_FLAG_BACKWARD);
        reset_packets(r);
        if (ret < 0)
            return false;
    }
    return true;
}

/* The index entries of r's stream, to give a reopened demuxer what this one learned
 * (NULL and *n 0 when there are none, or no memory for them: an index saves time, it
 * does not change what is decoded). */
static AVIndexEntry *index_copy(vtr_video_reader *r, int *n)
{
    *n = avformat_index_get_entries_count(r->st);
    AVIndexEntry *copy = *n > 0 ? malloc((size_t)*n * sizeof *copy) : NULL;
    for (int i = 0; copy && i < *n; i++)
        copy[i] = *avformat_index_get_entry(r->st, i);
    if (!copy)
        *n = 0;
    return copy;
}

vtr_status vtr_video_reader_untimed(const vtr_video_reader *r, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                    "%s: video packets without timestamps (a raw elementary stream?)", r->path);
}

/* The earliest pts and the latest end of the video packets from here to the end of the
 * file (INT64_MAX and INT64_MIN when there are none); *untimed: some had no timestamp. */
static vtr_status read_span(vtr_video_reader *r, int64_t *lo, int64_t *hi, bool *untimed,
                            vtr_error *err)
{
    AVPacket *pkt = av_packet_alloc();
    if (!pkt)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", r->path);
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    vtr_status st;
    for (;;) {
        bool eof;
        if ((st = vtr_video_reader_read(r, pkt, &eof, err)) != VTR_OK || eof)
            break;
        if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: truncated or corrupt data", r->path);
            break;
        }
        int64_t pts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
        if (pts == AV_NOPTS_VALUE) {
            *untimed = true;
            continue;
        }
        if (pts < *lo)
            *lo = pts;
        int64_t end = pts + (pkt->duration > 0 ? pkt->duration : 0);
        if (end > *hi)
            *hi = end;
    }
    av_packet_free(&pkt);
    return st;
}

vtr_status vtr_video_reader_measure(vtr_video_reader *r, vtr_error *err)
{
    /* from the last indexed keyframe: one GOP of demuxing instead of the file; else it
     * all from the start */
    bool start_known = r->st->start_time != AV_NOPTS_VALUE && seek_last_keyframe(r);
    int64_t lo, hi;
    bool untimed = false;
    vtr_status st = read_span(r, &lo, &hi, &untimed, err);
    /* nothing after the last "keyframe": an index that lists what holds no frame
     * (GStreamer's FLV: the stream's end marker), so all of it from the start */
    if (st == VTR_OK && hi == INT64_MIN && start_known &&
        (st = vtr_video_reader_rewind(r, err)) == VTR_OK)
        st = read_span(r, &lo, &hi, &untimed, err);
    if (st != VTR_OK)
        return st;
    if (hi == INT64_MIN)
        return untimed ? vtr_video_reader_untimed(r, err)
                       : vtr_fail(err, VTR_ERR_FORMAT, "%s: no video frames", r->path);
    if (!start_known && r->st->start_time == AV_NOPTS_VALUE)
        r->info.start = lo;
    if ((st = vtr_video_reader_check_end(r, hi, err)) != VTR_OK)
        return st;
    r->info.duration = hi > r->info.start ? hi - r->info.start : 0;
    /* the reopened demuxer keeps the keyframes found here (Matroska's cues, or those read),
     * so that the frame picker and the stretch plan see them before any seek */
    int n;
    AVIndexEntry *index = index_copy(r, &n);
    st = vtr_video_reader_rewind(r, err);
    for (int i = 0; st == VTR_OK && i < n; i++)
        av_add_index_entry(r->st, index[i].pos, index[i].timestamp, index[i].size,
                           index[i].min_distance, index[i].flags);
    free(index);
    r->stats = (vtr_decode_stats){0};
    return st;
}

/* Appends a keyframe to r's own index; false when it breaks the order (the time stamps
 * reset or wrapped, or a position is unknown) or there is no memory: then no index. */
static bool own_append(vtr_video_reader *r, const AVPacket *pkt, int64_t num)
{
    int n = r->own.n;
    const own_keyframe *last = n ? &r->own.k[n - 1] : NULL;
    if (pkt->dts == AV_NOPTS_VALUE || pkt->pos < 0 ||
        (last && (pkt->dts <= last->dts || pkt->pos <= last->pos)))
        return false;
    if (n == r->own.cap) {
        int cap = n ? 2 * n : 256;
        own_keyframe *k = realloc(r->own.k, (size_t)cap * sizeof *k);
        if (!k)
            return false;
        r->own.k = k;
        r->own.cap = cap;
    }
    r->own.k[n] = (own_keyframe){pkt->dts, pkt->pts, pkt->pos, num};
    r->own.n = n + 1;
    return true;
}

vtr_status vtr_video_reader_index(vtr_video_reader *r, vtr_error *err)
{
    if ((strcmp(r->fmt->iformat->name, "mpegts") != 0 && !is_program_stream(r)) || r->own.n > 0)
        return VTR_OK;
    AVPacket *pkt = av_packet_alloc();
    bool ok = pkt != NULL, eof = false;
    for (int64_t num = 0; ok; num++) {
        vtr_error ignored;
        if (vtr_video_reader_read(r, pkt, &eof, &ignored) != VTR_OK) /* decoding says it */
            ok = false;
        else if (eof)
            break;
        else if (pkt->flags & AV_PKT_FLAG_KEY)
            ok = own_append(r, pkt, num);
    }
    av_packet_free(&pkt);
    if (!ok || r->own.n < 2)
        r->own.n = 0;
    vtr_status st = vtr_video_reader_rewind(r, err);
    r->stats = (vtr_decode_stats){0};
    return st;
}

vtr_status vtr_video_reader_share_index(vtr_video_reader *dst, const vtr_video_reader *src,
                                        vtr_error *err)
{
    int n = src->own.n;
    if (n == 0)
        return VTR_OK;
    free(dst->own.k);
    dst->own.n = dst->own.cap = 0;
    if (!(dst->own.k = malloc((size_t)n * sizeof *dst->own.k)))
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", dst->path);
    memcpy(dst->own.k, src->own.k, (size_t)n * sizeof *dst->own.k);
    dst->own.n = dst->own.cap = n;
    return VTR_OK;
}

vtr_status vtr_video_reader_check_end(const vtr_video_reader *r, int64_t end, vtr_error *err)
{
    const vtr_video_info *in = &r->info;
    if (in->declared_end == INT64_MIN || end == INT64_MIN)
        return VTR_OK;
    double second = (double)in->tb_den / in->tb_num;
    double slack = 0.5 * second, span = (double)(in->declared_end - in->start);
    if (span * 0.02 > slack)
        slack = span * 0.02;
    if (in->fps > 0 && 2.0 * second / in->fps > slack)
        slack = 2.0 * second / in->fps;
    if ((double)end < (double)in->declared_end - slack)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: video data ends at %.3f s, before the declared end %.3f s "
                        "(truncated?)",
                        r->path, vtr_video_reader_seconds(r, end),
                        vtr_video_reader_seconds(r, in->declared_end));
    return VTR_OK;
}

/* The next packet of the video stream from the demuxer; *eof at its end. */
static vtr_status demux(vtr_video_reader *r, AVPacket *pkt, bool *eof, vtr_error *err)
{
    for (;;) {
        av_packet_unref(pkt);
        int ret = av_read_frame(r->fmt, pkt);
        if (ret == AVERROR_EOF) {
            *eof = true;
            return VTR_OK;
        }
        if (ret < 0)
            return codec_error(err, r->path, "reading", ret);
        if (pkt->stream_index != r->stream)
            continue;
        r->stats.packets_read++;
        if (r->own.landing < 0)
            return VTR_OK;
        /* at the byte of an indexed keyframe (vtr_video_reader_seek): what comes before it
         * (in a program stream, the tail of the frame before, which began in the same
         * packet of the container) is not read, and the keyframe gets the times and
         * position the index saw, where the parser lost them with that tail */
        if (!(pkt->flags & AV_PKT_FLAG_KEY))
            continue;
        const own_keyframe *k = &r->own.k[r->own.landing];
        r->own.landing = -1;
        if (pkt->dts == AV_NOPTS_VALUE && pkt->pts == AV_NOPTS_VALUE) {
            pkt->dts = k->dts;
            pkt->pts = k->pts;
        }
        if (pkt->pos < 0)
            pkt->pos = k->pos;
        return VTR_OK;
    }
}

/* The next packet from the demuxer, through the unpacking filter when there is one. */
static vtr_status next_source_packet(vtr_video_reader *r, AVPacket *pkt, bool *eof,
                                     vtr_error *err)
{
    *eof = false;
    if (!r->unpack)
        return demux(r, pkt, eof, err);
    for (;;) {
        av_packet_unref(pkt);
        int ret = av_bsf_receive_packet(r->unpack, pkt);
        if (ret >= 0)
            return VTR_OK;
        if (ret == AVERROR_EOF) {
            *eof = true;
            return VTR_OK;
        }
        if (ret != AVERROR(EAGAIN))
            return codec_error(err, r->path, "unpacking B-frames", ret);
        bool end = false;
        vtr_status st = demux(r, r->next, &end, err);
        if (st != VTR_OK)
            return st;
        if (end && r->unpack_flushed) {
            *eof = true;
            return VTR_OK;
        }
        r->unpack_flushed = end;
        if ((ret = av_bsf_send_packet(r->unpack, end ? NULL : r->next)) < 0)
            return codec_error(err, r->path, "unpacking B-frames", ret);
    }
}

/* A stream that reorders frames but whose container gives no pts, and neither
 * packet_times.h nor poc_times.h places (a codec other than MPEG-1/2/4 Part 2, H.264 and
 * HEVC, or H.264 in another container than AVI): taken at its dts, the wrong frames would
 * be delivered; refused. The first packets' pts tell: a container that has them (MPEG-TS)
 * may still leave one out. (No encoder at hand writes such a stream: untested.) */
static vtr_status check_pts(vtr_video_reader *r, const AVPacket *pkt, vtr_error *err)
{
    if (pkt->pts != AV_NOPTS_VALUE)
        r->pts_seen = true;
    else if (!r->pts_seen && r->reorders && pkt->dts != AV_NOPTS_VALUE)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: %s with B-frames, in a container that gives no presentation times "
                        "(%s): which frame is shown when is unknown; re-encode it (ffmpeg -i "
                        "FILE out.mp4)",
                        r->path, r->info.codec, r->info.format);
    return VTR_OK;
}

vtr_status vtr_video_reader_read(vtr_video_reader *r, AVPacket *pkt, bool *eof, vtr_error *err)
{
    *eof = false;
    if (r->times_from == TIMES_GIVEN) {
        vtr_status st = next_source_packet(r, pkt, eof, err);
        return st == VTR_OK && !*eof ? check_pts(r, pkt, err) : st;
    }
    /* through the times of packet_times.h or poc_times.h */
    for (;;) {
        av_packet_unref(pkt);
        if (r->times_from == TIMES_BY_TYPE ? vtr_packet_times_pop(&r->times, pkt, r->source_eof)
                                           : vtr_poc_times_pop(&r->poc, pkt, r->source_eof))
            return VTR_OK;
        if (r->source_eof) {
            *eof = true;
            return VTR_OK;
        }
        vtr_status st = next_source_packet(r, pkt, &r->source_eof, err);
        if (st == VTR_OK && !r->source_eof)
            st = r->times_from == TIMES_BY_TYPE ? vtr_packet_times_push(&r->times, pkt, err)
                                                : vtr_poc_times_push(&r->poc, pkt, err);
        if (st != VTR_OK)
            return st;
    }
}

/* The last of the reader's own keyframes with dts <= ts; -1 when none. */
static int own_keyframe_before(const vtr_video_reader *r, int64_t ts)
{
    int lo = 0, hi = r->own.n; /* the answer is lo - 1 */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->own.k[mid].dts <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

bool vtr_video_reader_keyframe_before(vtr_video_reader *r, int64_t ts, int64_t *kf_ts,
                                      int64_t *kf_pos)
{
    if (r->own.n > 0) {
        int i = own_keyframe_before(r, ts);
        if (i < 0)
            return false;
        *kf_ts = r->own.k[i].dts;
        *kf_pos = r->own.k[i].pos;
        return true;
    }
    int idx = av_index_search_timestamp(r->st, ts, AVSEEK_FLAG_BACKWARD);
    if (idx < 0)
        return false;
    const AVIndexEntry *e = avformat_index_get_entry(r->st, idx);
    if (!e)
        return false;
    *kf_ts = e->timestamp;
    *kf_pos = e->pos;
    return true;
}

bool vtr_video_reader_keyframe_preceding(vtr_video_reader *r, int64_t pos, int64_t ts,
                                         int64_t *kf_ts)
{
    if (r->own.n > 0) {
        int i = r->own.n - 1;
        while (i >= 0 && (pos >= 0 ? r->own.k[i].pos >= pos : r->own.k[i].dts >= ts))
            i--;
        if (i >= 0)
            *kf_ts = r->own.k[i].dts;
        return i >= 0;
    }
    bool found = false;
    int n = avformat_index_get_entries_count(r->st);
    for (int i = 0; i < n; i++) {
        const AVIndexEntry *e = avformat_index_get_entry(r->st, i);
        if (!e || !(e->flags & AVINDEX_KEYFRAME))
            continue;
        bool before = pos >= 0 && e->pos >= 0 ? e->pos < pos : e->timestamp < ts;
        if (before && (!found || e->timestamp > *kf_ts)) {
            *kf_ts = e->timestamp;
            found = true;
        }
    }
    return found;
}

/* The container's index has an entry for every frame (mp4/mov, AVI). */
/* Index entries before entry `end` of frames an edit list hides (decoded, not shown). */
static int hidden_entries(const vtr_video_reader *r, int end)
{
    int n = 0;
    for (int i = 0; i < end; i++)
        n += (avformat_index_get_entry(r->st, i)->flags & AVINDEX_DISCARD_FRAME) != 0;
    return n;
}

static bool indexes_every_frame(const vtr_video_reader *r)
{
    int n = avformat_index_get_entries_count(r->st);
    /* with an edit list, FFmpeg's mp4 demuxer (the only one that hides entries) leaves the
     * samples before the edit that no shown frame needs out of its index, and hides those
     * it needs: the container's count is then larger, and the index still complete */
    return n > 0 && (r->st->nb_frames == n || hidden_entries(r, n) > 0);
}

bool vtr_video_reader_jumps_tell_all(vtr_video_reader *r)
{
    return r->own.n > 0 || indexes_every_frame(r) || !r->reorders;
}

int64_t vtr_video_reader_frame_number(vtr_video_reader *r, int64_t dts)
{
    if (r->own.n > 0) {
        int i = dts != AV_NOPTS_VALUE ? own_keyframe_before(r, dts) : -1;
        return i >= 0 && r->own.k[i].dts == dts ? r->own.k[i].num : -1;
    }
    if (!indexes_every_frame(r) || dts == AV_NOPTS_VALUE)
        return -1;
    int idx = av_index_search_timestamp(r->st, dts, AVSEEK_FLAG_BACKWARD | AVSEEK_FLAG_ANY);
    const AVIndexEntry *e = idx >= 0 ? avformat_index_get_entry(r->st, idx) : NULL;
    /* frames an edit list hides are not numbered */
    return e && e->timestamp == dts ? idx - hidden_entries(r, idx) : -1;
}

vtr_status vtr_video_reader_seek(vtr_video_reader *r, int64_t ts, vtr_error *err)
{
    r->stats.seeks++;
    int ret, i = -1;
    if (r->own.n > 0) {
        /* to the byte where the keyframe's packet begins: the demuxer's own seek (a
         * search by time stamps) need not land on a keyframe */
        i = own_keyframe_before(r, ts);
        i = i > 0 ? i : 0;
        ret = av_seek_frame(r->fmt, r->stream, r->own.k[i].pos, AVSEEK_FLAG_BYTE);
    } else {
        ret = av_seek_frame(r->fmt, r->stream, ts, AVSEEK_FLAG_BACKWARD);
    }
    if (ret < 0)
        return vtr_fail(err, VTR_ERR_CODEC, "%s: seeking to %.3f s: %s", r->path,
                        vtr_video_reader_seconds(r, ts), av_err2str(ret));
    reset_packets(r);
    r->own.landing = i;
    avcodec_flush_buffers(r->dec);
    return VTR_OK;
}

vtr_status vtr_video_reader_rewind(vtr_video_reader *r, vtr_error *err)
{
    r->stats.seeks++;
    enum AVCodecID id = r->st->codecpar->codec_id;
    close_demuxer(r);
    vtr_status st = open_demuxer(r, false, err);
    if (st != VTR_OK)
        return st;
    if ((unsigned)r->stream >= r->fmt->nb_streams ||
        r->fmt->streams[r->stream]->codecpar->codec_id != id) {
        /* streams found only by probing packets: probe again */
        int ret = avformat_find_stream_info(r->fmt, NULL);
        if (ret < 0)
            return codec_error(err, r->path, "reading stream parameters", ret);
        if ((unsigned)r->stream >= r->fmt->nb_streams ||
            r->fmt->streams[r->stream]->codecpar->codec_id != id)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: the streams changed on reopening",
                            r->path);
    }
    discard_other_streams(r);
    reset_packets(r);
    avcodec_flush_buffers(r->dec);
    return VTR_OK;
}

vtr_status vtr_video_reader_send(vtr_video_reader *r, const AVPacket *pkt, bool decode_nonref,
                                 vtr_error *err)
{
    r->dec->skip_frame = decode_nonref ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
    int ret = avcodec_send_packet(r->dec, pkt);
    if (ret == AVERROR_EOF && !pkt)
        return VTR_OK; /* already draining */
    if (ret < 0)
        return vtr_fail(err, VTR_ERR_CODEC, "%s: decoding the packet at %.3f s: %s", r->path,
                        pkt && pkt->pts != AV_NOPTS_VALUE
                            ? vtr_video_reader_seconds(r, pkt->pts)
                            : 0.0,
                        av_err2str(ret));
    if (pkt)
        r->stats.packets_sent++;
    return VTR_OK;
}

vtr_status vtr_video_reader_receive(vtr_video_reader *r, AVFrame *frame, bool *got,
                                    vtr_error *err)
{
    *got = false;
    av_frame_unref(frame);
    int ret = avcodec_receive_frame(r->dec, frame);
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
        return VTR_OK;
    if (ret < 0)
        return codec_error(err, r->path, "decoding", ret);
    r->stats.frames_decoded++;
    *got = true;
    if (r->info.is_image) { /* a photo's orientation comes with its picture */
        AVFrameSideData *sd = av_frame_get_side_data(frame, AV_FRAME_DATA_DISPLAYMATRIX);
        AVDictionaryEntry *exif;
        if (sd && sd->size >= 9 * sizeof(int32_t))
            r->info.orientation = vtr_orientation_from_matrix((const int32_t *)sd->data);
        else if ((exif = av_dict_get(frame->metadata, "Orientation", NULL, 0)))
            r->info.orientation = vtr_orientation_from_exif(atoi(exif->value)); /* WebP's EXIF */
    }
    return VTR_OK;
}

void vtr_video_reader_flush(vtr_video_reader *r)
{
    avcodec_flush_buffers(r->dec);
}

double vtr_video_reader_seconds(const vtr_video_reader *r, int64_t ticks)
{
    return (double)ticks * r->info.tb_num / r->info.tb_den;
}
