/* Fuzz target: the reader of numpy string arrays (the HGR names files,
 * import/import_hgr.h) on arbitrary bytes. On success every name must be valid UTF-8,
 * non-empty and lie inside the list's storage; a failure must come with a one-line ASCII
 * message. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "import/import_hgr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_name_list l;
    vtr_error err;
    if (vtr_name_list_parse(data, size, "fuzz", &l, &err) != VTR_OK) {
        if (!err.msg[0] || l.n != 0 || l.names || l.storage)
            abort();
        for (const char *c = err.msg; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                abort();
        return 0;
    }
    for (size_t i = 0; i < l.n; i++) {
        size_t len = strlen(l.names[i]);
        if (len == 0)
            abort();
        json_t *s = json_stringn(l.names[i], len); /* jansson validates UTF-8 */
        if (!s)
            abort();
        json_decref(s);
    }
    vtr_name_list_free(&l);
    return 0;
}
