#!/bin/sh
# vtr-features from the command line: vtr-synth | vtr-decode | vtr-features through a pipe
# and through files (--out-dir, --store), grid and float16 output, bfloat16 convolutions
# (--bf16), frames already resized by vtr-decode, and bad inputs (a record of the wrong
# kind, a truncated stream, weights with a missing tensor or a wrong shape). Random
# ResNet-18 weights with torchvision's names come from
# tests/fixtures/make_backbone_fixtures.py (numpy only).
set -u
for p in vtr-features vtr-decode vtr-synth vtr-inspect; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# small frames keep the test fast: --resize 72 --crop 64 gives a 2x2 grid
F="vtr-features -w $dir/w.safetensors -a resnet18 --resize 72 --crop 64 --threads 2"

$PY $SCRIPT random-weights resnet18 "$dir/w.safetensors" 1 || fail "random weights"
: | vtr-features -w "$dir/w.safetensors" -a resnet18 >/dev/null 2>"$dir/err" || {
    grep -q 'need oneDNN' "$dir/err" && { echo "built without oneDNN"; exit 77; }
    fail "vtr-features on an empty stream: $(cat "$dir/err")"
}
vtr-synth --frames 20 --gop 5 "$dir/a.mp4" || fail "vtr-synth a.mp4"
vtr-synth --frames 12 --size 96x64 "$dir/b.webm" || fail "vtr-synth b.webm"
vtr-synth "$dir/c.png" || fail "vtr-synth c.png"

# 1. a pipe: one record per item, (frames, 512) float32, metadata passed through
vtr-decode --frames 3 "$dir/a.mp4" "$dir/b.webm" "$dir/c.png" | $F >"$dir/pipe.rec" ||
    fail "pipe: exit $?"
vtr-inspect --json "$dir/pipe.rec" >"$dir/inspect" || fail "vtr-inspect pipe.rec"
[ "$(grep -c '"kind":"record"' "$dir/inspect")" -eq 3 ] || fail "expected 3 records: $(cat "$dir/inspect")"
for key in a b c; do
    grep "\"key\":\"$key\"" "$dir/inspect" | grep -q '"dtype":"float32","shape":\[3,512\]' ||
        fail "record $key missing or of the wrong shape"
done
grep '"key":"a"' "$dir/inspect" | grep -q '"timestamps":\[' || fail "metadata not passed through"
grep '"key":"a"' "$dir/inspect" |
    grep -q '"extractor":{"arch":"resnet18","weights":"[^"]*w.safetensors","sha256":"[0-9a-f]\{64\}","grid":false,"dtype":"float32","compute":"float32","dim":512' ||
    fail "no extractor metadata: $(grep '"key":"a"' "$dir/inspect")"

# 2. files: the same frames from a record file into --out-dir and --store, and from the
# pipe into --out-dir: identical bytes (same batches); --batch 2 agrees to rounding
vtr-decode --frames 3 -o "$dir/frames.rec" "$dir/a.mp4" "$dir/b.webm" "$dir/c.png" ||
    fail "vtr-decode -o"
$F --out-dir "$dir/npy" "$dir/frames.rec" || fail "--out-dir: exit $?"
vtr-decode --frames 3 "$dir/a.mp4" "$dir/b.webm" "$dir/c.png" | $F --out-dir "$dir/npy2" - ||
    fail "pipe into --out-dir: exit $?"
$F --batch 2 --out-dir "$dir/npy3" "$dir/frames.rec" || fail "--batch 2: exit $?"
$F --store "$dir/store" "$dir/frames.rec" || fail "--store: exit $?"
for key in a b c; do
    [ -s "$dir/npy/$key.npy" ] && [ -s "$dir/npy/$key.json" ] || fail "no $key.npy/.json"
    cmp -s "$dir/npy/$key.npy" "$dir/npy2/$key.npy" || fail "$key: pipe and file differ"
done
ls "$dir/npy" | grep -q '\.tmp\.' && fail "temporary files left in --out-dir"

# --bf16: on a CPU whose oneDNN ISA has AVX512-BF16 (or AMX), bfloat16 convolutions:
# features within a cosine of 0.999 of float32's, not the same bytes, and the metadata
# says so; elsewhere one warning line, and float32
$F --bf16 --out-dir "$dir/bf16" "$dir/frames.rec" 2>"$dir/err" || fail "--bf16: exit $?"
case $(vtr-features --version | sed -n 3p) in
*"ISA avx512_core_bf16"* | *"ISA avx512_core_amx"*)
    [ -s "$dir/err" ] && fail "--bf16 warned: $(cat "$dir/err")"
    grep -q '"compute": *"bfloat16"' "$dir/bf16/a.json" || fail "--bf16: $(cat "$dir/bf16/a.json")"
    $PY - "$dir/npy" "$dir/bf16" <<'PYEOF' || fail "--bf16 features"
