/* Audio log-mel spectrograms: an item's audio track as a feature set of its own,
 * (frames, n_mels) float32, one row per analysis frame.
 *
 * The definition is VGGish's (the audio expert of the video-retrieval papers; Google's
 * mel_features.py), so that its features can be reproduced:
 *   1. mono samples x in [-1, 1) (16-bit PCM / 32768, as libsndfile and VGGish read it;
 *      a file with several channels is averaged to one);
 *   2. frame t covers x[t*hop .. t*hop + window): frames = 1 + (n - window) / hop
 *      (integer division) when n >= window, else 0 (no padding, no centring);
 *   3. each frame is multiplied by the periodic Hann window
 *      w[i] = 0.5 - 0.5 cos(2 pi i / window), zero-padded at the end to n_fft samples,
 *      and transformed by a real FFT (FFmpeg's libavutil tx) into n_fft/2 + 1 bins;
 *      S[t][k] = |X[t][k]|^power (power 1: magnitude, as VGGish; 2: power spectrum);
 *   4. mel scale m(f) = 1127 ln(1 + f / 700) (HTK). Band edges are n_mels + 2 points
 *      equally spaced in mel from m(fmin) to m(fmax); band j is a triangle in the mel
 *      domain, weight(k, j) = max(0, min((m_k - e_j) / (e_{j+1} - e_j),
 *      (e_{j+2} - m_k) / (e_{j+2} - e_{j+1}))), with m_k = m(k * rate / n_fft), and
 *      bin 0 (DC) has weight 0 in every band; no area normalization;
 *   5. out[t][j] = ln(sum_k S[t][k] weight(k, j) + log_offset).
 * Defaults (vtr_logmel_options_defaults), the common 16 kHz / 64-mel setting: window
 * 25 ms (400 samples at 16 kHz), hop 10 ms (160), n_fft the next power of two >= window
 * (512), 64 bands from 125 to 7500 Hz, power 1, log_offset 1e-6. VGGish itself uses
 * log_offset 0.01: with that option the output equals VGGish's log_mel_spectrogram (to
 * float32 rounding) before it cuts 0.96 s patches. For the "0 .. 8000 Hz" variant set
 * fmin 0 and fmax 8000 (fmax may equal rate / 2). Window and hop are given in seconds and
 * rounded to the nearest sample at the file's rate (lround; VGGish's Python round differs
 * only on exact halves), so files at other rates keep the same frame times.
 *
 * A vtr_logmel holds what one (options, rate) pair needs: the window, the mel weights,
 * the FFT context and scratch buffers. It is not thread-safe: use one per thread.
 * The arithmetic is float64 throughout (the FFT included); the output is rounded to float32.
 */
#ifndef VTR_LOGMEL_H
#define VTR_LOGMEL_H

#include <jansson.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/tensor.h"

typedef struct vtr_logmel_options {
    double window_s;   /* analysis window, seconds [0.025] */
    double hop_s;      /* hop between frames, seconds [0.010] */
    int n_fft;         /* FFT size, a power of two >= the window in samples; 0: the
                          smallest such [0] */
    int n_mels;        /* mel bands [64] */
    double fmin_hz;    /* lower edge of the first band [125] */
    double fmax_hz;    /* upper edge of the last band, <= rate / 2 [7500] */
    int power;         /* 1: magnitude spectrum, 2: power spectrum [1] */
    double log_offset; /* added before the log, > 0 [1e-6] */
} vtr_logmel_options;

/* Fills o with the defaults above. */
void vtr_logmel_options_defaults(vtr_logmel_options *o);

typedef struct vtr_logmel vtr_logmel;

/* Prepares the transform for audio at `rate` Hz. VTR_ERR_INVALID names the bad option:
 * a window under 2 samples or over 2^20, a hop under 1 sample, n_fft not a power of two
 * or smaller than the window, n_mels outside 1 .. 1024, fmin < 0, fmin >= fmax,
 * fmax > rate / 2, power not 1 or 2, log_offset not > 0, rate outside 1 .. 10^6.
 * *out is NULL on failure. */
vtr_status vtr_logmel_new(const vtr_logmel_options *opt, int rate, vtr_logmel **out,
                          vtr_error *err);

/* Frees; safe on NULL. */
void vtr_logmel_free(vtr_logmel *lm);

/* Resolved sizes, in samples (window, hop, n_fft) and bands. */
int vtr_logmel_window(const vtr_logmel *lm);
int vtr_logmel_hop(const vtr_logmel *lm);
int vtr_logmel_n_fft(const vtr_logmel *lm);
int vtr_logmel_n_mels(const vtr_logmel *lm);

/* Frames produced from n samples (see 2 above). */
int64_t vtr_logmel_frames(const vtr_logmel *lm, int64_t n);

/* Centre frequency of band j (0 <= j < n_mels) in Hz: where its triangle peaks. */
double vtr_logmel_band_center_hz(const vtr_logmel *lm, int j);

/* Computes the log-mel frames of samples[0 .. n) into out, which has room for
 * vtr_logmel_frames(lm, n) * n_mels floats, row-major (frames, n_mels). Never fails
 * for valid arguments; VTR_ERR_INVALID for n < 0 or a NULL pointer with n > 0. */
vtr_status vtr_logmel_compute(vtr_logmel *lm, const float *samples, int64_t n, float *out,
                              vtr_error *err);

/* The resolved parameters as a JSON object (new reference), for record metadata and
 * feature-store provenance: {"extractor": "logmel", "rate", "window", "hop", "n_fft",
 * "n_mels", "fmin", "fmax", "power", "log_offset", "mel_scale": "htk"}. NULL when out of
 * memory. */
json_t *vtr_logmel_params(const vtr_logmel *lm);

/* Audio read through libsndfile (WAV, FLAC, and the other formats it reads), averaged
 * to mono. samples is malloc'd and owned by the caller (NULL when n is 0). */
typedef struct vtr_audio_samples {
    float *samples;
    int64_t n;    /* mono samples */
    int rate;     /* Hz */
    int channels; /* in the file */
} vtr_audio_samples;

/* Reads the whole of path. VTR_ERR_IO when it cannot be opened (strerror), VTR_ERR_FORMAT
 * when libsndfile does not recognize it or a read comes up short (its message), both
 * naming path. On failure *out is zeroed. */
vtr_status vtr_audio_read(const char *path, vtr_audio_samples *out, vtr_error *err);

void vtr_audio_samples_free(vtr_audio_samples *a);

/* One item's log-mel feature set. */
typedef struct vtr_logmel_features {
    vtr_tensor features; /* (frames, n_mels) float32; data malloc'd and owned (NULL when
                            there are no frames) */
    json_t *meta;        /* vtr_logmel_params plus "source" (path), "samples",
                            "channels", "duration" (seconds); owned */
} vtr_logmel_features;

/* Reads path (vtr_audio_read) and computes its log-mel frames with opt at the file's
 * rate. A track shorter than one window gives 0 frames (not an error). Errors name
 * path. On failure *out is zeroed. */
vtr_status vtr_logmel_file(const char *path, const vtr_logmel_options *opt,
                           vtr_logmel_features *out, vtr_error *err);

/* Frees the data and meta; safe on a zeroed or already-freed value. */
void vtr_logmel_features_free(vtr_logmel_features *f);

#endif
