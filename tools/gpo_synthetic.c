#define _POSIX_C_SOURCE 200809L
#include "gpo_synthetic.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/blas_threads.h"
#include "lib/log.h"
#include "lib/optim.h"
#include "lib/rng.h"

/* ---- patterns ----------------------------------------------------------------------------- */

vtr_gpo_pattern vtr_gpo_table10_pattern(int i)
{
    static const vtr_gpo_pattern table[VTR_GPO_TABLE10_PATTERNS] = {
        {VTR_GPO_PATTERN_AVG, 0},  {VTR_GPO_PATTERN_KMAX, 1},   {VTR_GPO_PATTERN_KMAX, 10},
        {VTR_GPO_PATTERN_TOP, 50}, {VTR_GPO_PATTERN_LINEAR, 0},
    };
    return table[i >= 0 && i < VTR_GPO_TABLE10_PATTERNS ? i : 0];
}

void vtr_gpo_pattern_coefficients(float *w, vtr_gpo_pattern p, int n)
{
    int m = n; /* the number of leading ranks with equal weight (A, M-K, T-K%) */
    switch (p.type) {
    case VTR_GPO_PATTERN_AVG: break;
    case VTR_GPO_PATTERN_KMAX: m = p.k < n ? p.k : n; break;
    case VTR_GPO_PATTERN_TOP:
        m = (int)(((long)n * p.k + 99) / 100);
        m = m < 1 ? 1 : m > n ? n : m;
        break;
    case VTR_GPO_PATTERN_LINEAR:
        if (n == 1) {
            w[0] = 1.0f;
            return;
        }
        for (int k = 0; k < n; k++) /* zero-based rank k: the (k+1)-th largest */
            w[k] = (float)(2.0 * (n - 1 - k) / ((double)n * (n - 1)));
        return;
    }
    for (int k = 0; k < n; k++)
        w[k] = k < m ? (float)(1.0 / m) : 0.0f;
}

const char *vtr_gpo_pattern_name(vtr_gpo_pattern p, char *buf, size_t size)
{
    switch (p.type) {
    case VTR_GPO_PATTERN_AVG: snprintf(buf, size, "A"); break;
    case VTR_GPO_PATTERN_KMAX: snprintf(buf, size, "M-%d", p.k); break;
    case VTR_GPO_PATTERN_TOP: snprintf(buf, size, "T-%d%%", p.k); break;
    case VTR_GPO_PATTERN_LINEAR: snprintf(buf, size, "L"); break;
    }
    return buf;
}

/* A decimal integer in lo .. hi that ends at *end; -1 otherwise. */
static long parse_count(const char *s, char **end, long lo, long hi)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, end, 10);
    return errno || v < lo || v > hi ? -1 : v;
}

