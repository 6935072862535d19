/* Content hashes, for the "data hashes" a run records (DESIGN.md: every run records what
 * produced it). SHA-256 from FFmpeg's libavutil, which vtr links already.
 */
#ifndef VTR_HASH_H
#define VTR_HASH_H

#include "error.h"

/* Length of a SHA-256 digest in lowercase hex, plus the terminating NUL. */
#define VTR_SHA256_HEX_SIZE 65

/* Hashes the bytes of the file at path (read in chunks, so any size) and writes the
 * SHA-256 digest as 64 lowercase hex digits and a NUL into hex. Fails with VTR_ERR_IO
 * naming the path when it cannot be opened or read, or is not a regular file
 * (vtr_open_regular: /dev/zero would never end); hex is then the empty string. */
vtr_status vtr_file_sha256(const char *path, char hex[VTR_SHA256_HEX_SIZE], vtr_error *err);

#endif
