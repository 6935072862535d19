/* vtr-eval: retrieval metrics of a trained VSE model (or an ensemble) on a split.
 * Argument parsing and output only; the work is in match/encode.h and
 * match/retrieval_metrics.h, the catalog record in match/run_record.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/blas_threads.h"
#include "lib/catalog.h"
#include "lib/device.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/npy.h"
#include "lib/version.h"
#include "match/encode.h"
#include "match/eval_model.h"
#include "match/retrieval_metrics.h"
#include "match/run_record.h"
#include "match/trainer.h"

static const char usage_text[] =
    "Usage: vtr-eval [OPTION]... --checkpoint CKPT [--ensemble CKPT2]... [CKPT3...]\n"
    "Embeds the items and captions of a split with a trained VSE model (or scores every\n"
    "video-caption pair with an HGR model: the fused score, and --json adds each of its\n"
    "three levels alone) and prints the\n"
    "retrieval metrics in both directions: R@1, R@5, R@10, median and mean rank (one-based),\n"
    "mAP, nDCG, and RSUM (docs/training.md). With several checkpoints, the ensemble's\n"
    "similarity is the mean of the models' (labelled as an ensemble).\n"
    "\n"
    "The data comes from the config stored in the checkpoint (data.catalog, data.dataset,\n"
    "data.features; relative paths as vtr-train saw them, so run from where it ran or\n"
    "give --catalog and --store); the vocabulary is vocab.json beside the checkpoint (as\n"
    "vtr-train writes it), else the config's data.vocab. The evaluation is recorded in\n"
    "that catalog as a run of kind eval (config, checkpoint and data hashes, the metrics).\n"
    "\n"
    "  -c, --checkpoint CKPT  the model (a vtr-train checkpoint, or a converted PyTorch\n"
    "                         state_dict with --config)\n"
    "  -e, --ensemble CKPT    another model of the ensemble (repeatable; more checkpoints\n"
    "                         may follow the options)\n"
    "      --split NAME       split to evaluate [test]\n"
    "      --catalog PATH     catalog naming the split's items and captions\n"
    "      --dataset NAME     the dataset in the catalog\n"
    "      --store DIR        feature store of the items\n"
    "      --vocab PATH       vocabulary JSON (reference format)\n"
    "      --config FILE      training config for checkpoints that carry none\n"
    "  -s, --set KEY=VALUE    override a key of every model's config\n"
    "      --coco-1k          five (n/1000) folds of 1000 items, metrics averaged (COCO 1K)\n"
    "      --hgr-dedup        HGR's protocol: identical captions are one query and one\n"
    "                         candidate, correct for every item that has it; median rank\n"
    "                         without the floor (the default for an HGR model)\n"
    "      --vse-protocol     an HGR model under the VSE protocol (every caption a query,\n"
    "                         floor(median) + 1)\n"
    "      --ndcg-at K        nDCG over the first K candidates [whole ranking]\n"
    "      --batch-size N     items or captions per encoding batch [128]\n"
    "      --threads N        OpenMP and BLAS threads [OpenMP's default]\n"
    "      --device DEV       where the models encode and the similarities are computed\n"
    "                         and ranked: cpu, cuda or cuda:N [cpu]\n"
    "      --json             print the metrics as one JSON object\n"
    "      --save-embeddings DIR  also write the model's embeddings: DIR/items.npy\n"
    "                         (items, E) and DIR/captions.npy (captions, E), float32, in\n"
    "                         the split's order (one checkpoint only)\n"
    "      --no-record        do not record the evaluation in the catalog\n"
    "      --log-json         log events as JSON lines on stderr\n"
    "  -h, --help             this text\n"
    "      --version          the version\n"
    "\n"
    "Exit status: 0 evaluated; 1 bad usage, a checkpoint, config or the data could not be\n"
    "read, or the output could not be written (\"stdout: No space left on device\").\n";

enum {
    OPT_SPLIT = 256,
    OPT_CATALOG,
    OPT_DATASET,
    OPT_STORE,
    OPT_VOCAB,
    OPT_CONFIG,
    OPT_COCO_1K,
    OPT_HGR_DEDUP,
    OPT_VSE_PROTOCOL,
    OPT_NDCG_AT,
    OPT_BATCH_SIZE,
    OPT_THREADS,
    OPT_DEVICE,
    OPT_JSON,
    OPT_SAVE_EMBEDDINGS,
    OPT_NO_RECORD,
    OPT_LOG_JSON,
    OPT_VERSION,
};

static void on_progress(void *ctx, int64_t done, int64_t total)
{
    vtr_progress *p = ctx;
    vtr_progress_step(p, done - p->done);
}

/* Opens checkpoint path as member m and embeds the split into items and captions. */
static vtr_status embed(const char *path, const vtr_eval_source *src, vtr_eval_model *m,
                        float **items, float **captions, vtr_error *err)
{
    vtr_batcher b = {0};
    vtr_status st = vtr_eval_model_open(path, src, m, err);
    if (st != VTR_OK || m->trained.o.kind == VTR_MODEL_HGR) /* HGR: scored pairwise later */
        return st;
    const vtr_vse_config *c = &m->model.vse.cfg;
    size_t E = (size_t)c->embed_size * (size_t)vtr_vse_vectors(c); /* floats per item */
    *items = malloc((size_t)m->split.n_items * E * sizeof **items);
    *captions = malloc((size_t)m->split.n_caps * E * sizeof **captions);
    if (!*items || !*captions)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for the embeddings");
    if ((st = vtr_batcher_init(&b, &m->split, src->batch, err)))
        return st;
    vtr_progress p;
    vtr_progress_begin(&p, "embedding", (int64_t)m->split.n_items + m->split.n_caps);
    st = vtr_encode_split(&m->model.vse, &b, NULL, *items, *captions, on_progress, &p, err);
    vtr_progress_end(&p);
    vtr_batcher_free(&b);
    if (st != VTR_OK)
        vtr_error_context(err, "%s", path);
    return st;
}

