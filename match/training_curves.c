/* Training curves from metrics.jsonl (training_curves.h). */
#define _POSIX_C_SOURCE 200809L
#include "training_curves.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/file.h"
#include "lib/json.h"
#include "lib/lines.h"
#include "match/run_dir.h"

/* ---- reading a log ------------------------------------------------------------------- */

void vtr_run_metrics_free(vtr_run_metrics *m)
{
    if (!m)
        return;
    free(m->path);
    free(m->name);
    free(m->epoch);
    free(m->loss);
    free(m->rsum);
    free(m->k);
    free(m->lr_first);
    free(m->lr_last);
    memset(m, 0, sizeof *m);
}

/* Room for line n (0-based) in every column. */
static vtr_status grow_columns(vtr_run_metrics *m, size_t *cap, vtr_error *err)
{
    if (m->n < *cap)
        return VTR_OK;
    size_t c = *cap ? 2 * *cap : 64;
    double **cols[] = {&m->epoch, &m->loss, &m->rsum, &m->k, &m->lr_first, &m->lr_last};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        double *p = realloc(*cols[i], c * sizeof *p);
        if (!p)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory reading %s", m->path);
        *cols[i] = p;
    }
    *cap = c;
    return VTR_OK;
}

/* v as a number into *out; NaN when absent or null. */
static vtr_status number_of(const json_t *v, const char *key, const vtr_line_reader *r,
                            double *out, vtr_error *err)
{
    *out = NAN;
    if (!v || json_is_null(v))
        return VTR_OK;
    if (!json_is_number(v))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: '%s' is not a number", r->name,
                        (long long)r->line, key);
    *out = json_number_value(v);
    return VTR_OK;
}

/* One line's object into row m->n. */
static vtr_status read_line(vtr_run_metrics *m, const json_t *obj, const vtr_line_reader *r,
                            vtr_error *err)
{
    size_t i = m->n;
    const json_t *e = json_object_get(obj, "epoch");
    if (!json_is_integer(e))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: no integer 'epoch'", r->name,
                        (long long)r->line);
    m->epoch[i] = (double)json_integer_value(e);
    if (i > 0 && !(m->epoch[i] > m->epoch[i - 1]))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: epoch %lld after epoch %lld", r->name,
                        (long long)r->line, (long long)json_integer_value(e),
                        (long long)m->epoch[i - 1]);
    const json_t *val = json_object_get(obj, "val");
    if (val && !json_is_object(val) && !json_is_null(val))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: 'val' is not an object", r->name,
                        (long long)r->line);
    vtr_status st;
    if ((st = number_of(json_object_get(obj, "loss"), "loss", r, &m->loss[i], err)) ||
        (st = number_of(json_object_get(obj, "k"), "k", r, &m->k[i], err)) ||
        (st = number_of(json_object_get(val, "rsum"), "val.rsum", r, &m->rsum[i], err)))
        return st;
    const json_t *lr = json_object_get(obj, "lr");
    if (json_is_array(lr) && json_array_size(lr) == 2) {
        if ((st = number_of(json_array_get(lr, 0), "lr", r, &m->lr_first[i], err)) ||
            (st = number_of(json_array_get(lr, 1), "lr", r, &m->lr_last[i], err)))
            return st;
    } else if (json_is_array(lr)) {
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: 'lr' is not a number or a pair of numbers",
                        r->name, (long long)r->line);
    } else {
        if ((st = number_of(lr, "lr", r, &m->lr_first[i], err)))
            return st;
        m->lr_last[i] = m->lr_first[i];
    }
    m->n++;
    return VTR_OK;
}

/* The log of run (a directory or the file) and the run's name: the directory, or the
 * file's directory when it is a metrics.jsonl, else the file. */
