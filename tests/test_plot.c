/* Plots: lib/plot.h's SVG (well-formed, one stroked path per series with its points, in
 * the series' colour; bands, gaps, dots) and PNG (signature, size), the atomic write and
 * the argument errors; match/training_curves.h's reading of metrics.jsonl (every error
 * naming the file and line) and its mean and min-max over runs against a hand computation;
 * match/gpo_curves.h's coefficients against vtr_gpo_forward for a checkpoint made here,
 * and its refusal of a model without GPO. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggregate/gpo.h"
#include "lib/checkpoint.h"
#include "lib/config.h"
#include "lib/params.h"
#include "lib/plot.h"
#include "lib/rng.h"
#include "match/gpo_curves.h"
#include "match/model_params.h"
#include "match/train_config.h"
#include "match/training_curves.h"

/* cairo's and fontconfig's process-wide font caches, freed at exit (before the leak
 * checker looks) */
__attribute__((constructor)) static void release_plot_caches_at_exit(void)
{
    atexit(vtr_plot_release_caches);
}

/* ---- reading an SVG ------------------------------------------------------------------ */

/* Whether the tags of the document nest: every <name ...> closed by </name> in order,
 * <... /> closing itself, <?...?> and <!...> skipped. */
static int svg_well_formed(const char *doc, size_t n)
{
    char stack[64][32];
    int depth = 0, elements = 0;
    for (size_t i = 0; i < n; i++) {
        if (doc[i] != '<')
            continue;
        const char *end = memchr(doc + i, '>', n - i);
        if (!end)
            return 0;
        size_t len = (size_t)(end - (doc + i)) + 1;
        const char *t = doc + i + 1;
        if (*t == '?' || *t == '!') {
            i += len - 1;
            continue;
        }
        bool closing = *t == '/';
        if (closing)
            t++;
        size_t name_len = strcspn(t, " \t\r\n/>");
        if (name_len == 0 || name_len >= sizeof stack[0])
            return 0;
        if (closing) {
            if (depth == 0 || strlen(stack[depth - 1]) != name_len ||
                strncmp(stack[depth - 1], t, name_len) != 0)
                return 0;
            depth--;
        } else if (end[-1] != '/') {
            if (depth == 64)
                return 0;
            memcpy(stack[depth], t, name_len);
            stack[depth++][name_len] = '\0';
        }
        elements += !closing;
        i += len - 1;
    }
    return depth == 0 && elements > 0;
}

/* The <path .../> elements of doc stroked (stroke:rgb(..)) or filled (fill:rgb(..)) in
 * colour rgb (to 1e-3): how many; *max_l the most "L" commands and *m_of_max the "M"
 * commands of that path; ys (when not NULL, room for 64) the y of its points in order. */
static int paths_in_color(const char *doc, const char *kind, const double rgb[3], int *max_l,
                          int *m_of_max, double *ys, int *n_ys)
{
    int count = 0;
    char key[32];
    snprintf(key, sizeof key, "%s:rgb(", kind);
    *max_l = -1;
    for (const char *p = strstr(doc, "<path "); p; p = strstr(p + 1, "<path ")) {
        const char *end = strstr(p, "/>");
        const char *c = strstr(p, key);
        if (!end || !c || c > end)
            continue;
        double r, g, b;
        if (sscanf(c + strlen(key), "%lf%%,%lf%%,%lf%%", &r, &g, &b) != 3)
            continue;
        if (fabs(r / 100 - rgb[0]) > 1e-3 || fabs(g / 100 - rgb[1]) > 1e-3 ||
            fabs(b / 100 - rgb[2]) > 1e-3)
            continue;
        count++;
        const char *d = strstr(p, " d=\"");
        int l = 0, m = 0, k = 0;
        double yv[64];
        for (const char *q = d ? d + 4 : end; q < end && *q != '"'; q++) {
            if (*q == 'L' || *q == 'M') {
                double x, y;
                l += *q == 'L';
                m += *q == 'M';
                if (sscanf(q + 1, "%lf %lf", &x, &y) == 2 && k < 64)
                    yv[k++] = y;
            }
        }
        if (l > *max_l) {
            *max_l = l;
            *m_of_max = m;
            if (ys) {
                memcpy(ys, yv, (size_t)k * sizeof *ys);
                *n_ys = k;
            }
        }
    }
    return count;
}

