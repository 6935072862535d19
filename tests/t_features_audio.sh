#!/bin/sh
# vtr-features --audio: vtr-synth clips with sine tones -> vtr-decode --audio-dir ->
# log-mel frames as records, NPY files (--out-dir) and a feature store; the frame count
# follows the duration and the hop, the band nearest the tone (in mel) is the loudest; a
# file that is not audio is one error line and exit 2 while the others are written; the
# options of the two modes do not mix.
set -u
for p in vtr-features vtr-decode vtr-synth vtr-inspect; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

# 2 s at 1000 Hz (AAC, stereo 44.1 kHz), 1 s at 2500 Hz (Vorbis), a video without audio
vtr-synth --frames 50 --fps 25 --audio aac --tone 1000 "$dir/low.mp4" || fail "vtr-synth low.mp4"
vtr-synth --frames 25 --fps 25 --audio vorbis --tone 2500 "$dir/high.mkv" || fail "vtr-synth high.mkv"
vtr-synth --frames 5 "$dir/mute.mp4" || fail "vtr-synth mute.mp4"
vtr-decode --frames 1 -o "$dir/frames.rec" --audio-dir "$dir/wav" "$dir/low.mp4" "$dir/high.mkv" \
    "$dir/mute.mp4" || fail "vtr-decode --audio-dir"
vtr-decode --frames 1 -o "$dir/frames2.rec" --audio-dir "$dir/flac" --audio-format flac \
    "$dir/high.mkv" || fail "vtr-decode --audio-format flac"
[ -f "$dir/wav/low.wav" ] && [ -f "$dir/wav/high.wav" ] && [ ! -e "$dir/wav/mute.wav" ] ||
    fail "vtr-decode wrote: $(ls "$dir/wav")"

# 1. a directory into --out-dir, a file and a FLAC file into records, the directory into a
# store with --hop 0.02 --mels 40
vtr-features --audio --out-dir "$dir/npy" "$dir/wav" || fail "--out-dir: exit $?"
vtr-features --audio -o "$dir/logmel.rec" "$dir/wav/low.wav" "$dir/flac" || fail "records: exit $?"
vtr-features --audio --hop 0.02 --mels 40 --fmax 8000 --half --store "$dir/store" "$dir/wav" ||
    fail "--store: exit $?"
vtr-inspect --json "$dir/logmel.rec" >"$dir/inspect" || fail "vtr-inspect"
[ "$(grep -c '"key":"low"' "$dir/inspect")" -eq 1 ] && [ "$(grep -c '"key":"high"' "$dir/inspect")" -eq 1 ] ||
    fail "records: $(cat "$dir/inspect")"
grep -q '"extractor":"logmel","rate":16000,"window":400,"hop":160,"n_fft":512,"n_mels":64' \
    "$dir/inspect" || fail "record metadata: $(cat "$dir/inspect")"
$PY - "$dir" <<'PYEOF' || fail "log-mel frames"
import json, math, sys
import numpy as np
d = sys.argv[1]

def mel(f):
    return 1127.0 * math.log(1.0 + f / 700.0)

def nearest_band(tone, fmin, fmax, n):
    # band j peaks at edge j + 1 of n + 2 edges equally spaced in mel
    edges = np.linspace(mel(fmin), mel(fmax), n + 2)
    return int(np.argmin(np.abs(edges[1:-1] - mel(tone))))

for key, tone, seconds in (("low", 1000, 2.0), ("high", 2500, 1.0)):
    x = np.load("%s/npy/%s.npy" % (d, key))
    meta = json.load(open("%s/npy/%s.json" % (d, key)))
    assert x.dtype == np.float32 and x.shape[1] == 64, (key, x.dtype, x.shape)
    # frames = 1 + (samples - window) / hop, and about duration / hop
    assert x.shape[0] == 1 + (meta["samples"] - 400) // 160, (key, x.shape, meta["samples"])
    assert abs(x.shape[0] - meta["duration"] / 0.010) <= 3, (key, x.shape, meta["duration"])
    assert abs(meta["duration"] - seconds) < 0.1, (key, meta["duration"])
    band = nearest_band(tone, 125, 7500, 64)
    loudest = np.argmax(x[2:-2], axis=1)  # frames clear of the track's ends
    assert (loudest == band).all(), (key, band, np.unique(loudest))
    assert x[2:-2, band].mean() > x[2:-2].mean() + 5, key