/* Writes DIR/items.npy (n_items, E) and DIR/captions.npy (n_caps, E), creating DIR; a set
 * model's (n_items, K, E) and (n_caps, K, E). */
static vtr_status save_embeddings(const char *dir, const vtr_eval_model *m, float *items,
                                  float *captions, vtr_error *err)
{
    vtr_status st = vtr_make_dirs(dir, err);
    if (st != VTR_OK)
        return st;
    const vtr_vse_config *c = &m->model.vse.cfg;
    int64_t E = c->embed_size, K = c->set.K;
    vtr_tensor t[2] = {{.dtype = VTR_F32, .ndim = 2, .shape = {m->split.n_items, E}, .data = items},
                       {.dtype = VTR_F32, .ndim = 2, .shape = {m->split.n_caps, E},
                        .data = captions}};
    for (int i = 0; i < 2 && K > 0; i++) {
        t[i].ndim = 3;
        t[i].shape[1] = K;
        t[i].shape[2] = E;
    }
    const char *names[2] = {"items.npy", "captions.npy"};
    for (int i = 0; i < 2 && st == VTR_OK; i++) {
        char *path = vtr_path_join(dir, names[i]);
        st = path ? vtr_npy_save(path, &t[i], 1, err)
                  : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        free(path);
    }
    return st;
}

/* "KEY='VALUE'": a --set with the value single-quoted for YAML; NULL when out of memory. */
static char *quoted_set(const char *key, const char *value)
{
    size_t n = strlen(key) + 2 * strlen(value) + 4;
    char *s = malloc(n), *w = s;
    if (!s)
        return NULL;
    w += sprintf(w, "%s='", key);
    for (const char *r = value; *r; r++) {
        if (*r == '\'')
            *w++ = '\'';
        *w++ = *r;
    }
    strcpy(w, "'");
    return s;
}

/* Opens and embeds every checkpoint as members[i], its items and captions in
 * embeddings[2i] and [2i + 1] and as em[i]; they must all evaluate the first's split. */