static char *render_svg(const vtr_plot *p)
{
    vtr_error err;
    unsigned char *data;
    size_t size;
    CHECK_OK(vtr_plot_render(p, VTR_PLOT_SVG, &data, &size, &err));
    CHECK(size > 100);
    char *doc = malloc(size + 1);
    CHECK(doc);
    memcpy(doc, data, size);
    doc[size] = '\0';
    free(data);
    CHECK_MSG(strncmp(doc, "<?xml", 5) == 0, "not XML: %.40s", doc);
    CHECK_MSG(svg_well_formed(doc, size), "the SVG's tags do not nest");
    return doc;
}

/* ---- lib/plot.h ---------------------------------------------------------------------- */

TEST(plot_svg_one_path_per_series)
{
    /* three series of 5, 7 and 9 points (y rising, and not along a straight line: cairo
     * merges collinear segments), the second with a band */
    double x[9], y[3][9], lo[9], hi[9];
    for (int i = 0; i < 9; i++) {
        x[i] = i + 1;
        for (int s = 0; s < 3; s++)
            y[s][i] = (s + 1) * 10.0 + i * i * (s + 1);
        lo[i] = y[1][i] - 1;
        hi[i] = y[1][i] + 2;
    }
    vtr_plot_series series[3] = {
        {.name = "five", .x = x, .y = y[0], .n = 5},
        {.name = "seven", .x = x, .y = y[1], .lo = lo, .hi = hi, .n = 7},
        {.name = "nine", .x = x, .y = y[2], .n = 9},
    };
    vtr_plot_panel panel = {.title = "a panel", .x_label = "epoch", .y_label = "value",
                            .series = series, .n_series = 3, .x_integer = true};
    vtr_plot plot = {.title = "three series", .panels = &panel, .n_panels = 1};
    char *doc = render_svg(&plot);
    CHECK(strstr(doc, "width=\"460px\" height=\"354px\"")); /* one panel plus the title */
    int want_points[3] = {5, 7, 9};
    for (int s = 0; s < 3; s++) {
        double rgb[3], ys[64];
        int max_l, m, n_ys = 0;
        vtr_plot_series_color((size_t)s, rgb);
        /* the line (n - 1 segments from one start) and the legend's sample (1 segment) */
        int n = paths_in_color(doc, "stroke", rgb, &max_l, &m, ys, &n_ys);
        CHECK_MSG(n == 2, "series %d: %d stroked paths in its colour, expected 2", s, n);
        CHECK_EQ_INT(max_l, want_points[s] - 1);
        CHECK_EQ_INT(m, 1);
        CHECK_EQ_INT(n_ys, want_points[s]);
        for (int i = 1; i < n_ys; i++) /* a rising y is drawn upwards */
            CHECK_MSG(ys[i] < ys[i - 1], "series %d: point %d at y %g, below %g", s, i, ys[i],
                      ys[i - 1]);
        /* only the second has a band: one filled path in its colour (the legend's box is
         * white) */
        int fills = paths_in_color(doc, "fill", rgb, &max_l, &m, NULL, NULL);
        CHECK_EQ_INT(fills, s == 1 ? 1 : 0);
    }
    free(doc);
}

