/* hgr: the release layout of HGR (Chen et al., CVPR 2020; cshizhe/hgr_v2t):
 *   ROOT/annotation/RET/ref_captions.json          {video: [caption, ...]}
 *   ROOT/public_split/{trn,val,tst}_names.npy      numpy str arrays of video names
 *   ROOT/ordered_feature/SA/NAME/{set}_ft.hdf5     one (frames, dim) dataset per video,
 *                                                  named with '/' replaced by '_'
 *   ROOT/ordered_feature/MP/NAME/{set}_ft.npy      (n, dim), row i = names[i]
 * Also the reader of the numpy string arrays (import_hgr.h). */
#define _POSIX_C_SOURCE 200809L
#include "import_hgr.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import.h"
#include "lib/file.h"
#include "lib/npy.h"

/* ---- numpy string arrays ------------------------------------------------------------ */

#define NAMES_MAX_ITEMSIZE (1 << 20)

void vtr_name_list_free(vtr_name_list *list)
{
    if (!list)
        return;
    free(list->names);
    free(list->storage);
    *list = (vtr_name_list){0};
}

typedef struct header_cursor {
    const char *s;
    size_t len, pos;
} header_cursor;

static void skip_blanks(header_cursor *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\n'))
        c->pos++;
}

static bool take(header_cursor *c, char ch)
{
    skip_blanks(c);
    if (c->pos < c->len && c->s[c->pos] == ch) {
        c->pos++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes into buf. */
static bool take_string(header_cursor *c, char *buf, size_t size)
{
    skip_blanks(c);
    if (c->pos >= c->len || (c->s[c->pos] != '\'' && c->s[c->pos] != '"'))
        return false;
    char q = c->s[c->pos++];
    size_t n = 0;
    while (c->pos < c->len && c->s[c->pos] != q) {
        /* numpy writes printable ASCII; anything else cannot be a key or dtype we take,
         * and keeping it out keeps error messages printable */
        if (c->s[c->pos] == '\\' || c->s[c->pos] < 0x20 || c->s[c->pos] > 0x7e || n + 1 >= size)
            return false;
        buf[n++] = c->s[c->pos++];
    }
    if (c->pos >= c->len)
        return false;
    c->pos++;
    buf[n] = '\0';
    return true;
}

static bool take_word(header_cursor *c, const char *word)
{
    skip_blanks(c);
    size_t n = strlen(word);
    if (c->len - c->pos >= n && memcmp(c->s + c->pos, word, n) == 0) {
        c->pos += n;
        return true;
    }
    return false;
}

/* "(n,)" or "(a, b)" ...; at most 8 dimensions, each below 2^62. */
static bool take_shape(header_cursor *c, int *ndim, int64_t *shape)
{
    if (!take(c, '('))
        return false;
    *ndim = 0;
    for (;;) {
        skip_blanks(c);
        if (take(c, ')'))
            return true;
        if (*ndim == 8 || c->pos >= c->len || c->s[c->pos] < '0' || c->s[c->pos] > '9')
            return false;
        int64_t v = 0;
        while (c->pos < c->len && c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
            if (v > ((int64_t)1 << 58))
                return false;
            v = v * 10 + (c->s[c->pos++] - '0');
        }
        shape[(*ndim)++] = v;
        if (!take(c, ',')) {
            return take(c, ')');
        }
    }
}

/* Appends code point cp as UTF-8. */
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

/* Length of a valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

vtr_status vtr_name_list_parse(const void *buf, size_t len, const char *what, vtr_name_list *out,
                               vtr_error *err)
{
    *out = (vtr_name_list){0};
    const unsigned char *b = buf;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an NPY file (bad magic)", what);
    int major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: truncated NPY header", what);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: NPY format version %d.%d", what, major,
                        b[7]);
    }
    if (hlen > len - hstart)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: NPY header of %zu bytes runs past the end", what,
                        hlen);
    header_cursor c = {(const char *)b + hstart, hlen, 0};
    char key[32], descr[32] = "";
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    int ndim = 0;
    int64_t shape[8];
    if (!take(&c, '{'))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: NPY header is not a dict", what);
    while (!take(&c, '}')) {
        if (!take_string(&c, key, sizeof key) || !take(&c, ':'))
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: malformed NPY header", what);
        bool ok;
        if (!strcmp(key, "descr") && !have_descr) {
            ok = have_descr = take_string(&c, descr, sizeof descr);
        } else if (!strcmp(key, "fortran_order") && !have_order) {
            fortran = take_word(&c, "True");
            ok = have_order = fortran || take_word(&c, "False");
        } else if (!strcmp(key, "shape") && !have_shape) {
            ok = have_shape = take_shape(&c, &ndim, shape);
        } else {
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: NPY header key '%s' unknown or repeated",
                            what, key);
        }
        if (!ok)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: NPY header: bad value of '%s'", what, key);
        if (!take(&c, ',')) {
            if (!take(&c, '}'))
                return vtr_fail(err, VTR_ERR_FORMAT, "%s: malformed NPY header", what);
            break;
        }
    }
    skip_blanks(&c);
    if (c.pos != c.len || !have_descr || !have_order || !have_shape)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: NPY header lacks descr, fortran_order or "
                        "shape, or has text after the dict",
                        what);
    (void)fortran; /* one dimension: the same bytes either way */

    /* the dtype: [<=|]U{L} or [|]S{L} */
    const char *d = descr;
    char order = 0;
    if (*d == '<' || *d == '>' || *d == '=' || *d == '|')
        order = *d++;
    char kind = *d++;
    char *end;
    errno = 0;
    long itemlen = strtol(d, &end, 10);
    bool numeric = d[0] >= '0' && d[0] <= '9' && *end == '\0' && errno == 0;
    if (kind == 'O')
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: an object array (pickled, dtype '%s'); re-save it as a str array: "
                        "np.save(path, np.asarray(names, dtype=str))",
                        what, descr);
    if ((kind != 'U' && kind != 'S') || !numeric || itemlen < 1 || itemlen > NAMES_MAX_ITEMSIZE)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "%s: dtype '%s'; expected a numpy string array ('<U..' or '|S..')", what,
                        descr);
    if (kind == 'U' && order == '>')
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: big-endian dtype '%s'", what, descr);
    if (ndim != 1)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: %d-D array; expected a 1-D list of names", what,
                        ndim);
    size_t unit = kind == 'U' ? 4 : 1, itemsize = unit * (size_t)itemlen;
    size_t data_len = len - hstart - hlen;
    int64_t n = shape[0];
    if ((uint64_t)n > SIZE_MAX / itemsize || (size_t)n * itemsize != data_len)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: %zu data bytes for %lld names of %zu bytes (dtype '%s')", what,
                        data_len, (long long)n, itemsize, descr);

    const unsigned char *data = b + hstart + hlen;
    vtr_name_list l = {0};
    l.names = malloc((size_t)(n ? n : 1) * sizeof *l.names);
    l.storage = malloc(data_len + (size_t)n + 1); /* UTF-8 never outgrows UTF-32 */
    if (!l.names || !l.storage) {
        vtr_name_list_free(&l);
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", what);
    }
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *e = data + (size_t)i * itemsize;
        size_t units = (size_t)itemlen;
        while (units > 0 && !memcmp(e + (units - 1) * unit, "\0\0\0\0", unit))
            units--;
        const char *bad = NULL;
        if (units == 0)
            bad = "is empty";
        l.names[i] = l.storage + used;
        for (size_t k = 0; k < units && !bad; k++) {
            if (kind == 'U') {
                const unsigned char *u = e + 4 * k;
                uint32_t cp = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                              (uint32_t)u[3] << 24;
                if (cp == 0)
                    bad = "holds a NUL";
                else if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                    bad = "is not valid Unicode";
                else
                    used += put_utf8(l.storage + used, cp);
            } else {
                size_t ul = e[k] ? utf8_len(e + k, units - k) : 0;
                if (e[k] == 0)
                    bad = "holds a NUL";
                else if (ul == 0)
                    bad = "is not valid UTF-8";
                else {
                    memcpy(l.storage + used, e + k, ul);
                    used += ul;
                    k += ul - 1;
                }
            }
        }
        if (bad) {
            vtr_name_list_free(&l);
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: name %lld %s", what, (long long)i, bad);
        }
        l.storage[used++] = '\0';
    }
    l.n = (size_t)n;
    *out = l;
    return VTR_OK;
}