static vtr_status log_path(const char *run, vtr_run_metrics *m, vtr_error *err)
{
    struct stat sb;
    size_t len = strlen(run);
    while (len > 1 && run[len - 1] == '/')
        len--;
    if (stat(run, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        m->path = vtr_path_join(run, VTR_RUN_METRICS);
        m->name = strndup(run, len);
    } else {
        m->path = strdup(run);
        const char *slash = strrchr(run, '/');
        bool beside = slash && slash > run && strcmp(slash + 1, VTR_RUN_METRICS) == 0;
        m->name = strndup(run, beside ? (size_t)(slash - run) : len);
    }
    if (!m->path || !m->name)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

vtr_status vtr_run_metrics_read(const char *run, vtr_run_metrics *out, vtr_error *err)
{
    vtr_run_metrics m;
    memset(&m, 0, sizeof m);
    memset(out, 0, sizeof *out);
    vtr_status st = log_path(run, &m, err);
    FILE *fp = st == VTR_OK ? fopen(m.path, "r") : NULL;
    if (st == VTR_OK && !fp)
        st = vtr_fail_errno(err, "%s", m.path);
    vtr_line_reader r;
    vtr_line_reader_init(&r, fp, m.path);
    size_t cap = 0;
    char *line;
    size_t len;
    while (st == VTR_OK && (st = vtr_line_next(&r, &line, &len, err)) == VTR_OK && line) {
        if (vtr_line_is_blank(line))
            continue;
        json_error_t je;
        json_t *obj = json_loadb(line, len, 0, &je);
        if (!json_is_object(obj))
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: not a JSON object (%s)", m.path,
                          (long long)r.line, obj ? "another JSON value" : je.text);
        else if ((st = grow_columns(&m, &cap, err)) == VTR_OK)
            st = read_line(&m, obj, &r, err);
        json_decref(obj);
    }
    vtr_line_reader_free(&r);
    if (fp)
        fclose(fp);
    if (st == VTR_OK && m.n == 0)
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no epochs", m.path);
    if (st != VTR_OK) {
        vtr_run_metrics_free(&m);
        return st;
    }
    *out = m;
    return VTR_OK;
}

/* ---- curves over runs ---------------------------------------------------------------- */

/* A value of one run at one point. key orders the points: 2x, plus 1 for a learning rate
 * at the start of an epoch (after the previous epoch's last step at the same x). */
typedef struct point {
    int64_t key;
    size_t run;
    double value;
} point;

static int point_cmp(const void *a, const void *b)
{
    const point *p = a, *q = b;
    if (p->key != q->key)
        return p->key < q->key ? -1 : 1;
    return (p->run > q->run) - (p->run < q->run);
}

void vtr_metric_curve_free(vtr_metric_curve *c)
{
    if (!c)
        return;
    free(c->x);
    memset(c, 0, sizeof *c);
}

/* The finite values of metric in run r, appended to pts. */
static size_t collect(const vtr_run_metrics *m, size_t r, vtr_run_metric metric, point *pts)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++) {
        int64_t e = (int64_t)m->epoch[i];
        const double *col = metric == VTR_METRIC_LOSS ? m->loss
                            : metric == VTR_METRIC_RSUM ? m->rsum
                            : metric == VTR_METRIC_K    ? m->k
                                                        : m->lr_last;
        if (metric == VTR_METRIC_LR && isfinite(m->lr_first[i]))
            pts[n++] = (point){2 * (e - 1) + 1, r, m->lr_first[i]};
        if (isfinite(col[i]))
            pts[n++] = (point){2 * e, r, col[i]};
    }
    return n;
}

vtr_status vtr_metric_curve_make(const vtr_run_metrics *runs, size_t n_runs,
                                 vtr_run_metric metric, vtr_metric_curve *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (size_t r = 0; r < n_runs; r++)
        total += 2 * runs[r].n;
    point *pts = malloc((total ? total : 1) * sizeof *pts);
    double *buf = malloc((total ? total : 1) * 4 * sizeof *buf);
    if (!pts || !buf) {
        free(pts);
        free(buf);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t r = 0; r < n_runs; r++)
        n += collect(&runs[r], r, metric, pts + n);
    qsort(pts, n, sizeof *pts, point_cmp);
    out->x = buf;
    out->mean = buf + total;
    out->lo = buf + 2 * total;
    out->hi = buf + 3 * total;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        for (; j < n && pts[j].key == pts[i].key; j++) {
            sum += pts[j].value;
            lo = fmin(lo, pts[j].value);
            hi = fmax(hi, pts[j].value);
        }
        size_t k = out->n++;
        out->x[k] = (double)(pts[i].key / 2);
        out->mean[k] = sum / (double)(j - i);
        out->lo[k] = lo;
        out->hi[k] = hi;
        i = j;
    }
    free(pts);
    return VTR_OK;
}

/* ---- the figure ---------------------------------------------------------------------- */

static const struct {
    const char *title, *y_label, *missing;
} panel_text[VTR_METRIC_COUNT] = {
    {"training loss", "loss (mean per step)", "no 'loss' in %s"},
    {"validation RSUM", "RSUM", "no validation ('val.rsum') in %s"},
    {"learning rate", "lr (first and last step)", "no 'lr' in %s"},
    {"K: negatives per query", "K (mean per step)", "no 'k' in %s"},
};

void vtr_training_curves_free(vtr_training_curves *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_curves; i++)
        vtr_metric_curve_free(&c->curves[i]);
    for (size_t r = 0; r < c->n_runs; r++) {
        vtr_run_metrics_free(&c->runs[r]);
        if (c->names)
            free(c->names[r]);
    }
    for (int m = 0; m < VTR_METRIC_COUNT; m++)
        free(c->notes[m]);
    free(c->runs);
    free(c->curves);
    free(c->series);
    free(c->names);
    free(c->title);
    memset(c, 0, sizeof *c);
}

