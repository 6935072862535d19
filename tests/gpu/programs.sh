#!/bin/sh
# The programs with --device cuda, each against its own run on the CPU, with the CUDA backend
# that VTR_CUDA_LIBRARY names (tests/gpu/emulate/run.sh passes its emulation; a lent GPU lacks
# the libraries bin/ needs). On a small archive made with vtr-synth, random ResNet-18 weights
# and three tiny models trained on the CPU on the same features (VSE∞: tests/fixtures/
# tiny_model.sh; HGR; set embeddings, two vectors per item):
# - vtr-features (cuDNN): the same features to 1e-4 (relative, per item);
# - vtr-aggregate (VSE∞): the same embeddings to 1e-4;
# then for each model:
# - vtr-index (features and the model's video side on the GPU): the same keys and vectors,
#   each row to 2e-3 relative to its largest element (float16 rows);
# - vtr-search over the CPU's index (VSE∞: the exact top-k on the GPU; HGR and sets: the
#   query encoders and scores on the GPU), and vtr-serve's /api/search (where curl is): the
#   same results in the same order, scores (and HGR's levels) to 1e-3;
# - vtr-eval: the same metrics (VSE∞: and its embeddings, --save-embeddings, to 1e-4).
# Each GPU run went through the backend: without it, the same command fails, saying so.
# Then bad input on the device path, each program: a GPU that does not exist (--device
# cuda:99), and on the emulation one with too little memory (EMU_DEVICE_MEMORY): exit 1, the
# last line says what to do, nothing half-written is left.
# vtr-train's GPU runs are tests/gpu/train_mpi.sh's.
#
#   VTR_CUDA_LIBRARY=... sh tests/gpu/programs.sh      (exit 0 passed, 1 failed, 77 skipped)
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$(pwd)
PATH=$top/bin:$PATH
for p in vtr-synth vtr-decode vtr-features vtr-aggregate vtr-index vtr-search vtr-eval \
    vtr-train vtr-import; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
$PY -c 'import numpy, sqlite3' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
[ -n "${VTR_CUDA_LIBRARY:-}" ] || { echo "set VTR_CUDA_LIBRARY to the CUDA backend"; exit 77; }
dir=$(mktemp -d)
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# both WHAT COMMAND...: runs COMMAND with --device cpu, its output in $dir/cpu.WHAT.*, then
# with --device cuda, in $dir/cuda.WHAT.*, then with --device cuda and no backend, which must
# fail; $OUT in COMMAND is the run's output prefix
both() {
    what=$1
    shift
    for device in cpu cuda; do
        OUT=$dir/$device.$what
        eval "$* --device $device" >"$OUT.out" 2>"$OUT.err" ||
            fail "$what on $device: exit $?: $(cat "$OUT.err")"
    done
    OUT=$dir/none.$what
    (VTR_CUDA_LIBRARY=$dir/none.so && eval "$* --device cuda") >/dev/null 2>"$OUT.err"
    [ $? -eq 1 ] && grep -q "cannot load vtr's CUDA backend ($dir/none.so)" "$OUT.err" ||
        fail "$what without the backend: $(cat "$OUT.err")"
}
# npy_close A B TOL: the .npy files of directories A and B (the same names) agree to TOL,
# relative to each array's largest magnitude; prints the largest such difference
npy_close() {
    $PY - "$@" <<'EOF' || fail "$1 and $2 differ"
import os, sys
import numpy as np
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
names = sorted(n for n in os.listdir(a) if n.endswith(".npy"))
assert names and names == sorted(n for n in os.listdir(b) if n.endswith(".npy")), names
worst = 0.0
for n in names:
    x, y = np.load(os.path.join(a, n)), np.load(os.path.join(b, n))
    assert x.shape == y.shape and x.dtype == y.dtype, (n, x.shape, y.shape)
    d = float(np.max(np.abs(x.astype(np.float64) - y))) / max(float(np.max(np.abs(x))), 1e-30)
    assert d <= tol, (n, d)
    worst = max(worst, d)
print("%.3g" % worst)
EOF
}
# same_results WHAT K: the --json results of its CPU and GPU searches (two queries), K each
same_results() {
    $PY - "$dir/cpu.$1.out" "$dir/cuda.$1.out" "$2" <<'EOF' || fail "$1: the results differ"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 2, (a, b)
for x, y in zip(a, b):
    assert [r["key"] for r in x["results"]] == [r["key"] for r in y["results"]], (x, y)
    assert len(x["results"]) == int(sys.argv[3]), x
    for r, s in zip(x["results"], y["results"]):
        assert abs(r["score"] - s["score"]) <= 1e-3, (r, s)
        for level in r.get("levels", {}):
            assert abs(r["levels"][level] - s["levels"][level]) <= 1e-3, (r, s)
EOF
}
# same_metrics WHAT: the --json metrics of its CPU and GPU evaluations are equal
same_metrics() {
    $PY - "$dir/cpu.$1.out" "$dir/cuda.$1.out" <<'EOF' || fail "$1: the metrics differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def numbers(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from numbers(v, path + "/" + k)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, x
na, nb = dict(numbers(a)), dict(numbers(b))
assert any(k.endswith("rsum") for k in na), sorted(na)
for k in na:
    if not k.endswith("seconds"):
        assert na[k] == nb[k], (k, na[k], nb[k])
EOF
}

