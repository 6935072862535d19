/* Caption vocabularies: word <-> id, built from training captions or loaded from the
 * files the reference implementations release.
 *
 * Two layouts, after the two reference codes (REFERENCE.md):
 *   VTR_VOCAB_VSE  <pad>=0 <start>=1 <end>=2 <unk>=3, the words, then <mask> as the last
 *                  id (VSE∞ appends it after loading its vocabulary file). A caption is
 *                  encoded as <start> w1 ... wn <end>.
 *   VTR_VOCAB_HGR  BOS=0 EOS=1 UNK=2 (whatever the file calls them), then the words; no
 *                  pad or mask token (HGR pads with EOS). HGR encodes a caption as its
 *                  word ids only, without BOS/EOS.
 * Unknown words map to the unk id in both.
 *
 * Building: count the tokens of every training caption (vtr_vocab_counter_add), then keep
 * the words seen at least `threshold` times (the reference uses 4), after the layout's
 * special tokens (VTR_VOCAB_HGR: "<BOS>" "<EOS>" "<UNK>", the names of HGR's release, for a
 * dataset whose release has no vocabulary). Word ids follow one of two deterministic
 * orders:
 *   VTR_VOCAB_FIRST_SEEN  the order in which the words first occur in the captions. This
 *                         is what the reference's build_vocab produces (it iterates a
 *                         Python Counter, which keeps insertion order), so the same
 *                         captions in the same order give the reference's ids.
 *   VTR_VOCAB_BY_COUNT    most frequent first, ties broken by byte-wise comparison of
 *                         the words (shorter first when one is a prefix of the other).
 * A counted word that spells a special token ("<unk>", possible in pre-tokenized text) is
 * not added a second time, as the reference's add_word does; in the VSE layout "<mask>"
 * is not added before the end either, so that <mask> stays the last id.
 *
 * Files:
 *   the reference JSON (vocab.py serialize_vocab / deserialize_vocab):
 *     {"word2idx": {"<pad>": 0, ...}, "idx2word": {"0": "<pad>", ...}, "idx": N}
 *   without <mask>; loading appends it (as VSE∞ does) unless the file already ends with
 *   it. HGR's release: word2int.json ({word: id}) and int2word.npy (a numpy unicode
 *   array '<U..' of the words in id order, read by lib/npy.h's string-array reader);
 *   vtr_vocab_load_hgr_release reads both and checks that they agree.
 *
 * Errors name the file and the cause ("vocab PATH: id 7 is missing from idx2word").
 * A vtr_vocab is immutable after it is made; it may be read from several threads.
 */
#ifndef VTR_VOCAB_H
#define VTR_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define VTR_VOCAB_PAD "<pad>"
#define VTR_VOCAB_START "<start>"
#define VTR_VOCAB_END "<end>"
#define VTR_VOCAB_UNK "<unk>"
#define VTR_VOCAB_MASK "<mask>"

typedef enum vtr_vocab_layout {
    VTR_VOCAB_VSE,
    VTR_VOCAB_HGR,
} vtr_vocab_layout;

/* The ids of the special tokens; -1 where the layout has none. */
typedef struct vtr_vocab_specials {
    int pad, start, end, unk, mask;
} vtr_vocab_specials;

typedef struct vtr_vocab vtr_vocab;

/* ---- reading a vocabulary -------------------------------------------------------- */

/* Number of ids (words and special tokens). */
int vtr_vocab_size(const vtr_vocab *vocab);

/* The word with this id, or NULL when id is out of range. Valid while vocab lives. */
const char *vtr_vocab_word(const vtr_vocab *vocab, int id);

/* The id of word (NUL-terminated), or -1 when it is not in the vocabulary. */
int vtr_vocab_id(const vtr_vocab *vocab, const char *word);

vtr_vocab_layout vtr_vocab_layout_of(const vtr_vocab *vocab);

/* Whether a and b give every word the same id (the same words in the same order, however
 * their files were written). */
bool vtr_vocab_same(const vtr_vocab *a, const vtr_vocab *b);

vtr_vocab_specials vtr_vocab_special_ids(const vtr_vocab *vocab);

/* Encodes n tokens into ids: unknown words become the unk id; with wrap, the ids are
 * enclosed in start ... end (ids needs room for n + 2), without it ids gets n entries.
 * *count receives the number written. VTR_ERR_INVALID when wrap is asked of a vocabulary
 * without start and end tokens. */
vtr_status vtr_vocab_encode(const vtr_vocab *vocab, const char *const *tokens, size_t n,
                            bool wrap, int *ids, size_t *count, vtr_error *err);

/* Frees the vocabulary; safe on NULL. */
void vtr_vocab_free(vtr_vocab *vocab);

/* ---- building from captions ------------------------------------------------------- */

typedef struct vtr_vocab_counter vtr_vocab_counter;