import sys
import numpy as np
for key in "abc":
    a, b = (np.load("%s/%s.npy" % (d, key)).astype(np.float64) for d in sys.argv[1:3])
    assert not np.array_equal(a, b), key + ": bfloat16 gave float32's bytes"
    cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    assert cos.min() >= 0.999, "%s: cosine %s" % (key, cos)
PYEOF
    ;;
*)
    [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q '^vtr-features: warning: --bf16: .*; running float32$' "$dir/err" ||
        fail "--bf16 on a CPU without bfloat16: $(cat "$dir/err")"
    cmp -s "$dir/npy/a.npy" "$dir/bf16/a.npy" || fail "--bf16 fell back, yet other features"
    ;;
esac
grep -q '"sha256"' "$dir/npy/b.json" || fail "b.json lacks the extractor"
$PY - "$dir" <<'EOF' || fail "store and NPY files disagree"
import json, sys
import numpy as np
d = sys.argv[1]
rows = np.load(d + "/store/rows.npy")
offsets = np.load(d + "/store/offsets.npy")
keys = open(d + "/store/keys.txt").read().split("\n")[:-1]
meta = json.load(open(d + "/store/meta.json"))
assert keys == ["a", "b", "c"], keys
assert rows.shape == (9, 512) and rows.dtype == np.float32, rows.shape
assert meta["extractor"] == "resnet18/avgpool" and meta["dim"] == 512, meta
for i, k in enumerate(keys):
    a = np.load("%s/npy/%s.npy" % (d, k))
    assert a.shape == (3, 512) and a.dtype == np.float32
    assert np.array_equal(rows[offsets[i]:offsets[i + 1]], a), k
    b = np.load("%s/npy3/%s.npy" % (d, k))
    assert np.abs(a - b).max() <= 1e-5 * np.abs(a).max(), k
    assert np.abs(a).max() > 0, k
EOF

# 3. grid features in float16: (frames * 4, 512); frames of exactly the crop size
vtr-decode --frames 2 "$dir/a.mp4" | $F --grid --half >"$dir/grid.rec" || fail "--grid: exit $?"
vtr-inspect --json "$dir/grid.rec" | grep -q '"dtype":"float16","shape":\[8,512\]' ||
    fail "grid: $(vtr-inspect "$dir/grid.rec")"
vtr-inspect --json "$dir/grid.rec" | grep -q '"grid":true,"dtype":"float16".*"grid_size":\[2,2\]' ||
    fail "grid metadata: $(vtr-inspect --json "$dir/grid.rec")"
vtr-decode --frames 2 --size 64x64 "$dir/b.webm" | $F >"$dir/prepared.rec" ||
    fail "64x64 frames: exit $?"
vtr-inspect --json "$dir/prepared.rec" | grep -q '"shape":\[2,512\]' || fail "64x64 frames"

# 4. a record of the wrong kind among good ones: exit 2, one line naming it, others written
vtr-decode --frames 2 --mean 0.5,0.5,0.5 --std 0.2,0.2,0.2 -o "$dir/float.rec" "$dir/b.webm" ||
    fail "vtr-decode --mean"
cat "$dir/float.rec" "$dir/frames.rec" | $F >"$dir/mixed.rec" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] || fail "a float32 record: exit $rc, expected 2"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "expected one error line, got: $(cat "$dir/err")"
grep -q '^vtr-features: b: float32 (2, 64, 96, 3), not uint8 RGB frames' "$dir/err" ||
    fail "the error does not name the record: $(cat "$dir/err")"
[ "$(vtr-inspect --json "$dir/mixed.rec" | grep -c '"kind":"record"')" -eq 3 ] ||
    fail "the good records were not all written"

# 5. a truncated stream: the items before the cut are written, exit 2
head -c 100000 "$dir/frames.rec" | $F >"$dir/cut.rec" 2>"$dir/err"
[ $? -eq 2 ] || fail "truncated stream: expected exit 2"
grep -q 'stdin' "$dir/err" || fail "truncated stream: $(cat "$dir/err")"

# 6. weights that do not fit: exit 1 and one line naming the tensor
$PY $SCRIPT random-weights resnet18 "$dir/drop.safetensors" 1 drop=layer3.0.downsample.0.weight ||
    fail "weights without a tensor"