. tests/fixtures/served_archive.sh # serve, get
curl=$(command -v curl) || echo "no curl: vtr-serve not run"

# ---- fixtures --------------------------------------------------------------------------
$PY tests/fixtures/make_backbone_fixtures.py random-weights resnet18 "$dir/w.safetensors" 1 ||
    fail "random weights"
. tests/fixtures/tiny_model.sh
tiny_model "$dir"
(cd "$dir" && vtr-train "$top/configs/msrvtt-hgr.yaml" -o hgr --threads 2 \
    --set data.catalog="$dir/train.db" --set data.dataset=synth --set data.features="$dir/store" \
    "--set=data.catalog_vocab=''" --set data.vocab_threshold=1 --set model.feature_dim=512 \
    --set model.embed_size=16 --set model.word_dim=8 --set train.epochs=1 \
    --set train.batch_size=8 >hgr.log 2>&1) || fail "HGR: $(cat "$dir/hgr.log")"
HGR=$dir/hgr/last.safetensors
vtr-train "$dir/cfg.yaml" -o "$dir/set" --threads 2 --set model.set_size=2 \
    --set model.set_attention_dim=16 --set model.set_iterations=2 2>"$dir/set.log" ||
    fail "set embeddings: $(cat "$dir/set.log")"
SET=$dir/set/last.safetensors
A=$dir/archive
mkdir -p "$A"
vtr-synth --frames 12 --size 96x64 "$A/a.mp4" &&
    vtr-synth --frames 10 --size 64x64 "$A/b.webm" &&
    vtr-synth --size 64x48 "$A/c.png" || fail "vtr-synth"
vtr-decode --frames 3 -o "$dir/frames.rec" "$A/a.mp4" "$A/b.webm" "$A/c.png" || fail "vtr-decode"

# ---- vtr-features, vtr-aggregate -------------------------------------------------------
both features vtr-features -w "$dir/w.safetensors" -a resnet18 --resize 72 --crop 64 \
    --out-dir '$OUT' "$dir/frames.rec"
echo "vtr-features, CPU vs GPU: $(npy_close "$dir/cpu.features" "$dir/cuda.features" 1e-4)"
both aggregate vtr-aggregate --model "$CK" --out-dir '$OUT' "$dir/cpu.features"
echo "vtr-aggregate, CPU vs GPU: $(npy_close "$dir/cpu.aggregate" "$dir/cuda.aggregate" 1e-4)"

