#define _POSIX_C_SOURCE 200809L
#include "record.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "npy.h"

#define HEADER_SIZE 24
static const char record_magic[4] = {'V', 'T', 'R', 'R'};

struct vtr_record_reader {
    FILE *in;
    char *name;
    char *key;       /* key_len + 1 bytes */
    size_t key_cap;
    char *meta_text;
    size_t meta_cap;
    json_t *meta;
    unsigned char *payload;
    size_t payload_cap;
    uint64_t index;  /* records read so far, for messages */
};

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A key is non-empty, valid UTF-8 and has no NUL byte: a refusal with status (the
 * writer's VTR_ERR_INVALID, the reader's VTR_ERR_FORMAT) when it is not. */
static vtr_status check_key(const char *key, size_t len, vtr_status status, vtr_error *err)
{
    char shown[96];
    vtr_printable(key, len, shown, sizeof shown);
    if (len == 0)
        return vtr_fail(err, status, "empty record key");
    if (len > VTR_RECORD_MAX_KEY)
        return vtr_fail(err, status, "record key of %zu bytes (at most %d)", len,
                        VTR_RECORD_MAX_KEY);
    if (memchr(key, '\0', len))
        return vtr_fail(err, status, "record key '%s' contains a NUL byte", shown);
    if (!vtr_utf8_valid(key, len))
        return vtr_fail(err, status, "record key '%s' is not valid UTF-8", shown);
    return VTR_OK;
}

vtr_status vtr_record_key_check(const char *key, vtr_error *err)
{
    return check_key(key, strlen(key), VTR_ERR_INVALID, err);
}

vtr_status vtr_record_write(FILE *out, const char *key, const json_t *meta,
                            const vtr_tensor *array, const char *what, vtr_error *err)
{
    vtr_status st = vtr_record_key_check(key, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", what);
        return st;
    }
    if (meta && !json_is_object(meta))
        return vtr_fail(err, VTR_ERR_INVALID, "%s: record %s: metadata is not a JSON object",
                        what, key);
    char *meta_text = meta ? json_dumps(meta, VTR_JSON_FLAGS) : strdup("{}");
    if (!meta_text)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: record %s: metadata not serializable", what,
                        key);
    size_t key_len = strlen(key), meta_len = strlen(meta_text);
    size_t payload_len = vtr_npy_serialized_size(array, 0);
    if (payload_len == 0) {
        st = vtr_fail(err, VTR_ERR_INVALID, "%s: record %s: a %s array cannot be stored as NPY",
                      what, key, vtr_dtype_name(array->dtype));
        goto end;
    }
    if (meta_len > VTR_RECORD_MAX_META) {
        st = vtr_fail(err, VTR_ERR_INVALID, "%s: record %s: metadata of %zu bytes is too large",
                      what, key, meta_len);
        goto end;
    }
    unsigned char header[HEADER_SIZE];
    memcpy(header, record_magic, 4);
    put_u16(header + 4, VTR_RECORD_VERSION);
    put_u16(header + 6, 0);
    put_u32(header + 8, (uint32_t)key_len);
    put_u32(header + 12, (uint32_t)meta_len);
    put_u64(header + 16, payload_len);
    if ((st = vtr_write_all(out, header, sizeof header, what, err)) != VTR_OK ||
        (st = vtr_write_all(out, key, key_len, what, err)) != VTR_OK ||
        (st = vtr_write_all(out, meta_text, meta_len, what, err)) != VTR_OK ||
        (st = vtr_npy_write_stream(out, array, 0, what, err)) != VTR_OK)
        goto end;
end:
    free(meta_text);
    return st;
}

vtr_record_reader *vtr_record_reader_new(FILE *in, const char *name)
{
    vtr_record_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->in = in;
    r->name = strdup(name ? name : "stream");
    if (!r->name) {
        free(r);
        return NULL;
    }
    return r;
}

void vtr_record_reader_free(vtr_record_reader *r)
{
    if (!r)
        return;
    json_decref(r->meta);
    free(r->name);
    free(r->key);
    free(r->meta_text);
    free(r->payload);
    free(r);
}

/* Grows *buf to at least `need` bytes, keeping its contents. */
static int reserve(void *buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 1;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    void *p = realloc(*(void **)buf, n);
    if (!p)
        return 0;
    *(void **)buf = p;
    *cap = n;
    return 1;
}

/* Reads exactly n bytes or reports truncation of `part`. */
static vtr_status read_exact(vtr_record_reader *r, void *dst, size_t n, const char *part,
                             vtr_error *err)
{
    size_t got = n ? fread(dst, 1, n, r->in) : 0;
    if (got == n)
        return VTR_OK;
    if (ferror(r->in))
        return vtr_fail_errno(err, "%s: record %llu: reading %s", r->name,
                              (unsigned long long)r->index, part);
    return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %llu: truncated %s (%zu of %zu bytes)",
                    r->name, (unsigned long long)r->index, part, got, n);
}

