/* vtr-gpo-synthetic: the synthetic GPO experiment of the VSE∞ appendix (B.3, Table 10),
 * our RMSE beside the paper's (tools/gpo_synthetic.h, docs/gpo-synthetic.md). */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/version.h"
#include "tools/gpo_synthetic.h"

static void usage(FILE *out)
{
    fputs("Usage: vtr-gpo-synthetic [OPTION]...\n"
          "Trains each coefficient generator alone to reproduce each pooling pattern on\n"
          "random feature sets of 20..100 elements, then prints the RMSE of its coefficients\n"
          "on seen sizes and on unseen smaller (10..19) and larger (101..120) sizes, beside\n"
          "the numbers of the VSE∞ paper (appendix B.3, Table 10).\n"
          "\n"
          "  --seed N            data and initialization seed [1]\n"
          "  --seeds N           run seeds N in a row from --seed; show mean and sd [1]\n"
          "  --threads N         cells trained at once, one thread each [CPUs online]\n"
          "  --quick             the scaled-down protocol the tests use (seconds)\n"
          "  --json              one JSON object on stdout instead of the tables\n"
          "  --patterns LIST     comma-separated: A, M-K, T-K%, L [A,M-1,M-10,T-50%,L]\n"
          "  --generators LIST   comma-separated: sincos-bigru (the paper's), interp,\n"
          "                      sincos-mlp, index-bigru [all four]\n"
          "  --steps N           optimizer steps (lr x0.1 for the last quarter) [3000]\n"
          "  --dim N             feature dimensions of a set [32]\n"
          "  --batch N           sets per step [16]\n"
          "  --lr X              Adam learning rate [0.001]\n"
          "  -h, --help          this text\n"
          "      --version       the version\n"
          "\n"
          "The same options give the same RMSE for any --threads. Set OMP_WAIT_POLICY=passive\n"
          "(lib/nn.h) for the timings the docs give.\n"
          "Exit status: 0 done, 1 bad usage, a cell failed or the output could not be\n"
          "written (\"stdout: No space left on device\").\n",
          out);
}

static int parse_int(const char *s, const char *what, long lo, long hi, int *out)
{
    long long v;
    if (vtr_parse_int(s, lo, hi, &v) != 0) {
        fprintf(stderr, "vtr-gpo-synthetic: %s: '%s' is not a number in %ld..%ld\n", what, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Splits a comma-separated list and parses each item into out[] (capacity max). */
static int parse_list(const char *s, const char *what, int max, int *count, void *out,
                      size_t item_size, vtr_status (*parse)(const char *, void *, vtr_error *))
{
    char *copy = strdup(s), *save = NULL;
    int n = 0, rc = 0;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        vtr_error err;
        if (n == max) {
            fprintf(stderr, "vtr-gpo-synthetic: %s: more than %d items\n", what, max);
            rc = -1;
            break;
        }
        if (parse(tok, (char *)out + (size_t)n * item_size, &err) != VTR_OK) {
            fprintf(stderr, "vtr-gpo-synthetic: %s: %s\n", what, err.msg);
            rc = -1;
            break;
        }
        n++;
    }
    free(copy);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "vtr-gpo-synthetic: %s: empty list\n", what);
        rc = -1;
    }
    *count = n;
    return rc;
}

static vtr_status parse_pattern(const char *s, void *out, vtr_error *err)
{
    return vtr_gpo_pattern_parse(s, out, err);
}

static vtr_status parse_generator(const char *s, void *out, vtr_error *err)
{
    return vtr_gpo_generator_parse(s, out, err);
}

/* Index of p among Table 10's patterns, or -1. */
static int table10_index(vtr_gpo_pattern p)
{
    for (int i = 0; i < VTR_GPO_TABLE10_PATTERNS; i++) {
        vtr_gpo_pattern q = vtr_gpo_table10_pattern(i);
        if (q.type == p.type && q.k == p.k)
            return i;
    }
    return -1;
}

typedef struct run_state {
    vtr_progress progress;
} run_state;

static void cell_done(void *ctx, int pi, int gi, const vtr_gpo_synthetic_result *res)
{
    (void)pi, (void)gi, (void)res;
    vtr_progress_step(&((run_state *)ctx)->progress, 1);
}

/* The paper's number as the paper prints it: ".012", "0", "n/a". */
static const char *paper_text(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "n/a");
    else if (v == 0.0)
        snprintf(buf, size, "0");
    else
        snprintf(buf, size, ".%03d", (int)lround(v * 1000.0));
    return buf;
}

