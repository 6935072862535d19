#define _POSIX_C_SOURCE 200809L
#include "synth_scene.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"
#include "lib/json.h"
#include "lib/rng.h"
#include "tools/synth_video.h"

const char *const vtr_scene_colour_name[VTR_SCENE_COLOURS] = {
    "red", "green", "blue", "yellow", "orange", "purple", "white", "black"};
const uint8_t vtr_scene_colour_rgb[VTR_SCENE_COLOURS][3] = {
    {220, 30, 30}, {30, 170, 50},  {40, 70, 230},   {240, 220, 40},
    {250, 140, 20}, {140, 40, 180}, {245, 245, 245}, {15, 15, 15}};
const char *const vtr_scene_shape_name[VTR_SCENE_SHAPES] = {"circle", "square", "triangle",
                                                             "star", "diamond"};
const char *const vtr_scene_size_name[VTR_SCENE_SIZES] = {"small", "medium", "large"};

/* radius as a fraction of the height, per size */
static const float size_radius[VTR_SCENE_SIZES] = {0.09f, 0.15f, 0.23f};

#define NOISE_AMPLITUDE 40
#define MARGIN 2.0f /* pixels between a shape's circle and the picture's edge */

/* Streams of one scene: its layout, then one per caption. */
#define STREAMS_PER_SCENE 1024

static float uniform_in(vtr_rng *rng, float lo, float hi)
{
    return hi <= lo ? lo : lo + (hi - lo) * vtr_rng_uniform(rng);
}

/* A colour index not in used[0 .. n-1]. */
static int colour_except(vtr_rng *rng, const int *used, int n)
{
    int free_colours[VTR_SCENE_COLOURS], k = 0;
    for (int c = 0; c < VTR_SCENE_COLOURS; c++) {
        bool taken = false;
        for (int i = 0; i < n; i++)
            taken |= used[i] == c;
        if (!taken)
            free_colours[k++] = c;
    }
    return free_colours[vtr_rng_below(rng, (uint32_t)k)];
}

/* Places object o within rows [ylo, yhi] of the centre (the band it may use). */
static void place(vtr_rng *rng, const vtr_scene *s, vtr_scene_object *o, float ylo, float yhi,
                  bool vertical_ok)
{
    float r = o->radius, w = (float)s->width;
    float xlo = r + MARGIN, xhi = w - r - MARGIN;
    ylo = fmaxf(ylo, r + MARGIN);
    yhi = fminf(yhi, (float)s->height - r - MARGIN);
    o->motion = o->brief ? VTR_SCENE_STILL
                         : (vtr_scene_motion)vtr_rng_below(rng, vertical_ok ? 5 : 3);
    o->x0 = o->x1 = uniform_in(rng, xlo, xhi);
    o->y0 = o->y1 = uniform_in(rng, ylo, yhi);
    /* a mover travels half the picture, or what fits */
    if (o->motion == VTR_SCENE_LEFT || o->motion == VTR_SCENE_RIGHT) {
        float travel = fminf(0.5f * w, xhi - xlo);
        float start = uniform_in(rng, xlo, xhi - travel);
        bool left = o->motion == VTR_SCENE_LEFT;
        o->x0 = left ? start + travel : start;
        o->x1 = left ? start : start + travel;
    } else if (o->motion == VTR_SCENE_UP || o->motion == VTR_SCENE_DOWN) {
        float travel = fminf(0.5f * (float)s->height, yhi - ylo);
        float start = uniform_in(rng, ylo, yhi - travel);
        bool up = o->motion == VTR_SCENE_UP;
        o->y0 = up ? start + travel : start;
        o->y1 = up ? start : start + travel;
    }
    if (o->brief) {
        int len = s->frames / 8 + (int)vtr_rng_below(rng, 3);
        o->first_frame = (int)vtr_rng_below(rng, (uint32_t)(s->frames - len + 1));
        o->last_frame = o->first_frame + len - 1;
    } else {
        o->first_frame = 0;
        o->last_frame = s->frames - 1;
    }
}

