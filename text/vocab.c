/* Vocabularies: a string table whose entry numbers are the word ids. */
#include "vocab.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"
#include "lib/npy.h"
#include "lib/string_table.h"

struct vtr_vocab {
    vtr_string_table *words; /* entry i is the word with id i */
    vtr_vocab_layout layout;
    vtr_vocab_specials specials;
};

struct vtr_vocab_counter {
    vtr_string_table *words; /* in first-seen order */
    int64_t *counts;
    int64_t cap;
};

/* The VSE special tokens in id order. */
static const char *const vse_specials[] = {VTR_VOCAB_PAD, VTR_VOCAB_START, VTR_VOCAB_END,
                                           VTR_VOCAB_UNK};
#define N_VSE_SPECIALS 4

/* HGR's special tokens in id order, as its release names them (word2int.json), and their
 * ids: no pad (HGR pads with EOS), start BOS, end EOS, unk UNK, no mask. */
static const char *const hgr_specials[] = {"<BOS>", "<EOS>", "<UNK>"};
#define N_HGR_SPECIALS 3
static const vtr_vocab_specials hgr_special_ids = {-1, 0, 1, 2, -1};

/* ---- reading ---- */

int vtr_vocab_size(const vtr_vocab *vocab)
{
    return (int)vtr_string_table_count(vocab->words);
}

const char *vtr_vocab_word(const vtr_vocab *vocab, int id)
{
    if (id < 0 || id >= vtr_vocab_size(vocab))
        return NULL;
    return vtr_string_table_key(vocab->words, id, NULL);
}

int vtr_vocab_id(const vtr_vocab *vocab, const char *word)
{
    return (int)vtr_string_table_find(vocab->words, word, strlen(word));
}

bool vtr_vocab_same(const vtr_vocab *a, const vtr_vocab *b)
{
    int n = vtr_vocab_size(a);
    if (n != vtr_vocab_size(b) || a->layout != b->layout)
        return false;
    for (int id = 0; id < n; id++)
        if (strcmp(vtr_vocab_word(a, id), vtr_vocab_word(b, id)) != 0)
            return false;
    return true;
}

vtr_vocab_layout vtr_vocab_layout_of(const vtr_vocab *vocab)
{
    return vocab->layout;
}

vtr_vocab_specials vtr_vocab_special_ids(const vtr_vocab *vocab)
{
    return vocab->specials;
}

vtr_status vtr_vocab_encode(const vtr_vocab *vocab, const char *const *tokens, size_t n,
                            bool wrap, int *ids, size_t *count, vtr_error *err)
{
    *count = 0;
    const vtr_vocab_specials *sp = &vocab->specials;
    if (wrap && (sp->start < 0 || sp->end < 0))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "vocabulary has no start and end tokens to wrap a caption in");
    size_t k = 0;
    if (wrap)
        ids[k++] = sp->start;
    for (size_t i = 0; i < n; i++) {
        int id = vtr_vocab_id(vocab, tokens[i]);
        ids[k++] = id >= 0 ? id : sp->unk;
    }
    if (wrap)
        ids[k++] = sp->end;
    *count = k;
    return VTR_OK;
}

void vtr_vocab_free(vtr_vocab *vocab)
{
    if (!vocab)
        return;
    vtr_string_table_free(vocab->words);
    free(vocab);
}

static vtr_vocab *vocab_new(vtr_vocab_layout layout)
{
    vtr_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->words = vtr_string_table_new();
    if (!v->words) {
        free(v);
        return NULL;
    }
    v->layout = layout;
    v->specials = (vtr_vocab_specials){-1, -1, -1, -1, -1};
    return v;
}

/* Appends word (must be new) and returns its id through *id. */
static vtr_status add_word(vtr_vocab *v, const char *word, size_t len, int *id, bool *added,
                           vtr_error *err)
{
    if (vtr_string_table_count(v->words) >= INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "vocabulary of more than %d words", INT_MAX);
    int64_t index;
    vtr_status st = vtr_string_table_insert(v->words, word, len, &index, added, err);
    if (st == VTR_OK && id)
        *id = (int)index;
    return st;
}

/* ---- building ---- */

vtr_vocab_counter *vtr_vocab_counter_new(void)
{
    vtr_vocab_counter *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->words = vtr_string_table_new();
    if (!c->words) {
        free(c);
        return NULL;
    }
    return c;
}

