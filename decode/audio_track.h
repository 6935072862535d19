/* Audio track: a file's audio resampled to mono and written with libsndfile.
 *
 * The best audio stream is decoded from start to end, mixed down to one channel (the
 * channels' gains summing to 1) and resampled to `rate` Hz with libswresample, each
 * stretch from its own parameters where the stream changes its channels or rate, and
 * written as 16-bit PCM: WAV for a path ending in .wav, FLAC for .flac. The file appears
 * atomically (temporary name, then rename) and only when the whole track was written. A
 * file without audio is not an error: the result says so and nothing is written.
 */
#ifndef VTR_AUDIO_TRACK_H
#define VTR_AUDIO_TRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"

typedef struct vtr_audio_result {
    bool written;          /* false: the file has no audio stream (see reason) */
    char reason[128];      /* why nothing was written */
    int rate;              /* Hz */
    int64_t samples;       /* mono samples written */
    double start_time;     /* seconds: the audio stream's first timestamp */
    char codec[32];        /* source codec name */
} vtr_audio_result;

/* Writes src's audio track to dst. Errors name src or dst: an unknown extension
 * (VTR_ERR_INVALID), read or decode failures (VTR_ERR_CODEC), write failures
 * (VTR_ERR_IO). */
vtr_status vtr_audio_extract(const char *src, const char *dst, int rate,
                             vtr_audio_result *result, vtr_error *err);

#endif
