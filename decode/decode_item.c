#define _POSIX_C_SOURCE 200809L
#include "decode_item.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode/audio_track.h"
#include "decode/frame_picker.h"
#include "decode/video_reader.h"

void vtr_decode_options_defaults(vtr_decode_options *o)
{
    memset(o, 0, sizeof *o);
    o->sampler.mode = VTR_SAMPLE_ALL;
    o->geometry.resize = VTR_RESIZE_SHORTER_SIDE;
    o->geometry.crop = VTR_CROP_CENTER;
    o->audio_rate = 16000;
}

void vtr_decoded_item_free(vtr_decoded_item *item)
{
    free(item->frames.data);
    item->frames.data = NULL;
    json_decref(item->meta);
    item->meta = NULL;
}

/* What the sink fills while frames come out. */
typedef struct frame_store {
    const vtr_video_reader *r;
    const vtr_geometry_request *request;
    vtr_frame_converter *conv;
    vtr_frame_geometry geom;
    size_t frame_bytes;  /* 0 until the first frame plans the geometry */
    uint8_t *rgb;        /* capacity frames of frame_bytes; grown as frames come (not
                            reserved for every target: a damaged header that declares days
                            of video would have the first frame ask for gigabytes) */
    int64_t *pts;
    int64_t *index;
    int64_t count, capacity;
    bool indices_known;
} frame_store;

static vtr_status store_reserve(frame_store *s, int64_t n, vtr_error *err)
{
    if (n <= s->capacity)
        return VTR_OK;
    int64_t cap = s->capacity ? s->capacity : 16;
    while (cap < n)
        cap *= 2;
    if ((size_t)cap > SIZE_MAX / s->frame_bytes)
        return vtr_fail(err, VTR_ERR_NOMEM, "too many frames");
    uint8_t *rgb = realloc(s->rgb, (size_t)cap * s->frame_bytes);
    if (rgb)
        s->rgb = rgb;
    int64_t *pts = rgb ? realloc(s->pts, (size_t)cap * sizeof *pts) : NULL;
    if (pts)
        s->pts = pts;
    int64_t *index = pts ? realloc(s->index, (size_t)cap * sizeof *index) : NULL;
    if (index)
        s->index = index;
    if (!index)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld frames of %zu bytes",
                        (long long)cap, s->frame_bytes);
    s->capacity = cap;
    return VTR_OK;
}

/* The output geometry, planned at the first frame: a photo's orientation (EXIF) comes
 * with its decoded picture (video_reader.h). */
static vtr_status store_plan(frame_store *s, vtr_error *err)
{
    const vtr_video_info *in = vtr_video_reader_info(s->r);
    const char *path = vtr_video_reader_path(s->r);
    vtr_status st = vtr_frame_geometry_plan(in->width, in->height, &in->orientation,
                                            s->request, &s->geom, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", path);
        return st;
    }
    s->frame_bytes = (size_t)s->geom.out_w * s->geom.out_h * 3;
    return VTR_OK;
}

static vtr_status store_frame(void *ctx, const AVFrame *frame, int64_t pts, int64_t frame_index,
                              int64_t first_slot, int64_t n_slots, vtr_error *err)
{
    frame_store *s = ctx;
    vtr_status st = s->frame_bytes ? VTR_OK : store_plan(s, err);
    if (st == VTR_OK)
        st = store_reserve(s, first_slot + n_slots, err);
    if (st != VTR_OK)
        return st;
    uint8_t *dst = s->rgb + (size_t)first_slot * s->frame_bytes;
    if ((st = vtr_frame_convert(s->conv, frame, &s->geom, dst, err)) != VTR_OK)
        return st;
    for (int64_t k = 0; k < n_slots; k++) {
        if (k)
            memcpy(dst + (size_t)k * s->frame_bytes, dst, s->frame_bytes);
        s->pts[first_slot + k] = pts;
        s->index[first_slot + k] = frame_index;
    }
    if (frame_index < 0)
        s->indices_known = false;
    if (first_slot + n_slots > s->count)
        s->count = first_slot + n_slots;
    return VTR_OK;
}

