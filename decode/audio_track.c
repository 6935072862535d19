#define _POSIX_C_SOURCE 200809L
#include "audio_track.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <sndfile.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/file.h"

#define CHUNK 4096 /* output samples per conversion call */

static vtr_status codec_error(vtr_error *err, const char *path, const char *what, int ret)
{
    return vtr_fail(err, VTR_ERR_CODEC, "%s: %s: %s", path, what, av_err2str(ret));
}

static int sndfile_format(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strcasecmp(dot, ".wav"))
        return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    if (dot && !strcasecmp(dot, ".flac"))
        return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    return 0;
}

typedef struct audio_job {
    const char *src, *dst;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    SwrContext *swr; /* set up for the frames of in_layout, in_format, in_rate */
    AVChannelLayout in_layout;
    int in_format, in_rate;
    AVPacket *pkt;
    AVFrame *frame;
    float *out;
    SNDFILE *snd;
    vtr_audio_result *res;
} audio_job;

static vtr_status write_samples(audio_job *j, int n, vtr_error *err)
{
    if (n <= 0)
        return VTR_OK;
    if (sf_writef_float(j->snd, j->out, n) != n)
        return vtr_fail(err, VTR_ERR_IO, "%s: %s", j->dst, sf_strerror(j->snd));
    j->res->samples += n;
    return VTR_OK;
}

/* Resamples the frame (NULL: flush) and writes what comes out. */
static vtr_status convert(audio_job *j, const AVFrame *frame, vtr_error *err)
{
    if (!j->swr)
        return VTR_OK;
    const uint8_t **in = frame ? (const uint8_t **)frame->extended_data : NULL;
    int in_count = frame ? frame->nb_samples : 0;
    for (;;) {
        int n = swr_convert(j->swr, (uint8_t **)&j->out, CHUNK, in, in_count);
        if (n < 0)
            return codec_error(err, j->src, "resampling", n);
        vtr_status st = write_samples(j, n, err);
        if (st != VTR_OK)
            return st;
        if (n < CHUNK)
            return VTR_OK;
        in = NULL;
        in_count = 0;
    }
}

/* Sets the resampler up for the frame's channels, sample format and rate: at the first
 * frame, and again where the stream changes them (files joined end to end, a broadcast
 * switching from stereo to 5.1, HE-AAC doubling the rate its header gave), after
 * flushing what the old one holds. The frame's own parameters, not the decoder's. */
