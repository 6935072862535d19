/* Vocabularies (build, ids, encode, reference JSON and HGR files) and the GloVe import. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "lib/npy.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "text/word_vectors.h"

#define PYTHON "/usr/bin/python3"
#define VOCAB_SCRIPT "tests/interop/vocab_check.py"

static void need_numpy(void)
{
    if (access(VOCAB_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " VOCAB_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

/* Counts the tokens of captions[0..n) into a new counter. */
static vtr_vocab_counter *count_captions(const char *const *captions, size_t n)
{
    vtr_error err;
    vtr_tokens t = {0};
    vtr_vocab_counter *c = vtr_vocab_counter_new();
    CHECK(c);
    for (size_t i = 0; i < n; i++) {
        CHECK_OK(vtr_tokenize(captions[i], VTR_TOKENIZE_WORDS, &t, &err));
        CHECK_OK(vtr_vocab_counter_add(c, t.tokens, t.n, &err));
    }
    vtr_tokens_free(&t);
    return c;
}

static const char *const captions[] = {
    "A dog runs on the grass.",       /* a dog runs on the grass . */
    "The dog is running.",            /* the dog is running . */
    "A cat sleeps.",                  /* a cat sleeps . */
    "A dog and a cat play.",          /* a dog and a cat play . */
    "The cat doesn't run; it sleeps.", /* the cat does n't run ; it sleeps . */
};

TEST(vocab_build_threshold_first_seen)
{
    vtr_error err;
    vtr_vocab_counter *c = count_captions(captions, 5);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "a"), 4);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "dog"), 3);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "cat"), 3);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "."), 5);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "the"), 3);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "sleeps"), 2);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "n't"), 1);
    CHECK_EQ_INT(vtr_vocab_counter_count(c, "zebra"), 0);

    vtr_vocab *v;
    /* count >= 2, in first-seen order */
    CHECK_OK(vtr_vocab_build(c, 2, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err));
    static const char *const want[] = {"<pad>", "<start>", "<end>", "<unk>", "a", "dog",
                                       "the", ".", "cat", "sleeps", "<mask>"};
    CHECK_EQ_INT(vtr_vocab_size(v), 11);
    for (int i = 0; i < 11; i++) {
        CHECK_STR(vtr_vocab_word(v, i), want[i]);
        CHECK_EQ_INT(vtr_vocab_id(v, want[i]), i);
    }
    CHECK(vtr_vocab_word(v, 11) == NULL);
    CHECK(vtr_vocab_word(v, -1) == NULL);
    CHECK_EQ_INT(vtr_vocab_id(v, "runs"), -1);
    vtr_vocab_specials sp = vtr_vocab_special_ids(v);
    CHECK_EQ_INT(sp.pad, 0);
    CHECK_EQ_INT(sp.start, 1);
    CHECK_EQ_INT(sp.end, 2);
    CHECK_EQ_INT(sp.unk, 3);
    CHECK_EQ_INT(sp.mask, 10);
    CHECK_EQ_INT(vtr_vocab_layout_of(v), VTR_VOCAB_VSE);
    vtr_vocab_free(v);

    /* the reference threshold 4 keeps "a" and "." only */
    CHECK_OK(vtr_vocab_build(c, 4, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err));
    CHECK_EQ_INT(vtr_vocab_size(v), 7);
    CHECK_STR(vtr_vocab_word(v, 4), "a");
    CHECK_STR(vtr_vocab_word(v, 5), ".");
    CHECK_STR(vtr_vocab_word(v, 6), "<mask>");
    vtr_vocab_free(v);

    CHECK_FAILS(vtr_vocab_build(c, 0, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err),
                VTR_ERR_INVALID, "threshold 0");
    CHECK(v == NULL);
    vtr_vocab_counter_free(c);
}

