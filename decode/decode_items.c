/* A vtr-decode run's items (decode_items.h). */
#define _POSIX_C_SOURCE 200809L
#include "decode/decode_items.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/version.h"

/* Into *path (malloc'ed) the audio path of item key, or NULL when none is asked. A key
 * that cannot name a file in the audio directory is refused (VTR_ERR_INVALID), so that
 * nothing is written, or removed, outside it. */
static vtr_status audio_path(const vtr_decode_audio *audio, const char *key, char **path,
                             vtr_error *err)
{
    *path = NULL;
    if (audio->file) {
        *path = strdup(audio->file);
    } else if (audio->dir) {
        vtr_status st = vtr_key_check_file_name(key, "--audio-dir", err);
        if (st != VTR_OK)
            return st;
        size_t n = strlen(audio->dir) + strlen(key) + 8;
        if ((*path = malloc(n)))
            snprintf(*path, n, "%s/%s.%s", audio->dir, key, audio->ext);
    } else {
        return VTR_OK;
    }
    return *path ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
}

vtr_status vtr_decode_items(const vtr_keyed_files *items, const vtr_decode_options *o,
                            const vtr_decode_audio *audio, vtr_item_output *out,
                            const vtr_item_report *report)
{
    for (size_t i = 0; i < items->n; i++) {
        const vtr_keyed_file *it = &items->v[i];
        vtr_decoded_item dec = {0};
        vtr_error err;
        vtr_error_clear(&err);
        char *apath = NULL;
        vtr_status st = vtr_item_output_check(out, it->key, it->path, &err);
        if (st == VTR_OK)
            st = audio_path(audio, it->key, &apath, &err);
        if (st == VTR_OK)
            st = vtr_decode_item(it->path, o, apath, &dec, &err);
        if (st == VTR_OK) {
            json_object_set_new(dec.meta, "decoder", json_sprintf("vtr-decode %s", vtr_version));
            st = vtr_item_output_write(out, it->key, &dec.frames, dec.meta, &err);
            /* the audio file this item wrote ("audio": its path), never one it did not */
            if (st != VTR_OK && json_is_string(json_object_get(dec.meta, "audio")))
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
