/* GPO's pooling coefficients of a trained model per set size, as VSE∞ shows them (Fig. 5):
 * for each set size N, the weight GPO gives the k-th largest value of every dimension, k =
 * 1 .. N (aggregate/gpo.h: the weights depend on N alone, not on the features). One panel
 * per side that pools with GPO (lib/plot.h), one line per size:
 *
 *   VSE models (model.kind vse)   "visual" (img_enc.gpool.*) when model.img_pool is gpo,
 *                                 "text" (txt_enc.gpool.*) when model.txt_pool is gpo;
 *   HGR∞ (kind hgr, global_pool gpo)  "visual" (video_encoder.gpool.*) and "text"
 *                                 (text_encoder.gpool.*).
 *
 * The checkpoint is opened as match/trained_model.h opens it (its config, or config_path
 * for a converted state_dict that carries none), without the vocabulary; only the GPO
 * tensors are read.
 */
#ifndef VTR_GPO_CURVES_H
#define VTR_GPO_CURVES_H

#include "lib/error.h"
#include "lib/plot.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_GPO_CURVES_MAX_SIZE 4096 /* the largest set size drawn */
#define VTR_GPO_CURVES_MAX_SIZES 32  /* sizes in one figure */

/* The sizes drawn when the caller names none. */
extern const int vtr_gpo_curves_default_sizes[4]; /* 5, 10, 20, 40 */

typedef struct vtr_gpo_curves_options {
    const char *config_path;  /* the training config for a checkpoint without one, or NULL */
    const int *sizes;         /* n_sizes set sizes, each 1 .. VTR_GPO_CURVES_MAX_SIZE; NULL
                                 or n_sizes 0: vtr_gpo_curves_default_sizes */
    int n_sizes;
    const char *title;        /* the figure's; NULL: "GPO pooling coefficients: CKPT" */
    int width, height;        /* the image's size; 0: lib/plot.h's default */
} vtr_gpo_curves_options;

/* One side's GPO and its coefficients. */
typedef struct vtr_gpo_side {
    const char *name;   /* "visual" or "text" (static) */
    char prefix[32];    /* its tensors' prefix: "img_enc.gpool." ... */
    int d_pe, hidden;   /* its sizes (aggregate/gpo.h) */
    float *params;      /* vtr_gpo_param_count(d_pe, hidden) floats, as in the checkpoint */
    float *weights;     /* (n_sizes, max_size): row i holds the sizes[i] coefficients of a
                           set of that size, largest value first, then zeros */
} vtr_gpo_side;

/* The coefficients and their figure, ready for vtr_plot_render / vtr_plot_write. */
typedef struct vtr_gpo_curves {
    int n_sizes, max_size;
    int *sizes;                  /* n_sizes, as asked */
    int n_sides;                 /* 1 or 2 */
    vtr_gpo_side sides[2];
    vtr_plot plot;               /* one panel per side */
    vtr_plot_panel panels[2];
    vtr_plot_series *series;     /* n_sides x n_sizes: x = k (1 .. N), y = the weights */
    double *values;              /* the series' arrays */
    char *title, *panel_titles[2], **names;
} vtr_gpo_curves;

/* Reads the GPO parameters of checkpoint ckpt and computes their coefficients for each
 * size (vtr_gpo_forward), then builds the figure. Errors, naming the checkpoint:
 * VTR_ERR_INVALID "CKPT: the model has no GPO to plot (model.img_pool mean,
 * model.txt_pool mean)" (or "(model.kind hgr, model.global_pool attention)"); a size out
 * of range or too many sizes (VTR_ERR_INVALID); the checkpoint's and its config's errors
 * as vtr_trained_model_open_config reports them; a missing or misshapen GPO tensor
 * (vtr_checkpoint_load_params); VTR_ERR_NOMEM. On failure *out is zeroed. */
vtr_status vtr_gpo_curves_build(const char *ckpt, const vtr_gpo_curves_options *opt,
                                vtr_gpo_curves *out, vtr_error *err);

/* Frees it; leaves it zeroed. Safe on a zeroed value. */
void vtr_gpo_curves_free(vtr_gpo_curves *c);

#ifdef __cplusplus
}
#endif

#endif