TEST(vocab_build_by_count_ties_bytewise)
{
    vtr_error err;
    vtr_vocab_counter *c = count_captions(captions, 5);
    vtr_vocab *v;
    /* counts: . 5, a 4, cat 3, dog 3, the 3, sleeps 2 (ties byte-wise) */
    CHECK_OK(vtr_vocab_build(c, 2, VTR_VOCAB_BY_COUNT, VTR_VOCAB_VSE, &v, &err));
    static const char *const want[] = {".", "a", "cat", "dog", "the", "sleeps", "<mask>"};
    CHECK_EQ_INT(vtr_vocab_size(v), 11);
    for (int i = 0; i < 7; i++)
        CHECK_STR(vtr_vocab_word(v, 4 + i), want[i]);
    vtr_vocab_free(v);
    vtr_vocab_counter_free(c);

    /* a word that spells a special token of the layout is not added twice; in the VSE
     * layout <mask> stays last (HGR's specials are words there, and VSE's in HGR's) */
    c = vtr_vocab_counter_new();
    const char *toks[] = {"<unk>", "<mask>", "x", "<UNK>", "<BOS>", "<unk>"};
    CHECK_OK(vtr_vocab_counter_add(c, toks, 6, &err));
    /* the ids of toks[0 .. 4] and the size, per layout */
    static const struct {
        vtr_vocab_layout layout;
        int ids[5], size;
    } layouts[] = {{VTR_VOCAB_VSE, {3, 7, 4, 5, 6}, 8}, {VTR_VOCAB_HGR, {3, 4, 5, 2, 0}, 6}};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(vtr_vocab_build(c, 1, VTR_VOCAB_FIRST_SEEN, layouts[k].layout, &v, &err));
        CHECK_EQ_INT(vtr_vocab_size(v), layouts[k].size);
        for (int i = 0; i < 5; i++)
            CHECK_EQ_INT(vtr_vocab_id(v, toks[i]), layouts[k].ids[i]);
        vtr_vocab_free(v);
    }
    vtr_vocab_counter_free(c);
}

/* HGR's layout for a dataset without a released vocabulary (data.catalog_vocab ''): BOS,
 * EOS, UNK at 0, 1, 2, the words, no <mask>; the result reads back as HGR vocabularies
 * from files and the catalog do. */
TEST(vocab_build_hgr_layout)
{
    vtr_error err;
    vtr_vocab_counter *c = count_captions(captions, 5);
    vtr_vocab *v, *back;
    CHECK_OK(vtr_vocab_build(c, 2, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_HGR, &v, &err));
    static const char *const want[] = {"<BOS>", "<EOS>", "<UNK>", "a",     "dog",
                                       "the",   ".",     "cat",   "sleeps"};
    CHECK_EQ_INT(vtr_vocab_size(v), 9);
    for (int i = 0; i < 9; i++)
        CHECK_STR(vtr_vocab_word(v, i), want[i]);
    CHECK_EQ_INT(vtr_vocab_layout_of(v), VTR_VOCAB_HGR);
    vtr_vocab_specials sp = vtr_vocab_special_ids(v);
    CHECK(sp.pad == -1 && sp.start == 0 && sp.end == 1 && sp.unk == 2 && sp.mask == -1);
    /* HGR encodes the words alone; an unknown one is UNK */
    const char *toks[] = {"a", "zebra", "sleeps"};
    int ids[3];
    size_t n;
    CHECK_OK(vtr_vocab_encode(v, toks, 3, false, ids, &n, &err));
    CHECK(n == 3 && ids[0] == 3 && ids[1] == 2 && ids[2] == 8);
    CHECK_OK(vtr_vocab_hgr_from_words(want, 9, "want", &back, &err));
    CHECK(vtr_vocab_same(v, back));
    vtr_vocab_free(back);
    vtr_vocab_free(v);
    CHECK_FAILS(vtr_vocab_build(c, 1, VTR_VOCAB_FIRST_SEEN, (vtr_vocab_layout)7, &v, &err),
                VTR_ERR_INVALID, "unknown vocabulary layout 7");
    CHECK(v == NULL);
    vtr_vocab_counter_free(c);
}