vtr_status vtr_name_list_load(const char *path, vtr_name_list *out, vtr_error *err)
{
    *out = (vtr_name_list){0};
    vtr_mapped_file map;
    vtr_status st = vtr_map_file(path, &map, err);
    if (st != VTR_OK)
        return st;
    st = vtr_name_list_parse(map.data ? map.data : "", map.size, path, out, err);
    vtr_unmap_file(&map);
    return st;
}

/* ---- the release layout ------------------------------------------------------------- */

static const struct {
    const char *set, *split;
} hgr_sets[] = {
    {"trn", "train"},
    {"val", "val"},
    {"tst", "test"},
};
#define HGR_SETS (sizeof hgr_sets / sizeof hgr_sets[0])

/* Limits what one corrupt HDF5 header can make us allocate: 2^32 floats (16 GiB). */
#define HGR_MAX_ELEMENTS ((hsize_t)1 << 32)

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

/* The one feature directory under dir, into *name (malloc'd). */
static vtr_status only_subdir(const char *dir, char **name, vtr_error *err)
{
    *name = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return vtr_fail_errno(err, "%s", dir);
    vtr_status st = VTR_OK;
    char found[2][256] = {"", ""};
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *p = vtr_path_join(dir, de->d_name);
        struct stat sb;
        bool sub = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (!sub)
            continue;
        if (count < 2)
            snprintf(found[count], sizeof found[count], "%s", de->d_name);
        count++;
    }
    closedir(d);
    if (count == 0)
        st = vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: no feature directory in it", dir);
    else if (count > 1)
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "%s: %d feature directories (%s, %s%s); choose one by name", dir, count,
                      found[0], found[1], count > 2 ? ", ..." : "");
    else if (!(*name = strdup(found[0])))
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return st;
}

