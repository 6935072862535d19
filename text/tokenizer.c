/* Caption tokenizer: NLTK's word_tokenize(caption.lower()) rewritten as passes over a
 * byte buffer, one pass per regular expression of NLTK, in NLTK's order.
 *
 * The passes (NLTKWordTokenizer.tokenize, nltk/tokenize/destructive.py, NLTK 3.9), each
 * applied to the whole sentence as re.sub does (leftmost, non-overlapping matches):
 *   starting quotes  S1 ([«“‘„]|`+)            -> " \1 "
 *                    S2 ^"                      -> ``
 *                    S3 ``                      -> " `` "
 *                    S4 ([ ([{<])("|'')         -> "\1 `` "
 *                    S5 (?<!\w)'(?!(re|ve|ll|m|t|s|d|n)\b)(?=\w) -> "' "
 *   punctuation      P1 ([^.])(\.)([])}>"'»”’ ]*)\s*$ -> "\1 \2 \3 "   (final period)
 *                    P2 ([:,])([^\d])           -> " \1 \2"
 *                    P3 ([:,])$                 -> " \1 "
 *                    P4 \.{2,}                  -> " \0 "
 *                    P5 [;@#$%&]                -> " \0 "
 *                    P6 [\u2012-\u2015]         -> " \0 "
 *                    P7 ([^.])(\.)([])}>"']*)\s*$ -> "\1 \2\3 "
 *                    P8 [?!]                    -> " \0 "
 *                    P9 ([^'])'<space>          -> "\1 ' "
 *                    P10 [*]                    -> " \0 "
 *   brackets            [][(){}<>]              -> " \0 "
 *   double dash         --                      -> " -- "
 *   then " " + text + " ", and the ending quotes
 *                    E1 [»”’]                   -> " \0 "
 *                    E2 ''                      -> " '' "
 *                    E3 "                       -> " '' "
 *                    E4 \s+                     -> " "
 *                    E5 ([^' ])('s|'m|'d|')<space> -> "\1 \2 "   (either case)
 *                    E6 ([^' ])('ll|'re|'ve|n't)<space> -> "\1 \2 " (all lower or upper)
 *   contractions     \b(can)(not)\b, \b(d)('ye)\b, \b(gim)(me)\b, \b(gon)(na)\b,
 *                    \b(got)(ta)\b, \b(lem)(me)\b, \b(more)('n)\b, \b(wan)(na)(?=\s)
 *                    -> " \1 \2 " (case-insensitive); " ('t)(is)\b", " ('t)(was)\b"
 *   and finally str.split().
 *
 * Sentence splitting (nltk.sent_tokenize, Punkt with its English model) comes first;
 * vtr cannot ship Punkt's learned parameters, so it follows Punkt's algorithm with these
 * stand-ins, exact for lowercased captions except where noted:
 *   - candidates are '.', '?' and '!' followed by white space and a token, or by one of
 *     ?!)";}]*:@'({[ ; of several candidates inside one run without white space only
 *     the last counts, as in Punkt;
 *   - '?' and '!' always end a sentence there;
 *   - a word ending in '.' ends a sentence unless it ends in "..", or the word without
 *     its period (or its last hyphen-separated part) is in abbreviations[] below (Punkt
 *     learned a longer list), or it is a single letter or a number (Punkt's
 *     "##number##" pattern) followed by a lowercase word or by one of ;:,.!? (Punkt's
 *     orthographic heuristic, which on lowercased text says "not a sentence start" for
 *     the common words; Punkt's collocation list is not used);
 *   - closing quotes and brackets that follow the end and precede white space go with
 *     the sentence they close (Punkt's boundary realignment).
 *
 * Unicode classes: \s is Python's white space (ASCII, U+001C..U+001F, U+0085, U+00A0,
 * U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). \w is ASCII letters,
 * digits and '_', and every non-ASCII code point except white space, Latin-1 punctuation
 * and symbols, combining marks U+0300..U+036F, general punctuation U+2000..U+206F,
 * currency U+20A0..U+20CF, arrows to dingbats U+2190..U+2BFF, CJK punctuation
 * U+3000..U+303F, fullwidth ASCII punctuation and pictographs U+1F000..U+1FAFF (Python
 * decides per code point from the Unicode database; the difference only shows in the
 * rules that look at \w next to a quote or a contraction). \d is ASCII digits.
 */
#include "tokenizer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable byte buffer ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom; /* sticky: a failed growth; checked once per caption */
} sbuf;