/* The runs' names without the directory they all share ("runs/seed1", "runs/seed2" ->
 * "seed1", "seed2"). */
static vtr_status legend_names(vtr_training_curves *c, vtr_error *err)
{
    if (!(c->names = calloc(c->n_runs, sizeof *c->names)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    size_t common = 0;
    if (c->n_runs > 1) {
        const char *first = c->runs[0].name;
        for (size_t i = 0; first[i]; i++) {
            bool all = true;
            for (size_t r = 1; r < c->n_runs && all; r++)
                all = strncmp(c->runs[r].name, first, i + 1) == 0 && c->runs[r].name[i + 1];
            if (!all)
                break;
            if (first[i] == '/' && first[i + 1])
                common = i + 1;
        }
    }
    for (size_t r = 0; r < c->n_runs; r++)
        if (!(c->names[r] = strdup(c->runs[r].name + common)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

static vtr_status build_figure(vtr_training_curves *c, const vtr_curves_options *o,
                               vtr_error *err)
{
    size_t per = o->separate ? c->n_runs : 1;
    c->curves = calloc(VTR_METRIC_COUNT * per, sizeof *c->curves);
    c->series = calloc(VTR_METRIC_COUNT * per, sizeof *c->series);
    if (!c->curves || !c->series)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    c->n_curves = VTR_METRIC_COUNT * per;
    vtr_status st = legend_names(c, err);
    const char *source = c->n_runs == 1 ? c->runs[0].path : "these runs' metrics";
    double last = 1; /* every panel spans epochs 0 .. the last one */
    for (size_t r = 0; r < c->n_runs; r++)
        last = fmax(last, c->runs[r].epoch[c->runs[r].n - 1]);
    for (int m = 0; m < VTR_METRIC_COUNT && st == VTR_OK; m++) {
        vtr_plot_panel *p = &c->panels[m];
        p->title = panel_text[m].title;
        p->x_label = "epoch";
        p->y_label = panel_text[m].y_label;
        p->x_integer = true;
        p->x_range[1] = last;
        p->series = c->series + m * per;
        p->n_series = per;
        bool any = false;
        for (size_t j = 0; j < per && st == VTR_OK; j++) {
            vtr_metric_curve *cv = &c->curves[m * per + j];
            vtr_plot_series *s = &c->series[m * per + j];
            const vtr_run_metrics *runs = o->separate ? &c->runs[j] : c->runs;
            if ((st = vtr_metric_curve_make(runs, o->separate ? 1 : c->n_runs,
                                            (vtr_run_metric)m, cv, err)))
                break;
            *s = (vtr_plot_series){.x = cv->x, .y = cv->mean, .n = cv->n};
            if (!o->separate && c->n_runs > 1) {
                s->lo = cv->lo;
                s->hi = cv->hi;
                s->name = "mean (band: min to max)";
            } else if (o->separate && c->n_runs > 1) {
                s->name = c->names[j];
            }
            any |= cv->n > 0;
        }
        if (st == VTR_OK && !any) {
            size_t n = strlen(panel_text[m].missing) + strlen(source) + 1;
            if (!(c->notes[m] = malloc(n)))
                return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            snprintf(c->notes[m], n, panel_text[m].missing, source);
            p->note = c->notes[m];
        }
    }
    if (st != VTR_OK)
        return st;
    const char *title = o->title;
    if (!title) {
        size_t n = strlen(c->runs[0].name) + 64;
        if (!(c->title = malloc(n)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        if (c->n_runs == 1)
            snprintf(c->title, n, "training curves: %s", c->runs[0].name);
        else
            snprintf(c->title, n, o->separate ? "training curves: %zu runs"
                                              : "training curves: mean of %zu runs",
                     c->n_runs);
        title = c->title;
    }
    c->plot = (vtr_plot){.title = title, .panels = c->panels, .n_panels = VTR_METRIC_COUNT,
                         .columns = 2, .width = o->width, .height = o->height};
    return VTR_OK;
}

vtr_status vtr_training_curves_build(const char *const *runs, size_t n_runs,
                                     const vtr_curves_options *opt, vtr_training_curves *out,
                                     vtr_error *err)
{
    vtr_curves_options none = {0};
    memset(out, 0, sizeof *out);
    if (n_runs == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "no run to plot");
    vtr_status st = VTR_OK;
    if (!(out->runs = calloc(n_runs, sizeof *out->runs)))
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (size_t r = 0; r < n_runs && st == VTR_OK; r++)
        if ((st = vtr_run_metrics_read(runs[r], &out->runs[r], err)) == VTR_OK)
            out->n_runs = r + 1;
    if (st == VTR_OK)
        st = build_figure(out, opt ? opt : &none, err);
    if (st != VTR_OK)
        vtr_training_curves_free(out);
    return st;
}
