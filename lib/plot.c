/* Line charts with cairo (plot.h). */
#define _POSIX_C_SOURCE 200809L
#include "plot.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "file.h"

/* Layout, in pixels (SVG user units). */
#define PANEL_W 460
#define PANEL_H 320
#define TITLE_H 34     /* the figure's title band */
#define MIN_PANEL_W 120
#define MIN_PANEL_H 100
#define MAX_SIDE 16384
#define MARGIN_L 72    /* y tick labels and the y label */
#define MARGIN_R 16
#define MARGIN_T 30    /* the panel's title */
#define MARGIN_B 46    /* x tick labels and the x label */
#define FONT "sans-serif"
#define LINE_WIDTH 2.0
#define TEXT_MAX 512   /* bytes of a label as drawn (vtr_shown's escape included) */
#define PI 3.14159265358979323846

static const double palette[10][3] = {
    {0x1f / 255.0, 0x77 / 255.0, 0xb4 / 255.0}, {0xff / 255.0, 0x7f / 255.0, 0x0e / 255.0},
    {0x2c / 255.0, 0xa0 / 255.0, 0x2c / 255.0}, {0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0},
    {0x94 / 255.0, 0x67 / 255.0, 0xbd / 255.0}, {0x8c / 255.0, 0x56 / 255.0, 0x4b / 255.0},
    {0xe3 / 255.0, 0x77 / 255.0, 0xc2 / 255.0}, {0x7f / 255.0, 0x7f / 255.0, 0x7f / 255.0},
    {0xbc / 255.0, 0xbd / 255.0, 0x22 / 255.0}, {0x17 / 255.0, 0xbe / 255.0, 0xcf / 255.0},
};

void vtr_plot_series_color(size_t i, double rgb[3])
{
    memcpy(rgb, palette[i % 10], sizeof palette[0]);
}

/* ---- text ---------------------------------------------------------------------------- */

static void set_font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

/* s as cairo may draw it (valid UTF-8, no control characters: lib/error.h's vtr_shown),
 * cut at a character boundary with "..." until it is at most max_w wide. */
static const char *fitted(cairo_t *cr, const char *s, double max_w, char *buf, size_t size)
{
    char shown[TEXT_MAX];
    snprintf(buf, size, "%s", vtr_shown(s, shown, sizeof shown));
    cairo_text_extents_t e;
    cairo_text_extents(cr, buf, &e);
    size_t n = strlen(buf);
    while (e.x_advance > max_w && n > 0) {
        do
            n--;
        while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80); /* a continuation byte */
        if (n + 4 > size)
            n = size - 4;
        memcpy(buf + n, "...", 4);
        cairo_text_extents(cr, buf, &e);
    }
    return buf;
}

/* Draws s with its anchor at (x, y): hx 0 / 0.5 / 1 = left / centre / right, vy 0 / 0.5 /
 * 1 = top / middle / bottom of the font's ascent + descent (so that labels of a row share
 * a baseline). max_w > 0 cuts it to that width. */
static void text_at(cairo_t *cr, const char *s, double x, double y, double hx, double vy,
                    double max_w)
{
    char buf[TEXT_MAX];
    s = fitted(cr, s, max_w > 0 ? max_w : INFINITY, buf, sizeof buf);
    cairo_text_extents_t e;
    cairo_font_extents_t f;
    cairo_text_extents(cr, s, &e);
    cairo_font_extents(cr, &f);
    cairo_move_to(cr, x - hx * e.x_advance, y - vy * (f.ascent + f.descent) + f.ascent);
    cairo_show_text(cr, s);
}

static double text_width(cairo_t *cr, const char *s)
{
    char buf[TEXT_MAX];
    cairo_text_extents_t e;
    cairo_text_extents(cr, vtr_shown(s, buf, sizeof buf), &e);
    return e.x_advance;
}

/* ---- axes ---------------------------------------------------------------------------- */

typedef struct axis {
    double lo, hi;  /* the span drawn */
    double first;   /* the first tick */
    double step;    /* between ticks */
} axis;

/* A round step (1, 2, 2.5 or 5 times a power of ten) giving about `target` intervals over
 * span; at least 1 when integer. */
