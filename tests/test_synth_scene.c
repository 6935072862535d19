/* The demo's scene renderer (tools/synth_scene.h): objects are drawn where the scene
 * description says and only in their frames, scenes and captions are reproducible, the
 * captions name what is shown, and the archive's clips and MSR-VTT annotations read back
 * (decoded H.264 frames show the objects; vtr-import's layout). Also the untrained
 * backbone of the demo (features/backbone_init.h): torchvision's init statistics, loadable
 * by vtr_backbone_load, the same bytes from the same seed. */
#define _POSIX_C_SOURCE 200809L
#include <libavutil/log.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/decode_item.h"
#include "features/backbone_init.h"
#include "import/import.h"
#include "lib/catalog.h"
#include "lib/file.h"
#include "lib/safetensors.h"
#include "text/role_graph.h"
#include "tools/synth_scene.h"

#define W 160
#define H 120
#define FRAMES 50

static int max_channel_diff(const uint8_t *p, const uint8_t *q)
{
    int d = 0;
    for (int k = 0; k < 3; k++) {
        int e = abs((int)p[k] - (int)q[k]);
        d = e > d ? e : d;
    }
    return d;
}

TEST(synth_scene_objects_where_and_when_the_scene_says)
{
    uint8_t *rgb = malloc((size_t)W * H * 3);
    int briefs = 0, movers = 0, pairs = 0;
    for (int i = 0; i < 200; i++) {
        vtr_scene s;
        vtr_scene_generate(7, (uint64_t)i, W, H, FRAMES, &s);
        CHECK(s.n_objects == 1 || s.n_objects == 2);
        pairs += s.n_objects == 2;
        for (int o = 0; o < s.n_objects; o++) {
            const vtr_scene_object *ob = &s.objects[o];
            CHECK(ob->colour != s.colour && ob->colour != s.colour2);
            /* inside the picture at both ends of its path */
            CHECK(ob->x0 - ob->radius >= 0 && ob->x0 + ob->radius <= W);
            CHECK(ob->x1 - ob->radius >= 0 && ob->x1 + ob->radius <= W);
            CHECK(ob->y0 - ob->radius >= 0 && ob->y0 + ob->radius <= H);
            CHECK(ob->y1 - ob->radius >= 0 && ob->y1 + ob->radius <= H);
            if (ob->brief) {
                int len = ob->last_frame - ob->first_frame + 1;
                CHECK(len >= FRAMES / 8 && len <= FRAMES / 8 + 2);
                briefs++;
            } else {
                CHECK(ob->first_frame == 0 && ob->last_frame == FRAMES - 1);
            }
            movers += ob->motion != VTR_SCENE_STILL;
            float dx = ob->x1 - ob->x0, dy = ob->y1 - ob->y0;
            switch (ob->motion) {
            case VTR_SCENE_LEFT: CHECK(dx < -20 && dy == 0); break;
            case VTR_SCENE_RIGHT: CHECK(dx > 20 && dy == 0); break;
            case VTR_SCENE_UP: CHECK(dy < -20 && dx == 0); break;
            case VTR_SCENE_DOWN: CHECK(dy > 20 && dx == 0); break;
            default: CHECK(dx == 0 && dy == 0); break;
            }
        }
        if (s.n_objects == 2) /* the two never overlap */
            CHECK(fabsf(s.objects[1].y0 - s.objects[0].y0) >=
                  s.objects[0].radius + s.objects[1].radius);
        for (int f = 0; f < FRAMES; f++) {
            vtr_scene_draw(&s, f, rgb, (size_t)W * 3);
            for (int o = 0; o < s.n_objects; o++) {
                const vtr_scene_object *ob = &s.objects[o];
                const uint8_t *want = vtr_scene_colour_rgb[ob->colour];
                float cx, cy;
                bool visible = vtr_scene_object_at(&s, o, f, &cx, &cy);
                CHECK_EQ_INT(visible, f >= ob->first_frame && f <= ob->last_frame);
                if (!visible) { /* a brief object is still: look where it will be */
                    cx = ob->x0;
                    cy = ob->y0;
                }
                const uint8_t *p = rgb + ((size_t)cy * W + (size_t)cx) * 3;
                if (visible) {
                    CHECK_MSG(max_channel_diff(p, want) == 0, "scene %d frame %d object %d", i,
                              f, o);
                } else {
                    /* background there, not the object */
                    CHECK_MSG(max_channel_diff(p, want) >= 40, "scene %d frame %d object %d",
                              i, f, o);
                    if (s.background == VTR_SCENE_PLAIN)
                        CHECK(max_channel_diff(p, vtr_scene_colour_rgb[s.colour]) == 0);
                }
            }
            /* the corner (objects keep a margin of 2 pixels) is background */
            if (s.background == VTR_SCENE_PLAIN)
                CHECK(max_channel_diff(rgb, vtr_scene_colour_rgb[s.colour]) == 0);
        }
    }
    /* the mix the demo relies on */
    CHECK(briefs > 30 && movers > 60 && pairs > 40);
    free(rgb);
}

