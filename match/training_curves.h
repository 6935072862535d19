/* Training curves of one or more runs from their metrics.jsonl (docs/training.md: one line
 * per epoch), as a figure of four panels (lib/plot.h): the training loss (mean per step),
 * the validation RSUM, the learning rate, and K, the negatives per query (ADOPT's K; the
 * hinge's 1 or B-1). x is the epoch, numbered from 1; epoch e covers (e-1, e]: its loss,
 * K and validation stand at x = e, its learning rate at x = e-1 (the first step) and x = e
 * (the last), so a step decay shows as a drop at the epoch boundary.
 *
 * Several runs (seeds of one config) are drawn as their mean per epoch with a band from
 * their minimum to their maximum; with `separate`, each run as its own line (several
 * configs side by side). Either way an epoch that only some runs reached is drawn from
 * those runs.
 *
 * A metric that no line of any run carries (an older log without "k") leaves its panel
 * empty with a note saying so; one that some lines lack leaves gaps.
 */
#ifndef VTR_TRAINING_CURVES_H
#define VTR_TRAINING_CURVES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"
#include "lib/plot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The metrics drawn, in the order of the panels. */
typedef enum vtr_run_metric {
    VTR_METRIC_LOSS, /* "loss" */
    VTR_METRIC_RSUM, /* "val": {"rsum"} */
    VTR_METRIC_LR,   /* "lr": [first step's, last step's] (or one number for both) */
    VTR_METRIC_K,    /* "k" */
    VTR_METRIC_COUNT
} vtr_run_metric;

/* One run's log as columns: line i is epoch[i]; NaN where the line lacks the metric. */
typedef struct vtr_run_metrics {
    char *path;       /* the metrics file read (owned) */
    char *name;       /* the run's name for a legend: its directory as given (owned) */
    size_t n;         /* epochs */
    double *epoch;    /* n, increasing */
    double *loss, *rsum, *k, *lr_first, *lr_last; /* n each */
} vtr_run_metrics;

/* Reads a run's log: run is a run directory (its metrics.jsonl is read) or the log file
 * itself. Blank lines are skipped. Errors, all naming the file, and the line where there
 * is one: VTR_ERR_IO "PATH: <strerror>"; VTR_ERR_FORMAT "PATH:LINE: not a JSON object
 * (<jansson's message>)", "PATH:LINE: no integer 'epoch'", "PATH:LINE: epoch 3 after
 * epoch 5" (epochs must increase), "PATH:LINE: 'loss' is not a number" (a metric of the
 * wrong type: "loss", "k", "val.rsum", "lr"), "PATH: no epochs"; VTR_ERR_NOMEM. On
 * failure *out is zeroed. */
vtr_status vtr_run_metrics_read(const char *run, vtr_run_metrics *out, vtr_error *err);

/* Frees it; leaves it zeroed. Safe on a zeroed value. */
void vtr_run_metrics_free(vtr_run_metrics *m);

/* One metric over runs: n points in x order; mean, lo (the minimum) and hi (the maximum)
 * over the runs that have a finite value at that point. Points that no run has are left
 * out, so n is 0 for a metric no run carries. */
typedef struct vtr_metric_curve {
    size_t n;
    double *x, *mean, *lo, *hi; /* n each, one allocation (x owns it) */
} vtr_metric_curve;

/* The curve of metric over runs[0 .. n_runs-1] (see the top for the x of each point).
 * VTR_ERR_NOMEM only; on failure *out is zeroed. */
vtr_status vtr_metric_curve_make(const vtr_run_metrics *runs, size_t n_runs,
                                 vtr_run_metric metric, vtr_metric_curve *out, vtr_error *err);

void vtr_metric_curve_free(vtr_metric_curve *c);

typedef struct vtr_curves_options {
    bool separate;     /* a line per run; else their mean with a min-max band */
    const char *title; /* the figure's; NULL: "training curves: RUN" (one run), "...: mean
                          of N runs" (the legend says "mean (band: min to max)") or
                          "...: N runs" (separate) */
    int width, height; /* the image's size; 0: lib/plot.h's default (920x674) */
} vtr_curves_options;

/* A figure of training curves, ready for vtr_plot_render / vtr_plot_write. Everything
 * plot points at is owned here. */
typedef struct vtr_training_curves {
    vtr_plot plot;
    vtr_run_metrics *runs;     /* n_runs, as read */
    size_t n_runs;
    vtr_metric_curve *curves;  /* VTR_METRIC_COUNT x (separate ? n_runs : 1), metric major */
    size_t n_curves;
    vtr_plot_panel panels[VTR_METRIC_COUNT];
    vtr_plot_series *series;   /* laid out as curves */
    char *title, *notes[VTR_METRIC_COUNT], **names;
} vtr_training_curves;

/* Reads the n_runs runs (vtr_run_metrics_read: directories or log files) and builds
 * their figure. The readers' errors (the first failing run's); VTR_ERR_INVALID "no run
 * to plot" for n_runs 0. On failure *out is zeroed. */
vtr_status vtr_training_curves_build(const char *const *runs, size_t n_runs,
                                     const vtr_curves_options *opt, vtr_training_curves *out,
                                     vtr_error *err);

/* Frees it; leaves it zeroed. Safe on a zeroed value. */
void vtr_training_curves_free(vtr_training_curves *c);

#ifdef __cplusplus
}
#endif

#endif
