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
const char *const vtr_scene_motion_name[VTR_SCENE_MOTIONS] = {"still", "left", "right", "up",
                                                              "down"};
const char *const vtr_scene_background_name[VTR_SCENE_BACKGROUNDS] = {"plain", "gradient",
                                                                      "noise"};

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

/* Whitespace-separated words written so far: the index of the next word, as every
 * phrase starts after a space (or at the start). */
static int words_so_far(const text *t)
{
    int n = 0;
    for (size_t i = 0; i < t->len; i++)
        n += t->buf[i] != ' ' && (i == 0 || t->buf[i - 1] == ' ');
    return n;
}

static vtr_scene_span span_from(const text *t, int start)
{
    return (vtr_scene_span){start, words_so_far(t) - start};
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
static vtr_scene_span put_object(text *t, vtr_rng *rng, const vtr_scene_object *o)
{
    int start = words_so_far(t);
    const char *size = "";
    if (o->size == 0)
        size = PICK(rng, "small ", "tiny ", "little ", "");
    else if (o->size == 2)
        size = PICK(rng, "large ", "big ", "huge ", "");
    put(t, "%s %s%s %s", article(*size ? size : vtr_scene_colour_name[o->colour]), size,
        vtr_scene_colour_name[o->colour], vtr_scene_shape_name[o->shape]);
    return span_from(t, start);
}

/* An argument of frame f (roles are string literals). */
static void add_arg(vtr_scene_frame *f, vtr_scene_span span, const char *role)
{
    if (f && f->n_args < VTR_SCENE_MAX_ARGS && span.n > 0) {
        f->args[f->n_args] = span;
        f->roles[f->n_args++] = role;
    }
}

/* The role of an action's word tag (see put_action). */
static const char *tag_role(const char *tag, size_t n)
{
    static const struct {
        const char *tag, *role;
    } roles[] = {{"V0", "V"},         {"V1", "V"},         {"TMP", "ARGM-TMP"},
                 {"MNR", "ARGM-MNR"}, {"DIR", "ARGM-DIR"}, {"LOC", "ARGM-LOC"},
                 {"ARG2", "ARG2"}};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strlen(roles[i].tag) == n && !memcmp(roles[i].tag, tag, n))
            return roles[i].role;
    return NULL; /* "-": a word of no phrase ("does not") */
}

/* "moves left", "appears briefly", ...: writes the action's words and puts its verb and
 * modifiers into f (may be NULL); returns the subject's role. Each option is a list of
 * TAG=word: V0 / V1 the verb (its subject ARG0 / ARG1), TMP, MNR, DIR, LOC, ARG2 the
 * argument a semantic role labeller would tag, "-" none; a run of one tag is one phrase. */
static const char *put_action(text *t, vtr_rng *rng, const vtr_scene_object *o,
                              vtr_scene_frame *f)
{
    const char *a;
    if (o->brief)
        a = PICK(rng, "V1=appears TMP=briefly", "V0=flashes TMP=for TMP=a TMP=moment",
                 "V1=is ARG2=visible TMP=only TMP=for TMP=an TMP=instant",
                 "TMP=briefly V1=appears", "V1=pops V1=up TMP=for TMP=a TMP=moment");
    else if (o->motion == VTR_SCENE_LEFT)
        a = PICK(rng, "V1=moves DIR=left", "V1=moves DIR=to DIR=the DIR=left",
                 "V1=slides DIR=left", "V1=drifts DIR=to DIR=the DIR=left");
    else if (o->motion == VTR_SCENE_RIGHT)
        a = PICK(rng, "V1=moves DIR=right", "V1=moves DIR=to DIR=the DIR=right",
                 "V1=slides DIR=right", "V1=drifts DIR=to DIR=the DIR=right");
    else if (o->motion == VTR_SCENE_UP)
        a = PICK(rng, "V1=moves DIR=up", "V1=rises", "V1=floats DIR=upward", "V1=goes DIR=up");
    else if (o->motion == VTR_SCENE_DOWN)
        a = PICK(rng, "V1=moves DIR=down", "V1=falls", "V1=sinks", "V1=drops DIR=down");
    else
        a = PICK(rng, "V1=stays MNR=still", "V1=sits MNR=still", "-=does -=not V1=move",
                 "V1=rests LOC=in LOC=place");
    const char *subject = "ARG1", *run_role = NULL;
    int run_start = 0, first = 1;
    for (const char *p = a; *p;) {
        const char *eq = strchr(p, '='), *end = strchr(eq, ' ');
        size_t n = end ? (size_t)(end - eq - 1) : strlen(eq + 1);
        const char *role = tag_role(p, (size_t)(eq - p));
        if (eq - p == 2 && !memcmp(p, "V0", 2))
            subject = "ARG0";
        int w = words_so_far(t);
        if (run_role != role) {
            if (run_role && f && !strcmp(run_role, "V"))
                f->verb = (vtr_scene_span){run_start, w - run_start};
            else if (run_role)
                add_arg(f, (vtr_scene_span){run_start, w - run_start}, run_role);
            run_role = role;
            run_start = w;
        }
        put(t, "%s%.*s", first ? "" : " ", (int)n, eq + 1);
        first = 0;
        p = end ? end + 1 : eq + 1 + n;
    }
    int w = words_so_far(t);
    if (run_role && f && !strcmp(run_role, "V"))
        f->verb = (vtr_scene_span){run_start, w - run_start};
    else if (run_role)
        add_arg(f, (vtr_scene_span){run_start, w - run_start}, run_role);
    return subject;
}