static double nice_step(double span, int target, bool integer)
{
    double raw = span / target;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double step = (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 2.5 ? 2.5 : f <= 5.0 ? 5.0 : 10.0) * mag;
    if (integer && step < 1.0)
        step = 1.0;
    if (integer)
        step = ceil(step);
    return step;
}

/* The axis over the data span [a, b] (a <= b, finite); padded: widened to whole steps
 * (y), else exactly [a, b] with the ticks inside (x). */
static axis make_axis(double a, double b, bool padded, bool integer)
{
    if (!(b > a)) { /* one value: a span around it */
        double d = a != 0.0 ? fabs(a) * 0.1 : 1.0;
        if (integer && d < 1.0)
            d = 1.0;
        a -= d;
        b += d;
    }
    if (padded) { /* a margin, so that a line along the span's end stays off the frame
                     (but a span of values >= 0 keeps 0 as its floor) */
        double m = (b - a) * 0.04;
        a = a >= 0.0 && a - m < 0.0 ? 0.0 : a - m;
        b += m;
    }
    axis ax;
    ax.step = nice_step(b - a, padded ? 5 : 6, integer);
    ax.lo = padded ? floor(a / ax.step) * ax.step : a;
    ax.hi = padded ? ceil(b / ax.step) * ax.step : b;
    ax.first = ceil(ax.lo / ax.step - 1e-9) * ax.step;
    return ax;
}

/* The ticks of ax: first + i * step up to hi; the number of them. */
static int tick_count(const axis *ax)
{
    return (int)floor((ax->hi - ax->first) / ax->step + 1e-9) + 1;
}

/* A tick's label: fixed point with the decimals the step needs, or, for very small or
 * large magnitudes, a mantissa with those decimals and an exponent ("5.0e-04"). */
static void tick_label(char *buf, size_t size, double v, const axis *ax)
{
    double mag = fmax(fabs(ax->lo), fabs(ax->hi));
    if (fabs(v) < ax->step * 1e-6)
        v = 0.0;
    if (v == 0.0) {
        snprintf(buf, size, "0");
    } else if (mag >= 1e5 || mag < 1e-3) {
        double e = floor(log10(mag));
        int d = (int)ceil(-log10(ax->step / pow(10.0, e)) - 1e-9);
        snprintf(buf, size, "%.*e", d < 0 ? 0 : d > 6 ? 6 : d, v);
    } else {
        int d = ax->step >= 1.0 ? 0 : (int)ceil(-log10(ax->step) - 1e-9);
        if (fabs(ax->step * pow(10.0, d) - round(ax->step * pow(10.0, d))) > 1e-6)
            d++; /* 2.5, 0.25 */
        snprintf(buf, size, "%.*f", d > 9 ? 9 : d, v);
    }
}

/* ---- panels -------------------------------------------------------------------------- */

typedef struct frame {
    double x, y, w, h; /* the plot area */
    axis xa, ya;
} frame;

static double to_px(const frame *f, double x)
{
    return f->x + (x - f->xa.lo) / (f->xa.hi - f->xa.lo) * f->w;
}

static double to_py(const frame *f, double y)
{
    return f->y + f->h - (y - f->ya.lo) / (f->ya.hi - f->ya.lo) * f->h;
}

static bool point_ok(const vtr_plot_series *s, size_t i)
{
    return isfinite(s->x[i]) && isfinite(s->y[i]);
}

static bool band_ok(const vtr_plot_series *s, size_t i)
{
    return s->lo && isfinite(s->x[i]) && isfinite(s->lo[i]) && isfinite(s->hi[i]);
}

static void widen(double v, double *lo, double *hi)
{
    if (isfinite(v)) {
        *lo = fmin(*lo, v);
        *hi = fmax(*hi, v);
    }
}

/* The spans of the panel's finite points; false when it has none. */
static bool data_span(const vtr_plot_panel *p, double *x0, double *x1, double *y0, double *y1)
{
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (size_t j = 0; j < p->n_series; j++) {
        const vtr_plot_series *s = &p->series[j];
        for (size_t i = 0; i < s->n; i++) {
            if (point_ok(s, i)) {
                widen(s->x[i], x0, x1);
                widen(s->y[i], y0, y1);
            }
            if (band_ok(s, i)) {
                widen(s->x[i], x0, x1);
                widen(s->lo[i], y0, y1);
                widen(s->hi[i], y0, y1);
            }
        }
    }
    return *x0 <= *x1 && *y0 <= *y1;
}