vtr_status vtr_gpo_pattern_parse(const char *name, vtr_gpo_pattern *out, vtr_error *err)
{
    char *end = NULL;
    long k;
    if (strcmp(name, "A") == 0) {
        *out = (vtr_gpo_pattern){VTR_GPO_PATTERN_AVG, 0};
        return VTR_OK;
    }
    if (strcmp(name, "L") == 0) {
        *out = (vtr_gpo_pattern){VTR_GPO_PATTERN_LINEAR, 0};
        return VTR_OK;
    }
    if (strncmp(name, "M-", 2) == 0 && (k = parse_count(name + 2, &end, 1, 100000)) > 0 &&
        *end == '\0') {
        *out = (vtr_gpo_pattern){VTR_GPO_PATTERN_KMAX, (int)k};
        return VTR_OK;
    }
    if (strncmp(name, "T-", 2) == 0 && (k = parse_count(name + 2, &end, 1, 100)) > 0 &&
        strcmp(end, "%") == 0) {
        *out = (vtr_gpo_pattern){VTR_GPO_PATTERN_TOP, (int)k};
        return VTR_OK;
    }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID,
                    "unknown pattern '%s' (expected A, M-K, T-K%% with K in 1..100, or L)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}

/* ---- configuration ------------------------------------------------------------------------ */

vtr_gpo_synthetic_config vtr_gpo_synthetic_defaults(void)
{
    vtr_gpo_synthetic_config c = {
        .dim = 32,
        .batch = 16,
        .steps = 3000,
        .decay_step = 2250,
        .lr = 1e-3,
        .train_min = 20,
        .train_max = 100,
        .small_min = 10,
        .small_max = 19,
        .large_min = 101,
        .large_max = 120,
        .seed = 1,
        .d_pe = 32,
        .hidden = 32,
        .interp_points = 21,
    };
    return c;
}

vtr_gpo_synthetic_config vtr_gpo_synthetic_quick(void)
{
    vtr_gpo_synthetic_config c = vtr_gpo_synthetic_defaults();
    c.dim = 16;
    c.batch = 8;
    c.steps = 400;
    c.decay_step = 300;
    c.lr = 3e-3;
    return c;
}

vtr_status vtr_gpo_synthetic_check(const vtr_gpo_synthetic_config *c, vtr_error *err)
{
    struct {
        const char *name;
        int lo, hi;
    } ranges[3] = {{"train", c->train_min, c->train_max},
                   {"small", c->small_min, c->small_max},
                   {"large", c->large_min, c->large_max}};
    for (int i = 0; i < 3; i++)
        if (ranges[i].lo < 1 || ranges[i].lo > ranges[i].hi || ranges[i].hi > 4096)
            return vtr_fail(err, VTR_ERR_INVALID, "%s sizes %d..%d: need 1 <= min <= max <= 4096",
                            ranges[i].name, ranges[i].lo, ranges[i].hi);
    if (c->dim < 1 || c->dim > 4096)
        return vtr_fail(err, VTR_ERR_INVALID, "dim %d: need 1..4096", c->dim);
    if (c->batch < 1 || c->batch > 4096)
        return vtr_fail(err, VTR_ERR_INVALID, "batch %d: need 1..4096", c->batch);
    if (c->steps < 1 || c->decay_step < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "steps %d, decay step %d: need >= 1 and >= 0",
                        c->steps, c->decay_step);
    if (!(c->lr > 0.0) || !isfinite(c->lr))
        return vtr_fail(err, VTR_ERR_INVALID, "lr %g: need > 0", c->lr);
    return VTR_OK;
}

int vtr_gpo_synthetic_max_size(const vtr_gpo_synthetic_config *c)
{
    int m = c->train_max;
    m = c->small_max > m ? c->small_max : m;
    return c->large_max > m ? c->large_max : m;
}

vtr_status vtr_gpo_synthetic_generator(vtr_gpo_generator *g, const vtr_gpo_synthetic_config *cfg,
                                       vtr_gpo_generator_kind kind, vtr_error *err)
{
    memset(g, 0, sizeof *g);
    vtr_status st = vtr_gpo_synthetic_check(cfg, err);
    if (st != VTR_OK)
        return st;
    vtr_gpo_generator_config gc = vtr_gpo_generator_defaults(kind);
    int max_T = vtr_gpo_synthetic_max_size(cfg);
    gc.d_pe = cfg->d_pe;
    gc.hidden = cfg->hidden;
    gc.interp_points = cfg->interp_points;
    gc.max_len = max_T;
    return vtr_gpo_generator_init(g, &gc, cfg->batch, max_T, cfg->dim, cfg->seed, err);
}

/* ---- training ----------------------------------------------------------------------------- */

/* Philox stream of step s's data: apart from the initializers' streams (1000 + kind). */
#define DATA_STREAM(s) (((uint64_t)1 << 40) | (uint64_t)(s))

vtr_status vtr_gpo_synthetic_train(vtr_gpo_generator *g, const vtr_gpo_synthetic_config *cfg,
                                   vtr_gpo_pattern p, double *final_loss, vtr_error *err)
{
    vtr_status st = vtr_gpo_synthetic_check(cfg, err);
    if (st != VTR_OK)
        return st;
    int B = cfg->batch, D = cfg->dim, Tmax = cfg->train_max;
    size_t nx = (size_t)B * Tmax * D;
    float *inp = malloc(sizeof(float) * nx), *wstar = malloc(sizeof(float) * B * Tmax);
    float *target = malloc(sizeof(float) * B * D), *out = malloc(sizeof(float) * B * D);
    float *dout = malloc(sizeof(float) * B * D);
    int *lengths = malloc(sizeof(int) * B), *index = malloc(sizeof(int) * nx);
    vtr_optimizer opt = {0};
    if (!inp || !wstar || !target || !out || !dout || !lengths || !index) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a batch of %d x %d x %d", B, Tmax, D);
        goto end;
    }
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    if ((st = vtr_optimizer_init(&opt, &g->params, &hp, err)) != VTR_OK)
        goto end;

    int tail_from = cfg->steps - (cfg->steps + 9) / 10;
    double tail_sum = 0.0;
    for (int step = 0; step < cfg->steps; step++) {
        /* the batch: sizes, N(0,1) features, and the pattern's pooling as the target */
        vtr_rng rng;
        vtr_rng_init(&rng, cfg->seed, DATA_STREAM(step));
        int T = 1;
        for (int b = 0; b < B; b++) {
            lengths[b] = cfg->train_min +
                         (int)vtr_rng_below(&rng, (uint32_t)(cfg->train_max - cfg->train_min + 1));
            T = lengths[b] > T ? lengths[b] : T;
        }
        for (int b = 0; b < B; b++) {
            float *x = inp + (size_t)b * T * D;
            for (size_t i = 0; i < (size_t)T * D; i++)
                x[i] = i < (size_t)lengths[b] * D ? vtr_rng_normal(&rng) : 0.0f;
            memset(wstar + (size_t)b * T, 0, sizeof(float) * T);
            vtr_gpo_pattern_coefficients(wstar + (size_t)b * T, p, lengths[b]);
        }
        vtr_sorted_pool_forward(target, index, inp, wstar, lengths, B, T, D);

        /* loss = mean (out - target)^2 over sets and dimensions */
        if ((st = vtr_gpo_generator_forward(g, out, inp, lengths, B, T, D, err)) != VTR_OK)
            goto end;
        double loss = 0.0;
        float scale = 2.0f / (float)(B * D);
        for (int i = 0; i < B * D; i++) {
            float e = out[i] - target[i];
            loss += (double)e * e;
            dout[i] = scale * e;
        }
        loss /= (double)B * D;
        if (!isfinite(loss)) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s diverged at step %d (loss %g)",
                          vtr_gpo_generator_name(g->cfg.kind), step, loss);
            goto end;
        }
        if (step >= tail_from)
            tail_sum += loss;
        vtr_param_set_zero_grad(&g->params);
        vtr_gpo_generator_backward(g, dout, inp);
        vtr_optimizer_step(&opt, &g->params, step >= cfg->decay_step ? cfg->lr * 0.1 : cfg->lr);
    }
    if (final_loss)
        *final_loss = tail_sum / (cfg->steps - tail_from);