static json_t *sampler_json(const vtr_sampler *s)
{
    char rate[64];
    switch (s->mode) {
    case VTR_SAMPLE_FRAMES: return json_pack("{s:s, s:I}", "mode", "frames", "n", (json_int_t)s->n);
    case VTR_SAMPLE_EVERY: return json_pack("{s:s, s:I}", "mode", "every", "n", (json_int_t)s->n);
    case VTR_SAMPLE_FPS:
        if (s->fps_den == 1)
            snprintf(rate, sizeof rate, "%lld", (long long)s->fps_num);
        else
            snprintf(rate, sizeof rate, "%lld/%lld", (long long)s->fps_num,
                     (long long)s->fps_den);
        return json_pack("{s:s, s:s}", "mode", "fps", "rate", rate);
    case VTR_SAMPLE_KEYFRAMES: return json_pack("{s:s}", "mode", "keyframes");
    default: return json_pack("{s:s}", "mode", "all");
    }
}

static json_t *real_or_null(double v, bool known)
{
    return known ? json_real(v) : json_null();
}

static json_t *build_meta(const char *path, const vtr_video_reader *r, const frame_store *s,
                          const vtr_decode_options *o, const int64_t *targets,
                          int64_t n_targets)
{
    const vtr_video_info *in = vtr_video_reader_info(r);
    const vtr_decode_stats *ds = vtr_video_reader_stats(r);
    json_t *ts = json_array(), *pts = json_array(), *idx = json_array();
    for (int64_t i = 0; i < s->count; i++) {
        json_array_append_new(ts, json_real(vtr_video_reader_seconds(r, s->pts[i])));
        json_array_append_new(pts, json_integer(s->pts[i]));
        json_array_append_new(idx, json_integer(s->index[i]));
    }
    char tb[48];
    snprintf(tb, sizeof tb, "%d/%d", in->tb_num, in->tb_den);
    json_t *m = json_object();
    json_object_set_new(m, "source", json_string(path));
    json_object_set_new(m, "width", json_integer(s->geom.out_w));
    json_object_set_new(m, "height", json_integer(s->geom.out_h));
    json_object_set_new(m, "frames", json_integer(s->count));
    json_object_set_new(m, "timestamps", ts);
    json_object_set_new(m, "pts", pts);
    json_object_set_new(m, "time_base", json_string(tb));
    if (s->indices_known) {
        json_object_set_new(m, "frame_indices", idx);
    } else {
        json_decref(idx);
        json_object_set_new(m, "frame_indices", json_null());
    }
    if (targets) {
        json_t *tt = json_array();
        for (int64_t i = 0; i < n_targets; i++)
            json_array_append_new(tt, json_real(vtr_video_reader_seconds(r, targets[i])));
        json_object_set_new(m, "target_times", tt);
    }
    json_object_set_new(m, "start_time", json_real(vtr_video_reader_seconds(r, in->start)));
    json_object_set_new(m, "duration", real_or_null(vtr_video_reader_seconds(r, in->duration),
                                                    in->duration >= 0));
    json_object_set_new(m, "fps", real_or_null(in->fps, in->fps > 0));
    json_object_set_new(m, "image", json_boolean(in->is_image));
    json_object_set_new(m, "rotation", json_integer(in->orientation.rotation));
    json_object_set_new(m, "mirrored", json_boolean(in->orientation.mirrored));
    json_object_set_new(m, "source_width", json_integer(in->width));
    json_object_set_new(m, "source_height", json_integer(in->height));
    json_object_set_new(m, "codec", json_string(in->codec));
    json_object_set_new(m, "sampler", sampler_json(&o->sampler));
    if (o->normalize)
        json_object_set_new(m, "normalize",
                            json_pack("{s:[f,f,f], s:[f,f,f]}", "mean", o->mean[0], o->mean[1],
                                      o->mean[2], "std", o->std[0], o->std[1], o->std[2]));
    json_object_set_new(m, "decode",
                        json_pack("{s:I, s:I, s:I, s:I}", "packets_read",
                                  (json_int_t)ds->packets_read, "packets_sent",
                                  (json_int_t)ds->packets_sent, "frames_decoded",
                                  (json_int_t)ds->frames_decoded, "seeks",
                                  (json_int_t)ds->seeks));
    return m;
}

