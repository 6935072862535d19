/* vtr-search: text queries against an embedding index. Argument parsing and output only;
 * the work is in index/text_search.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "index/archive_index.h"
#include "index/embedder.h"
#include "index/embedding_index.h"
#include "index/search_json.h"
#include "index/text_search.h"
#include "index/topk.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/blas_threads.h"
#include "lib/device.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/lines.h"
#include "lib/log.h"
#include "lib/version.h"
#include "text/role_graph.h"

static const char usage_text[] =
    "Usage: vtr-search [OPTION]... --index DIR QUERY...\n"
    "       vtr-search [OPTION]... --index DIR --queries FILE\n"
    "Finds the items of an embedding index (vtr-index, vtr-aggregate --index) that match\n"
    "each text query best: the query is embedded by the model that made the index, and\n"
    "the k rows with the highest inner product (cosine similarity) are found exactly over\n"
    "the whole index (docs/search.md), or, for an index of at least 100,000 items with an\n"
    "approximate index (vtr-approx), among the candidates it proposes, scored exactly.\n"
    "All queries are embedded and searched as one batch.\n"
    "\n"
    "  -i, --index DIR       the embedding index\n"
    "  -m, --model CKPT      the model's checkpoint [the one the index records]; it must\n"
    "                        be the model the index was made with (same SHA-256)\n"
    "      --vocab PATH      vocabulary JSON [vocab.json beside CKPT, else its config's]\n"
    "  -k N                  results per query [10]\n"
    "  -q, --queries FILE    queries, one per line ('-': stdin); blank lines skipped\n"
    "      --catalog PATH    catalog giving each item's path and duration\n"
    "                        [DIR/" VTR_ARCHIVE_CATALOG " when present]\n"
    "      --dataset NAME    the items' dataset in the catalog [" VTR_ARCHIVE_DATASET "]\n"
    "      --graphs FILE     role graphs of the queries (HGR models): a JSON object from\n"
    "                        query text to its graph, as sent2rolegraph.augment.json\n"
    "      --preselect N     HGR models: score only each query's N best items by the\n"
    "                        global level (for large indexes) [0: every item]\n"
    "      --approx          search through the index's approximate index (vtr-approx),\n"
    "                        whatever the index's size; fail when it has none that fits\n"
    "      --exact           search every row exactly, even when an approximate index\n"
    "                        is there [the approximate index from 100,000 items on, when\n"
    "                        it fits the index: docs/search.md]\n"
    "      --json            one JSON object per query: {\"query\", \"words\",\n"
    "                        \"known_words\", \"results\": [{\"rank\",\n"
    "                        \"score\", \"key\", \"path\", \"duration\", \"image\"}]} (path,\n"
    "                        duration and image null when unknown); HGR adds the query's "
    "\"phrases\" {\"verbs\",\n"
    "                        \"nouns\"} and each result's \"levels\" {\"global\", \"verb\",\n"
    "                        \"noun\"}\n"
    "      --device DEV      cpu, cuda or cuda:N: with cuda a VSE model's index rows are\n"
    "                        copied to the GPU and searched exactly there (no\n"
    "                        approximate index; -k at most 256); an HGR model runs\n"
    "                        there, its items ranked on the CPU [cpu]\n"
    "      --threads N       OpenMP and BLAS threads [their defaults]\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "Each query's line says how many of its words the model's vocabulary has (the others\n"
    "count as unknown, <unk>); a query with none is warned about on stderr: its results\n"
    "are not about it.\n"
    "The table gives per query: rank, score (4 decimals), duration in seconds when the\n"
    "catalog knows it (\"image\" for a photo), and the item's path (its key when the\n"
    "catalog has none).\n"
    "An HGR model (HGR, HGR∞) scores each item with the mean of three levels (global,\n"
    "verb, noun; docs/search.md), shown in three more columns; a query's verb and noun\n"
    "levels need its role graph (--graphs): without one only the global level matches\n"
    "it, and the table says so.\n"
    "A query that is not valid UTF-8, or has no word (an empty query), is reported on\n"
    "stderr in one line; the others are searched. Names with a line break (or not\n"
    "UTF-8) are escaped in the table (\\x0a).\n"
    "Exit status: 0 every query searched; 2 some queries failed, or a result's score is\n"
    "not a number (a damaged index: said on stderr, null in --json); 1 bad usage, no\n"
    "queries (--queries FILE with none, or stdin closed), the index, model or catalog\n"
    "could not be used, or the output could not be written (a full disk).\n";

/* The line that says which levels of an HGR model scored a query. */
static void print_levels(const int *phrases)
{
    if (phrases[0] == 0 && phrases[1] == 0)
        printf("levels: global only (no role graph: the verb and noun levels score 0)\n");
    else
        printf("levels: global, verb (%d phrase%s), noun (%d phrase%s)\n", phrases[0],
               phrases[0] == 1 ? "" : "s", phrases[1], phrases[1] == 1 ? "" : "s");
}

