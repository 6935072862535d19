/* GPO's pooling coefficients per set size (gpo_curves.h). */
#define _POSIX_C_SOURCE 200809L
#include "gpo_curves.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "lib/checkpoint.h"
#include "lib/params.h"
#include "match/model_params.h"
#include "match/trained_model.h"

const int vtr_gpo_curves_default_sizes[4] = {5, 10, 20, 40};

void vtr_gpo_curves_free(vtr_gpo_curves *c)
{
    if (!c)
        return;
    for (int i = 0; i < 2; i++) {
        free(c->sides[i].params);
        free(c->sides[i].weights);
        free(c->panel_titles[i]);
    }
    if (c->names)
        for (int i = 0; i < c->n_sizes; i++)
            free(c->names[i]);
    free(c->names);
    free(c->sizes);
    free(c->series);
    free(c->values);
    free(c->title);
    memset(c, 0, sizeof *c);
}

/* Side s: the GPO under encoder prefix enc ("img_enc.") read from ck. */
static vtr_status load_side(const vtr_checkpoint *ck, vtr_gpo_side *s, const char *name,
                            const char *enc, int d_pe, int hidden, vtr_error *err)
{
    s->name = name;
    s->d_pe = d_pe;
    s->hidden = hidden;
    snprintf(s->prefix, sizeof s->prefix, "%sgpool.", enc);
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    vtr_status st;
    size_t n = vtr_gpo_param_count(d_pe, hidden);
    if ((st = vtr_model_param_add_gpo(&ps, enc, d_pe, hidden, err)) == VTR_OK &&
        (st = vtr_param_set_finalize(&ps, err)) == VTR_OK &&
        (st = vtr_checkpoint_load_params(ck, &ps, VTR_CHECKPOINT_ALLOW_EXTRA, err)) == VTR_OK) {
        if (!(s->params = malloc(n * sizeof *s->params)))
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        else
            memcpy(s->params, ps.data, n * sizeof *s->params); /* gpo.h's flat layout */
    }
    vtr_param_set_free(&ps);
    return st;
}

/* The sides of the model t that pool with GPO, loaded; VTR_ERR_INVALID when none does. */
static vtr_status load_sides(const vtr_trained_model *t, vtr_gpo_curves *c, vtr_error *err)
{
    const vtr_train_options *o = &t->o;
    vtr_status st = VTR_OK;
    if (o->kind == VTR_MODEL_HGR) {
        const vtr_hgr_config *h = &o->hgr;
        if (h->global_pool != VTR_HGR_POOL_GPO)
            return vtr_fail(err, VTR_ERR_INVALID, "the model has no GPO to plot (model.kind hgr, "
                            "model.global_pool attention)");
        if ((st = load_side(&t->ck, &c->sides[0], "visual", "video_encoder.", h->gpo_pe,
                            h->gpo_hidden, err)) ||
            (st = load_side(&t->ck, &c->sides[1], "text", "text_encoder.", h->gpo_pe,
                            h->gpo_hidden, err)))
            return st;
        c->n_sides = 2;
        return VTR_OK;
    }
    const vtr_vse_pool_config *img = &o->model.img_pool, *txt = &o->model.txt_pool;
    if (img->kind != VTR_VSE_POOL_GPO && txt->kind != VTR_VSE_POOL_GPO)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "the model has no GPO to plot (model.img_pool %s, model.txt_pool %s)",
                        vtr_vse_pooler_name(img->kind), vtr_vse_pooler_name(txt->kind));
    if (img->kind == VTR_VSE_POOL_GPO &&
        (st = load_side(&t->ck, &c->sides[c->n_sides++], "visual", "img_enc.", img->gpo_pe,
                        img->gpo_hidden, err)))
        return st;
    if (txt->kind == VTR_VSE_POOL_GPO &&
        (st = load_side(&t->ck, &c->sides[c->n_sides++], "text", "txt_enc.", txt->gpo_pe,
                        txt->gpo_hidden, err)))
        return st;
    return VTR_OK;
}

/* The coefficients of side s for every size: one batch of sets of the sizes (their
 * values do not matter: one dimension of zeros). */
static vtr_status coefficients(vtr_gpo_side *s, const vtr_gpo_curves *c, vtr_error *err)
{
    int B = c->n_sizes, T = c->max_size;
    float *inp = calloc((size_t)B * T, sizeof *inp);
    float *pooled = malloc((size_t)B * sizeof *pooled);
    void *work = malloc(vtr_gpo_workspace_size(B, T, 1, s->d_pe, s->hidden));
    s->weights = malloc((size_t)B * T * sizeof *s->weights);
    vtr_status st = VTR_OK;
    if (!inp || !pooled || !work || !s->weights)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    else
        vtr_gpo_forward(pooled, s->weights, work, inp, c->sizes, s->params, B, T, 1, s->d_pe,
                        s->hidden);
    free(inp);
    free(pooled);
    free(work);
    return st;
}