TEST(synth_scene_shapes_differ_and_sizes_grow)
{
    /* count the pixels of each shape at each size on a plain background */
    vtr_scene s = {.width = 100, .height = 100, .frames = 16, .background = VTR_SCENE_PLAIN,
                   .colour = 2, .colour2 = -1, .n_objects = 1};
    uint8_t *rgb = malloc(100 * 100 * 3);
    int area[VTR_SCENE_SHAPES][2];
    for (int shape = 0; shape < VTR_SCENE_SHAPES; shape++)
        for (int size = 0; size < 2; size++) {
            s.objects[0] = (vtr_scene_object){.shape = shape, .colour = 0, .size = size,
                                              .radius = size ? 40.0f : 20.0f, .x0 = 50,
                                              .y0 = 50, .x1 = 50, .y1 = 50, .last_frame = 15};
            vtr_scene_draw(&s, 3, rgb, 300);
            int n = 0;
            for (int i = 0; i < 100 * 100; i++)
                n += !memcmp(rgb + 3 * i, vtr_scene_colour_rgb[0], 3);
            area[shape][size] = n;
        }
    /* areas relative to the circle's pi r^2: square 4 * 0.75^2 = 2.25, triangle
     * 3 sqrt(3) / 4 = 1.30, star (inner radius 0.45) 5 * 0.45 * sin 36° = 1.32, diamond 2 */
    static const double ratio[VTR_SCENE_SHAPES] = {M_PI, 2.25, 1.299, 1.322, 2.0};
    for (int shape = 0; shape < VTR_SCENE_SHAPES; shape++) {
        double want = ratio[shape] * 40 * 40;
        CHECK_MSG(fabs(area[shape][1] - want) < 0.04 * want, "%s: %d pixels, expected %.0f",
                  vtr_scene_shape_name[shape], area[shape][1], want);
        CHECK(area[shape][0] * 3 < area[shape][1] && area[shape][0] * 5 > area[shape][1]);
    }
    free(rgb);
}

/* "an orange", "a huge": the article fits the next word */
static bool articles_agree(const char *t)
{
    for (const char *p = t; *p; p++) {
        if (p != t && p[-1] != ' ')
            continue;
        bool an = !strncmp(p, "an ", 3), a = !strncmp(p, "a ", 2);
        if ((an && !strchr("aeiou", p[3])) || (a && strchr("aeiou", p[2])))
            return false;
    }
    return true;
}

TEST(synth_scene_reproducible_captions_name_what_is_shown)
{
    int brief_words = 0, briefs = 0;
    for (int i = 0; i < 100; i++) {
        vtr_scene a, b, c;
        vtr_scene_generate(3, (uint64_t)i, W, H, FRAMES, &a);
        vtr_scene_generate(3, (uint64_t)i, W, H, FRAMES, &b);
        vtr_scene_generate(4, (uint64_t)i, W, H, FRAMES, &c);
        CHECK(!memcmp(&a, &b, sizeof a));
        CHECK(memcmp(&a, &c, sizeof a) != 0);
        for (int k = 0; k < 5; k++) {
            char t1[256], t2[256];
            size_t n = vtr_scene_caption(&a, 3, (uint64_t)i, k, t1, sizeof t1);
            vtr_scene_caption(&b, 3, (uint64_t)i, k, t2, sizeof t2);
            CHECK_STR(t1, t2);
            CHECK(n == strlen(t1) && n > 10);
            for (int o = 0; o < a.n_objects; o++) {
                char name[64];
                snprintf(name, sizeof name, "%s %s", vtr_scene_colour_name[a.objects[o].colour],
                         vtr_scene_shape_name[a.objects[o].shape]);
                CHECK_MSG(strstr(t1, name), "'%s' does not name the %s", t1, name);
            }
            if (a.objects[a.n_objects - 1].brief) {
                briefs++;
                brief_words += strstr(t1, "brief") || strstr(t1, "moment") ||
                               strstr(t1, "instant");
            }
            CHECK_MSG(articles_agree(t1), "'%s'", t1);
        }
    }
    /* most captions of a brief object say so (some templates name only the objects) */
    CHECK(briefs > 0 && brief_words * 2 > briefs);
    /* a short buffer truncates */
    vtr_scene s;
    vtr_scene_generate(3, 0, W, H, FRAMES, &s);
    char small[12];
    CHECK(vtr_scene_caption(&s, 3, 0, 0, small, sizeof small) == 11);
}