/* The table of one query; the query and the items' names through vtr_shown, so that a
 * key with a line break (or not UTF-8) stays on its row. */
static void print_table(const char *query, const int words[2], const vtr_search_result *r,
                        int64_t found, const int *phrases)
{
    char shown[4096];
    printf("query: %s (%d of its %d words known)\n", vtr_shown(query, shown, sizeof shown),
           words[1], words[0]);
    if (phrases)
        print_levels(phrases);
    if (found == 0) {
        printf("  (the index is empty)\n");
        return;
    }
    printf("%5s  %7s  ", "rank", "score");
    if (phrases)
        printf("%7s  %7s  %7s  ", "global", "verb", "noun");
    printf("%9s  %s\n", "duration", "item");
    for (int64_t j = 0; j < found; j++) {
        char dur[32] = "-"; /* the catalog's duration: 0 for an image */
        if (r[j].duration_s == 0)
            snprintf(dur, sizeof dur, "image");
        else if (r[j].duration_s > 0)
            snprintf(dur, sizeof dur, "%.2fs", r[j].duration_s);
        printf("%5lld  %7.4f  ", (long long)(j + 1), (double)r[j].score);
        if (phrases)
            printf("%7.4f  %7.4f  %7.4f  ", (double)r[j].levels[0], (double)r[j].levels[1],
                   (double)r[j].levels[2]);
        printf("%9s  %s\n", dur, vtr_shown(r[j].path ? r[j].path : r[j].key, shown, sizeof shown));
    }
}

static int print_json(const char *query, const int words[2], const vtr_search_result *r,
                      int64_t found, const int *phrases)
{
    json_t *out = vtr_search_json(query, words, r, found, 1, phrases);
    char *text = out ? json_dumps(out, VTR_JSON_FLAGS) : NULL;
    json_decref(out);
    if (!text)
        return -1;
    printf("%s\n", text);
    free(text);
    return 0;
}

/* The role graph of query text in graphs (NULL: none) as JSON text (*graph, malloc'ed, or
 * NULL when graphs has none for it), checked to parse. */
static vtr_status query_graph(const json_t *graphs, const char *text, char **graph,
                              vtr_error *err)
{
    *graph = NULL;
    const json_t *value = graphs ? json_object_get(graphs, text) : NULL;
    if (!value)
        return VTR_OK;
    vtr_role_graph parsed;
    vtr_status st = vtr_role_graph_parse(value, text, &parsed, err);
    vtr_role_graph_free(&parsed);
    if (st == VTR_OK && !(*graph = json_dumps(value, JSON_COMPACT)))
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return st;
}

