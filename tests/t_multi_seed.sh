#!/bin/sh
# pipeline/multi_seed.py: a tiny dataset (Karpathy JSON + one NPY per item), two seeds of a
# few steps; the summary's mean and sd (n - 1) are those of the per-seed evaluations, the
# runs and evaluations are in the catalog, and a second call continues (no new training).
set -u
PY=/usr/bin/python3
command -v vtr-train >/dev/null 2>&1 || { echo "vtr-train not built"; exit 77; }
[ -r pipeline/multi_seed.py ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

# 8 objects; item i shows object i % 8 as +3 in its dimension in one of its 3 frames
$PY - "$dir" <<'EOF' || fail "fixture"
import json, os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d + "/feats")
rng = np.random.default_rng(3)
objects = ["cat", "dog", "car", "tree", "boat", "bird", "horse", "train"]
images = []
for i in range(48):
    split = "train" if i < 32 else "val" if i < 40 else "test"
    o = i % 8
    x = rng.standard_normal((3, 8)).astype(np.float32)
    x[rng.integers(0, 3), o] += 3
    np.save("%s/feats/item%02d.npy" % (d, i), x)
    sents = [{"raw": "a %s is shown" % objects[o]}, {"raw": "there is a %s" % objects[o]}]
    images.append({"filename": "item%02d.jpg" % i, "split": split, "sentences": sents})
json.dump({"images": images}, open(d + "/karpathy.json", "w"))
open(d + "/cfg.yaml", "w").write(
    "data: {catalog: %s/vtr.db, dataset: tiny, features: %s/store, vocab_threshold: 1}\n"
    "model: {feature_dim: 8, embed_size: 8, mlp_hidden: 0, word_dim: 4, gpo_pe: 4,\n"
    "        gpo_hidden: 4}\n"
    "train: {epochs: 2, batch_size: 8, lr: 2.0e-3, checkpoint_every: 0}\n"
    "val: {batch_size: 8}\n" % (d, d))
EOF
vtr-import karpathy "$dir/karpathy.json" -c "$dir/vtr.db" -d tiny 2>/dev/null || fail "import"
vtr-import npy-dir "$dir/feats" -c "$dir/vtr.db" -d tiny --store "$dir/store" 2>/dev/null ||
    fail "import features"

$PY pipeline/multi_seed.py "$dir/cfg.yaml" --seeds 1,2 -o "$dir/runs" --threads 1 \
    >"$dir/out.log" 2>"$dir/err.log" || { cat "$dir/out.log" "$dir/err.log"; fail "multi_seed"; }
cat "$dir/out.log"
grep -q "mean ± sd over 2 seeds (1, 2; sd with n - 1)" "$dir/out.log" || fail "table header"
grep -q "^RSUM " "$dir/out.log" || fail "table"
$PY - "$dir" <<'EOF' || fail "summary"
import json, math, sqlite3, sys
d = sys.argv[1]
s = json.load(open(d + "/runs/summary.json"))
assert s["seeds"] == [1, 2] and s["n"] == 2 and s["split"] == "test"
per = [json.load(open("%s/runs/seed-%d/eval-test.json" % (d, k))) for k in (1, 2)]
assert per[0]["checkpoints"] == [d + "/runs/seed-1/best.safetensors"]
def check(got_mean, got_sd, values):
    m = sum(values) / 2
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / 1)
    assert abs(got_mean - m) < 1e-9 and abs(got_sd - sd) < 1e-9, (got_mean, got_sd, values)
for direction in ("v2t", "t2v"):
    for k in ("r1", "r5", "r10", "medr", "meanr", "map", "ndcg"):
        check(s["mean"][direction][k], s["sd"][direction][k], [p[direction][k] for p in per])
check(s["mean"]["rsum"], s["sd"]["rsum"], [p["rsum"] for p in per])
rows = sqlite3.connect(d + "/vtr.db").execute(
    "SELECT kind, seed, status FROM runs ORDER BY id").fetchall()
assert rows == [("train", 1, "done"), ("eval", 1, "done"), ("train", 2, "done"),
                ("eval", 2, "done")], rows
print("rsum per seed", [p["rsum"] for p in per], "mean", s["mean"]["rsum"], "sd", s["sd"]["rsum"])
EOF
# a second call continues: the finished runs are not trained again, the numbers stay
cp "$dir/runs/summary.json" "$dir/summary1.json"
$PY pipeline/multi_seed.py "$dir/cfg.yaml" --seeds 1,2 -o "$dir/runs" --threads 1 \
    >"$dir/out2.log" 2>"$dir/err2.log" || fail "second call"
grep -q "had finished already" "$dir/err2.log" || fail "the second call trained again"
cmp -s "$dir/summary1.json" "$dir/runs/summary.json" || fail "the summary changed"
# bad usage
$PY pipeline/multi_seed.py "$dir/cfg.yaml" --seeds 1,1 -o "$dir/x" 2>"$dir/e.log" &&
    fail "repeated seeds accepted"
grep -q "distinct integers" "$dir/e.log" || fail "seeds message"
echo "ok"