void vtr_vocab_counter_free(vtr_vocab_counter *counter)
{
    if (!counter)
        return;
    vtr_string_table_free(counter->words);
    free(counter->counts);
    free(counter);
}

vtr_status vtr_vocab_counter_add(vtr_vocab_counter *counter, const char *const *tokens,
                                 size_t n, vtr_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int64_t index;
        vtr_status st = vtr_string_table_insert(counter->words, tokens[i], strlen(tokens[i]),
                                                &index, NULL, err);
        if (st != VTR_OK)
            return st;
        if (index >= counter->cap) {
            int64_t cap = counter->cap ? counter->cap * 2 : 1024;
            int64_t *counts = realloc(counter->counts, (size_t)cap * sizeof *counts);
            if (!counts)
                return vtr_fail(err, VTR_ERR_NOMEM, "vocabulary counter: out of memory");
            memset(counts + counter->cap, 0, (size_t)(cap - counter->cap) * sizeof *counts);
            counter->counts = counts;
            counter->cap = cap;
        }
        counter->counts[index]++;
    }
    return VTR_OK;
}

int64_t vtr_vocab_counter_count(const vtr_vocab_counter *counter, const char *word)
{
    int64_t index = vtr_string_table_find(counter->words, word, strlen(word));
    return index < 0 ? 0 : counter->counts[index];
}

int64_t vtr_vocab_counter_distinct(const vtr_vocab_counter *counter)
{
    return vtr_string_table_count(counter->words);
}

/* qsort context for VTR_VOCAB_BY_COUNT (qsort has none). */
typedef struct ranked {
    int64_t count;
    const char *word;
    size_t len;
} ranked;

static int by_count(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->word, b->word, m);
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

vtr_status vtr_vocab_build(const vtr_vocab_counter *counter, int64_t threshold,
                           vtr_vocab_order order, vtr_vocab_layout layout, vtr_vocab **out,
                           vtr_error *err)
{
    *out = NULL;
    if (threshold < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "vocabulary threshold %lld (must be >= 1)",
                        (long long)threshold);
    if (order != VTR_VOCAB_FIRST_SEEN && order != VTR_VOCAB_BY_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID, "unknown vocabulary order %d", (int)order);
    if (layout != VTR_VOCAB_VSE && layout != VTR_VOCAB_HGR)
        return vtr_fail(err, VTR_ERR_INVALID, "unknown vocabulary layout %d", (int)layout);
    bool vse = layout == VTR_VOCAB_VSE;
    const char *const *specials = vse ? vse_specials : hgr_specials;
    int n_specials = vse ? N_VSE_SPECIALS : N_HGR_SPECIALS;
    vtr_status st = VTR_OK;
    ranked *kept = NULL;
    vtr_vocab *v = vocab_new(layout);
    if (!v) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "vocabulary: out of memory");
        goto end;
    }
    for (int i = 0; i < n_specials && st == VTR_OK; i++)
        st = add_word(v, specials[i], strlen(specials[i]), NULL, NULL, err);
    if (st != VTR_OK)
        goto end;
    v->specials = vse ? (vtr_vocab_specials){0, 1, 2, 3, -1} : hgr_special_ids;

    int64_t distinct = vtr_string_table_count(counter->words), n = 0;
    kept = malloc((size_t)(distinct ? distinct : 1) * sizeof *kept);
    if (!kept) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "vocabulary: out of memory");
        goto end;
    }
    for (int64_t i = 0; i < distinct; i++) {
        if (counter->counts[i] < threshold)
            continue;
        kept[n].count = counter->counts[i];
        kept[n].word = vtr_string_table_key(counter->words, i, &kept[n].len);
        n++;
    }
    if (order == VTR_VOCAB_BY_COUNT)
        qsort(kept, (size_t)n, sizeof *kept, by_count);
    for (int64_t i = 0; i < n && st == VTR_OK; i++)
        if (!vse || strcmp(kept[i].word, VTR_VOCAB_MASK) != 0) /* <mask> stays the last id */
            st = add_word(v, kept[i].word, kept[i].len, NULL, NULL, err);
    if (st == VTR_OK && vse)
        st = add_word(v, VTR_VOCAB_MASK, strlen(VTR_VOCAB_MASK), &v->specials.mask, NULL, err);