/* Whether word is one of the list's (NULL-terminated). */
static bool word_in(const char *word, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(word, *list))
            return true;
    return false;
}

/* Whether word is a shape name. */
static bool is_shape(const char *word)
{
    for (int i = 0; i < VTR_SCENE_SHAPES; i++)
        if (!strcmp(word, vtr_scene_shape_name[i]))
            return true;
    return false;
}

/* Every caption template's role graph parses by HGR's reader rules, its spans are
 * contiguous runs of the caption's whitespace words, and each node holds what its role
 * says (a verb, the shape's noun phrase, a direction, a place, a time, ...). */
TEST(synth_scene_role_graphs_of_every_template)
{
    static const char *const verbs[] = {
        "appears", "flashes", "is", "pops", "moves", "slides", "drifts", "rises", "floats",
        "goes", "falls", "sinks", "drops", "stays", "sits", "move", "rests", "are", NULL};
    static const char *const articles[] = {"a", "an", "the", NULL};
    static const char *const places[] = {"on", "over", "against", "below", "in", NULL};
    static const char *const directions[] = {"left", "right", "up", "upward", "down", NULL};
    static const char *const times[] = {"briefly", "moment", "instant", NULL};
    int seen[VTR_SCENE_CAPTION_TEMPLATES] = {0}, n_seen = 0, captions = 0, shared = 0;
    for (int i = 0; i < 400 && n_seen < VTR_SCENE_CAPTION_TEMPLATES; i++) {
        vtr_scene s;
        vtr_scene_generate(11, (uint64_t)i, W, H, FRAMES, &s);
        for (int k = 0; k < 5; k++) {
            char caption[512], plain[512];
            vtr_scene_caption_parse parse;
            vtr_scene_caption_parsed(&s, 11, (uint64_t)i, k, caption, sizeof caption, &parse);
            /* the caption is the same with or without its parse */
            vtr_scene_caption(&s, 11, (uint64_t)i, k, plain, sizeof plain);
            CHECK_STR(caption, plain);
            CHECK(parse.template_id >= 0 && parse.template_id < VTR_SCENE_CAPTION_TEMPLATES);
            if (!seen[parse.template_id]++)
                n_seen++;
            captions++;
            /* the caption's words */
            char copy[512], *save = NULL, *words[64];
            int n_words = 0;
            snprintf(copy, sizeof copy, "%s", caption);
            for (char *w = strtok_r(copy, " ", &save); w && n_words < 64;
                 w = strtok_r(NULL, " ", &save))
                words[n_words++] = w;
            json_t *value = vtr_scene_role_graph(caption, &parse);
            CHECK(value);
            vtr_role_graph g;
            vtr_error err;
            CHECK_OK(vtr_role_graph_parse(value, caption, &g, &err));
            json_decref(value);
            CHECK(g.n_nodes >= 2);
            CHECK_STR(g.nodes[0].id, "ROOT");
            CHECK_STR(g.nodes[0].role, "ROOT");
            CHECK_EQ_INT(g.nodes[0].n_spans, n_words);
            int verbs_seen = 0;
            for (size_t j = 0; j < g.n_nodes; j++) {
                const vtr_role_graph_node *nd = &g.nodes[j];
                CHECK(nd->n_spans >= 1);
                for (size_t w = 0; w < nd->n_spans; w++) {
                    CHECK_MSG(nd->spans[w] == nd->spans[0] + (int64_t)w && nd->spans[w] < n_words,
                              "\"%s\" node %s: spans not a run of its words", caption, nd->id);
                    CHECK_STR(nd->words[w], words[nd->spans[w]]);
                }
                if (j == 0)
                    continue;
                char expect_id[32];
                snprintf(expect_id, sizeof expect_id, "%zu", j);
                CHECK_STR(nd->id, expect_id);
                const char *first = nd->words[0], *last = nd->words[nd->n_spans - 1];
                const char *role = nd->role;
                CHECK_MSG(vtr_role_id(role) >= 0, "\"%s\": role %s", caption, role);
                bool ok;
                if (!strcmp(role, "V")) {
                    verbs_seen++;
                    ok = word_in(first, verbs);
                } else if (!strcmp(role, "ARG0") || !strcmp(role, "ARG1")) {
                    ok = word_in(first, articles) && is_shape(last);
                } else if (!strcmp(role, "NOUN")) {
                    /* the shape's noun phrase, or the background's */
                    ok = (word_in(first, articles) && is_shape(last)) ||
                         word_in(last, (const char *const[]){"background", "backdrop",
                                                              "gradient", "noise", "red",
                                                              "green", "blue", "yellow",
                                                              "orange", "purple", "white",
                                                              "black", NULL});
                } else if (!strcmp(role, "ARGM-LOC")) {
                    ok = word_in(first, places);
                } else if (!strcmp(role, "ARGM-DIR")) {
                    ok = word_in(last, directions);
                } else if (!strcmp(role, "ARGM-TMP")) {
                    ok = word_in(last, times) || !strcmp(first, "while");
                } else if (!strcmp(role, "ARGM-MNR")) {
                    ok = !strcmp(first, "still");
                } else if (!strcmp(role, "ARG2")) {
                    ok = !strcmp(first, "visible");
                } else if (!strcmp(role, "R-ARG1")) {
                    ok = !strcmp(first, "that");
                } else {
                    ok = false;
                }
                CHECK_MSG(ok, "\"%s\": node %s (%s) is \"%s ... %s\"", caption, nd->id, role,
                          first, last);
            }
            /* edges: from a verb to an argument of the edge's role; every verb has one,
             * a caption with no verb has no edges (the release's fallback) */
            int template_verbs[VTR_SCENE_CAPTION_TEMPLATES] = {1, 1, 1, 1, 1, 1, 0,
                                                               2, 0, 1, 2, 1};
            CHECK_EQ_INT(verbs_seen, template_verbs[parse.template_id]);
            for (size_t e = 0; e < g.n_edges; e++) {
                CHECK_STR(g.nodes[g.edges[e].verb].role, "V");
                CHECK_STR(g.nodes[g.edges[e].arg].role, g.edges[e].role);
                shared += g.edges[e].arg < g.edges[e].verb;
            }
            for (size_t j = 1; j < g.n_nodes; j++) {
                bool linked = false;
                for (size_t e = 0; e < g.n_edges; e++)
                    linked |= g.edges[e].verb == j || g.edges[e].arg == j;
                CHECK_MSG(linked == (verbs_seen > 0), "\"%s\": node %zu", caption, j);
            }
            vtr_role_graph_free(&g);
        }
    }
    CHECK_MSG(n_seen == VTR_SCENE_CAPTION_TEMPLATES, "%d templates of %d seen", n_seen,
              VTR_SCENE_CAPTION_TEMPLATES);
    CHECK(captions > 0 && shared == 0);
}

