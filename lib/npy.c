/* NPY reader and writer. Layout of a file (all little-endian):
 *
 *   "\x93NUMPY" major minor   8 bytes
 *   header length             u16 (1.0) or u32 (2.0, 3.0)
 *   header                    a Python dict literal, latin1 (1.0, 2.0) or UTF-8 (3.0),
 *                             padded with spaces and ended by '\n' so that the data
 *                             starts at a multiple of 64
 *   data                      C-ordered elements
 *
 * The header is parsed by a small recursive-descent parser of exactly the literal numpy
 * writes: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } with the keys in
 * any order, either quote, any whitespace, an optional trailing comma, and Python 2's
 * "3L" integers, which numpy itself still accepts.
 */
#include "npy.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_PREAMBLE_V1 10 /* magic, version, u16 length */
#define NPY_PREAMBLE_V2 12 /* magic, version, u32 length */
#define NPY_ALIGN 64
/* numpy >= 1.24 leaves this many columns after "'shape': (" for the first dimension so
 * that a file can grow in place; vtr writes the same spaces, so its bytes equal np.save's. */
#define NPY_GROWTH_AXIS_DIGITS 21
/* Big enough for the dict of any vtr_tensor (8 dims of 20 digits) plus 64 of padding. */
#define NPY_HEADER_MAX 512
_Static_assert(VTR_NPY_HEADER_MAX >= NPY_HEADER_MAX + NPY_ALIGN + NPY_PREAMBLE_V2,
               "VTR_NPY_HEADER_MAX holds any header build_header writes");

static const struct {
    vtr_dtype dtype;
    char kind;
    unsigned size;
    const char *descr; /* what vtr writes, as numpy does */
} npy_types[] = {
    {VTR_F32, 'f', 4, "<f4"}, {VTR_F16, 'f', 2, "<f2"}, {VTR_U8, 'u', 1, "|u1"},
    {VTR_I32, 'i', 4, "<i4"}, {VTR_I64, 'i', 8, "<i8"},
};
#define NPY_TYPE_COUNT (sizeof npy_types / sizeof npy_types[0])

static const char *npy_descr(vtr_dtype dtype)
{
    for (size_t i = 0; i < NPY_TYPE_COUNT; i++)
        if (npy_types[i].dtype == dtype)
            return npy_types[i].descr;
    return NULL;
}


/* ---- header parser ---- */

typedef struct header_parser {
    const char *p, *end;
    const char *file_start; /* for byte offsets in messages */
    vtr_error *err;
} header_parser;

static size_t offset_of(const header_parser *hp)
{
    return (size_t)(hp->p - hp->file_start);
}

static vtr_status syntax_error(header_parser *hp, const char *expected)
{
    if (hp->p == hp->end)
        return vtr_fail(hp->err, VTR_ERR_FORMAT, "NPY header: expected %s, found the end",
                        expected);
    return vtr_fail(hp->err, VTR_ERR_FORMAT, "NPY header: expected %s at byte %zu", expected,
                    offset_of(hp));
}

static void skip_space(header_parser *hp)
{
    while (hp->p < hp->end &&
           (*hp->p == ' ' || *hp->p == '\t' || *hp->p == '\n' || *hp->p == '\r'))
        hp->p++;
}

static bool peek(const header_parser *hp, char c)
{
    return hp->p < hp->end && *hp->p == c;
}

