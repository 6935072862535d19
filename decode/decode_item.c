#define _POSIX_C_SOURCE 200809L
#include "decode_item.h"

#include <libavutil/cpu.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode/audio_track.h"
#include "decode/frame_picker.h"
#include "decode/stretch_plan.h"
#include "decode/video_reader.h"

/* Most stretches of one item decoded at once (each opens the file). */
#define MAX_STRETCHES 16
/* The most leading pictures (decoded after their keyframe, shown before it) a stream is
 * taken to have: H.264's most B-frames in a row, x264's too. */
#define MAX_LEADING 16

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
    vtr_status st = vtr_frame_geometry_plan(in->width, in->height, in->sar_num, in->sar_den,
                                            &in->orientation, s->request, &s->geom, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", path);
        return st;
    }
    s->frame_bytes = (size_t)s->geom.out_w * s->geom.out_h * 3;
    return VTR_OK;
}

/* Makes room in s for n_frames frames and n_slots slots. */
static vtr_status store_reserve(frame_store *s, int64_t n_frames, int64_t n_slots, vtr_error *err)
{
    void *rgb[] = {s->rgb}, *slots[] = {s->pts, s->index, s->source};
    vtr_status st = grow(n_frames, &s->frame_capacity, s->frame_bytes, rgb, 1, "frames", err);
    s->rgb = rgb[0];
    if (st == VTR_OK)
        st = grow(n_slots, &s->capacity, sizeof(int64_t), slots, 3, "frame slots", err);
    s->pts = slots[0];
    s->index = slots[1];
    s->source = slots[2];
    return st;
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
    if (st == VTR_OK)
        st = store_reserve(s, s->n_frames + 1, end, err);
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

/* Appends src's frames to dst's, src's slots from dst slot offset on (the stretches'
 * stores, in order). */
static vtr_status store_append(frame_store *dst, const frame_store *src, int64_t offset,
                               vtr_error *err)
{
    int64_t end = offset + src->count;
    vtr_status st = store_reserve(dst, dst->n_frames + src->n_frames, end, err);
    if (st != VTR_OK)
        return st;
    memcpy(dst->rgb + (size_t)dst->n_frames * dst->frame_bytes, src->rgb,
           (size_t)src->n_frames * src->frame_bytes);
    for (int64_t k = 0; k < src->count; k++) {
        dst->pts[offset + k] = src->pts[k];
        dst->index[offset + k] = src->index[k];
        dst->source[offset + k] = dst->n_frames + src->source[k];
    }
    dst->n_frames += src->n_frames;
    dst->count = end;
    dst->indices_known = dst->indices_known && src->indices_known;
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
                          const vtr_decode_options *o, const int64_t *targets, int64_t n_targets,
                          const vtr_decode_stats *ds, int stretches)
{
    const vtr_video_info *in = vtr_video_reader_info(r);
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
    char sar[32];
    snprintf(sar, sizeof sar, "%d:%d", in->sar_num, in->sar_den);
    json_object_set_new(m, "sample_aspect_ratio", json_string(sar));
    json_object_set_new(m, "codec", json_string(in->codec));
    json_object_set_new(m, "hdr", in->hdr ? json_string(in->hdr) : json_null());
    json_object_set_new(m, "sampler", sampler_json(&o->sampler));
    if (o->normalize)
        json_object_set_new(m, "normalize",
                            json_pack("{s:[f,f,f], s:[f,f,f]}", "mean", o->mean[0], o->mean[1],
                                      o->mean[2], "std", o->std[0], o->std[1], o->std[2]));
    json_object_set_new(m, "decode",
                        json_pack("{s:I, s:I, s:I, s:I, s:i}", "packets_read",
                                  (json_int_t)ds->packets_read, "packets_sent",
                                  (json_int_t)ds->packets_sent, "frames_decoded",
                                  (json_int_t)ds->frames_decoded, "seeks", (json_int_t)ds->seeks,
                                  "stretches", stretches));
    return m;
}

/* One stretch of an item (stretch_plan.h): its targets, its reader (the first stretch
 * uses the item's, the others open the file on their own thread), its frames and its
 * outcome. */
typedef struct stretch {
    const char *path;
    int threads;  /* its reader's decoder threads (further stretches: they open one) */
    bool measure; /* the item's reader measured the duration: so does this one */
    const vtr_video_reader *item; /* the item's reader, whose own index a new one shares */
    vtr_video_reader *r;
    vtr_pick_plan plan;
    frame_store s;
    int64_t delivered;
    vtr_status st;
    vtr_error err;
    pthread_t thread;
    bool threaded;
} stretch;

static void *stretch_run(void *arg)
{
    stretch *w = arg;
    if (!w->r && (w->st = vtr_video_reader_open(w->path, w->threads, &w->r, &w->err)) == VTR_OK) {
        if (w->measure)
            w->st = vtr_video_reader_measure(w->r, &w->err);
        if (w->st == VTR_OK)
            w->st = vtr_video_reader_share_index(w->r, w->item, &w->err);
    }
    if (w->st != VTR_OK)
        return NULL;
    w->s.r = w->r;
    w->st = vtr_pick_frames(w->r, &w->plan, store_frame, &w->s, &w->delivered, &w->err);
    return NULL;
}

/* How many stretches plan's targets split into, the first target of each in first[]:
 * one unless the sampler is timed, jumps are allowed and threads allows more. */
static int plan_stretches(vtr_video_reader *r, int threads, const vtr_pick_plan *plan,
                          int64_t *first)
{
    int max = threads < MAX_STRETCHES ? threads : MAX_STRETCHES;
    first[0] = 0;
    if (!plan->targets || !plan->seek || max < 2 || plan->n_targets < 2)
        return 1;
    const vtr_video_info *in = vtr_video_reader_info(r);
    /* where jumps lose the frame numbers (stretch_plan.h), the leading pictures' span */
    int64_t lead = VTR_STRETCH_JUMPS_LOSE_NOTHING;
    if (!vtr_video_reader_jumps_tell_all(r))
        lead = in->fps > 0 ? (int64_t)(MAX_LEADING / in->fps * in->tb_den / in->tb_num) + 1
                           : INT64_MAX;
    int64_t *keyframes = malloc((size_t)plan->n_targets * sizeof *keyframes);
    if (!keyframes)
        return 1; /* one decoder needs no more memory */
    for (int64_t k = 0; k < plan->n_targets; k++) {
        int64_t pos;
        if (!vtr_video_reader_keyframe_before(r, plan->targets[k], &keyframes[k], &pos))
            keyframes[k] = VTR_STRETCH_NO_KEYFRAME;
    }
    int n = vtr_stretch_plan(plan->targets, keyframes, plan->n_targets, in->start,
                             (double)in->tb_num / in->tb_den, lead, max, first);
    free(keyframes);
    return n;
}

/* Decodes the stretches w[0 .. n-1] (w[0] on this thread, with the item's reader), then
 * gives the first failure in file order, or w[0].s holding every frame and *ds the sum of
 * the readers' counts. */
static vtr_status run_stretches(stretch *w, int n, int64_t *delivered, vtr_decode_stats *ds,
                                vtr_error *err)
{
    for (int i = 1; i < n; i++)
        w[i].threaded = pthread_create(&w[i].thread, NULL, stretch_run, &w[i]) == 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || !w[i].threaded)
            stretch_run(&w[i]); /* no thread to be had: in turn, here */
    for (int i = 1; i < n; i++)
        if (w[i].threaded)
            pthread_join(w[i].thread, NULL);
    *delivered = 0;
    *ds = (vtr_decode_stats){0};
    for (int i = 0; i < n; i++) {
        if (w[i].st != VTR_OK) {
            *err = w[i].err;
            return w[i].st;
        }
        vtr_status st =
            i ? store_append(&w[0].s, &w[i].s, w[i].plan.targets - w[0].plan.targets, err) : VTR_OK;
        if (st != VTR_OK) {
            vtr_error_context(err, "%s", w[0].path);
            return st;
        }
        const vtr_decode_stats *rs = vtr_video_reader_stats(w[i].r);
        ds->packets_read += rs->packets_read;
        ds->packets_sent += rs->packets_sent;
        ds->frames_decoded += rs->frames_decoded;
        ds->seeks += rs->seeks;
        *delivered += w[i].delivered;
    }
    return VTR_OK;
}