/* Mean and sample standard deviation of field `which` (0 seen, 1 smaller, 2 larger) of
 * cell c over the seeds; results[seed * cells + c]. */
static void cell_stats(const vtr_gpo_synthetic_result *results, int cells, int seeds, int c,
                       int which, double *mean, double *sd)
{
    double sum = 0.0, sq = 0.0;
    for (int s = 0; s < seeds; s++) {
        const vtr_gpo_synthetic_result *r = &results[(size_t)s * cells + c];
        sum += which == 0 ? r->rmse_seen : which == 1 ? r->rmse_smaller : r->rmse_larger;
    }
    *mean = sum / seeds;
    for (int s = 0; s < seeds; s++) {
        const vtr_gpo_synthetic_result *r = &results[(size_t)s * cells + c];
        double v = which == 0 ? r->rmse_seen : which == 1 ? r->rmse_smaller : r->rmse_larger;
        sq += (v - *mean) * (v - *mean);
    }
    *sd = seeds > 1 ? sqrt(sq / (seeds - 1)) : 0.0;
}

/* The paper's three numbers for pattern p and generator kind (NAN where it has none). */
static void paper_numbers(vtr_gpo_pattern p, vtr_gpo_generator_kind kind, double ref[3])
{
    int t = table10_index(p);
    if (t < 0 || !vtr_gpo_synthetic_paper_rmse(kind, t, &ref[0], &ref[1], &ref[2]))
        ref[0] = ref[1] = ref[2] = NAN;
}

static void print_block(const char *title, int which, const vtr_gpo_pattern *patterns, int np,
                        const vtr_gpo_generator_kind *kinds, int ng,
                        const vtr_gpo_synthetic_result *results, int seeds)
{
    char name[16], paper[16];
    int width = seeds > 1 ? 22 : 15;
    printf("\n%s: ours%s (paper)\n%-14s", title, seeds > 1 ? " mean±sd" : "", "generator");
    for (int i = 0; i < np; i++)
        printf(" %-*s", width, vtr_gpo_pattern_name(patterns[i], name, sizeof name));
    printf("\n");
    for (int j = 0; j < ng; j++) {
        printf("%-14s", vtr_gpo_generator_name(kinds[j]));
        for (int i = 0; i < np; i++) {
            double mean, sd, ref[3];
            cell_stats(results, np * ng, seeds, i * ng + j, which, &mean, &sd);
            paper_numbers(patterns[i], kinds[j], ref);
            paper_text(ref[which], paper, sizeof paper);
            char cell[48];
            if (seeds > 1)
                snprintf(cell, sizeof cell, "%.4f±%.4f (%s)", mean, sd, paper);
            else
                snprintf(cell, sizeof cell, "%.4f (%s)", mean, paper);
            /* "±" is two bytes but one column */
            printf(" %-*s", width + (seeds > 1), cell);
        }
        printf("\n");
    }
}