/* Skips white space, then consumes c if it is next. */
static bool accept(header_parser *hp, char c)
{
    skip_space(hp);
    if (!peek(hp, c))
        return false;
    hp->p++;
    return true;
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* A quoted string without escapes: 'abc' or "abc". Sets *s, *n to its contents. */
static vtr_status parse_string(header_parser *hp, const char **s, size_t *n)
{
    skip_space(hp);
    if (!peek(hp, '\'') && !peek(hp, '"'))
        return syntax_error(hp, "a quoted string");
    char quote = *hp->p++;
    const char *start = hp->p;
    while (hp->p < hp->end && *hp->p != quote) {
        if (*hp->p == '\\' || *hp->p == '\n')
            return syntax_error(hp, "a string without escapes or line breaks");
        hp->p++;
    }
    if (hp->p == hp->end)
        return syntax_error(hp, "the end of a string");
    *s = start;
    *n = (size_t)(hp->p - start);
    hp->p++;
    return VTR_OK;
}

static vtr_status parse_bool(header_parser *hp, bool *value)
{
    skip_space(hp);
    size_t left = (size_t)(hp->end - hp->p);
    const char *word = NULL;
    if (left >= 4 && memcmp(hp->p, "True", 4) == 0)
        word = "True", *value = true;
    else if (left >= 5 && memcmp(hp->p, "False", 5) == 0)
        word = "False", *value = false;
    if (!word)
        return syntax_error(hp, "True or False");
    const char *after = hp->p + strlen(word);
    if (after < hp->end && is_word_char(*after))
        return syntax_error(hp, "True or False");
    hp->p = after;
    return VTR_OK;
}

/* A decimal integer, optionally signed, optionally with Python 2's L suffix. */
static vtr_status parse_int(header_parser *hp, int64_t *value)
{
    skip_space(hp);
    bool negative = false;
    if (peek(hp, '-') || peek(hp, '+'))
        negative = *hp->p++ == '-';
    if (hp->p == hp->end || *hp->p < '0' || *hp->p > '9')
        return syntax_error(hp, "an integer");
    uint64_t v = 0;
    while (hp->p < hp->end && *hp->p >= '0' && *hp->p <= '9') {
        unsigned digit = (unsigned)(*hp->p - '0');
        if (v > ((uint64_t)INT64_MAX - digit) / 10)
            return vtr_fail(hp->err, VTR_ERR_FORMAT,
                            "NPY header: integer at byte %zu does not fit in 64 bits",
                            offset_of(hp));
        v = v * 10 + digit;
        hp->p++;
    }
    if (peek(hp, 'L') || peek(hp, 'l'))
        hp->p++;
    if (hp->p < hp->end && is_word_char(*hp->p))
        return syntax_error(hp, "an integer");
    *value = negative ? -(int64_t)v : (int64_t)v;
    return VTR_OK;
}

/* A tuple of integers: () or (5,) or (3, 4) or (3, 4,). */
static vtr_status parse_shape(header_parser *hp, int *ndim, int64_t *shape)
{
    if (!accept(hp, '('))
        return syntax_error(hp, "a shape tuple");
    *ndim = 0;
    if (accept(hp, ')'))
        return VTR_OK;
    for (;;) {
        if (*ndim == VTR_MAX_DIMS)
            return vtr_fail(hp->err, VTR_ERR_UNSUPPORTED,
                            "NPY shape has more than %d dimensions", VTR_MAX_DIMS);
        vtr_status st = parse_int(hp, &shape[(*ndim)++]);
        if (st != VTR_OK)
            return st;
        if (accept(hp, ')')) {
            if (*ndim == 1) /* "(5)" is the integer 5 in Python, not a tuple */
                return vtr_fail(hp->err, VTR_ERR_FORMAT,
                                "NPY header: shape (%lld) is not a tuple (write (%lld,))",
                                (long long)shape[0], (long long)shape[0]);
            return VTR_OK;
        }
        if (!accept(hp, ','))
            return syntax_error(hp, "',' or ')' in the shape");
        if (accept(hp, ')'))
            return VTR_OK;
    }
}

/* Maps a numpy type string ("<f4", "|u1", "u1", ...) to a vtr dtype. */
static vtr_status parse_descr(const char *s, size_t n, vtr_dtype *dtype, vtr_error *err)
{
    char shown[64];
    vtr_printable(s, n, shown, sizeof shown);
    char order = 0;
    const char *p = s, *end = s + n;
    if (p < end && memchr("<>=|", *p, 4)) /* memchr: a NUL byte is no byte order */
        order = *p++;
    if (p < end && *p == 'O')
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "NPY dtype '%s': object arrays are not supported", shown);
    if (end - p >= 2 && end - p <= 3) {
        char kind = *p++;
        unsigned size = 0;
        while (p < end && *p >= '0' && *p <= '9')
            size = size * 10 + (unsigned)(*p++ - '0');
        for (size_t i = 0; p == end && i < NPY_TYPE_COUNT; i++) {
            if (npy_types[i].kind != kind || npy_types[i].size != size)
                continue;
            if (order == '>' && size > 1)
                return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                                "NPY dtype '%s': big-endian data is not supported", shown);
            *dtype = npy_types[i].dtype;
            return VTR_OK;
        }
    }
    return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                    "NPY dtype '%s' is not supported (vtr reads <f4, <f2, |u1, <i4, <i8)",
                    shown);
}

/* The dict of an NPY header, its descr not yet interpreted (numbers and strings differ). */
typedef struct npy_dict {
    const char *descr; /* points into the header */
    size_t descr_len;
    bool fortran;
    int ndim;
    int64_t shape[VTR_MAX_DIMS];
} npy_dict;

