/* Pretrained word vectors in GloVe's text format, for the embedding matrix of a
 * vocabulary (HGR initializes its word embeddings from GloVe 300-d, REFERENCE.md).
 *
 * The format: one word per line, "word v1 v2 ... vD", fields separated by single spaces,
 * UTF-8, no header (glove.6B / 42B / 840B). Also accepted: a first line "COUNT DIM" of
 * two integers (the word2vec / fastText .vec header), which is skipped; CRLF line ends;
 * trailing spaces; empty lines. Some glove.840B lines hold words with spaces in them
 * ("at . . ."); vtr reads a line from its end: the last D fields are the vector, the rest
 * is the word. A line whose word part is empty (too few values), whose word part ends in
 * a number (too many values), or whose last D fields are not all finite numbers is
 * refused with "PATH:LINE: ...", and the import stops there. The field count is checked
 * on every line; the values only on the lines of vocabulary words unless
 * opt->check_all asks for every line (parsing 2 million x 300 numbers of glove.840B
 * costs about a minute).
 *
 * The file is read as a stream, line by line: memory is the matrix plus one line,
 * whatever the size of the file. Words are matched byte for byte (no case folding); of
 * a word listed twice the first vector wins.
 */
#ifndef VTR_WORD_VECTORS_H
#define VTR_WORD_VECTORS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "text/vocab.h"

typedef struct vtr_glove_options {
    int64_t dim;       /* the vectors' dimension (> 0): the width of the embedding rows */
    bool check_all;    /* parse the values of every line; otherwise (faster on the
                          multi-GB files) only those of words in the vocabulary, while the
                          number of fields is checked on every line */
} vtr_glove_options;

typedef struct vtr_glove_stats {
    int64_t lines;   /* lines read (header and empty lines included) */
    int64_t vectors; /* vectors parsed */
    int64_t hits;    /* vocabulary ids that got a vector */
} vtr_glove_stats;

/* Reads the GloVe text file at path into rows, the (V, opt->dim) row-major float32
 * embedding matrix of vocab (V = vtr_vocab_size): row i gets the vector of
 * vtr_vocab_word(vocab, i) when the file has it; the rows of words the file lacks keep
 * what they held (the caller's initialization: the model's uniform(-0.1, 0.1), as the
 * reference keeps for words outside GloVe). stats (may be NULL) says what matched.
 * Errors: VTR_ERR_IO (open/read), VTR_ERR_FORMAT ("PATH:LINE: 299 values, expected
 * 300", "PATH:LINE: value 5 \"0.1x\" is not a number", "PATH:1: header says dimension
 * 100, expected 300", a file without vectors), VTR_ERR_INVALID (opt->dim <= 0),
 * VTR_ERR_NOMEM. On failure the rows of the lines before the bad one have been written:
 * a caller that must not keep them reads into a copy. */
vtr_status vtr_glove_load(const char *path, const vtr_vocab *vocab,
                          const vtr_glove_options *opt, float *rows, vtr_glove_stats *stats,
                          vtr_error *err);

#endif