/* One caption's graph in full: the release's layout, word for word. */
TEST(synth_scene_role_graph_of_one_caption)
{
    vtr_scene_caption_parse p = {.template_id = 0, .n_frames = 1};
    p.frames[0] = (vtr_scene_frame){.verb = {4, 1},
                                    .n_args = 3,
                                    .args = {{5, 1}, {0, 4}, {6, 4}},
                                    .roles = {"ARGM-TMP", "ARG1", "ARGM-LOC"}};
    const char *caption = "a small green triangle appears briefly on a blue background";
    json_t *g = vtr_scene_role_graph(caption, &p);
    CHECK(g);
    char *text = json_dumps(g, JSON_COMPACT);
    json_decref(g);
    CHECK_STR(text,
              "[{\"ROOT\":{\"role\":\"ROOT\",\"spans\":[0,1,2,3,4,5,6,7,8,9],\"words\":[\"a\","
              "\"small\",\"green\",\"triangle\",\"appears\",\"briefly\",\"on\",\"a\",\"blue\","
              "\"background\"]},\"1\":{\"role\":\"V\",\"spans\":[4],\"words\":[\"appears\"]},"
              "\"2\":{\"role\":\"ARG1\",\"spans\":[0,1,2,3],\"words\":[\"a\",\"small\","
              "\"green\",\"triangle\"]},\"3\":{\"role\":\"ARGM-TMP\",\"spans\":[5],\"words\":"
              "[\"briefly\"]},\"4\":{\"role\":\"ARGM-LOC\",\"spans\":[6,7,8,9],\"words\":"
              "[\"on\",\"a\",\"blue\",\"background\"]}},[[\"1\",\"2\",\"ARG1\"],[\"1\",\"3\","
              "\"ARGM-TMP\"],[\"1\",\"4\",\"ARGM-LOC\"]]]");
    free(text);
}