static void sb_reserve(sbuf *b, size_t extra)
{
    if (b->oom || b->cap - b->n >= extra)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    sb_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_putc(sbuf *b, char c)
{
    if (b->n < b->cap) {
        b->p[b->n++] = c;
        return;
    }
    sb_put(b, &c, 1);
}

/* " " + s[0..n) + " " */
static void sb_pad(sbuf *b, const char *s, size_t n)
{
    sb_putc(b, ' ');
    sb_put(b, s, n);
    sb_putc(b, ' ');
}

typedef struct work {
    sbuf a, b;          /* pass input and output, swapped after each pass */
    sbuf lower;         /* the lowercased caption */
    sbuf out;           /* the tokens, NUL-separated */
    const char **ptrs;  /* what vtr_tokens.tokens points to */
    size_t tokens_cap;
} work;

/* ---- UTF-8 and character classes ---- */

/* Length of the valid UTF-8 sequence at s[i] (and its code point), or 0 when invalid:
 * overlong forms, surrogates and values above U+10FFFF are refused. */
static size_t utf8_decode(const unsigned char *s, size_t n, size_t i, uint32_t *cp)
{
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n - i < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i + k] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* Decodes text already known to be valid UTF-8. */
static size_t cp_at(const char *s, size_t n, size_t i, uint32_t *cp)
{
    size_t len = utf8_decode((const unsigned char *)s, n, i, cp);
    if (len == 0) {
        /* a byte inside a character, where the rules' byte-wise loops stop: it reads as
         * that character, one byte long (as its own value it could be the Latin-1 white
         * space 0x85 or 0xA0, and split the character) */
        size_t j = i;
        while (j > 0 && i - j < 3 && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        if (utf8_decode((const unsigned char *)s, n, j, cp) == 0)
            *cp = 0xFFFD;
        len = 1;
    }
    return len;
}

/* The code point that ends just before s[i] (i > 0). */
static uint32_t cp_before(const char *s, size_t i)
{
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80 && i - j < 4)
        j--;
    uint32_t cp;
    cp_at(s, i, j, &cp);
    return cp;
}

static bool is_space_cp(uint32_t c)
{
    if (c < 0x80)
        return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_ascii_alnum(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_word_cp(uint32_t c)
{
    if (c < 0x80)
        return is_ascii_alnum(c) || c == '_';
    if (is_space_cp(c))
        return false;
    if (c >= 0xA0 && c <= 0xBF) /* Latin-1 punctuation; ª ² ³ µ ¹ º ¼ ½ ¾ are \w */
        return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA ||
               (c >= 0xBC && c <= 0xBE);
    if (c == 0xD7 || c == 0xF7 || (c >= 0x300 && c <= 0x36F))
        return false;
    if ((c >= 0x2000 && c <= 0x206F) || (c >= 0x20A0 && c <= 0x20CF) ||
        (c >= 0x2190 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) ||
        (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
        (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65) ||
        (c >= 0x1F000 && c <= 0x1FAFF))
        return false;
    return true;
}

static bool is_digit_byte(char c)
{
    return c >= '0' && c <= '9';
}

/* Is the code point ending before s[i] a word character (false at the start)? */
static bool word_before(const char *s, size_t i)
{
    return i > 0 && is_word_cp(cp_before(s, i));
}

static bool word_at(const char *s, size_t n, size_t i)
{
    uint32_t cp;
    return i < n && (cp_at(s, n, i, &cp), is_word_cp(cp));
}

static bool space_at(const char *s, size_t n, size_t i)
{
    uint32_t cp;
    return i < n && (cp_at(s, n, i, &cp), is_space_cp(cp));
}

/* Length of the white space code point at s[i], or 0. */
static size_t space_len(const char *s, size_t n, size_t i)
{
    uint32_t cp;
    size_t len = cp_at(s, n, i, &cp);
    return is_space_cp(cp) ? len : 0;
}

/* Python's `$` without MULTILINE: the end, or just before a final '\n'. */
static bool at_end(const char *s, size_t n, size_t i)
{
    return i == n || (i + 1 == n && s[i] == '\n');
}

/* ---- lowercasing (Python's str.lower for the scripts listed in tokenizer.h) ---- */

static bool is_cased_letter(uint32_t c)
{
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    return (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||
           (c >= 0x370 && c <= 0x3FF) || (c >= 0x400 && c <= 0x4FF);
}

/* Lowercase of c; 0 when c lowercases to something other than one code point (U+0130). */
static uint32_t lower_cp(uint32_t c)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7)
        return c + 32;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x130)
            return 0;
        if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F)
            return c;
        if (c == 0x178)
            return 0xFF;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
            return c % 2 ? c + 1 : c;
        return c % 2 ? c : c + 1;
    }
    if (c == 0x386)
        return 0x3AC;
    if (c >= 0x388 && c <= 0x38A)
        return c + 0x25;
    if (c == 0x38C)
        return 0x3CC;
    if (c == 0x38E || c == 0x38F)
        return c + 0x3F;
    if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB))
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40F)
        return c + 0x50;
    if (c >= 0x410 && c <= 0x42F)
        return c + 0x20;
    return c;
}