TEST(vocab_encode_wraps_and_maps_unknown)
{
    vtr_error err;
    vtr_vocab_counter *c = count_captions(captions, 5);
    vtr_vocab *v;
    CHECK_OK(vtr_vocab_build(c, 2, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err));
    vtr_tokens t = {0};
    CHECK_OK(vtr_tokenize("The zebra and a dog.", VTR_TOKENIZE_WORDS, &t, &err));
    int ids[16];
    size_t n;
    CHECK_OK(vtr_vocab_encode(v, t.tokens, t.n, true, ids, &n, &err));
    static const int want[] = {1, 6, 3, 3, 4, 5, 7, 2}; /* <start> the <unk> <unk> a dog . <end> */
    CHECK_EQ_INT(n, 8);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(ids[i], want[i]);
    CHECK_OK(vtr_vocab_encode(v, t.tokens, t.n, false, ids, &n, &err));
    CHECK_EQ_INT(n, 6);
    CHECK_EQ_INT(ids[0], 6);
    CHECK_OK(vtr_vocab_encode(v, NULL, 0, true, ids, &n, &err));
    CHECK_EQ_INT(n, 2);
    vtr_tokens_free(&t);
    vtr_vocab_free(v);
    vtr_vocab_counter_free(c);
}

TEST(vocab_json_round_trip_python)
{
    need_numpy();
    vtr_error err;
    /* words with non-ASCII letters, in a fixed order */
    static const char *const words[] = {"a", "man", "caf\xC3\xA9", "na\xC3\xAFve", "\xE7\x8C\xAB",
                                        "dog"};
    vtr_vocab_counter *c = vtr_vocab_counter_new();
    CHECK_OK(vtr_vocab_counter_add(c, words, 6, &err));
    vtr_vocab *v, *back;
    CHECK_OK(vtr_vocab_build(c, 1, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err));
    const char *path = test_path("vocab.json");
    CHECK_OK(vtr_vocab_save_json(v, path, &err));

    /* Python reads it the reference's way */
    CHECK_EQ_INT(test_run(PYTHON " " VOCAB_SCRIPT " check-vse %s '<pad>' '<start>' '<end>' "
                          "'<unk>' a man caf\xC3\xA9 na\xC3\xAFve \xE7\x8C\xAB dog",
                          path),
                 0);
    /* and vtr reads it back with <mask> appended at the same id */
    CHECK_OK(vtr_vocab_load_json(path, &back, &err));
    CHECK_EQ_INT(vtr_vocab_size(back), vtr_vocab_size(v));
    for (int i = 0; i < vtr_vocab_size(v); i++)
        CHECK_STR(vtr_vocab_word(back, i), vtr_vocab_word(v, i));
    CHECK_EQ_INT(vtr_vocab_special_ids(back).mask, 10);
    vtr_vocab_free(back);

    /* a file Python's json.dump wrote (int keys become strings, \u escapes) */
    const char *py = test_path("vocab_py.json");
    CHECK_EQ_INT(test_run(PYTHON " " VOCAB_SCRIPT " write-vse %s", py), 0);
    CHECK_OK(vtr_vocab_load_json(py, &back, &err));
    CHECK_EQ_INT(vtr_vocab_size(back), 11);
    CHECK_EQ_INT(vtr_vocab_id(back, "caf\xC3\xA9"), 6);
    CHECK_EQ_INT(vtr_vocab_id(back, "\xE7\x8C\xAB"), 8);
    CHECK_EQ_INT(vtr_vocab_id(back, "<mask>"), 10);
    vtr_vocab_free(back);
    vtr_vocab_free(v);
    vtr_vocab_counter_free(c);
}

