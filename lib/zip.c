/* Zip archives of stored entries (zip.h). Record layouts: PKWARE's APPNOTE.TXT 4.3. */
#define _POSIX_C_SOURCE 200809L
#include "zip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EOCD_SIZE 22      /* end of central directory record, without its comment */
#define CDIR_SIZE 46      /* central directory file header, without name, extra, comment */
#define LOCAL_SIZE 30     /* local file header, without name and extra */
#define MAX_COMMENT 65535
#define SIG_EOCD 0x06054b50u
#define SIG_CDIR 0x02014b50u
#define SIG_LOCAL 0x04034b50u
#define FLAG_ENCRYPTED 0x0001u
#define ZIP64_MARK16 0xffffu
#define ZIP64_MARK32 0xffffffffu
#define MAX_MESSAGE_NAME 160

static uint32_t get_le(const unsigned char *p, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const vtr_zip_entry *)a)->name, ((const vtr_zip_entry *)b)->name);
}

/* The end-of-central-directory record: the last signature whose comment runs exactly to
 * the end of the buffer. */
static const unsigned char *find_eocd(const unsigned char *b, size_t len)
{
    if (len < EOCD_SIZE)
        return NULL;
    size_t lowest = len - EOCD_SIZE > MAX_COMMENT ? len - EOCD_SIZE - MAX_COMMENT : 0;
    for (size_t at = len - EOCD_SIZE + 1; at-- > lowest;) {
        const unsigned char *p = b + at;
        if (get_le(p, 4) == SIG_EOCD && get_le(p + 20, 2) == len - at - EOCD_SIZE)
            return p;
    }
    return NULL;
}

/* Reads the directory entry at *pos (within [*pos, end)) into e and advances *pos; the
 * entry's local header and bytes must lie in [0, data_end). */