static vtr_status embed_members(const char *const *ckpts, int n_ckpts,
                                const vtr_eval_source *src, vtr_eval_model *members,
                                float **embeddings, vtr_embedding_model *em, vtr_error *err)
{
    for (int i = 0; i < n_ckpts; i++) {
        vtr_eval_model *m = &members[i];
        vtr_status st = embed(ckpts[i], src, m, &embeddings[2 * i], &embeddings[2 * i + 1], err);
        if (st != VTR_OK)
            return st;
        if (n_ckpts > 1 && m->trained.o.kind == VTR_MODEL_HGR)
            return vtr_fail(err, VTR_ERR_INVALID, "%s is an HGR model: an ensemble averages "
                            "the similarities of VSE models only", ckpts[i]);
        const vtr_split *s0 = &members[0].split, *s = &m->split;
        if (s->n_items != s0->n_items || s->n_caps != s0->n_caps ||
            memcmp(s->cap_item, s0->cap_item, sizeof(int) * (size_t)s->n_caps) != 0)
            return vtr_fail(err, VTR_ERR_INVALID, "%s evaluates another split (%d items, %d "
                            "captions) than %s (%d, %d): give --catalog and --dataset",
                            ckpts[i], s->n_items, s->n_caps, ckpts[0], s0->n_items,
                            s0->n_caps);
        em[i] = vtr_vse_embedding_model(&m->model.vse.cfg, embeddings[2 * i],
                                        embeddings[2 * i + 1]);
    }
    return VTR_OK;
}

/* An HGR model's metrics on its split: the fused score, blockwise (match/run_model.h), and
 * each level alone. */
static vtr_status score_hgr(vtr_eval_model *m, int batch, const vtr_retrieval_options *ro,
                            vtr_retrieval_metrics *r, vtr_retrieval_metrics *levels,
                            vtr_error *err)
{
    vtr_batcher b;
    vtr_status st = vtr_batcher_init(&b, &m->split, batch, err);
    if (st == VTR_OK)
        st = vtr_run_model_evaluate(&m->model, &b, NULL, ro, r, levels, err);
    vtr_batcher_free(&b);
    if (st != VTR_OK)
        vtr_error_context(err, "%s", m->trained.ck.path);
    return st;
}

/* Records the start of the evaluation in the first model's catalog (kind "eval",
 * match/run_record.h). */
static vtr_status begin_record(const vtr_eval_model *members, const char *const *ckpts,
                               int n_ckpts, vtr_catalog **cat, vtr_run_record *rec,
                               vtr_error *err)
{
    vtr_status st = vtr_run_record_init_eval(rec, &members[0].trained, ckpts, n_ckpts, err);
    if (st != VTR_OK)
        return st;
    if ((st = vtr_catalog_open_existing(members[0].trained.o.catalog, cat, err)) ||
        (st = vtr_run_record_begin(rec, *cat, err)))
        vtr_error_context(err, "recording the evaluation (--no-record skips it)");
    return st;
}

static const char *const level_names[3] = {"global", "verb", "noun"};

/* The result as --json prints it (and the catalog records it); NULL when out of memory.
 * levels: NULL, or HGR's three levels alone (the result itself is the fused score). */
static json_t *result_json(const char *const *ckpts, int n_ckpts, const char *dataset, bool hgr,
                           const char *split, const vtr_split *s,
                           const vtr_retrieval_options *ro, const vtr_retrieval_metrics *r,
                           const vtr_retrieval_metrics *levels)
{
    json_t *list = json_array();
    for (int i = 0; i < n_ckpts; i++)
        json_array_append_new(list, json_string(ckpts[i]));
    json_t *protocol = json_pack("{s:i, s:i, s:b, s:s, s:i}", "folds", r->n_folds,
                                 "fold_items", ro->fold_items, "dedup", hgr, "median_rank",
                                 hgr ? "median + 1" : "floor(median) + 1", "ndcg_cutoff",
                                 ro->ndcg_cutoff);
    if (hgr)
        json_object_set_new(protocol, "texts", json_integer(s->n_texts));
    json_t *out = json_pack("{s:o, s:b, s:i, s:s, s:s, s:i, s:i, s:o, s:o, s:o, s:f}",
                            "checkpoints", list, "ensemble", n_ckpts > 1, "models", n_ckpts,
                            "dataset", dataset, "split", split, "items", s->n_items, "captions",
                            s->n_caps, "protocol", protocol, "v2t",
                            vtr_retrieval_direction_json(&r->v2t), "t2v",
                            vtr_retrieval_direction_json(&r->t2v), "rsum", r->rsum);
    if (out && levels) {
        json_t *lv = json_object();
        for (int k = 0; k < 3; k++)
            json_object_set_new(lv, level_names[k], vtr_retrieval_metrics_json(&levels[k]));
        json_object_set_new(out, "score", json_string("fused"));
        json_object_set_new(out, "levels", lv);
    }
    return out;
}

