/* The caption tokenizer.
 *
 * VTR_TOKENIZE_WORDS reproduces what the VSE reference code runs on every caption,
 * nltk.tokenize.word_tokenize(caption.lower()):
 *   1. lowercase (Python's str.lower on ASCII, Latin-1, Latin Extended-A, Greek and
 *      Cyrillic; other scripts are left as they are);
 *   2. split into sentences as NLTK's Punkt model does on lowercased English text: after
 *      '?' and '!', and after a word ending in '.' unless the word is a known
 *      abbreviation ("mr.", "dr.", "e.g.", "u.s." ...), an ellipsis, or a single letter
 *      or a number followed by a lowercase word; closing quotes and brackets after the
 *      period stay with the sentence they close;
 *   3. tokenize each sentence with the rules of NLTK's NLTKWordTokenizer (the "improved
 *      Treebank" tokenizer behind word_tokenize, NLTK 3.9): punctuation split off
 *      (, ; : ? ! ( ) [ ] { } < > * @ # $ % & and runs of two or more periods), commas
 *      and colons kept inside numbers ("1,000", "3.5", "10:30"), the final period of a
 *      sentence split off, double quotes turned into `` (opening) and '' (closing),
 *      contractions split ("do n't", "ca n't", "it 's", "i 'm", "they 're", "we 've",
 *      "he 'll", "i 'd", "can not", "gon na", "wan na"), hyphens kept inside words.
 * The rules and the places where vtr only approximates NLTK (Punkt's learned
 * abbreviation list and orthographic statistics; Unicode classes \w, \s and \d, which
 * vtr takes from a fixed table) are listed in tokenizer.c.
 *
 * VTR_TOKENIZE_WHITESPACE is for captions that were tokenized already, as in the HGR
 * release (ref_captions.json): split on white space (Python's str.split()), nothing else,
 * no lowercasing.
 *
 * Text is UTF-8; non-ASCII letters stay inside words. Invalid UTF-8 is refused.
 */
#ifndef VTR_TOKENIZER_H
#define VTR_TOKENIZER_H

#include <stddef.h>

#include "lib/error.h"

typedef enum vtr_tokenizer_mode {
    VTR_TOKENIZE_WORDS,      /* lowercase + NLTK word_tokenize (the VSE reference) */
    VTR_TOKENIZE_WHITESPACE, /* pre-tokenized captions (HGR): split on white space */
} vtr_tokenizer_mode;

/* The tokens of one caption. Zero-initialize before the first use; the buffers are
 * reused by the next vtr_tokenize() on the same value, so a loop over a million
 * captions allocates only while its longest caption grows them. */
typedef struct vtr_tokens {
    size_t n;            /* number of tokens */
    const char **tokens; /* n NUL-terminated UTF-8 strings, valid until the next call */
    void *work;          /* owned buffers */
} vtr_tokens;

/* Tokenizes the NUL-terminated caption into *out (previous contents replaced). An empty
 * or all-blank caption gives n = 0. Fails with VTR_ERR_FORMAT ("invalid UTF-8 at byte N")
 * or VTR_ERR_NOMEM; on failure out->n is 0. */
vtr_status vtr_tokenize(const char *caption, vtr_tokenizer_mode mode, vtr_tokens *out,
                        vtr_error *err);

/* Frees the buffers; safe on a zeroed or already-freed value. */
void vtr_tokens_free(vtr_tokens *tokens);

/* "words" or "whitespace"; parses the same names (returns 0 on success, -1 unknown). */
const char *vtr_tokenizer_mode_name(vtr_tokenizer_mode mode);
int vtr_tokenizer_mode_parse(const char *name, vtr_tokenizer_mode *mode);

#endif
