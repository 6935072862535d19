/* Captioned synthetic scenes: the demo's video archive (make demo, pipeline/demo.sh).
 *
 * A scene is a short clip of one or two coloured objects (circle, square, triangle, star,
 * diamond; small, medium or large) over a background (a plain colour, a vertical gradient
 * between two colours, or static noise around a colour). Each object either stays still
 * or moves left, right, up or down at constant speed, and is visible in all frames or,
 * "briefly", in a window of a few frames only. Captions name what is shown from varied
 * templates ("a red circle moves left on a blue background", "a small green triangle
 * appears briefly", ...).
 *
 * Everything is drawn from lib/rng.h streams of (seed, clip index): the same seed gives the
 * same scenes, pixels and captions on every machine. Drawing is exact integer RGB (no
 * anti-aliasing): a pixel is the object's colour when its centre lies inside the shape.
 *
 * vtr_scene_archive_write() encodes N scenes as H.264 MP4 (tools/synth_video.h) and
 * writes their annotations as one JSON file in the MSR-VTT layout that `vtr-import msrvtt`
 * reads (docs/importers.md): {"videos": [{"video_id", "split", "id"}], "sentences":
 * [{"video_id", "caption", "sen_id"}]}, splits train / validate / test; and beside it
 * the role graph of every caption (sent2rolegraph.augment.json, the layout of HGR's
 * release), built from what the generator knows of the caption (its verbs, the shape's
 * noun phrase, adverbs, the background), so that HGR can train on the demo archive; and
 * what every clip shows (scenes.json), so that searches of the archive can be scored.
 */
#ifndef VTR_SYNTH_SCENE_H
#define VTR_SYNTH_SCENE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "lib/error.h"

enum {
    VTR_SCENE_SHAPES = 5,
    VTR_SCENE_COLOURS = 8,
    VTR_SCENE_SIZES = 3,
    VTR_SCENE_MOTIONS = 5,
    VTR_SCENE_BACKGROUNDS = 3,
};

typedef enum vtr_scene_motion {
    VTR_SCENE_STILL,
    VTR_SCENE_LEFT,
    VTR_SCENE_RIGHT,
    VTR_SCENE_UP,
    VTR_SCENE_DOWN,
} vtr_scene_motion;

typedef enum vtr_scene_background {
    VTR_SCENE_PLAIN,
    VTR_SCENE_GRADIENT, /* colour at the top, colour2 at the bottom */
    VTR_SCENE_NOISE,    /* colour plus static per-pixel noise */
} vtr_scene_background;

typedef struct vtr_scene_object {
    int shape;                /* index into vtr_scene_shape_name */
    int colour;               /* index into vtr_scene_colour_name / _rgb */
    int size;                 /* 0 small, 1 medium, 2 large */
    float radius;             /* pixels: the shape fits a circle of this radius */
    float x0, y0, x1, y1;     /* centre (pixels) at first_frame and at last_frame */
    vtr_scene_motion motion;
    int first_frame, last_frame; /* visible in these frames (inclusive) */
    bool brief;               /* visible in a few frames only */
} vtr_scene_object;

typedef struct vtr_scene {
    int width, height, frames;
    vtr_scene_background background;
    int colour, colour2;      /* background colours (colour2: gradient only) */
    uint32_t noise_seed;
    int n_objects;            /* 1 or 2; object 1 is drawn over object 0 */
    vtr_scene_object objects[2];
} vtr_scene;

/* Names and colours of the palette and shapes ("red", "circle", ...); size names are
 * "small", "medium", "large"; motions (by vtr_scene_motion) "still", "left", "right",
 * "up", "down"; backgrounds (by vtr_scene_background) "plain", "gradient", "noise". */
extern const char *const vtr_scene_colour_name[VTR_SCENE_COLOURS];
extern const uint8_t vtr_scene_colour_rgb[VTR_SCENE_COLOURS][3];
extern const char *const vtr_scene_shape_name[VTR_SCENE_SHAPES];
extern const char *const vtr_scene_size_name[VTR_SCENE_SIZES];
extern const char *const vtr_scene_motion_name[VTR_SCENE_MOTIONS];
extern const char *const vtr_scene_background_name[VTR_SCENE_BACKGROUNDS];

/* Draws scene `index` of `seed`: width x height pixels (>= 32 each), `frames` frames
 * (>= 16). Objects never overlap, stay inside the picture, and differ in colour from the
 * background; a brief object is visible in frames/8 .. frames/8 + 2 consecutive frames. */
void vtr_scene_generate(uint64_t seed, uint64_t index, int width, int height, int frames,
                        vtr_scene *out);

/* Whether object `o` is visible in `frame`, and where its centre is (pixels). */
bool vtr_scene_object_at(const vtr_scene *s, int o, int frame, float *cx, float *cy);

/* Paints frame `frame` as packed RGB24 (rows `stride` bytes apart). */
void vtr_scene_draw(const vtr_scene *s, int frame, uint8_t *rgb, size_t stride);

/* Caption `k` of the scene (its own random stream of (seed, index, k)): NUL-terminated
 * into buf (cap >= 256 always suffices). Returns the length. */
size_t vtr_scene_caption(const vtr_scene *s, uint64_t seed, uint64_t index, int k, char *buf,
                         size_t cap);

/* ---- what a caption says: its role graph ------------------------------------------ */