end:
    vtr_optimizer_free(&opt);
    free(inp), free(wstar), free(target), free(out), free(dout), free(lengths), free(index);
    return st;
}

vtr_status vtr_gpo_coefficient_rmse(vtr_gpo_generator *g, vtr_gpo_pattern p, int n0, int n1,
                                    double *rmse, vtr_error *err)
{
    if (n0 < 1 || n0 > n1 || n1 > g->max_T)
        return vtr_fail(err, VTR_ERR_INVALID, "sizes %d..%d: need 1 <= n0 <= n1 <= %d", n0, n1,
                        g->max_T);
    float *w = malloc(sizeof(float) * n1), *ref = malloc(sizeof(float) * n1);
    vtr_status st = VTR_OK;
    if (!w || !ref) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %d coefficients", n1);
        goto end;
    }
    double sum = 0.0;
    long count = 0;
    for (int n = n0; n <= n1; n++) {
        if ((st = vtr_gpo_generator_coefficients(g, n, w, err)) != VTR_OK)
            goto end;
        vtr_gpo_pattern_coefficients(ref, p, n);
        for (int k = 0; k < n; k++)
            sum += ((double)w[k] - ref[k]) * ((double)w[k] - ref[k]);
        count += n;
    }
    *rmse = sqrt(sum / (double)count);
end:
    free(w), free(ref);
    return st;
}

vtr_status vtr_gpo_synthetic_cell(const vtr_gpo_synthetic_config *cfg, vtr_gpo_pattern p,
                                  vtr_gpo_generator_kind kind, vtr_gpo_synthetic_result *res,
                                  vtr_error *err)
{
    double t0 = vtr_now_seconds();
    memset(res, 0, sizeof *res);
    vtr_gpo_generator g;
    vtr_status st = vtr_gpo_synthetic_generator(&g, cfg, kind, err);
    if (st == VTR_OK)
        st = vtr_gpo_synthetic_train(&g, cfg, p, &res->final_loss, err);
    if (st == VTR_OK)
        st = vtr_gpo_coefficient_rmse(&g, p, cfg->train_min, cfg->train_max, &res->rmse_seen, err);
    if (st == VTR_OK)
        st = vtr_gpo_coefficient_rmse(&g, p, cfg->small_min, cfg->small_max, &res->rmse_smaller,
                                      err);
    if (st == VTR_OK)
        st =
            vtr_gpo_coefficient_rmse(&g, p, cfg->large_min, cfg->large_max, &res->rmse_larger, err);
    vtr_gpo_generator_free(&g);
    res->seconds = vtr_now_seconds() - t0;
    return st;
}