static void put_cp(sbuf *b, uint32_t c)
{
    char u[4];
    size_t len;
    if (c < 0x80) {
        u[0] = (char)c, len = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xC0 | (c >> 6)), u[1] = (char)(0x80 | (c & 0x3F)), len = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xE0 | (c >> 12)), u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        u[2] = (char)(0x80 | (c & 0x3F)), len = 3;
    } else {
        u[0] = (char)(0xF0 | (c >> 18)), u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((c >> 6) & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F)), len = 4;
    }
    sb_put(b, u, len);
}

/* Validates and lowercases s into out; returns the byte offset of invalid UTF-8, or -1. */
static long lowercase(const char *s, size_t n, sbuf *out)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { /* the common case */
            sb_putc(out, (char)(u[i] >= 'A' && u[i] <= 'Z' ? u[i] + 32 : u[i]));
            i++;
            continue;
        }
        uint32_t c;
        size_t len = utf8_decode(u, n, i, &c);
        if (len == 0)
            return (long)i;
        uint32_t l = lower_cp(c);
        if (c == 0x3A3) { /* Σ: final ς after a letter and not before one */
            uint32_t next = 0;
            bool before = i > 0 && is_cased_letter(cp_before(s, i));
            bool after = i + len < n && utf8_decode(u, n, i + len, &next) &&
                         is_cased_letter(next);
            l = before && !after ? 0x3C2 : 0x3C3;
        }
        if (l == 0) { /* İ -> i + combining dot above */
            sb_putc(out, 'i');
            put_cp(out, 0x307);
        } else {
            put_cp(out, l);
        }
        i += len;
    }
    return -1;
}

/* ---- the Treebank passes ---- */

/* A matcher returns the length of its match at s[i], or 0. */
typedef size_t (*matcher)(const char *s, size_t n, size_t i);

/* Every match, left to right and non-overlapping, padded with a space on each side. */
static void pad_matches(const char *s, size_t n, sbuf *o, matcher m)
{
    for (size_t i = 0; i < n;) {
        size_t len = m(s, n, i);
        if (len) {
            sb_pad(o, s + i, len);
            i += len;
        } else {
            sb_putc(o, s[i++]);
        }
    }
}

/* The last c in s[0..n), or NULL. */
static const char *last_byte(const char *s, size_t n, char c)
{
    while (n > 0)
        if (s[--n] == c)
            return s + n;
    return NULL;
}

static bool bytes_at(const char *s, size_t n, size_t i, const char *lit)
{
    size_t len = strlen(lit);
    return n - i >= len && memcmp(s + i, lit, len) == 0;
}

static size_t m_open_quote(const char *s, size_t n, size_t i) /* S1 */
{
    if (s[i] == '`') {
        size_t j = i;
        while (j < n && s[j] == '`')
            j++;
        return j - i;
    }
    if (bytes_at(s, n, i, "\xC2\xAB")) /* « */
        return 2;
    if (bytes_at(s, n, i, "\xE2\x80\x9C") || bytes_at(s, n, i, "\xE2\x80\x98") ||
        bytes_at(s, n, i, "\xE2\x80\x9E")) /* “ ‘ „ */
        return 3;
    return 0;
}

static size_t m_two_backticks(const char *s, size_t n, size_t i) /* S3 */
{
    return bytes_at(s, n, i, "``") ? 2 : 0;
}

static size_t m_periods(const char *s, size_t n, size_t i) /* P4 */
{
    size_t j = i;
    while (j < n && s[j] == '.')
        j++;
    return j - i >= 2 ? j - i : 0;
}

static size_t m_symbol(const char *s, size_t n, size_t i) /* P5 */
{
    return strchr(";@#$%&", s[i]) && s[i] ? 1 : 0;
}

static size_t m_dash(const char *s, size_t n, size_t i) /* P6: U+2012..U+2015 */
{
    return n - i >= 3 && (unsigned char)s[i] == 0xE2 && (unsigned char)s[i + 1] == 0x80 &&
                   (unsigned char)s[i + 2] >= 0x92 && (unsigned char)s[i + 2] <= 0x95
               ? 3
               : 0;
}

static size_t m_question(const char *s, size_t n, size_t i) /* P8 */
{
    return s[i] == '?' || s[i] == '!';
}

static size_t m_star(const char *s, size_t n, size_t i) /* P10 */
{
    return s[i] == '*';
}

static size_t m_bracket(const char *s, size_t n, size_t i)
{
    return s[i] && strchr("[](){}<>", s[i]) ? 1 : 0;
}

static size_t m_double_dash(const char *s, size_t n, size_t i)
{
    return bytes_at(s, n, i, "--") ? 2 : 0;
}