# the store: the same files with other options, float16 (frames, 40)
rows = np.load(d + "/store/rows.npy")
offsets = np.load(d + "/store/offsets.npy")
keys = open(d + "/store/keys.txt").read().split("\n")[:-1]
meta = json.load(open(d + "/store/meta.json"))
assert keys == ["high", "low"], keys
assert rows.dtype == np.float16 and rows.shape[1] == 40, rows.shape
assert meta["extractor"] == "logmel" and meta["source"]["hop_s"] == 0.02, meta
for i, (key, tone) in enumerate((("high", 2500), ("low", 1000))):
    samples = json.load(open("%s/npy/%s.json" % (d, key)))["samples"]
    x = rows[offsets[i]:offsets[i + 1]].astype(np.float32)
    assert x.shape[0] == 1 + (samples - 400) // 320, (key, x.shape)
    assert (np.argmax(x[2:-2], axis=1) == nearest_band(tone, 125, 8000, 40)).all(), key
PYEOF

# 2. a file that is not audio among good ones: one line naming it, exit 2, others written
echo "not audio" >"$dir/wav/junk.wav"
vtr-features --audio --out-dir "$dir/npy2" "$dir/wav" "$dir/nowhere.flac" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] || fail "a bad file: exit $rc, expected 2"
[ "$(wc -l <"$dir/err")" -eq 2 ] || fail "expected two error lines: $(cat "$dir/err")"
grep -q "^vtr-features: junk: .*junk.wav: not an audio file" "$dir/err" ||
    fail "the error does not name the file: $(cat "$dir/err")"
grep -q "^vtr-features: nowhere: .*nowhere.flac: No such file" "$dir/err" ||
    fail "a missing file: $(cat "$dir/err")"
[ -f "$dir/npy2/low.npy" ] && [ -f "$dir/npy2/high.npy" ] && [ ! -e "$dir/npy2/junk.npy" ] ||
    fail "the good files were not all written: $(ls "$dir/npy2")"
cmp -s "$dir/npy/low.npy" "$dir/npy2/low.npy" || fail "a second run differs"
# two files of one name in different folders: the second fails naming both, not written
mkdir "$dir/other" && cp "$dir/wav/high.wav" "$dir/other/low.wav" || fail "other/low.wav"
vtr-features --audio --out-dir "$dir/npy3" "$dir/wav/low.wav" "$dir/other/low.wav" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "^vtr-features: low: $dir/wav/low.wav and $dir/other/low.wav have the same key; the second is not written\$" "$dir/err" ||
    fail "one key twice: exit $rc: $(cat "$dir/err")"
cmp -s "$dir/npy/low.npy" "$dir/npy3/low.npy" || fail "one key twice: low.npy is not the first's"
# a FIFO is refused at once (libsndfile would wait for a writer for ever)
mkfifo "$dir/pipe.wav" || fail "mkfifo"
timeout 20 vtr-features --audio -o "$dir/fifo.rec" "$dir/pipe.wav" "$dir/wav/low.wav" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "^vtr-features: pipe: $dir/pipe.wav: not a regular file (a FIFO)\$" "$dir/err" ||
    fail "a FIFO: exit $rc: $(cat "$dir/err")"

# 3. usage: the modes' options do not mix; bad values
for args in "--audio -w $dir/w.safetensors $dir/wav" "--audio --grid $dir/wav" "--mels 40 -w x" \
    "--audio" "--audio --mels 0 $dir/wav" "--audio --fmin 8000 --fmax 100 $dir/wav" \
    "--audio --power 3 $dir/wav" "--audio --n-fft 500 $dir/wav" "--audio --hop 0 $dir/wav"; do
    # shellcheck disable=SC2086
    vtr-features $args -o "$dir/x.rec" 2>"$dir/err" >/dev/null
    rc=$?
    [ $rc -eq 1 ] || fail "'vtr-features $args': exit $rc, expected 1"
    grep -q "^vtr-features: " "$dir/err" || fail "'vtr-features $args': no message"
done
# a rate-dependent problem is the item's: fmax above half of 16 kHz
vtr-features --audio --fmax 9000 -o "$dir/x.rec" "$dir/wav/low.wav" 2>"$dir/err"
[ $? -eq 2 ] && grep -q "low: .*Nyquist" "$dir/err" || fail "--fmax 9000: $(cat "$dir/err")"
vtr-features --help | grep -q -- '--audio' || fail "--help"
exit 0