/* An empty counter, or NULL when out of memory. */
vtr_vocab_counter *vtr_vocab_counter_new(void);
void vtr_vocab_counter_free(vtr_vocab_counter *counter);

/* Counts the n tokens of one caption. VTR_ERR_NOMEM only. */
vtr_status vtr_vocab_counter_add(vtr_vocab_counter *counter, const char *const *tokens,
                                 size_t n, vtr_error *err);

/* How often word was counted (0 when never), and the number of distinct words. */
int64_t vtr_vocab_counter_count(const vtr_vocab_counter *counter, const char *word);
int64_t vtr_vocab_counter_distinct(const vtr_vocab_counter *counter);

typedef enum vtr_vocab_order {
    VTR_VOCAB_FIRST_SEEN, /* the reference's order */
    VTR_VOCAB_BY_COUNT,   /* most frequent first, ties byte-wise */
} vtr_vocab_order;

/* A vocabulary of the given layout of the words counted at least threshold (>= 1) times,
 * in the given order: VTR_VOCAB_VSE <pad> <start> <end> <unk>, the words, <mask>;
 * VTR_VOCAB_HGR <BOS> <EOS> <UNK> (ids 0, 1, 2), the words. *out is NULL on failure. */
vtr_status vtr_vocab_build(const vtr_vocab_counter *counter, int64_t threshold,
                           vtr_vocab_order order, vtr_vocab_layout layout, vtr_vocab **out,
                           vtr_error *err);

/* ---- files ------------------------------------------------------------------------ */

/* Reads a reference vocabulary JSON and checks it: the three keys present, word2idx
 * values integers, idx2word keys the decimal ids 0 .. idx-1 each once, both maps the
 * same size and in agreement, idx equal to their size, no word twice, <pad> <start>
 * <end> <unk> at 0 1 2 3, <mask> absent or last. VTR_ERR_IO when the file cannot be read,
 * VTR_ERR_FORMAT for malformed JSON or a failed check. *out is NULL on failure. */
vtr_status vtr_vocab_load_json(const char *path, vtr_vocab **out, vtr_error *err);

/* Writes a VTR_VOCAB_VSE vocabulary as reference JSON (the trailing <mask> left out, so
 * that the reference code, which appends it, gets the same ids), atomically (temp file +
 * rename). Non-ASCII is written as \u escapes, like Python's json.dump (which writes the
 * same JSON except for lowercase hex digits in the escapes). VTR_ERR_INVALID for an HGR
 * vocabulary or a word that is not valid UTF-8. */
vtr_status vtr_vocab_save_json(const vtr_vocab *vocab, const char *path, vtr_error *err);

/* Reads HGR's word2int.json ({word: id}, ids 0 .. N-1 each once, N >= 3) as a
 * VTR_VOCAB_HGR vocabulary. *out is NULL on failure. */
vtr_status vtr_vocab_load_hgr(const char *word2int_path, vtr_vocab **out, vtr_error *err);

/* HGR vocabularies also check their special tokens: HGR's reader (mpdata.py) takes BOS,
 * EOS, UNK as word2int.get('<BOS>', 0), get('<EOS>', 1), get('<UNK>', 2) while vtr fixes
 * them at 0, 1, 2, so a file that has "<BOS>", "<EOS>" or "<UNK>" at another id is
 * VTR_ERR_FORMAT ("\"<UNK>\" has id 5, but HGR's ids are BOS/EOS/UNK = 0/1/2"); words of
 * other names at 0, 1, 2 are taken as the specials, as the reader does. */

/* Reads HGR's release vocabulary, word2int.json as vtr_vocab_load_hgr and int2word.npy
 * (a 1-D numpy str array, lib/npy.h), and checks that they agree: as many words, and the
 * word of every id the same in both ('vocab PATH/int2word.npy: id 7 is "dog", but "cat"
 * in PATH/word2int.json'). Gaps show in word2int.json as an id out of range ("\"a\" has
 * no id in [0, 4)"). VTR_ERR_IO when a file cannot be read, VTR_ERR_FORMAT (or
 * VTR_ERR_UNSUPPORTED for an array dtype lib/npy.h refuses) otherwise. *out is NULL on
 * failure. */
vtr_status vtr_vocab_load_hgr_release(const char *word2int_path, const char *int2word_path,
                                      vtr_vocab **out, vtr_error *err);

/* An HGR vocabulary of words[0 .. n-1], the word of id i at i (what the catalog keeps:
 * vtr_catalog_get_vocabulary): n >= 3, no word empty or twice, the specials checked as
 * above. source names the list in messages. *out is NULL on failure. */
vtr_status vtr_vocab_hgr_from_words(const char *const *words, size_t n, const char *source,
                                    vtr_vocab **out, vtr_error *err);

#endif
