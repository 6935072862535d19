/* Line charts drawn with cairo, as SVG or PNG: one or more panels in a grid, each with
 * axes (ticks, labels), a title, a legend and any number of named series, a series
 * optionally with a band (a spread: lower and upper values per point) under its line.
 *
 * A figure is described by plain values (vtr_plot, vtr_plot_panel, vtr_plot_series) that
 * point at the caller's arrays; nothing is copied or kept. It is rendered into a malloc'ed
 * buffer (vtr_plot_render: what a web server sends) or into a file (vtr_plot_write:
 * atomically, lib/file.h). Units: pixels for PNG; for SVG the same numbers as user units
 * ("px"), so the two look alike.
 *
 * Drawing rules:
 *   - the series of a panel get the palette's colours in order (vtr_plot_series_color);
 *     a band is the same colour, translucent, under the line;
 *   - a NaN y (or lo / hi) leaves a gap: the line (band) breaks there; a point with no
 *     finite neighbour is drawn as a dot;
 *   - the y axis spans every finite y, lo and hi of the panel, widened a little and to
 *     round ticks (never below 0 when all are >= 0); the x axis spans the x values
 *     exactly, or the panel's x_range; a panel with no finite point shows its note
 *     (or "no data") in the middle of an empty frame;
 *   - the legend (the series that have a name) sits in the corner of the plot area where
 *     it covers the least of the lines and bands.
 *
 * In an SVG every line of a series is one <path> element stroked in the series' colour
 * (its legend sample another, of one segment); text is drawn as glyph outlines (cairo's
 * SVG surface), so the file needs no fonts to display.
 */
#ifndef VTR_PLOT_H
#define VTR_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_plot_format {
    VTR_PLOT_SVG,
    VTR_PLOT_PNG,
} vtr_plot_format;

/* One line: n points (x[i], y[i]) in order; lo and hi (n each, both or neither) give the
 * band drawn under it. */
typedef struct vtr_plot_series {
    const char *name;          /* legend text; NULL or "" keeps it out of the legend */
    const double *x, *y;       /* n each */
    const double *lo, *hi;     /* n each, or NULL: no band */
    size_t n;
} vtr_plot_series;

typedef struct vtr_plot_panel {
    const char *title;         /* over the panel, or NULL */
    const char *x_label, *y_label; /* or NULL */
    const vtr_plot_series *series; /* n_series, drawn in order */
    size_t n_series;
    bool x_integer;            /* x ticks on whole numbers only (epochs, positions) */
    double x_range[2];         /* the x span drawn when x_range[0] < x_range[1], both
                                  finite (points outside it are cut off); else the data's */
    const char *note;          /* shown instead of the lines when the panel has no finite
                                  point ("no validation in these runs"); NULL: "no data" */
} vtr_plot_panel;

typedef struct vtr_plot {
    const char *title;         /* over the figure, or NULL */
    const vtr_plot_panel *panels; /* n_panels, placed row by row */
    size_t n_panels;
    int columns;               /* panels per row; 0: 1 for one panel, else 2 */
    int width, height;         /* the image's size; 0: 460 per column, 320 per row (+ 34
                                  for a title) */
} vtr_plot;

/* The colour of series i of a panel (the palette repeats after 10), each component in
 * [0, 1]: matplotlib's "tab10" (blue, orange, green, red, ...). */
void vtr_plot_series_color(size_t i, double rgb[3]);

/* Renders p as fmt into a malloc'ed buffer: *data (free it) of *size bytes, an SVG
 * document (UTF-8 XML) or a PNG file. Errors (nothing allocated then): VTR_ERR_INVALID for
 * a figure that cannot be drawn ("plot: ..." naming it: no panel, a series with n > 0
 * and no x or y, a band with only one of lo / hi, a side above 16384, panels smaller
 * than 120x100); VTR_ERR_NOMEM; VTR_ERR_IO "plot: cairo: <its message>" when cairo
 * fails. */
vtr_status vtr_plot_render(const vtr_plot *p, vtr_plot_format fmt, unsigned char **data,
                           size_t *size, vtr_error *err);

/* Renders p as fmt and writes it to path atomically (lib/file.h: a temporary file beside
 * it, renamed; a failed write leaves path as it was). The errors of vtr_plot_render, and
 * VTR_ERR_IO naming path when it cannot be written. */
vtr_status vtr_plot_write(const vtr_plot *p, vtr_plot_format fmt, const char *path,
                          vtr_error *err);

/* The format a file name asks for by its extension, ".svg" or ".png" (any case).
 * VTR_ERR_INVALID "NAME: cannot tell the format from the name (.svg or .png)" otherwise. */
vtr_status vtr_plot_format_from_name(const char *name, vtr_plot_format *fmt, vtr_error *err);

/* "svg" / "png" into *fmt; VTR_ERR_INVALID "unknown plot format 'X' (svg or png)". */
vtr_status vtr_plot_format_parse(const char *s, vtr_plot_format *fmt, vtr_error *err);

/* The MIME type of fmt: "image/svg+xml" or "image/png". */
const char *vtr_plot_format_mime(vtr_plot_format fmt);

/* Frees what cairo and fontconfig keep for the whole process once text has been drawn
 * (the font lookups: about 1 KB, the same after one plot or a thousand), which a leak
 * checker reports at exit. Call it at exit after the last plot, and only when nothing
 * else in the process uses cairo or fontconfig any more: vtr-plot and the tests do; a
 * server that draws plots until it ends need not. */
void vtr_plot_release_caches(void);

#ifdef __cplusplus
}
#endif

#endif
