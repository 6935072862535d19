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
    o->max_frames = VTR_SAMPLER_MAX_TARGETS;
}

void vtr_decoded_item_free(vtr_decoded_item *item)
{
    free(item->frames.data);
    item->frames.data = NULL;
    json_decref(item->meta);
    item->meta = NULL;
}

/* What the sink fills while frames come out. A frame that answers several targets (a
 * still scene, a short video sampled densely, a damaged file whose timestamps jump by
 * days) is converted and kept once; its copies are made only when the whole item has
 * decoded, so a file that fails later costs what it held, not what it claimed. */
typedef struct frame_store {
    const vtr_video_reader *r;
    const vtr_geometry_request *request;
    vtr_frame_converter *conv;
    vtr_frame_geometry geom;
    size_t frame_bytes;  /* 0 until the first frame plans the geometry */
    uint8_t *rgb;        /* the frames delivered, n_frames of frame_bytes, grown as they come */
    int64_t n_frames, frame_capacity;
    int64_t *pts;    /* per output slot: its frame's pts, presentation index, and */
    int64_t *index;  /* which of the frames in rgb it shows; */
    int64_t *source; /* count slots filled (capacity held) */
    int64_t count, capacity;
    int64_t max_frames; /* most slots an item may fill */
    bool indices_known;
} frame_store;

/* Doubles *capacity (from 16) until it holds n, growing each of the arrays (elements of
 * size bytes) to match; fails naming what it holds. */
static vtr_status grow(int64_t n, int64_t *capacity, size_t size, void **arrays, int n_arrays,
                       const char *what, vtr_error *err)
{
    if (n <= *capacity)
        return VTR_OK;
    int64_t cap = *capacity ? *capacity : 16;
    while (cap < n)
        cap *= 2;
    if ((size_t)cap > SIZE_MAX / size)
        return vtr_fail(err, VTR_ERR_NOMEM, "too many %s", what);
    for (int i = 0; i < n_arrays; i++) {
        void *a = realloc(arrays[i], (size_t)cap * size);
        if (!a)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld %s of %zu bytes",
                            (long long)cap, what, size);
        arrays[i] = a;
    }
    *capacity = cap;
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
    int64_t end = first_slot + n_slots;
    if (end > s->max_frames) /* frame modes: timed ones asked for at most that many targets */
        return vtr_fail(err, VTR_ERR_INVALID, "%s: more than %lld frames",
                        vtr_video_reader_path(s->r), (long long)s->max_frames);
    vtr_status st = s->frame_bytes ? VTR_OK : store_plan(s, err);
    void *rgb[] = {s->rgb}, *slots[] = {s->pts, s->index, s->source};
    if (st == VTR_OK)
        st = grow(s->n_frames + 1, &s->frame_capacity, s->frame_bytes, rgb, 1, "frames", err);
    s->rgb = rgb[0];
    if (st == VTR_OK)
        st = grow(end, &s->capacity, sizeof(int64_t), slots, 3, "frame slots", err);
    s->pts = slots[0];
    s->index = slots[1];
    s->source = slots[2];
    if (st != VTR_OK)
        return st;
    uint8_t *dst = s->rgb + (size_t)s->n_frames * s->frame_bytes;
    if ((st = vtr_frame_convert(s->conv, frame, &s->geom, dst, err)) != VTR_OK)
        return st;
    for (int64_t k = first_slot; k < end; k++) {
        s->pts[k] = pts;
        s->index[k] = frame_index;
        s->source[k] = s->n_frames;
    }
    s->n_frames++;
    if (frame_index < 0)
        s->indices_known = false;
    if (end > s->count)
        s->count = end;
    return VTR_OK;
}

/* The item's frames, one per slot, as uint8 (taking the store's frames when each slot
 * shows its own frame in order) or normalized float32. */
static vtr_status store_frames(frame_store *s, const vtr_decode_options *o, vtr_tensor *t,
                               vtr_error *err)
{
    bool own = s->count == s->n_frames;
    for (int64_t i = 0; own && i < s->count; i++)
        own = s->source[i] == i;
    size_t pixels = s->frame_bytes / 3, value = o->normalize ? sizeof(float) : 1;
    if (!own || o->normalize) {
        if ((size_t)s->count > SIZE_MAX / value / s->frame_bytes)
            return vtr_fail(err, VTR_ERR_NOMEM, "too many frames");
        uint8_t *data = malloc((size_t)s->count * s->frame_bytes * value);
        if (!data)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld frames of %zu bytes",
                            (long long)s->count, s->frame_bytes * value);
        for (int64_t i = 0; i < s->count; i++) {
            const uint8_t *src = s->rgb + (size_t)s->source[i] * s->frame_bytes;
            uint8_t *dst = data + (size_t)i * s->frame_bytes * value;
            if (o->normalize)
                vtr_rgb_normalize(src, pixels, o->mean, o->std, (float *)dst);
            else
                memcpy(dst, src, s->frame_bytes);
        }
        t->data = data;
    } else {
        t->data = s->rgb;
        s->rgb = NULL;
    }
    t->dtype = o->normalize ? VTR_F32 : VTR_U8;
    t->ndim = 4;
    t->shape[0] = s->count;
    t->shape[1] = s->geom.out_h;
    t->shape[2] = s->geom.out_w;
    t->shape[3] = 3;
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
    frame_store s = {.max_frames = o->max_frames, .indices_known = true};
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
        if ((st = vtr_sampler_targets(&o->sampler, in->start, in->duration, in->tb_num, in->tb_den,
                                      o->max_frames, &targets, &n_targets, err)) != VTR_OK) {
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

    if ((st = store_frames(&s, o, &out->frames, err)) != VTR_OK) {
        vtr_error_context(err, "%s", path);
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

    out->meta = meta;
    meta = NULL;
end:
    if (st != VTR_OK)
        vtr_decoded_item_free(out);
    if (st != VTR_OK && audio_written)
        unlink(audio_path);
    json_decref(meta);
    free(targets);
    free(s.rgb);
    free(s.pts);
    free(s.index);
    free(s.source);
    vtr_frame_converter_free(s.conv);
    vtr_video_reader_close(r);
    return st;
}