vtr_status vtr_decode_item(const char *path, const vtr_decode_options *o,
                           const char *audio_path, vtr_decoded_item *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_video_reader *r = NULL;
    frame_store s = {.indices_known = true};
    int64_t *targets = NULL, n_targets = 0, delivered = 0;
    json_t *meta = NULL;
    bool audio_written = false;
    vtr_status st = vtr_video_reader_open(path, o->threads, &r, err);
    if (st != VTR_OK)
        goto end;
    const vtr_video_info *in = vtr_video_reader_info(r);
    if (in->duration < 0 && (st = vtr_video_reader_measure(r, err)) != VTR_OK)
        goto end;
    s.r = r;
    s.request = &o->geometry;
    if (!(s.conv = vtr_frame_converter_new())) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }

    vtr_pick_plan plan = {.sampler = o->sampler, .seek = !o->straight,
                          .skip_nonref = !o->straight};
    if (vtr_sampler_is_timed(&o->sampler)) {
        if ((st = vtr_sampler_targets(&o->sampler, in->start, in->duration, in->tb_num,
                                      in->tb_den,
                                      &targets, &n_targets, err)) != VTR_OK) {
            vtr_error_context(err, "%s", path);
            goto end;
        }
        plan.targets = targets;
        plan.n_targets = n_targets;
    }
    if ((st = vtr_pick_frames(r, &plan, store_frame, &s, &delivered, err)) != VTR_OK)
        goto end;
    if (delivered == 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no video frames", path);
        goto end;
    }

    meta = build_meta(path, r, &s, o, targets, n_targets);
    if (!audio_path) {
        json_object_set_new(meta, "audio", json_null());
        json_object_set_new(meta, "audio_reason", json_string("not requested"));
    } else {
        vtr_audio_result ar;
        if ((st = vtr_audio_extract(path, audio_path, o->audio_rate, &ar, err)) != VTR_OK)
            goto end;
        audio_written = ar.written;
        if (ar.written) {
            json_object_set_new(meta, "audio", json_string(audio_path));
            json_object_set_new(meta, "audio_rate", json_integer(ar.rate));
            json_object_set_new(meta, "audio_samples", json_integer(ar.samples));
            json_object_set_new(meta, "audio_start_time", json_real(ar.start_time));
            json_object_set_new(meta, "audio_codec", json_string(ar.codec));
        } else {
            json_object_set_new(meta, "audio", json_null());
            json_object_set_new(meta, "audio_reason", json_string(ar.reason));
        }
    }

    vtr_tensor *t = &out->frames;
    t->ndim = 4;
    t->shape[0] = s.count;
    t->shape[1] = s.geom.out_h;
    t->shape[2] = s.geom.out_w;
    t->shape[3] = 3;
    if (o->normalize) {
        size_t pixels = (size_t)s.count * s.geom.out_w * s.geom.out_h;
        float *f = malloc(pixels * 3 * sizeof *f);
        if (!f) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for float frames", path);
            goto end;
        }
        vtr_rgb_normalize(s.rgb, pixels, o->mean, o->std, f);
        t->dtype = VTR_F32;
        t->data = f;
    } else {
        t->dtype = VTR_U8;
        t->data = s.rgb;
        s.rgb = NULL;
    }
    out->meta = meta;
    meta = NULL;
end:
    if (st != VTR_OK && audio_written)
        unlink(audio_path);
    json_decref(meta);
    free(targets);
    free(s.rgb);
    free(s.pts);
    free(s.index);
    vtr_frame_converter_free(s.conv);
    vtr_video_reader_close(r);
    return st;
}
