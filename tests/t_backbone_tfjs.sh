#!/bin/sh
# vtr-backbone-init --tfjs from the command line: a TF.js layers model (the small Keras
# graph of tests/fixtures/make_keras_fixtures.py, every layer vtr runs) converted to
# safetensors, its metadata, vtr-features with it (the graph's dimension, the recorded
# preprocessing as the default, an option over it, -a of another architecture), and what
# is refused: options of the other mode, a missing model, a truncated shard (one line,
# exit 1, no file written).
set -u
for p in vtr-backbone-init vtr-features vtr-decode vtr-synth vtr-inspect; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_keras_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import torch, numpy' 2>/dev/null || { echo "$PY with torch is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
$PY $SCRIPT "$dir/k" || fail "make_keras_fixtures.py"

# 1. the conversion and what it records
vtr-backbone-init --tfjs "$dir/k/model.json" -o "$dir/k.safetensors" || fail "--tfjs: exit $?"
vtr-inspect "$dir/k.safetensors" >"$dir/inspect" || fail "vtr-inspect"
for want in '"format":"keras"' '"keras_model":"<[0-9]* bytes>"' '"pretrained":"true"' \
    '"input_size":"32"' '"mean":"0,0,0"' '"std":"1,1,1"' 'conv1/kernel  float32 (3, 3, 3, 8)'; do
    grep -q "$want" "$dir/inspect" || fail "no $want in: $(head -3 "$dir/inspect")"
done
grep -q '"arch"' "$dir/inspect" && fail "an architecture recorded for a graph of no known one"

# 2. features: 12-d (the graph's last map), the recorded preprocessing by default
vtr-synth --frames 8 --size 96x64 "$dir/a.mp4" || fail "vtr-synth"
vtr-decode --frames 2 -o "$dir/f.rec" "$dir/a.mp4" || fail "vtr-decode"
vtr-features -w "$dir/k.safetensors" --threads 2 -o "$dir/out.rec" "$dir/f.rec" ||
    fail "vtr-features: exit $?"
vtr-inspect --json "$dir/out.rec" >"$dir/feat" || fail "vtr-inspect out.rec"
grep -q '"dtype":"float32","shape":\[2,12\]' "$dir/feat" || fail "shape: $(cat "$dir/feat")"
grep -q '"extractor":{"arch":"keras",' "$dir/feat" || fail "arch: $(cat "$dir/feat")"
grep -q '"preprocess":{"resize":32,"crop":32,"mean":\[0.0,0.0,0.0\],"std":\[1.0,1.0,1.0\]}' \
    "$dir/feat" || fail "preprocess: $(cat "$dir/feat")"
vtr-features -w "$dir/k.safetensors" --crop 0 --mean 0.5,0.5,0.5 -o "$dir/out2.rec" \
    "$dir/f.rec" || fail "vtr-features --crop 0 --mean: exit $?"
vtr-inspect --json "$dir/out2.rec" |
    grep -q '"preprocess":{"resize":32,"crop":0,"mean":\[0.5,0.5,0.5\],"std":\[1.0,1.0,1.0\]}' ||
    fail "options over the recorded preprocessing: $(vtr-inspect --json "$dir/out2.rec")"
vtr-features -w "$dir/k.safetensors" -a mobilenet_v2 -o "$dir/x.rec" "$dir/f.rec" 2>"$dir/err"
[ $? -eq 1 ] && grep -q "are keras weights, not mobilenet_v2: use -a keras" "$dir/err" ||
    fail "-a mobilenet_v2: $(cat "$dir/err")"

# 3. refused: one line, exit 1, nothing written
refused() { # WANT CMD...: exit 1, one line on stderr holding WANT, no $dir/bad.safetensors
    want=$1
    shift
    "$@" 2>"$dir/err"
    rc=$?
    [ $rc -eq 1 ] || fail "$*: exit $rc"
    [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "$want" "$dir/err" || fail "$*: $(cat "$dir/err")"
    [ -e "$dir/bad.safetensors" ] && fail "$*: wrote a file"
    ls "$dir" | grep -q '\.tmp\.' && fail "$*: left a temporary file"
    return 0
}
refused "--arch is for an untrained ResNet, not with --tfjs" \
    vtr-backbone-init --tfjs "$dir/k/model.json" -a resnet18 -o "$dir/bad.safetensors"
refused "--mean goes with --tfjs" vtr-backbone-init --mean 1,2,3 -o "$dir/bad.safetensors"
refused "$dir/none/model.json" vtr-backbone-init --tfjs "$dir/none/model.json" -o "$dir/bad.safetensors"
head -c 100 "$dir/k/group1-shard2of2" >"$dir/short" && mv "$dir/short" "$dir/k/group1-shard2of2"
refused "weight group 0: its files hold" \
    vtr-backbone-init --tfjs "$dir/k/model.json" -o "$dir/bad.safetensors"
echo "ok"
