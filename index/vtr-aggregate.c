/* vtr-aggregate: feature sets (or texts) + a trained model -> embedding records.
 * Argument parsing and I/O only; the work is in index/aggregator.h and
 * index/embedder.h. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/aggregator.h"
#include "index/embedder.h"
#include "index/embedding_index_output.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/blas_threads.h"
#include "lib/device.h"
#include "lib/feature_store.h"
#include "lib/file.h"
#include "lib/item_output.h"
#include "lib/keyed_files.h"
#include "lib/lines.h"
#include "lib/log.h"
#include "lib/npy.h"
#include "lib/npy_item.h"
#include "lib/record.h"
#include "lib/shard.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-aggregate [OPTION]... --model CKPT [INPUT]...\n"
    "       vtr-aggregate [OPTION]... --model CKPT --text [FILE]...\n"
    "Embeds feature sets (the visual side) or texts (the text side) with a trained VSE\n"
    "model (a vtr-train checkpoint) and writes one L2-normalized (1, E) embedding per item,\n"
    "keyed like the input.\n"
    "\n"
    "Inputs (visual side), one after the other; none or '-' is stdin:\n"
    "  FILE                  a record stream of feature sets (N, F) float32/float16, as\n"
    "                        vtr-features writes it\n"
    "  DIR                   a feature store (vtr-features --store: DIR/meta.json) or a\n"
    "                        directory of DIR/KEY.npy (+ DIR/KEY.json) items (vtr-features\n"
    "                        --out-dir), in key order\n"
    "Sets longer than the model's data.max_frames keep round(linspace(0, n-1, max_frames))\n"
    "of their rows, as in training.\n"
    "\n"
    "      --text            inputs are text files: one caption or query per line (blank\n"
    "                        lines skipped); the key is the line number (1, 2, ...,\n"
    "                        counted over all inputs)\n"
    "      --keyed           with --text: each line is KEY<TAB>TEXT\n"
    "\n"
    "Model:\n"
    "  -m, --model CKPT      the checkpoint (its config rebuilds the model)\n"
    "      --vocab PATH      vocabulary JSON [vocab.json beside CKPT, else the config's\n"
    "                        data.vocab]\n"
    "      --device DEV      cpu, cuda or cuda:N: where the model encodes (VSE models of\n"
    "                        one vector per item) [cpu]\n"
    "      --threads N       OpenMP and BLAS threads [their defaults]\n"
    "\n"
    "Output (one of):\n"
    "  -o, --output FILE     embedding records to FILE [stdout]\n"
    "      --out-dir DIR     DIR/KEY.npy and DIR/KEY.json per item\n"
    "      --index DIR       add the (visual) embeddings to the embedding index DIR\n"
    "                        (docs/index.md; created when absent, an item already there\n"
    "                        is replaced), which records the model for vtr-search; an\n"
    "                        index made with another model is refused\n"
    "      --half            float16 embeddings [float32]\n"
    "The metadata of each item is the input's, with \"embedding\" added: model (the\n"
    "checkpoint's SHA-256), checkpoint, side (visual / text), dim, dtype, and rows (the\n"
    "input set's) or text.\n"
    "\n"
    "Sharding (docs/sharding.md; vtr-merge joins the parts):\n"
    "      --shard I/N       shard I of N (0 <= I < N) takes the contiguous share I of the\n"
    "                        items of each feature store and directory (in key order), and\n"
    "                        the records and texts at positions p with p % N == I\n"
    "                        (counted over all streamed inputs); under mpirun (without\n"
    "                        --shard) rank R of N is shard R of N. With N > 1 the output\n"
    "                        FILE or DIR becomes FILE.shard-I-of-N or DIR.shard-I-of-N;\n"
    "                        stdout is refused under mpirun\n"
    "\n"
    "Other:\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "An item the model cannot take (wrong shape or dtype, a non-finite value, invalid\n"
    "UTF-8) or cannot be written (a key written before, from another input: the output\n"
    "takes each key once) is reported on stderr in one line naming its key; the other\n"
    "items still finish.\n"
    "Exit status: 0 every item done; 2 some items (or an input) failed, the others were\n"
    "written; 1 bad usage, an unusable model, or the output could not be written.\n";

typedef struct run {
    vtr_embedder *e;
    vtr_aggregator *agg;
    vtr_item_output *out;
    bool text;
    const vtr_shard *shard;
    int64_t position;     /* of the next streamed item (record or text), over all inputs */
    json_t *embedding;    /* the "embedding" metadata common to every item */
    size_t failed;
    vtr_progress progress;
} run;

