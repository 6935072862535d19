/* Fuzz target: the GloVe text reader (text/word_vectors.h) on an arbitrary file, with a
 * small HGR vocabulary and D = 3, once checking the values of every line and once only
 * those of vocabulary words (the fast path). A failure must come with one line (lib/error.h)
 * starting with the path; on success every row a vocabulary word got is finite, the rows
 * of the others are untouched, and the stats add up. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "text/word_vectors.h"

#define DIM 3

static const char *const words[] = {"<BOS>", "<EOS>",    "<UNK>",       "the",
                                    "dog",   "at . . .", "caf\xc3\xa9", "runs"};
#define N_WORDS (sizeof words / sizeof words[0])

static vtr_vocab *vocab;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_error err;
    if (!vocab && vtr_vocab_hgr_from_words(words, N_WORDS, "fuzz", &vocab, &err) != VTR_OK) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    fuzz_scratch();
    fuzz_write_file("glove.txt", data, size);
    char *path = fuzz_path("glove.txt");
    for (int check_all = 0; check_all < 2; check_all++) {
        float rows[N_WORDS * DIM];
        for (size_t i = 0; i < N_WORDS * DIM; i++)
            rows[i] = NAN; /* what the reader writes is finite */
        vtr_glove_options opt = {.dim = DIM, .check_all = check_all};
        vtr_glove_stats stats;
        vtr_status st = vtr_glove_load(path, vocab, &opt, rows, &stats, &err);
        if (st != VTR_OK) {
            fuzz_check_message(&err, path);
            continue;
        }
        if (stats.hits < 0 || stats.hits > (int64_t)N_WORDS || stats.vectors > stats.lines ||
            stats.hits > stats.vectors)
            abort();
        int64_t touched = 0;
        for (size_t w = 0; w < N_WORDS; w++) {
            bool got = !isnan(rows[w * DIM]);
            touched += got;
            for (size_t d = 0; d < DIM; d++)
                if (got ? !isfinite(rows[w * DIM + d]) : !isnan(rows[w * DIM + d]))
                    abort();
        }
        if (touched > stats.hits)
            abort();
    }
    free(path);
    return 0;
}
