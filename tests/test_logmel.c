/* Audio log-mel: parity with the numpy definition (tests/interop/logmel_ref.py) on WAVs
 * written here with libsndfile and on one written by vtr-decode; pure tones peak in
 * their band; options, short and bad inputs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "features/logmel.h"

#define PYTHON "/usr/bin/python3"
#define REF_SCRIPT "tests/interop/logmel_ref.py"
#define TEST_PI 3.14159265358979323846

static void need_python(void)
{
    if (access(REF_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " REF_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

/* A deterministic test signal: a few tones, a chirp and white noise, so that every mel
 * band holds energy well above float32 rounding of the FFT. */
static float signal_at(int64_t i, int rate, int channel)
{
    double t = (double)i / rate;
    uint32_t h = (uint32_t)(i * 2654435761u + (uint32_t)channel * 40503u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    double noise = (h / 4294967296.0 - 0.5) * 0.2;
    double v = 0.25 * sin(2 * TEST_PI * 440.0 * t) + 0.15 * sin(2 * TEST_PI * 1870.0 * t) +
               0.1 * sin(2 * TEST_PI * (200.0 + 1500.0 * t) * t) + noise;
    if (channel == 1)
        v = 0.5 * v + 0.2 * sin(2 * TEST_PI * 3100.0 * t);
    return (float)v;
}

/* Writes n frames of `channels` channels with libsndfile; format e.g. SF_FORMAT_WAV. */
static void write_audio(const char *path, int format, int rate, int channels, int64_t n,
                        double tone_hz)
{
    SF_INFO info = {.samplerate = rate, .channels = channels, .format = format | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    CHECK_MSG(sf, "sf_open %s: %s", path, sf_strerror(NULL));
    float *buf = malloc((size_t)(n > 0 ? n : 1) * (size_t)channels * sizeof *buf);
    CHECK(buf);
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < channels; c++)
            buf[i * channels + c] =
                tone_hz > 0 ? (float)(0.5 * sin(2 * TEST_PI * tone_hz * (double)i / rate))
                            : signal_at(i, rate, c);
    sf_count_t wrote = sf_writef_float(sf, buf, n);
    free(buf);
    sf_close(sf);
    CHECK_EQ_INT(wrote, n);
}

/* Compares vtr_logmel_file(path, opt) with the reference script run with `ref_args`.
 * Returns the largest |log difference|, which is the relative error of mel + offset. */
static double compare_with_reference(const char *path, const vtr_logmel_options *opt,
                                     const char *ref_args, int64_t expect_frames)
{
    vtr_error err;
    const char *ref = test_path("ref.f64");
    CHECK_EQ_INT(test_run(PYTHON " " REF_SCRIPT " '%s' '%s' %s", path, ref, ref_args), 0);
    vtr_logmel_features f;
    CHECK_OK(vtr_logmel_file(path, opt, &f, &err));
    CHECK_EQ_INT(f.features.ndim, 2);
    CHECK_EQ_INT(f.features.shape[0], expect_frames);
    CHECK_EQ_INT(f.features.shape[1], opt->n_mels);
    double worst = 0, worst_mel = 0;
    FILE *fp = fopen(ref, "rb");
    CHECK(fp);
    CHECK_EQ_INT(fseek(fp, 0, SEEK_END), 0);
    CHECK_EQ_INT(ftell(fp), expect_frames * opt->n_mels * (long)sizeof(double));
    rewind(fp);
    const float *got = f.features.data;
    int64_t count = f.features.shape[0] * f.features.shape[1];
    for (int64_t i = 0; i < count; i++) {
        double want;
        CHECK_EQ_INT(fread(&want, sizeof want, 1, fp), 1);
        double d = fabs(got[i] - want);
        if (d > worst)
            worst = d;
        /* relative error of the mel energies themselves, where they stand above the offset */
        double mel_want = exp(want) - opt->log_offset, mel_got = exp(got[i]) - opt->log_offset;
        if (mel_want > 1000 * opt->log_offset) {
            double rel = fabs(mel_got - mel_want) / mel_want;
            if (rel > worst_mel)
                worst_mel = rel;
        }
    }
    fclose(fp);
    CHECK_MSG(worst < 1e-4, "%s: log-mel differs from numpy by %g", path, worst);
    CHECK_MSG(worst_mel < 1e-4, "%s: mel energies differ from numpy by %g (relative)", path,
              worst_mel);
    vtr_logmel_features_free(&f);
    return worst;
}

TEST(logmel_defaults_are_the_16k_64_mel_setting)
{
    vtr_error err;
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    vtr_logmel *lm;
    CHECK_OK(vtr_logmel_new(&o, 16000, &lm, &err));
    CHECK_EQ_INT(vtr_logmel_window(lm), 400);
    CHECK_EQ_INT(vtr_logmel_hop(lm), 160);
    CHECK_EQ_INT(vtr_logmel_n_fft(lm), 512);
    CHECK_EQ_INT(vtr_logmel_n_mels(lm), 64);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 0), 0);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 399), 0);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 400), 1);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 559), 1);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 560), 2);
    CHECK_EQ_INT(vtr_logmel_frames(lm, 16000), 98); /* 1 + (16000 - 400) / 160 */
    /* band centres rise from just above fmin to just below fmax */
    double c0 = vtr_logmel_band_center_hz(lm, 0), c63 = vtr_logmel_band_center_hz(lm, 63);
    CHECK(c0 > 125 && c0 < 160);
    CHECK(c63 > 7000 && c63 < 7500);
    CHECK(isnan(vtr_logmel_band_center_hz(lm, 64)));
    json_t *p = vtr_logmel_params(lm);
    CHECK(p);
    CHECK_EQ_INT(json_integer_value(json_object_get(p, "n_fft")), 512);
    CHECK_STR(json_string_value(json_object_get(p, "extractor")), "logmel");
    json_decref(p);
    vtr_logmel_free(lm);
}