static void draw_axes(cairo_t *cr, const frame *f, const vtr_plot_panel *p)
{
    char label[64];
    /* grid lines at the y ticks, one path */
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_set_line_width(cr, 1.0);
    int ny = tick_count(&f->ya), nx = tick_count(&f->xa);
    for (int i = 0; i < ny; i++) {
        double y = round(to_py(f, f->ya.first + i * f->ya.step)) + 0.5;
        cairo_move_to(cr, f->x, y);
        cairo_line_to(cr, f->x + f->w, y);
    }
    cairo_stroke(cr);
    /* the ticks, one path */
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    for (int i = 0; i < ny; i++) {
        double y = round(to_py(f, f->ya.first + i * f->ya.step)) + 0.5;
        cairo_move_to(cr, f->x - 4, y);
        cairo_line_to(cr, f->x, y);
    }
    for (int i = 0; i < nx; i++) {
        double x = round(to_px(f, f->xa.first + i * f->xa.step)) + 0.5;
        cairo_move_to(cr, x, f->y + f->h);
        cairo_line_to(cr, x, f->y + f->h + 4);
    }
    cairo_stroke(cr);
    cairo_rectangle(cr, f->x + 0.5, f->y + 0.5, f->w - 1, f->h - 1);
    cairo_stroke(cr);
    /* tick labels */
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    set_font(cr, 11, false);
    for (int i = 0; i < ny; i++) {
        double v = f->ya.first + i * f->ya.step;
        tick_label(label, sizeof label, v, &f->ya);
        text_at(cr, label, f->x - 7, to_py(f, v), 1.0, 0.5, MARGIN_L - 24);
    }
    for (int i = 0; i < nx; i++) {
        double v = f->xa.first + i * f->xa.step;
        tick_label(label, sizeof label, v, &f->xa);
        text_at(cr, label, to_px(f, v), f->y + f->h + 6, 0.5, 0.0, 0);
    }
    /* axis labels */
    set_font(cr, 12, false);
    if (p->x_label)
        text_at(cr, p->x_label, f->x + f->w / 2, f->y + f->h + 24, 0.5, 0.0, f->w);
    if (p->y_label) {
        cairo_save(cr);
        cairo_translate(cr, f->x - MARGIN_L + 4, f->y + f->h / 2);
        cairo_rotate(cr, -PI / 2);
        text_at(cr, p->y_label, 0, 0, 0.5, 0.0, f->h);
        cairo_restore(cr);
    }
}

static void draw_band(cairo_t *cr, const frame *f, const vtr_plot_series *s, const double rgb[3])
{
    cairo_set_source_rgba(cr, rgb[0], rgb[1], rgb[2], 0.22);
    for (size_t i = 0; i < s->n;) {
        if (!band_ok(s, i)) {
            i++;
            continue;
        }
        size_t end = i;
        while (end < s->n && band_ok(s, end))
            end++;
        for (size_t k = i; k < end; k++)
            cairo_line_to(cr, to_px(f, s->x[k]), to_py(f, s->hi[k]));
        for (size_t k = end; k-- > i;)
            cairo_line_to(cr, to_px(f, s->x[k]), to_py(f, s->lo[k]));
        cairo_close_path(cr);
        cairo_fill(cr);
        i = end;
    }
}

/* The series' line as one path (a NaN starts a new piece), then a dot for each point
 * without a finite neighbour. */
static void draw_line(cairo_t *cr, const frame *f, const vtr_plot_series *s, const double rgb[3])
{
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_set_line_width(cr, LINE_WIDTH);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    bool any = false;
    for (size_t i = 0; i < s->n; i++) {
        bool before = i > 0 && point_ok(s, i - 1), after = i + 1 < s->n && point_ok(s, i + 1);
        if (!point_ok(s, i) || (!before && !after))
            continue;
        if (before)
            cairo_line_to(cr, to_px(f, s->x[i]), to_py(f, s->y[i]));
        else
            cairo_move_to(cr, to_px(f, s->x[i]), to_py(f, s->y[i]));
        any = true;
    }
    if (any)
        cairo_stroke(cr);
    for (size_t i = 0; i < s->n; i++)
        if (point_ok(s, i) && !(i > 0 && point_ok(s, i - 1)) &&
            !(i + 1 < s->n && point_ok(s, i + 1))) {
            cairo_new_sub_path(cr);
            cairo_arc(cr, to_px(f, s->x[i]), to_py(f, s->y[i]), 3.0, 0, 2 * PI);
            cairo_fill(cr);
        }
}