static size_t m_close_quote(const char *s, size_t n, size_t i) /* E1: » ” ’ */
{
    if (bytes_at(s, n, i, "\xC2\xBB"))
        return 2;
    if (bytes_at(s, n, i, "\xE2\x80\x9D") || bytes_at(s, n, i, "\xE2\x80\x99"))
        return 3;
    return 0;
}

static size_t m_two_quotes(const char *s, size_t n, size_t i) /* E2 */
{
    return bytes_at(s, n, i, "''") ? 2 : 0;
}

/* S2: ^" -> `` */
static void leading_quote(const char *s, size_t n, sbuf *o)
{
    if (n > 0 && s[0] == '"') {
        sb_put(o, "``", 2);
        sb_put(o, s + 1, n - 1);
    } else {
        sb_put(o, s, n);
    }
}

/* S4: ([ ([{<])("|'') -> "\1 `` " */
static void opening_quotes(const char *s, size_t n, sbuf *o)
{
    for (size_t i = 0; i < n;) {
        if (strchr(" ([{<", s[i]) && s[i] && i + 1 < n) {
            size_t q = s[i + 1] == '"' ? 1 : bytes_at(s, n, i + 1, "''") ? 2 : 0;
            if (q) {
                sb_putc(o, s[i]);
                sb_put(o, " `` ", 4);
                i += 1 + q;
                continue;
            }
        }
        sb_putc(o, s[i++]);
    }
}

/* Does s[i..] start with lit, ASCII case-insensitively (lit is lowercase)? */
static bool starts_ci(const char *s, size_t n, size_t i, const char *lit)
{
    size_t len = strlen(lit);
    if (n - i < len)
        return false;
    for (size_t k = 0; k < len; k++) {
        char c = s[i + k];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[k])
            return false;
    }
    return true;
}

/* S5: (?i)(?<!\w)(')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w) -> "' " */
static void quote_before_word(const char *s, size_t n, sbuf *o)
{
    static const char *const clitics[] = {"re", "ve", "ll", "m", "t", "s", "d", "n"};
    for (size_t i = 0; i < n; i++) {
        sb_putc(o, s[i]);
        if (s[i] != '\'' || word_before(s, i) || !word_at(s, n, i + 1))
            continue;
        bool clitic = false;
        for (size_t k = 0; k < sizeof clitics / sizeof clitics[0] && !clitic; k++)
            clitic = starts_ci(s, n, i + 1, clitics[k]) &&
                     !word_at(s, n, i + 1 + strlen(clitics[k]));
        if (!clitic)
            sb_putc(o, ' ');
    }
}

/* P1 (wide) and P7: ([^.])(\.)(closers*)\s*$ -> "\1 \2 \3 " (P1) or "\1 \2\3 " (P7),
 * where the closers of P1 are ] ) } > " ' » ” ’ and the space, those of P7 ] ) } > " '.
 * Only the last period can match: the closers never include '.'. */
static size_t closer_len(const char *s, size_t n, size_t i, bool wide)
{
    if (s[i] && strchr("])}>\"'", s[i]))
        return 1;
    if (!wide)
        return 0;
    if (s[i] == ' ')
        return 1;
    return m_close_quote(s, n, i);
}

static void final_period(const char *s, size_t n, sbuf *o, bool wide)
{
    const char *dot = last_byte(s, n, '.');
    if (dot && dot > s && dot[-1] != '.') {
        size_t p = (size_t)(dot - s), k = p + 1, len;
        while (k < n && (len = closer_len(s, n, k, wide)) != 0)
            k += len;
        size_t e = k;
        while (e < n && (len = space_len(s, n, e)) != 0)
            e += len;
        if (e == n) {
            sb_put(o, s, p);
            sb_put(o, wide ? " . " : " .", wide ? 3 : 2);
            sb_put(o, s + p + 1, k - p - 1);
            sb_putc(o, ' ');
            return;
        }
    }
    sb_put(o, s, n);
}

/* P2: ([:,])([^\d]) -> " \1 \2" */
static void comma_colon(const char *s, size_t n, sbuf *o)
{
    for (size_t i = 0; i < n;) {
        if ((s[i] == ',' || s[i] == ':') && i + 1 < n && !is_digit_byte(s[i + 1])) {
            uint32_t cp;
            size_t len = cp_at(s, n, i + 1, &cp);
            sb_putc(o, ' ');
            sb_putc(o, s[i]);
            sb_putc(o, ' ');
            sb_put(o, s + i + 1, len);
            i += 1 + len;
        } else {
            sb_putc(o, s[i++]);
        }
    }
}