void vtr_scene_generate(uint64_t seed, uint64_t index, int width, int height, int frames,
                        vtr_scene *out)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, index * STREAMS_PER_SCENE);
    vtr_scene *s = out;
    memset(s, 0, sizeof *s);
    s->width = width;
    s->height = height;
    s->frames = frames;
    s->n_objects = vtr_rng_uniform(&rng) < 0.6f ? 1 : 2;
    int used[4], n_used = 0;
    for (int i = 0; i < s->n_objects; i++) {
        vtr_scene_object *o = &s->objects[i];
        o->shape = (int)vtr_rng_below(&rng, VTR_SCENE_SHAPES);
        o->colour = colour_except(&rng, used, n_used);
        used[n_used++] = o->colour;
        /* two objects share the picture in two bands: small or medium only */
        o->size = (int)vtr_rng_below(&rng, s->n_objects == 1 ? 3 : 2);
        o->radius = size_radius[o->size] * (float)height;
        /* the single object, or the second of two, is brief in 30% of the scenes */
        o->brief = i == s->n_objects - 1 && vtr_rng_uniform(&rng) < 0.3f;
    }
    s->background = (vtr_scene_background)vtr_rng_below(&rng, 3);
    s->colour = colour_except(&rng, used, n_used);
    used[n_used++] = s->colour;
    s->colour2 = s->background == VTR_SCENE_GRADIENT ? colour_except(&rng, used, n_used) : -1;
    s->noise_seed = vtr_rng_u32(&rng);
    float h = (float)height;
    if (s->n_objects == 1) {
        place(&rng, s, &s->objects[0], 0, h, true);
    } else {
        place(&rng, s, &s->objects[0], 0, 0.5f * h - s->objects[0].radius - 1, false);
        place(&rng, s, &s->objects[1], 0.5f * h + s->objects[1].radius + 1, h, false);
    }
}

bool vtr_scene_object_at(const vtr_scene *s, int o, int frame, float *cx, float *cy)
{
    if (o < 0 || o >= s->n_objects)
        return false;
    const vtr_scene_object *ob = &s->objects[o];
    if (frame < ob->first_frame || frame > ob->last_frame)
        return false;
    int span = ob->last_frame - ob->first_frame;
    float t = span > 0 ? (float)(frame - ob->first_frame) / (float)span : 0.0f;
    *cx = ob->x0 + (ob->x1 - ob->x0) * t;
    *cy = ob->y0 + (ob->y1 - ob->y0) * t;
    return true;
}

/* Whether (dx, dy), relative to the centre, lies inside the shape of radius r (y down). */
static bool inside(int shape, float dx, float dy, float r)
{
    switch (shape) {
    case 0: /* circle */
        return dx * dx + dy * dy <= r * r;
    case 1: /* square */
        return fabsf(dx) <= 0.75f * r && fabsf(dy) <= 0.75f * r;
    case 2: /* triangle, apex up, vertices on the circle */
        return dy <= 0.5f * r && fabsf(dx) <= (dy + r) * 0.57735f;
    case 3: { /* five-pointed star, a point up, inner radius 0.45 r */
        float rho = sqrtf(dx * dx + dy * dy);
        if (rho > r)
            return false;
        float a = atan2f(dx, -dy); /* 0 at the top */
        const float step = 1.25663706f, half = step / 2; /* 2 pi / 5 */
        a = fmodf(a + 5 * step, step);
        if (a > half)
            a = step - a;
        /* inside the line from the outer vertex (0, r) to the inner one at angle half */
        float vx = 0.45f * r * sinf(half), vy = 0.45f * r * cosf(half);
        float px = rho * sinf(a), py = rho * cosf(a);
        /* the origin is on the negative side of (v - outer) x (p - outer) */
        float cross = vx * (py - r) - (vy - r) * px;
        return cross <= 0;
    }
    default: /* diamond */
        return fabsf(dx) + fabsf(dy) <= r;
    }
}