/* Parses the dict literal in [text, text + len); file_start locates bytes in messages. */
static vtr_status parse_dict(const char *text, size_t len, const char *file_start,
                             npy_dict *out, vtr_error *err)
{
    header_parser hp = {text, text + len, file_start, err};
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    vtr_status st;

    if (!accept(&hp, '{'))
        return syntax_error(&hp, "'{'");
    while (!accept(&hp, '}')) {
        const char *key;
        size_t key_len;
        if ((st = parse_string(&hp, &key, &key_len)) != VTR_OK)
            return st;
        if (!accept(&hp, ':'))
            return syntax_error(&hp, "':'");
        bool *seen;
        if (key_len == 5 && memcmp(key, "descr", 5) == 0) {
            seen = &seen_descr;
            skip_space(&hp);
            if (peek(&hp, '[') || peek(&hp, '{'))
                return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                                "NPY structured dtypes are not supported");
            st = parse_string(&hp, &out->descr, &out->descr_len);
        } else if (key_len == 13 && memcmp(key, "fortran_order", 13) == 0) {
            seen = &seen_fortran;
            st = parse_bool(&hp, &out->fortran);
        } else if (key_len == 5 && memcmp(key, "shape", 5) == 0) {
            seen = &seen_shape;
            st = parse_shape(&hp, &out->ndim, out->shape);
        } else {
            char shown[64];
            return vtr_fail(err, VTR_ERR_FORMAT, "NPY header: unexpected key '%s'",
                            vtr_printable(key, key_len, shown, sizeof shown));
        }
        if (st != VTR_OK)
            return st;
        if (*seen)
            return vtr_fail(err, VTR_ERR_FORMAT, "NPY header: duplicate key '%.*s'",
                            (int)key_len, key);
        *seen = true;
        if (!accept(&hp, ',')) {
            if (!accept(&hp, '}'))
                return syntax_error(&hp, "',' or '}'");
            break;
        }
    }
    skip_space(&hp);
    if (hp.p != hp.end)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "NPY header: unexpected bytes after the dictionary at byte %zu",
                        offset_of(&hp));
    const char *missing = !seen_descr ? "descr" : !seen_fortran ? "fortran_order"
                        : !seen_shape ? "shape" : NULL;
    if (missing)
        return vtr_fail(err, VTR_ERR_FORMAT, "NPY header: missing key '%s'", missing);
    return VTR_OK;
}

/* ---- reader ---- */

static uint32_t read_le(const unsigned char *p, int bytes)
{
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Checks the preamble of the image buf (len bytes) and parses its header dict; sets
 * *data_offset to where the data starts (<= len). */
static vtr_status parse_image_header(const unsigned char *b, size_t len, npy_dict *dict,
                                     size_t *data_offset, vtr_error *err)
{
    if (len == 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "empty file, not an NPY array");
    if (len < NPY_MAGIC_LEN || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        if (memcmp(b, NPY_MAGIC, len < NPY_MAGIC_LEN ? len : NPY_MAGIC_LEN) != 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "not an NPY file (bad magic)");
        return vtr_fail(err, VTR_ERR_FORMAT, "truncated NPY file: %zu bytes", len);
    }
    if (len < NPY_MAGIC_LEN + 2)
        return vtr_fail(err, VTR_ERR_FORMAT, "truncated NPY file: %zu bytes", len);
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "NPY version %u.%u is not supported (vtr reads 1.0, 2.0, 3.0)", major,
                        minor);
    size_t preamble = major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    if (len < preamble)
        return vtr_fail(err, VTR_ERR_FORMAT, "truncated NPY file: %zu bytes", len);
    size_t header_len = read_le(b + 8, major == 1 ? 2 : 4);
    if (header_len > len - preamble)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "truncated NPY header: it claims %zu bytes, %zu are present",
                        header_len, len - preamble);

    /* Version 3.0 headers are UTF-8, 1.0 and 2.0 latin1; the syntax is ASCII either way,
     * and non-ASCII bytes can only sit inside strings, whose values are checked. */
    *data_offset = preamble + header_len;
    return parse_dict((const char *)b + preamble, header_len, (const char *)b, dict, err);
}

