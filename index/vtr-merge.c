/* vtr-merge: the parts of a sharded run -> one feature store or embedding index. Argument
 * parsing and reporting only; the work is in index/shard_merge.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>

#include "index/shard_merge.h"
#include "lib/blas_kernel.h"
#include "lib/log.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-merge [OPTION]... OUT PART...\n"
    "Joins the parts that the shards of a run wrote (vtr-features --store,\n"
    "vtr-aggregate --index, vtr-index under --shard I/N or mpirun; docs/sharding.md) into\n"
    "OUT, what one process would have written:\n"
    "  feature stores        into one feature store: the parts' items one part after the\n"
    "                        other, rows bit for bit\n"
    "  embedding indexes     into one index: every live item with its embedding bytes and\n"
    "                        norms, and for vtr-index's indexes the catalog's items\n"
    "Parts named OUT.shard-I-of-N (as the programs name them) are joined in shard order and\n"
    "must all be there, each once; parts named otherwise in the order given. The parts\n"
    "must fit together: one kind; stores of the same dim, dtype, extractor and source;\n"
    "indexes of the same dimension and model; catalogs of the same archive; no key in two\n"
    "parts. OUT must not exist; it appears whole at the end or not at all.\n"
    "\n"
    "Example: vtr-merge ix ix.shard-*-of-4\n"
    "\n"
    "Options:\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "Exit status: 0 joined; 1 bad usage, parts that do not fit together (one line naming\n"
    "the part and the cause), or a part or OUT that could not be read or written.\n";

int main(int argc, char **argv)
{
    enum { OPT_LOG_JSON = 256, OPT_VERSION };
    static const struct option options[] = {
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    bool log_json = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-merge %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-merge --help'.\n", stderr); return 1;
        }
    }
    if (argc - optind < 2) {
        fputs("vtr-merge: name OUT and at least one PART (see --help)\n", stderr);
        return 1;
    }
    vtr_log_init("vtr-merge", log_json);
    const char *out = argv[optind];
    vtr_merge_stats s;
    vtr_error err;
    if (vtr_shard_merge(out, (const char *const *)argv + optind + 1, argc - optind - 1, &s,
                        &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }
    const char *kind = s.kind == VTR_MERGE_STORES ? "feature store" : "embedding index";
    vtr_log_info("%s %s: %lld items, %lld rows from %d parts%s", kind, out, (long long)s.items,
                 (long long)s.rows, s.parts, s.catalog ? ", with their catalogs" : "");
    json_t *ev = json_pack("{s:s, s:s, s:I, s:I, s:i, s:b}", "out", out, "kind",
                           s.kind == VTR_MERGE_STORES ? "store" : "index", "items",
                           (json_int_t)s.items, "rows", (json_int_t)s.rows, "parts", s.parts,
                           "catalog", s.catalog);
    vtr_log_event("merged", ev);
    json_decref(ev);
    return 0;
}
