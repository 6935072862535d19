/* vtr-features --audio (audio_features.h). */
#define _POSIX_C_SOURCE 200809L
#include "features/audio_features.h"

#include <sys/stat.h>

#include "lib/version.h"

json_t *vtr_audio_features_source(const vtr_logmel_options *lo)
{
    return json_pack("{s:s, s:f, s:f, s:i, s:i, s:f, s:f, s:i, s:f, s:s, s:s+}", "extractor",
                     "logmel", "window_s", lo->window_s, "hop_s", lo->hop_s, "n_fft", lo->n_fft,
                     "n_mels", lo->n_mels, "fmin", lo->fmin_hz, "fmax", lo->fmax_hz, "power",
                     lo->power, "log_offset", lo->log_offset, "mel_scale", "htk", "version",
                     "vtr-features ", vtr_version);
}

vtr_status vtr_audio_features_list(char *const *paths, int n, vtr_keyed_files *files,
                                   const vtr_item_report *report, vtr_error *err)
{
    static const char *const suffixes[] = {".wav", ".flac"};
    for (int i = 0; i < n; i++) {
        struct stat sb;
        vtr_status st = stat(paths[i], &sb) == 0 && S_ISDIR(sb.st_mode)
                            ? vtr_keyed_files_add_dir(files, paths[i], suffixes, 2, err)
                            : vtr_keyed_files_add(files, NULL, paths[i], err);
        if (st != VTR_OK)
            report->error(report->ctx, NULL, err);
        if (st == VTR_ERR_NOMEM)
            return st;
    }
    return VTR_OK;
}

vtr_status vtr_audio_features_write(const vtr_keyed_files *files, const vtr_shard *shard,
                                    const vtr_logmel_options *lo, vtr_item_output *out,
                                    const vtr_item_report *report)
{
    int64_t first, count;
    vtr_shard_range(shard, (int64_t)files->n, &first, &count);
    for (size_t i = (size_t)first; i < (size_t)(first + count); i++) {
        const vtr_keyed_file *f = &files->v[i];
        vtr_error err;
        vtr_error_clear(&err);
        vtr_logmel_features lm;
        if (vtr_logmel_file(f->path, lo, &lm, &err) != VTR_OK) {
            report->item(report->ctx, f->key, &err);
            continue;
        }
        vtr_status st = VTR_OK;
        if (json_object_set_new(lm.meta, "version", json_sprintf("vtr-features %s", vtr_version)))
            st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
        else if ((st = vtr_item_output_write(out, f->key, &lm.features, lm.meta, &err)) == VTR_OK ||
                 !vtr_item_output_broken(out)) {
            report->item(report->ctx, f->key, st == VTR_OK ? NULL : &err);
            st = VTR_OK;
        }
        vtr_logmel_features_free(&lm);
        if (st != VTR_OK) {
            report->error(report->ctx, f->key, &err);
            return st;
        }
    }
    return VTR_OK;
}
