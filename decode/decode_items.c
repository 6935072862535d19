/* A vtr-decode run's items (decode_items.h). */
#define _POSIX_C_SOURCE 200809L
#include "decode/decode_items.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/version.h"

/* The audio path of item key (malloc'ed), or NULL with *nomem false when none is asked. */
static char *audio_path(const vtr_decode_audio *audio, const char *key, bool *nomem)
{
    char *path = NULL;
    if (audio->file) {
        path = strdup(audio->file);
    } else if (audio->dir) {
        size_t n = strlen(audio->dir) + strlen(key) + 8;
        if ((path = malloc(n)))
            snprintf(path, n, "%s/%s.%s", audio->dir, key, audio->ext);
    } else {
        return NULL;
    }
    *nomem = !path;
    return path;
}

vtr_status vtr_decode_items(const vtr_keyed_files *items, const vtr_decode_options *o,
                            const vtr_decode_audio *audio, vtr_item_output *out,
                            const vtr_item_report *report)
{
    for (size_t i = 0; i < items->n; i++) {
        const vtr_keyed_file *it = &items->v[i];
        bool nomem = false;
        char *apath = audio_path(audio, it->key, &nomem);
        vtr_decoded_item dec = {0};
        vtr_error err;
        vtr_error_clear(&err);
        vtr_status st = nomem ? vtr_fail(&err, VTR_ERR_NOMEM, "out of memory")
                              : vtr_decode_item(it->path, o, apath, &dec, &err);
        if (st == VTR_OK) {
            json_object_set_new(dec.meta, "decoder", json_sprintf("vtr-decode %s", vtr_version));
            st = vtr_item_output_write(out, it->key, &dec.frames, dec.meta, &err);
            if (st != VTR_OK && apath)
                unlink(apath);
        }
        report->item(report->ctx, it->key, st == VTR_OK ? NULL : &err);
        vtr_decoded_item_free(&dec);
        free(apath);
        if (st != VTR_OK && vtr_item_output_broken(out))
            return st;
    }
    return VTR_OK;
}