/* Reads the payload in growing chunks, so that a corrupt length on a short stream does
 * not allocate the claimed size up front. */
static vtr_status read_payload(vtr_record_reader *r, size_t n, vtr_error *err)
{
    size_t done = 0;
    while (done < n) {
        size_t want = n - done;
        size_t step = done < (1u << 20) ? (1u << 20) : done; /* at most double per step */
        if (want > step)
            want = step;
        if (!reserve(&r->payload, &r->payload_cap, done + want))
            return vtr_fail(err, VTR_ERR_NOMEM, "%s: record %llu: %zu-byte array: out of memory",
                            r->name, (unsigned long long)r->index, n);
        vtr_status st = read_exact(r, r->payload + done, want, "array", err);
        if (st != VTR_OK)
            return st;
        done += want;
    }
    return VTR_OK;
}

vtr_status vtr_record_read(vtr_record_reader *r, vtr_record *rec, bool *got, vtr_error *err)
{
    *got = false;
    memset(rec, 0, sizeof *rec);
    unsigned char header[HEADER_SIZE];
    size_t n = fread(header, 1, sizeof header, r->in);
    if (n == 0 && !ferror(r->in))
        return VTR_OK; /* clean end of stream */
    if (n != sizeof header) {
        if (ferror(r->in))
            return vtr_fail_errno(err, "%s: record %llu", r->name, (unsigned long long)r->index);
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %llu: truncated header (%zu of %d bytes)",
                        r->name, (unsigned long long)r->index, n, HEADER_SIZE);
    }
    if (memcmp(header, record_magic, 4) != 0)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: record %llu: bad magic (not a vtr record stream)", r->name,
                        (unsigned long long)r->index);
    unsigned version = (unsigned)get_le(header + 4, 2);
    unsigned flags = (unsigned)get_le(header + 6, 2);
    uint64_t key_len = get_le(header + 8, 4);
    uint64_t meta_len = get_le(header + 12, 4);
    uint64_t payload_len = get_le(header + 16, 8);
    if (version != VTR_RECORD_VERSION)
        return vtr_fail(err, version > VTR_RECORD_VERSION ? VTR_ERR_UNSUPPORTED : VTR_ERR_FORMAT,
                        "%s: record %llu: record format version %u (this vtr reads version %d)",
                        r->name, (unsigned long long)r->index, version, VTR_RECORD_VERSION);
    if (flags != 0)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: record %llu: unknown flags 0x%x",
                        r->name, (unsigned long long)r->index, flags);
    if (key_len == 0 || key_len > VTR_RECORD_MAX_KEY)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %llu: key length %llu out of range",
                        r->name, (unsigned long long)r->index, (unsigned long long)key_len);
    if (meta_len > VTR_RECORD_MAX_META)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %llu: metadata length %llu too large",
                        r->name, (unsigned long long)r->index, (unsigned long long)meta_len);
    if (payload_len > VTR_RECORD_MAX_PAYLOAD)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %llu: array length %llu too large",
                        r->name, (unsigned long long)r->index, (unsigned long long)payload_len);

    vtr_status st;
    if (!reserve(&r->key, &r->key_cap, key_len + 1) ||
        !reserve(&r->meta_text, &r->meta_cap, meta_len + 1))
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", r->name);
    if ((st = read_exact(r, r->key, key_len, "key", err)) != VTR_OK)
        return st;
    r->key[key_len] = '\0';
    if ((st = check_key(r->key, key_len, VTR_ERR_FORMAT, err)) != VTR_OK) {
        vtr_error_context(err, "%s: record %llu", r->name, (unsigned long long)r->index);
        return st;
    }
    if ((st = read_exact(r, r->meta_text, meta_len, "metadata", err)) != VTR_OK)
        return st;
    json_decref(r->meta);
    json_error_t jerr;
    r->meta = json_loadb(r->meta_text, meta_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!r->meta || !json_is_object(r->meta))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: record %s: metadata is not a JSON object%s%s",
                        r->name, r->key, r->meta ? "" : ": ", r->meta ? "" : jerr.text);
    if ((st = read_payload(r, payload_len, err)) != VTR_OK)
        return st;
    if ((st = vtr_npy_parse(r->payload, payload_len, &rec->array, err)) != VTR_OK) {
        vtr_error_context(err, "%s: record %s", r->name, r->key);
        return st;
    }
    rec->key = r->key;
    rec->meta = r->meta;
    r->index++;
    *got = true;
    return VTR_OK;
}