end:
    free(kept);
    if (st != VTR_OK)
        vtr_vocab_free(v);
    else
        *out = v;
    return st;
}

/* ---- files ---- */

/* Loads a JSON file, rejecting duplicate keys. */
static vtr_status load_json(const char *path, json_t **root, vtr_error *err)
{
    json_error_t jerr;
    *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (*root)
        return VTR_OK;
    if (json_error_code(&jerr) == json_error_cannot_open_file)
        return vtr_fail(err, VTR_ERR_IO, "vocab %s: %s", path, jerr.text);
    return vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: line %d: %s", path, jerr.line, jerr.text);
}

/* A JSON integer that fits an id. */
static bool json_id(const json_t *j, int64_t limit, int64_t *id)
{
    if (!json_is_integer(j))
        return false;
    *id = json_integer_value(j);
    return *id >= 0 && *id < limit;
}

vtr_status vtr_vocab_load_json(const char *path, vtr_vocab **out, vtr_error *err)
{
    *out = NULL;
    json_t *root = NULL;
    vtr_vocab *v = NULL;
    char shown[128];
    vtr_status st = load_json(path, &root, err);
    if (st != VTR_OK)
        return st;
    json_t *w2i = json_object_get(root, "word2idx");
    json_t *i2w = json_object_get(root, "idx2word");
    json_t *idx = json_object_get(root, "idx");
    if (!json_is_object(root) || !json_is_object(w2i) || !json_is_object(i2w) ||
        !json_is_integer(idx)) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "vocab %s: not a vocabulary (expected an object with \"word2idx\" and "
                      "\"idx2word\" objects and an integer \"idx\")",
                      path);
        goto end;
    }
    int64_t n = json_integer_value(idx);
    if (n < N_VSE_SPECIALS || n >= INT_MAX) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: \"idx\" is %lld", path, (long long)n);
        goto end;
    }
    if ((int64_t)json_object_size(i2w) != n || (int64_t)json_object_size(w2i) != n) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "vocab %s: \"idx\" is %lld but idx2word has %zu entries and word2idx %zu",
                      path, (long long)n, json_object_size(i2w), json_object_size(w2i));
        goto end;
    }
    v = vocab_new(VTR_VOCAB_VSE);
    if (!v) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "vocab %s: out of memory", path);
        goto end;
    }
    /* idx2word in id order: each of "0" .. "n-1" once (the sizes match, so no others) */
    for (int64_t id = 0; id < n; id++) {
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)id);
        json_t *word = json_object_get(i2w, key);
        if (!word) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: idx2word lacks id %lld", path,
                          (long long)id);
            goto end;
        }
        if (!json_is_string(word)) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: idx2word[\"%s\"] is not a string",
                          path, key);
            goto end;
        }
        bool added;
        st = add_word(v, json_string_value(word), json_string_length(word), NULL, &added, err);
        if (st != VTR_OK)
            goto end;
        if (!added) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: idx2word has \"%s\" twice", path,
                          vtr_printable(json_string_value(word), json_string_length(word),
                                        shown, sizeof shown));
            goto end;
        }
    }
    /* word2idx must be the inverse */
    const char *word;
    size_t word_len;
    json_t *value;
    void *tmp;
    json_object_keylen_foreach_safe(w2i, tmp, word, word_len, value)
    {
        int64_t id;
        vtr_printable(word, word_len, shown, sizeof shown);
        if (!json_id(value, n, &id)) {
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "vocab %s: word2idx[\"%s\"] is not an id in [0, %lld)", path, shown,
                          (long long)n);
            goto end;
        }
        int64_t have = vtr_string_table_find(v->words, word, word_len);
        if (have != id) {
            char other[128];
            const char *at_id = vtr_string_table_key(v->words, id, NULL);
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "vocab %s: word2idx[\"%s\"] = %lld but idx2word[\"%lld\"] = \"%s\"",
                          path, shown, (long long)id, (long long)id,
                          vtr_printable(at_id, strlen(at_id), other, sizeof other));
            goto end;
        }
    }
    for (int i = 0; i < N_VSE_SPECIALS; i++) {
        int id = vtr_vocab_id(v, vse_specials[i]);
        if (id != i) {
            if (id < 0)
                st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: lacks %s (id %d)", path,
                              vse_specials[i], i);
            else
                st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: %s has id %d, expected %d",
                              path, vse_specials[i], id, i);
            goto end;
        }
    }
    v->specials = (vtr_vocab_specials){0, 1, 2, 3, vtr_vocab_id(v, VTR_VOCAB_MASK)};
    if (v->specials.mask >= 0 && v->specials.mask != n - 1) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: <mask> has id %d, not the last id %lld",
                      path, v->specials.mask, (long long)(n - 1));
        goto end;
    }
    if (v->specials.mask < 0)
        st = add_word(v, VTR_VOCAB_MASK, strlen(VTR_VOCAB_MASK), &v->specials.mask, NULL, err);
