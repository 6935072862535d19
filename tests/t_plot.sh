#!/bin/sh
# vtr-plot end to end on runs trained here: 24 generated "videos" (an object's feature
# dimension raised in some frames, a caption naming it), two seeds of a tiny VSE∞ (GPO on
# both sides) and a VSE++ (mean pooling) trained for a few epochs (vtr-import, vtr-train).
# vtr-plot curves of the two seeds (mean and band) as SVG (parsed as XML: four panels'
# worth of lines in the two colours drawn, at the size asked) and PNG (signature, size),
# --separate, standard output; vtr-plot gpo of a seed's checkpoint (SVG, PNG, --sizes; a
# plain state_dict with --config: the same image);
# the refusals: a model without GPO, a directory without a log, a malformed log (file and
# line named), an unknown format, no output: one line on stderr, exit 1, and no output
# file left (an existing one untouched). The fixture is written with Python's standard
# library (no numpy).
set -u
for p in vtr-plot vtr-import vtr-train; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
[ -x $PY ] || { echo "$PY is not available"; exit 77; }
dir=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# one line on stderr naming $2
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || fail "$3: expected one line on stderr: $(cat "$1")"
    grep -q -- "$2" "$1" || fail "$3: stderr does not name '$2': $(cat "$1")"
}

# 1. the fixture: MSR-VTT annotations and per-video NPY features
$PY - "$dir" <<'PYEOF' || fail "fixture"
import array, json, os, random, sys
d = sys.argv[1]
words = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep", "goat", "lion", "tiger",
         "bear", "wolf", "fox", "deer", "frog", "duck", "owl", "bee", "crab", "seal",
         "whale", "snake", "mouse", "camel"]