/* "on a blue background", ...: the phrase; *noun (may be NULL) gets it without the
 * preposition ("a blue background"). */
static vtr_scene_span put_background(text *t, vtr_rng *rng, const vtr_scene *s,
                                     vtr_scene_span *noun)
{
    int start = words_so_far(t);
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
    vtr_scene_span sp = span_from(t, start);
    if (noun)
        *noun = (vtr_scene_span){sp.start + 1, sp.n - 1};
    return sp;
}

/* The next frame of parse p (NULL without p). */
static vtr_scene_frame *new_frame(vtr_scene_caption_parse *p)
{
    return p && p->n_frames < VTR_SCENE_MAX_FRAMES ? &p->frames[p->n_frames++] : NULL;
}

static void add_noun(vtr_scene_caption_parse *p, vtr_scene_span span)
{
    if (p && p->n_nouns < VTR_SCENE_MAX_NOUNS)
        p->nouns[p->n_nouns++] = span;
}

/* "OBJ ACTION" into a new frame: the object its subject. */
static vtr_scene_frame *put_clause(text *t, vtr_rng *rng, const vtr_scene_object *o,
                                   vtr_scene_caption_parse *p)
{
    vtr_scene_frame *f = new_frame(p);
    vtr_scene_span obj = put_object(t, rng, o);
    put(t, " ");
    add_arg(f, obj, put_action(t, rng, o, f));
    return f;
}

size_t vtr_scene_caption_parsed(const vtr_scene *s, uint64_t seed, uint64_t index, int k,
                                char *buf, size_t cap, vtr_scene_caption_parse *p)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, index * STREAMS_PER_SCENE + 1 + (uint64_t)k);
    text t = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    if (p)
        memset(p, 0, sizeof *p);
    vtr_scene_frame *f, *g;
    vtr_scene_span sp, noun;
    int start;
    const vtr_scene_object *a = &s->objects[0], *b = &s->objects[1];
    int template_id;
    if (s->n_objects == 1) {
        switch (template_id = (int)vtr_rng_below(&rng, 7)) {
        case 0:
            f = put_clause(&t, &rng, a, p), put(&t, " ");
            add_arg(f, put_background(&t, &rng, s, NULL), "ARGM-LOC");
            break;
        case 1:
            sp = put_background(&t, &rng, s, NULL), put(&t, ", ");
            f = put_clause(&t, &rng, a, p);
            add_arg(f, sp, "ARGM-LOC");
            break;
        case 2: put_clause(&t, &rng, a, p); break;
        case 3:
            f = new_frame(p);
            put(&t, "there is");
            if (f)
                f->verb = (vtr_scene_span){1, 1};
            put(&t, " ");
            add_arg(f, put_object(&t, &rng, a), "ARG1"), put(&t, " ");
            add_arg(f, put_background(&t, &rng, s, NULL), "ARGM-LOC");
            break;
        case 4:
            f = new_frame(p);
            put(&t, "a video of ");
            sp = put_object(&t, &rng, a);
            put(&t, " that ");
            add_arg(f, (vtr_scene_span){sp.start + sp.n, 1}, "R-ARG1");
            add_arg(f, sp, put_action(&t, &rng, a, f));
            break;
        case 5:
            f = new_frame(p);
            put(&t, "the %s %s ", vtr_scene_colour_name[a->colour],
                vtr_scene_shape_name[a->shape]);
            add_arg(f, (vtr_scene_span){0, 3}, put_action(&t, &rng, a, f)), put(&t, " ");
            add_arg(f, put_background(&t, &rng, s, NULL), "ARGM-LOC");
            break;
        default:
            template_id = 6;
            add_noun(p, put_object(&t, &rng, a)), put(&t, " ");
            put_background(&t, &rng, s, &noun);
            add_noun(p, noun);
            break;
        }
    } else {
        switch (template_id = 7 + (int)vtr_rng_below(&rng, 5)) {
        case 7:
            put_clause(&t, &rng, a, p), put(&t, " and ");
            f = put_clause(&t, &rng, b, p), put(&t, " ");
            add_arg(f, put_background(&t, &rng, s, NULL), "ARGM-LOC");
            break;
        case 8:
            add_noun(p, put_object(&t, &rng, a)), put(&t, " and ");
            add_noun(p, put_object(&t, &rng, b)), put(&t, " ");
            put_background(&t, &rng, s, &noun);
            add_noun(p, noun);
            break;
        case 9:
            f = put_clause(&t, &rng, b, p), put(&t, " below ");
            start = words_so_far(&t) - 1;
            put_object(&t, &rng, a);
            add_arg(f, span_from(&t, start), "ARGM-LOC");
            break;
        case 10:
            f = put_clause(&t, &rng, a, p), put(&t, " while ");
            start = words_so_far(&t) - 1;
            g = put_clause(&t, &rng, b, p);
            (void)g;
            add_arg(f, span_from(&t, start), "ARGM-TMP");
            break;
        default:
            template_id = 11;
            f = new_frame(p);
            put(&t, "there are");
            if (f)
                f->verb = (vtr_scene_span){1, 1};
            put(&t, " ");
            start = words_so_far(&t);
            put_object(&t, &rng, a), put(&t, " and "), put_object(&t, &rng, b);
            add_arg(f, span_from(&t, start), "ARG1"), put(&t, " ");
            add_arg(f, put_background(&t, &rng, s, NULL), "ARGM-LOC");
            break;
        }
    }
    if (p)
        p->template_id = template_id;
    return t.len;
}