/* P3: ([:,])$ -> " \1 " */
static void final_comma_colon(const char *s, size_t n, sbuf *o)
{
    size_t p = n >= 1 && s[n - 1] == '\n' ? n - 2 : n - 1; /* wraps when n == 0 */
    if (p < n && (s[p] == ',' || s[p] == ':') && at_end(s, n, p + 1)) {
        sb_put(o, s, p);
        sb_pad(o, s + p, 1);
        sb_put(o, s + p + 1, n - p - 1);
    } else {
        sb_put(o, s, n);
    }
}

/* P9: ([^'])'<space> -> "\1 ' " */
static void quote_before_space(const char *s, size_t n, sbuf *o)
{
    for (size_t i = 0; i < n;) {
        if (s[i] != '\'' && i + 2 < n && s[i + 1] == '\'' && s[i + 2] == ' ') {
            sb_putc(o, s[i]);
            sb_put(o, " ' ", 3);
            i += 3;
        } else {
            sb_putc(o, s[i++]);
        }
    }
}

/* E3: " -> " '' " */
static void closing_double_quote(const char *s, size_t n, sbuf *o)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            sb_put(o, " '' ", 4);
        else
            sb_putc(o, s[i]);
    }
}

/* E4: \s+ -> " " */
static void squeeze_space(const char *s, size_t n, sbuf *o)
{
    for (size_t i = 0; i < n;) {
        size_t len = space_len(s, n, i);
        if (!len) {
            sb_putc(o, s[i++]);
            continue;
        }
        while (i < n && (len = space_len(s, n, i)) != 0)
            i += len;
        sb_putc(o, ' ');
    }
}

/* E5 and E6: ([^' ])(clitic)<space> -> "\1 \2 " */
static void clitics_before_space(const char *s, size_t n, sbuf *o, bool e6)
{
    static const char *const e5[] = {"'s", "'S", "'m", "'M", "'d", "'D", "'"};
    static const char *const e6s[] = {"'ll", "'LL", "'re", "'RE", "'ve", "'VE", "n't", "N'T"};
    const char *const *list = e6 ? e6s : e5;
    size_t count = e6 ? sizeof e6s / sizeof e6s[0] : sizeof e5 / sizeof e5[0];
    for (size_t i = 0; i < n;) {
        size_t len = 0;
        if (s[i] != '\'' && s[i] != ' ') {
            for (size_t k = 0; k < count && !len; k++) {
                size_t l = strlen(list[k]);
                if (bytes_at(s, n, i + 1, list[k]) && i + 1 + l < n && s[i + 1 + l] == ' ')
                    len = l;
            }
        }
        if (len) {
            sb_putc(o, s[i]);
            sb_putc(o, ' ');
            sb_put(o, s + i + 1, len);
            sb_putc(o, ' ');
            i += len + 2;
        } else {
            sb_putc(o, s[i++]);
        }
    }
}

/* One of MacIntyre's contractions: \b(a)(b)\b, or (a)(b)(?=\s) when before_space. */
typedef struct contraction {
    const char *a, *b;
    bool before_space;
} contraction;

static const contraction contractions2[] = {
    {"can", "not", false}, {"d", "'ye", false}, {"gim", "me", false}, {"gon", "na", false},
    {"got", "ta", false},  {"lem", "me", false}, {"more", "'n", false}, {"wan", "na", true},
};

/* (?i)\b(a)(b)\b -> " \1 \2 " */
static void split_contraction(const char *s, size_t n, sbuf *o, const contraction *c)
{
    size_t la = strlen(c->a), lb = strlen(c->b);
    for (size_t i = 0; i < n;) {
        if (!word_before(s, i) && starts_ci(s, n, i, c->a) && starts_ci(s, n, i + la, c->b)) {
            size_t e = i + la + lb;
            bool end_ok = c->before_space ? space_at(s, n, e) : !word_at(s, n, e);
            if (end_ok) {
                sb_putc(o, ' ');
                sb_put(o, s + i, la);
                sb_putc(o, ' ');
                sb_put(o, s + i + la, lb);
                sb_putc(o, ' ');
                i = e;
                continue;
            }
        }
        sb_putc(o, s[i++]);
    }
}

/* (?i) ('t)(is)\b and (?i) ('t)(was)\b -> " \1 \2 " */
static void split_tis(const char *s, size_t n, sbuf *o, const char *rest)
{
    size_t lr = strlen(rest);
    for (size_t i = 0; i < n;) {
        if (s[i] == ' ' && starts_ci(s, n, i + 1, "'t") && starts_ci(s, n, i + 3, rest) &&
            !word_at(s, n, i + 3 + lr)) {
            sb_put(o, " ", 1);
            sb_put(o, s + i + 1, 2);
            sb_putc(o, ' ');
            sb_put(o, s + i + 3, lr);
            sb_putc(o, ' ');
            i += 3 + lr;
            continue;
        }
        sb_putc(o, s[i++]);
    }
}

