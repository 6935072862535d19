/* Log-mel spectrograms (definition in logmel.h): framing and the Hann window by hand, the
 * real FFT from libavutil's tx (in double: a float32 FFT leaves the quiet bands of a clean
 * tone with errors of 1e-2 in the log), the mel weights as one run of bins per band. */
#define _POSIX_C_SOURCE 200809L
#include "logmel.h"

#include <errno.h>
#include <libavutil/error.h>
#include <libavutil/mem.h>
#include <libavutil/tx.h>
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"

#define LOGMEL_MAX_WINDOW (1 << 20)
#define LOGMEL_MAX_MELS 1024
#define LOGMEL_MAX_RATE 1000000
#define LOGMEL_PI 3.14159265358979323846

struct vtr_logmel {
    vtr_logmel_options opt;
    int rate, window, hop, n_fft, n_bins, n_mels;
    double *hann;           /* (window) */
    int *band_lo, *band_hi; /* band j uses bins [band_lo[j], band_hi[j]) */
    double *weights;        /* the weights of band j start at weights[band_off[j]] */
    size_t *band_off;
    double *edges_hz; /* (n_mels + 2) band edges */
    AVTXContext *tx;
    av_tx_fn tx_fn;
    double *frame;         /* (n_fft), av_malloc'd for the transform's alignment */
    AVComplexDouble *bins; /* (n_bins) */
    double *spectrum;      /* (n_bins) */
};

void vtr_logmel_options_defaults(vtr_logmel_options *o)
{
    *o = (vtr_logmel_options){
        .window_s = 0.025,
        .hop_s = 0.010,
        .n_fft = 0,
        .n_mels = 64,
        .fmin_hz = 125.0,
        .fmax_hz = 7500.0,
        .power = 1,
        .log_offset = 1e-6,
    };
}

static double hz_to_mel(double hz)
{
    return 1127.0 * log(1.0 + hz / 700.0);
}

static double mel_to_hz(double mel)
{
    return 700.0 * (exp(mel / 1127.0) - 1.0);
}

void vtr_logmel_free(vtr_logmel *lm)
{
    if (!lm)
        return;
    av_tx_uninit(&lm->tx);
    av_free(lm->frame);
    av_free(lm->bins);
    free(lm->hann);
    free(lm->band_lo);
    free(lm->band_hi);
    free(lm->band_off);
    free(lm->weights);
    free(lm->edges_hz);
    free(lm->spectrum);
    free(lm);
}

/* Checks the options against the rate and resolves window, hop and n_fft in samples. */
static vtr_status resolve(const vtr_logmel_options *o, int rate, int *window, int *hop, int *n_fft,
                          vtr_error *err)
{
    if (rate < 1 || rate > LOGMEL_MAX_RATE)
        return vtr_fail(err, VTR_ERR_INVALID, "log-mel: sample rate %d Hz is outside 1 .. %d", rate,
                        LOGMEL_MAX_RATE);
    double w = o->window_s * rate, h = o->hop_s * rate;
    if (!(w >= 1.5 && w < LOGMEL_MAX_WINDOW + 0.5))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "log-mel: window %g s is %g samples at %d Hz; it needs 2 .. %d",
                        o->window_s, w, rate, LOGMEL_MAX_WINDOW);
    if (!(h >= 0.5 && h < (double)INT32_MAX))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "log-mel: hop %g s is %g samples at %d Hz; it needs at least 1", o->hop_s,
                        h, rate);
    *window = (int)lround(w);
    *hop = (int)lround(h);
    if (o->n_fft == 0) {
        int n = 1;
        while (n < *window)
            n *= 2;
        *n_fft = n;
    } else if (o->n_fft < *window || o->n_fft > 2 * LOGMEL_MAX_WINDOW ||
               (o->n_fft & (o->n_fft - 1)) != 0) {
        return vtr_fail(err, VTR_ERR_INVALID,
                        "log-mel: n_fft %d must be a power of two >= the window (%d samples)",
                        o->n_fft, *window);
    } else {
        *n_fft = o->n_fft;
    }
    if (o->n_mels < 1 || o->n_mels > LOGMEL_MAX_MELS)
        return vtr_fail(err, VTR_ERR_INVALID, "log-mel: n_mels %d is outside 1 .. %d", o->n_mels,
                        LOGMEL_MAX_MELS);
    if (!(o->fmin_hz >= 0) || !(o->fmin_hz < o->fmax_hz))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "log-mel: fmin %g Hz must be >= 0 and below fmax %g Hz", o->fmin_hz,
                        o->fmax_hz);
    if (o->fmax_hz > rate / 2.0)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "log-mel: fmax %g Hz is above the Nyquist frequency %g Hz of %d Hz audio",
                        o->fmax_hz, rate / 2.0, rate);
    if (o->power != 1 && o->power != 2)
        return vtr_fail(err, VTR_ERR_INVALID, "log-mel: power %d is neither 1 nor 2", o->power);
    if (!(o->log_offset > 0) || !isfinite(o->log_offset))
        return vtr_fail(err, VTR_ERR_INVALID, "log-mel: log offset %g must be > 0", o->log_offset);
    return VTR_OK;
}