rng = random.Random(3)
os.makedirs(d + "/feats")
videos, sentences = [], []
for i, w in enumerate(words):
    key = "video%d" % i
    split = "train" if i < 16 else "validate" if i < 20 else "test"
    videos.append({"video_id": key, "split": split, "id": i})
    for t in ("a video of a {}", "the {} appears"):
        sentences.append({"caption": t.format(w), "video_id": key, "sen_id": len(sentences)})
    x = array.array("f", [rng.gauss(0, 0.5) for _ in range(8 * 24)])
    for f in rng.sample(range(8), rng.randint(3, 8)):
        x[f * 24 + i] += 3.0
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 24), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open("%s/feats/%s.npy" % (d, key), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.write(x.tobytes())
json.dump({"videos": videos, "sentences": sentences}, open(d + "/ann.json", "w"))
PYEOF

# 2. catalog + store; the runs (a few epochs each: what is plotted, not what is learned)
vtr-import msrvtt "$dir/ann.json" -c "$dir/cat.db" -d toy 2>"$dir/err" || fail "import: $(cat "$dir/err")"
vtr-import npy-dir "$dir/feats" -c "$dir/cat.db" -d toy --store "$dir/store" 2>"$dir/err" ||
    fail "import npy-dir: $(cat "$dir/err")"
cat >"$dir/toy.yaml" <<EOF2
data: {catalog: $dir/cat.db, dataset: toy, features: $dir/store, vocab_threshold: 1}
model: {feature_dim: 24, embed_size: 16, mlp_hidden: 0, word_dim: 16, gpo_pe: 8, gpo_hidden: 8}
train: {epochs: 4, batch_size: 8, lr: 5.0e-3, lr_decay_epochs: [3], checkpoint_every: 0}
val: {batch_size: 16}
EOF2
for seed in 1 2; do
    vtr-train "$dir/toy.yaml" --seed $seed -o "$dir/runs/seed$seed" --threads 1 2>"$dir/err" ||
        fail "vtr-train seed $seed: $(cat "$dir/err")"
done
vtr-train "$dir/toy.yaml" -o "$dir/runs/mean" --threads 1 --set model.img_pool=mean \
    --set model.txt_pool=mean --set train.epochs=2 2>"$dir/err" || fail "vtr-train mean: $(cat "$dir/err")"
[ "$(wc -l <"$dir/runs/seed1/metrics.jsonl")" -eq 4 ] || fail "expected 4 epochs in seed1's log"

# 3. curves: SVG, PNG, --separate, stdout
vtr-plot --help | grep -q '^Usage: vtr-plot curves' || fail "--help"
vtr-plot --version | head -1 | grep -q '^vtr-plot ' || fail "--version"
vtr-plot curves "$dir/runs/seed1" "$dir/runs/seed2" -o "$dir/curves.svg" 2>"$dir/err" ||
    fail "curves svg: exit $?: $(cat "$dir/err")"
one_line "$dir/err" "wrote $dir/curves.svg: training curves of 2 runs, mean and min-max band" "curves svg"
# the SVG parses; 920x674; the mean lines: 4 panels, each a line and a legend sample in the
# first colour (tab10 blue), and a band in each panel where the seeds differ (cairo draws
# nothing for a band of no area: the toy's validation RSUM may be the same for both)
$PY - "$dir/curves.svg" <<'PYEOF' || fail "curves.svg: $(cat "$dir/err")"
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
svg = doc.documentElement
assert svg.tagName == "svg" and svg.getAttribute("width") == "920px", svg.getAttribute("width")
assert svg.getAttribute("height") == "674px", svg.getAttribute("height")
blue = "rgb(12.156863%,46.666667%,70.588235%)"
styles = [p.getAttribute("style") for p in doc.getElementsByTagName("path")]
lines = [s for s in styles if "stroke:" + blue in s]
bands = [s for s in styles if "fill:" + blue in s]
assert len(lines) == 8, len(lines)
assert 1 <= len(bands) <= 4, len(bands)
PYEOF
vtr-plot curves "$dir/runs/seed1" -o "$dir/curves.png" --size 800x600 2>"$dir/err" ||
    fail "curves png: $(cat "$dir/err")"
png_size() { # the PNG's signature and its IHDR size, "WxH"
    $PY -c 'import struct, sys; b = open(sys.argv[1], "rb").read(24)
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b[:16]
print("%dx%d" % struct.unpack(">II", b[16:24]))' "$1"
}
[ "$(png_size "$dir/curves.png")" = 800x600 ] || fail "curves.png: $(png_size "$dir/curves.png")"
vtr-plot curves "$dir/runs/seed1" "$dir/runs/seed2/metrics.jsonl" "$dir/runs/mean" --separate \
    -o "$dir/separate.svg" 2>"$dir/err" || fail "--separate: $(cat "$dir/err")"
grep -q 'a line each' "$dir/err" || fail "--separate: $(cat "$dir/err")"
vtr-plot curves "$dir/runs/seed1" -o - -f png >"$dir/stdout.png" 2>"$dir/err" ||
    fail "stdout: $(cat "$dir/err")"
[ ! -s "$dir/err" ] || fail "stdout: said $(cat "$dir/err")"
[ "$(png_size "$dir/stdout.png")" = 920x674 ] || fail "stdout.png"

# 4. GPO's coefficients: a panel per side
vtr-plot gpo "$dir/runs/seed1/best.safetensors" -o "$dir/gpo.svg" 2>"$dir/err" ||
    fail "gpo svg: $(cat "$dir/err")"
one_line "$dir/err" "GPO coefficients of $dir/runs/seed1/best.safetensors (2 sides)" "gpo svg"
$PY -c 'import sys, xml.dom.minidom; d = xml.dom.minidom.parse(sys.argv[1]).documentElement
assert d.getAttribute("width") == "920px" and d.getAttribute("height") == "354px"' "$dir/gpo.svg" ||
    fail "gpo.svg does not parse or has another size"
vtr-plot gpo "$dir/runs/seed2/last.safetensors" --sizes 3,6,12 --title "seed 2" \
    -o "$dir/gpo.PNG" 2>"$dir/err" || fail "gpo png: $(cat "$dir/err")"
[ "$(png_size "$dir/gpo.PNG")" = 920x354 ] || fail "gpo.PNG"

# a plain state_dict (the checkpoint's tensors without its metadata, as a converted PyTorch
# checkpoint is): refused without a config, drawn with --config
$PY - "$dir/runs/seed1/best.safetensors" "$dir/plain.safetensors" <<'PYEOF' || fail "plain"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["__metadata__"]
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PYEOF
vtr-plot gpo "$dir/plain.safetensors" -o "$dir/plain.svg" 2>"$dir/err"
[ $? -eq 1 ] || fail "a plain checkpoint without --config: exit status"
one_line "$dir/err" "plain.safetensors: carries no config: name the training config" "no config"
# the same coefficients, so the same pixels
vtr-plot gpo "$dir/plain.safetensors" --config "$dir/toy.yaml" --title same -o "$dir/plain.png" \
    2>"$dir/err" || fail "--config: $(cat "$dir/err")"
vtr-plot gpo "$dir/runs/seed1/best.safetensors" --title same -o "$dir/full.png" 2>"$dir/err" ||
    fail "gpo full.png: $(cat "$dir/err")"
cmp -s "$dir/plain.png" "$dir/full.png" || fail "the plain checkpoint's plot differs"

# 5. refusals: one line naming the file and the cause, exit 1, nothing written
echo keep >"$dir/keep.svg"
refused() { # what needle command...
    what=$1 needle=$2
    shift 2
    "$@" 2>"$dir/err"
    [ $? -eq 1 ] || fail "$what: exit status"
    one_line "$dir/err" "$needle" "$what"
    [ "$(cat "$dir/keep.svg")" = keep ] || fail "$what: keep.svg changed"
    [ -z "$(find "$dir" -maxdepth 1 -name '*.tmp.*')" ] || fail "$what: a temporary file left"
}
refused "no GPO" "runs/mean/best.safetensors: the model has no GPO to plot (model.img_pool mean, model.txt_pool mean)" \
    vtr-plot gpo "$dir/runs/mean/best.safetensors" -o "$dir/keep.svg"
refused "no log" "$dir/feats/metrics.jsonl: No such file or directory" \
    vtr-plot curves "$dir/runs/seed1" "$dir/feats" -o "$dir/keep.svg"
mkdir "$dir/broken"
head -2 "$dir/runs/seed1/metrics.jsonl" >"$dir/broken/metrics.jsonl"
echo '{"epoch": 3, "loss": ' >>"$dir/broken/metrics.jsonl"
refused "malformed log" "broken/metrics.jsonl:3: not a JSON object" \
    vtr-plot curves "$dir/broken" -o "$dir/keep.svg"
refused "unknown format" "curves.pdf: cannot tell the format from the name" \
    vtr-plot curves "$dir/runs/seed1" -o "$dir/curves.pdf"
[ ! -e "$dir/curves.pdf" ] || fail "curves.pdf written"
refused "no output" "-o FILE is required" vtr-plot curves "$dir/runs/seed1"
refused "bad sizes" "--sizes" vtr-plot gpo "$dir/runs/seed1/best.safetensors" --sizes 3,0 -o "$dir/keep.svg"
refused "stdout without a format" "with --format" vtr-plot curves "$dir/runs/seed1" -o -
refused "nothing to plot" "curves or gpo" vtr-plot "$dir/runs/seed1" -o "$dir/keep.svg"
echo "ok"