static int clamp_u8(int v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

void vtr_scene_draw(const vtr_scene *s, int frame, uint8_t *rgb, size_t stride)
{
    const uint8_t *c1 = vtr_scene_colour_rgb[s->colour];
    for (int y = 0; y < s->height; y++) {
        uint8_t *row = rgb + (size_t)y * stride;
        uint8_t c[3] = {c1[0], c1[1], c1[2]};
        if (s->background == VTR_SCENE_GRADIENT) {
            const uint8_t *c2 = vtr_scene_colour_rgb[s->colour2];
            float t = s->height > 1 ? (float)y / (float)(s->height - 1) : 0;
            for (int k = 0; k < 3; k++)
                c[k] = (uint8_t)lrintf((float)c1[k] + t * (float)(c2[k] - c1[k]));
        }
        for (int x = 0; x < s->width; x++) {
            uint8_t *p = row + 3 * (size_t)x;
            if (s->background == VTR_SCENE_NOISE) {
                uint32_t hsh = ((uint32_t)x * 374761393u + (uint32_t)y * 668265263u) ^
                               s->noise_seed;
                hsh = (hsh ^ (hsh >> 13)) * 1274126177u;
                hsh ^= hsh >> 16;
                int n = (int)(hsh % (2 * NOISE_AMPLITUDE + 1)) - NOISE_AMPLITUDE;
                for (int k = 0; k < 3; k++)
                    p[k] = (uint8_t)clamp_u8(c[k] + n);
            } else {
                p[0] = c[0];
                p[1] = c[1];
                p[2] = c[2];
            }
        }
    }
    for (int o = 0; o < s->n_objects; o++) {
        float cx, cy;
        if (!vtr_scene_object_at(s, o, frame, &cx, &cy))
            continue;
        const vtr_scene_object *ob = &s->objects[o];
        const uint8_t *oc = vtr_scene_colour_rgb[ob->colour];
        int x0 = (int)floorf(cx - ob->radius), x1 = (int)ceilf(cx + ob->radius);
        int y0 = (int)floorf(cy - ob->radius), y1 = (int)ceilf(cy + ob->radius);
        for (int y = y0 < 0 ? 0 : y0; y <= y1 && y < s->height; y++)
            for (int x = x0 < 0 ? 0 : x0; x <= x1 && x < s->width; x++)
                if (inside(ob->shape, (float)x + 0.5f - cx, (float)y + 0.5f - cy, ob->radius))
                    memcpy(rgb + (size_t)y * stride + 3 * (size_t)x, oc, 3);
    }
}

/* ---- captions ------------------------------------------------------------------- */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

static const char *pick(vtr_rng *rng, const char *const *options, int n)
{
    return options[vtr_rng_below(rng, (uint32_t)n)];
}
#define PICK(rng, ...)                                                                   \
    pick(rng, (const char *const[]){__VA_ARGS__},                                        \
         (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

/* "a" or "an" before word */
static const char *article(const char *word)
{
    return strchr("aeiou", word[0]) ? "an" : "a";
}

/* "a small red circle" (the size named for small and large objects, mostly) */
static void put_object(text *t, vtr_rng *rng, const vtr_scene_object *o)
{
    const char *size = "";
    if (o->size == 0)
        size = PICK(rng, "small ", "tiny ", "little ", "");
    else if (o->size == 2)
        size = PICK(rng, "large ", "big ", "huge ", "");
    put(t, "%s %s%s %s", article(*size ? size : vtr_scene_colour_name[o->colour]), size,
        vtr_scene_colour_name[o->colour], vtr_scene_shape_name[o->shape]);
}

/* "moves left", "appears briefly", ... */
static void put_action(text *t, vtr_rng *rng, const vtr_scene_object *o)
{
    const char *a;
    if (o->brief)
        a = PICK(rng, "appears briefly", "flashes for a moment", "is visible only for an instant",
                 "briefly appears", "pops up for a moment");
    else if (o->motion == VTR_SCENE_LEFT)
        a = PICK(rng, "moves left", "moves to the left", "slides left", "drifts to the left");
    else if (o->motion == VTR_SCENE_RIGHT)
        a = PICK(rng, "moves right", "moves to the right", "slides right",
                 "drifts to the right");
    else if (o->motion == VTR_SCENE_UP)
        a = PICK(rng, "moves up", "rises", "floats upward", "goes up");
    else if (o->motion == VTR_SCENE_DOWN)
        a = PICK(rng, "moves down", "falls", "sinks", "drops down");
    else
        a = PICK(rng, "stays still", "sits still", "does not move", "rests in place");
    put(t, "%s", a);
}

/* "on a blue background", ... */
static void put_background(text *t, vtr_rng *rng, const vtr_scene *s)
{
    const char *c = vtr_scene_colour_name[s->colour], *a = article(c);
    if (s->background == VTR_SCENE_PLAIN) {
        switch (vtr_rng_below(rng, 3)) {
        case 0: put(t, "on %s %s background", a, c); break;
        case 1: put(t, "over a plain %s background", c); break;
        default: put(t, "against %s %s backdrop", a, c); break;
        }
    } else if (s->background == VTR_SCENE_GRADIENT) {
        const char *c2 = vtr_scene_colour_name[s->colour2];
        switch (vtr_rng_below(rng, 3)) {
        case 0: put(t, "on %s %s to %s gradient", a, c, c2); break;
        case 1: put(t, "over a background fading from %s to %s", c, c2); break;
        default: put(t, "on %s %s and %s gradient background", a, c, c2); break;
        }
    } else {
        switch (vtr_rng_below(rng, 3)) {
        case 0: put(t, "on a noisy %s background", c); break;
        case 1: put(t, "over %s noise", c); break;
        default: put(t, "against a grainy %s backdrop", c); break;
        }
    }
}

size_t vtr_scene_caption(const vtr_scene *s, uint64_t seed, uint64_t index, int k, char *buf,
                         size_t cap)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, index * STREAMS_PER_SCENE + 1 + (uint64_t)k);
    text t = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    const vtr_scene_object *a = &s->objects[0], *b = &s->objects[1];
    if (s->n_objects == 1) {
        switch (vtr_rng_below(&rng, 7)) {
        case 0:
            put_object(&t, &rng, a), put(&t, " "), put_action(&t, &rng, a), put(&t, " ");
            put_background(&t, &rng, s);
            break;
        case 1:
            put_background(&t, &rng, s), put(&t, ", "), put_object(&t, &rng, a);
            put(&t, " "), put_action(&t, &rng, a);
            break;
        case 2: put_object(&t, &rng, a), put(&t, " "), put_action(&t, &rng, a); break;
        case 3:
            put(&t, "there is "), put_object(&t, &rng, a), put(&t, " ");
            put_background(&t, &rng, s);
            break;
        case 4:
            put(&t, "a video of "), put_object(&t, &rng, a), put(&t, " that ");
            put_action(&t, &rng, a);
            break;
        case 5:
            put(&t, "the %s %s ", vtr_scene_colour_name[a->colour],
                vtr_scene_shape_name[a->shape]);
            put_action(&t, &rng, a), put(&t, " "), put_background(&t, &rng, s);
            break;
        default: put_object(&t, &rng, a), put(&t, " "), put_background(&t, &rng, s); break;
        }
    } else {
        switch (vtr_rng_below(&rng, 5)) {
        case 0:
            put_object(&t, &rng, a), put(&t, " "), put_action(&t, &rng, a), put(&t, " and ");
            put_object(&t, &rng, b), put(&t, " "), put_action(&t, &rng, b), put(&t, " ");
            put_background(&t, &rng, s);
            break;
        case 1:
            put_object(&t, &rng, a), put(&t, " and "), put_object(&t, &rng, b), put(&t, " ");
            put_background(&t, &rng, s);
            break;
        case 2:
            put_object(&t, &rng, b), put(&t, " "), put_action(&t, &rng, b), put(&t, " below ");
            put_object(&t, &rng, a);
            break;
        case 3:
            put_object(&t, &rng, a), put(&t, " "), put_action(&t, &rng, a), put(&t, " while ");
            put_object(&t, &rng, b), put(&t, " "), put_action(&t, &rng, b);
            break;
        default:
            put(&t, "there are "), put_object(&t, &rng, a), put(&t, " and ");
            put_object(&t, &rng, b), put(&t, " "), put_background(&t, &rng, s);
            break;
        }
    }
    return t.len;
}

/* ---- the archive ---------------------------------------------------------------- */

void vtr_scene_archive_defaults(vtr_scene_archive_options *o)
{
    memset(o, 0, sizeof *o);
    o->clips = 300;
    o->width = 160;
    o->height = 120;
    o->frames = 50;
    o->fps = 25;
    o->captions = 5;
    o->val_fraction = 0.1;
    o->test_fraction = 0.2;
    o->annotations = "videodatainfo.json";
}

typedef struct draw_ctx {
    const vtr_scene *scene;
} draw_ctx;

static void draw_scene(void *ctx, int frame, uint8_t *rgb, size_t stride, int w, int h)
{
    (void)w, (void)h;
    vtr_scene_draw(((draw_ctx *)ctx)->scene, frame, rgb, stride);
}

static vtr_status save_json(const char *path, const json_t *root, vtr_error *err)
{
    vtr_atomic_file file;
    vtr_status st = vtr_atomic_open(&file, path, err);
    if (st != VTR_OK)
        return st;
    if (json_dumpf(root, file.fp, JSON_INDENT(1)) != 0 || fputc('\n', file.fp) == EOF) {
        vtr_atomic_abort(&file);
        return vtr_fail(err, VTR_ERR_IO, "%s: write failed", path);
    }
    return vtr_atomic_commit(&file, err);
}

vtr_status vtr_scene_archive_write(const char *dir, const vtr_scene_archive_options *o,
                                   vtr_scene_progress_fn progress, void *ctx, vtr_error *err)
{
    int n_val = (int)lround(o->clips * o->val_fraction);
    int n_test = (int)lround(o->clips * o->test_fraction);
    int n_train = o->clips - n_val - n_test;
    if (o->clips < 3 || n_val < 1 || n_test < 1 || n_train < 1 || o->val_fraction < 0 ||
        o->test_fraction < 0)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%d clips with val fraction %g and test fraction %g: every split "
                        "needs at least one clip",
                        o->clips, o->val_fraction, o->test_fraction);
    if (o->width < 32 || o->height < 32 || o->frames < 16 || o->fps < 1 || o->captions < 1)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "scenes need at least 32x32 pixels, 16 frames, 1 fps and 1 caption");
    vtr_status st = VTR_OK;
    char *path = NULL;
    json_t *root = json_object(), *videos = json_array(), *sentences = json_array();
    if (!root || !videos || !sentences || json_object_set(root, "videos", videos) ||
        json_object_set(root, "sentences", sentences)) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    vtr_synth_options so;
    vtr_synth_defaults(&so);
    so.codec = "h264";
    so.width = o->width;
    so.height = o->height;
    so.frames = o->frames;
    so.fps_num = o->fps;
    so.draw = draw_scene;
    for (int i = 0; i < o->clips; i++) {
        vtr_scene scene;
        vtr_scene_generate(o->seed, (uint64_t)i, o->width, o->height, o->frames, &scene);
        char name[64], id[32];
        snprintf(id, sizeof id, "video%d", i);
        snprintf(name, sizeof name, "%s.mp4", id);
        free(path);
        if (!(path = vtr_path_join(dir, name))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        draw_ctx dc = {&scene};
        so.draw_ctx = &dc;
        if ((st = vtr_synth_write(path, &so, err)) != VTR_OK)
            goto end;
        const char *split = i < n_train ? "train" : i < n_train + n_val ? "validate" : "test";
        if (json_array_append_new(videos, json_pack("{s:s, s:s, s:i}", "video_id", id,
                                                    "split", split, "id", i))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        for (int k = 0; k < o->captions; k++) {
            char caption[512];
            vtr_scene_caption(&scene, o->seed, (uint64_t)i, k, caption, sizeof caption);
            if (json_array_append_new(sentences,
                                      json_pack("{s:s, s:s, s:i}", "caption", caption,
                                                "video_id", id, "sen_id",
                                                i * o->captions + k))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
        }
        if (progress)
            progress(ctx, i + 1, o->clips);
    }
    free(path);
    if (!(path = vtr_path_join(dir, o->annotations))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    st = save_json(path, root, err);
end:
    free(path);
    json_decref(videos);
    json_decref(sentences);
    json_decref(root);
    return st;
}