/* Writes text to a fresh file and expects vtr_vocab_load_json to refuse it. */
static void check_refused(const char *name, const char *text, vtr_status status,
                          const char *needle)
{
    vtr_error err;
    vtr_vocab *v = (vtr_vocab *)1;
    const char *path = test_path(name);
    test_write_text(path, text);
    CHECK_FAILS(vtr_vocab_load_json(path, &v, &err), status, needle);
    CHECK(v == NULL);
    CHECK(strstr(err.msg, path));
}

#define SPECIALS_W2I "\"<pad>\": 0, \"<start>\": 1, \"<end>\": 2, \"<unk>\": 3"
#define SPECIALS_I2W "\"0\": \"<pad>\", \"1\": \"<start>\", \"2\": \"<end>\", \"3\": \"<unk>\""

TEST(vocab_json_rejects_inconsistent_files)
{
    vtr_error err;
    vtr_vocab *v;
    CHECK_FAILS(vtr_vocab_load_json(test_path("missing.json"), &v, &err), VTR_ERR_IO,
                "missing.json");
    check_refused("bad1.json", "{\"word2idx\": {", VTR_ERR_FORMAT, "line 1");
    check_refused("bad2.json", "[1, 2]", VTR_ERR_FORMAT, "not a vocabulary");
    check_refused("bad3.json", "{\"word2idx\": {" SPECIALS_W2I "}, \"idx\": 4}", VTR_ERR_FORMAT,
                  "not a vocabulary");
    check_refused("bad4.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4}, \"idx2word\": {" SPECIALS_I2W
                  ", \"4\": \"x\"}, \"idx\": 6}",
                  VTR_ERR_FORMAT, "\"idx\" is 6 but idx2word has 5 entries");
    check_refused("bad5.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4}, \"idx2word\": {" SPECIALS_I2W
                  ", \"5\": \"x\"}, \"idx\": 5}",
                  VTR_ERR_FORMAT, "idx2word lacks id 4");
    check_refused("bad6.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4, \"y\": 5}, \"idx2word\": {"
                  SPECIALS_I2W ", \"4\": \"y\", \"5\": \"x\"}, \"idx\": 6}",
                  VTR_ERR_FORMAT, "word2idx[\"x\"] = 4 but idx2word[\"4\"] = \"y\"");
    check_refused("bad7.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4, \"y\": 5}, \"idx2word\": {"
                  SPECIALS_I2W ", \"4\": \"x\", \"5\": \"x\"}, \"idx\": 6}",
                  VTR_ERR_FORMAT, "idx2word has \"x\" twice");
    check_refused("bad8.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4.0}, \"idx2word\": {" SPECIALS_I2W
                  ", \"4\": \"x\"}, \"idx\": 5}",
                  VTR_ERR_FORMAT, "word2idx[\"x\"] is not an id in [0, 5)");
    check_refused("bad9.json",
                  "{\"word2idx\": {\"<start>\": 0, \"<pad>\": 1, \"<end>\": 2, \"<unk>\": 3}, "
                  "\"idx2word\": {\"0\": \"<start>\", \"1\": \"<pad>\", \"2\": \"<end>\", "
                  "\"3\": \"<unk>\"}, \"idx\": 4}",
                  VTR_ERR_FORMAT, "<pad> has id 1, expected 0");
    check_refused("bad10.json",
                  "{\"word2idx\": {\"<pad>\": 0, \"<start>\": 1, \"<end>\": 2, \"x\": 3}, "
                  "\"idx2word\": {\"0\": \"<pad>\", \"1\": \"<start>\", \"2\": \"<end>\", "
                  "\"3\": \"x\"}, \"idx\": 4}",
                  VTR_ERR_FORMAT, "lacks <unk> (id 3)");
    check_refused("bad11.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"<mask>\": 4, \"x\": 5}, \"idx2word\": {"
                  SPECIALS_I2W ", \"4\": \"<mask>\", \"5\": \"x\"}, \"idx\": 6}",
                  VTR_ERR_FORMAT, "<mask> has id 4, not the last id 5");
    check_refused("bad12.json",
                  "{\"word2idx\": {" SPECIALS_W2I ", \"x\": 4, \"x\": 4}, \"idx2word\": {"
                  SPECIALS_I2W ", \"4\": \"x\"}, \"idx\": 5}",
                  VTR_ERR_FORMAT, "duplicate object key");

    /* a file that already ends with <mask> is taken as it is */
    const char *path = test_path("with_mask.json");
    test_write_text(path, "{\"word2idx\": {" SPECIALS_W2I
                          ", \"x\": 4, \"<mask>\": 5}, \"idx2word\": {" SPECIALS_I2W
                          ", \"4\": \"x\", \"5\": \"<mask>\"}, \"idx\": 6}");
    CHECK_OK(vtr_vocab_load_json(path, &v, &err));
    CHECK_EQ_INT(vtr_vocab_size(v), 6);
    CHECK_EQ_INT(vtr_vocab_special_ids(v).mask, 5);
    vtr_vocab_free(v);
}

