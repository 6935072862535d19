"""Reference log-mel spectrogram in numpy (float64), the definition of features/logmel.h,
written after VGGish's mel_features.py (frame, periodic_hann, stft_magnitude,
spectrogram_to_mel_matrix, log_mel_spectrogram), with power and log offset as options.

usage: logmel_ref.py WAV OUT [N_MELS FMIN FMAX POWER LOG_OFFSET WINDOW_S HOP_S]
Reads a 16-bit PCM WAV with the standard library (samples / 32768, channels averaged),
writes the (frames, n_mels) log-mel matrix to OUT as raw little-endian float64, row-major
(vtr's NPY reader does not take float64, and the test knows the shape).
"""
import sys
import wave

import numpy as np


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise SystemExit("%s: only 16-bit PCM" % path)
        channels, rate = w.getnchannels(), w.getframerate()
        raw = w.readframes(w.getnframes())
    x = np.frombuffer(raw, dtype="<i2").astype(np.float64) / 32768.0
    return x.reshape(-1, channels).mean(axis=1), rate


def hertz_to_mel(f):
    return 1127.0 * np.log(1.0 + f / 700.0)


def frame(data, window_length, hop_length):
    num_frames = 1 + (data.shape[0] - window_length) // hop_length
    if num_frames <= 0:
        return np.zeros((0, window_length))
    shape = (num_frames, window_length)
    strides = (data.strides[0] * hop_length, data.strides[0])
    return np.lib.stride_tricks.as_strided(data, shape=shape, strides=strides)


def periodic_hann(window_length):
    return 0.5 - (0.5 * np.cos(2 * np.pi / window_length * np.arange(window_length)))


def spectrogram_to_mel_matrix(num_mel_bins, num_spectrogram_bins, rate, lower, upper):
    nyquist = rate / 2.0
    bins_mel = hertz_to_mel(np.linspace(0.0, nyquist, num_spectrogram_bins))
    edges = np.linspace(hertz_to_mel(lower), hertz_to_mel(upper), num_mel_bins + 2)
    m = np.empty((num_spectrogram_bins, num_mel_bins))
    for i in range(num_mel_bins):
        lo, center, hi = edges[i:i + 3]
        lower_slope = (bins_mel - lo) / (center - lo)
        upper_slope = (hi - bins_mel) / (hi - center)
        m[:, i] = np.maximum(0.0, np.minimum(lower_slope, upper_slope))
    m[0, :] = 0.0
    return m


def log_mel(x, rate, n_mels=64, fmin=125.0, fmax=7500.0, power=1, log_offset=1e-6,
            window_s=0.025, hop_s=0.010):
    window = int(round(rate * window_s))
    hop = int(round(rate * hop_s))
    n_fft = 2 ** int(np.ceil(np.log(window) / np.log(2.0)))
    frames = frame(x, window, hop) * periodic_hann(window)
    spec = np.abs(np.fft.rfft(frames, n_fft)) ** power
    mel = spec @ spectrogram_to_mel_matrix(n_mels, n_fft // 2 + 1, rate, fmin, fmax)
    return np.log(mel + log_offset)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    x, rate = read_wav(sys.argv[1])
    extra = sys.argv[3:]
    kw = {}
    names = ["n_mels", "fmin", "fmax", "power", "log_offset", "window_s", "hop_s"]
    kinds = [int, float, float, int, float, float, float]
    for name, kind, value in zip(names, kinds, extra):
        kw[name] = kind(value)
    log_mel(x, rate, **kw).astype("<f8").tofile(sys.argv[2])


if __name__ == "__main__":
    main()