TEST(logmel_matches_numpy_on_a_wav)
{
    need_python();
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    const char *wav = test_path("mix.wav");
    write_audio(wav, SF_FORMAT_WAV, 16000, 1, 21000, 0); /* 1.31 s: 1 + 20600/160 frames */
    compare_with_reference(wav, &o, "", 129);
    /* VGGish's own offset */
    o.log_offset = 0.01;
    compare_with_reference(wav, &o, "64 125 7500 1 0.01", 129);
}

TEST(logmel_matches_numpy_with_other_options)
{
    need_python();
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    o.n_mels = 40;
    o.fmin_hz = 0;
    o.fmax_hz = 8000;
    o.power = 2;
    o.log_offset = 1e-3;
    const char *wav = test_path("mix16.wav");
    write_audio(wav, SF_FORMAT_WAV, 16000, 1, 8000, 0);
    compare_with_reference(wav, &o, "40 0 8000 2 0.001", 1 + (8000 - 400) / 160);
    /* a stereo file at 8 kHz with a 32 ms window and 12.5 ms hop: channels are averaged,
     * window 256 = n_fft, hop 100 */
    vtr_logmel_options_defaults(&o);
    o.window_s = 0.032;
    o.hop_s = 0.0125;
    o.fmax_hz = 4000;
    o.n_mels = 32;
    const char *st = test_path("stereo8k.wav");
    write_audio(st, SF_FORMAT_WAV, 8000, 2, 6000, 0);
    compare_with_reference(st, &o, "32 125 4000 1 1e-6 0.032 0.0125", 1 + (6000 - 256) / 100);
}

TEST(logmel_reads_flac_like_wav)
{
    vtr_error err;
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    const char *wav = test_path("same.wav"), *flac = test_path("same.flac");
    write_audio(wav, SF_FORMAT_WAV, 16000, 1, 5000, 0);
    write_audio(flac, SF_FORMAT_FLAC, 16000, 1, 5000, 0);
    vtr_logmel_features a, b;
    CHECK_OK(vtr_logmel_file(wav, &o, &a, &err));
    CHECK_OK(vtr_logmel_file(flac, &o, &b, &err));
    CHECK_EQ_INT(a.features.shape[0], b.features.shape[0]);
    CHECK(memcmp(a.features.data, b.features.data,
                 (size_t)a.features.shape[0] * 64 * sizeof(float)) == 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(b.meta, "samples")), 5000);
    CHECK_STR(json_string_value(json_object_get(b.meta, "source")), flac);
    vtr_logmel_features_free(&a);
    vtr_logmel_features_free(&b);
}