# ---- vtr-index, vtr-search, vtr-eval: VSE∞, HGR and set embeddings ---------------------
IX="vtr-index $A --weights $dir/w.safetensors --arch resnet18 --frames 3 --resize 72 --crop 64"
for model in vse:$CK hgr:$HGR set:$SET; do
    m=${model%%:*} ck=${model#*:}
    both $m.index "$IX" --model "$ck" --index '$OUT'
    diff=$($PY - "$dir/cpu.$m.index" "$dir/cuda.$m.index" <<'EOF'
import sqlite3, sys
import numpy as np
def rows(d):
    db = sqlite3.connect("file:%s/index.sqlite?mode=ro" % d, uri=True)
    out = {}
    for sid, in db.execute("SELECT id FROM segments").fetchall():
        m = np.load("%s/seg-%06d.npy" % (d, sid)).astype(np.float64)
        for row, key, vector in db.execute(
                "SELECT row, key, vector FROM entries WHERE segment = ? AND live = 1", (sid,)):
            out[key, vector] = m[row]
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
assert sorted(set(k for k, _ in a)) == ["a.mp4", "b.webm", "c.png"], sorted(a)
worst = max(float(np.max(np.abs(a[k] - b[k]))) / max(float(np.max(np.abs(a[k]))), 1e-30)
            for k in a)
assert worst <= 2e-3, worst
print("%d rows, %.3g" % (len(a), worst))
EOF
    ) || fail "$m: the indexes differ"
    both $m.search vtr-search --index "$dir/cpu.$m.index" --json -k 3 "'a cat'" "'the dog appears'"
    same_results $m.search 3
    if [ -n "$curl" ]; then
        for device in cpu cuda; do
            serve "$dir/$device.$m.serve.log" --device $device "$dir/cpu.$m.index"
            for q in a%20cat the%20dog%20appears; do
                [ "$(get "/api/search?q=$q&k=3" "$dir/body")" = 200 ] ||
                    fail "vtr-serve $m on $device: $(cat "$dir/body")"
                cat "$dir/body" && echo
            done >"$dir/$device.$m.serve.out"
            kill "$PID" && wait "$PID" 2>/dev/null
        done
        same_results $m.serve 3
        (VTR_CUDA_LIBRARY=$dir/none.so && timeout 60 vtr-serve --port 0 --device cuda \
            "$dir/cpu.$m.index") 2>"$dir/bad.err"
        [ $? -eq 1 ] && grep -q "cannot load vtr's CUDA backend ($dir/none.so)" "$dir/bad.err" ||
            fail "vtr-serve $m without the backend: $(cat "$dir/bad.err")"
    fi
    # the fixture's captions repeat (items i and i + 4 have the same five), and the CPU's
    # text encoder can give two copies of a caption embeddings a rounding apart (their places
    # in the batch: OpenBLAS's Haswell kernels did), so under the VSE protocol such a tie
    # broke one way on the CPU and the other on the GPU; --hgr-dedup makes the copies one
    # query and one candidate
    both $m.eval vtr-eval -c "$ck" --split val --json --hgr-dedup
    same_metrics $m.eval
    echo "$m, CPU vs GPU: vtr-index $diff; vtr-search${curl:+ and vtr-serve} the same results;" \
        "vtr-eval the same metrics"
done
both embeddings vtr-eval -c "$CK" --split val --save-embeddings '$OUT'
diff=$(npy_close "$dir/cpu.embeddings" "$dir/cuda.embeddings" 1e-4)
echo "vse, CPU vs GPU: vtr-eval's embeddings $diff"
grep -q '"levels"' "$dir/cuda.hgr.search.out" || fail "HGR search: no levels"

# ---- bad input on the device path: a GPU that does not exist, a GPU short of memory --------
# Each program exits 1, its last line on stderr the one that says what to do: for a GPU that
# does not exist the only line (vtr-train checks it before it reads its data); for one
# short of memory vtr-train logs its data first. On the emulation, EMU_DEVICE_MEMORY gives
# the GPU 100 kB; what was refused leaves no index and no checkpoint.
case $VTR_CUDA_LIBRARY in
*/build-emu/*) emulated=yes ;;
*) emulated= ;;
esac
# refused WHAT PATTERN: the exit status was 1 and $dir/bad.err's last line, and no other,
# matches PATTERN
refused() {
    [ "$status" -eq 1 ] && [ "$(grep -c -- "$2" "$dir/bad.err")" -eq 1 ] &&
        tail -n 1 "$dir/bad.err" | grep -q -- "$2" || fail "$1: exit $status: $(cat "$dir/bad.err")"
}
for p in "vtr-features -w $dir/w.safetensors -a resnet18 $dir/frames.rec" \
    "vtr-aggregate --model $CK $dir/cpu.features" "$IX --model $CK --index $dir/bad.index" \
    "vtr-search --index $dir/cpu.hgr.index 'a cat'" "vtr-eval -c $CK --split val" \
    "vtr-train $dir/cfg.yaml -o $dir/bad.run" "vtr-serve --port 0 $dir/cpu.hgr.index"; do
    eval "timeout 120 $p --device cuda:99" >/dev/null 2>"$dir/bad.err"
    status=$?
    refused "${p%% *} --device cuda:99" "GPU 99 does not exist: .* visible"
    [ "$(wc -l <"$dir/bad.err")" -eq 1 ] || fail "${p%% *} --device cuda:99: $(cat "$dir/bad.err")"
    [ -n "$emulated" ] || continue
    (EMU_DEVICE_MEMORY=100000 && export EMU_DEVICE_MEMORY && eval "timeout 120 $p --device cuda") \
        >/dev/null 2>"$dir/bad.err"
    status=$?
    refused "${p%% *} on a GPU of 100 kB" \
        "out of memory.*or --device cpu\|or --device cpu.*out of memory"
done
[ ! -e "$dir/bad.index/index.sqlite" ] || fail "a vtr-index refused by the GPU left an index"
[ ! -e "$dir/bad.run/last.safetensors" ] || fail "a vtr-train refused by the GPU left a checkpoint"
echo "a GPU that does not exist${emulated:+, and one short of memory}: one line each, exit 1"
exit 0
