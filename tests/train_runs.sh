# Sourced by the script tests that train and compare runs, after they set dir (a scratch
# directory), PY (a python3 with numpy) and fail (prints FAIL: and exits 1).
# precomp_run TRAIN: 32 items of 3 random 64-d frames with 5 captions each, imported into
# $dir/train.db and $dir/store, and $dir/cfg.yaml training VSE∞ with the region MLP
# (BatchNorm) on them, its train: keys TRAIN ("epochs: 3, batch_size: 8");
# hgr_import: tests/interop/import_fixtures.py's HGR release-layout fixture, imported in $dir
# (vtr.db, stores/); hgr_train RANKS OUT [VTR-TRAIN-ARGUMENT]...: configs/msrvtt-hgr.yaml on
# it (8-d features, batches of 4) under $MPIRUN, into $dir/OUT, its log $dir/OUT.log;
# same_losses A B: the per-epoch losses of two metrics.jsonl agree to 1e-5 (relative);
# close A B TOL: the tensors of two checkpoints differ by at most TOL (prints the largest
# difference, or "same" when the bytes agree).

# Tensors of two checkpoints: the largest difference, and "same" when the bytes agree.
cat >"$dir/compare.py" <<'EOF'
import json, struct, sys
import numpy as np
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k != "__metadata__":
            s, e = v["data_offsets"]
            out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype={"F32": np.float32, "I64": np.int64}[v["dtype"]])
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
same = all(a[k].tobytes() == b[k].tobytes() for k in a)
worst = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]), initial=0)) for k in a)
print("same" if same else "%.3g" % worst)
EOF
# the per-epoch losses of two runs agree to 1e-5 (relative)
same_losses() {
    $PY - "$1" "$2" <<'EOF' || fail "losses of $1 and $2 differ"
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) > 0, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-5 * abs(x), (a, b)
EOF
}
# weights within tol (AdamW turns gradient rounding into steps of up to lr on parameters
# whose gradients are near zero: 200 steps of lr 5e-4 move them by at most 0.1)
close() { # A B TOL
    d=$($PY "$dir/compare.py" "$1" "$2") || fail "compare $1 $2"
    [ "$d" = same ] || $PY -c "import sys; sys.exit(0 if float('$d') <= $3 else 1)" ||
        fail "$1 and $2 differ by $d (> $3)"
    echo "$d"
}

precomp_run() {
    $PY tests/fixtures/make_precomp_fixture.py "$dir/pre" 32 8 64 || fail "precomp fixture"
    vtr-import precomp "$dir/pre" --catalog "$dir/train.db" --dataset synth --store "$dir/store" \
        --captions-per-image 5 2>"$dir/err" || fail "vtr-import: $(cat "$dir/err")"
    cat >"$dir/cfg.yaml" <<EOF
data: {catalog: $dir/train.db, dataset: synth, features: $dir/store, vocab_threshold: 1}
model: {feature_dim: 64, embed_size: 16, mlp_hidden: 8, word_dim: 8, gpo_pe: 8, gpo_hidden: 8}
train: {$1}
val: {batch_size: 8}
EOF
}

hgr_import() {
    $PY tests/interop/import_fixtures.py hgr "$dir/hgr" || fail "hgr fixture"
    (cd "$dir" && vtr-import hgr hgr -c vtr.db -d msrvtt --store stores/msrvtt-resnet152 \
        >/dev/null 2>&1) || fail "import hgr"
}

hgr_train() {
    n=$1 out=$2 top=$(pwd)
    shift 2
    (cd "$dir" && $MPIRUN -np "$n" vtr-train "$top/configs/msrvtt-hgr.yaml" -o "$out" --threads 1 \
        --set model.feature_dim=8 --set train.batch_size=4 --set data.vocab_threshold=1 "$@" \
        >"$out.log" 2>&1) || fail "HGR on $n ranks, $out: $(cat "$dir/$out.log")"
}
