/* The Range header of an HTTP request for a file (RFC 9110, section 14): how vtr-serve
 * lets a browser seek in a video it plays. One byte range is served; a header of several
 * ranges, or one that does not parse, is ignored (the whole file is sent, as the RFC
 * allows). */
#ifndef VTR_HTTP_RANGE_H
#define VTR_HTTP_RANGE_H

#include <stdint.h>

typedef enum vtr_http_range_kind {
    VTR_RANGE_NONE,          /* no usable header: send the whole file (200) */
    VTR_RANGE_PARTIAL,       /* send bytes [start, start + length) (206) */
    VTR_RANGE_UNSATISFIABLE, /* the range starts past the end (416) */
} vtr_http_range_kind;

/* The range that header (NULL: none) asks of a file of size bytes: "bytes=A-B" (B
 * clamped to the last byte), "bytes=A-" (to the end), "bytes=-N" (the last N bytes, the
 * whole file when N >= size). A range starting at or past size, or a suffix of 0 bytes,
 * is unsatisfiable; so is every range of an empty file. */
vtr_http_range_kind vtr_http_range_parse(const char *header, int64_t size, int64_t *start,
                                         int64_t *length);

#endif