TEST(plot_svg_gaps_and_dots)
{
    /* NaN at 3 and 5: pieces [0..2], [4] (a dot) and [6..7] */
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {1, 4, 2, NAN, 5, NAN, 7, 3};
    vtr_plot_series s = {.name = NULL, .x = x, .y = y, .n = 8};
    vtr_plot_panel panel = {.series = &s, .n_series = 1};
    vtr_plot plot = {.panels = &panel, .n_panels = 1};
    char *doc = render_svg(&plot);
    double rgb[3];
    int max_l, m;
    vtr_plot_series_color(0, rgb);
    /* no name: no legend sample; the line: 2 pieces, 3 segments in all */
    CHECK_EQ_INT(paths_in_color(doc, "stroke", rgb, &max_l, &m, NULL, NULL), 1);
    CHECK_EQ_INT(m, 2);
    CHECK_EQ_INT(max_l, 3);
    CHECK_EQ_INT(paths_in_color(doc, "fill", rgb, &max_l, &m, NULL, NULL), 1); /* the dot */
    free(doc);

    /* a panel with no finite point still renders (its note instead of lines) */
    double nan2[2] = {NAN, NAN};
    vtr_plot_series empty = {.name = "none", .x = x, .y = nan2, .n = 2};
    vtr_plot_panel panels[2] = {{.series = &s, .n_series = 1},
                                {.series = &empty, .n_series = 1, .note = "no 'k'"}};
    plot = (vtr_plot){.panels = panels, .n_panels = 2};
    doc = render_svg(&plot);
    CHECK(strstr(doc, "width=\"920px\" height=\"320px\""));
    CHECK_EQ_INT(paths_in_color(doc, "stroke", rgb, &max_l, &m, NULL, NULL), 1);
    free(doc);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

TEST(plot_png_size_and_file)
{
    vtr_error err;
    double x[3] = {0, 1, 2}, y[3] = {3, 1, 2};
    vtr_plot_series s = {.name = "s", .x = x, .y = y, .n = 3};
    vtr_plot_panel panels[3] = {{.series = &s, .n_series = 1},
                                {.series = &s, .n_series = 1},
                                {.series = &s, .n_series = 1}};
    vtr_plot plot = {.title = "png", .panels = panels, .n_panels = 3, .width = 700,
                     .height = 500};
    unsigned char *data;
    size_t size;
    CHECK_OK(vtr_plot_render(&plot, VTR_PLOT_PNG, &data, &size, &err));
    CHECK(size > 33);
    CHECK(memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0);
    CHECK(memcmp(data + 12, "IHDR", 4) == 0);
    CHECK_EQ_INT(be32(data + 16), 700);
    CHECK_EQ_INT(be32(data + 20), 500);
    /* the default size: 2 columns, 2 rows, the title */
    plot.width = plot.height = 0;
    unsigned char *data2;
    size_t size2;
    CHECK_OK(vtr_plot_render(&plot, VTR_PLOT_PNG, &data2, &size2, &err));
    CHECK_EQ_INT(be32(data2 + 16), 920);
    CHECK_EQ_INT(be32(data2 + 20), 2 * 320 + 34);
    /* vtr_plot_write writes what vtr_plot_render returns */
    const char *path = test_path("plot.png");
    CHECK_OK(vtr_plot_write(&plot, VTR_PLOT_PNG, path, &err));
    FILE *f = fopen(path, "rb");
    CHECK(f);
    unsigned char *back = malloc(size2);
    CHECK(back && fread(back, 1, size2, f) == size2 && fgetc(f) == EOF);
    fclose(f);
    CHECK(memcmp(back, data2, size2) == 0);
    free(back);
    free(data);
    free(data2);
    /* a directory that does not exist: an error naming the path, nothing written */
    const char *bad = test_path("no-such-dir/plot.png");
    CHECK_FAILS(vtr_plot_write(&plot, VTR_PLOT_PNG, bad, &err), VTR_ERR_IO, "no-such-dir");
    CHECK(access(test_path("no-such-dir"), F_OK) != 0);
}

TEST(plot_argument_errors)
{
    vtr_error err;
    unsigned char *data = (unsigned char *)"x";
    size_t size = 1;
    double x[2] = {0, 1}, y[2] = {0, 1};
    vtr_plot none = {0};
    CHECK_FAILS(vtr_plot_render(&none, VTR_PLOT_SVG, &data, &size, &err), VTR_ERR_INVALID,
                "no panel");
    CHECK(data == NULL && size == 0);
    vtr_plot_series half = {.x = x, .y = y, .lo = y, .n = 2};
    vtr_plot_panel panel = {.series = &half, .n_series = 1};
    vtr_plot plot = {.panels = &panel, .n_panels = 1};
    CHECK_FAILS(vtr_plot_render(&plot, VTR_PLOT_SVG, &data, &size, &err), VTR_ERR_INVALID,
                "panel 1, series 1: a band needs both lo and hi");
    vtr_plot_series no_y = {.x = x, .n = 2};
    panel.series = &no_y;
    CHECK_FAILS(vtr_plot_render(&plot, VTR_PLOT_SVG, &data, &size, &err), VTR_ERR_INVALID,
                "no x or y");
    vtr_plot_series ok = {.x = x, .y = y, .n = 2};
    panel.series = &ok;
    plot.width = 100;
    plot.height = 300;
    CHECK_FAILS(vtr_plot_render(&plot, VTR_PLOT_PNG, &data, &size, &err), VTR_ERR_INVALID,
                "too small");
    plot.width = 20000;
    CHECK_FAILS(vtr_plot_render(&plot, VTR_PLOT_PNG, &data, &size, &err), VTR_ERR_INVALID,
                "outside");

    vtr_plot_format fmt = VTR_PLOT_PNG;
    CHECK_OK(vtr_plot_format_from_name("out/a.SVG", &fmt, &err));
    CHECK(fmt == VTR_PLOT_SVG);
    CHECK_OK(vtr_plot_format_from_name("a.png", &fmt, &err));
    CHECK(fmt == VTR_PLOT_PNG);
    CHECK_FAILS(vtr_plot_format_from_name("a.pdf", &fmt, &err), VTR_ERR_INVALID,
                "a.pdf: cannot tell the format");
    CHECK_FAILS(vtr_plot_format_from_name("dir.svg/plot", &fmt, &err), VTR_ERR_INVALID,
                "dir.svg/plot");
    CHECK_FAILS(vtr_plot_format_parse("jpeg", &fmt, &err), VTR_ERR_INVALID,
                "unknown plot format 'jpeg'");
    CHECK_STR(vtr_plot_format_mime(VTR_PLOT_SVG), "image/svg+xml");
    CHECK_STR(vtr_plot_format_mime(VTR_PLOT_PNG), "image/png");
}

/* ---- match/training_curves.h --------------------------------------------------------- */

/* Writes test_tmpdir()/dir/metrics.jsonl with text; returns the directory. */
static const char *write_run(const char *dir, const char *text)
{
    mkdir(test_path("seeds"), 0777);
    const char *d = test_path(dir);
    mkdir(d, 0777);
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", d);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
    return d;
}

static void check_close(const double *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(fabs(got[i] - want[i]) <= 1e-12 * fmax(1.0, fabs(want[i])),
                  "%s[%zu] = %.17g, expected %.17g", what, i, got[i], want[i]);
}

TEST(curves_mean_and_band_over_seeds)
{
    vtr_error err;
    /* three seeds; c stopped after epoch 2 and logged no K; b's epoch 2 has no validation */
    const char *a = write_run("seeds/a",
        "{\"epoch\":1,\"loss\":10.0,\"k\":15,\"lr\":[0.001, 0.001],\"val\":{\"rsum\":50.0}}\n"
        "{\"epoch\":2,\"loss\":6.0,\"k\":9,\"lr\":[0.001, 0.0001],\"val\":{\"rsum\":80.0}}\n"
        "{\"epoch\":3,\"loss\":4.0,\"k\":5,\"lr\":[0.0001, 0.0001],\"val\":{\"rsum\":90.0}}\n");
    const char *b = write_run("seeds/b",
        "{\"epoch\":1,\"loss\":12.0,\"k\":13,\"lr\":[0.001, 0.001],\"val\":{\"rsum\":40.0}}\n"
        "\n"
        "{\"epoch\":2,\"loss\":7.0,\"k\":7,\"lr\":[0.001, 0.0001]}\n"
        "{\"epoch\":3,\"loss\":5.0,\"k\":6,\"lr\":[0.0001, 0.0001],\"val\":{\"rsum\":96.0}}\n");
    const char *c = write_run("seeds/c",
        "{\"epoch\":1,\"loss\":11.0,\"lr\":0.001,\"val\":{\"rsum\":45.0}}\n"
        "{\"epoch\":2,\"loss\":8.0,\"lr\":[0.001, 0.0001],\"val\":{\"rsum\":70.0}}\n");
    const char *runs[3] = {a, b, c};
    vtr_training_curves tc;
    CHECK_OK(vtr_training_curves_build(runs, 3, NULL, &tc, &err));
    CHECK_EQ_INT(tc.n_runs, 3);
    CHECK_EQ_INT(tc.runs[1].n, 3); /* the blank line skipped */

    /* by hand: loss per epoch over the runs that have it */
    vtr_metric_curve *loss = &tc.curves[VTR_METRIC_LOSS];
    CHECK_EQ_INT(loss->n, 3);
    check_close(loss->x, (double[]){1, 2, 3}, 3, "loss x");
    check_close(loss->mean, (double[]){11.0, 7.0, 4.5}, 3, "loss mean");
    check_close(loss->lo, (double[]){10.0, 6.0, 4.0}, 3, "loss lo");
    check_close(loss->hi, (double[]){12.0, 8.0, 5.0}, 3, "loss hi");
    vtr_metric_curve *rsum = &tc.curves[VTR_METRIC_RSUM];
    CHECK_EQ_INT(rsum->n, 3);
    check_close(rsum->mean, (double[]){45.0, 75.0, 93.0}, 3, "rsum mean");
    check_close(rsum->lo, (double[]){40.0, 70.0, 90.0}, 3, "rsum lo");
    check_close(rsum->hi, (double[]){50.0, 80.0, 96.0}, 3, "rsum hi");
    vtr_metric_curve *k = &tc.curves[VTR_METRIC_K];
    check_close(k->mean, (double[]){14.0, 8.0, 5.5}, 3, "k mean");
    check_close(k->lo, (double[]){13.0, 7.0, 5.0}, 3, "k lo");
    /* the learning rate: each epoch's first step at e-1 and last at e */
    vtr_metric_curve *lr = &tc.curves[VTR_METRIC_LR];
    CHECK_EQ_INT(lr->n, 6);
    check_close(lr->x, (double[]){0, 1, 1, 2, 2, 3}, 6, "lr x");
    check_close(lr->mean, (double[]){0.001, 0.001, 0.001, 0.0001, 0.0001, 0.0001}, 6, "lr");

    /* the figure draws those: one series per panel with its band */
    for (int m = 0; m < VTR_METRIC_COUNT; m++) {
        const vtr_plot_panel *p = &tc.plot.panels[m];
        CHECK_EQ_INT(p->n_series, 1);
        CHECK(p->series[0].y == tc.curves[m].mean && p->series[0].lo == tc.curves[m].lo &&
              p->series[0].hi == tc.curves[m].hi && p->series[0].n == tc.curves[m].n);
        CHECK(p->note == NULL);
        CHECK(p->x_range[0] == 0 && p->x_range[1] == 3);
    }
    CHECK_STR(tc.plot.title, "training curves: mean of 3 runs");
    char *doc = render_svg(&tc.plot);
    free(doc);
    vtr_training_curves_free(&tc);

    /* --separate: a line per run, named without the directory they share, no band */
    vtr_curves_options o = {.separate = true};
    CHECK_OK(vtr_training_curves_build(runs, 3, &o, &tc, &err));
    const vtr_plot_panel *p = &tc.plot.panels[VTR_METRIC_LOSS];
    CHECK_EQ_INT(p->n_series, 3);
    CHECK_STR(p->series[0].name, "a");
    CHECK_STR(p->series[2].name, "c");
    CHECK(p->series[1].lo == NULL);
    check_close(p->series[2].y, (double[]){11.0, 8.0}, 2, "c's loss");
    CHECK_EQ_INT(tc.plot.panels[VTR_METRIC_K].series[2].n, 0); /* c logged no K */
    CHECK(tc.plot.panels[VTR_METRIC_K].note == NULL);
    vtr_training_curves_free(&tc);
}

TEST(curves_missing_metric_says_so)
{
    vtr_error err;
    /* a log without validation and without K: those panels say so, naming the file */
    const char *d = write_run("noval", "{\"epoch\": 1, \"loss\": 3.0, \"lr\": [0.1, 0.1]}\n"
                                       "{\"epoch\": 2, \"loss\": 2.0, \"lr\": [0.1, 0.1]}\n");
    vtr_training_curves tc;
    CHECK_OK(vtr_training_curves_build(&d, 1, NULL, &tc, &err));
    const vtr_plot_panel *p = tc.plot.panels;
    CHECK(p[VTR_METRIC_LOSS].note == NULL && p[VTR_METRIC_LR].note == NULL);
    CHECK_MSG(p[VTR_METRIC_RSUM].note && strstr(p[VTR_METRIC_RSUM].note, "no validation") &&
                  strstr(p[VTR_METRIC_RSUM].note, "noval/metrics.jsonl"),
              "note: %s", p[VTR_METRIC_RSUM].note ? p[VTR_METRIC_RSUM].note : "(none)");
    CHECK(p[VTR_METRIC_K].note && strstr(p[VTR_METRIC_K].note, "no 'k'"));
    CHECK_EQ_INT(p[VTR_METRIC_RSUM].series[0].n, 0);
    CHECK(p[VTR_METRIC_LOSS].series[0].lo == NULL); /* one run: no band */
    CHECK(strstr(tc.plot.title, "noval"));
    free(render_svg(&tc.plot));
    vtr_training_curves_free(&tc);
}

TEST(curves_malformed_logs)
{
    vtr_error err;
    vtr_run_metrics m;
    struct {
        const char *dir, *text, *needle;
    } cases[] = {
        {"bad1", "{\"epoch\": 1, \"loss\": 1}\n{\"epoch\": 2, \"loss\": \n",
         "bad1/metrics.jsonl:2: not a JSON object"},
        {"bad2", "\n{\"loss\": 1}\n", "bad2/metrics.jsonl:2: no integer 'epoch'"},
        {"bad3", "{\"epoch\": 2}\n{\"epoch\": 2}\n", "bad3/metrics.jsonl:2: epoch 2 after epoch 2"},
        {"bad4", "{\"epoch\":1,\"loss\":\"low\"}\n", ":1: 'loss' is not a number"},
        {"bad5", "{\"epoch\": 1, \"val\": {\"rsum\": [1]}}\n", ":1: 'val.rsum' is not a number"},
        {"bad6", "{\"epoch\": 1, \"lr\": [1, 2, 3]}\n", ":1: 'lr' is not a number or a pair"},
        {"bad7", "[1, 2]\n", "bad7/metrics.jsonl:1: not a JSON object"},
        {"bad8", "{\"epoch\": 1, \"val\": 3}\n", ":1: 'val' is not an object"},
        {"bad9", "\n\n", "bad9/metrics.jsonl: no epochs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *d = write_run(cases[i].dir, cases[i].text);
        CHECK_FAILS(vtr_run_metrics_read(d, &m, &err), VTR_ERR_FORMAT, cases[i].needle);
        CHECK(m.n == 0 && m.path == NULL);
    }
    /* a directory without a log: its path and the cause */
    const char *empty = test_path("nolog");
    mkdir(empty, 0777);
    CHECK_FAILS(vtr_run_metrics_read(empty, &m, &err), VTR_ERR_IO,
                "nolog/metrics.jsonl: No such file");
    /* the log named directly; its run is its directory */
    CHECK_OK(vtr_run_metrics_read(test_path("noval/metrics.jsonl"), &m, &err));
    CHECK_STR(m.name, test_path("noval"));
    vtr_run_metrics_free(&m);
    /* building fails with the first bad run's error */
    const char *runs[2] = {test_path("noval"), test_path("bad4")};
    vtr_training_curves tc;
    CHECK_FAILS(vtr_training_curves_build(runs, 2, NULL, &tc, &err), VTR_ERR_FORMAT,
                "bad4/metrics.jsonl:1:");
    CHECK(tc.n_runs == 0 && tc.runs == NULL);
    CHECK_FAILS(vtr_training_curves_build(runs, 0, NULL, &tc, &err), VTR_ERR_INVALID,
                "no run to plot");
}

/* ---- match/gpo_curves.h -------------------------------------------------------------- */

/* A checkpoint at name with the config `model_yaml` (and the required data keys; for
 * kind hgr what HGR's training fixes) and the GPO tensors of the encoders in prefixes
 * (random), plus one other tensor. */
static const char *gpo_checkpoint(const char *name, const char *model_yaml,
                                  const char *const *prefixes, int n_prefixes, uint64_t seed)
{
    vtr_error err;
    char text[1024];
    bool hgr = strstr(model_yaml, "hgr") != NULL;
    snprintf(text, sizeof text,
             "data: {catalog: c.db, dataset: d, features: f, max_frames: 20,\n"
             "       tokenizer: whitespace}\n"
             "model: {feature_dim: 8, embed_size: 8, word_dim: 4, gpo_pe: 8, gpo_hidden: 6, %s}\n"
             "%s",
             model_yaml, hgr ? "loss: {reduction: mean}\ntrain: {size_augment: false}\n" : "");
    vtr_config *cfg = NULL;
    char *dump = NULL;
    CHECK_OK(vtr_train_config_new(&cfg, &err));
    CHECK_OK(vtr_config_load_string(cfg, "test", text, strlen(text), &err));
    CHECK_OK(vtr_config_dump_string(cfg, &dump, &err));
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    CHECK_OK(vtr_model_param_add(&ps, "img_enc.", "fc.weight", VTR_F32, true, 2, 8, 8, &err));
    for (int i = 0; i < n_prefixes; i++)
        CHECK_OK(vtr_model_param_add_gpo(&ps, prefixes[i], 8, 6, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    vtr_model_fill_uniform(ps.data, ps.n_data, 0.6f, &rng);
    vtr_checkpoint_state state = {.config = dump};
    const char *path = test_path(name);
    CHECK_OK(vtr_checkpoint_save(path, &ps, NULL, &state, &err));
    vtr_param_set_free(&ps);
    free(dump);
    vtr_config_free(cfg);
    return path;
}

/* GPO's weights for one set of n elements (D = 3 random features), from params. */
static void gpo_weights_of_one_set(float *w, const float *params, int n)
{
    float *inp = malloc((size_t)n * 3 * sizeof *inp), out[3];
    void *work = malloc(vtr_gpo_workspace_size(1, n, 3, 8, 6));
    CHECK(inp && work);
    for (int i = 0; i < n * 3; i++)
        inp[i] = (float)((i * 37) % 11) - 5.0f;
    vtr_gpo_forward(out, w, work, inp, &n, params, 1, n, 3, 8, 6);
    free(inp);
    free(work);
}

TEST(gpo_curves_equal_gpo_forward)
{
    vtr_error err;
    const char *prefixes[2] = {"img_enc.", "txt_enc."};
    const char *ckpt = gpo_checkpoint("gpo.safetensors", "img_pool: gpo, txt_pool: gpo", prefixes,
                                      2, 5);
    int sizes[3] = {1, 3, 7};
    vtr_gpo_curves_options o = {.sizes = sizes, .n_sizes = 3};
    vtr_gpo_curves gc;
    CHECK_OK(vtr_gpo_curves_build(ckpt, &o, &gc, &err));
    CHECK_EQ_INT(gc.n_sides, 2);
    CHECK_STR(gc.sides[0].name, "visual");
    CHECK_STR(gc.sides[0].prefix, "img_enc.gpool.");
    CHECK_STR(gc.sides[1].prefix, "txt_enc.gpool.");
    CHECK_EQ_INT(gc.max_size, 7);
    CHECK_EQ_INT(gc.plot.n_panels, 2);
    /* the checkpoint's tensors, read back directly */
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(ckpt, 0, &ck, &err));
    for (int j = 0; j < 2; j++) {
        vtr_param_set ps;
        vtr_param_set_init(&ps);
        CHECK_OK(vtr_model_param_add_gpo(&ps, prefixes[j], 8, 6, &err));
        CHECK_OK(vtr_param_set_finalize(&ps, &err));
        CHECK_OK(vtr_checkpoint_load_params(&ck, &ps, VTR_CHECKPOINT_ALLOW_EXTRA, &err));
        const vtr_plot_panel *p = &gc.plot.panels[j];
        CHECK_EQ_INT(p->n_series, 3);
        for (int i = 0; i < 3; i++) {
            int n = sizes[i];
            float w[7];
            gpo_weights_of_one_set(w, ps.data, n);
            const vtr_plot_series *s = &p->series[i];
            CHECK_EQ_INT(s->n, n);
            double sum = 0;
            for (int k = 0; k < n; k++) {
                CHECK(s->x[k] == k + 1);
                CHECK_MSG(fabs(s->y[k] - w[k]) <= 1e-6, "side %d, N %d, k %d: %g, forward %g", j,
                          n, k, s->y[k], (double)w[k]);
                CHECK(s->y[k] == gc.sides[j].weights[(size_t)i * 7 + k]);
                sum += s->y[k];
            }
            CHECK_MSG(fabs(sum - 1.0) < 1e-5, "side %d, N %d: the weights sum to %g", j, n, sum);
        }
        vtr_param_set_free(&ps);
    }
    vtr_checkpoint_close(&ck);
    /* the two sides have their own parameters, so their own weights */
    CHECK(gc.plot.panels[0].series[2].y[0] != gc.plot.panels[1].series[2].y[0]);
    CHECK_STR(gc.plot.panels[0].series[1].name, "N = 3");
    free(render_svg(&gc.plot));
    vtr_gpo_curves_free(&gc);

    /* the text side alone; the default sizes */
    const char *txt = gpo_checkpoint("gpo-text.safetensors", "img_pool: mean, txt_pool: gpo",
                                     prefixes + 1, 1, 6);
    CHECK_OK(vtr_gpo_curves_build(txt, NULL, &gc, &err));
    CHECK_EQ_INT(gc.n_sides, 1);
    CHECK_STR(gc.sides[0].name, "text");
    CHECK_EQ_INT(gc.n_sizes, 4);
    CHECK_EQ_INT(gc.max_size, 40);
    vtr_gpo_curves_free(&gc);

    /* HGR∞: GPO at the global level of both encoders */
    const char *hgr[2] = {"video_encoder.", "text_encoder."};
    const char *inf = gpo_checkpoint("hgr-inf.safetensors", "kind: hgr, global_pool: gpo", hgr, 2,
                                     7);
    CHECK_OK(vtr_gpo_curves_build(inf, &o, &gc, &err));
    CHECK_EQ_INT(gc.n_sides, 2);
    CHECK_STR(gc.sides[0].prefix, "video_encoder.gpool.");
    CHECK_STR(gc.sides[1].prefix, "text_encoder.gpool.");
    CHECK_STR(gc.plot.panels[1].title, "text GPO (text_encoder.gpool)");
    vtr_gpo_curves_free(&gc);
}

TEST(gpo_curves_refuse_a_model_without_gpo)
{
    vtr_error err;
    vtr_gpo_curves gc;
    const char *mean = gpo_checkpoint("mean.safetensors", "img_pool: mean, txt_pool: adpool",
                                      NULL, 0, 7);
    CHECK_FAILS(vtr_gpo_curves_build(mean, NULL, &gc, &err), VTR_ERR_INVALID,
                "mean.safetensors: the model has no GPO to plot (model.img_pool mean, "
                "model.txt_pool adpool)");
    CHECK(gc.n_sides == 0 && gc.sizes == NULL);
    const char *hgr = gpo_checkpoint("hgr.safetensors", "kind: hgr, global_pool: attention",
                                     NULL, 0, 8);
    CHECK_FAILS(vtr_gpo_curves_build(hgr, NULL, &gc, &err), VTR_ERR_INVALID,
                "hgr.safetensors: the model has no GPO to plot (model.kind hgr");
    /* a config that says GPO over a checkpoint without its tensors */
    const char *img[1] = {"img_enc."};
    const char *lacking = gpo_checkpoint("lacking.safetensors", "img_pool: gpo, txt_pool: gpo",
                                         img, 1, 9);
    CHECK_FAILS(vtr_gpo_curves_build(lacking, NULL, &gc, &err), VTR_ERR_NOT_FOUND,
                "txt_enc.gpool.gru.weight_ih_l0");
    CHECK(strstr(err.msg, "lacking.safetensors"));
    /* sizes out of range; a file that is not there */
    int sizes[2] = {4, 5000};
    vtr_gpo_curves_options o = {.sizes = sizes, .n_sizes = 2};
    CHECK_FAILS(vtr_gpo_curves_build(lacking, &o, &gc, &err), VTR_ERR_INVALID,
                "set size 5000 is outside 1..4096");
    CHECK_FAILS(vtr_gpo_curves_build(test_path("none.safetensors"), NULL, &gc, &err), VTR_ERR_IO,
                "none.safetensors");
}