/* The triangles of logmel.h step 4, kept as one run of non-zero weights per band. */
static vtr_status build_filterbank(vtr_logmel *lm, vtr_error *err)
{
    int nb = lm->n_bins, nm = lm->n_mels;
    double lo_mel = hz_to_mel(lm->opt.fmin_hz), hi_mel = hz_to_mel(lm->opt.fmax_hz);
    double *edges = malloc((size_t)(nm + 2) * sizeof *edges);
    double *bin_mel = malloc((size_t)nb * sizeof *bin_mel);
    lm->edges_hz = malloc((size_t)(nm + 2) * sizeof *lm->edges_hz);
    lm->band_lo = malloc((size_t)nm * sizeof *lm->band_lo);
    lm->band_hi = malloc((size_t)nm * sizeof *lm->band_hi);
    lm->band_off = malloc((size_t)nm * sizeof *lm->band_off);
    vtr_status st = VTR_OK;
    if (!edges || !bin_mel || !lm->edges_hz || !lm->band_lo || !lm->band_hi || !lm->band_off) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "log-mel: out of memory");
        goto end;
    }
    /* np.linspace(lo, hi, nm + 2) */
    double step = (hi_mel - lo_mel) / (nm + 1);
    for (int i = 0; i < nm + 2; i++) {
        edges[i] = i == nm + 1 ? hi_mel : lo_mel + i * step;
        lm->edges_hz[i] = mel_to_hz(edges[i]);
    }
    /* np.linspace(0, rate / 2, nb) */
    double nyquist = lm->rate / 2.0, bin_step = nyquist / (nb - 1);
    for (int k = 0; k < nb; k++)
        bin_mel[k] = hz_to_mel(k == nb - 1 ? nyquist : k * bin_step);
    size_t total = 0;
    for (int j = 0; j < nm; j++) {
        int lo = nb, hi = 0;
        for (int k = 1; k < nb; k++) { /* bin 0 (DC) has weight 0 */
            if (bin_mel[k] > edges[j] && bin_mel[k] < edges[j + 2]) {
                if (k < lo)
                    lo = k;
                hi = k + 1;
            }
        }
        if (hi <= lo)
            lo = hi = 1;
        lm->band_lo[j] = lo;
        lm->band_hi[j] = hi;
        lm->band_off[j] = total;
        total += (size_t)(hi - lo);
    }
    lm->weights = malloc((total ? total : 1) * sizeof *lm->weights);
    if (!lm->weights) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "log-mel: out of memory");
        goto end;
    }
    for (int j = 0; j < nm; j++) {
        double *w = lm->weights + lm->band_off[j];
        for (int k = lm->band_lo[j]; k < lm->band_hi[j]; k++) {
            double up = (bin_mel[k] - edges[j]) / (edges[j + 1] - edges[j]);
            double down = (edges[j + 2] - bin_mel[k]) / (edges[j + 2] - edges[j + 1]);
            double v = up < down ? up : down;
            w[k - lm->band_lo[j]] = v > 0 ? v : 0;
        }
    }
end:
    free(edges);
    free(bin_mel);
    return st;
}

