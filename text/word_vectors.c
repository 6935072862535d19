/* GloVe text import: one pass over the file with getline, the rows filled in place. */
#define _POSIX_C_SOURCE 200809L
#include "word_vectors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Parses a whole field as a finite float. */
static bool parse_float(const char *s, size_t len, float *out)
{
    if (len == 0 || len > 64 || s[0] == ' ' || s[0] == '\t')
        return false;
    char buf[72];
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    float v = strtof(buf, &end);
    if (end != buf + len || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Parses a whole field as a non-negative decimal integer. */
static bool parse_count(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static size_t count_char(const char *s, size_t len, char c)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += s[i] == c;
    return n;
}

/* Parses the D values of s[0..len) ("v1 v2 ... vD") into out (may be NULL: check only).
 * On failure sets *bad to the 1-based index of the first bad value. */
static bool parse_vector(const char *s, size_t len, int64_t dim, float *out, int64_t *bad,
                         const char **field, size_t *field_len)
{
    size_t i = 0;
    for (int64_t k = 0; k < dim; k++) {
        size_t j = i;
        while (j < len && s[j] != ' ')
            j++;
        float v;
        if (!parse_float(s + i, j - i, &v)) {
            *bad = k + 1;
            *field = s + i;
            *field_len = j - i;
            return false;
        }
        if (out)
            out[k] = v;
        i = j + 1;
    }
    return true;
}

vtr_status vtr_glove_load(const char *path, const vtr_vocab *vocab,
                          const vtr_glove_options *opt, float *rows, vtr_glove_stats *stats,
                          vtr_error *err)
{
    vtr_glove_stats st_local = {0, 0, 0};
    vtr_glove_stats *s = stats ? stats : &st_local;
    *s = st_local;
    if (opt->dim <= 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: dimension %lld", path, (long long)opt->dim);

    vtr_status st = VTR_OK;
    char *line = NULL, shown[96];
    size_t line_cap = 0;
    bool *hit = NULL;
    int64_t dim = opt->dim, V = vtr_vocab_size(vocab);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return vtr_fail_errno(err, "%s", path);
    hit = calloc((size_t)(V ? V : 1), sizeof *hit);
    if (!hit) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }

    ssize_t got;
    while ((got = getline(&line, &line_cap, fp)) >= 0) {
        s->lines++;
        size_t len = (size_t)got;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            len--;
        line[len] = '\0';
        if (len == 0)
            continue;
        size_t nfields = count_char(line, len, ' ') + 1;

        if (s->lines == 1 && nfields == 2) { /* "COUNT DIM" header? */
            const char *sp = strchr(line, ' ');
            int64_t count, header_dim;
            if (parse_count(line, (size_t)(sp - line), &count) &&
                parse_count(sp + 1, len - (size_t)(sp + 1 - line), &header_dim) &&
                header_dim > 0) {
                if (header_dim != dim) {
                    st = vtr_fail(err, VTR_ERR_FORMAT,
                                  "%s:1: header says dimension %lld, expected %lld", path,
                                  (long long)header_dim, (long long)dim);
                    goto end;
                }
                continue;
            }
        }
        if ((int64_t)nfields - 1 < dim) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: %zu values, expected %lld", path,
                          (long long)s->lines, nfields - 1, (long long)dim);
            goto end;
        }
        /* the word is everything before the last dim fields */
        size_t word_len = len;
        for (int64_t k = 0; k < dim; k++) {
            word_len--;
            while (line[word_len] != ' ')
                word_len--;
        }
        const char *vec = line + word_len + 1;
        size_t vec_len = len - word_len - 1;
        if (word_len == 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: empty word", path, (long long)s->lines);
            goto end;
        }
        if ((int64_t)nfields - 1 > dim) { /* a word with spaces, or too many values? */
            const char *last = line + word_len;
            while (last > line && last[-1] != ' ')
                last--;
            float v;
            if (parse_float(last, (size_t)(line + word_len - last), &v)) {
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: %zu values, expected %lld", path,
                              (long long)s->lines, nfields - 1, (long long)dim);
                goto end;
            }
        }
        line[word_len] = '\0';
        int id = vtr_vocab_id(vocab, line);
        line[word_len] = ' ';
        bool wanted = id >= 0 && !hit[id];
        if (wanted || opt->check_all) {
            int64_t bad;
            const char *field;
            size_t field_len;
            float *row = wanted ? rows + (size_t)id * (size_t)dim : NULL;
            if (!parse_vector(vec, vec_len, dim, row, &bad, &field, &field_len)) {
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: value %lld \"%s\" is not a number",
                              path, (long long)s->lines, (long long)bad,
                              vtr_printable(field, field_len, shown, sizeof shown));
                goto end;
            }
        }
        if (wanted) {
            hit[id] = true;
            s->hits++;
        }
        s->vectors++;
    }
    if (!feof(fp)) { /* a read error, or getline out of memory */
        st = vtr_fail_errno(err, "%s: read", path);
        goto end;
    }
    if (s->vectors == 0)
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no word vectors in the file", path);
end:
    free(hit);
    free(line);
    fclose(fp);
    return st;
}