/* The band whose energy is largest in every frame. */
static void check_tone_band(const vtr_logmel_options *o, int rate, int band)
{
    vtr_error err;
    vtr_logmel *lm;
    CHECK_OK(vtr_logmel_new(o, rate, &lm, &err));
    double hz = vtr_logmel_band_center_hz(lm, band);
    const char *wav = test_path("tone.wav");
    write_audio(wav, SF_FORMAT_WAV, rate, 1, rate / 2, hz);
    vtr_logmel_features f;
    CHECK_OK(vtr_logmel_file(wav, o, &f, &err));
    const float *v = f.features.data;
    int nm = (int)f.features.shape[1];
    CHECK(f.features.shape[0] > 10);
    for (int64_t t = 0; t < f.features.shape[0]; t++) {
        int best = 0;
        for (int j = 1; j < nm; j++)
            if (v[t * nm + j] > v[t * nm + best])
                best = j;
        CHECK_MSG(best == band, "a %.1f Hz tone peaks in band %d, not %d (frame %lld)", hz, best,
                  band, (long long)t);
    }
    vtr_logmel_features_free(&f);
    vtr_logmel_free(lm);
}

TEST(logmel_pure_tone_peaks_in_its_band)
{
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    int bands[] = {8, 20, 33, 47, 63};
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
        check_tone_band(&o, 16000, bands[i]);
    o.n_mels = 128;
    o.fmin_hz = 0;
    o.fmax_hz = 8000;
    o.power = 2;
    check_tone_band(&o, 16000, 100);
}

TEST(logmel_of_a_track_written_by_vtr_decode)
{
    need_python();
    if (access("bin/vtr-decode", X_OK) != 0 || access("bin/vtr-synth", X_OK) != 0)
        test_skip("bin/vtr-decode and bin/vtr-synth are not built");
    vtr_error err;
    const char *mp4 = test_path("tone.mp4"), *dir = test_path("decoded");
    CHECK_EQ_INT(
        test_run("bin/vtr-synth --frames 25 --audio aac --tone 1000 '%s' 2>/dev/null", mp4), 0);
    CHECK_EQ_INT(
        test_run("bin/vtr-decode --frames 1 --audio-dir '%s' --out-dir '%s' '%s'", dir, dir, mp4),
        0);
    const char *wav = test_path("decoded/tone.wav");
    vtr_audio_samples a;
    CHECK_OK(vtr_audio_read(wav, &a, &err));
    CHECK_EQ_INT(a.rate, 16000);
    CHECK_EQ_INT(a.channels, 1);
    CHECK(a.n > 12000);
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    vtr_logmel *lm;
    CHECK_OK(vtr_logmel_new(&o, a.rate, &lm, &err));
    int64_t frames = vtr_logmel_frames(lm, a.n);
    compare_with_reference(wav, &o, "", frames);
    /* the 1 kHz tone peaks in the band whose centre is nearest to it (in mel) */
    int expect = 0;
    for (int j = 1; j < 64; j++)
        if (fabs(log1p(vtr_logmel_band_center_hz(lm, j) / 700) - log1p(1000.0 / 700)) <
            fabs(log1p(vtr_logmel_band_center_hz(lm, expect) / 700) - log1p(1000.0 / 700)))
            expect = j;
    vtr_logmel_features f;
    CHECK_OK(vtr_logmel_file(wav, &o, &f, &err));
    const float *v = f.features.data;
    int64_t mid = f.features.shape[0] / 2;
    int peak = 0;
    for (int j = 1; j < 64; j++)
        if (v[mid * 64 + j] > v[mid * 64 + peak])
            peak = j;
    CHECK_MSG(abs(peak - expect) <= 1, "1 kHz peaks in band %d; nearest centre is band %d", peak,
              expect);
    vtr_logmel_features_free(&f);
    vtr_logmel_free(lm);
    vtr_audio_samples_free(&a);
}