/* The caption templates (vtr_scene_caption_parse.template_id): 0 .. 6 for one object,
 *   0 OBJ ACTION BG     1 BG, OBJ ACTION     2 OBJ ACTION     3 there is OBJ BG
 *   4 a video of OBJ that ACTION     5 the COLOUR SHAPE ACTION BG     6 OBJ BG
 * 7 .. 11 for two (A the upper object, B the lower):
 *   7 A ACTION and B ACTION BG     8 A and B BG     9 B ACTION below A
 *   10 A ACTION while B ACTION     11 there are A and B BG */
enum { VTR_SCENE_CAPTION_TEMPLATES = 12 };
enum { VTR_SCENE_MAX_FRAMES = 2, VTR_SCENE_MAX_ARGS = 6, VTR_SCENE_MAX_NOUNS = 3 };

/* Words start .. start + n - 1 of the caption split on whitespace. */
typedef struct vtr_scene_span {
    int start, n;
} vtr_scene_span;

/* One verb (an SRL frame) and its arguments, roles as text/role_graph.h names them. */
typedef struct vtr_scene_frame {
    vtr_scene_span verb;
    int n_args;
    vtr_scene_span args[VTR_SCENE_MAX_ARGS];
    const char *roles[VTR_SCENE_MAX_ARGS]; /* "ARG0", "ARG1", "ARGM-TMP", ... */
} vtr_scene_frame;

/* The structure of one caption, as its generator knows it: the verbs with their
 * arguments (the shape's noun phrase as ARG1, or ARG0 for "flashes"; "briefly", "for a
 * moment", "while ..." ARGM-TMP; "still" ARGM-MNR; "left", "to the right", "upward"
 * ARGM-DIR; the background ("on a blue background") or "below A" ARGM-LOC; "visible"
 * ARG2; "that" R-ARG1), or, for a caption without a verb, its noun phrases (NOUN). */
typedef struct vtr_scene_caption_parse {
    int template_id;
    int n_frames;
    vtr_scene_frame frames[VTR_SCENE_MAX_FRAMES];
    int n_nouns;
    vtr_scene_span nouns[VTR_SCENE_MAX_NOUNS];
} vtr_scene_caption_parse;

/* vtr_scene_caption(), and what the caption says into *parse (may be NULL). */
size_t vtr_scene_caption_parsed(const vtr_scene *s, uint64_t seed, uint64_t index, int k,
                                char *buf, size_t cap, vtr_scene_caption_parse *parse);

/* The caption's role graph in the layout of HGR's sent2rolegraph.augment.json
 * (text/role_graph.h): [nodes, edges], nodes {"ROOT": {role "ROOT", spans all words,
 * words}, "1": ..., ...}: per frame its verb node (role "V"), then its arguments in
 * caption order (an argument with the same spans and role as an earlier node is that
 * node), each with an edge [verb id, arg id, role]; without frames, NOUN nodes and no
 * edges (the release's "augment" fallback). Words are the caption's whitespace tokens.
 * NULL when out of memory. */
json_t *vtr_scene_role_graph(const char *caption, const vtr_scene_caption_parse *parse);

/* The name of the role graph file beside the annotations. */
#define VTR_SCENE_ROLE_GRAPHS "sent2rolegraph.augment.json"

/* The name of the file beside the annotations that says what every clip shows (the
 * ground truth for measuring searches), from the vtr_scene each was drawn from:
 *   {"names": {"colours": [...], "shapes": [...], "sizes": [...], "motions": [...],
 *              "backgrounds": [...]}        (vtr_scene_*_name: the generator's vocabulary)
 *    "clips": [{"video_id": "video0",
 *               "background": {"kind": "plain" | "gradient" | "noise", "colour": NAME,
 *                              "colour2": NAME (gradient only, the bottom colour)},
 *               "objects": [{"shape", "colour", "size": "small" | "medium" | "large",
 *                            "motion": "still" | "left" | "right" | "up" | "down",
 *                            "brief": true | false, "first_frame": F, "last_frame": L}]}]}
 * clips in video_id order, objects in vtr_scene order (object 1, the lower, drawn over
 * object 0); frames count from 0, both ends visible. */
#define VTR_SCENE_TRUTH "scenes.json"

typedef struct vtr_scene_archive_options {
    int clips;              /* number of clips */
    uint64_t seed;
    int width, height;      /* even (default 160 x 120) */
    int frames;             /* per clip (default 50) */
    int fps;                /* default 25 */
    int captions;           /* per clip (default 5) */
    double val_fraction;    /* of the clips, split "validate" (default 0.1) */
    double test_fraction;   /* split "test" (default 0.2); the rest is "train" */
    const char *annotations; /* JSON file name inside the directory (default
                                "videodatainfo.json") */
} vtr_scene_archive_options;

void vtr_scene_archive_defaults(vtr_scene_archive_options *o);

/* Called after each clip is written (progress); may be NULL. */
typedef void (*vtr_scene_progress_fn)(void *ctx, int done, int total);

/* Writes DIR/video{i}.mp4 for i = 0 .. clips-1 (H.264, yuv420p), DIR/<annotations> and,
 * beside it, sent2rolegraph.augment.json {caption: [nodes, edges]} with the role graph
 * of every caption (vtr_scene_role_graph; `vtr-import msrvtt` stores them) and
 * scenes.json (VTR_SCENE_TRUTH: what every clip shows):
 * clips train first, then validate, then test (the MSR-VTT order). DIR must exist. Every
 * file is written atomically; on failure (VTR_ERR_INVALID for bad options, VTR_ERR_IO,
 * VTR_ERR_CODEC, VTR_ERR_NOMEM) the clips written so far stay and no annotation file is
 * written. */
vtr_status vtr_scene_archive_write(const char *dir, const vtr_scene_archive_options *o,
                                   vtr_scene_progress_fn progress, void *ctx, vtr_error *err);

#endif
