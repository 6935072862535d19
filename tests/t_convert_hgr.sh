#!/bin/sh
# pipeline/convert_checkpoint.py: checkpoints of the HGR code (ModelBase.save_checkpoint's
# {'video_encoder': state_dict, 'text_encoder': state_dict}) -> vtr checkpoints. The fixtures
# of tests/fixtures/make_convert_hgr_fixture.py: a tiny HGR release, imported with
# vtr-import hgr, and an HGR and an HGR∞ model of the PyTorch reference
# (make_hgr_fixtures.py), HGR's with its word embedding in a separate file
# (--word-embeddings). Each converts; its tensors are the source's, exactly (the word
# embedding the file's); and vtr-eval --json scores the test split with it: every metric of
# the fused score and of each level alone must be the one computed from the PyTorch
# reference's scores (relative error < 1e-4). HGR embeds no single vector per item, so
# vtr-eval cannot save embeddings; the metrics follow every query's ranking, which moves
# when a tensor is in the wrong place (swapped level_embeds, GRU directions, GCN query and
# key, the embedding file left out) or a release setting is off (frames, words, verbs,
# nouns, sigma). Then the metadata and vocab.json, vtr-train --init from a converted model,
# a replaced vocab.json refused by vtr-eval, and the errors, each one line and exit 1 with
# nothing written: a missing tensor, an unexpected one, one of another shape, both
# poolings, a word embedding file or a vocabulary of another size, no --vocab, and a
# vocab.json of other words where the output goes.
set -u
PY=/usr/bin/python3
FX=tests/fixtures/make_convert_hgr_fixture.py
CONVERT=$(pwd)/pipeline/convert_checkpoint.py
for p in vtr-import vtr-eval; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
[ -r "$FX" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import torch, numpy, h5py' 2>/dev/null ||
    { echo "$PY with torch, numpy and h5py is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
$PY $FX "$dir" || fail "fixture"
cd "$dir" || exit 1
vtr-import hgr release -c vtr.db -d tiny --store store 2>import.log ||
    { cat import.log; fail "import"; }
vocab=release/annotation/RET/word2int.json

# close_metrics.py EVAL REF LABEL: the metrics vtr-eval --json printed (EVAL) against the
# reference's (REF), the fused score's and each level's; prints the largest relative error
cat >close_metrics.py <<'EOF'
import json, sys
have, want = (json.load(open(f)) for f in sys.argv[1:3])
assert (have["items"], have["captions"], have["score"]) == (12, 36, "fused"), have
worst = 0.0
for h, w in [(have, want)] + [(have["levels"][k], want["levels"][k]) for k in want["levels"]]:
    pairs = [(h["rsum"], w["rsum"])] + [(h[d][k], w[d][k]) for d in ("v2t", "t2v") for k in w[d]]
    for a, b in pairs:
        worst = max(worst, abs(a - b) / max(abs(b), 1e-12))
print("%s: max relative error of the metrics (fused, each level) %.2e" % (sys.argv[3], worst))
assert worst < 1e-4, worst
EOF

for v in hgr hgr-inf; do
    extra=
    [ $v = hgr ] && extra="--word-embeddings $v/word_embeds.th"
    # shellcheck disable=SC2086
    $PY "$CONVERT" $v/model.th $v/conv.safetensors --vocab $vocab $extra --catalog vtr.db \
        --dataset tiny --store store 2>$v/convert.log || { cat $v/convert.log; fail "convert $v"; }
    vtr-eval -c $v/conv.safetensors --json --threads 1 --batch-size 4 >$v/eval.json \
        2>$v/eval.log || { cat $v/eval.log; fail "vtr-eval $v"; }
    $PY - $v <<'EOF' || fail "$v: the conversion differs from the source"
import json, struct, sys
import numpy as np
import torch
v = sys.argv[1]
raw = open(v + "/conv.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__")
src = {"%s.%s" % (sub, name): t for sub, sd in torch.load(v + "/model.th").items()
       for name, t in sd.items()}
if v == "hgr":
    src["text_encoder.embedding.we.weight"] = torch.load(
        v + "/word_embeds.th")["text_encoder"]["embedding.we.weight"]
assert sorted(header) == sorted(src), sorted(set(header) ^ set(src))
for name, h in header.items():
    b, e = h["data_offsets"]
    a = np.frombuffer(raw[8 + n + b:8 + n + e], "<f4").reshape(h["shape"])
    assert np.array_equal(a, src[name].numpy()), name
EOF
    $PY close_metrics.py $v/eval.json $v/ref_metrics.json $v ||
        fail "$v: vtr-eval's metrics differ from those of PyTorch's scores"
done

# the summary line, the metadata, vocab.json
grep -qx "convert_checkpoint.py: hgr/model.th -> hgr/conv.safetensors: 27 tensors; HGR (ft_attn): video 24 -> 16, vocabulary 40 x 8, 16 roles" \
    hgr/convert.log || { cat hgr/convert.log; fail "hgr summary"; }
grep -qx "convert_checkpoint.py: hgr-inf/model.th -> hgr-inf/conv.safetensors: 41 tensors; HGR∞ (gpool): video 24 -> 16, vocabulary 40 x 8, 16 roles" \
    hgr-inf/convert.log || { cat hgr-inf/convert.log; fail "hgr-inf summary"; }
$PY - <<'EOF' || fail "metadata"
import hashlib, json, struct
import numpy as np
words = [str(w) for w in np.load("release/annotation/RET/int2word.npy")]
for v, pool, epochs in (("hgr", "attention", 50), ("hgr-inf", "gpo", 35)):
    raw = open(v + "/conv.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    m = h.pop("__metadata__")
    assert list(m)[:8] == ["format", "version", "code_version", "step", "epoch", "iteration",
                           "rng", "config"], list(m)
    assert m["converted_from"] == "model.th"
    vocab = open(v + "/vocab.json", "rb").read()
    assert json.loads(vocab) == words
    assert m["vocab_sha256"] == hashlib.sha256(vocab).hexdigest()
    config = m["config"].split("\n")
    for line in ('  kind: "hgr"', '  global_pool: "%s"' % pool, "  feature_dim: 24",
                 "  embed_size: 16", "  word_dim: 8", "  num_roles: 16", "  max_words: 30",
                 "  max_frames: 20", '  tokenizer: "whitespace"', '  catalog_vocab: "hgr"',
                 '  dataset: "tiny"', '  reduction: "mean"', "  epochs: %d" % epochs):
        assert line in config, (v, line, config)
    assert ("  gpo_pe: 8" in config) == (pool == "gpo"), config
    names = list(h)
    assert names[:2] == ["video_encoder.level_embeds.0.weight",
                         "video_encoder.level_embeds.0.bias"], names
    assert names[-1] == "text_encoder.gcn.layers.0.edge_attn_key.bias", names
EOF

# fine-tuning starts from a converted model (vtr-train --init with the config it carries):
# after one step at a negligible lr it scores the test split as PyTorch's model does
$PY - hgr/conv.safetensors >ft.yaml <<'EOF' || fail "config of the converted model"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
print(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]["config"])
EOF
vtr-train ft.yaml --init hgr/conv.safetensors -o ft --max-steps 1 --threads 1 \
    --set data.train_split=test --set data.val_split=test --set train.batch_size=4 \
    --set train.lr=1e-12 >ft.log 2>&1 || { cat ft.log; fail "--init"; }
grep -q "starting from the parameters of hgr/conv.safetensors" ft.log ||
    { cat ft.log; fail "--init log"; }
vtr-eval -c ft/last.safetensors --json --threads 1 --batch-size 4 --no-record >ft/eval.json \
    2>ft/eval.log || { cat ft/eval.log; fail "vtr-eval of the fine-tuned model"; }
$PY close_metrics.py ft/eval.json hgr/ref_metrics.json --init ||
    fail "fine-tuning did not start from the converted model"

# vtr-eval refuses a vocab.json beside the checkpoint other than the one converted
mkdir other && cp hgr/conv.safetensors other/ || fail "copy"
$PY -c 'import json; w = json.load(open("hgr/vocab.json")); w[3], w[4] = w[4], w[3]; json.dump(w, open("other/vocab.json", "w"))'
vtr-eval -c other/conv.safetensors --no-record >other/e.log 2>&1 && fail "vtr-eval took another vocab.json"
grep -q "other/vocab.json is not the vocabulary it was trained with" other/e.log ||
    { cat other/e.log; fail "vtr-eval vocabulary message"; }

# errors: one line naming the file and the cause, exit 1, nothing written
# expect_error MESSAGE SOURCE [OPTION...]: converts SOURCE into x/ with the release's
# vocabulary and OPTIONs
expect_error() {
    msg=$1
    src=$2
    shift 2
    rm -rf x && mkdir x || exit 1
    $PY "$CONVERT" "$src" x/conv.safetensors --vocab $vocab "$@" 2>e.log &&
        fail "$src $*: converted"
    [ "$(wc -l <e.log)" = 1 ] && grep -qxF "convert_checkpoint.py: $src: $msg" e.log ||
        { cat e.log; fail "$src $*: the message"; }
    [ -z "$(ls x)" ] || fail "$src $*: left $(ls x)"
}
expect_error "missing tensors: text_encoder.gcn.layers.0.edge_attn_key.bias" bad/missing.th
expect_error "unexpected tensors not in the model: text_encoder.rnn.weight_ih_l1" bad/extra.th
expect_error "tensor 'video_encoder.level_embeds.2.weight' has shape (16, 25), the model expects (16, 24)" \
    bad/shape.th
expect_error "cannot tell HGR (ft_attn in both encoders) from HGR∞ (gpool in both): video_encoder has ft_attn and gpool, text_encoder has gpool" \
    bad/pool.th
expect_error "bad/word_embeds_41.th: text_encoder.embedding.we.weight has shape (41, 8), the checkpoint's (40, 8)" \
    hgr/model.th --word-embeddings bad/word_embeds_41.th
expect_error "bad/vocab41/word2int.json gives 41 ids, the word embedding has 40 rows" \
    hgr-inf/model.th --vocab bad/vocab41/word2int.json
rm -rf x && mkdir x || exit 1
$PY "$CONVERT" hgr-inf/model.th x/conv.safetensors 2>e.log && fail "converted without --vocab"
grep -qxF "convert_checkpoint.py: hgr-inf/model.th: an HGR checkpoint needs --vocab (the release's word2int.json): vtr-eval reads the words from vocab.json beside the output" \
    e.log || { cat e.log; fail "no --vocab: the message"; }
cp other/vocab.json x/ || exit 1
$PY "$CONVERT" hgr-inf/model.th x/conv.safetensors --vocab $vocab 2>e.log &&
    fail "converted beside another vocab.json"
grep -qF "x/vocab.json holds another vocabulary, which vtr-eval would read for the output: convert into another directory" \
    e.log || { cat e.log; fail "another vocab.json: the message"; }
cmp -s x/vocab.json other/vocab.json && [ ! -e x/conv.safetensors ] ||
    fail "another vocab.json: changed or written"
echo "ok"
