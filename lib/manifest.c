/* The manifest grammar (manifest.h). */
#include "manifest.h"

#include <string.h>

vtr_status vtr_manifest_next(vtr_line_reader *r, const char **key, const char **path,
                             vtr_error *err)
{
    *key = *path = NULL;
    char *line;
    size_t len;
    vtr_status st;
    while ((st = vtr_line_next(r, &line, &len, err)) == VTR_OK && line) {
        if (len == 0 || line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        if (!tab) {
            *path = line;
            return VTR_OK;
        }
        *tab = '\0';
        if (tab == line || !tab[1])
            return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: empty key or path", r->name,
                            (long long)r->line);
        *key = line;
        *path = tab + 1;
        return VTR_OK;
    }
    return st;
}