/* Reads video `name`'s dataset from an open HDF5 file into *buf (grown as needed).
 * Failures are the item's, in *why. */
static vtr_status read_h5_video(hid_t file, const char *h5_path, const char *name, float **buf,
                                size_t *cap, vtr_tensor *rows, vtr_error *why)
{
    char *key = strdup(name);
    if (!key)
        return vtr_fail(why, VTR_ERR_NOMEM, "out of memory");
    for (char *p = key; *p; p++)
        if (*p == '/')
            *p = '_';
    /* names are valid UTF-8 without line breaks (vtr_import_item checked them) */
    const char *shown = key;
    vtr_status st = VTR_OK;
    hid_t ds = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID;
    htri_t exists = strcmp(key, ".") ? H5Lexists(file, key, H5P_DEFAULT) : 0;
    if (exists <= 0) {
        st = vtr_fail(why, VTR_ERR_NOT_FOUND, "%s: no dataset \"%s\" for video \"%s\"", h5_path,
                      shown, name);
        goto end;
    }
    if ((ds = H5Dopen2(file, key, H5P_DEFAULT)) < 0) {
        st = vtr_fail(why, VTR_ERR_FORMAT, "%s: \"%s\" is not a dataset", h5_path, shown);
        goto end;
    }
    space = H5Dget_space(ds);
    type = H5Dget_type(ds);
    int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[2] = {0, 0};
    if (ndims != 1 && ndims != 2) {
        st = vtr_fail(why, VTR_ERR_FORMAT,
                      "%s: dataset \"%s\" has %d dimensions; expected "
                      "(frames, dim)",
                      h5_path, shown, ndims);
        goto end;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (ndims == 1) { /* one vector: one frame */
        dims[1] = dims[0];
        dims[0] = 1;
    }
    if (type < 0 || H5Tget_class(type) != H5T_FLOAT) {
        st = vtr_fail(why, VTR_ERR_UNSUPPORTED, "%s: dataset \"%s\" is not of a float type",
                      h5_path, shown);
        goto end;
    }
    if (dims[1] == 0 || (dims[0] && dims[1] > HGR_MAX_ELEMENTS / dims[0])) {
        st = vtr_fail(why, VTR_ERR_FORMAT,
                      "%s: dataset \"%s\" has an implausible shape (%llu, "
                      "%llu)",
                      h5_path, shown, (unsigned long long)dims[0], (unsigned long long)dims[1]);
        goto end;
    }
    size_t count = (size_t)(dims[0] * dims[1]);
    if (count > *cap) {
        float *p = realloc(*buf, count * sizeof *p);
        if (!p) {
            st = vtr_fail(why, VTR_ERR_NOMEM, "%s: out of memory for dataset \"%s\"", h5_path,
                          shown);
            goto end;
        }
        *buf = p;
        *cap = count;
    }
    if (count > 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, *buf) < 0) {
        st = vtr_fail(why, VTR_ERR_FORMAT, "%s: cannot read dataset \"%s\"", h5_path, shown);
        goto end;
    }
    *rows = (vtr_tensor){
        .dtype = VTR_F32, .ndim = 2, .shape = {(int64_t)dims[0], (int64_t)dims[1]}, .data = *buf};
end:
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (ds >= 0)
        H5Dclose(ds);
    free(key);
    return st;
}

/* Everything a split needs, opened. */
typedef struct hgr_set {
    const char *set, *split;
    char *names_path;
    vtr_name_list names;
    char *features_path;
    hid_t h5;          /* VTR_HGR_FRAMES */
    vtr_npy_file mean; /* VTR_HGR_MEAN */
} hgr_set;