TEST(vocab_hgr_layout)
{
    need_numpy();
    vtr_error err;
    const char *dir = test_tmpdir();
    CHECK_EQ_INT(test_run(PYTHON " " VOCAB_SCRIPT " write-hgr %s", dir), 0);
    vtr_vocab *v;
    CHECK_OK(vtr_vocab_load_hgr(test_path("word2int.json"), &v, &err));
    CHECK_EQ_INT(vtr_vocab_size(v), 6);
    CHECK_EQ_INT(vtr_vocab_layout_of(v), VTR_VOCAB_HGR);
    CHECK_STR(vtr_vocab_word(v, 0), "<BOS>");
    CHECK_STR(vtr_vocab_word(v, 5), "caf\xC3\xA9");
    vtr_vocab_specials sp = vtr_vocab_special_ids(v);
    CHECK(sp.start == 0 && sp.end == 1 && sp.unk == 2 && sp.pad == -1 && sp.mask == -1);

    /* HGR encodes without BOS/EOS, unknown words as UNK = 2 */
    vtr_tokens t = {0};
    CHECK_OK(vtr_tokenize("a man eats caf\xC3\xA9", VTR_TOKENIZE_WHITESPACE, &t, &err));
    int ids[8];
    size_t n;
    CHECK_OK(vtr_vocab_encode(v, t.tokens, t.n, false, ids, &n, &err));
    CHECK_EQ_INT(n, 4);
    CHECK(ids[0] == 3 && ids[1] == 4 && ids[2] == 2 && ids[3] == 5);
    vtr_tokens_free(&t);
    CHECK_FAILS(vtr_vocab_save_json(v, test_path("hgr.json"), &err), VTR_ERR_INVALID,
                "only VSE");
    vtr_vocab_free(v);

    /* int2word.npy is a unicode array, which vtr's numeric NPY reader does not take (the
     * string-array reader does: vtr_vocab_load_hgr_release) */
    vtr_npy_file npy;
    CHECK_FAILS(vtr_npy_load(test_path("int2word.npy"), &npy, &err), VTR_ERR_UNSUPPORTED,
                "int2word.npy");

    const char *bad = test_path("bad_word2int.json");
    test_write_text(bad, "{\"<BOS>\": 0, \"<EOS>\": 1, \"<UNK>\": 2, \"a\": 2}");
    CHECK_FAILS(vtr_vocab_load_hgr(bad, &v, &err), VTR_ERR_FORMAT,
                "\"<UNK>\" and \"a\" both have id 2");
    test_write_text(bad, "{\"<BOS>\": 0, \"<EOS>\": 1, \"<UNK>\": 2, \"a\": 4}");
    CHECK_FAILS(vtr_vocab_load_hgr(bad, &v, &err), VTR_ERR_FORMAT, "\"a\" has no id in [0, 4)");
    test_write_text(bad, "{\"<BOS>\": 0}");
    CHECK_FAILS(vtr_vocab_load_hgr(bad, &v, &err), VTR_ERR_FORMAT, "1 words");
    test_write_text(bad, "[\"<BOS>\"]");
    CHECK_FAILS(vtr_vocab_load_hgr(bad, &v, &err), VTR_ERR_FORMAT, "not an object");
    /* refused as the catalog's copy would be (vtr_vocab_hgr_from_words; fuzz_vocab) */
    test_write_text(bad, "{\"<BOS>\": 0, \"<EOS>\": 1, \"<UNK>\": 2, \"\": 3}");
    CHECK_FAILS(vtr_vocab_load_hgr(bad, &v, &err), VTR_ERR_FORMAT, "an empty word has id 3");
}