/* How many points of s, and of its line (8 samples of each segment) and band, fall in the
 * box (x, y, w, h). */
static long points_within(const frame *f, const vtr_plot_series *s, double x, double y,
                          double w, double h)
{
    long n = 0;
    const double *ys[3] = {s->y, s->lo, s->hi};
    for (int k = 0; k < 3; k++) {
        if (!ys[k])
            continue;
        for (size_t i = 0; i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(ys[k][i]))
                continue;
            double px = to_px(f, s->x[i]), py = to_py(f, ys[k][i]);
            bool next = i + 1 < s->n && isfinite(s->x[i + 1]) && isfinite(ys[k][i + 1]);
            double qx = next ? to_px(f, s->x[i + 1]) : px, qy = next ? to_py(f, ys[k][i + 1]) : py;
            for (int t = 0; t < (next ? 8 : 1); t++) {
                double sx = px + (qx - px) * t / 8, sy = py + (qy - py) * t / 8;
                n += sx >= x && sx <= x + w && sy >= y && sy <= y + h;
            }
        }
    }
    return n;
}

/* The legend of the named series, in the corner of the plot area over the fewest
 * points. */
static void draw_legend(cairo_t *cr, const frame *f, const vtr_plot_panel *p)
{
    set_font(cr, 11, false);
    int n = 0;
    double tw = 0;
    for (size_t j = 0; j < p->n_series; j++)
        if (p->series[j].name && *p->series[j].name) {
            n++;
            tw = fmax(tw, text_width(cr, p->series[j].name));
        }
    if (n == 0)
        return;
    const double row = 16, pad = 6, inset = 8;
    double w = fmin(pad + 22 + 6 + tw + pad, f->w - 2 * inset), h = 2 * pad + n * row - 2;
    double best_x = 0, best_y = 0;
    long best = -1;
    for (int corner = 0; corner < 4; corner++) { /* top right, top left, bottom right, left */
        double x = corner % 2 == 0 ? f->x + f->w - inset - w : f->x + inset;
        double y = corner < 2 ? f->y + inset : f->y + f->h - inset - h;
        long covered = 0;
        for (size_t j = 0; j < p->n_series; j++)
            covered += points_within(f, &p->series[j], x - 12, y - 12, w + 24, h + 24);
        if (best < 0 || covered < best) {
            best = covered;
            best_x = x;
            best_y = y;
        }
    }
    cairo_rectangle(cr, best_x + 0.5, best_y + 0.5, w, h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.75, 0.75, 0.75);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    double y = best_y + pad + row / 2 - 1;
    for (size_t j = 0; j < p->n_series; j++) {
        const vtr_plot_series *s = &p->series[j];
        if (!s->name || !*s->name)
            continue;
        double rgb[3];
        vtr_plot_series_color(j, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_set_line_width(cr, LINE_WIDTH);
        cairo_move_to(cr, best_x + pad, y);
        cairo_line_to(cr, best_x + pad + 22, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        text_at(cr, s->name, best_x + pad + 28, y, 0.0, 0.5, w - pad - 28 - pad);
        y += row;
    }
}

static void draw_panel(cairo_t *cr, const vtr_plot_panel *p, double x, double y, double w,
                       double h)
{
    frame f = {.x = x + MARGIN_L, .y = y + MARGIN_T, .w = w - MARGIN_L - MARGIN_R,
               .h = h - MARGIN_T - MARGIN_B};
    if (p->title) {
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        set_font(cr, 13, true);
        text_at(cr, p->title, x + w / 2, y + 8, 0.5, 0.0, w - 8);
    }
    double x0, x1, y0, y1;
    if (!data_span(p, &x0, &x1, &y0, &y1)) {
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        cairo_set_line_width(cr, 1.0);
        cairo_rectangle(cr, f.x + 0.5, f.y + 0.5, f.w - 1, f.h - 1);
        cairo_stroke(cr);
        set_font(cr, 12, false);
        text_at(cr, p->note ? p->note : "no data", f.x + f.w / 2, f.y + f.h / 2, 0.5, 0.5,
                f.w - 8);
        return;
    }
    if (isfinite(p->x_range[0]) && isfinite(p->x_range[1]) && p->x_range[0] < p->x_range[1]) {
        x0 = p->x_range[0];
        x1 = p->x_range[1];
    }
    f.xa = make_axis(x0, x1, false, p->x_integer);
    f.ya = make_axis(y0, y1, true, false);
    draw_axes(cr, &f, p);
    cairo_save(cr);
    cairo_rectangle(cr, f.x, f.y, f.w, f.h);
    cairo_clip(cr);
    double rgb[3];
    for (size_t j = 0; j < p->n_series; j++) {
        vtr_plot_series_color(j, rgb);
        draw_band(cr, &f, &p->series[j], rgb);
    }
    for (size_t j = 0; j < p->n_series; j++) {
        vtr_plot_series_color(j, rgb);
        draw_line(cr, &f, &p->series[j], rgb);
    }
    cairo_restore(cr);
    draw_legend(cr, &f, p);
}

/* ---- the figure ---------------------------------------------------------------------- */

typedef struct grid {
    int columns, rows, width, height, title_h;
} grid;

static vtr_status check_plot(const vtr_plot *p, grid *g, vtr_error *err)
{
    if (!p || !p->panels || p->n_panels == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "plot: no panel to draw");
    if (p->n_panels > 1024 || p->columns < 0 || p->columns > 1024)
        return vtr_fail(err, VTR_ERR_INVALID, "plot: %zu panels in %d columns is too many",
                        p->n_panels, p->columns);
    for (size_t k = 0; k < p->n_panels; k++) {
        const vtr_plot_panel *pa = &p->panels[k];
        if (pa->n_series && !pa->series)
            return vtr_fail(err, VTR_ERR_INVALID, "plot: panel %zu has no series array", k + 1);
        for (size_t j = 0; j < pa->n_series; j++) {
            const vtr_plot_series *s = &pa->series[j];
            if (s->n && (!s->x || !s->y))
                return vtr_fail(err, VTR_ERR_INVALID, "plot: panel %zu, series %zu: no x or y",
                                k + 1, j + 1);
            if (!s->lo != !s->hi)
                return vtr_fail(err, VTR_ERR_INVALID,
                                "plot: panel %zu, series %zu: a band needs both lo and hi",
                                k + 1, j + 1);
        }
    }
    g->columns = p->columns ? p->columns : p->n_panels == 1 ? 1 : 2;
    if ((size_t)g->columns > p->n_panels)
        g->columns = (int)p->n_panels;
    g->rows = (int)((p->n_panels + (size_t)g->columns - 1) / (size_t)g->columns);
    g->title_h = p->title ? TITLE_H : 0;
    g->width = p->width ? p->width : g->columns * PANEL_W;
    g->height = p->height ? p->height : g->rows * PANEL_H + g->title_h;
    if (g->width < 1 || g->height < 1 || g->width > MAX_SIDE || g->height > MAX_SIDE)
        return vtr_fail(err, VTR_ERR_INVALID, "plot: size %dx%d is outside 1..%d", g->width,
                        g->height, MAX_SIDE);
    if (g->width / g->columns < MIN_PANEL_W || (g->height - g->title_h) / g->rows < MIN_PANEL_H)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "plot: size %dx%d is too small for %d x %d panels (each needs %dx%d)",
                        g->width, g->height, g->columns, g->rows, MIN_PANEL_W, MIN_PANEL_H);
    return VTR_OK;
}

static void draw_figure(cairo_t *cr, const vtr_plot *p, const grid *g)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    if (p->title) {
        cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
        set_font(cr, 15, true);
        text_at(cr, p->title, g->width / 2.0, 9, 0.5, 0.0, g->width - 16);
    }
    double pw = (double)g->width / g->columns, ph = (double)(g->height - g->title_h) / g->rows;
    for (size_t k = 0; k < p->n_panels; k++) {
        int c = (int)(k % (size_t)g->columns), r = (int)(k / (size_t)g->columns);
        draw_panel(cr, &p->panels[k], c * pw, g->title_h + r * ph, pw, ph);
    }
}