static void close_set(hgr_set *s)
{
    free(s->names_path);
    vtr_name_list_free(&s->names);
    free(s->features_path);
    if (s->h5 >= 0)
        H5Fclose(s->h5);
    vtr_npy_close(&s->mean);
}

static vtr_status open_features(hgr_set *s, vtr_hgr_features kind, vtr_error *err)
{
    if (!is_file(s->features_path))
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: missing (features of %s)", s->features_path,
                        strrchr(s->names_path, '/') + 1);
    if (kind == VTR_HGR_FRAMES) {
        if (H5Fis_hdf5(s->features_path) <= 0 ||
            (s->h5 = H5Fopen(s->features_path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an HDF5 file", s->features_path);
        return VTR_OK;
    }
    vtr_status st = vtr_npy_load(s->features_path, &s->mean, err);
    if (st != VTR_OK)
        return st;
    const vtr_tensor *t = &s->mean.tensor;
    char shape[160];
    vtr_shape_str(t->ndim, t->shape, shape, sizeof shape);
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: dtype %s; features are float32 or float16",
                        s->features_path, vtr_dtype_name(t->dtype));
    if (t->ndim != 2 || t->shape[0] != (int64_t)s->names.n)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: shape %s; expected (%zu, dim), a row per name "
                        "in %s",
                        s->features_path, shape, s->names.n, strrchr(s->names_path, '/') + 1);
    return VTR_OK;
}

/* Imports the videos of one split. */
static vtr_status import_set(vtr_import *im, hgr_set *s, vtr_hgr_features kind,
                             const json_t *captions, const char *captions_path, int64_t *done,
                             int64_t total, float **buf, size_t *cap, vtr_error *err)
{
    const char *names_file = strrchr(s->names_path, '/') + 1;
    for (size_t i = 0; i < s->names.n; i++) {
        const char *name = s->names.names[i];
        int64_t index;
        bool added;
        vtr_status st = vtr_import_item(im, name, &index, &added, err);
        if (st != VTR_OK) {
            vtr_error_context(err, "%s: name %zu", s->names_path, i);
            return st;
        }
        if ((st = vtr_import_split(im, index, s->split, err)) != VTR_OK)
            return st;
        if (!added) {
            vtr_import_progress(im, ++*done, total);
            continue;
        }
        const json_t *caps = json_object_get(captions, name);
        if (!caps)
            return vtr_fail(err, VTR_ERR_NOT_FOUND,
                            "%s: no captions for video \"%s\" (named in %s)", captions_path, name,
                            names_file);
        if (!json_is_array(caps))
            return vtr_fail(err, VTR_ERR_FORMAT, "%s: video \"%s\": captions are not a list",
                            captions_path, name);
        size_t j;
        const json_t *cap_text;
        json_array_foreach(caps, j, cap_text)
        {
            if (!json_is_string(cap_text))
                return vtr_fail(err, VTR_ERR_FORMAT,
                                "%s: video \"%s\": caption %zu is not a string", captions_path,
                                name, j);
            if ((st = vtr_import_caption(im, index, json_string_value(cap_text), err)) != VTR_OK)
                return st;
        }
        if (vtr_import_has_store(im)) {
            vtr_tensor rows;
            if (kind == VTR_HGR_FRAMES) {
                vtr_error why;
                vtr_error_clear(&why);
                if (read_h5_video(s->h5, s->features_path, name, buf, cap, &rows, &why) != VTR_OK) {
                    if (why.status == VTR_ERR_NOMEM) {
                        if (err)
                            *err = why;
                        return why.status;
                    }
                    if ((st = vtr_import_item_failed(im, index, &why, err)) != VTR_OK)
                        return st;
                    vtr_import_progress(im, ++*done, total);
                    continue;
                }
            } else {
                const vtr_tensor *t = &s->mean.tensor;
                rows = (vtr_tensor){.dtype = t->dtype,
                                    .ndim = 2,
                                    .shape = {1, t->shape[1]},
                                    .data = (char *)t->data +
                                            i * (size_t)t->shape[1] * vtr_dtype_size(t->dtype)};
            }
            if ((st = vtr_import_features(im, index, &rows, err)) != VTR_OK) {
                vtr_error_context(err, "%s", s->features_path);
                return st;
            }
        }
        vtr_import_progress(im, ++*done, total);
    }
    return VTR_OK;
}