$PY $SCRIPT random-weights resnet18 "$dir/shape.safetensors" 1 shape=layer2.1.conv1.weight:128,128,1,1 ||
    fail "weights with a wrong shape"
vtr-features -w "$dir/drop.safetensors" -a resnet18 "$dir/frames.rec" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "missing tensor: expected exit 1"
grep -q "missing tensor 'layer3.0.downsample.0.weight' (resnet18)" "$dir/err" ||
    fail "missing tensor: $(cat "$dir/err")"
vtr-features -w "$dir/shape.safetensors" -a resnet18 "$dir/frames.rec" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "wrong shape: expected exit 1"
grep -q "tensor 'layer2.1.conv1.weight' has shape (128, 128, 1, 1), resnet18 expects (128, 128, 3, 3)" \
    "$dir/err" || fail "wrong shape: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "expected one line: $(cat "$dir/err")"
vtr-features -w "$dir/w.safetensors" -a resnet50 "$dir/frames.rec" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] && [ "$(cat "$dir/err")" = "vtr-features: $dir/w.safetensors are resnet18 weights, not resnet50: use -a resnet18" ] ||
    fail "resnet18 weights as resnet50: $(cat "$dir/err")"
# weights that are a device or a FIFO: refused at once, not read for ever or waited on
mkfifo "$dir/w.fifo" || fail "mkfifo"
for w in /dev/zero "$dir/w.fifo"; do
    timeout 20 vtr-features -w "$w" -a resnet18 "$dir/frames.rec" >/dev/null 2>"$dir/err"
    rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q "^vtr-features: $w: not a regular file (a [a-zA-Z ]*)\$" "$dir/err" ||
        fail "weights $w: exit $rc: $(cat "$dir/err")"
done

# 7. the same weights as torch.save writes them (a .pth, told by its content, not its name;
# the architecture from the tensors): the same features, bit for bit
if $PY -c 'import torch, torchvision' 2>/dev/null; then
    $PY $SCRIPT random-weights resnet18 "$dir/w.pth" 1 || fail "random weights as .pth"
    cp "$dir/w.pth" "$dir/pth-inside.safetensors"
    $F --out-dir "$dir/from_st" "$dir/frames.rec" || fail "features from safetensors"
    vtr-features -w "$dir/pth-inside.safetensors" --resize 72 --crop 64 --threads 2 \
        --out-dir "$dir/from_pth" "$dir/frames.rec" || fail "features from .pth"
    n=0
    for f in "$dir"/from_st/*.npy; do
        cmp -s "$f" "$dir/from_pth/$(basename "$f")" || fail "$(basename "$f") differs"
        n=$((n + 1))
    done
    [ $n -gt 0 ] || fail "no features written"
    grep -q '"arch": *"resnet18"' "$dir"/from_pth/*.json || fail "arch not recorded: $(cat "$dir"/from_pth/*.json)"
    vtr-features -w "$dir/w.pth" -a resnet152 "$dir/frames.rec" >/dev/null 2>"$dir/err"
    [ $? -eq 1 ] && [ "$(cat "$dir/err")" = "vtr-features: $dir/w.pth are resnet18 weights, not resnet152: use -a resnet18" ] ||
        fail ".pth for another architecture: $(cat "$dir/err")"
else
    echo "skipped the .pth checks: $PY cannot import torch and torchvision"
fi

# 8. usage
vtr-features --help | grep -q -- '--weights' || fail "--help"
vtr-features "$dir/frames.rec" >/dev/null 2>&1
[ $? -eq 1 ] || fail "no --weights: expected exit 1"
vtr-features -w "$dir/w.safetensors" --arch vgg16 >/dev/null 2>&1
[ $? -eq 1 ] || fail "bad --arch: expected exit 1"
# --device: a bad name; a GPU where none is (or in a build without CUDA): one line each
# that says what to do, exit 1
vtr-features -w "$dir/w.safetensors" --device tpu "$dir/frames.rec" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] && [ "$(cat "$dir/err")" = "vtr-features: --device is cpu, cuda or cuda:N (got 'tpu')" ] ||
    fail "--device tpu: $(cat "$dir/err")"
if ! nvidia-smi -L >/dev/null 2>&1; then
    for d in cuda cuda:3; do
        vtr-features -w "$dir/w.safetensors" --device $d "$dir/frames.rec" >/dev/null 2>"$dir/err"
        [ $? -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
            grep -q 'run on the CPU (--device cpu)' "$dir/err" ||
            fail "--device $d without a GPU: $(cat "$dir/err")"
    done
fi
exit 0