end:
    json_decref(root);
    if (st != VTR_OK)
        vtr_vocab_free(v);
    else
        *out = v;
    return st;
}

vtr_status vtr_vocab_save_json(const vtr_vocab *vocab, const char *path, vtr_error *err)
{
    if (vocab->layout != VTR_VOCAB_VSE)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "vocab %s: only VSE vocabularies have the reference JSON layout", path);
    int n = vtr_vocab_size(vocab);
    if (vocab->specials.mask == n - 1)
        n--; /* the reference code appends <mask> itself */
    vtr_status st = VTR_OK;
    vtr_atomic_file file = {0};
    json_t *root = json_object(), *w2i = json_object(), *i2w = json_object();
    if (!root || !w2i || !i2w || json_object_set(root, "word2idx", w2i) ||
        json_object_set(root, "idx2word", i2w) ||
        json_object_set_new(root, "idx", json_integer(n))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "vocab %s: out of memory", path);
        goto end;
    }
    for (int id = 0; id < n; id++) {
        size_t len;
        const char *word = vtr_string_table_key(vocab->words, id, &len);
        char key[16];
        snprintf(key, sizeof key, "%d", id);
        json_t *s = json_stringn(word, len);
        if (!s) {
            char shown[128];
            st = vtr_fail(err, VTR_ERR_INVALID, "vocab %s: word %d \"%s\" is not valid UTF-8",
                          path, id, vtr_printable(word, len, shown, sizeof shown));
            goto end;
        }
        if (json_object_setn_new(w2i, word, len, json_integer(id)) ||
            json_object_set_new(i2w, key, s)) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "vocab %s: out of memory", path);
            goto end;
        }
    }
    if ((st = vtr_atomic_open(&file, path, err)) != VTR_OK)
        goto end;
    if (json_dumpf(root, file.fp, JSON_ENSURE_ASCII) != 0) {
        st = vtr_fail_errno(err, "vocab %s: write", path);
        vtr_atomic_abort(&file);
        goto end;
    }
    st = vtr_atomic_commit(&file, err);
end:
    json_decref(w2i);
    json_decref(i2w);
    json_decref(root);
    return st;
}

/* HGR's reader takes BOS, EOS, UNK as word2int.get('<BOS>', 0), ('<EOS>', 1), ('<UNK>', 2);
 * vtr fixes them at 0, 1, 2. The two agree unless a file names one at another id. */
static vtr_status check_hgr_specials(const vtr_vocab *v, const char *source, vtr_error *err)
{
    for (int want = 0; want < N_HGR_SPECIALS; want++) {
        int id = vtr_vocab_id(v, hgr_specials[want]);
        if (id >= 0 && id != want)
            return vtr_fail(err, VTR_ERR_FORMAT,
                            "vocab %s: \"%s\" has id %d, but HGR's ids are BOS/EOS/UNK = "
                            "0/1/2 (its reader would take %d)",
                            source, hgr_specials[want], id, id);
    }
    return VTR_OK;
}