/* Writes int2word.npy as HGR does: np.save of a list of str. */
static void write_int2word(const char *path, const char *words_py)
{
    CHECK_EQ_INT(test_run(PYTHON " -c 'import numpy as np; np.save(\"%s\", np.array(%s))'", path,
                          words_py),
                 0);
}

TEST(vocab_hgr_release_checks_that_word2int_and_int2word_agree)
{
    need_numpy();
    vtr_error err;
    CHECK_EQ_INT(test_run(PYTHON " " VOCAB_SCRIPT " write-hgr %s", test_tmpdir()), 0);
    const char *w2i = test_path("word2int.json"), *i2w = test_path("int2word.npy");
    vtr_vocab *v, *again;
    CHECK_OK(vtr_vocab_load_hgr_release(w2i, i2w, &v, &err));
    CHECK_EQ_INT(vtr_vocab_size(v), 6);
    CHECK_STR(vtr_vocab_word(v, 5), "caf\xC3\xA9");
    vtr_vocab_specials sp = vtr_vocab_special_ids(v);
    CHECK(sp.start == 0 && sp.end == 1 && sp.unk == 2);

    /* the word list the catalog keeps makes the same vocabulary */
    const char *words[6];
    for (int i = 0; i < 6; i++)
        words[i] = vtr_vocab_word(v, i);
    CHECK_OK(vtr_vocab_hgr_from_words(words, 6, "list", &again, &err));
    CHECK(vtr_vocab_same(v, again));
    vtr_vocab_free(again);

    /* mismatches */
    const char *bad = test_path("bad_int2word.npy");
    write_int2word(bad, "[\"<BOS>\", \"<EOS>\", \"<UNK>\", \"man\", \"a\", \"caf\\u00e9\"]");
    CHECK_FAILS(vtr_vocab_load_hgr_release(w2i, bad, &again, &err), VTR_ERR_FORMAT,
                "bad_int2word.npy: id 3 is \"man\", but \"a\" in");
    CHECK(again == NULL);
    write_int2word(bad, "[\"<BOS>\", \"<EOS>\", \"<UNK>\", \"a\", \"man\"]");
    CHECK_FAILS(vtr_vocab_load_hgr_release(w2i, bad, &again, &err), VTR_ERR_FORMAT,
                "bad_int2word.npy: 5 words, but");
    write_int2word(bad, "[1, 2, 3]");
    CHECK_FAILS(vtr_vocab_load_hgr_release(w2i, bad, &again, &err), VTR_ERR_UNSUPPORTED,
                "bad_int2word.npy");
    CHECK_FAILS(vtr_vocab_load_hgr_release(w2i, test_path("absent.npy"), &again, &err), VTR_ERR_IO,
                "absent.npy");
    /* a gap in word2int.json's ids */
    const char *bad_json = test_path("gap_word2int.json");
    test_write_text(bad_json, "{\"<BOS>\": 0, \"<EOS>\": 1, \"<UNK>\": 2, \"a\": 3, \"man\": 4, "
                              "\"caf\\u00e9\": 6}");
    CHECK_FAILS(vtr_vocab_load_hgr_release(bad_json, i2w, &again, &err), VTR_ERR_FORMAT,
                "\"caf\\xc3\\xa9\" has no id in [0, 6)");
    /* wrong specials: HGR's reader would take UNK = 3, vtr 2 */
    test_write_text(bad_json, "{\"<BOS>\": 0, \"<EOS>\": 1, \"x\": 2, \"<UNK>\": 3}");
    write_int2word(bad, "[\"<BOS>\", \"<EOS>\", \"x\", \"<UNK>\"]");
    CHECK_FAILS(vtr_vocab_load_hgr_release(bad_json, bad, &again, &err), VTR_ERR_FORMAT,
                "\"<UNK>\" has id 3, but HGR's ids are BOS/EOS/UNK = 0/1/2");
    const char *swapped[] = {"<EOS>", "<BOS>", "<UNK>"};
    CHECK_FAILS(vtr_vocab_hgr_from_words(swapped, 3, "list", &again, &err), VTR_ERR_FORMAT,
                "vocab list: \"<BOS>\" has id 1");
    /* other names at 0, 1, 2 are the specials, as for the reader */
    const char *plain[] = {"s", "e", "u", "a"};
    CHECK_OK(vtr_vocab_hgr_from_words(plain, 4, "list", &again, &err));
    vtr_vocab_free(again);
    const char *twice[] = {"<BOS>", "<EOS>", "<UNK>", "a", "a"};
    CHECK_FAILS(vtr_vocab_hgr_from_words(twice, 5, "list", &again, &err), VTR_ERR_FORMAT,
                "\"a\" is both word 3 and word 4");
    const char *empty[] = {"<BOS>", "<EOS>", "<UNK>", ""};
    CHECK_FAILS(vtr_vocab_hgr_from_words(empty, 4, "list", &again, &err), VTR_ERR_FORMAT,
                "word 3 is empty");
    CHECK_FAILS(vtr_vocab_hgr_from_words(empty, 2, "list", &again, &err), VTR_ERR_FORMAT,
                "2 words");
    vtr_vocab_free(v);
}