typedef struct byte_buffer {
    unsigned char *data;
    size_t size, cap;
    bool failed;
} byte_buffer;

static cairo_status_t append_bytes(void *closure, const unsigned char *data, unsigned int length)
{
    byte_buffer *b = closure;
    if (b->failed)
        return CAIRO_STATUS_WRITE_ERROR;
    if (b->size + length > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->size + length)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return CAIRO_STATUS_WRITE_ERROR;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->size, data, length);
    b->size += length;
    return CAIRO_STATUS_SUCCESS;
}

vtr_status vtr_plot_render(const vtr_plot *p, vtr_plot_format fmt, unsigned char **data,
                           size_t *size, vtr_error *err)
{
    *data = NULL;
    *size = 0;
    grid g = {0};
    vtr_status st = check_plot(p, &g, err);
    if (st != VTR_OK)
        return st;
    byte_buffer buf = {0};
    cairo_surface_t *surface;
    if (fmt == VTR_PLOT_SVG) {
        surface = cairo_svg_surface_create_for_stream(append_bytes, &buf, g.width, g.height);
        cairo_svg_surface_set_document_unit(surface, CAIRO_SVG_UNIT_PX);
    } else {
        surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, g.width, g.height);
    }
    cairo_t *cr = cairo_create(surface);
    draw_figure(cr, p, &g);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS && fmt == VTR_PLOT_PNG)
        cs = cairo_surface_write_to_png_stream(surface, append_bytes, &buf);
    cairo_surface_finish(surface); /* the SVG surface writes its document here */
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (buf.failed)
        st = vtr_fail(err, VTR_ERR_NOMEM, "plot: out of memory");
    else if (cs != CAIRO_STATUS_SUCCESS)
        st = vtr_fail(err, VTR_ERR_IO, "plot: cairo: %s", cairo_status_to_string(cs));
    if (st != VTR_OK) {
        free(buf.data);
        return st;
    }
    *data = buf.data;
    *size = buf.size;
    return VTR_OK;
}