vtr_status vtr_logmel_new(const vtr_logmel_options *opt, int rate, vtr_logmel **out, vtr_error *err)
{
    *out = NULL;
    int window = 0, hop = 0, n_fft = 0;
    vtr_status st = resolve(opt, rate, &window, &hop, &n_fft, err);
    if (st != VTR_OK)
        return st;
    vtr_logmel *lm = calloc(1, sizeof *lm);
    if (!lm)
        return vtr_fail(err, VTR_ERR_NOMEM, "log-mel: out of memory");
    lm->opt = *opt;
    lm->opt.n_fft = n_fft;
    lm->rate = rate;
    lm->window = window;
    lm->hop = hop;
    lm->n_fft = n_fft;
    lm->n_bins = n_fft / 2 + 1;
    lm->n_mels = opt->n_mels;
    lm->hann = malloc((size_t)window * sizeof *lm->hann);
    lm->spectrum = malloc((size_t)lm->n_bins * sizeof *lm->spectrum);
    lm->frame = av_malloc((size_t)n_fft * sizeof *lm->frame);
    lm->bins = av_malloc((size_t)lm->n_bins * sizeof *lm->bins);
    if (!lm->hann || !lm->spectrum || !lm->frame || !lm->bins) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "log-mel: out of memory");
        goto end;
    }
    /* periodic Hann, as VGGish's periodic_hann and torch.hann_window */
    for (int i = 0; i < window; i++)
        lm->hann[i] = 0.5 - 0.5 * cos(2.0 * LOGMEL_PI * i / window);
    if ((st = build_filterbank(lm, err)) != VTR_OK)
        goto end;
    double scale = 1.0;
    int rc = av_tx_init(&lm->tx, &lm->tx_fn, AV_TX_DOUBLE_RDFT, 0, n_fft, &scale, 0);
    if (rc < 0) {
        char msg[AV_ERROR_MAX_STRING_SIZE] = "";
        av_strerror(rc, msg, sizeof msg);
        st = vtr_fail(err, VTR_ERR_CODEC, "log-mel: real FFT of size %d: %s", n_fft, msg);
        goto end;
    }
    *out = lm;
    lm = NULL;
end:
    vtr_logmel_free(lm);
    return st;
}

int vtr_logmel_window(const vtr_logmel *lm)
{
    return lm->window;
}

int vtr_logmel_hop(const vtr_logmel *lm)
{
    return lm->hop;
}

int vtr_logmel_n_fft(const vtr_logmel *lm)
{
    return lm->n_fft;
}

int vtr_logmel_n_mels(const vtr_logmel *lm)
{
    return lm->n_mels;
}

int64_t vtr_logmel_frames(const vtr_logmel *lm, int64_t n)
{
    return n < lm->window ? 0 : 1 + (n - lm->window) / lm->hop;
}

double vtr_logmel_band_center_hz(const vtr_logmel *lm, int j)
{
    return j >= 0 && j < lm->n_mels ? lm->edges_hz[j + 1] : NAN;
}

vtr_status vtr_logmel_compute(vtr_logmel *lm, const float *samples, int64_t n, float *out,
                              vtr_error *err)
{
    if (n < 0 || (n > 0 && (!samples || (!out && vtr_logmel_frames(lm, n) > 0))))
        return vtr_fail(err, VTR_ERR_INVALID, "log-mel: bad arguments (n = %lld)", (long long)n);
    int64_t frames = vtr_logmel_frames(lm, n);
    const int window = lm->window, nb = lm->n_bins, nm = lm->n_mels;
    memset(lm->frame + window, 0, (size_t)(lm->n_fft - window) * sizeof *lm->frame);
    for (int64_t t = 0; t < frames; t++) {
        const float *x = samples + t * lm->hop;
        for (int i = 0; i < window; i++)
            lm->frame[i] = (double)x[i] * lm->hann[i];
        lm->tx_fn(lm->tx, lm->bins, lm->frame, sizeof(double));
        for (int k = 0; k < nb; k++) {
            double re = lm->bins[k].re, im = lm->bins[k].im, p = re * re + im * im;
            lm->spectrum[k] = lm->opt.power == 2 ? p : sqrt(p);
        }
        float *row = out + t * nm;
        for (int j = 0; j < nm; j++) {
            const double *w = lm->weights + lm->band_off[j];
            double acc = 0;
            for (int k = lm->band_lo[j]; k < lm->band_hi[j]; k++)
                acc += w[k - lm->band_lo[j]] * lm->spectrum[k];
            row[j] = (float)log(acc + lm->opt.log_offset);
        }
    }
    return VTR_OK;
}

json_t *vtr_logmel_params(const vtr_logmel *lm)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:f, s:s}", "extractor",
                     "logmel", "rate", lm->rate, "window", lm->window, "hop", lm->hop, "n_fft",
                     lm->n_fft, "n_mels", lm->n_mels, "fmin", lm->opt.fmin_hz, "fmax",
                     lm->opt.fmax_hz, "power", lm->opt.power, "log_offset", lm->opt.log_offset,
                     "mel_scale", "htk");
}

/* ---- reading audio ----------------------------------------------------------------- */

void vtr_audio_samples_free(vtr_audio_samples *a)
{
    if (!a)
        return;
    free(a->samples);
    *a = (vtr_audio_samples){0};
}

