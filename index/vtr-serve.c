/* vtr-serve: a search page and a JSON API over embedding indexes. Argument parsing and
 * the wait for a signal only; the server is index/web_server.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <libavutil/log.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/topk.h"
#include "index/web_server.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/log.h"
#include "lib/plot.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-serve [OPTION]... [NAME=]INDEX...\n"
    "Serves a search page and a JSON API over embedding indexes (vtr-index, vtr-aggregate\n"
    "--index), read-only: text queries, \"more like this\" from an indexed item, queries by an\n"
    "image or a short video (indexes made by vtr-index, which record their backbone), and\n"
    "the indexed videos themselves, played in the page from the moment that matched best;\n"
    "with --runs, a runs page of training curves and GPO's coefficients (docs/serve.md).\n"
    "Open the address it prints in a browser.\n"
    "\n"
    "  -a, --address ADDR    listen on ADDR (IPv4 or IPv6) [127.0.0.1]; another address\n"
    "                        than a loopback one lets every machine that reaches it search\n"
    "                        the archive and read its files (a warning says so)\n"
    "  -p, --port N          listen on port N; 0: any free port [8080]\n"
    "  -m, --model CKPT      the model's checkpoint [the one each index records]\n"
    "      --vocab PATH      vocabulary JSON [vocab.json beside the checkpoint]\n"
    "      --approx          text queries through each index's approximate index\n"
    "                        (vtr-approx), whatever its size; an index without one that\n"
    "                        fits is refused\n"
    "      --exact           text queries over every row exactly [the approximate index\n"
    "                        from 100,000 items on, when it fits: docs/search.md]\n"
    "      --runs DIR        training runs for the runs page (/runs): a run directory of\n"
    "                        vtr-train, or a directory of them (repeatable)\n"
    "      --max-upload N    the largest query file taken, in MiB [64]\n"
    "      --max-connections N  connections served at once [64]\n"
    "      --device DEV      cpu, cuda or cuda:N: with cuda each index's rows are copied\n"
    "                        to the GPU and text queries searched exactly there (VSE\n"
    "                        models; no approximate index; an HGR model runs there,\n"
    "                        its items ranked on the CPU) [cpu]\n"
    "      --threads N       OpenMP and BLAS threads of the models [their defaults]\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "An index is named in URLs by NAME, or by its directory's base name.\n"
    "The API: GET /api/search?q=TEXT&k=10&offset=0&index=NAME gives vtr-search --json's\n"
    "object plus each result's \"media\" URL; /api/similar?key=KEY the items nearest to\n"
    "one; POST /api/query-media with a file as the body, or GET ?path=FILE (loopback\n"
    "only), the items nearest to it; /media?key=KEY an item's file, with byte ranges.\n"
    "Caps: a query of at most 1000 bytes, offset + k at most 1000.\n"
    "The server looks for a newer generation of each index (vtr-index adding files while\n"
    "it serves) at most once a second before a search.\n"
    "SIGINT or SIGTERM stops it after the requests in flight.\n"
    "Exit status: 0 stopped by a signal; 1 bad usage, or an index, a model or the address\n"
    "could not be used.\n";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int main(int argc, char **argv)
{
    enum {
        OPT_VOCAB = 256,
        OPT_APPROX,
        OPT_EXACT,
        OPT_RUNS,
        OPT_MAX_UPLOAD,
        OPT_MAX_CONNECTIONS,
        OPT_THREADS,
        OPT_DEVICE,
        OPT_LOG_JSON,
        OPT_VERSION
    };
    static const struct option options[] = {
        {"address", required_argument, NULL, 'a'},
        {"port", required_argument, NULL, 'p'},
        {"model", required_argument, NULL, 'm'},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"approx", no_argument, NULL, OPT_APPROX},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"runs", required_argument, NULL, OPT_RUNS},
        {"max-upload", required_argument, NULL, OPT_MAX_UPLOAD},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_web_server_options o = {.port = 8080};
    bool log_json = false;
    const char *runs[64];
    int approx_flags = 0;
    long long v;
    int opt;
    while ((opt = getopt_long(argc, argv, "a:p:m:h", options, NULL)) != -1) {
        switch (opt) {
        case 'a': o.address = optarg; break;
        case 'p':
            if (vtr_parse_int(optarg, 0, 65535, &v)) {
                fprintf(stderr, "vtr-serve: --port wants an integer in [0, 65535], got '%s'\n",
                        optarg);
                return 1;
            }
            o.port = (int)v;
            break;
        case 'm': o.model = optarg; break;
        case OPT_VOCAB: o.vocab = optarg; break;
        case OPT_APPROX: o.approx = VTR_APPROX_ALWAYS; approx_flags++; break;
        case OPT_EXACT: o.approx = VTR_APPROX_NEVER; approx_flags++; break;
        case OPT_RUNS:
            if (o.n_runs == (int)(sizeof runs / sizeof *runs)) {
                fprintf(stderr, "vtr-serve: --runs given more than %d times\n", o.n_runs);
                return 1;
            }
            runs[o.n_runs++] = optarg;
            break;
        case OPT_MAX_UPLOAD:
            if (vtr_parse_int(optarg, 1, 1 << 20, &v)) {
                fprintf(stderr, "vtr-serve: --max-upload wants MiB in [1, 1048576], got '%s'\n",
                        optarg);
                return 1;
            }
            o.max_upload = v << 20;
            break;
        case OPT_MAX_CONNECTIONS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-serve: --max-connections wants an integer in [1, 4096], "
                        "got '%s'\n", optarg);
                return 1;
            }
            o.max_connections = (int)v;
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-serve: --threads wants an integer in [1, 4096], got '%s'\n",
                        optarg);
                return 1;
            }
            o.threads = (int)v;
            break;
        case OPT_DEVICE: {
            vtr_error derr;
            if (vtr_device_parse(optarg, &o.device, &o.device_index, &derr)) {
                fprintf(stderr, "vtr-serve: --device: %s\n", derr.msg);
                return 1;
            }
            break;
        }
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-serve %s\n%s\n%s\n", vtr_version, vtr_blas_kernel_report(),
                   vtr_topk_report());
            return 0;
        default: fputs("Try 'vtr-serve --help'.\n", stderr); return 1;
        }
    }
    if (optind == argc) {
        fprintf(stderr, "vtr-serve: no index: give INDEX directories (see --help)\n");
        return 1;
    }
    if (approx_flags > 1) {
        fprintf(stderr, "vtr-serve: give --approx or --exact, not both (see --help)\n");
        return 1;
    }
    if (o.device == VTR_DEVICE_CUDA && o.approx == VTR_APPROX_ALWAYS) {
        fprintf(stderr, "vtr-serve: --device cuda searches exactly: --approx is for the CPU "
                        "(see --help)\n");
        return 1;
    }
    vtr_log_init("vtr-serve", log_json);
    av_log_set_level(AV_LOG_QUIET); /* a query file FFmpeg cannot read gets our error */
    o.n_indexes = argc - optind;
    vtr_served_index *ix = calloc((size_t)o.n_indexes, sizeof *ix);
    if (!ix) {
        fprintf(stderr, "vtr-serve: out of memory\n");
        return 1;
    }
    for (int i = 0; i < o.n_indexes; i++) {
        char *arg = argv[optind + i], *eq = strchr(arg, '=');
        ix[i].dir = arg;
        if (eq && eq > arg && access(arg, F_OK) != 0) { /* NAME=DIR, unless DIR has a '=' */
            *eq = '\0';
            ix[i].name = arg;
            ix[i].dir = eq + 1;
        }
    }
    o.indexes = ix;
    o.runs = runs;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that goes away mid-response */

    vtr_web_server *srv;
    vtr_error err;
    if (vtr_web_server_start(&o, &srv, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        free(ix);
        return 1;
    }
    const char *address = o.address ? o.address : "127.0.0.1";
    bool v6 = strchr(address, ':') != NULL;
    if (!vtr_web_server_loopback(srv))
        vtr_log_warn("listening on %s, not a loopback address: every machine that reaches it "
                     "can search these indexes and read their files", address);
    vtr_log_info("serving %d index%s at http://%s%s%s:%d/ (Ctrl-C stops)", o.n_indexes,
                 o.n_indexes == 1 ? "" : "es", v6 ? "[" : "", address, v6 ? "]" : "",
                 vtr_web_server_port(srv));
    while (!stop_requested)
        pause();
    vtr_log_info("stopping");
    vtr_web_server_stop(srv);
    vtr_plot_release_caches(); /* the plots' fonts: nothing draws after this */
    free(ix);
    return 0;
}