int main(int argc, char **argv)
{
    enum { OPT_VOCAB = 256, OPT_CATALOG, OPT_DATASET, OPT_GRAPHS, OPT_PRESELECT, OPT_APPROX,
           OPT_EXACT, OPT_JSON, OPT_THREADS, OPT_DEVICE, OPT_LOG_JSON, OPT_VERSION };
    static const struct option options[] = {
        {"index", required_argument, NULL, 'i'},
        {"model", required_argument, NULL, 'm'},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"queries", required_argument, NULL, 'q'},
        {"catalog", required_argument, NULL, OPT_CATALOG},
        {"dataset", required_argument, NULL, OPT_DATASET},
        {"graphs", required_argument, NULL, OPT_GRAPHS},
        {"preselect", required_argument, NULL, OPT_PRESELECT},
        {"approx", no_argument, NULL, OPT_APPROX},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"json", no_argument, NULL, OPT_JSON},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *index = NULL, *model = NULL, *vocab = NULL, *queries_path = NULL;
    const char *catalog = NULL, *dataset = NULL, *graphs_path = NULL;
    bool json = false, log_json = false;
    vtr_approx_mode approx = VTR_APPROX_AUTO;
    int threads = 0, opt, approx_flags = 0, device_index = 0;
    vtr_device device = VTR_DEVICE_CPU;
    vtr_error err;
    long long k = 10, v, preselect = 0;
    while ((opt = getopt_long(argc, argv, "i:m:k:q:h", options, NULL)) != -1) {
        switch (opt) {
        case 'i': index = optarg; break;
        case 'm': model = optarg; break;
        case OPT_VOCAB: vocab = optarg; break;
        case 'k':
            if (vtr_parse_int(optarg, 1, 1 << 20, &k)) {
                fprintf(stderr, "vtr-search: -k wants an integer in [1, 1048576], got '%s'\n",
                        optarg);
                return 1;
            }
            break;
        case 'q': queries_path = optarg; break;
        case OPT_CATALOG: catalog = optarg; break;
        case OPT_DATASET: dataset = optarg; break;
        case OPT_GRAPHS: graphs_path = optarg; break;
        case OPT_PRESELECT:
            if (vtr_parse_int(optarg, 0, INT64_MAX / 8, &preselect)) {
                fprintf(stderr, "vtr-search: --preselect wants an integer >= 0, got '%s'\n",
                        optarg);
                return 1;
            }
            break;
        case OPT_APPROX: approx = VTR_APPROX_ALWAYS; approx_flags++; break;
        case OPT_EXACT: approx = VTR_APPROX_NEVER; approx_flags++; break;
        case OPT_JSON: json = true; break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-search: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                return 1;
            }
            threads = (int)v;
            break;
        case OPT_DEVICE:
            if (vtr_device_parse(optarg, &device, &device_index, &err)) {
                fprintf(stderr, "vtr-search: --device: %s\n", err.msg);
                return 1;
            }
            break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-search %s\n%s\n%s\n", vtr_version, vtr_blas_kernel_report(),
                   vtr_topk_report());
            return 0;
        default: fputs("Try 'vtr-search --help'.\n", stderr); return 1;
        }
    }
    const char *usage_error = NULL;
    if (!index)
        usage_error = "--index DIR is required";
    else if (!queries_path && optind == argc)
        usage_error = "no query: give QUERY arguments or --queries FILE";
    else if (queries_path && optind < argc)
        usage_error = "give QUERY arguments or --queries FILE, not both";
    else if (approx_flags > 1)
        usage_error = "give --approx or --exact, not both";
    else if (device == VTR_DEVICE_CUDA && approx == VTR_APPROX_ALWAYS)
        usage_error = "--device cuda searches exactly: --approx is for the CPU";
    else if (device == VTR_DEVICE_CUDA && k > VTR_TOPK_CUDA_MAX_K)
        usage_error = "--device cuda gives at most 256 results per query (-k)";
    if (usage_error) {
        fprintf(stderr, "vtr-search: %s (see --help)\n", usage_error);
        return 1;
    }
    vtr_log_init("vtr-search", log_json);
    if (threads > 0) { /* the embedder's calls and everything else (the top-k search) */
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }

    int rc = 1;
    vtr_text_searcher ts = {0};
    vtr_line_list q = {0}, ok = {0};
    vtr_search_result *results = NULL;
    int64_t *found = NULL, failed = 0, damaged = 0;
    json_t *graphs = NULL;
    char **ok_graphs = NULL;
    int *phrases = NULL;
    int *words = NULL; /* per valid query: its words, and those the model knows */

    /* the index, its model and the catalog */
    vtr_text_searcher_options so = {.index = index, .model = model, .vocab = vocab,
                                    .threads = threads, .catalog = catalog, .dataset = dataset,
                                    .approx = approx, .device = device,
                                    .device_index = device_index};
    if (vtr_text_searcher_open(&so, &ts, &err) != VTR_OK)
        goto fail;
    if (ts.approx_note[0])
        vtr_log_warn("%s", ts.approx_note);

    /* the queries; invalid ones reported and left out */
    if (queries_path && vtr_line_list_read(&q, queries_path, true, &err) != VTR_OK)
        goto fail;
    if (queries_path && q.n == 0) { /* an empty file, or stdin closed or empty */
        vtr_fail(&err, VTR_ERR_INVALID, "%s: no queries (blank lines are skipped)",
                 strcmp(queries_path, "-") ? queries_path : "stdin");
        goto fail;
    }
    for (int i = optind; i < argc; i++)
        if (vtr_line_list_add(&q, argv[i], &err) != VTR_OK)
            goto fail;
    if (graphs_path && vtr_import_load_graphs(graphs_path, false, &graphs, &err) != VTR_OK)
        goto fail;
    if (!(ok_graphs = calloc(q.n ? q.n : 1, sizeof *ok_graphs)) ||
        !(words = calloc(2 * (q.n ? q.n : 1), sizeof *words))) {
        vtr_fail(&err, VTR_ERR_NOMEM, "out of memory for the queries");
        goto fail;
    }
    for (size_t i = 0; i < q.n; i++) {
        vtr_error e2;
        char *graph = NULL;
        int *w = words + 2 * ok.n;
        if (vtr_embedder_check_text(ts.e, q.v[i], &w[0], &w[1], &e2) != VTR_OK ||
            query_graph(graphs, q.v[i], &graph, &e2) != VTR_OK) {
            char what[32];
            snprintf(what, sizeof what, "query %lld", (long long)(i + 1));
            vtr_log_item_error(what, &e2);
            failed++;
            continue;
        }
        if (w[1] == 0)
            fprintf(stderr, "vtr-search: query %lld: none of its %d words is in the model's "
                    "vocabulary: its results are not about it\n", (long long)(i + 1), w[0]);
        ok_graphs[ok.n] = graph;
        if (vtr_line_list_add(&ok, q.v[i], &err) != VTR_OK)
            goto fail;
    }

    /* one batch */
    results = calloc((size_t)(ok.n ? ok.n : 1) * (size_t)k, sizeof *results);
    found = calloc((size_t)(ok.n ? ok.n : 1), sizeof *found);
    phrases = calloc(2 * (size_t)(ok.n ? ok.n : 1), sizeof *phrases);
    if (!results || !found || !phrases) {
        vtr_fail(&err, VTR_ERR_NOMEM, "out of memory for the results");
        goto fail;
    }
    if (vtr_text_search(ts.e, ts.ix, ts.approx, ts.gpu, ts.cat, ts.dataset_id, ok.n,
                        (const char *const *)ok.v, (const char *const *)ok_graphs, k, preselect,
                        results, found, phrases, &err) != VTR_OK)
        goto fail;
    bool hgr = vtr_embedder_levels(ts.e) > 0;
    for (size_t i = 0; i < ok.n; i++)
        for (int64_t j = 0; j < found[i]; j++) {
            const vtr_search_result *r = &results[i * k + j];
            if (!isfinite(r->score) && !damaged++) {
                char key[128];
                fprintf(stderr, "vtr-search: index %s: item %s scores %g (its stored vector is "
                        "damaged): build the index again\n", index,
                        vtr_printable(r->key, strlen(r->key), key, sizeof key), (double)r->score);
            }
        }
    for (size_t i = 0; i < ok.n; i++) {
        const int *ph = hgr ? phrases + 2 * i : NULL;
        if (json) {
            if (print_json(ok.v[i], words + 2 * i, results + i * k, found[i], ph) != 0) {
                vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
                goto fail;
            }
        } else {
            if (i > 0)
                printf("\n");
            print_table(ok.v[i], words + 2 * i, results + i * k, found[i], ph);
        }
    }
    if (vtr_output_flush(stdout, "stdout", &err) != VTR_OK)
        goto fail;
    rc = failed || damaged ? 2 : 0;
    goto end;
fail:
    vtr_log_item_error(NULL, &err);
end:
    if (results)
        vtr_search_results_free(results, ok.n * k);
    free(results);
    free(found);
    free(phrases);
    free(words);
    for (size_t i = 0; ok_graphs && i < ok.n; i++)
        free(ok_graphs[i]);
    free(ok_graphs);
    json_decref(graphs);
    vtr_line_list_free(&q);
    vtr_line_list_free(&ok);
    vtr_text_searcher_close(&ts);
    return rc;
}