static json_t *paper_json(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

/* Prints the JSON object; VTR_ERR_IO "stdout: <strerror>" when writing it failed (jansson
 * writes past stdio's buffer, whose flush then has nothing left to report). */
static vtr_status print_json(const vtr_gpo_synthetic_config *c, const vtr_gpo_pattern *patterns,
                             int np, const vtr_gpo_generator_kind *kinds, int ng,
                             const vtr_gpo_synthetic_result *results, int seeds, bool quick,
                             int threads, double wall, vtr_error *err)
{
    int cells_n = np * ng;
    json_t *root = json_object(), *cells = json_array();
    json_object_set_new(
        root, "config",
        json_pack("{s:b, s:I, s:i, s:i, s:i, s:i, s:i, s:f, s:[i,i], s:[i,i], s:[i,i], s:i, "
                  "s:i, s:i}",
                  "quick", quick, "seed", (json_int_t)c->seed, "seeds", seeds, "dim", c->dim,
                  "batch", c->batch, "steps", c->steps, "decay_step", c->decay_step, "lr", c->lr,
                  "train_sizes", c->train_min, c->train_max, "smaller_sizes", c->small_min,
                  c->small_max, "larger_sizes", c->large_min, c->large_max, "d_pe", c->d_pe,
                  "hidden", c->hidden, "interp_points", c->interp_points));
    for (int i = 0; i < np; i++)
        for (int j = 0; j < ng; j++) {
            int cell = i * ng + j;
            char name[16];
            double ref[3], mean[3], sd[3];
            paper_numbers(patterns[i], kinds[j], ref);
            for (int w = 0; w < 3; w++)
                cell_stats(results, cells_n, seeds, cell, w, &mean[w], &sd[w]);
            json_t *runs = json_array();
            for (int s = 0; s < seeds; s++) {
                const vtr_gpo_synthetic_result *r = &results[(size_t)s * cells_n + cell];
                json_array_append_new(runs, json_pack("{s:I, s:f, s:f, s:f, s:f, s:f}", "seed",
                                                      (json_int_t)(c->seed + (uint64_t)s), "seen",
                                                      r->rmse_seen, "smaller", r->rmse_smaller,
                                                      "larger", r->rmse_larger, "final_loss",
                                                      r->final_loss, "seconds", r->seconds));
            }
            json_array_append_new(
                cells,
                json_pack("{s:s, s:s, s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:{s:o, s:o, s:o}, "
                          "s:o}",
                          "pattern", vtr_gpo_pattern_name(patterns[i], name, sizeof name),
                          "generator", vtr_gpo_generator_name(kinds[j]), "ours", "seen", mean[0],
                          "smaller", mean[1], "larger", mean[2], "sd", "seen", sd[0], "smaller",
                          sd[1], "larger", sd[2], "paper", "seen", paper_json(ref[0]), "smaller",
                          paper_json(ref[1]), "larger", paper_json(ref[2]), "runs", runs));
        }
    json_object_set_new(root, "cells", cells);
    json_object_set_new(root, "threads", json_integer(threads));
    json_object_set_new(root, "wall_seconds", json_real(wall));
    vtr_status st = json_dumpf(root, stdout, VTR_JSON_FLAGS) == 0 && putchar('\n') != EOF
                        ? VTR_OK
                        : vtr_fail_errno(err, "stdout");
    json_decref(root);
    return st;
}

int main(int argc, char **argv)
{
    enum {
        OPT_SEED = 256,
        OPT_SEEDS,
        OPT_THREADS,
        OPT_QUICK,
        OPT_JSON,
        OPT_PATTERNS,
        OPT_GENERATORS,
        OPT_STEPS,
        OPT_DIM,
        OPT_BATCH,
        OPT_LR,
        OPT_VERSION
    };
    static const struct option options[] = {
        {"seed", required_argument, NULL, OPT_SEED},
        {"seeds", required_argument, NULL, OPT_SEEDS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"quick", no_argument, NULL, OPT_QUICK},
        {"json", no_argument, NULL, OPT_JSON},
        {"patterns", required_argument, NULL, OPT_PATTERNS},
        {"generators", required_argument, NULL, OPT_GENERATORS},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"dim", required_argument, NULL, OPT_DIM},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"lr", required_argument, NULL, OPT_LR},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_log_init("vtr-gpo-synthetic", false);
    vtr_gpo_pattern patterns[16];
    vtr_gpo_generator_kind kinds[VTR_GPO_GEN_COUNT];
    int np = VTR_GPO_TABLE10_PATTERNS, ng = VTR_GPO_GEN_COUNT;
    for (int i = 0; i < np; i++)
        patterns[i] = vtr_gpo_table10_pattern(i);
    for (int j = 0; j < ng; j++)
        kinds[j] = (vtr_gpo_generator_kind)j;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > 0 && cpus < 1024 ? (int)cpus : 1;
    int seed = 1, seeds = 1, steps = -1, dim = -1, batch = -1;
    double lr = -1.0;
    bool quick = false, json = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case OPT_SEED: bad = parse_int(optarg, "--seed", 0, 1000000000, &seed); break;
        case OPT_SEEDS: bad = parse_int(optarg, "--seeds", 1, 100, &seeds); break;
        case OPT_THREADS: bad = parse_int(optarg, "--threads", 1, 1024, &threads); break;
        case OPT_QUICK: quick = true; break;
        case OPT_JSON: json = true; break;
        case OPT_PATTERNS:
            bad = parse_list(optarg, "--patterns", 16, &np, patterns, sizeof patterns[0],
                             parse_pattern);
            break;
        case OPT_GENERATORS:
            bad = parse_list(optarg, "--generators", VTR_GPO_GEN_COUNT, &ng, kinds, sizeof kinds[0],
                             parse_generator);
            break;
        case OPT_STEPS: bad = parse_int(optarg, "--steps", 1, 100000000, &steps); break;
        case OPT_DIM: bad = parse_int(optarg, "--dim", 1, 4096, &dim); break;
        case OPT_BATCH: bad = parse_int(optarg, "--batch", 1, 4096, &batch); break;
        case OPT_LR:
            if (vtr_parse_double(optarg, &lr) != 0 || !(lr > 0.0)) {
                fprintf(stderr, "vtr-gpo-synthetic: --lr: '%s' is not a positive number\n", optarg);
                bad = 1;
            }
            break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION:
            printf("vtr-gpo-synthetic %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: bad = 1; break;
        }
        if (bad) {
            fputs("Try 'vtr-gpo-synthetic --help'.\n", stderr);
            return 1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "vtr-gpo-synthetic: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 1;
    }

    vtr_gpo_synthetic_config cfg = quick ? vtr_gpo_synthetic_quick() : vtr_gpo_synthetic_defaults();
    cfg.seed = (uint64_t)seed;
    if (steps > 0) {
        cfg.steps = steps;
        cfg.decay_step = steps - steps / 4;
    }
    if (dim > 0)
        cfg.dim = dim;
    if (batch > 0)
        cfg.batch = batch;
    if (lr > 0.0)
        cfg.lr = lr;

    int cells = np * ng;
    vtr_gpo_synthetic_result *results = calloc((size_t)seeds * cells, sizeof *results);
    if (!results) {
        fputs("vtr-gpo-synthetic: out of memory\n", stderr);
        return 1;
    }
    run_state state;
    vtr_error err;
    vtr_error_clear(&err);
    double t0 = vtr_log_elapsed();
    vtr_progress_begin(&state.progress, "cells", (int64_t)seeds * cells);
    vtr_status st = VTR_OK;
    for (int s = 0; s < seeds && st == VTR_OK; s++) {
        vtr_gpo_synthetic_config run = cfg;
        run.seed = cfg.seed + (uint64_t)s;
        st = vtr_gpo_synthetic_table(&run, patterns, np, kinds, ng, threads,
                                     results + (size_t)s * cells, cell_done, &state, &err);
        if (st != VTR_OK)
            vtr_error_context(&err, "seed %llu", (unsigned long long)run.seed);
    }
    vtr_progress_end(&state.progress);
    double wall = vtr_log_elapsed() - t0;
    int rc = 1;
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    if (json) {
        if (print_json(&cfg, patterns, np, kinds, ng, results, seeds, quick, threads, wall,
                       &err) != VTR_OK) {
            vtr_log_item_error(NULL, &err);
            goto end;
        }
        goto flush;
    }
    char range[32];
    snprintf(range, sizeof range, "..%llu", (unsigned long long)(cfg.seed + (uint64_t)seeds - 1));
    printf("GPO synthetic experiment (VSE∞ appendix B.3, Table 10): RMSE of the generated "
           "coefficients\n"
           "protocol: %s; N(0,1) features, dim %d, %d sets/step, %d Adam steps, lr %g "
           "(x0.1 from step %d), seed%s %llu%s\n",
           quick ? "--quick" : "full", cfg.dim, cfg.batch, cfg.steps, cfg.lr, cfg.decay_step,
           seeds > 1 ? "s" : "", (unsigned long long)cfg.seed, seeds > 1 ? range : "");
    char title[64];
    snprintf(title, sizeof title, "SEEN SIZES %d..%d", cfg.train_min, cfg.train_max);
    print_block(title, 0, patterns, np, kinds, ng, results, seeds);
    snprintf(title, sizeof title, "UNSEEN SMALLER %d..%d", cfg.small_min, cfg.small_max);
    print_block(title, 1, patterns, np, kinds, ng, results, seeds);
    snprintf(title, sizeof title, "UNSEEN LARGER %d..%d", cfg.large_min, cfg.large_max);
    print_block(title, 2, patterns, np, kinds, ng, results, seeds);
    double cpu = 0.0;
    for (int i = 0; i < seeds * cells; i++)
        cpu += results[i].seconds;
    printf("\n%d cells in %.1f s wall on %d threads (%.1f s summed over cells)\n", seeds * cells,
           wall, threads, cpu);
flush:
    if (vtr_output_flush(stdout, "stdout", &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    rc = 0;
end:
    free(results);
    return rc;
}
