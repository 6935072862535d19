/* vtr-features --audio: audio files -> log-mel feature sets (features/logmel.h) written to
 * a program's item output (lib/item_output.h). Per file one item keyed by the file name
 * without extension: float32 (frames, n_mels), frame t covering samples
 * [t*hop, t*hop + window), with the metadata of vtr_logmel_file plus "version". */
#ifndef VTR_AUDIO_FEATURES_H
#define VTR_AUDIO_FEATURES_H

#include <jansson.h>

#include "features/logmel.h"
#include "lib/error.h"
#include "lib/item_output.h"
#include "lib/keyed_files.h"
#include "lib/log.h"
#include "lib/shard.h"

/* The parameters as given, for a feature store's provenance (window and hop are in
 * seconds: in samples they depend on each file's rate): {"extractor": "logmel",
 * "window_s", "hop_s", "n_fft", "n_mels", "fmin", "fmax", "power", "log_offset",
 * "mel_scale": "htk", "version": "vtr-features VERSION"}. A new reference; NULL when out
 * of memory. */
json_t *vtr_audio_features_source(const vtr_logmel_options *lo);

/* Appends the n inputs to files: a file as named, a directory as its *.wav and *.flac
 * files (as vtr-decode --audio-dir writes them), in name order. An argument that cannot
 * be listed (missing, unreadable) goes to report->error (key NULL) and the others still
 * go. VTR_ERR_NOMEM (reported too) stops the listing. */
vtr_status vtr_audio_features_list(char *const *paths, int n, vtr_keyed_files *files,
                                   const vtr_item_report *report, vtr_error *err);

/* Computes the log-mel frames of each file of shard's contiguous share of files
 * (lib/shard.h) with lo and writes them to out. report->item is
 * told about every item: written, or failed (not audio, refused by out). When out breaks
 * (or memory runs out), report->error is told with the item's key and its status is
 * returned: the run stops. VTR_OK otherwise. */
vtr_status vtr_audio_features_write(const vtr_keyed_files *files, const vtr_shard *shard,
                                    const vtr_logmel_options *lo, vtr_item_output *out,
                                    const vtr_item_report *report);

#endif