/* Appends a token, NUL-terminated, to w->out. */
static void add_token(work *w, const char *tok, size_t len, size_t *ntok)
{
    sb_put(&w->out, tok, len);
    sb_putc(&w->out, '\0');
    (*ntok)++;
}

/* Does s[0..n) contain any of the bytes in `any`? A pass whose pattern needs one of
 * them is skipped when none is there: most captions have few of the characters the
 * passes look for. */
static bool has_any(const char *s, size_t n, const char *any)
{
    for (; *any; any++)
        if (memchr(s, *any, n))
            return true;
    return false;
}

static bool has_text(const char *s, size_t n, const char *lit)
{
    size_t len = strlen(lit);
    for (const char *p = s; (p = memchr(p, lit[0], n - (size_t)(p - s))) != NULL; p++)
        if (n - (size_t)(p - s) >= len && memcmp(p, lit, len) == 0)
            return true;
    return false;
}

/* Runs `call` (which reads s[0..n) and writes out_) when `needed`, then swaps buffers. */
#define PASS(needed, call)                                                              \
    do {                                                                                \
        sbuf *in_ = cur, *out_ = cur == &w->a ? &w->b : &w->a;                          \
        const char *s = in_->p;                                                         \
        size_t n = in_->n;                                                              \
        if (!(needed))                                                                  \
            break;                                                                      \
        out_->n = 0;                                                                    \
        call;                                                                           \
        cur = out_;                                                                     \
    } while (0)

/* Runs the Treebank passes over one sentence and appends its tokens. */
static void treebank(work *w, const char *text, size_t len, size_t *ntok)
{
    sbuf *cur = &w->a;
    w->a.n = 0;
    sb_put(&w->a, text, len);
    if (w->a.oom)
        return;

    PASS(has_any(s, n, "`\xC2\xE2"), pad_matches(s, n, out_, m_open_quote));
    PASS(n && s[0] == '"', leading_quote(s, n, out_));
    PASS(has_any(s, n, "`"), pad_matches(s, n, out_, m_two_backticks));
    PASS(has_any(s, n, "\"'"), opening_quotes(s, n, out_));
    PASS(has_any(s, n, "'"), quote_before_word(s, n, out_));

    PASS(has_any(s, n, "."), final_period(s, n, out_, true));
    PASS(has_any(s, n, ",:"), comma_colon(s, n, out_));
    PASS(has_any(s, n, ",:"), final_comma_colon(s, n, out_));
    PASS(has_any(s, n, "."), pad_matches(s, n, out_, m_periods));
    PASS(has_any(s, n, ";@#$%&"), pad_matches(s, n, out_, m_symbol));
    PASS(has_any(s, n, "\xE2"), pad_matches(s, n, out_, m_dash));
    PASS(has_any(s, n, "."), final_period(s, n, out_, false));
    PASS(has_any(s, n, "?!"), pad_matches(s, n, out_, m_question));
    PASS(has_any(s, n, "'"), quote_before_space(s, n, out_));
    PASS(has_any(s, n, "*"), pad_matches(s, n, out_, m_star));

    PASS(has_any(s, n, "[](){}<>"), pad_matches(s, n, out_, m_bracket));
    PASS(has_text(s, n, "--"), pad_matches(s, n, out_, m_double_dash));
    PASS(true, (sb_putc(out_, ' '), sb_put(out_, s, n), sb_putc(out_, ' ')));

    PASS(has_any(s, n, "\xC2\xE2"), pad_matches(s, n, out_, m_close_quote));
    PASS(has_text(s, n, "''"), pad_matches(s, n, out_, m_two_quotes));
    PASS(has_any(s, n, "\""), closing_double_quote(s, n, out_));
    PASS(true, squeeze_space(s, n, out_));
    PASS(has_any(s, n, "'"), clitics_before_space(s, n, out_, false));
    PASS(has_any(s, n, "'"), clitics_before_space(s, n, out_, true));
    for (size_t k = 0; k < sizeof contractions2 / sizeof contractions2[0]; k++) {
        const contraction *c = &contractions2[k];
        PASS(has_text(s, n, c->b), split_contraction(s, n, out_, c));
    }
    PASS(has_text(s, n, "'t"), split_tis(s, n, out_, "is"));
    PASS(has_text(s, n, "'t"), split_tis(s, n, out_, "was"));

    /* only ' ' separates tokens now: E4 squeezed all white space, later passes add ' ' */
    const char *s = cur->p;
    size_t n = cur->n;
    for (size_t i = 0; i < n;) {
        if (s[i] == ' ') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && s[j] != ' ')
            j++;
        add_token(w, s + i, j - i, ntok);
        i = j;
    }
}

/* ---- sentence splitting (Punkt stand-in; see the top of this file) ---- */