static char *text_printf(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, fmt, a, b);
    return s;
}

static vtr_status build_figure(vtr_gpo_curves *c, const char *ckpt,
                               const vtr_gpo_curves_options *o, vtr_error *err)
{
    size_t total = 0;
    for (int i = 0; i < c->n_sizes; i++)
        total += 2 * (size_t)c->sizes[i];
    c->series = calloc((size_t)c->n_sides * c->n_sizes, sizeof *c->series);
    c->values = malloc(total * c->n_sides * sizeof *c->values);
    c->names = calloc((size_t)c->n_sizes, sizeof *c->names);
    c->title = o->title ? NULL : text_printf("%s%s", "GPO pooling coefficients: ", ckpt);
    if (!c->series || !c->values || !c->names || (!o->title && !c->title))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n_sizes; i++) {
        char name[32];
        snprintf(name, sizeof name, "N = %d", c->sizes[i]);
        if (!(c->names[i] = strdup(name)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    double *v = c->values;
    for (int j = 0; j < c->n_sides; j++) {
        const vtr_gpo_side *s = &c->sides[j];
        size_t len = strlen(s->prefix);
        char prefix[sizeof s->prefix];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(len ? len - 1 : 0), s->prefix);
        if (!(c->panel_titles[j] = text_printf("%s GPO (%s)", s->name, prefix)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        vtr_plot_series *row = c->series + (size_t)j * c->n_sizes;
        for (int i = 0; i < c->n_sizes; i++) {
            int N = c->sizes[i];
            const float *w = s->weights + (size_t)i * c->max_size;
            row[i] = (vtr_plot_series){.name = c->names[i], .x = v, .y = v + N, .n = (size_t)N};
            for (int k = 0; k < N; k++) {
                v[k] = k + 1;
                v[N + k] = w[k];
            }
            v += 2 * N;
        }
        c->panels[j] = (vtr_plot_panel){.title = c->panel_titles[j],
                                        .x_label = "k: rank of the value (1 = the largest)",
                                        .y_label = "coefficient θ_k", .series = row,
                                        .n_series = (size_t)c->n_sizes, .x_integer = true,
                                        .x_range = {1, c->max_size > 1 ? c->max_size : 2}};
    }
    c->plot = (vtr_plot){.title = o->title ? o->title : c->title, .panels = c->panels,
                         .n_panels = (size_t)c->n_sides, .columns = c->n_sides,
                         .width = o->width, .height = o->height};
    return VTR_OK;
}

vtr_status vtr_gpo_curves_build(const char *ckpt, const vtr_gpo_curves_options *opt,
                                vtr_gpo_curves *out, vtr_error *err)
{
    vtr_gpo_curves_options none = {0};
    const vtr_gpo_curves_options *o = opt ? opt : &none;
    const int *sizes = o->n_sizes > 0 && o->sizes ? o->sizes : vtr_gpo_curves_default_sizes;
    int n_sizes = o->n_sizes > 0 && o->sizes ? o->n_sizes : 4;
    memset(out, 0, sizeof *out);
    if (n_sizes > VTR_GPO_CURVES_MAX_SIZES)
        return vtr_fail(err, VTR_ERR_INVALID, "%d set sizes: at most %d in one plot", n_sizes,
                        VTR_GPO_CURVES_MAX_SIZES);
    for (int i = 0; i < n_sizes; i++)
        if (sizes[i] < 1 || sizes[i] > VTR_GPO_CURVES_MAX_SIZE)
            return vtr_fail(err, VTR_ERR_INVALID, "set size %d is outside 1..%d", sizes[i],
                            VTR_GPO_CURVES_MAX_SIZE);
    vtr_trained_model t;
    vtr_status st = vtr_trained_model_open_config(ckpt, o->config_path, NULL, 0, &t, err);
    if (st != VTR_OK)
        return st;
    if (!(out->sizes = malloc((size_t)n_sizes * sizeof *out->sizes))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    memcpy(out->sizes, sizes, (size_t)n_sizes * sizeof *sizes);
    out->n_sizes = n_sizes;
    for (int i = 0; i < n_sizes; i++)
        if (sizes[i] > out->max_size)
            out->max_size = sizes[i];
    if ((st = load_sides(&t, out, err)))
        goto end;
    for (int j = 0; j < out->n_sides && st == VTR_OK; j++)
        st = coefficients(&out->sides[j], out, err);
    if (st == VTR_OK)
        st = build_figure(out, ckpt, o, err);
end:
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", ckpt);
        vtr_gpo_curves_free(out);
    }
    vtr_trained_model_close(&t);
    return st;
}
