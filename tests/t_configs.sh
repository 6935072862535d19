#!/bin/sh
# Every dataset config of configs/ trains and evaluates as written against data imported
# from its release's layout (the fixtures of tests/interop/import_fixtures.py: the HGR
# release for MSR-VTT and VATEX, SCAN's precomp for COCO and Flickr30K) under the names
# the configs expect (vtr.db, stores/...; the HGR configs also read the release's role
# graphs and vocabulary), from the working directory the configs are
# relative to. Only the sizes that the tiny fixtures cannot meet are overridden: the
# feature width (8), the batch (2), two epochs, and the vocabulary threshold (the
# fixture's words appear once or twice).
set -u
PY=/usr/bin/python3
FX=tests/interop/import_fixtures.py
for p in vtr-import vtr-train vtr-eval; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
[ -r "$FX" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy, h5py' 2>/dev/null || { echo "$PY with numpy and h5py is not available"; exit 77; }
top=$(pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
$PY $FX hgr "$dir/hgr" || fail "fixture hgr"
$PY $FX precomp "$dir/precomp" || fail "fixture precomp"
cd "$dir" || exit 1
vtr-import hgr hgr -c vtr.db -d msrvtt --store stores/msrvtt-resnet152 2>log ||
    fail "import msrvtt: $(cat log)"
vtr-import hgr hgr -c vtr.db -d vatex --store stores/vatex-i3d 2>log || fail "import vatex: $(cat log)"
vtr-import precomp precomp -c vtr.db -d coco --store stores/coco-butd 2>log ||
    fail "import coco: $(cat log)"
vtr-import precomp precomp -c vtr.db -d f30k --store stores/f30k-butd 2>log ||
    fail "import f30k: $(cat log)"

n=0
for cfg in "$top"/configs/*.yaml; do
    name=$(basename "$cfg" .yaml)
    case $name in demo-*) continue ;; esac
    n=$((n + 1))
    vtr-train "$cfg" --threads 1 --set model.feature_dim=8 --set train.batch_size=2 \
        --set train.epochs=2 --set data.vocab_threshold=1 >"$name.log" 2>&1 ||
        { cat "$name.log"; fail "$name: vtr-train exit $?"; }
    grep -q "finished 2 epochs; best validation RSUM" "$name.log" ||
        { cat "$name.log"; fail "$name: training did not finish"; }
    [ -s "runs/$name/best.safetensors" ] && [ "$(wc -l <"runs/$name/metrics.jsonl")" -eq 2 ] ||
        fail "$name: run directory"
    vtr-eval -c "runs/$name/best.safetensors" --split test --json --threads 1 \
        >"$name.json" 2>"$name.err" || { cat "$name.err"; fail "$name: vtr-eval exit $?"; }
    $PY - "$name.json" "$name" <<'EOF' || fail "$name: evaluation output"
import json, sys
r = json.load(open(sys.argv[1]))
name = sys.argv[2]
image = name.startswith(("coco", "f30k"))
# the test splits: precomp 2 images x 5 captions; HGR 2 videos with 2 + 3 captions
want = (2, 10) if image else (2, 5)
assert (r["items"], r["captions"]) == want, (r["items"], r["captions"], want)
for d in ("v2t", "t2v"):
    assert 0 <= r[d]["r1"] <= r[d]["r5"] <= r[d]["r10"] <= 100, r[d]
assert abs(r["rsum"] - sum(r[d][k] for d in ("v2t", "t2v") for k in ("r1", "r5", "r10"))) < 1e-6
# HGR: the fused score under HGR's protocol by default, and each level alone
hgr = "-hgr" in name
assert r["protocol"]["dedup"] == hgr and ("levels" in r) == hgr, r["protocol"]
if hgr:
    assert r["score"] == "fused" and sorted(r["levels"]) == ["global", "noun", "verb"]
    for lv in r["levels"].values():
        assert 0 <= lv["rsum"] <= 600, lv
EOF
done
# an HGR run stopped after 2 steps and resumed ends with the bytes of the uninterrupted one
vtr-train "$top/configs/msrvtt-hgr-inf.yaml" --threads 1 --set model.feature_dim=8 \
    --set train.batch_size=2 --set train.epochs=2 --set data.vocab_threshold=1 \
    -o runs/hgr-stopped --max-steps 2 \
    >log 2>&1 || { cat log; fail "hgr stopped run: exit $?"; }
vtr-train --resume runs/hgr-stopped --threads 1 >log 2>&1 || { cat log; fail "hgr resume: exit $?"; }
cmp runs/hgr-stopped/last.safetensors runs/msrvtt-hgr-inf/last.safetensors ||
    fail "hgr resume: last.safetensors differs from the uninterrupted run's"
[ "$n" -ge 13 ] || fail "only $n dataset configs"
# evaluated from elsewhere, the checkpoint's relative data paths are explained, and
# --catalog / --store (as absolute paths) find the data
mkdir elsewhere && cd elsewhere || exit 1
vtr-eval -c ../runs/msrvtt-vse-inf/best.safetensors 2>err && fail "relative catalog: exit 0"
grep -q "vtr.db is relative to the directory vtr-train ran in (--catalog gives another)" err ||
    fail "relative catalog: $(cat err)"
vtr-eval -c ../runs/msrvtt-vse-inf/best.safetensors --catalog "$dir/vtr.db" 2>err &&
    fail "relative store: exit 0"
grep -q "stores/msrvtt-resnet152 is relative to the directory vtr-train ran in (--store gives another)" err ||
    fail "relative store: $(cat err)"
vtr-eval -c ../runs/msrvtt-vse-inf/best.safetensors --catalog "$dir/vtr.db" --no-record \
    --store "$dir/stores/msrvtt-resnet152" --threads 1 >out 2>err || fail "absolute paths: $(cat err)"
grep -q "^RSUM" out || fail "absolute paths: $(cat out)"
vtr-train --resume ../runs/msrvtt-vse-inf 2>err && fail "resumed elsewhere: exit 0"
grep -q "vtr.db is relative to the directory vtr-train ran in (resume from there)" err ||
    fail "resumed elsewhere: $(cat err)"
echo "ok: $n configs"