TEST(synth_scene_archive_decodes_and_imports)
{
    const char *dir = test_path("scenes");
    CHECK_EQ_INT(test_run("mkdir -p '%s'", dir), 0);
    vtr_scene_archive_options o;
    vtr_scene_archive_defaults(&o);
    o.clips = 10;
    o.seed = 5;
    vtr_error err;
    av_log_set_level(AV_LOG_QUIET);
    CHECK_OK(vtr_scene_archive_write(dir, &o, NULL, NULL, &err));
    /* the decoded frames show each object (H.264 and 4:2:0 chroma: within 40 per channel
     * at its centre) and not a brief one outside its frames */
    vtr_decode_options d;
    vtr_decode_options_defaults(&d);
    d.threads = 1;
    for (int i = 0; i < o.clips; i++) {
        char name[64];
        snprintf(name, sizeof name, "scenes/video%d.mp4", i);
        vtr_decoded_item item = {0};
        CHECK_OK(vtr_decode_item(test_path(name), &d, NULL, &item, &err));
        CHECK(item.frames.ndim == 4 && item.frames.shape[0] == FRAMES &&
              item.frames.shape[1] == H && item.frames.shape[2] == W);
        vtr_scene s;
        vtr_scene_generate(o.seed, (uint64_t)i, W, H, FRAMES, &s);
        for (int f = 0; f < FRAMES; f++)
            for (int ob = 0; ob < s.n_objects; ob++) {
                float cx = s.objects[ob].x0, cy = s.objects[ob].y0;
                bool visible = vtr_scene_object_at(&s, ob, f, &cx, &cy);
                const uint8_t *p = (const uint8_t *)item.frames.data +
                                   (((size_t)f * H + (size_t)cy) * W + (size_t)cx) * 3;
                int diff = max_channel_diff(p, vtr_scene_colour_rgb[s.objects[ob].colour]);
                CHECK_MSG(visible ? diff <= 40 : diff > 30,
                          "%s frame %d object %d: colour off by %d (visible %d)", name, f, ob,
                          diff, visible);
            }
        vtr_decoded_item_free(&item);
    }
    /* the annotations in the MSR-VTT layout, read by the msrvtt importer */
    const char *json = test_path("scenes/videodatainfo.json");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(test_path("scenes.db"), &cat, &err));
    vtr_import_options io = {.catalog = cat, .dataset = "demo"};
    vtr_import_stats stats = {0};
    CHECK_OK(vtr_import_msrvtt(&json, 1, &io, &stats, &err));
    CHECK_EQ_INT(stats.items, 10);
    CHECK_EQ_INT(stats.captions, 50);
    /* and the role graph file beside them: a valid graph for every caption */
    CHECK(stats.graphs_read);
    CHECK_EQ_INT(stats.graphs, 50);
    CHECK_EQ_INT(stats.captions_without_graph, 0);
    /* 70 / 10 / 20 %: train 7, val 1, test 2 */
    CHECK_EQ_INT(json_integer_value(json_object_get(stats.splits, "train")), 7);
    CHECK_EQ_INT(json_integer_value(json_object_get(stats.splits, "val")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(stats.splits, "test")), 2);
    vtr_import_stats_free(&stats);
    vtr_catalog_close(cat);
}

/* json's string at key, or NULL */
static const char *json_str(const json_t *json, const char *key)
{
    return json_string_value(json_object_get(json, key));
}