/* ---- GloVe ---- */

/* A VSE vocabulary: specials, the cat dog caf\u00e9 missing, <mask> (ids 0..9). */
static vtr_vocab *glove_vocab(void)
{
    vtr_error err;
    static const char *const words[] = {"the", "cat", "dog", "caf\xC3\xA9", "missing"};
    vtr_vocab_counter *c = vtr_vocab_counter_new();
    CHECK_OK(vtr_vocab_counter_add(c, words, 5, &err));
    vtr_vocab *v;
    CHECK_OK(vtr_vocab_build(c, 1, VTR_VOCAB_FIRST_SEEN, VTR_VOCAB_VSE, &v, &err));
    vtr_vocab_counter_free(c);
    return v;
}

static const float *row_of(const float *m, const vtr_vocab *v, const char *word)
{
    return m + (size_t)vtr_vocab_id(v, word) * 3;
}

/* A (10, 3) matrix of a marker value: the rows the import leaves alone keep it. */
static void fill_rows(float *m, float value)
{
    for (int i = 0; i < 30; i++)
        m[i] = value;
}

TEST(glove_import_fills_the_rows_of_known_words)
{
    vtr_error err;
    vtr_vocab *v = glove_vocab();
    const char *path = test_path("glove.txt");
    test_write_text(path, "the 0.1 0.2 0.3\n"
                          "zebra 1 2 3\n"
                          ". . . 0.5 0.5 0.5\n"  /* a word with spaces (glove.840B) */
                          "cat -1e-2 2.5 -3\r\n" /* CRLF */
                          "\n"
                          "caf\xC3\xA9 7 8 9  \n" /* trailing spaces */
                          "the 9 9 9\n"           /* a second "the": the first wins */
                          "dog 4 5 6");           /* no final newline */
    vtr_glove_options opt = {.dim = 3};
    float m[30];
    fill_rows(m, 42.0f);
    vtr_glove_stats stats;
    CHECK_OK(vtr_glove_load(path, v, &opt, m, &stats, &err));
    CHECK_EQ_INT(stats.lines, 8);
    CHECK_EQ_INT(stats.vectors, 7);
    CHECK_EQ_INT(stats.hits, 4);
    CHECK(row_of(m, v, "the")[0] == 0.1f && row_of(m, v, "the")[2] == 0.3f);
    CHECK(row_of(m, v, "cat")[0] == -0.01f && row_of(m, v, "cat")[2] == -3.0f);
    CHECK(row_of(m, v, "caf\xC3\xA9")[1] == 8.0f);
    CHECK(row_of(m, v, "dog")[2] == 6.0f);
    /* words without a vector keep their rows */
    for (int id = 0; id < 10; id++) {
        const char *w = vtr_vocab_word(v, id);
        if (strcmp(w, "the") == 0 || strcmp(w, "cat") == 0 || strcmp(w, "dog") == 0 ||
            strcmp(w, "caf\xC3\xA9") == 0)
            continue;
        for (int k = 0; k < 3; k++)
            CHECK(m[id * 3 + k] == 42.0f);
    }

    /* a word2vec-style header "COUNT DIM" is skipped */
    test_write_text(path, "2 3\nthe 1 2 3\ncat 4 5 6\n");
    CHECK_OK(vtr_glove_load(path, v, &opt, m, &stats, &err));
    CHECK_EQ_INT(stats.vectors, 2);
    CHECK(row_of(m, v, "cat")[0] == 4.0f);
    vtr_vocab_free(v);
}

