/* Fuzz target: the vocabulary readers (text/vocab.h) on arbitrary files. The input is a
 * multi-file input (fuzz_util.h): the bytes before the first "%%file " line are read as
 * a reference vocabulary JSON (VSE layout) and as HGR's word2int.json, and with an
 * "%%file int2word.npy" part as HGR's release pair. A failure must come with one line
 * (lib/error.h) starting with "vocab"; a vocabulary that loads must give every id a word
 * that maps back to it, survive a round trip (VSE: written and read again; HGR: made
 * again from its word list, as the catalog's copy is read), and encode its own words. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "text/vocab.h"

static void check_vocab(const vtr_vocab *v)
{
    int n = vtr_vocab_size(v);
    const char **words = malloc((size_t)(n > 0 ? n : 1) * sizeof *words);
    int *ids = malloc((size_t)(n + 2) * sizeof *ids);
    if (!words || !ids)
        abort();
    for (int i = 0; i < n; i++) {
        words[i] = vtr_vocab_word(v, i);
        if (!words[i] || vtr_vocab_id(v, words[i]) != i)
            abort();
    }
    if (vtr_vocab_word(v, n) || vtr_vocab_word(v, -1))
        abort();
    vtr_vocab_specials sp = vtr_vocab_special_ids(v);
    if (sp.unk < 0 || sp.unk >= n)
        abort();
    vtr_error err;
    size_t count = 0;
    bool wrap = sp.start >= 0 && sp.end >= 0;
    if (vtr_vocab_encode(v, words, (size_t)n, wrap, ids, &count, &err) != VTR_OK ||
        count != (size_t)n + (wrap ? 2 : 0))
        abort();
    for (int i = 0; i < n; i++)
        if (ids[i + wrap] != i)
            abort();

    vtr_vocab *again = NULL;
    vtr_status st;
    if (vtr_vocab_layout_of(v) == VTR_VOCAB_VSE) {
        char *path = fuzz_path("saved.json");
        st = vtr_vocab_save_json(v, path, &err);
        if (st == VTR_OK)
            st = vtr_vocab_load_json(path, &again, &err);
        free(path);
    } else {
        st = vtr_vocab_hgr_from_words(words, (size_t)n, "words", &again, &err);
    }
    if (st != VTR_OK || !vtr_vocab_same(v, again)) {
        fprintf(stderr, "round trip: %s\n", st != VTR_OK ? err.msg : "another vocabulary");
        abort();
    }
    vtr_vocab_free(again);
    free(words);
    free(ids);
}

static void load(vtr_status st, vtr_vocab *v, const vtr_error *err)
{
    if (st != VTR_OK) {
        fuzz_check_message(err, "vocab");
        if (v)
            abort();
        return;
    }
    check_vocab(v);
    vtr_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_scratch();
    fuzz_write_files(data, size, "word2int.json");
    char *json = fuzz_path("word2int.json"), *npy = fuzz_path("int2word.npy");
    vtr_error err;
    vtr_vocab *v = NULL;
    vtr_status st = vtr_vocab_load_json(json, &v, &err);
    load(st, v, &err);
    st = vtr_vocab_load_hgr(json, &v, &err);
    load(st, v, &err);
    if (fuzz_exists("int2word.npy")) {
        st = vtr_vocab_load_hgr_release(json, npy, &v, &err);
        load(st, v, &err);
    }
    free(json);
    free(npy);
    return 0;
}