vtr_status vtr_npy_parse(const void *buf, size_t len, vtr_tensor *out, vtr_error *err)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    npy_dict h;
    vtr_dtype dtype = VTR_F32;
    size_t data_offset, nbytes;
    vtr_status st = parse_image_header(b, len, &h, &data_offset, err);
    if (st != VTR_OK)
        return st;
    if ((st = parse_descr(h.descr, h.descr_len, &dtype, err)) != VTR_OK)
        return st;
    if (h.fortran && h.ndim > 1)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "Fortran order is not supported");
    /* with fewer than 2 dimensions Fortran and C order are the same bytes */

    if (vtr_shape_nbytes(dtype, h.ndim, h.shape, SIZE_MAX, &nbytes, err) != VTR_OK) {
        vtr_error_context(err, "NPY header");
        return VTR_ERR_FORMAT;
    }
    char shape[200];
    vtr_shape_str(h.ndim, h.shape, shape, sizeof shape);
    size_t present = len - data_offset;
    if (nbytes > present)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "truncated NPY data: %s %s needs %zu bytes, %zu are present",
                        vtr_dtype_name(dtype), shape, nbytes, present);
    if (nbytes < present)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "NPY file has %zu trailing bytes after the %s %s data",
                        present - nbytes, vtr_dtype_name(dtype), shape);

    out->dtype = dtype;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->data = (void *)(uintptr_t)(b + data_offset);
    return VTR_OK;
}

vtr_status vtr_npy_load(const char *path, vtr_npy_file *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_status st = vtr_map_file(path, &out->map, err);
    if (st != VTR_OK)
        return st; /* the message already names the path */
    st = vtr_npy_parse(out->map.data, out->map.size, &out->tensor, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", path);
        vtr_npy_close(out);
    }
    return st;
}

void vtr_npy_close(vtr_npy_file *file)
{
    vtr_unmap_file(&file->map);
    memset(&file->tensor, 0, sizeof file->tensor);
}

/* ---- string arrays ---- */

/* Longest element accepted, in code units: bounds what one header makes us allocate. */
#define NPY_STRING_MAX_UNITS (1 << 20)

void vtr_npy_strings_free(vtr_npy_strings *s)
{
    if (!s)
        return;
    free(s->items);
    free(s->storage);
    *s = (vtr_npy_strings){0};
}

/* Parses a string dtype "[<>=|]U{L}" or "[<>=|]S{L}": *kind 'U' or 'S', *units L. */
static vtr_status parse_string_descr(const char *s, size_t n, char *kind, size_t *units,
                                     vtr_error *err)
{
    char shown[64];
    vtr_printable(s, n, shown, sizeof shown);
    const char *p = s, *end = s + n;
    char order = 0;
    if (p < end && memchr("<>=|", *p, 4))
        order = *p++;
    *kind = p < end ? *p++ : 0;
    size_t len = 0;
    bool numeric = p < end;
    for (; p < end && numeric; p++) {
        numeric = *p >= '0' && *p <= '9';
        len = len * 10 + (size_t)(*p - '0');
        if (len > NPY_STRING_MAX_UNITS)
            numeric = false;
    }
    if (*kind == 'O')
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "an object array (pickled, dtype '%s'); re-save it as a str array: "
                        "np.save(path, np.asarray(names, dtype=str))",
                        shown);
    if ((*kind != 'U' && *kind != 'S') || !numeric || len < 1)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "dtype '%s'; expected a numpy string array ('<U..' or '|S..')", shown);
    if (*kind == 'U' && order == '>')
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "big-endian dtype '%s'", shown);
    *units = len;
    return VTR_OK;
}

/* Appends code point cp (valid Unicode) as UTF-8; returns the bytes written. */
static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Converts element e (units code units of unit bytes, kind 'U' or 'S', trailing NULs
 * already cut) to UTF-8 at out; sets *used to the bytes written. Returns NULL, or what
 * is wrong with it. */
static const char *decode_string(const unsigned char *e, size_t units, char kind, char *out,
                                 size_t *used)
{
    size_t n = 0;
    if (units == 0)
        return "is empty";
    for (size_t k = 0; k < units; k++) {
        if (kind == 'U') {
            uint32_t cp = read_le(e + 4 * k, 4);
            if (cp == 0)
                return "holds a NUL";
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return "is not valid Unicode";
            n += put_utf8(out + n, cp);
        } else {
            if (e[k] == 0)
                return "holds a NUL";
            size_t ul = vtr_utf8_len((const char *)e + k, units - k);
            if (ul == 0)
                return "is not valid UTF-8";
            memcpy(out + n, e + k, ul);
            n += ul;
            k += ul - 1;
        }
    }
    *used = n;
    return NULL;
}

