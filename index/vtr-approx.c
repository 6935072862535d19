/* vtr-approx: builds, updates or removes the approximate index of an embedding index, and
 * measures its recall. Argument parsing and reporting only; the work is in
 * index/approx_index.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "index/approx_index.h"
#include "index/embedding_index.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/blas_threads.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-approx [OPTION]... --index DIR --kind hnsw|ivfpq\n"
    "       vtr-approx [OPTION]... --index DIR [--update | --remove]\n"
    "Builds the approximate index of an embedding index (vtr-index, vtr-aggregate\n"
    "--index): FAISS's HNSW or IVF-PQ over the index's live rows, in DIR/" VTR_APPROX_FILE ".\n"
    "vtr-search then asks it for candidates (from 100,000 items on, or with --approx)\n"
    "and scores them exactly from the index's rows (docs/search.md). For models of one\n"
    "vector per item (VSE++, VSE∞); HGR indexes have vtr-search --preselect instead.\n"
    "\n"
    "  -i, --index DIR       the embedding index\n"
    "      --kind KIND       build a new approximate index, replacing the present one:\n"
    "                        hnsw (a graph over 8-bit rows: the better recall) or ivfpq\n"
    "                        (inverted lists of product-quantized rows: less memory,\n"
    "                        faster to build)\n"
    "      --update          bring the present one to the index's last generation: the\n"
    "                        rows added since are added, or it is built again after a\n"
    "                        compaction (vtr-index does this at the end of each run)\n"
    "                        [what vtr-approx does without --kind or --remove]\n"
    "      --remove          remove it (searches are then exact)\n"
    "      --recall N        measure recall@10 against exact search, with N of the\n"
    "                        index's rows as queries [200; 0: do not measure]\n"
    "      --threads N       OpenMP and BLAS threads [their defaults]\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "The work is done under the index's writer lock (no vtr-index may run meanwhile);\n"
    "searches go on, with the previous file, until the new one replaces it whole.\n"
    "Prints what it did on stderr: the kind, the rows, the time, the file's size and the\n"
    "recall. The rows of items indexed later are searched exactly until the next update;\n"
    "an index compacted since is searched exactly until then (vtr-search says so).\n"
    "Exit status: 0 done; 1 bad usage, or the index or its approximate index could not be\n"
    "used, built or written.\n";

typedef enum action { ACT_UPDATE, ACT_BUILD, ACT_REMOVE } action;

/* Logs what the approximate index of dir now is, and its recall over `recall_queries` of
 * the snapshot's rows. */
static vtr_status report(const char *dir, vtr_embedding_index *ix, int64_t recall_queries,
                         const char *done, double seconds, vtr_error *err)
{
    vtr_approx_index *a = NULL;
    vtr_status st = vtr_approx_index_open(dir, &a, err);
    if (st != VTR_OK)
        return st;
    char *path = vtr_path_join(dir, VTR_APPROX_FILE);
    struct stat sb;
    double mb = path && stat(path, &sb) == 0 ? (double)sb.st_size / 1e6 : -1;
    free(path);
    vtr_log_info("%s/%s: %s (%.1f s): %s over %lld rows of generation %lld, %.1f MB", dir,
                 VTR_APPROX_FILE, done, seconds, vtr_ann_kind_name(vtr_approx_index_kind(a)),
                 (long long)vtr_approx_index_labels(a),
                 (long long)vtr_approx_index_generation(a), mb);
    if (recall_queries > 0) {
        double recall, t0 = vtr_now_seconds();
        if ((st = vtr_approx_recall(a, ix, recall_queries, 10, NULL, &recall, err)) == VTR_OK)
            vtr_log_info("recall@10 %.3f against exact search, with %lld of the index's rows "
                         "as queries (%.1f s)", recall,
                         (long long)(recall_queries < vtr_embedding_index_live_rows(ix)
                                         ? recall_queries
                                         : vtr_embedding_index_live_rows(ix)),
                         vtr_now_seconds() - t0);
    }
    vtr_approx_index_close(a);
    return st;
}