TEST(synth_scene_archive_says_what_each_clip_shows)
{
    const char *dir = test_path("scene-truth");
    CHECK_EQ_INT(test_run("rm -rf '%s' && mkdir -p '%s'", dir, dir), 0);
    vtr_scene_archive_options o;
    vtr_scene_archive_defaults(&o);
    o.clips = 12;
    o.seed = 3;
    o.width = o.height = 32;
    o.frames = 16;
    /* an older, longer scenes.json is replaced whole */
    CHECK_EQ_INT(test_run("yes old | head -c 100000 >'%s/scenes.json'", dir), 0);
    vtr_error err;
    av_log_set_level(AV_LOG_QUIET);
    CHECK_OK(vtr_scene_archive_write(dir, &o, NULL, NULL, &err));
    json_error_t jerr;
    json_t *truth = json_load_file(test_path("scene-truth/scenes.json"), 0, &jerr);
    CHECK_MSG(truth, "scenes.json: %s", jerr.text);
    const json_t *names = json_object_get(truth, "names");
    for (int c = 0; c < VTR_SCENE_COLOURS; c++)
        CHECK_STR(json_string_value(json_array_get(json_object_get(names, "colours"), (size_t)c)),
                  vtr_scene_colour_name[c]);
    CHECK_EQ_INT(json_array_size(json_object_get(names, "shapes")), VTR_SCENE_SHAPES);
    CHECK_STR(json_string_value(json_array_get(json_object_get(names, "motions"), 1)), "left");
    CHECK_STR(json_string_value(json_array_get(json_object_get(names, "backgrounds"), 2)),
              "noise");
    const json_t *clips = json_object_get(truth, "clips");
    CHECK_EQ_INT(json_array_size(clips), o.clips);
    int pairs = 0, briefs = 0, gradients = 0;
    for (int i = 0; i < o.clips; i++) {
        vtr_scene s;
        vtr_scene_generate(o.seed, (uint64_t)i, o.width, o.height, o.frames, &s);
        const json_t *clip = json_array_get(clips, (size_t)i);
        char id[32];
        snprintf(id, sizeof id, "video%d", i);
        CHECK_STR(json_str(clip, "video_id"), id);
        const json_t *bg = json_object_get(clip, "background");
        CHECK_STR(json_str(bg, "kind"), vtr_scene_background_name[s.background]);
        CHECK_STR(json_str(bg, "colour"), vtr_scene_colour_name[s.colour]);
        if (s.background == VTR_SCENE_GRADIENT)
            CHECK_STR(json_str(bg, "colour2"), vtr_scene_colour_name[s.colour2]);
        else
            CHECK(!json_object_get(bg, "colour2"));
        gradients += s.background == VTR_SCENE_GRADIENT;
        const json_t *objects = json_object_get(clip, "objects");
        CHECK_EQ_INT(json_array_size(objects), s.n_objects);
        pairs += s.n_objects == 2;
        for (int k = 0; k < s.n_objects; k++) {
            const json_t *ob = json_array_get(objects, (size_t)k);
            const vtr_scene_object *want = &s.objects[k];
            CHECK_STR(json_str(ob, "shape"), vtr_scene_shape_name[want->shape]);
            CHECK_STR(json_str(ob, "colour"), vtr_scene_colour_name[want->colour]);
            CHECK_STR(json_str(ob, "size"), vtr_scene_size_name[want->size]);
            CHECK_STR(json_str(ob, "motion"), vtr_scene_motion_name[want->motion]);
            CHECK(json_is_boolean(json_object_get(ob, "brief")) &&
                  json_is_true(json_object_get(ob, "brief")) == want->brief);
            CHECK_EQ_INT(json_integer_value(json_object_get(ob, "first_frame")),
                         want->first_frame);
            CHECK_EQ_INT(json_integer_value(json_object_get(ob, "last_frame")),
                         want->last_frame);
            briefs += want->brief;
        }
    }
    CHECK(pairs > 0 && briefs > 0 && gradients > 0); /* these 12 clips cover every case */
    json_decref(truth);
    /* atomic: no temporary file stays; when it cannot be written (a directory in its
     * place) the write fails and no annotation file appears */
    CHECK_EQ_INT(test_run("ls '%s' | grep -q tmp", dir), 1);
    CHECK_EQ_INT(test_run("rm -rf '%s'/* && mkdir '%s/scenes.json'", dir, dir), 0);
    vtr_error_clear(&err);
    CHECK(vtr_scene_archive_write(dir, &o, NULL, NULL, &err) != VTR_OK);
    CHECK(strstr(err.msg, "scenes.json"));
    CHECK_EQ_INT(test_run("test -e '%s/videodatainfo.json'", dir), 1);
    CHECK_EQ_INT(test_run("ls '%s' | grep -q tmp", dir), 1);
}