static void print_direction(const char *name, const vtr_retrieval_direction *d)
{
    printf("%-5s %7.2f %7.2f %7.2f %8.1f %8.1f %7.2f %7.2f\n", name, d->r1, d->r5, d->r10,
           d->median_rank, d->mean_rank, d->map, d->ndcg);
}

/* The human table of the result. */
static void print_result(const char *const *ckpts, int n_ckpts, const char *dataset, bool hgr,
                         const char *split, const vtr_split *s,
                         const vtr_retrieval_options *ro, const vtr_retrieval_metrics *r,
                         const vtr_retrieval_metrics *levels)
{
    printf("%s, split %s: %d items, %d captions\n", dataset, split, s->n_items, s->n_caps);
    if (n_ckpts == 1) {
        printf("model: %s\n", ckpts[0]);
    } else {
        printf("ENSEMBLE of %d models (similarities averaged):", n_ckpts);
        for (int i = 0; i < n_ckpts; i++)
            printf(" %s", ckpts[i]);
        printf("\n");
    }
    if (ro->fold_items)
        printf("protocol: %d folds of 1000 items, every metric averaged (COCO 1K)\n",
               r->n_folds);
    if (hgr)
        printf("protocol: HGR, %d distinct caption texts, median rank without floor\n",
               s->n_texts);
    char ndcg[32] = "nDCG";
    if (ro->ndcg_cutoff)
        snprintf(ndcg, sizeof ndcg, "nDCG@%d", ro->ndcg_cutoff);
    printf("%-5s %7s %7s %7s %8s %8s %7s %7s\n", "", "R@1", "R@5", "R@10", "medr", "meanr",
           "mAP", ndcg);
    if (levels)
        printf("HGR fused score (mean of the global, verb and noun levels):\n");
    print_direction("v2t", &r->v2t);
    print_direction("t2v", &r->t2v);
    printf("RSUM  %.2f\n", r->rsum);
    for (int k = 0; levels && k < 3; k++)
        printf("%-6s level alone: v2t R@1 %.2f, t2v R@1 %.2f, RSUM %.2f\n", level_names[k],
               levels[k].v2t.r1, levels[k].t2v.r1, levels[k].rsum);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"checkpoint", required_argument, NULL, 'c'},
        {"ensemble", required_argument, NULL, 'e'},
        {"split", required_argument, NULL, OPT_SPLIT},
        {"catalog", required_argument, NULL, OPT_CATALOG},
        {"dataset", required_argument, NULL, OPT_DATASET},
        {"store", required_argument, NULL, OPT_STORE},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"set", required_argument, NULL, 's'},
        {"coco-1k", no_argument, NULL, OPT_COCO_1K},
        {"hgr-dedup", no_argument, NULL, OPT_HGR_DEDUP},
        {"vse-protocol", no_argument, NULL, OPT_VSE_PROTOCOL},
        {"ndcg-at", required_argument, NULL, OPT_NDCG_AT},
        {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"json", no_argument, NULL, OPT_JSON},
        {"save-embeddings", required_argument, NULL, OPT_SAVE_EMBEDDINGS},
        {"no-record", no_argument, NULL, OPT_NO_RECORD},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_eval_source src = {.split = "test", .batch = 128};
    const char **ckpts = calloc((size_t)argc, sizeof *ckpts);
    char **owned = calloc((size_t)argc, sizeof *owned); /* --catalog etc. as --set text */
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int n_ckpts = 0, n_owned = 0, n_sets = 0, ndcg_at = 0, threads = 0, device_index = 0;
    bool json = false, coco_1k = false, hgr = false, have_checkpoint = false, log_json = false;
    bool record = true, vse_protocol = false;
    const char *embeddings_dir = NULL;
    vtr_catalog *cat = NULL;
    vtr_run_record rec = {.id = -1};
    json_t *out = NULL;
    vtr_error err = {0}, derr;
    int rc = 1;
    vtr_eval_model *members = NULL;
    float **embeddings = NULL; /* items and captions of member i at 2i and 2i + 1 */
    vtr_embedding_model *em = NULL;
    if (!ckpts || !owned || !sets) {
        fprintf(stderr, "vtr-eval: out of memory\n");
        goto done;
    }
    int opt;
    while ((opt = getopt_long(argc, argv, "c:e:s:h", options, NULL)) != -1) {
        const char *key = NULL;
        long long v;
        switch (opt) {
        case 'c':
            if (have_checkpoint) {
                fprintf(stderr, "vtr-eval: one --checkpoint (add models with --ensemble)\n");
                goto done;
            }
            have_checkpoint = true;
            /* the named checkpoint first: its data and vocabulary label the result */
            memmove(ckpts + 1, ckpts, sizeof *ckpts * (size_t)n_ckpts);
            ckpts[0] = optarg;
            n_ckpts++;
            break;
        case 'e': ckpts[n_ckpts++] = optarg; break;
        case OPT_SPLIT: src.split = optarg; break;
        case OPT_CATALOG: key = "data.catalog"; break;
        case OPT_DATASET: key = "data.dataset"; break;
        case OPT_STORE: key = "data.features"; break;
        case OPT_VOCAB: src.vocab_path = optarg; break;
        case OPT_CONFIG: src.config_path = optarg; break;
        case 's': sets[n_sets++] = optarg; break;
        case OPT_COCO_1K: coco_1k = true; break;
        case OPT_HGR_DEDUP: hgr = true; break;
        case OPT_VSE_PROTOCOL: vse_protocol = true; break;
        case OPT_NDCG_AT:
            if (vtr_parse_int(optarg, 1, 1L << 30, &v)) {
                fprintf(stderr, "vtr-eval: --ndcg-at wants an integer >= 1, got '%s'\n", optarg);
                goto done;
            }
            ndcg_at = (int)v;
            break;
        case OPT_BATCH_SIZE:
            if (vtr_parse_int(optarg, 1, 1 << 16, &v)) {
                fprintf(stderr, "vtr-eval: --batch-size wants an integer in [1, 65536], got "
                        "'%s'\n", optarg);
                goto done;
            }
            src.batch = (int)v;
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-eval: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                goto done;
            }
            threads = (int)v;
            break;
        case OPT_DEVICE:
            if (vtr_device_parse(optarg, &src.device, &device_index, &derr)) {
                fprintf(stderr, "vtr-eval: --device: %s\n", derr.msg);
                goto done;
            }
            break;
        case OPT_JSON: json = true; break;
        case OPT_SAVE_EMBEDDINGS: embeddings_dir = optarg; break;
        case OPT_NO_RECORD: record = false; break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); rc = 0; goto done;
        case OPT_VERSION:
            printf("vtr-eval %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            rc = 0;
            goto done;
        default: fputs("Try 'vtr-eval --help'.\n", stderr); goto done;
        }
        if (key) {
            if (!(owned[n_owned] = quoted_set(key, optarg))) {
                fprintf(stderr, "vtr-eval: out of memory\n");
                goto done;
            }
            sets[n_sets++] = owned[n_owned++];
        }
    }
    for (int i = optind; i < argc; i++)
        ckpts[n_ckpts++] = argv[i];
    if (!have_checkpoint) {
        fprintf(stderr, "vtr-eval: no --checkpoint (see --help)\n");
        goto done;
    }
    if (hgr && vse_protocol) {
        fprintf(stderr, "vtr-eval: --hgr-dedup or --vse-protocol, not both\n");
        goto done;
    }
    if (embeddings_dir && n_ckpts > 1) {
        fprintf(stderr, "vtr-eval: --save-embeddings takes one checkpoint, not an ensemble\n");
        goto done;
    }
    vtr_log_init(argv[0], log_json);
    src.sets = sets;
    src.n_sets = n_sets;
    if (threads > 0) {
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }
    if (src.device == VTR_DEVICE_CUDA && vtr_cuda_init(device_index, NULL, 0, &err)) {
        vtr_log_item_error("--device", &err);
        goto done;
    }

    members = calloc((size_t)n_ckpts, sizeof *members);
    embeddings = calloc(2 * (size_t)n_ckpts, sizeof *embeddings);
    em = calloc((size_t)n_ckpts, sizeof *em);
    if (!members || !embeddings || !em) {
        fprintf(stderr, "vtr-eval: out of memory\n");
        goto done;
    }
    vtr_status st = embed_members(ckpts, n_ckpts, &src, members, embeddings, em, &err);
    bool hgr_model = st == VTR_OK && members[0].trained.o.kind == VTR_MODEL_HGR;
    if (hgr_model && !vse_protocol)
        hgr = true; /* HGR's own protocol by default */
    if (hgr_model && embeddings_dir)
        st = vtr_fail(&err, VTR_ERR_INVALID, "--save-embeddings: %s is an HGR model, which "
                      "embeds no single vector per item", ckpts[0]);
    if (st == VTR_OK && embeddings_dir)
        st = save_embeddings(embeddings_dir, &members[0], embeddings[0], embeddings[1], &err);
    if (st == VTR_OK && record)
        st = begin_record(members, ckpts, n_ckpts, &cat, &rec, &err);
    vtr_retrieval_metrics r, levels[3];
    const vtr_split *s = &members[0].split;
    vtr_retrieval_options ro = {.fold_items = coco_1k ? 1000 : 0,
                                .cap_text = hgr ? s->cap_text : NULL,
                                .n_texts = hgr ? s->n_texts : 0,
                                .ndcg_cutoff = ndcg_at,
                                .median_no_floor = hgr,
                                .device = src.device};
    if (st == VTR_OK && coco_1k && s->n_items % 1000 != 0)
        st = vtr_fail(&err, VTR_ERR_INVALID, "--coco-1k: split '%s' has %d items, not a "
                      "multiple of 1000", src.split, s->n_items);
    if (st == VTR_OK && hgr_model)
        st = score_hgr(&members[0], src.batch, &ro, &r, levels, &err);
    else if (st == VTR_OK)
        st = vtr_retrieval_evaluate_embeddings(em, n_ckpts, s->n_items, s->n_caps, s->cap_item,
                                               &ro, &r, NULL, &err);
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto done;
    }

    const char *dataset = members[0].trained.o.dataset;
    out = result_json(ckpts, n_ckpts, dataset, hgr, src.split, s, &ro, &r,
                      hgr_model ? levels : NULL);
    if (json) {
        char *text = out ? json_dumps(out, VTR_JSON_FLAGS) : NULL;
        if (!text) {
            vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
            vtr_log_item_error(NULL, &err);
            goto done;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_result(ckpts, n_ckpts, dataset, hgr, src.split, s, &ro, &r,
                     hgr_model ? levels : NULL);
    }
    if (vtr_output_flush(stdout, "stdout", &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto done;
    }
    rc = 0;
done:
    if (rec.catalog) {
        /* the result: what --json prints, or the error */
        json_t *result = rc == 0 && out ? json_incref(out)
                                        : json_pack("{s:s}", "error", err.msg);
        vtr_error err2;
        if (vtr_run_record_finish(&rec, rc == 0, result, &err2) != VTR_OK) {
            vtr_log_item_error(NULL, &err2);
            rc = 1;
        }
        json_decref(result);
    }
    vtr_run_record_free(&rec);
    json_decref(out);
    vtr_catalog_close(cat);
    for (int i = 0; members && i < n_ckpts; i++)
        vtr_eval_model_close(&members[i]);
    for (int i = 0; embeddings && i < 2 * n_ckpts; i++)
        free(embeddings[i]);
    free(members);
    free(embeddings);
    free(em);
    free(sets);
    for (int i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(ckpts);
    return rc;
}