size_t vtr_scene_caption(const vtr_scene *s, uint64_t seed, uint64_t index, int k, char *buf,
                         size_t cap)
{
    return vtr_scene_caption_parsed(s, seed, index, k, buf, cap, NULL);
}

/* ---- role graphs ---------------------------------------------------------------- */

/* {"role": role, "spans": [start ..], "words": [...]} of span over words[]. */
static json_t *graph_node(const char *role, vtr_scene_span sp, const json_t *words)
{
    json_t *spans = json_array(), *w = json_array();
    json_t *node = json_pack("{s:s, s:o, s:o}", "role", role, "spans", spans, "words", w);
    if (!node)
        return NULL;
    for (int i = sp.start; i < sp.start + sp.n; i++) {
        json_t *word = json_array_get(words, (size_t)i);
        if (!word || json_array_append_new(spans, json_integer(i)) ||
            json_array_append(w, word)) {
            json_decref(node);
            return NULL;
        }
    }
    return node;
}

/* Adds node `role` over sp as the next id (*next), or finds the earlier node with the
 * same spans and role; its id into id[16]. */
static int add_node(json_t *nodes, const char *role, vtr_scene_span sp, const json_t *words,
                    int *next, char id[16])
{
    const char *key;
    json_t *value;
    json_object_foreach(nodes, key, value)
    {
        const json_t *spans = json_object_get(value, "spans");
        if (strcmp(key, "ROOT") && !strcmp(json_string_value(json_object_get(value, "role")), role) &&
            json_array_size(spans) == (size_t)sp.n &&
            json_integer_value(json_array_get(spans, 0)) == sp.start) {
            snprintf(id, 16, "%s", key);
            return 0;
        }
    }
    snprintf(id, 16, "%d", (*next)++);
    return json_object_set_new(nodes, id, graph_node(role, sp, words));
}