/* Punkt's "non-word" characters, which end a word and follow a sentence end directly. */
static bool punkt_nonword(char c)
{
    return c && strchr("?!)\";}]*:@'({[", c);
}

/* Characters that cannot start a Punkt word (each becomes a token of its own). */
static bool punkt_not_word_start(char c)
{
    return c && strchr("(\"`{[:;&#*@)}]-,", c);
}

/* Abbreviations whose period does not end a sentence (a subset of what Punkt's English
 * model learned), compared with the word minus its final period. */
static const char *const abbreviations[] = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "mt", "ft", "lt", "col",
    "gen", "gov", "sen", "rep", "sgt", "capt", "inc", "co", "corp", "ltd", "jan", "feb",
    "aug", "sept", "oct", "nov", "dec", "e.g", "i.e", "u.s", "u.k", "a.m", "p.m", "d.c",
};

static bool is_abbreviation(const char *w, size_t len)
{
    for (size_t k = 0; k < sizeof abbreviations / sizeof abbreviations[0]; k++)
        if (strlen(abbreviations[k]) == len && memcmp(abbreviations[k], w, len) == 0)
            return true;
    return false;
}

/* Punkt's number type: ^-?[.,]?\d[\d,.-]*\.?$ */
static bool is_number_token(const char *w, size_t len)
{
    size_t i = 0;
    if (i < len && w[i] == '-')
        i++;
    if (i < len && (w[i] == '.' || w[i] == ','))
        i++;
    if (i >= len || !is_digit_byte(w[i]))
        return false;
    for (i++; i < len; i++)
        if (!is_digit_byte(w[i]) && w[i] != ',' && w[i] != '.' && w[i] != '-')
            return false;
    return true;
}

static bool is_lowercase_letter(uint32_t c)
{
    return is_cased_letter(c) && lower_cp(c) == c && c != 0x130;
}

/* Does the period at s[i] end a sentence? `next` is where the following token starts. */
static bool period_ends_sentence(const char *s, size_t n, size_t word_start, size_t i,
                                 size_t next)
{
    if (i > word_start && s[i - 1] == '.')
        return false; /* an ellipsis: a break only before an uppercase word */
    /* the Punkt word that ends with this period */
    size_t b = i;
    while (b > word_start && !punkt_nonword(s[b - 1]) &&
           !(s[b - 1] == '-' && b - 1 > word_start && s[b - 2] == '-'))
        b--;
    while (b < i && punkt_not_word_start(s[b]))
        b++;
    if (b == i)
        return true; /* the period alone is a token: a sentence end */
    const char *w = s + b;
    size_t len = i - b;
    if (is_abbreviation(w, len))
        return false;
    const char *dash = last_byte(w, len, '-');
    if (dash && is_abbreviation(dash + 1, len - (size_t)(dash + 1 - w)))
        return false;
    uint32_t first;
    size_t first_len = cp_at(s, n, b, &first);
    bool initial = first_len == len && is_word_cp(first) && !is_digit_byte(s[b]);
    if (initial || is_number_token(w, len + 1)) {
        /* orthographic heuristic: "not a sentence start" before a lowercase word and
         * before ; : , . ! ? */
        char c = s[next];
        if (c && strchr(";:,.!?", c))
            return false;
        if (!punkt_not_word_start(c) && !punkt_nonword(c)) {
            uint32_t cp;
            cp_at(s, n, next, &cp);
            if (is_lowercase_letter(cp))
                return false;
        }
    }
    return true;
}

/* Is s[i] (one of . ? !) a Punkt sentence-end candidate? It is when followed by a
 * non-word character (*next = i + 1) or by white space and a token (*next = the token). */
static bool end_candidate(const char *s, size_t n, size_t i, size_t *next)
{
    size_t after = i + 1, j = after, len;
    if (after < n && punkt_nonword(s[after])) {
        *next = after;
        return true;
    }
    while (j < n && (len = space_len(s, n, j)) != 0)
        j += len;
    if (j == after || j == n)
        return false;
    *next = j;
    return true;
}

static bool sentence_end_char(char c)
{
    return c == '.' || c == '?' || c == '!';
}