vtr_status vtr_plot_write(const vtr_plot *p, vtr_plot_format fmt, const char *path,
                          vtr_error *err)
{
    unsigned char *data;
    size_t size;
    vtr_status st = vtr_plot_render(p, fmt, &data, &size, err);
    if (st != VTR_OK)
        return st;
    vtr_atomic_file out;
    if ((st = vtr_atomic_open(&out, path, err)) == VTR_OK) {
        if ((st = vtr_write_all(out.fp, data, size, path, err)) == VTR_OK)
            st = vtr_atomic_commit(&out, err);
        else
            vtr_atomic_abort(&out);
    }
    free(data);
    return st;
}

vtr_status vtr_plot_format_parse(const char *s, vtr_plot_format *fmt, vtr_error *err)
{
    if (strcasecmp(s, "svg") == 0)
        *fmt = VTR_PLOT_SVG;
    else if (strcasecmp(s, "png") == 0)
        *fmt = VTR_PLOT_PNG;
    else {
        char buf[64];
        return vtr_fail(err, VTR_ERR_INVALID, "unknown plot format '%s' (svg or png)",
                        vtr_printable(s, strlen(s), buf, sizeof buf));
    }
    return VTR_OK;
}

vtr_status vtr_plot_format_from_name(const char *name, vtr_plot_format *fmt, vtr_error *err)
{
    const char *dot = strrchr(name, '.');
    const char *slash = strrchr(name, '/');
    if (dot && (!slash || dot > slash) && vtr_plot_format_parse(dot + 1, fmt, NULL) == VTR_OK)
        return VTR_OK;
    char buf[256];
    return vtr_fail(err, VTR_ERR_INVALID, "%s: cannot tell the format from the name (.svg or .png)",
                    vtr_shown(name, buf, sizeof buf));
}

const char *vtr_plot_format_mime(vtr_plot_format fmt)
{
    return fmt == VTR_PLOT_PNG ? "image/png" : "image/svg+xml";
}

void vtr_plot_release_caches(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}