vtr_status vtr_vocab_load_hgr(const char *word2int_path, vtr_vocab **out, vtr_error *err)
{
    const char *path = word2int_path;
    *out = NULL;
    json_t *root = NULL;
    vtr_vocab *v = NULL;
    const char **by_id = NULL;
    size_t *lens = NULL;
    char shown[128];
    vtr_status st = load_json(path, &root, err);
    if (st != VTR_OK)
        return st;
    if (!json_is_object(root)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: not an object {word: id}", path);
        goto end;
    }
    int64_t n = (int64_t)json_object_size(root);
    if (n < 3 || n >= INT_MAX) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "vocab %s: %lld words (expected BOS, EOS, UNK and the words)", path,
                      (long long)n);
        goto end;
    }
    by_id = calloc((size_t)n, sizeof *by_id);
    lens = calloc((size_t)n, sizeof *lens);
    v = vocab_new(VTR_VOCAB_HGR);
    if (!by_id || !lens || !v) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "vocab %s: out of memory", path);
        goto end;
    }
    const char *word;
    size_t word_len;
    json_t *value;
    void *tmp;
    json_object_keylen_foreach_safe(root, tmp, word, word_len, value)
    {
        int64_t id;
        vtr_printable(word, word_len, shown, sizeof shown);
        if (!json_id(value, n, &id)) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: \"%s\" has no id in [0, %lld)", path,
                          shown, (long long)n);
            goto end;
        }
        if (word_len == 0) { /* as vtr_vocab_hgr_from_words, which reads the catalog's copy */
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: an empty word has id %lld", path,
                          (long long)id);
            goto end;
        }
        if (by_id[id]) {
            char other[128];
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: \"%s\" and \"%s\" both have id %lld",
                          path, vtr_printable(by_id[id], lens[id], other, sizeof other), shown,
                          (long long)id);
            goto end;
        }
        by_id[id] = word;
        lens[id] = word_len;
    }
    /* n distinct ids in [0, n): every id is taken */
    for (int64_t id = 0; id < n && st == VTR_OK; id++)
        st = add_word(v, by_id[id], lens[id], NULL, NULL, err);
    if (st != VTR_OK)
        goto end;
    v->specials = hgr_special_ids;
    st = check_hgr_specials(v, path, err);
end:
    free(by_id);
    free(lens);
    json_decref(root);
    if (st != VTR_OK)
        vtr_vocab_free(v);
    else
        *out = v;
    return st;
}

vtr_status vtr_vocab_hgr_from_words(const char *const *words, size_t n, const char *source,
                                    vtr_vocab **out, vtr_error *err)
{
    *out = NULL;
    if (n < 3 || n >= INT_MAX)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "vocab %s: %zu words (expected BOS, EOS, UNK and the words)", source, n);
    vtr_vocab *v = vocab_new(VTR_VOCAB_HGR);
    if (!v)
        return vtr_fail(err, VTR_ERR_NOMEM, "vocab %s: out of memory", source);
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < n && st == VTR_OK; i++) {
        char shown[128];
        size_t len = words[i] ? strlen(words[i]) : 0;
        int id = -1;
        bool added = false;
        if (len == 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: word %zu is empty", source, i);
            break;
        }
        if ((st = add_word(v, words[i], len, &id, &added, err)) != VTR_OK)
            break;
        if (!added)
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: \"%s\" is both word %d and word %zu",
                          source, vtr_printable(words[i], len, shown, sizeof shown), id, i);
    }
    v->specials = hgr_special_ids;
    if (st == VTR_OK)
        st = check_hgr_specials(v, source, err);
    if (st != VTR_OK) {
        vtr_vocab_free(v);
        return st;
    }
    *out = v;
    return VTR_OK;
}

vtr_status vtr_vocab_load_hgr_release(const char *word2int_path, const char *int2word_path,
                                      vtr_vocab **out, vtr_error *err)
{
    *out = NULL;
    vtr_vocab *v = NULL;
    vtr_npy_strings words = {0};
    vtr_status st = vtr_vocab_load_hgr(word2int_path, &v, err);
    if (st == VTR_OK && (st = vtr_npy_load_strings(int2word_path, &words, err)) != VTR_OK)
        vtr_error_context(err, "vocab");
    if (st != VTR_OK)
        goto end;
    if (words.n != (size_t)vtr_vocab_size(v)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: %zu words, but %s has %d", int2word_path,
                      words.n, word2int_path, vtr_vocab_size(v));
        goto end;
    }
    for (size_t id = 0; id < words.n; id++) {
        const char *w = vtr_vocab_word(v, (int)id);
        if (strcmp(w, words.items[id]) != 0) {
            char a[128], b[128];
            st = vtr_fail(err, VTR_ERR_FORMAT, "vocab %s: id %zu is \"%s\", but \"%s\" in %s",
                          int2word_path, id,
                          vtr_printable(words.items[id], strlen(words.items[id]), a, sizeof a),
                          vtr_printable(w, strlen(w), b, sizeof b), word2int_path);
            goto end;
        }
    }
end:
    vtr_npy_strings_free(&words);
    if (st != VTR_OK)
        vtr_vocab_free(v);
    else
        *out = v;
    return st;
}