TEST(glove_import_rejects_malformed_lines)
{
    vtr_error err;
    vtr_vocab *v = glove_vocab();
    const char *path = test_path("bad_glove.txt");
    vtr_glove_options opt = {.dim = 3};
    float m[30];

    test_write_text(path, "the 0.1 0.2 0.3\ncat 1 2\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "bad_glove.txt:2: 2 values, expected 3");
    test_write_text(path, "the 0.1 0.2 0.3\ncat 1 2 3 4\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "bad_glove.txt:2: 4 values, expected 3");
    test_write_text(path, "the 1 2 3 4 5\n"); /* a file of another dimension */
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "bad_glove.txt:1: 5 values, expected 3");
    test_write_text(path, "the 0.1 0.2 0.3\n\ncat 1 0.5x 3\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "bad_glove.txt:3: value 2 \"0.5x\" is not a number");
    test_write_text(path, "the 0.1 nan 0.3\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "value 2 \"nan\" is not a number");
    test_write_text(path, "the 0.1  0.3\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "value 2 \"\" is not a number");
    test_write_text(path, " 0.1 0.2 0.3\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT, ":1: empty word");
    test_write_text(path, "10 300\nthe 1 2 3\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                ":1: header says dimension 300, expected 3");
    test_write_text(path, "\n\n");
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "no word vectors");
    CHECK_FAILS(vtr_glove_load(test_path("absent.txt"), v, &opt, m, NULL, &err), VTR_ERR_IO,
                "absent.txt");
    opt.dim = 0;
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_INVALID, "dimension 0");

    /* values of words outside the vocabulary are checked only with check_all */
    test_write_text(path, "the 0.1 0.2 0.3\nzebra 1 x 3\n");
    opt.dim = 3;
    CHECK_OK(vtr_glove_load(path, v, &opt, m, NULL, &err));
    opt.check_all = true;
    CHECK_FAILS(vtr_glove_load(path, v, &opt, m, NULL, &err), VTR_ERR_FORMAT,
                "bad_glove.txt:2: value 2 \"x\" is not a number");
    vtr_vocab_free(v);
}