int main(int argc, char **argv)
{
    enum { OPT_KIND = 256, OPT_UPDATE, OPT_REMOVE, OPT_RECALL, OPT_THREADS, OPT_LOG_JSON,
           OPT_VERSION };
    static const struct option options[] = {
        {"index", required_argument, NULL, 'i'},
        {"kind", required_argument, NULL, OPT_KIND},
        {"update", no_argument, NULL, OPT_UPDATE},
        {"remove", no_argument, NULL, OPT_REMOVE},
        {"recall", required_argument, NULL, OPT_RECALL},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    vtr_ann_kind kind = VTR_ANN_HNSW;
    action act = ACT_UPDATE;
    int actions = 0, threads = 0, opt;
    long long recall = 200, v;
    bool log_json = false;
    while ((opt = getopt_long(argc, argv, "i:h", options, NULL)) != -1) {
        switch (opt) {
        case 'i': dir = optarg; break;
        case OPT_KIND:
            if (strcmp(optarg, "hnsw") == 0) {
                kind = VTR_ANN_HNSW;
            } else if (strcmp(optarg, "ivfpq") == 0) {
                kind = VTR_ANN_IVFPQ;
            } else {
                fprintf(stderr, "vtr-approx: --kind wants hnsw or ivfpq, got '%s'\n", optarg);
                return 1;
            }
            act = ACT_BUILD;
            actions++;
            break;
        case OPT_UPDATE: act = ACT_UPDATE; actions++; break;
        case OPT_REMOVE: act = ACT_REMOVE; actions++; break;
        case OPT_RECALL:
            if (vtr_parse_int(optarg, 0, 1 << 20, &recall)) {
                fprintf(stderr, "vtr-approx: --recall wants an integer in [0, 1048576], got "
                        "'%s'\n", optarg);
                return 1;
            }
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-approx: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                return 1;
            }
            threads = (int)v;
            break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-approx %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-approx --help'.\n", stderr); return 1;
        }
    }
    const char *usage_error = NULL;
    if (!dir)
        usage_error = "--index DIR is required";
    else if (optind < argc)
        usage_error = "unexpected argument";
    else if (actions > 1)
        usage_error = "give one of --kind, --update and --remove";
    if (usage_error) {
        fprintf(stderr, "vtr-approx: %s (see --help)\n", usage_error);
        return 1;
    }
    vtr_log_init("vtr-approx", log_json);
    if (threads > 0) {
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }

    int rc = 1;
    vtr_error err;
    vtr_embedding_index *ix = NULL;
    vtr_embedding_index_writer *w = NULL;
    /* an index that is there (the writer would create one), then its lock, then the
     * snapshot the work is done on: no commit can come between */
    vtr_embedding_index_options wo = {0};
    if (vtr_embedding_index_open(dir, &ix, &err) != VTR_OK)
        goto fail;
    vtr_embedding_index_close(ix);
    ix = NULL;
    if (vtr_embedding_index_writer_open(dir, &wo, &w, &err) != VTR_OK ||
        vtr_embedding_index_open(dir, &ix, &err) != VTR_OK)
        goto fail;
    double t0 = vtr_now_seconds();
    const char *done = NULL;
    if (act == ACT_REMOVE) {
        bool removed;
        if (vtr_approx_index_remove(dir, &removed, &err) != VTR_OK)
            goto fail;
        vtr_log_info("%s: %s", dir, removed ? "approximate index removed"
                                            : "no approximate index to remove");
        rc = 0;
        goto end;
    }
    if (act == ACT_BUILD) {
        if (vtr_approx_index_build(ix, dir, kind, &err) != VTR_OK)
            goto fail;
        done = "built";
    } else {
        vtr_approx_update what;
        if (vtr_approx_index_update(ix, dir, &what, &err) != VTR_OK)
            goto fail;
        if (what == VTR_APPROX_ABSENT) {
            vtr_fail(&err, VTR_ERR_NOT_FOUND, "index %s has no approximate index: build one "
                     "with --kind hnsw or --kind ivfpq", dir);
            goto fail;
        }
        done = what == VTR_APPROX_CURRENT ? "up to date"
               : what == VTR_APPROX_ADDED ? "new rows added" : "built again";
    }
    if (report(dir, ix, recall, done, vtr_now_seconds() - t0, &err) != VTR_OK)
        goto fail;
    rc = 0;
    goto end;
fail:
    vtr_log_item_error(NULL, &err);
end:
    vtr_embedding_index_close(ix);
    vtr_embedding_index_writer_close(w);
    return rc;
}