TEST(logmel_short_audio_gives_no_frames)
{
    vtr_error err;
    vtr_logmel_options o;
    vtr_logmel_options_defaults(&o);
    const char *wav = test_path("short.wav");
    write_audio(wav, SF_FORMAT_WAV, 16000, 1, 399, 0);
    vtr_logmel_features f;
    CHECK_OK(vtr_logmel_file(wav, &o, &f, &err));
    CHECK_EQ_INT(f.features.shape[0], 0);
    CHECK_EQ_INT(f.features.shape[1], 64);
    vtr_logmel_features_free(&f);
    const char *empty = test_path("empty.wav");
    write_audio(empty, SF_FORMAT_WAV, 16000, 1, 0, 0);
    CHECK_OK(vtr_logmel_file(empty, &o, &f, &err));
    CHECK_EQ_INT(f.features.shape[0], 0);
    vtr_logmel_features_free(&f);
}

TEST(logmel_bad_options_and_inputs)
{
    vtr_error err;
    vtr_logmel_options o;
    vtr_logmel *lm = NULL;
    vtr_logmel_options_defaults(&o);
    o.fmax_hz = 9000;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "Nyquist");
    CHECK(!lm);
    vtr_logmel_options_defaults(&o);
    o.fmin_hz = 8000;
    o.fmax_hz = 7500;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "fmin");
    vtr_logmel_options_defaults(&o);
    o.n_fft = 256;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "n_fft 256");
    o.n_fft = 600;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "power of two");
    vtr_logmel_options_defaults(&o);
    o.n_mels = 0;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "n_mels 0");
    vtr_logmel_options_defaults(&o);
    o.power = 3;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "power 3");
    vtr_logmel_options_defaults(&o);
    o.log_offset = 0;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "log offset");
    vtr_logmel_options_defaults(&o);
    o.hop_s = 0;
    CHECK_FAILS(vtr_logmel_new(&o, 16000, &lm, &err), VTR_ERR_INVALID, "hop");
    vtr_logmel_options_defaults(&o);
    CHECK_FAILS(vtr_logmel_new(&o, 0, &lm, &err), VTR_ERR_INVALID, "sample rate");
    /* a window of 25 ms at 8 kHz is 200 samples: n_fft 256; fmax 7500 is above 4 kHz */
    const char *wav8 = test_path("rate8k.wav");
    write_audio(wav8, SF_FORMAT_WAV, 8000, 1, 4000, 0);
    vtr_logmel_features f;
    CHECK_FAILS(vtr_logmel_file(wav8, &o, &f, &err), VTR_ERR_INVALID, "rate8k.wav: log-mel");
    CHECK(!f.features.data && !f.meta);

    CHECK_FAILS(vtr_logmel_file(test_path("missing.wav"), &o, &f, &err), VTR_ERR_IO, "missing.wav");
    const char *junk = test_path("junk.wav");
    FILE *fp = fopen(junk, "w");
    CHECK(fp);
    fputs("this is not audio at all, just some text that is long enough", fp);
    fclose(fp);
    CHECK_FAILS(vtr_logmel_file(junk, &o, &f, &err), VTR_ERR_FORMAT, "junk.wav");
    /* a WAV cut short in its data chunk */
    const char *cut = test_path("cut.wav");
    write_audio(cut, SF_FORMAT_WAV, 16000, 1, 16000, 0);
    CHECK_EQ_INT(test_run("truncate -s 20000 '%s'", cut), 0);
    vtr_audio_samples a;
    vtr_status st = vtr_audio_read(cut, &a, &err);
    /* libsndfile either reports the shorter length or fails the read; never more samples */
    if (st == VTR_OK) {
        CHECK(a.n <= (20000 - 44) / 2);
        vtr_audio_samples_free(&a);
    } else {
        CHECK_EQ_INT(st, VTR_ERR_FORMAT);
        CHECK(strstr(err.msg, "cut.wav"));
    }
}