vtr_status vtr_audio_read(const char *path, vtr_audio_samples *out, vtr_error *err)
{
    *out = (vtr_audio_samples){0};
    vtr_status st = vtr_regular_file(path, NULL, err); /* a FIFO would block libsndfile */
    if (st != VTR_OK)
        return st;
    SF_INFO info = {0};
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: not an audio file libsndfile reads: %s", path,
                        sf_strerror(NULL));
    float *chunk = NULL, *samples = NULL;
    const sf_count_t chunk_frames = 4096;
    /* a limit that keeps n * channels and the byte counts far from overflow */
    if (info.channels < 1 || info.channels > 1024 || info.samplerate < 1 || info.frames < 0 ||
        info.frames > ((sf_count_t)1 << 36)) {
        st = vtr_fail(err, VTR_ERR_FORMAT,
                      "%s: implausible header (%d channels, %d Hz, %lld "
                      "frames)",
                      path, info.channels, info.samplerate, (long long)info.frames);
        goto end;
    }
    if (info.frames > 0 && !(samples = malloc((size_t)info.frames * sizeof *samples))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for %lld samples", path,
                      (long long)info.frames);
        goto end;
    }
    if (info.channels > 1 &&
        !(chunk = malloc((size_t)chunk_frames * (size_t)info.channels * sizeof *chunk))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    sf_count_t done = 0;
    while (done < info.frames) {
        sf_count_t want = info.frames - done < chunk_frames ? info.frames - done : chunk_frames;
        sf_count_t got;
        if (info.channels == 1) {
            got = sf_readf_float(sf, samples + done, want);
        } else {
            got = sf_readf_float(sf, chunk, want);
            for (sf_count_t i = 0; i < got; i++) {
                double sum = 0;
                for (int c = 0; c < info.channels; c++)
                    sum += chunk[i * info.channels + c];
                samples[done + i] = (float)(sum / info.channels);
            }
        }
        if (got <= 0) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: truncated: read %lld of %lld frames%s%s", path,
                          (long long)done, (long long)info.frames, sf_error(sf) ? ": " : "",
                          sf_error(sf) ? sf_strerror(sf) : "");
            goto end;
        }
        done += got;
    }
    out->samples = samples;
    out->n = info.frames;
    out->rate = info.samplerate;
    out->channels = info.channels;
    samples = NULL;
end:
    free(samples);
    free(chunk);
    sf_close(sf);
    return st;
}

/* ---- one file ---------------------------------------------------------------------- */

void vtr_logmel_features_free(vtr_logmel_features *f)
{
    if (!f)
        return;
    free(f->features.data);
    json_decref(f->meta);
    *f = (vtr_logmel_features){0};
}

vtr_status vtr_logmel_file(const char *path, const vtr_logmel_options *opt,
                           vtr_logmel_features *out, vtr_error *err)
{
    *out = (vtr_logmel_features){0};
    vtr_audio_samples audio;
    vtr_logmel *lm = NULL;
    float *data = NULL;
    json_t *meta = NULL;
    vtr_status st = vtr_audio_read(path, &audio, err);
    if (st != VTR_OK)
        return st;
    if ((st = vtr_logmel_new(opt, audio.rate, &lm, err)) != VTR_OK) {
        vtr_error_context(err, "%s", path);
        goto end;
    }
    int64_t frames = vtr_logmel_frames(lm, audio.n);
    size_t count = (size_t)frames * (size_t)lm->n_mels;
    if (count > 0 && !(data = malloc(count * sizeof *data))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for %lld log-mel frames", path,
                      (long long)frames);
        goto end;
    }
    if ((st = vtr_logmel_compute(lm, audio.samples, audio.n, data, err)) != VTR_OK) {
        vtr_error_context(err, "%s", path);
        goto end;
    }
    meta = vtr_logmel_params(lm);
    json_t *source = json_string(path); /* NULL for a path that is not UTF-8 */
    if (!meta || json_object_set_new(meta, "source", source ? source : json_null()) != 0 ||
        json_object_set_new(meta, "samples", json_integer(audio.n)) != 0 ||
        json_object_set_new(meta, "channels", json_integer(audio.channels)) != 0 ||
        json_object_set_new(meta, "duration", json_real((double)audio.n / audio.rate)) != 0) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    out->features =
        (vtr_tensor){.dtype = VTR_F32, .ndim = 2, .shape = {frames, lm->n_mels}, .data = data};
    out->meta = meta;
    data = NULL;
    meta = NULL;
end:
    free(data);
    json_decref(meta);
    vtr_logmel_free(lm);
    vtr_audio_samples_free(&audio);
    return st;
}