vtr_status vtr_npy_parse_strings(const void *buf, size_t len, vtr_npy_strings *out,
                                 vtr_error *err)
{
    const unsigned char *b = buf;
    *out = (vtr_npy_strings){0};
    npy_dict h;
    size_t data_offset, units = 0;
    char kind = 0;
    vtr_status st = parse_image_header(b, len, &h, &data_offset, err);
    if (st != VTR_OK)
        return st;
    if ((st = parse_string_descr(h.descr, h.descr_len, &kind, &units, err)) != VTR_OK)
        return st;
    /* Fortran order: one dimension is the same bytes either way */
    if (h.ndim != 1)
        return vtr_fail(err, VTR_ERR_FORMAT, "%d-D array; expected a 1-D list of names",
                        h.ndim);
    char shown[64];
    vtr_printable(h.descr, h.descr_len, shown, sizeof shown);
    size_t unit = kind == 'U' ? 4 : 1, itemsize = unit * units;
    size_t data_len = len - data_offset;
    int64_t n = h.shape[0];
    if (n < 0 || (uint64_t)n > SIZE_MAX / itemsize || (size_t)n * itemsize != data_len)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%zu data bytes for %lld names of %zu bytes (dtype '%s')", data_len,
                        (long long)n, itemsize, shown);

    const unsigned char *data = b + data_offset;
    vtr_npy_strings l = {0};
    l.items = malloc((size_t)(n ? n : 1) * sizeof *l.items);
    l.storage = malloc(data_len + (size_t)n + 1); /* UTF-8 never outgrows UTF-32 */
    if (!l.items || !l.storage) {
        vtr_npy_strings_free(&l);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *e = data + (size_t)i * itemsize;
        size_t kept = units, written = 0;
        while (kept > 0 && !memcmp(e + (kept - 1) * unit, "\0\0\0\0", unit))
            kept--;
        const char *bad = decode_string(e, kept, kind, l.storage + used, &written);
        if (bad) {
            vtr_npy_strings_free(&l);
            return vtr_fail(err, VTR_ERR_FORMAT, "name %lld %s", (long long)i, bad);
        }
        l.items[i] = l.storage + used;
        used += written;
        l.storage[used++] = '\0';
    }
    l.n = (size_t)n;
    *out = l;
    return VTR_OK;
}

vtr_status vtr_npy_load_strings(const char *path, vtr_npy_strings *out, vtr_error *err)
{
    *out = (vtr_npy_strings){0};
    vtr_mapped_file map;
    vtr_status st = vtr_map_file(path, &map, err);
    if (st != VTR_OK)
        return st; /* the message already names the path */
    st = vtr_npy_parse_strings(map.data, map.size, out, err);
    if (st != VTR_OK)
        vtr_error_context(err, "%s", path);
    vtr_unmap_file(&map);
    return st;
}

/* ---- writer ---- */

/* Checks that an NPY header can describe t (its data aside) and sets its descr and the
 * data's byte size. */
static vtr_status check_header(const vtr_tensor *t, int version, const char *what,
                               const char **descr, size_t *nbytes, vtr_error *err)
{
    if (version < 0 || version > 3)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: NPY version %d (use 1, 2, 3 or 0)", what,
                        version);
    if ((unsigned)t->dtype >= VTR_DTYPE_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: invalid dtype %d", what, (int)t->dtype);
    *descr = npy_descr(t->dtype);
    if (!*descr)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: NPY has no %s dtype", what,
                        vtr_dtype_name(t->dtype));
    vtr_error shape_err;
    if (vtr_shape_nbytes(t->dtype, t->ndim, t->shape, SIZE_MAX, nbytes, &shape_err) != VTR_OK)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: %s", what, shape_err.msg);
    return VTR_OK;
}

/* check_header, and that t has its data. */
static vtr_status check_writable(const vtr_tensor *t, int version, const char *what,
                                 const char **descr, size_t *nbytes, vtr_error *err)
{
    vtr_status st = check_header(t, version, what, descr, nbytes, err);
    if (st == VTR_OK && *nbytes > 0 && !t->data)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: tensor has no data", what);
    return st;
}

/* Builds the complete header (preamble, dict, padding, '\n') into buf, byte for byte as
 * numpy >= 1.24 writes it. Returns its length. */