vtr_status vtr_import_hgr(const char *root, vtr_hgr_features kind, const char *feature_name,
                          const vtr_import_options *opt, vtr_import_stats *stats, vtr_error *err)
{
    if (stats)
        *stats = (vtr_import_stats){0};
    if (kind != VTR_HGR_FRAMES && kind != VTR_HGR_MEAN)
        return vtr_fail(err, VTR_ERR_INVALID, "hgr import: unknown feature kind %d", (int)kind);
    const char *kind_dir = kind == VTR_HGR_FRAMES ? "SA" : "MP";
    const char *suffix = kind == VTR_HGR_FRAMES ? "_ft.hdf5" : "_ft.npy";
    hgr_set sets[HGR_SETS];
    for (size_t i = 0; i < HGR_SETS; i++)
        sets[i] =
            (hgr_set){.set = hgr_sets[i].set, .split = hgr_sets[i].split, .h5 = H5I_INVALID_HID};
    char *captions_path = vtr_path_join(root, "annotation/RET/ref_captions.json");
    char *split_dir = vtr_path_join(root, "public_split");
    char *features_dir = NULL, *name = NULL, *extractor = NULL;
    json_t *captions = NULL, *source = NULL;
    vtr_import *im = NULL;
    float *buf = NULL;
    size_t cap = 0;
    vtr_status st = VTR_OK;

    /* the library prints its error stack by default; the library never prints */
    H5E_auto2_t saved_func = NULL;
    void *saved_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    if (!captions_path || !split_dir) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    struct stat sb;
    if (stat(root, &sb) != 0) {
        st = vtr_fail_errno(err, "%s", root);
        goto end;
    }
    if ((st = vtr_import_load_json(captions_path, &captions, err)) != VTR_OK)
        goto end;
    if (!json_is_object(captions)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: not an object {video: [captions]}", captions_path);
        goto end;
    }
    int64_t total = 0;
    size_t present = 0;
    for (size_t i = 0; i < HGR_SETS; i++) {
        char file[32];
        snprintf(file, sizeof file, "%s_names.npy", sets[i].set);
        if (!(sets[i].names_path = vtr_path_join(split_dir, file))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        if (!is_file(sets[i].names_path))
            continue;
        if ((st = vtr_name_list_load(sets[i].names_path, &sets[i].names, err)) != VTR_OK)
            goto end;
        total += (int64_t)sets[i].names.n;
        present++;
    }
    if (present == 0) {
        st = vtr_fail(err, VTR_ERR_NOT_FOUND,
                      "%s: no trn_names.npy, val_names.npy or "
                      "tst_names.npy",
                      split_dir);
        goto end;
    }
    if (opt->store) {
        char sub[32];
        snprintf(sub, sizeof sub, "ordered_feature/%s", kind_dir);
        if (!(features_dir = vtr_path_join(root, sub))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        if (feature_name)
            name = strdup(feature_name);
        else if ((st = only_subdir(features_dir, &name, err)) != VTR_OK)
            goto end;
        if (!name) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        for (size_t i = 0; i < HGR_SETS; i++) {
            if (!sets[i].names.names)
                continue;
            size_t n = strlen(features_dir) + strlen(name) + strlen(sets[i].set) + 16;
            if (!(sets[i].features_path = malloc(n))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
                goto end;
            }
            snprintf(sets[i].features_path, n, "%s/%s/%s%s", features_dir, name, sets[i].set,
                     suffix);
            if ((st = open_features(&sets[i], kind, err)) != VTR_OK)
                goto end;
        }
        size_t n = strlen(kind_dir) + strlen(name) + 24;
        if (!(extractor = malloc(n))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        snprintf(extractor, n, "imported:hgr/%s/%s", kind_dir, name);
    }
    source = json_pack("{s:s, s:s, s:s?}", "layout", "hgr", "root", root, "features",
                       extractor ? extractor + strlen("imported:hgr/") : NULL);
    if (!source) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = vtr_import_begin(opt, "hgr", true, extractor, source, &im, err)) != VTR_OK)
        goto end;
    int64_t done = 0;
    for (size_t i = 0; i < HGR_SETS; i++)
        if (sets[i].names.names && (st = import_set(im, &sets[i], kind, captions, captions_path,
                                                    &done, total, &buf, &cap, err)) != VTR_OK)
            goto end;
    st = vtr_import_finish(im, stats, err);
    im = NULL;
end:
    vtr_import_abort(im);
    for (size_t i = 0; i < HGR_SETS; i++)
        close_set(&sets[i]);
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    free(buf);
    json_decref(captions);
    json_decref(source);
    free(captions_path);
    free(split_dir);
    free(features_dir);
    free(name);
    free(extractor);
    return st;
}