/* Splits s into sentences and tokenizes each. */
static void split_sentences(work *w, const char *s, size_t n, size_t *ntok)
{
    size_t sent_start = 0, run_start = 0; /* run: the text since the last white space */
    for (size_t i = 0; i < n; i++) {
        size_t sl = space_len(s, n, i), next, ignored;
        if (sl) {
            run_start = i + sl;
            i += sl - 1;
            continue;
        }
        if (!sentence_end_char(s[i]) || !end_candidate(s, n, i, &next))
            continue;
        /* of several candidates in one run without white space only the last counts */
        bool later = false;
        for (size_t k = i + 1; k < n && !later && !space_len(s, n, k); k++)
            later = sentence_end_char(s[k]) && end_candidate(s, n, k, &ignored);
        if (later)
            continue;
        bool brk = s[i] != '.';
        for (size_t q = run_start; q < i && !brk; q++)
            brk = s[q] == '?' || s[q] == '!';
        if (!brk && !period_ends_sentence(s, n, run_start, i, next))
            continue;
        size_t end = i + 1;
        /* realignment: ["')\]}]+? followed by white space, "--" or the end of a line
         * moves to the sentence it closes */
        for (size_t c = next; c < n && s[c] && strchr("\"')]}", s[c]);) {
            c++;
            if (c == n || space_len(s, n, c) || bytes_at(s, n, c, "--")) {
                end = next = c;
                while (next < n && (sl = space_len(s, n, next)) != 0)
                    next += sl;
                break;
            }
        }
        treebank(w, s + sent_start, end - sent_start, ntok);
        sent_start = run_start = next;
        i = next - 1;
    }
    size_t end = n; /* the last sentence, without trailing white space */
    while (end > sent_start) {
        uint32_t cp = cp_before(s, end);
        if (!is_space_cp(cp))
            break;
        end -= cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    }
    if (end > sent_start)
        treebank(w, s + sent_start, end - sent_start, ntok);
}

/* ---- entry points ---- */

static void whitespace_split(work *w, const char *s, size_t n, size_t *ntok)
{
    for (size_t i = 0; i < n;) {
        size_t len = space_len(s, n, i);
        if (len) {
            i += len;
            continue;
        }
        size_t j = i;
        uint32_t cp;
        while (j < n && !space_len(s, n, j))
            j += cp_at(s, n, j, &cp);
        add_token(w, s + i, j - i, ntok);
        i = j;
    }
}

vtr_status vtr_tokenize(const char *caption, vtr_tokenizer_mode mode, vtr_tokens *out,
                        vtr_error *err)
{
    out->n = 0;
    if (mode != VTR_TOKENIZE_WORDS && mode != VTR_TOKENIZE_WHITESPACE)
        return vtr_fail(err, VTR_ERR_INVALID, "tokenizer: unknown mode %d", (int)mode);
    work *w = out->work;
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return vtr_fail(err, VTR_ERR_NOMEM, "tokenizer: out of memory");
        out->work = w;
    }
    w->lower.n = w->out.n = 0;
    w->a.oom = w->b.oom = w->lower.oom = w->out.oom = false;
    size_t n = strlen(caption), ntok = 0;

    if (mode == VTR_TOKENIZE_WORDS) {
        long bad = lowercase(caption, n, &w->lower);
        if (bad >= 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "caption: invalid UTF-8 at byte %ld", bad);
        if (!w->lower.oom)
            split_sentences(w, w->lower.p, w->lower.n, &ntok);
    } else {
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t len = utf8_decode((const unsigned char *)caption, n, i, &cp);
            if (!len)
                return vtr_fail(err, VTR_ERR_FORMAT, "caption: invalid UTF-8 at byte %zu", i);
            i += len;
        }
        whitespace_split(w, caption, n, &ntok);
    }
    if (w->a.oom || w->b.oom || w->lower.oom || w->out.oom)
        return vtr_fail(err, VTR_ERR_NOMEM, "tokenizer: out of memory");

    if (ntok > w->tokens_cap) {
        size_t cap = ntok < 64 ? 64 : ntok * 2;
        const char **p = realloc(w->ptrs, cap * sizeof *p);
        if (!p)
            return vtr_fail(err, VTR_ERR_NOMEM, "tokenizer: out of memory");
        w->ptrs = p;
        w->tokens_cap = cap;
    }
    const char *p = w->out.p;
    for (size_t k = 0; k < ntok; k++) {
        w->ptrs[k] = p;
        p += strlen(p) + 1;
    }
    out->tokens = w->ptrs;
    out->n = ntok;
    return VTR_OK;
}

void vtr_tokens_free(vtr_tokens *tokens)
{
    work *w = tokens->work;
    if (w) {
        free(w->a.p);
        free(w->b.p);
        free(w->lower.p);
        free(w->out.p);
        free(w->ptrs);
        free(w);
    }
    memset(tokens, 0, sizeof *tokens);
}

const char *vtr_tokenizer_mode_name(vtr_tokenizer_mode mode)
{
    return mode == VTR_TOKENIZE_WORDS ? "words" : mode == VTR_TOKENIZE_WHITESPACE ? "whitespace" : "?";
}

int vtr_tokenizer_mode_parse(const char *name, vtr_tokenizer_mode *mode)
{
    if (strcmp(name, "words") == 0)
        *mode = VTR_TOKENIZE_WORDS;
    else if (strcmp(name, "whitespace") == 0)
        *mode = VTR_TOKENIZE_WHITESPACE;
    else
        return -1;
    return 0;
}