static vtr_status fit_resampler(audio_job *j, const AVFrame *frame, vtr_error *err)
{
    AVChannelLayout layout = {0};
    int ret = 0;
    if (frame->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
        av_channel_layout_default(&layout, frame->ch_layout.nb_channels);
    else
        ret = av_channel_layout_copy(&layout, &frame->ch_layout);
    if (ret < 0)
        return codec_error(err, j->src, "reading the audio's channel layout", ret);
    if (j->swr && frame->format == j->in_format && frame->sample_rate == j->in_rate &&
        !av_channel_layout_compare(&layout, &j->in_layout)) {
        av_channel_layout_uninit(&layout);
        return VTR_OK;
    }
    vtr_status st = convert(j, NULL, err);
    swr_free(&j->swr);
    av_channel_layout_uninit(&j->in_layout);
    j->in_layout = layout;
    j->in_format = frame->format;
    j->in_rate = frame->sample_rate;
    if (st != VTR_OK)
        return st;
    if (layout.nb_channels < 1 || frame->sample_rate <= 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: audio of %d channels at %d Hz", j->src,
                        layout.nb_channels, frame->sample_rate);
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    ret = swr_alloc_set_opts2(&j->swr, &mono, AV_SAMPLE_FMT_FLT, j->res->rate, &layout,
                              frame->format, frame->sample_rate, 0, NULL);
    /* mixing down, the channels' gains sum to 1 (as FFmpeg does for integer output):
     * libswresample leaves them unscaled for float output, and a loud 5.1 track mixed at
     * 3.4 times its level would clip */
    if (ret >= 0)
        ret = av_opt_set_double(j->swr, "rematrix_maxval", 1.0, 0);
    if (ret >= 0)
        ret = swr_init(j->swr);
    if (ret < 0) {
        swr_free(&j->swr);
        return codec_error(err, j->src, "setting up the resampler", ret);
    }
    return VTR_OK;
}

static vtr_status decode_packet(audio_job *j, const AVPacket *pkt, vtr_error *err)
{
    int ret = avcodec_send_packet(j->dec, pkt);
    if (ret < 0 && ret != AVERROR_EOF)
        return codec_error(err, j->src, "decoding audio", ret);
    for (;;) {
        ret = avcodec_receive_frame(j->dec, j->frame);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return VTR_OK;
        if (ret < 0)
            return codec_error(err, j->src, "decoding audio", ret);
        vtr_status st = fit_resampler(j, j->frame, err);
        if (st == VTR_OK)
            st = convert(j, j->frame, err);
        av_frame_unref(j->frame);
        if (st != VTR_OK)
            return st;
    }
}

vtr_status vtr_audio_extract(const char *src, const char *dst, int rate,
                             vtr_audio_result *res, vtr_error *err)
{
    memset(res, 0, sizeof *res);
    res->rate = rate;
    int format = sndfile_format(dst);
    if (!format)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: audio files end in .wav or .flac", dst);
    if (rate < 1000 || rate > 384000)
        return vtr_fail(err, VTR_ERR_INVALID, "audio rate %d Hz out of range", rate);
    audio_job j = {.src = src, .dst = dst, .res = res};
    vtr_atomic_file file = {0};
    bool file_open = false;
    vtr_status st = VTR_OK;
    int ret = avformat_open_input(&j.fmt, src, NULL, NULL);
    if (ret < 0) {
        st = vtr_fail(err, VTR_ERR_CODEC, "%s: %s", src, av_err2str(ret));
        goto end;
    }
    if ((ret = avformat_find_stream_info(j.fmt, NULL)) < 0) {
        st = codec_error(err, src, "reading stream parameters", ret);
        goto end;
    }
    int idx = av_find_best_stream(j.fmt, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
    if (idx < 0) {
        snprintf(res->reason, sizeof res->reason, "no audio stream");
        goto end;
    }
    AVStream *stream = j.fmt->streams[idx];
    for (unsigned i = 0; i < j.fmt->nb_streams; i++)
        if ((int)i != idx)
            j.fmt->streams[i]->discard = AVDISCARD_ALL;
    const AVCodec *codec = avcodec_find_decoder(stream->codecpar->codec_id);
    if (!codec) {
        st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: no decoder for audio codec '%s'", src,
                      avcodec_get_name(stream->codecpar->codec_id));
        goto end;
    }
    snprintf(res->codec, sizeof res->codec, "%s", codec->name);
    res->start_time = stream->start_time != AV_NOPTS_VALUE
                          ? (double)stream->start_time * av_q2d(stream->time_base)
                          : 0.0;
    j.dec = avcodec_alloc_context3(codec);
    j.pkt = av_packet_alloc();
    j.frame = av_frame_alloc();
    j.out = av_malloc(CHUNK * sizeof(float));
    if (!j.dec || !j.pkt || !j.frame || !j.out) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", src);
        goto end;
    }
    if ((ret = avcodec_parameters_to_context(j.dec, stream->codecpar)) < 0 ||
        (ret = avcodec_open2(j.dec, codec, NULL)) < 0) {
        st = codec_error(err, src, "opening the audio decoder", ret);
        goto end;
    }
    if ((st = vtr_atomic_open(&file, dst, err)) != VTR_OK)
        goto end;
    file_open = true;
    SF_INFO info = {.samplerate = rate, .channels = 1, .format = format};
    j.snd = sf_open_fd(fileno(file.fp), SFM_WRITE, &info, 0);
    if (!j.snd) {
        st = vtr_fail(err, VTR_ERR_IO, "%s: %s", dst, sf_strerror(NULL));
        goto end;
    }
    sf_command(j.snd, SFC_SET_CLIPPING, NULL, SF_TRUE);
    for (;;) {
        ret = av_read_frame(j.fmt, j.pkt);
        if (ret == AVERROR_EOF)
            break;
        if (ret < 0) {
            st = codec_error(err, src, "reading audio", ret);
            goto end;
        }
        if (j.pkt->stream_index == idx) {
            if (j.pkt->flags & AV_PKT_FLAG_CORRUPT) {
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s: truncated or corrupt audio data", src);
                goto end;
            }
            st = decode_packet(&j, j.pkt, err);
        }
        av_packet_unref(j.pkt);
        if (st != VTR_OK)
            goto end;
    }
    if ((st = decode_packet(&j, NULL, err)) != VTR_OK || (st = convert(&j, NULL, err)) != VTR_OK)
        goto end;
    if (sf_close(j.snd) != 0) {
        j.snd = NULL;
        st = vtr_fail(err, VTR_ERR_IO, "%s: finishing the audio file failed", dst);
        goto end;
    }
    j.snd = NULL;
    file_open = false;
    if ((st = vtr_atomic_commit(&file, err)) != VTR_OK)
        goto end;
    res->written = true;
end:
    if (j.snd)
        sf_close(j.snd);
    if (file_open)
        vtr_atomic_abort(&file);
    av_free(j.out);
    av_frame_free(&j.frame);
    av_packet_free(&j.pkt);
    swr_free(&j.swr);
    av_channel_layout_uninit(&j.in_layout);
    avcodec_free_context(&j.dec);
    avformat_close_input(&j.fmt);
    return st;
}
