#!/bin/sh
# pipeline/convert_checkpoint.py: released VSE∞ PyTorch checkpoints -> vtr checkpoints.
# For each fixture of tests/fixtures/make_convert_fixture.py (the image-text model as the
# reference's train.py saves it, with opt and the MLP's unused second BatchNorm mlp.bns.1.*;
# a video model as a plain state_dict), import its tiny test split, convert, embed the
# split with vtr-eval --save-embeddings and compare with the PyTorch embeddings (relative
# error < 1e-4); then the note on the dropped bns.1, the metadata, the catalog record of
# the evaluation, vtr-train --init from a converted model, and the errors (extra tensors,
# an mlp.bns.2 no reference builds, missing tensors, a vocabulary of another size, another
# vocabulary at evaluation).
set -u
PY=/usr/bin/python3
FX=tests/fixtures/make_convert_fixture.py
CONVERT=pipeline/convert_checkpoint.py
command -v vtr-eval >/dev/null 2>&1 || { echo "vtr-eval not built"; exit 77; }
[ -r "$FX" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import torch, numpy' 2>/dev/null || { echo "$PY with torch is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

for v in image video; do
    d="$dir/$v"
    $PY $FX $v "$d" || fail "fixture $v"
    vtr-import karpathy "$d/karpathy.json" -c "$d/vtr.db" -d tiny 2>/dev/null || fail "import $v"
    vtr-import npy-dir "test=$d/feats" -c "$d/vtr.db" -d tiny --store "$d/store" 2>/dev/null ||
        fail "import $v features"
    $PY $CONVERT "$d/model.pth" "$d/conv.safetensors" --vocab "$d/vocab.json" \
        --catalog "$d/vtr.db" --dataset tiny --store "$d/store" 2>"$d/convert.log" ||
        { cat "$d/convert.log"; fail "convert $v"; }
    vtr-eval -c "$d/conv.safetensors" --save-embeddings "$d/emb" --threads 1 --batch-size 4 \
        >"$d/eval.log" 2>&1 || { cat "$d/eval.log"; fail "vtr-eval $v"; }
    grep -q "tiny, split test: 6 items, 18 captions" "$d/eval.log" || fail "$v: eval output"
    $PY - "$d" <<'EOF' || fail "$v: embeddings differ from PyTorch's"
import sys
import numpy as np
d = sys.argv[1]
for kind in ("items", "captions"):
    a = np.load("%s/emb/%s.npy" % (d, kind))
    b = np.load("%s/ref_%s.npy" % (d, kind))
    assert a.shape == b.shape, (kind, a.shape, b.shape)
    rel = float((np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)).max())
    print("%s %s: max relative error %.2e" % (d.rsplit("/", 1)[1], kind, rel))
    assert rel < 1e-4, rel
EOF
done

# the reference's unused BatchNorm (img_enc.mlp.bns.1.*) was dropped, in one line
d="$dir/image"
b=img_enc.mlp.bns.1
grep -qx "convert_checkpoint.py: $d/model.pth: dropped 5 tensors the reference builds and never uses: $b.bias, $b.num_batches_tracked, $b.running_mean, $b.running_var, $b.weight" \
    "$d/convert.log" || { cat "$d/convert.log"; fail "dropped message"; }
[ "$(grep -c dropped "$d/convert.log")" = 1 ] || { cat "$d/convert.log"; fail "dropped lines"; }
grep -q dropped "$dir/video/convert.log" && { cat "$dir/video/convert.log"; fail "video dropped"; }

# the metadata: laid out as lib/checkpoint.c writes a best.safetensors
$PY - "$d/conv.safetensors" "$d/vocab.json" <<'EOF' || fail "metadata"
import hashlib, json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
assert n % 8 == 0
h = json.loads(raw[8:8 + n])
m = h.pop("__metadata__")
assert list(m)[:8] == ["format", "version", "code_version", "step", "epoch", "iteration",
                       "rng", "config"], list(m)
assert m["format"] == "vtr-checkpoint" and m["version"] == "1" and m["rng"] == "{}"
assert m["vocab_sha256"] == hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
assert m["source_epoch"] == "17" and m["source_best_rsum"] == "498.25"
assert m["converted_from"] == "model.pth"
for line in ("  feature_dim: 12", "  embed_size: 8", "  mlp_hidden: 4", "  word_dim: 6",
             '  img_pool: "gpo"', "  gpo_pe: 32", "  margin: 0.2", "  lr: 0.0005",
             "  lr_decay_epochs: [15]", "  epochs: 25", '  dataset: "tiny"'):
    assert line in m["config"].split("\n"), line
names = list(h)
assert names[:3] == ["img_enc.fc.weight", "img_enc.fc.bias", "img_enc.mlp.layers.0.weight"]
assert h["img_enc.mlp.bns.0.num_batches_tracked"] == {"dtype": "I64", "shape": [],
                                                     "data_offsets": [0, 8]}
assert len(names) == 38 and names[-1] == "txt_enc.gpool.linear.weight"
assert not any(n.startswith("img_enc.mlp.bns.1.") for n in names), names
EOF

# the evaluation was recorded in the catalog
$PY - "$d/vtr.db" "$d/conv.safetensors" <<'EOF' || fail "eval record"
import hashlib, json, sqlite3, sys
kind, status, result, hashes = sqlite3.connect(sys.argv[1]).execute(
    "SELECT kind, status, result, data_hashes FROM runs ORDER BY id DESC").fetchone()
assert kind == "eval" and status == "done", (kind, status)
assert json.loads(result)["checkpoints"] == [sys.argv[2]]
ck = hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
assert json.loads(hashes)["checkpoint"] == ck
EOF