static vtr_status read_entry(const unsigned char *b, size_t *pos, size_t end, size_t data_end,
                             size_t index, vtr_zip_entry *e, vtr_error *err)
{
    size_t at = *pos;
    if (end - at < CDIR_SIZE || get_le(b + at, 4) != SIG_CDIR)
        return vtr_fail(err, VTR_ERR_FORMAT, "zip directory entry %zu at byte %zu is not one",
                        index, at);
    const unsigned char *h = b + at;
    unsigned flags = get_le(h + 8, 2), method = get_le(h + 10, 2);
    uint32_t packed = get_le(h + 20, 4), size = get_le(h + 24, 4);
    size_t name_len = get_le(h + 28, 2);
    size_t rest = name_len + get_le(h + 30, 2) + get_le(h + 32, 2);
    unsigned disk = get_le(h + 34, 2);
    uint32_t local = get_le(h + 42, 4);
    if (end - at - CDIR_SIZE < rest)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "zip directory entry %zu at byte %zu runs past the directory", index, at);
    const char *name = (const char *)h + CDIR_SIZE;
    char shown[MAX_MESSAGE_NAME];
    vtr_printable(name, name_len, shown, sizeof shown);
    if (name_len == 0 || memchr(name, '\0', name_len))
        return vtr_fail(err, VTR_ERR_FORMAT, "zip entry %zu has %s name '%s'", index,
                        name_len ? "a NUL byte in its" : "an empty", shown);
    if (flags & FLAG_ENCRYPTED)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "zip entry '%s' is encrypted", shown);
    if (method != 0)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "zip entry '%s' is compressed (method %u); vtr reads stored entries, "
                        "as torch.save writes them",
                        shown, method);
    if (packed == ZIP64_MARK32 || size == ZIP64_MARK32 || local == ZIP64_MARK32)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "zip entry '%s' has zip64 sizes (4 GiB or more); vtr does not read them",
                        shown);
    if (packed != size)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "zip entry '%s' is stored but its sizes differ (%lu and %lu bytes)", shown,
                        (unsigned long)packed, (unsigned long)size);
    if (disk != 0)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "zip entry '%s' is on disk %u of a split archive",
                        shown, disk);
    /* the local header, its name and extra field, then the bytes: all before the directory */
    const char *where = "runs into the directory";
    size_t data = 0;
    if (local <= data_end && data_end - local >= LOCAL_SIZE) {
        const unsigned char *l = b + local;
        size_t local_rest = get_le(l + 26, 2) + (size_t)get_le(l + 28, 2);
        if (get_le(l, 4) != SIG_LOCAL)
            where = "has no local header";
        else if (get_le(l + 26, 2) != name_len || data_end - local - LOCAL_SIZE < local_rest ||
                 memcmp(l + LOCAL_SIZE, name, name_len) != 0)
            where = "has a local header of another name";
        else if (data_end - local - LOCAL_SIZE - local_rest < size)
            where = "runs into the directory";
        else
            data = local + LOCAL_SIZE + local_rest;
    }
    if (!data)
        return vtr_fail(err, VTR_ERR_FORMAT, "zip entry '%s' (local header at byte %lu) %s",
                        shown, (unsigned long)local, where);
    if (!(e->name = strndup(name, name_len)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for zip entry '%s'", shown);
    e->data = b + data;
    e->size = size;
    *pos = at + CDIR_SIZE + rest;
    return VTR_OK;
}

vtr_status vtr_zip_parse(const void *buf, size_t len, vtr_zip *out, vtr_error *err)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    const unsigned char *eocd = find_eocd(b, len);
    if (!eocd)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "not a zip archive: no end of central directory record in %zu bytes",
                        len);
    size_t eocd_at = (size_t)(eocd - b);
    unsigned disk = get_le(eocd + 4, 2), cd_disk = get_le(eocd + 6, 2);
    unsigned here = get_le(eocd + 8, 2), count = get_le(eocd + 10, 2);
    uint32_t cd_size = get_le(eocd + 12, 4), cd_at = get_le(eocd + 16, 4);
    if (count == ZIP64_MARK16 || cd_size == ZIP64_MARK32 || cd_at == ZIP64_MARK32)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "a zip64 archive (4 GiB or 65535 entries and more); vtr does not read them");
    if (disk != 0 || cd_disk != 0 || here != count)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "a zip archive split over several disks");
    if (cd_at > eocd_at || eocd_at - cd_at < cd_size)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "zip central directory of %lu bytes at byte %lu runs past its end "
                        "record at byte %zu",
                        (unsigned long)cd_size, (unsigned long)cd_at, eocd_at);
    vtr_status st = VTR_OK;
    out->entries = calloc(count ? count : 1, sizeof *out->entries);
    if (!out->entries)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %u zip entries", count);
    size_t pos = cd_at, end = (size_t)cd_at + cd_size;
    for (size_t i = 0; i < count; i++) {
        if ((st = read_entry(b, &pos, end, cd_at, i, &out->entries[i], err)) != VTR_OK)
            goto end;
        out->count++;
    }
    if (pos != end) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "zip central directory holds %zu bytes after its %u entries", end - pos,
                      count);
        goto end;
    }
    qsort(out->entries, out->count, sizeof *out->entries, compare_entries);
    for (size_t i = 1; i < out->count; i++) {
        if (strcmp(out->entries[i - 1].name, out->entries[i].name) == 0) {
            char shown[MAX_MESSAGE_NAME];
            const char *n = out->entries[i].name;
            st = vtr_fail(err, VTR_ERR_FORMAT, "zip archive has two entries named '%s'",
                          vtr_printable(n, strlen(n), shown, sizeof shown));
            goto end;
        }
    }
end:
    if (st != VTR_OK)
        vtr_zip_close(out);
    return st;
}

const vtr_zip_entry *vtr_zip_find(const vtr_zip *zip, const char *name)
{
    if (!zip->count)
        return NULL;
    vtr_zip_entry key = {.name = (char *)(uintptr_t)name};
    return bsearch(&key, zip->entries, zip->count, sizeof *zip->entries, compare_entries);
}

void vtr_zip_close(vtr_zip *zip)
{
    if (zip->entries)
        for (size_t i = 0; i < zip->count; i++)
            free(zip->entries[i].name);
    free(zip->entries);
    memset(zip, 0, sizeof *zip);
}