TEST(backbone_init_torchvision_statistics_and_loads)
{
    const char *p1 = test_path("r18-a.safetensors"), *p2 = test_path("r18-b.safetensors");
    vtr_error err;
    CHECK_OK(vtr_backbone_init_write(p1, VTR_RESNET18, 9, &err));
    CHECK_OK(vtr_backbone_init_write(p2, VTR_RESNET18, 9, &err));
    CHECK_EQ_INT(test_run("cmp -s '%s' '%s'", p1, p2), 0);
    CHECK_OK(vtr_backbone_init_write(p2, VTR_RESNET18, 10, &err));
    CHECK(test_run("cmp -s '%s' '%s'", p1, p2) != 0);

    vtr_safetensors st;
    CHECK_OK(vtr_safetensors_open(p1, &st, &err));
    CHECK_STR(vtr_safetensors_meta(&st, "pretrained"), "false");
    /* kaiming_normal_(fan_out, relu): sd sqrt(2 / (out_c k k)) */
    const char *names[3] = {"conv1.weight", "layer2.0.conv1.weight", "layer4.1.conv2.weight"};
    const double fan_out[3] = {64 * 49, 128 * 9, 512 * 9};
    for (int t = 0; t < 3; t++) {
        const vtr_tensor *w = vtr_safetensors_find(&st, names[t]);
        CHECK(w && w->dtype == VTR_F32);
        int64_t n = vtr_tensor_numel(w);
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, (const char *)w->data + 4 * i, 4);
            sum += v;
            sq += (double)v * v;
        }
        double sd = sqrt(sq / (double)n), want = sqrt(2.0 / fan_out[t]);
        CHECK_MSG(fabs(sd - want) < 0.03 * want, "%s: sd %g, expected %g", names[t], sd, want);
        CHECK(fabs(sum / (double)n) < 0.03 * want);
    }
    const vtr_tensor *bw = vtr_safetensors_find(&st, "layer3.1.bn2.weight");
    const vtr_tensor *rv = vtr_safetensors_find(&st, "layer1.0.bn1.running_var");
    CHECK(bw && rv && vtr_safetensors_find(&st, "fc.weight") &&
          vtr_safetensors_find(&st, "layer2.0.downsample.1.num_batches_tracked"));
    float one;
    memcpy(&one, bw->data, 4);
    CHECK(one == 1.0f);
    memcpy(&one, rv->data, 4);
    CHECK(one == 1.0f);
    vtr_safetensors_close(&st);

    /* every architecture's file loads as that architecture */
    vtr_backbone *b = NULL;
    CHECK_OK(vtr_backbone_load(p1, VTR_RESNET18, VTR_DEVICE_CPU, &b, &err));
    CHECK_EQ_INT(vtr_backbone_dim(b), 512);
    vtr_backbone_free(b);
    const char *p50 = test_path("r50.safetensors");
    CHECK_OK(vtr_backbone_init_write(p50, VTR_RESNET50, 1, &err));
    CHECK_OK(vtr_backbone_load(p50, VTR_RESNET50, VTR_DEVICE_CPU, &b, &err));
    CHECK_EQ_INT(vtr_backbone_dim(b), 2048);
    vtr_backbone_free(b);
    /* the file records its architecture */
    CHECK_OK(vtr_backbone_load(p50, VTR_BACKBONE_ARCH_INFER, VTR_DEVICE_CPU, &b, &err));
    CHECK_EQ_INT(vtr_backbone_get_arch(b), VTR_RESNET50);
    vtr_backbone_free(b);
    CHECK_FAILS(vtr_backbone_load(p50, VTR_RESNET34, VTR_DEVICE_CPU, &b, &err),
                VTR_ERR_INVALID, "r50.safetensors are resnet50 weights, not resnet34: use -a "
                "resnet50");
}