# fine-tuning starts from a converted model (vtr-train --init): after one step at a
# negligible lr its embeddings are still PyTorch's (the video model: no BatchNorm, whose
# running statistics a training step would move)
v="$dir/video"
$PY - "$v/conv.safetensors" >"$dir/ft.yaml" <<'EOF' || fail "config of the converted model"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
print(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]["config"])
EOF
vtr-train "$dir/ft.yaml" --init "$v/conv.safetensors" -o "$dir/ft" --max-steps 1 --threads 1 \
    --set data.train_split=test --set data.val_split=test --set data.vocab="$v/vocab.json" \
    --set train.batch_size=4 --set train.lr=1e-12 --set train.weight_decay=0 \
    --set train.size_augment=false >"$dir/ft.log" 2>&1 || { cat "$dir/ft.log"; fail "--init"; }
grep -q "starting from the parameters of $v/conv.safetensors" "$dir/ft.log" ||
    { cat "$dir/ft.log"; fail "--init log"; }
vtr-eval -c "$dir/ft/last.safetensors" --save-embeddings "$dir/ft/emb" --threads 1 \
    --batch-size 4 --no-record >"$dir/ft/eval.log" 2>&1 ||
    { cat "$dir/ft/eval.log"; fail "vtr-eval of the fine-tuned model"; }
$PY - "$dir/ft/emb" "$v" <<'EOF' || fail "fine-tuning did not start from the converted model"
import sys
import numpy as np
for kind in ("items", "captions"):
    a = np.load("%s/%s.npy" % (sys.argv[1], kind))
    b = np.load("%s/ref_%s.npy" % (sys.argv[2], kind))
    rel = float((np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)).max())
    print("--init %s: max relative error %.2e" % (kind, rel))
    assert rel < 1e-4, rel
EOF
vtr-train "$dir/ft.yaml" --init "$d/conv.safetensors" -o "$dir/ft2" --max-steps 1 \
    --set data.train_split=test --set data.val_split=test --set data.vocab="$v/vocab.json" \
    --set train.batch_size=4 >"$dir/e.log" 2>&1 && fail "--init took a model of another kind"
grep -q "train.init: $d/conv.safetensors: unexpected tensor 'img_enc.gpool" "$dir/e.log" ||
    { cat "$dir/e.log"; fail "--init message"; }

# errors name the tensors
$PY $CONVERT "$d/bad_extra.pth" "$dir/x.safetensors" 2>"$dir/e.log" && fail "extra accepted"
grep -qx ".*/bad_extra.pth: unexpected tensors not in the model: img_enc.backbone.conv1.weight" \
    "$dir/e.log" || { cat "$dir/e.log"; fail "extra message"; }
$PY $CONVERT "$d/bad_bns.pth" "$dir/x.safetensors" 2>"$dir/e.log" && fail "mlp.bns.2 accepted"
grep -qx ".*/bad_bns.pth: unexpected tensors not in the model: img_enc.mlp.bns.2.weight" \
    "$dir/e.log" || { cat "$dir/e.log"; fail "mlp.bns.2 message"; }
$PY $CONVERT "$d/bad_missing.pth" "$dir/x.safetensors" 2>"$dir/e.log" && fail "missing accepted"
grep -q "bad_missing.pth: missing tensors: txt_enc.gpool.linear.weight" "$dir/e.log" ||
    { cat "$dir/e.log"; fail "missing message"; }
[ -e "$dir/x.safetensors" ] && fail "an output was left behind"
$PY -c 'import json; v = json.load(open("'"$d"'/vocab.json")); v["word2idx"]["zebra"] = v["idx"]; v["idx2word"][str(v["idx"])] = "zebra"; v["idx"] += 1; json.dump(v, open("'"$dir"'/vocab2.json", "w"))'
$PY $CONVERT "$d/model.pth" "$dir/x.safetensors" --vocab "$dir/vocab2.json" 2>"$dir/e.log" &&
    fail "a vocabulary of another size accepted"
grep -q "gives 24 ids (with <mask>), the word embedding has 23 rows" "$dir/e.log" ||
    { cat "$dir/e.log"; fail "vocab message"; }
vtr-eval -c "$d/conv.safetensors" --vocab "$dir/vocab2.json" --no-record >"$dir/e.log" 2>&1 &&
    fail "vtr-eval took another vocabulary"
grep -q "is not the vocabulary it was trained with" "$dir/e.log" || fail "vtr-eval vocab message"

# the minimal conversion (no data keys) gives a model that embeds: vtr-aggregate takes it
# and gives the embeddings of the full conversion; vtr-eval, which reads the data, says
# which keys to give
$PY $CONVERT "$d/model.pth" "$dir/min.safetensors" --vocab "$d/vocab.json" 2>"$dir/e.log" ||
    { cat "$dir/e.log"; fail "minimal conversion"; }
for m in min conv; do
    ck="$dir/min.safetensors"
    [ $m = conv ] && ck="$d/conv.safetensors"
    vtr-aggregate -m "$ck" --vocab "$d/vocab.json" "$d/store" --threads 1 --out-dir "$dir/$m.emb" \
        2>"$dir/e.log" || { cat "$dir/e.log"; fail "vtr-aggregate of the $m conversion"; }
done
for f in "$dir"/conv.emb/*.npy; do
    cmp -s "$f" "$dir/min.emb/${f##*/}" || fail "the minimal conversion embeds ${f##*/} differently"
done
vtr-eval -c "$dir/min.safetensors" --vocab "$d/vocab.json" --no-record >"$dir/e.log" 2>&1 &&
    fail "vtr-eval ran without data"
grep -q "min.safetensors (give --catalog, --dataset, --store): required keys not set: 'data.catalog', 'data.dataset', 'data.features'" \
    "$dir/e.log" || { cat "$dir/e.log"; fail "vtr-eval's missing data message"; }
echo "ok"
