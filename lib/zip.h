/* Zip archives of stored (uncompressed) entries, read in place: the container of
 * torch.save files (lib/pth.h), whose entries PyTorch always stores.
 *
 * The reader trusts only the central directory: the end-of-central-directory record (at
 * the end, after at most a 65535-byte comment) gives the directory's place and entry
 * count; each directory entry gives a name, a size and the offset of its local header,
 * whose own name and extra field lengths give where the bytes start. Checked against the
 * bytes present: every record inside the buffer, one disk, the directory's size equal to
 * its entries', names non-empty without NUL bytes and unique, each entry's local header
 * signature and name equal to the directory's, its bytes wholly before the directory.
 * Refused as VTR_ERR_UNSUPPORTED: a compressed entry (any method but 0, "stored"), an
 * encrypted one, and zip64 archives (4 GiB or 65535 entries and more; torch.save adds
 * zip64 records after the directory of every archive, which the reader skips, but needs
 * them only past these limits). CRC-32s are not checked: a reader of weights finds
 * damage no better with them, and vtr records the SHA-256 of the weights it uses.
 * Data descriptors (flag bit 3) are accepted: the directory holds the sizes.
 *
 * An entry's bytes are where the archive has them, at any alignment (torch.save aligns
 * them to 64 bytes).
 */
#ifndef VTR_ZIP_H
#define VTR_ZIP_H

#include <stddef.h>

#include "error.h"

typedef struct vtr_zip_entry {
    char *name;                /* owned; NUL-terminated */
    const unsigned char *data; /* into the parsed buffer */
    size_t size;
} vtr_zip_entry;

typedef struct vtr_zip {
    size_t count;
    vtr_zip_entry *entries; /* sorted by name (strcmp order), not archive order */
} vtr_zip;

/* Reads the directory of a zip image held in memory. On success the entries point into
 * buf (which must outlive out) and out must be released with vtr_zip_close; on failure
 * out is zeroed. Malformed input is VTR_ERR_FORMAT, what the reader refuses (above)
 * VTR_ERR_UNSUPPORTED, both naming the entry where there is one; VTR_ERR_NOMEM. */
vtr_status vtr_zip_parse(const void *buf, size_t len, vtr_zip *out, vtr_error *err);

/* The entry called name, or NULL. Valid until vtr_zip_close. */
const vtr_zip_entry *vtr_zip_find(const vtr_zip *zip, const char *name);

/* Frees the entries; leaves zip zeroed. Safe on a zeroed or already-closed value. */
void vtr_zip_close(vtr_zip *zip);

#endif