/* The aggregator's emit: one item out. Non-OK only when the output is broken. */
static vtr_status emit(void *ctx, const char *key, json_t *meta, const float *embedding,
                       vtr_error *err)
{
    run *r = ctx;
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {1, vtr_embedder_dim(r->e)},
                    .data = (void *)embedding};
    json_t *em = json_object_get(meta, "embedding");
    if (json_object_update(em, r->embedding) != 0)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_error e;
    if (vtr_item_output_write(r->out, key, &t, meta, &e) != VTR_OK) {
        if (vtr_item_output_broken(r->out)) {
            *err = e;
            return e.status;
        }
        vtr_log_item_error(key, &e); /* refused; the others go on */
        r->failed++;
        return VTR_OK;
    }
    vtr_progress_step(&r->progress, 1);
    return VTR_OK;
}

/* meta (a new reference, or NULL for {}) with "embedding": {what} added for this item. */
static json_t *item_meta(json_t *meta, json_t *what)
{
    json_t *m = meta ? json_deep_copy(meta) : json_object();
    if (!m || !what || json_object_set_new(m, "embedding", what) != 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* Adds one set; item errors are logged and counted. Returns non-OK when the output or
 * the model broke (the run stops). */
static vtr_status add_set(run *r, const char *key, json_t *meta, const vtr_tensor *rows,
                          vtr_error *err)
{
    int64_t n = rows->ndim == 2 ? rows->shape[0] : 1;
    json_t *m = item_meta(meta, json_pack("{s:I}", "rows", (json_int_t)n));
    if (!m)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_error e;
    if (vtr_embedder_check_set(r->e, rows, &e) != VTR_OK) {
        json_decref(m);
        vtr_log_item_error(key, &e); /* refused: the others go on */
        r->failed++;
        return VTR_OK;
    }
    vtr_status st = vtr_aggregator_add_set(r->agg, key, m, rows, err);
    json_decref(m);
    return st;
}

static vtr_status add_text(run *r, const char *key, const char *text, vtr_error *err)
{
    json_t *m = item_meta(NULL, json_pack("{s:s}", "text", text));
    if (!m)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_error e;
    vtr_status st = vtr_embedder_check_text(r->e, text, NULL, NULL, &e);
    if (st != VTR_OK) {
        json_decref(m);
        vtr_log_item_error(key, &e);
        r->failed++;
        return VTR_OK;
    }
    st = vtr_aggregator_add_text(r->agg, key, m, text, err);
    json_decref(m);
    return st;
}

/* A record stream. Returns non-OK when the run must stop; stream errors are item errors. */
static vtr_status read_records(run *r, FILE *in, const char *name, vtr_error *err)
{
    vtr_record_reader *reader = vtr_record_reader_new(in, name);
    if (!reader)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = VTR_OK;
    for (;;) {
        vtr_record rec;
        bool got;
        vtr_error e;
        if (vtr_record_read(reader, &rec, &got, &e) != VTR_OK) {
            vtr_log_item_error(NULL, &e);
            r->failed++;
            break;
        }
        if (!got)
            break;
        if (vtr_shard_takes(r->shard, r->position++) &&
            (st = add_set(r, rec.key, rec.meta, &rec.array, err)) != VTR_OK)
            break;
    }
    vtr_record_reader_free(reader);
    return st;
}

static vtr_status read_store(run *r, const char *dir, vtr_error *err)
{
    vtr_feature_store_reader *store = NULL;
    vtr_error e;
    if (vtr_feature_store_reader_open(dir, &store, &e) != VTR_OK) {
        vtr_log_item_error(NULL, &e);
        r->failed++;
        return VTR_OK;
    }
    json_t *meta = json_pack("{s:s}", "store", dir);
    vtr_status st = meta ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    int64_t first, count;
    vtr_shard_range(r->shard, vtr_feature_store_reader_items(store), &first, &count);
    for (int64_t i = first; st == VTR_OK && i < first + count; i++) {
        vtr_tensor rows;
        const char *key = vtr_feature_store_reader_key(store, i);
        if ((st = vtr_feature_store_reader_item(store, i, &rows, err)) == VTR_OK)
            st = add_set(r, key, meta, &rows, err);
    }
    json_decref(meta);
    vtr_feature_store_reader_close(store);
    return st;
}

static vtr_status read_npy_dir(run *r, const char *dir, vtr_error *err)
{
    static const char *const npy[] = {".npy"};
    vtr_keyed_files items = {0};
    vtr_error e;
    if (vtr_keyed_files_add_dir(&items, dir, npy, 1, &e) != VTR_OK) {
        vtr_log_item_error(NULL, &e);
        r->failed++;
        return VTR_OK;
    }
    if (items.n == 0) {
        vtr_fail(&e, VTR_ERR_NOT_FOUND, "%s: no feature store (meta.json) and no .npy file", dir);
        vtr_log_item_error(NULL, &e);
        r->failed++;
    }
    vtr_status st = VTR_OK;
    int64_t first, count;
    vtr_shard_range(r->shard, (int64_t)items.n, &first, &count);
    for (size_t i = (size_t)first; st == VTR_OK && i < (size_t)(first + count); i++) {
        vtr_npy_file f;
        json_t *meta;
        if (vtr_npy_item_load(items.v[i].path, &f, &meta, &e) != VTR_OK) {
            vtr_log_item_error(items.v[i].key, &e);
            r->failed++;
            continue;
        }
        st = add_set(r, items.v[i].key, meta, &f.tensor, err);
        json_decref(meta);
        vtr_npy_close(&f);
    }
    vtr_keyed_files_free(&items);
    return st;
}

/* One text input: lines -> texts keyed by *line (counted over all inputs). A line with a
 * NUL byte, or a read error, is reported and counted as failed. */
static vtr_status read_texts(run *r, FILE *in, const char *name, bool keyed, int64_t *line,
                             vtr_error *err)
{
    vtr_line_reader lines;
    vtr_line_reader_init(&lines, in, name);
    lines.line = *line;
    vtr_status st = VTR_OK;
    for (;;) {
        char *buf;
        vtr_error e;
        vtr_status got = vtr_line_next(&lines, &buf, NULL, &e);
        if (got == VTR_ERR_NOMEM) {
            st = vtr_fail(err, got, "%s", e.msg);
            break;
        }
        if (got != VTR_OK) { /* a NUL byte (reading goes on) or a read error (it stops) */
            vtr_log_item_error(NULL, &e);
            r->failed++;
            if (got == VTR_ERR_IO)
                break;
            continue;
        }
        if (!buf)
            break;
        char key[32];
        const char *text = buf, *k = key;
        if (keyed) {
            char *tab = strchr(buf, '\t');
            if (!tab || tab == buf) {
                vtr_fail(&e, VTR_ERR_FORMAT, "%s:%lld: no KEY<TAB>TEXT", name,
                         (long long)lines.line);
                vtr_log_item_error(NULL, &e);
                r->failed++;
                continue;
            }
            *tab = '\0';
            k = buf;
            text = tab + 1;
        } else {
            snprintf(key, sizeof key, "%lld", (long long)lines.line);
        }
        if (vtr_line_is_blank(text) || !vtr_shard_takes(r->shard, r->position++))
            continue;
        if ((st = add_text(r, k, text, err)) != VTR_OK)
            break;
    }
    *line = lines.line;
    vtr_line_reader_free(&lines);
    return st;
}

/* One named input (or "-"). */
static vtr_status read_input(run *r, const char *arg, bool keyed, int64_t *line, vtr_error *err)
{
    bool std_in = !strcmp(arg, "-");
    const char *name = std_in ? "stdin" : arg;
    struct stat sb;
    if (!std_in && !r->text && stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char *meta = vtr_path_join(arg, "meta.json");
        if (!meta)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        bool store = access(meta, F_OK) == 0;
        free(meta);
        return store ? read_store(r, arg, err) : read_npy_dir(r, arg, err);
    }
    FILE *in = std_in ? stdin : fopen(arg, r->text ? "r" : "rb");
    if (!in) {
        vtr_error e;
        vtr_fail_errno(&e, "%s", arg);
        vtr_log_item_error(NULL, &e);
        r->failed++;
        return VTR_OK;
    }
    vtr_status st = r->text ? read_texts(r, in, name, keyed, line, err)
                            : read_records(r, in, name, err);
    if (!std_in)
        fclose(in);
    return st;
}

int main(int argc, char **argv)
{
    enum { OPT_VOCAB = 256, OPT_THREADS, OPT_DEVICE, OPT_TEXT, OPT_KEYED, OPT_OUT_DIR,
           OPT_INDEX, OPT_HALF, OPT_SHARD, OPT_LOG_JSON, OPT_VERSION };
    static const struct option options[] = {
        {"model", required_argument, NULL, 'm'},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"text", no_argument, NULL, OPT_TEXT},
        {"keyed", no_argument, NULL, OPT_KEYED},
        {"output", required_argument, NULL, 'o'},
        {"out-dir", required_argument, NULL, OPT_OUT_DIR},
        {"index", required_argument, NULL, OPT_INDEX},
        {"half", no_argument, NULL, OPT_HALF},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL, *vocab = NULL, *output = NULL, *out_dir = NULL, *index = NULL;
    const char *shard_option = NULL;
    bool keyed = false, log_json = false, half = false;
    int threads = 0, opt, device_index = 0;
    vtr_device device = VTR_DEVICE_CPU;
    long long v;
    run r = {0};
    vtr_error err;
    vtr_error_clear(&err);
    while ((opt = getopt_long(argc, argv, "m:o:h", options, NULL)) != -1) {
        switch (opt) {
        case 'm': model = optarg; break;
        case OPT_VOCAB: vocab = optarg; break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-aggregate: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                return 1;
            }
            threads = (int)v;
            break;
        case OPT_DEVICE:
            if (vtr_device_parse(optarg, &device, &device_index, &err)) {
                fprintf(stderr, "vtr-aggregate: --device: %s\n", err.msg);
                return 1;
            }
            break;
        case OPT_TEXT: r.text = true; break;
        case OPT_KEYED: keyed = true; break;
        case 'o': output = optarg; break;
        case OPT_OUT_DIR: out_dir = optarg; break;
        case OPT_INDEX: index = optarg; break;
        case OPT_HALF: half = true; break;
        case OPT_SHARD: shard_option = optarg; break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-aggregate %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-aggregate --help'.\n", stderr); return 1;
        }
    }
    const char *usage_error = NULL;
    if (!model)
        usage_error = "--model CKPT is required";
    else if ((output != NULL) + (out_dir != NULL) + (index != NULL) > 1)
        usage_error = "--output, --out-dir and --index exclude each other";
    else if (index && r.text)
        usage_error = "--index takes visual embeddings, not --text";
    else if (keyed && !r.text)
        usage_error = "--keyed goes with --text";
    if (usage_error) {
        fprintf(stderr, "vtr-aggregate: %s (see --help)\n", usage_error);
        return 1;
    }
    /* the shard, and where it writes */
    vtr_dist dist;
    vtr_shard shard;
    char name[96], *shard_out = NULL;
    const char **named = index ? &index : out_dir ? &out_dir : &output;
    if (vtr_shard_start(shard_option, *named, &dist, &shard, &shard_out, &err) != VTR_OK) {
        fprintf(stderr, "vtr-aggregate: %s\n", err.msg);
        vtr_dist_finalize(&dist);
        return 1;
    }
    vtr_log_init(vtr_shard_program_name(&shard, "vtr-aggregate", name, sizeof name), log_json);
    *named = shard_out;
    r.shard = &shard;
    if (threads > 0) { /* the embedder's calls and everything else (the top-k search) */
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }

    int rc = 1;
    if (vtr_embedder_open(model, vocab, threads, &r.e, &err) != VTR_OK ||
        (device == VTR_DEVICE_CUDA &&
         (vtr_cuda_init(device_index, NULL, 0, &err) != VTR_OK ||
          vtr_embedder_use_device(r.e, device, &err) != VTR_OK)) ||
        vtr_aggregator_new(r.e, emit, &r, &r.agg, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    r.embedding = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s+}", "model",
                            vtr_embedder_model_id(r.e), "checkpoint", model, "side",
                            r.text ? "text" : "visual", "dim",
                            (json_int_t)vtr_embedder_dim(r.e), "dtype",
                            half ? "float16" : "float32", "version",
                            "vtr-aggregate ", vtr_version);
    if (!r.embedding) {
        fprintf(stderr, "vtr-aggregate: out of memory\n");
        goto end;
    }
    vtr_item_sink index_sink;
    vtr_item_output_options oo = {.path = output,
                                  .alternatives = "-o FILE, --out-dir DIR, --index DIR or a pipe",
                                  .dir = out_dir,
                                  .sink = index ? &index_sink : NULL,
                                  .half = half};
    if ((index &&
         vtr_embedding_index_output_open(index, r.e, model, &index_sink, &err) != VTR_OK) ||
        vtr_item_output_open(&oo, &r.out, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }

    vtr_progress_begin(&r.progress, "items", -1);
    int64_t line = 0;
    vtr_status st = VTR_OK;
    if (optind == argc)
        st = read_input(&r, "-", keyed, &line, &err);
    for (int i = optind; i < argc && st == VTR_OK; i++)
        st = read_input(&r, argv[i], keyed, &line, &err);
    if (st == VTR_OK)
        st = vtr_aggregator_flush(r.agg, &err);
    vtr_progress_end(&r.progress);
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    if (vtr_item_output_commit(r.out, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    rc = r.failed ? 2 : 0;
end:
    vtr_item_output_close(r.out); /* uncommitted items are dropped */
    vtr_aggregator_free(r.agg);
    vtr_embedder_close(r.e);
    json_decref(r.embedding);
    free(shard_out);
    vtr_dist_finalize(&dist);
    return rc;
}
