/* vtr-plot: training curves of runs, or GPO's pooling coefficients of a checkpoint, as
 * SVG or PNG. Argument parsing and output only; the figures are match/training_curves.h
 * and match/gpo_curves.h, the drawing lib/plot.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/plot.h"
#include "lib/version.h"
#include "match/gpo_curves.h"
#include "match/training_curves.h"

static const char usage_text[] =
    "Usage: vtr-plot curves [OPTION]... RUN... -o FILE\n"
    "  or:  vtr-plot gpo [OPTION]... CKPT -o FILE\n"
    "Draws a plot as SVG or PNG.\n"
    "\n"
    "  curves  training curves from each RUN's metrics.jsonl (RUN: a vtr-train run\n"
    "          directory, or its metrics.jsonl): the training loss, the validation RSUM,\n"
    "          the learning rate (first and last step of each epoch) and K (negatives per\n"
    "          query, ADOPT's K) per epoch, in four panels. Several runs (seeds of one\n"
    "          config) are drawn as their mean per epoch with a band from their minimum\n"
    "          to their maximum; --separate draws each run as its own line. A metric no\n"
    "          run logged leaves its panel empty with a note saying so.\n"
    "  gpo     GPO's pooling coefficients of a trained model, as in VSE∞'s Figure 5: for\n"
    "          each set size N, the weight GPO gives the k-th largest value of each\n"
    "          dimension, k = 1..N; a panel for the visual side and one for the text side\n"
    "          where the model pools with GPO (VSE∞, HGR∞). A model without GPO is refused.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     the image, written atomically; '-': standard output\n"
    "  -f, --format FMT      svg or png [FILE's extension: .svg or .png]\n"
    "      --size WxH        the image's size in pixels [460 x 320 per panel, 2 panels a\n"
    "                        row, plus 34 for the title: curves 920x674, gpo 920x354]\n"
    "      --title TEXT      the figure's title [what is drawn and the run or checkpoint]\n"
    "      --separate        curves: a line per run instead of their mean and band\n"
    "      --sizes N,N,...   gpo: the set sizes drawn, each 1 to 4096 [5,10,20,40]\n"
    "      --config FILE     gpo: the training config of a checkpoint that carries none\n"
    "                        (a converted PyTorch state_dict)\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "Exit status: 0 the image was written; 1 bad usage, or a run's log, a checkpoint or\n"
    "its config that cannot be read or used (one line on stderr naming the file, and the\n"
    "line of a malformed log), or the image could not be written (nothing is then left\n"
    "under FILE's name).\n";

/* "5,10,20" into sizes (at most max); their count, or -1. */
static int parse_sizes(const char *s, int *sizes, int max)
{
    int n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    long long v[VTR_GPO_CURVES_MAX_SIZES];
    if (n > max || vtr_parse_ints(s, n, 1, VTR_GPO_CURVES_MAX_SIZE, v) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        sizes[i] = (int)v[i];
    return n;
}

/* Writes the figure to path ("-": stdout). */
static vtr_status write_plot(const vtr_plot *plot, vtr_plot_format fmt, const char *path,
                             vtr_error *err)
{
    if (strcmp(path, "-") != 0)
        return vtr_plot_write(plot, fmt, path, err);
    unsigned char *data;
    size_t size;
    vtr_status st = vtr_plot_render(plot, fmt, &data, &size, err);
    if (st == VTR_OK && (st = vtr_write_all(stdout, data, size, "stdout", err)) == VTR_OK)
        st = vtr_output_flush(stdout, "stdout", err);
    free(data);
    return st;
}

int main(int argc, char **argv)
{
    enum { OPT_SIZE = 256, OPT_TITLE, OPT_SEPARATE, OPT_SIZES, OPT_CONFIG, OPT_VERSION };
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"size", required_argument, NULL, OPT_SIZE},
        {"title", required_argument, NULL, OPT_TITLE},
        {"separate", no_argument, NULL, OPT_SEPARATE},
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL, *format = NULL, *title = NULL, *config = NULL;
    bool separate = false;
    int width = 0, height = 0, sizes[VTR_GPO_CURVES_MAX_SIZES], n_sizes = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "o:f:h", options, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'o': output = optarg; break;
        case 'f': format = optarg; break;
        case OPT_SIZE:
            if (vtr_parse_size(optarg, 16384, &width, &height) != 0)
                bad = "--size is WxH, each side 1 to 16384";
            break;
        case OPT_TITLE: title = optarg; break;
        case OPT_SEPARATE: separate = true; break;
        case OPT_SIZES:
            if ((n_sizes = parse_sizes(optarg, sizes, VTR_GPO_CURVES_MAX_SIZES)) < 0)
                bad = "--sizes is a comma-separated list of up to 32 sizes, each 1 to 4096";
            break;
        case OPT_CONFIG: config = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-plot %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-plot --help'.\n", stderr); return 1;
        }
        if (bad) {
            fprintf(stderr, "vtr-plot: %s (got '%s')\n", bad, optarg);
            return 1;
        }
    }
    const char *what = optind < argc ? argv[optind] : NULL;
    bool curves = what && strcmp(what, "curves") == 0, gpo = what && strcmp(what, "gpo") == 0;
    int n_args = argc - optind - 1;
    const char *usage_error = NULL;
    if (!curves && !gpo)
        usage_error = "name what to plot: curves or gpo";
    else if (n_args < 1)
        usage_error = curves ? "name the runs" : "name the checkpoint";
    else if (gpo && n_args > 1)
        usage_error = "one checkpoint per plot";
    else if (!output)
        usage_error = "-o FILE is required";
    else if (curves && (n_sizes || config))
        usage_error = "--sizes and --config are for gpo";
    else if (gpo && separate)
        usage_error = "--separate is for curves";
    if (usage_error) {
        fprintf(stderr, "vtr-plot: %s (see --help)\n", usage_error);
        return 1;
    }
    vtr_log_init("vtr-plot", false);
    vtr_error err;
    vtr_error_clear(&err);
    vtr_plot_format fmt;
    vtr_status st;
    if (format)
        st = vtr_plot_format_parse(format, &fmt, &err);
    else if (strcmp(output, "-") == 0)
        st = vtr_fail(&err, VTR_ERR_INVALID, "name the format of standard output with --format");
    else
        st = vtr_plot_format_from_name(output, &fmt, &err);
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }

    const char *const *inputs = (const char *const *)argv + optind + 1;
    vtr_training_curves tc = {0};
    vtr_gpo_curves gc = {0};
    if (curves) {
        vtr_curves_options o = {.separate = separate, .title = title, .width = width,
                                .height = height};
        if ((st = vtr_training_curves_build(inputs, (size_t)n_args, &o, &tc, &err)) == VTR_OK)
            st = write_plot(&tc.plot, fmt, output, &err);
    } else {
        vtr_gpo_curves_options o = {.config_path = config, .sizes = sizes, .n_sizes = n_sizes,
                                    .title = title, .width = width, .height = height};
        if ((st = vtr_gpo_curves_build(inputs[0], &o, &gc, &err)) == VTR_OK)
            st = write_plot(&gc.plot, fmt, output, &err);
    }
    if (st == VTR_OK && strcmp(output, "-") != 0 && curves)
        vtr_log_info("wrote %s: training curves of %d run%s%s", output, n_args,
                     n_args > 1 ? "s" : "",
                     n_args == 1 ? "" : separate ? ", a line each" : ", mean and min-max band");
    else if (st == VTR_OK && strcmp(output, "-") != 0)
        vtr_log_info("wrote %s: GPO coefficients of %s (%d side%s)", output, inputs[0],
                     gc.n_sides, gc.n_sides > 1 ? "s" : "");
    vtr_training_curves_free(&tc);
    vtr_gpo_curves_free(&gc);
    vtr_plot_release_caches();
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }
    return 0;
}