static void stretches_free(stretch *w, int n)
{
    for (int i = 0; w && i < n; i++) {
        free(w[i].s.rgb);
        free(w[i].s.pts);
        free(w[i].s.index);
        free(w[i].s.source);
        vtr_frame_converter_free(w[i].s.conv);
        if (i > 0)
            vtr_video_reader_close(w[i].r);
    }
    free(w);
}

vtr_status vtr_decode_item(const char *path, const vtr_decode_options *o,
                           const char *audio_path, vtr_decoded_item *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_video_reader *r = NULL;
    stretch *w = NULL;
    int n_stretches = 0;
    int64_t *targets = NULL, n_targets = 0, delivered = 0, first[MAX_STRETCHES];
    vtr_decode_stats stats;
    json_t *meta = NULL;
    bool audio_written = false;
    vtr_status st = vtr_video_reader_open(path, o->threads, &r, err);
    if (st != VTR_OK)
        goto end;
    const vtr_video_info *in = vtr_video_reader_info(r);
    bool measure = in->duration < 0;
    if (measure && (st = vtr_video_reader_measure(r, err)) != VTR_OK)
        goto end;

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
        if (plan.seek && (st = vtr_video_reader_index(r, err)) != VTR_OK)
            goto end;
    }
    int threads = o->threads > 0 ? o->threads : av_cpu_count();
    n_stretches = plan_stretches(r, threads, &plan, first);
    if (!(w = calloc((size_t)n_stretches, sizeof *w))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    for (int i = 0; i < n_stretches; i++) {
        int64_t end_target = i + 1 < n_stretches ? first[i + 1] : n_targets;
        w[i] = (stretch){
            .path = path,
            .measure = measure,
            .item = r,
            .r = i ? NULL : r,
            .plan = plan,
            .threads = threads / n_stretches > 1 ? threads / n_stretches : 1,
            .s = {.request = &o->geometry, .max_frames = o->max_frames, .indices_known = true}};
        if (plan.targets) {
            w[i].plan.targets = targets + first[i];
            w[i].plan.n_targets = end_target - first[i];
        }
        if (!(w[i].s.conv = vtr_frame_converter_new())) {
            n_stretches = i + 1;
            st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
            goto end;
        }
    }
    if ((st = run_stretches(w, n_stretches, &delivered, &stats, err)) != VTR_OK)
        goto end;
    if (delivered == 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no video frames", path);
        goto end;
    }

    frame_store *s = &w[0].s;
    if ((st = store_frames(s, o, &out->frames, err)) != VTR_OK) {
        vtr_error_context(err, "%s", path);
        goto end;
    }
    meta = build_meta(path, r, s, o, targets, n_targets, &stats, n_stretches);
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
    stretches_free(w, n_stretches);
    vtr_video_reader_close(r);
    return st;
}