json_t *vtr_scene_role_graph(const char *caption, const vtr_scene_caption_parse *p)
{
    json_t *words = json_array(), *nodes = json_object(), *edges = json_array();
    json_t *graph = json_pack("[o, o]", nodes, edges);
    if (!words || !graph)
        goto fail;
    for (const char *c = caption; *c;) {
        while (*c == ' ')
            c++;
        size_t n = strcspn(c, " ");
        if (n && json_array_append_new(words, json_stringn(c, n)))
            goto fail;
        c += n;
    }
    int next = 1;
    char vid[16], aid[16];
    if (json_object_set_new(nodes, "ROOT",
                            graph_node("ROOT", (vtr_scene_span){0, (int)json_array_size(words)},
                                       words)))
        goto fail;
    for (int i = 0; i < p->n_frames; i++) {
        const vtr_scene_frame *f = &p->frames[i];
        if (add_node(nodes, "V", f->verb, words, &next, vid))
            goto fail;
        /* arguments in caption order */
        int order[VTR_SCENE_MAX_ARGS];
        for (int j = 0; j < f->n_args; j++) {
            int k = j;
            while (k > 0 && f->args[order[k - 1]].start > f->args[j].start) {
                order[k] = order[k - 1];
                k--;
            }
            order[k] = j;
        }
        for (int j = 0; j < f->n_args; j++) {
            const char *role = f->roles[order[j]];
            if (add_node(nodes, role, f->args[order[j]], words, &next, aid) ||
                json_array_append_new(edges, json_pack("[s, s, s]", vid, aid, role)))
                goto fail;
        }
    }
    if (!p->n_frames)
        for (int i = 0; i < p->n_nouns; i++)
            if (add_node(nodes, "NOUN", p->nouns[i], words, &next, aid))
                goto fail;
    json_decref(words);
    return graph;
fail:
    json_decref(words);
    json_decref(graph);
    return NULL;
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

/* save_json() of root into the file `name` in the directory of `path`. */
static vtr_status save_json_beside(const char *path, const char *name, const json_t *root,
                                   vtr_error *err)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    char *beside = malloc(dir_len + strlen(name) + 1);
    if (!beside)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    memcpy(beside, path, dir_len);
    strcpy(beside + dir_len, name);
    vtr_status st = save_json(beside, root, err);
    free(beside);
    return st;
}

/* The names of vtr_scene_*_name as a JSON array. */
static json_t *name_array(const char *const *names, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(names[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* What clip `id` shows (VTR_SCENE_TRUTH's "clips" entry), or NULL when out of memory. */
static json_t *scene_truth(const char *id, const vtr_scene *s)
{
    json_t *objects = json_array();
    json_t *clip = json_pack(
        "{s:s, s:{s:s, s:s, s:s*}, s:o}", "video_id", id, "background", "kind",
        vtr_scene_background_name[s->background], "colour", vtr_scene_colour_name[s->colour],
        "colour2", s->colour2 >= 0 ? vtr_scene_colour_name[s->colour2] : NULL, "objects",
        objects);
    for (int i = 0; clip && i < s->n_objects; i++) {
        const vtr_scene_object *o = &s->objects[i];
        if (json_array_append_new(
                objects, json_pack("{s:s, s:s, s:s, s:s, s:b, s:i, s:i}", "shape",
                                   vtr_scene_shape_name[o->shape], "colour",
                                   vtr_scene_colour_name[o->colour], "size",
                                   vtr_scene_size_name[o->size], "motion",
                                   vtr_scene_motion_name[o->motion], "brief", o->brief,
                                   "first_frame", o->first_frame, "last_frame",
                                   o->last_frame))) {
            json_decref(clip);
            return NULL;
        }
    }
    return clip;
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
    json_t *graphs = json_object(), *clips = json_array();
    json_t *truth = json_pack(
        "{s:{s:o, s:o, s:o, s:o, s:o}, s:O}", "names", "colours",
        name_array(vtr_scene_colour_name, VTR_SCENE_COLOURS), "shapes",
        name_array(vtr_scene_shape_name, VTR_SCENE_SHAPES), "sizes",
        name_array(vtr_scene_size_name, VTR_SCENE_SIZES), "motions",
        name_array(vtr_scene_motion_name, VTR_SCENE_MOTIONS), "backgrounds",
        name_array(vtr_scene_background_name, VTR_SCENE_BACKGROUNDS), "clips", clips);
    if (!root || !videos || !sentences || !graphs || !truth ||
        json_object_set(root, "videos", videos) ||
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
                                                    "split", split, "id", i)) ||
            json_array_append_new(clips, scene_truth(id, &scene))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        for (int k = 0; k < o->captions; k++) {
            char caption[512];
            vtr_scene_caption_parse parse;
            vtr_scene_caption_parsed(&scene, o->seed, (uint64_t)i, k, caption, sizeof caption,
                                     &parse);
            /* the same caption text has the same structure: the last graph counts */
            if (json_object_set_new(graphs, caption, vtr_scene_role_graph(caption, &parse)) ||
                json_array_append_new(sentences,
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
    /* the role graphs and what the clips show first: no annotation file without them */
    st = save_json_beside(path, VTR_SCENE_ROLE_GRAPHS, graphs, err);
    if (st == VTR_OK)
        st = save_json_beside(path, VTR_SCENE_TRUTH, truth, err);
    if (st == VTR_OK)
        st = save_json(path, root, err);
end:
    json_decref(truth);
    json_decref(clips);
    json_decref(graphs);
    free(path);
    json_decref(videos);
    json_decref(sentences);
    json_decref(root);
    return st;
}