static size_t build_header(const vtr_tensor *t, const char *descr, int version,
                           unsigned char *buf)
{
    char shape[200], dict[NPY_HEADER_MAX];
    vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
    int dict_len = snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                            shape);
    if (t->ndim > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%lld", (long long)t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_AXIS_DIGITS; i++)
            dict[dict_len++] = ' ';
    }
    size_t text_len = (size_t)dict_len + 1; /* with the final '\n' */
    size_t preamble = NPY_PREAMBLE_V1;
    size_t header_len = text_len + NPY_ALIGN - (preamble + text_len) % NPY_ALIGN;
    if (version == 0) /* numpy's rule; a vtr_tensor's header always fits 1.0 */
        version = header_len > 65535 ? 2 : 1;
    if (version != 1) {
        preamble = NPY_PREAMBLE_V2;
        header_len = text_len + NPY_ALIGN - (preamble + text_len) % NPY_ALIGN;
    }
    size_t pad = header_len - text_len;

    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = (unsigned char)version;
    buf[7] = 0;
    for (size_t i = 0; i < preamble - 8; i++)
        buf[8 + i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + preamble, dict, (size_t)dict_len);
    memset(buf + preamble + dict_len, ' ', pad);
    buf[preamble + header_len - 1] = '\n';
    return preamble + header_len;
}

size_t vtr_npy_serialized_size(const vtr_tensor *t, int version)
{
    const char *descr;
    size_t nbytes;
    unsigned char header[VTR_NPY_HEADER_MAX];
    if (check_writable(t, version, "", &descr, &nbytes, NULL) != VTR_OK)
        return 0;
    size_t header_len = build_header(t, descr, version, header);
    return nbytes > SIZE_MAX - header_len ? 0 : header_len + nbytes;
}

vtr_status vtr_npy_header_init(vtr_npy_header *h, vtr_dtype dtype, int ndim,
                               const int64_t *shape, vtr_error *err)
{
    memset(h, 0, sizeof *h);
    vtr_tensor t = {.dtype = dtype, .ndim = ndim};
    if (ndim < 1 || ndim > VTR_MAX_DIMS)
        return vtr_fail(err, VTR_ERR_INVALID, "NPY header: %d dimensions (1 to %d)", ndim,
                        VTR_MAX_DIMS);
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    const char *descr;
    size_t nbytes;
    vtr_status st = check_header(&t, 1, "NPY header", &descr, &nbytes, err);
    if (st != VTR_OK)
        return st;
    h->dtype = dtype;
    h->ndim = ndim;
    memcpy(h->shape, t.shape, sizeof h->shape);
    h->len = build_header(&t, descr, 1, h->bytes);
    return VTR_OK;
}

vtr_status vtr_npy_header_set_rows(vtr_npy_header *h, int64_t rows, vtr_error *err)
{
    int64_t shape[VTR_MAX_DIMS];
    memcpy(shape, h->shape, sizeof shape);
    shape[0] = rows;
    vtr_npy_header next;
    vtr_status st = vtr_npy_header_init(&next, h->dtype, h->ndim, shape, err);
    if (st != VTR_OK)
        return st;
    if (next.len != h->len) /* the first dimension's padding makes this unreachable */
        return vtr_fail(err, VTR_ERR_INVALID,
                        "NPY header: %lld rows do not fit in the reserved header",
                        (long long)rows);
    *h = next;
    return VTR_OK;
}

vtr_status vtr_npy_write_stream(FILE *fp, const vtr_tensor *t, int version, const char *what,
                                vtr_error *err)
{
    const char *descr;
    size_t nbytes;
    unsigned char header[VTR_NPY_HEADER_MAX];
    vtr_status st = check_writable(t, version, what, &descr, &nbytes, err);
    if (st != VTR_OK)
        return st;
    size_t header_len = build_header(t, descr, version, header);
    st = vtr_write_all(fp, header, header_len, what, err);
    if (st == VTR_OK)
        st = vtr_write_all(fp, t->data, nbytes, what, err);
    return st;
}

vtr_status vtr_npy_save(const char *path, const vtr_tensor *t, int version, vtr_error *err)
{
    const char *descr;
    size_t nbytes;
    /* refuse before creating anything, so that a bad tensor leaves no file behind */
    vtr_status st = check_writable(t, version, path, &descr, &nbytes, err);
    if (st != VTR_OK)
        return st;
    vtr_atomic_file file;
    if ((st = vtr_atomic_open(&file, path, err)) != VTR_OK)
        return st;
    st = vtr_npy_write_stream(file.fp, t, version, path, err);
    if (st == VTR_OK)
        st = vtr_atomic_commit(&file, err);
    else
        vtr_atomic_abort(&file);
    return st;
}
