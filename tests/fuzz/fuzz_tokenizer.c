/* Fuzz target: the caption tokenizer (text/tokenizer.h) on arbitrary bytes, in both modes,
 * reusing one vtr_tokens as a training loop does. Invalid UTF-8 must be refused with one
 * line (lib/error.h) and n = 0; otherwise every token is non-empty valid UTF-8 without ASCII
 * white space, and the whitespace mode gives exactly the fields of an ASCII split when
 * the caption is ASCII. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "text/tokenizer.h"

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The number of fields of an ASCII caption split on white space; -1 when it is not ASCII
 * (Python's str.split also splits on Unicode spaces). */
static long ascii_fields(const char *s)
{
    long n = 0;
    bool in = false;
    for (; *s; s++) {
        if ((unsigned char)*s >= 0x80 || (unsigned char)*s == 0x1c || (unsigned char)*s == 0x1d ||
            (unsigned char)*s == 0x1e || (unsigned char)*s == 0x1f)
            return -1;
        n += !in && !is_space(*s);
        in = !is_space(*s);
    }
    return n;
}

static void tokenize(const char *caption, vtr_tokenizer_mode mode, vtr_tokens *t)
{
    vtr_error err;
    if (vtr_tokenize(caption, mode, t, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (t->n != 0)
            abort();
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        const char *tok = t->tokens[i];
        size_t len = strlen(tok);
        if (len == 0)
            abort();
        for (size_t k = 0; k < len; k++)
            if (is_space(tok[k]))
                abort();
        fuzz_check_utf8(tok, len);
    }
    long fields = ascii_fields(caption);
    if (mode == VTR_TOKENIZE_WHITESPACE && fields >= 0 && (long)t->n != fields)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *caption = fuzz_strndup(data, size);
    vtr_tokens t = {0};
    tokenize(caption, VTR_TOKENIZE_WORDS, &t);
    tokenize(caption, VTR_TOKENIZE_WHITESPACE, &t);
    /* the second half alone, into the same buffers */
    tokenize(caption + strlen(caption) / 2, VTR_TOKENIZE_WORDS, &t);
    vtr_tokens_free(&t);
    free(caption);
    return 0;
}