vtr_status vtr_gpo_synthetic_table(const vtr_gpo_synthetic_config *cfg,
                                   const vtr_gpo_pattern *patterns, int np,
                                   const vtr_gpo_generator_kind *kinds, int ng, int threads,
                                   vtr_gpo_synthetic_result *results,
                                   vtr_gpo_synthetic_done_fn done, void *ctx, vtr_error *err)
{
    vtr_status st = vtr_gpo_synthetic_check(cfg, err);
    if (st != VTR_OK)
        return st;
    if (np < 1 || ng < 1 || threads < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "%d patterns x %d generators on %d threads", np, ng,
                        threads);
    int cells = np * ng;
    int *order = malloc(sizeof(int) * cells);
    vtr_status *status = calloc((size_t)cells, sizeof *status);
    vtr_error *errors = calloc((size_t)cells, sizeof *errors);
    if (!order || !status || !errors) {
        free(order), free(status), free(errors);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %d cells", cells);
    }
    /* the BiGRU cells (the slow ones) first, so that threads finish together */
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < cells; c++) {
            vtr_gpo_generator_kind k = kinds[c % ng];
            bool slow = k == VTR_GPO_GEN_SINCOS_BIGRU || k == VTR_GPO_GEN_INDEX_BIGRU;
            if (slow == (pass == 0))
                order[n++] = c;
        }

    /* one thread per cell: the products of a cell are small, and BLAS threads of
     * concurrent cells would only contend (and make the bytes depend on --threads) */
    int blas_threads = vtr_blas_set_threads(1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int i = 0; i < cells; i++) {
        int c = order[i];
        status[c] =
            vtr_gpo_synthetic_cell(cfg, patterns[c / ng], kinds[c % ng], &results[c], &errors[c]);
        if (done) {
#pragma omp critical(vtr_gpo_synthetic_done)
            done(ctx, c / ng, c % ng, &results[c]);
        }
    }

    if (blas_threads > 0)
        vtr_blas_set_threads(blas_threads);

    for (int c = 0; c < cells && st == VTR_OK; c++)
        if (status[c] != VTR_OK) {
            char name[16];
            st = status[c];
            if (err) {
                *err = errors[c];
                vtr_error_context(err, "%s x %s",
                                  vtr_gpo_pattern_name(patterns[c / ng], name, sizeof name),
                                  vtr_gpo_generator_name(kinds[c % ng]));
            }
        }
    free(order), free(status), free(errors);
    return st;
}

/* ---- the paper's numbers (VSE∞ appendix, Table 10) ---------------------------------------- */

bool vtr_gpo_synthetic_paper_rmse(vtr_gpo_generator_kind kind, int pattern_index, double *seen,
                                  double *smaller, double *larger)
{
    /* [generator][pattern A, M-1, M-10, T-50%, L][seen, smaller, larger] */
    static const double table[VTR_GPO_GEN_COUNT][VTR_GPO_TABLE10_PATTERNS][3] = {
        [VTR_GPO_GEN_SINCOS_BIGRU] = {{NAN, .002, 0},
                                      {NAN, .010, .004},
                                      {NAN, .031, .007},
                                      {NAN, .046, .004},
                                      {NAN, .005, .001}},
        [VTR_GPO_GEN_INTERP] = {{0, 0, 0},
                                {.065, .017, .070},
                                {.030, .141, .014},
                                {.011, .039, .005},
                                {.004, .016, .002}},
        [VTR_GPO_GEN_SINCOS_MLP] = {{.012, .054, .006},
                                    {.003, .003, .003},
                                    {.047, .093, .030},
                                    {.032, .096, .026},
                                    {.022, .065, .028}},
        [VTR_GPO_GEN_INDEX_BIGRU] = {{.002, .006, .003},
                                     {.002, .004, .001},
                                     {.026, .052, .018},
                                     {.011, .049, .007},
                                     {.008, .015, .005}},
    };
    if ((unsigned)kind >= VTR_GPO_GEN_COUNT || pattern_index < 0 ||
        pattern_index >= VTR_GPO_TABLE10_PATTERNS)
        return false;
    const double *r = table[kind][pattern_index];
    *seen = r[0], *smaller = r[1], *larger = r[2];
    return true;
}
