/* Manifests: text files that list items, one a line, read with lines.h (so "\r\n" ends
 * are dropped and a NUL byte is an error naming the line):
 *
 *     PATH              an item; its key is the reader's to choose (vtr-decode: the
 *                       file name without extension; vtr-index: PATH as written)
 *     KEY<TAB>PATH      an item with its key; the first tab splits, PATH may hold more
 *
 * Empty lines and lines whose first byte is '#' are skipped. Nothing else is trimmed:
 * spaces belong to the key or the path. A line with a tab and nothing before or after
 * it is an error.
 */
#ifndef VTR_MANIFEST_H
#define VTR_MANIFEST_H

#include "error.h"
#include "lines.h"

/* Reads r's next item. On VTR_OK, *path is its path, or NULL at the end of the stream,
 * and *key its key, or NULL when the line gives none; both point into r's buffer (valid
 * until the next read). Errors: VTR_ERR_FORMAT "NAME:LINE: empty key or path", and those
 * of vtr_line_next (a NUL byte, VTR_ERR_IO, VTR_ERR_NOMEM). */
vtr_status vtr_manifest_next(vtr_line_reader *r, const char **key, const char **path,
                             vtr_error *err);

#endif
