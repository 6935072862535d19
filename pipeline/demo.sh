#!/bin/sh
# make demo: the end-to-end path that exists today, on an archive rendered here.
#
#   1. render a small archive with vtr-synth (libavcodec): H.264 with B-frames, VP9 in
#      WebM, MPEG-4, a variable-frame-rate clip, a rotated phone-style clip, a clip with
#      an audio track, a PNG still, and one truncated file;
#   2. vtr-decode samples 8 frames of every item into one record stream (the broken file
#      is reported and skipped, the rest finish: exit status 2), audio to WAV;
#   3. vtr-inspect shows what the stream holds;
#   4. the same decode as per-item NPY files, the layout Make-driven pipelines use.
#
# Feature extraction, training, evaluation, indexing and search join this demo as they
# land (see README.md). Output goes to demo-out/ (VTR_DEMO_DIR overrides).
set -eu
cd "$(dirname "$0")/.."
PATH=$(pwd)/bin:$PATH
out=${VTR_DEMO_DIR:-demo-out}
rm -rf "$out"
mkdir -p "$out/archive"
a=$out/archive

echo "== 1. rendering a small archive with vtr-synth"
vtr-synth --codec h264 --size 320x240 --frames 150 --fps 25 --gop 50 --bframes 2 "$a/street.mp4"
vtr-synth --codec vp9 --size 320x240 --frames 100 --fps 25 "$a/garden.webm"
vtr-synth --codec mpeg4 --size 320x240 --frames 90 --fps 30 --bframes 1 "$a/kitchen.avi"
vtr-synth --codec h264 --size 320x240 --pts 0,40,80,200,240,400,440,480,900,940,1000,1500 "$a/vfr.mkv"
vtr-synth --codec h264 --size 320x240 --frames 60 --fps 30 --rotate 90 "$a/phone.mp4"
vtr-synth --codec h264 --size 320x240 --frames 75 --fps 25 --audio aac "$a/talk.mp4"
vtr-synth --codec png --size 320x240 "$a/still.png"
head -c 3000 "$a/street.mp4" >"$a/broken.mp4"
ls -l "$a"

echo
echo "== 2. vtr-decode: 8 uniform frames per item at 224x224, audio to WAV"
set +e
vtr-decode --frames 8 --size 224x224 --audio-dir "$out/audio" -o "$out/frames.vtr" "$a"/*
status=$?
set -e
echo "vtr-decode exit status: $status (2 = some items failed, the others were written)"
[ "$status" -eq 2 ] || { echo "demo: expected exit status 2 for the broken file" >&2; exit 1; }

echo
echo "== 3. vtr-inspect: what the record stream holds"
vtr-inspect "$out/frames.vtr" | cut -c1-160
ls -l "$out/audio"

echo
echo "== 4. the same as per-item NPY files (what Makefiles drive, one target per item)"
vtr-decode --frames 8 --size 224x224 --out-dir "$out/npy" "$a/street.mp4" "$a/garden.webm"
vtr-inspect "$out/npy"/*.npy
/usr/bin/python3 -c "
import numpy as np, json, sys
x = np.load('$out/npy/street.npy')
meta = json.load(open('$out/npy/street.json'))
print('numpy reads street.npy:', x.dtype, x.shape, 'timestamps', meta['timestamps'])
" 2>/dev/null || true

echo
echo "demo finished: outputs in $out/"
