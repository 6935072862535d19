#!/bin/sh
# vtr-aggregate and vtr-search end to end on a trained toy: 24 generated "videos", each
# showing its own object (a feature dimension raised in some frames) and captioned with
# its object's word; a tiny VSE model trained on 16 of them (vtr-import, vtr-train);
# vtr-aggregate over an NPY dir, a record stream on stdin and a feature store (the same
# bytes), --half, --text, bad items; an index built by vtr-aggregate --index; vtr-search:
# a query equal to a trained item's caption finds that item first, alone and as one batch
# of all of them; its scores are the inner products of the text and the stored embedding;
# -k, --json, the catalog's path and duration; a bad index or another model: one line,
# exit 1; the approximate index (vtr-approx, vtr-search --approx / --exact). The fixture is
# written with numpy.
set -u
for p in vtr-aggregate vtr-search vtr-import vtr-train vtr-approx; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# one line on stderr naming $2
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || fail "$3: expected one line on stderr: $(cat "$1")"
    grep -q -- "$2" "$1" || fail "$3: stderr does not name '$2': $(cat "$1")"
}

# 1. the fixture: annotations (MSR-VTT layout), NPY features, a record stream of them, bad
#    items, the queries
$PY - "$dir" <<'PYEOF' || fail "fixture"
import json, os, struct, sys
import numpy as np
d = sys.argv[1]
words = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep", "goat", "lion", "tiger",
         "bear", "wolf", "fox", "deer", "frog", "duck", "owl", "bee", "crab", "seal",
         "whale", "snake", "mouse", "camel"]
templates = ["a video of a {}", "the {} appears", "someone filmed a {} here"]
rng = np.random.default_rng(7)
os.makedirs(d + "/feats")
videos, sentences = [], []
rec = open(d + "/feats.vtr", "wb")
for i, w in enumerate(words):
    key = "video%d" % i
    split = "train" if i < 16 else "validate" if i < 20 else "test"
    videos.append({"video_id": key, "split": split, "id": i})
    for t in templates:
        sentences.append({"caption": t.format(w), "video_id": key, "sen_id": len(sentences)})
    x = rng.normal(0, 0.5, (8, 24)).astype(np.float32)
    vis = rng.choice(8, rng.integers(3, 9), replace=False)
    x[vis, i] += 3.0
    np.save("%s/feats/%s.npy" % (d, key), x)
    with open("%s/feats/%s.json" % (d, key), "w") as f:
        json.dump({"source": key + ".mp4"}, f)
    # a record (docs/record-stream.md) with the same array
    import io
    b = io.BytesIO(); np.save(b, x); npy = b.getvalue()
    meta = json.dumps({"source": key + ".mp4"}).encode()
    k = key.encode()
    rec.write(b"VTRR" + struct.pack("<HHIIQ", 1, 0, len(k), len(meta), len(npy)) + k + meta + npy)
rec.close()
json.dump({"videos": videos, "sentences": sentences}, open(d + "/ann.json", "w"))
os.makedirs(d + "/bad")
np.save(d + "/bad/cols.npy", np.zeros((4, 23), np.float32))
y = np.ones((4, 24), np.float32); y[2, 5] = np.nan
np.save(d + "/bad/nan.npy", y)
np.save(d + "/bad/good.npy", rng.normal(0, 1, (5, 24)).astype(np.float32))
with open(d + "/queries.txt", "w") as f:
    for w in words[:16]:
        f.write(templates[0].format(w) + "\n")
PYEOF

# 2. catalog + store, a tiny model trained on the 16 training items
vtr-import msrvtt "$dir/ann.json" -c "$dir/cat.db" -d toy 2>"$dir/err" || fail "import: $(cat "$dir/err")"
vtr-import npy-dir "$dir/feats" -c "$dir/cat.db" -d toy --store "$dir/store" 2>"$dir/err" ||
    fail "import npy-dir: $(cat "$dir/err")"
cat >"$dir/toy.yaml" <<EOF2
data: {catalog: $dir/cat.db, dataset: toy, features: $dir/store, vocab_threshold: 1}
model: {feature_dim: 24, embed_size: 16, mlp_hidden: 0, word_dim: 16, gpo_pe: 8, gpo_hidden: 8}
train: {epochs: 40, batch_size: 16, lr: 5.0e-3, lr_decay_epochs: [35], checkpoint_every: 0}
loss: {warmup_epochs: 30}
val: {batch_size: 16}
EOF2
vtr-train "$dir/toy.yaml" -o "$dir/run" --threads 1 2>"$dir/err" || fail "vtr-train: $(cat "$dir/err")"
M="$dir/run/last.safetensors"
# a GPU that is not there is refused before the data is read: one line, nothing left
if ! nvidia-smi -L >/dev/null 2>&1; then
    vtr-train "$dir/toy.yaml" -o "$dir/gpu" --device cuda:3 2>"$dir/err"
    [ $? -eq 1 ] && [ ! -e "$dir/gpu" ] || fail "vtr-train --device cuda:3 without a GPU: $(cat "$dir/err")"
    one_line "$dir/err" "train.device cuda:3: .*(--device cpu)" "vtr-train --device cuda:3 without a GPU"
fi

# a disk that fills between a run's best and last checkpoints (a file size limit between
# their sizes; the signal ignored, so writes fail as on a full disk): the run directory
# goes whole (best.safetensors stayed without vocab.json: "no vocabulary"); --resume of a
# directory without last.safetensors says what happened
big="--threads 1 --set model.embed_size=256 --set train.epochs=1"
# shellcheck disable=SC2086
vtr-train "$dir/toy.yaml" -o "$dir/big" $big 2>"$dir/err" || fail "vtr-train big: $(cat "$dir/err")"
# the mean of the two sizes, in ulimit's POSIX blocks of 512 bytes
limit=$(( ($(wc -c <"$dir/big/best.safetensors") + $(wc -c <"$dir/big/last.safetensors")) / 1024 ))
# shellcheck disable=SC2086
(trap '' XFSZ; ulimit -f "$limit"; exec vtr-train "$dir/toy.yaml" -o "$dir/full" $big) 2>"$dir/err"
[ $? -eq 1 ] || fail "full disk: exit status: $(cat "$dir/err")"
[ ! -e "$dir/full" ] || fail "full disk: left behind: $(ls "$dir/full")"
mkdir "$dir/full"
vtr-train --resume "$dir/full" 2>"$dir/err"
[ $? -eq 1 ] || fail "--resume without a checkpoint: exit status"
one_line "$dir/err" "has no last.safetensors to resume from: the run stopped before its first checkpoint" \
    "--resume without a checkpoint"

# 3. vtr-aggregate: an NPY dir, the same sets as records on stdin and from the store
vtr-aggregate --help | grep -q -- '--index DIR' || fail "--help"
vtr-aggregate --model "$M" "$dir/feats" -o "$dir/dir.vtr" 2>"$dir/err" ||
    fail "aggregate npy dir: exit $?: $(cat "$dir/err")"
vtr-aggregate --model "$M" <"$dir/feats.vtr" >"$dir/pipe.vtr" 2>"$dir/err" ||
    fail "aggregate stdin: exit $?: $(cat "$dir/err")"
vtr-aggregate --model "$M" "$dir/store" --out-dir "$dir/emb" 2>"$dir/err" ||
    fail "aggregate store: exit $?: $(cat "$dir/err")"
vtr-aggregate --model "$M" --half - <"$dir/feats.vtr" >"$dir/half.vtr" || fail "aggregate --half"
# --device: a bad name; cuda where no GPU is (or in a build without CUDA): one line, exit 1
vtr-aggregate --model "$M" --device tpu <"$dir/feats.vtr" >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "aggregate --device tpu: exit status"
one_line "$dir/err" "unknown device 'tpu' (expected cpu, cuda or cuda:N)" "aggregate --device tpu"
if ! nvidia-smi -L >/dev/null 2>&1; then
    vtr-aggregate --model "$M" --device cuda <"$dir/feats.vtr" >"$dir/out" 2>"$dir/err"
    [ $? -eq 1 ] || fail "aggregate --device cuda without a GPU: exit status"
    one_line "$dir/err" "run on the CPU (--device cpu)" "aggregate --device cuda without a GPU"
fi
printf 'a video of a cat\n\nthe dog appears\n' | vtr-aggregate --model "$M" --text >"$dir/text.vtr" ||
    fail "aggregate --text"
printf 'q1\ta video of a cat\n' | vtr-aggregate --model "$M" --text --keyed >"$dir/keyed.vtr" ||
    fail "aggregate --text --keyed"
# the one line reader: a line with a NUL byte, or keyed without a tab, is reported by its
# number (counted over the inputs) and the others are embedded; CRLF ends read as LF
printf 'q1\ta video of a cat\r\nq2\tthe \000dog\nno tab\n' |
    vtr-aggregate --model "$M" --text --keyed >"$dir/bad.vtr" 2>"$dir/err"
[ $? -eq 2 ] && grep -q '^vtr-aggregate: stdin:2: a NUL byte in the line$' "$dir/err" &&
    grep -q '^vtr-aggregate: stdin:3: no KEY<TAB>TEXT$' "$dir/err" && cmp -s "$dir/bad.vtr" "$dir/keyed.vtr" ||
    fail "aggregate --text, bad lines: $(cat "$dir/err")"
$PY - "$dir" <<'PYEOF' || fail "aggregate outputs"
import io, json, struct, sys
import numpy as np
d = sys.argv[1]
def records(path):
    out = {}
    b = open(path, "rb").read(); p = 0
    while p < len(b):
        magic, ver, flags, kl, ml, pl = struct.unpack("<4sHHIIQ", b[p:p + 24]); p += 24
        key = b[p:p + kl].decode(); p += kl
        meta = json.loads(b[p:p + ml]); p += ml
        out[key] = (meta, np.load(io.BytesIO(b[p:p + pl]))); p += pl
    return out
a, b, h = records(d + "/dir.vtr"), records(d + "/pipe.vtr"), records(d + "/half.vtr")
assert list(a) == ["video%d" % i for i in sorted(range(24), key=lambda i: "video%d" % i)], list(a)
assert list(b) == ["video%d" % i for i in range(24)], list(b)
for k, (meta, x) in a.items():
    assert x.dtype == np.float32 and x.shape == (1, 16), (k, x.dtype, x.shape)
    assert abs(np.linalg.norm(x) - 1) < 1e-5, k
    assert meta["source"] == k + ".mp4" and meta["embedding"]["side"] == "visual", meta
    assert meta["embedding"]["rows"] == 8 and len(meta["embedding"]["model"]) == 64, meta
    assert np.array_equal(x, b[k][1]), k  # records on stdin: the same bytes
    assert np.array_equal(x, np.load("%s/emb/%s.npy" % (d, k))), k  # the store: the same
    assert h[k][1].dtype == np.float16 and np.array_equal(h[k][1], x.astype(np.float16)), k
t = records(d + "/text.vtr")
assert list(t) == ["1", "3"], list(t)
assert t["1"][0]["embedding"]["text"] == "a video of a cat" and t["1"][0]["embedding"]["side"] == "text"
assert t["1"][1].shape == (1, 16) and abs(np.linalg.norm(t["1"][1]) - 1) < 1e-5
# alone vs in a batch of two: equal up to rounding (index/embedder.h)
assert np.allclose(records(d + "/keyed.vtr")["q1"][1], t["1"][1], rtol=0, atol=1e-6)
# the trained toy: the cat caption is closest to the cat video among the trained items
s = [float(t["1"][1][0] @ a["video%d" % i][1][0]) for i in range(16)]
assert int(np.argmax(s)) == 0, s
PYEOF

# bad items: one line each naming the item, the others written, exit 2
vtr-aggregate --model "$M" "$dir/bad" -o "$dir/bad.vtr" 2>"$dir/err"
[ $? -eq 2 ] || fail "bad items: exit status"
[ "$(wc -l <"$dir/err")" -eq 2 ] || fail "bad items: two lines expected: $(cat "$dir/err")"
grep -q "cols: 23 columns; the model takes 24" "$dir/err" || fail "bad cols: $(cat "$dir/err")"
grep -q "nan: row 2 has a non-finite value" "$dir/err" || fail "bad nan: $(cat "$dir/err")"
$PY -c "
import sys; b = open(sys.argv[1], 'rb').read()
assert b.count(b'VTRR') == 1 and b'good' in b" "$dir/bad.vtr" || fail "bad items: the good one"
# an item of a key written before (video0 of another folder): refused naming both
mkdir "$dir/dup" && cp "$dir/feats/video0.npy" "$dir/dup/" &&
    echo '{"source": "other/video0.mp4"}' >"$dir/dup/video0.json" || fail "dup"
vtr-aggregate --model "$M" "$dir/feats" "$dir/dup" --out-dir "$dir/embdup" 2>"$dir/err"
[ $? -eq 2 ] || fail "a key twice: exit status"
one_line "$dir/err" "^vtr-aggregate: video0: video0.mp4 and other/video0.mp4 have the same key; the second is not written\$" "a key twice"
head -c 100 "$dir/feats.vtr" | vtr-aggregate --model "$M" >/dev/null 2>"$dir/err"
[ $? -eq 2 ] || fail "truncated stream: exit status"
one_line "$dir/err" "stdin" "truncated stream"
vtr-aggregate --model "$dir/nowhere.safetensors" "$dir/feats" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "missing model: exit status"
one_line "$dir/err" "nowhere.safetensors" "missing model"
vtr-aggregate "$dir/feats" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "no --model: exit status"

# 4. the index of the 16 trained items (the others show objects the model never saw, which
#    it embeds anywhere): vtr-aggregate --index; a catalog beside it (vtr-index's place)
mkdir "$dir/trained" && cp "$dir"/feats/video[0-9].npy "$dir"/feats/video1[0-5].npy "$dir/trained/" ||
    fail "trained items"
vtr-aggregate --model "$M" "$dir/trained" --index "$dir/idx" 2>"$dir/err" ||
    fail "aggregate --index: $(cat "$dir/err")"
vtr-import msrvtt "$dir/ann.json" -c "$dir/idx/catalog.sqlite" -d archive 2>/dev/null ||
    fail "index catalog"
$PY -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute(\"UPDATE items SET path = '/videos/' || key || '.mp4', duration_s = 2.5 WHERE key = 'video3'\")
db.commit()" "$dir/idx/catalog.sqlite" || fail "catalog update"

# 5. vtr-search: one query, the table
vtr-search "the fish appears" --index "$dir/idx" >"$dir/out" 2>"$dir/err" ||
    fail "search: exit $?: $(cat "$dir/err")"
sed -n 1p "$dir/out" | grep -qx "query: the fish appears (3 of its 3 words known)" ||
    fail "query line: $(cat "$dir/out")"
[ ! -s "$dir/err" ] || fail "a warning for a known query: $(cat "$dir/err")"
sed -n 2p "$dir/out" | grep -q "rank *score *duration *item" || fail "table header: $(cat "$dir/out")"
sed -n 3p "$dir/out" | grep -Eq "^ +1 +0\.[0-9]{4} +2\.50s +/videos/video3\.mp4$" ||
    fail "fish: video3 first with its path and duration: $(cat "$dir/out")"
[ "$(grep -Ec '^ +[0-9]+ +-?[0-9]+\.[0-9]{4} ' "$dir/out")" -eq 10 ] || fail "10 results by default: $(cat "$dir/out")"
# -k, --json
vtr-search "a video of a lion" --index "$dir/idx" -k 3 --json >"$dir/out" || fail "search --json"
$PY -c "
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1
o = json.loads(lines[0])
assert o['query'] == 'a video of a lion' and (o['words'], o['known_words']) == (5, 5), o
r = o['results']
assert [x['rank'] for x in r] == [1, 2, 3], r
assert r[0]['key'] == 'video8' and r[0]['path'] is None and r[0]['duration'] is None, r
assert r[0]['score'] >= r[1]['score'] >= r[2]['score'], r
" "$dir/out" || fail "--json: $(cat "$dir/out")"
# --device: a bad name, --approx with cuda, and cuda where no GPU is (or in a build
# without CUDA): one line each, exit 1
vtr-search "a cat" --index "$dir/idx" --device tpu >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "--device tpu: exit status"
one_line "$dir/err" "unknown device 'tpu' (expected cpu, cuda or cuda:N)" "--device tpu"
vtr-search "a cat" --index "$dir/idx" --device cuda --approx >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "--device cuda --approx: exit status"
one_line "$dir/err" "searches exactly" "--device cuda --approx"
if ! nvidia-smi -L >/dev/null 2>&1; then
    vtr-search "a cat" --index "$dir/idx" --device cuda >"$dir/out" 2>"$dir/err"
    [ $? -eq 1 ] || fail "--device cuda without a GPU: exit status"
    one_line "$dir/err" "run on the CPU (--device cpu)" "--device cuda without a GPU"
fi
# The CUDA backend (build/libvtr-cuda.so, lib/cuda_loader.h) is loaded by the first CUDA
# call only: a search on the CPU never loads the CUDA runtime, one with --device cuda
# does (it then fails without a GPU); a backend that cannot be loaded is one line naming
# it and saying what to do.
if [ -f build/libvtr-cuda.so ]; then
    LD_DEBUG=files LD_DEBUG_OUTPUT="$dir/ld" vtr-search "a cat" --index "$dir/idx" \
        >"$dir/out" 2>"$dir/err" || fail "search on the CPU: $(cat "$dir/err")"
    ! grep -q 'libcudart' "$dir"/ld.* || fail "a search on the CPU loaded the CUDA runtime"
    rm -f "$dir"/ld.*
    LD_DEBUG=files LD_DEBUG_OUTPUT="$dir/ld" vtr-search "a cat" --index "$dir/idx" \
        --device cuda >"$dir/out" 2>"$dir/err"
    grep -q 'libvtr-cuda.so' "$dir"/ld.* && grep -q 'libcudart' "$dir"/ld.* ||
        fail "--device cuda did not load the CUDA backend: $(cat "$dir/err")"
    VTR_CUDA_LIBRARY="$dir/none/libvtr-cuda.so" vtr-search "a cat" --index "$dir/idx" \
        --device cuda >"$dir/out" 2>"$dir/err"
    [ $? -eq 1 ] || fail "a missing CUDA backend: exit status"
    one_line "$dir/err" "cannot load vtr's CUDA backend ($dir/none/libvtr-cuda.so): .*set VTR_CUDA_LIBRARY" \
        "a missing CUDA backend"
fi
# words the model does not know are counted; a query with none is warned about (exit 0:
# it still has results)
vtr-search "a zebra" "quux zork" --index "$dir/idx" -k 1 >"$dir/out" 2>"$dir/err" ||
    fail "unknown words: exit $?: $(cat "$dir/err")"
grep -qx "query: a zebra (1 of its 2 words known)" "$dir/out" &&
    grep -qx "query: quux zork (0 of its 2 words known)" "$dir/out" ||
    fail "known words: $(cat "$dir/out")"
[ "$(cat "$dir/err")" = "vtr-search: query 2: none of its 2 words is in the model's vocabulary: its results are not about it" ] ||
    fail "the warning: $(cat "$dir/err")"
# all trained captions as one batch: each finds its item first; scores are the inner
# products of the text embedding and the stored float16 embedding
vtr-search --queries "$dir/queries.txt" --index "$dir/idx" --json -k 24 >"$dir/out" || fail "--queries"
printf 'a cat\nthe \000dog\n' >"$dir/nul.txt"
vtr-search --queries "$dir/nul.txt" --index "$dir/idx" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] && grep -q "^vtr-search: $dir/nul.txt:2: a NUL byte in the line\$" "$dir/err" ||
    fail "--queries with a NUL byte: $(cat "$dir/err")"
vtr-aggregate --model "$M" --text "$dir/queries.txt" >"$dir/q.vtr" || fail "aggregate queries"
$PY - "$dir" <<'PYEOF' || fail "batch of queries"
import io, json, sqlite3, struct, sys
import numpy as np
d = sys.argv[1]
lines = open(d + "/out").read().splitlines()
assert len(lines) == 16, len(lines)
b = open(d + "/q.vtr", "rb").read(); p = 0; q = []
while p < len(b):
    _, _, _, kl, ml, pl = struct.unpack("<4sHHIIQ", b[p:p + 24]); p += 24 + kl + ml
    q.append(np.load(io.BytesIO(b[p:p + pl]))[0]); p += pl
db = sqlite3.connect(d + "/idx/index.sqlite")
seg = db.execute("SELECT id FROM segments").fetchall()
assert len(seg) == 1
m = np.load(d + "/idx/seg-%06d.npy" % seg[0][0]).astype(np.float32)
keys = dict(db.execute("SELECT key, row FROM entries WHERE live = 1").fetchall())
for i, line in enumerate(lines):
    o = json.loads(line)
    r = o["results"]
    assert r[0]["key"] == "video%d" % i, (o["query"], r[:3])
    assert len(r) == 16
    for x in r:
        want = float(np.dot(q[i], m[keys[x["key"]]]))
        assert abs(x["score"] - want) < 1e-5, (x, want)
PYEOF

# a damaged segment (a NaN in a row): --json still prints (null score; it said "out of
# memory"), one line on stderr names the item, exit 2
cp -r "$dir/idx" "$dir/nanidx"
$PY - "$dir/nanidx" <<'PYEOF' || fail "NaN segment"
import sqlite3, sys
import numpy as np
d = sys.argv[1]
seg = sqlite3.connect(d + "/index.sqlite").execute("SELECT id FROM segments").fetchone()[0]
m = np.load("%s/seg-%06d.npy" % (d, seg), mmap_mode="r+")
m[3, 5] = np.nan
m.flush()
PYEOF
vtr-search --index "$dir/nanidx" --model "$M" "a cat" -k 24 --json >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] || fail "NaN segment: exit status: $(cat "$dir/err")"
one_line "$dir/err" "scores nan (its stored vector is damaged): build the index again" "NaN segment"
$PY -c "
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert sum(r['score'] is None for r in o['results']) == 1, o
" "$dir/out" || fail "NaN segment: --json: $(cat "$dir/out")"

# --model: the index's own is accepted; another model is refused
vtr-search "a cat" --index "$dir/idx" --model "$M" -k 1 >/dev/null || fail "--model the same"
cp -r "$dir/run" "$dir/run2"
$PY -c "
import sys
b = bytearray(open(sys.argv[1], 'rb').read()); b[-1] ^= 1; open(sys.argv[1], 'wb').write(b)
" "$dir/run2/last.safetensors"
vtr-search "a cat" --index "$dir/idx" --model "$dir/run2/last.safetensors" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "another model: exit status"
one_line "$dir/err" "the index was made with model" "another model"
vtr-aggregate --model "$dir/run2/last.safetensors" "$dir/feats" --index "$dir/idx" 2>"$dir/err"
[ $? -eq 1 ] || fail "aggregate into an index of another model: exit status"
one_line "$dir/err" "use a new --index DIR" "aggregate, another model"

# bad index dirs, bad usage, a bad query
vtr-search "a cat" --index "$dir/nowhere" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "missing index: exit status"
one_line "$dir/err" "nowhere" "missing index"
mkdir "$dir/notindex" && echo junk >"$dir/notindex/index.sqlite"
vtr-search "a cat" --index "$dir/notindex" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "junk index: exit status"
one_line "$dir/err" "notindex" "junk index"
# a segment that is a FIFO: refused at once, not waited on
cp -r "$dir/idx" "$dir/fifoidx" && seg=$(ls "$dir"/fifoidx/seg-*.npy) && rm "$seg" &&
    mkfifo "$seg" || fail "FIFO segment"
timeout 20 vtr-search "a cat" --index "$dir/fifoidx" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "FIFO segment: exit status: $(cat "$dir/err")"
one_line "$dir/err" "$seg: not a regular file (a FIFO)" "FIFO segment"
vtr-search "a cat" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "no --index: exit status"
vtr-search --index "$dir/idx" "a cat" -k 0 >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "-k 0: exit status"
vtr-search --index "$dir/idx" "a cat" "$(printf 'bad \377')" >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] || fail "bad query: exit status"
one_line "$dir/err" "query 2" "bad query"
grep -q "query: a cat" "$dir/out" || fail "bad query: the good one is searched"
# an empty file as the catalog: refused in one line, left empty (no schema written)
: >"$dir/empty.db"
vtr-search --index "$dir/idx" --catalog "$dir/empty.db" "a cat" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "empty catalog: exit status"
one_line "$dir/err" "empty.db is empty, not a vtr catalog" "empty catalog"
[ ! -s "$dir/empty.db" ] || fail "empty catalog: vtr-search wrote into it"
vtr-eval -c "$M" --catalog "$dir/empty.db" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "vtr-eval, empty catalog: exit status"
[ ! -s "$dir/empty.db" ] || fail "empty catalog: vtr-eval wrote into it"
# a query of 24,000 words is refused in one line (it took 35 s and 417 MB); 1,000 pass
long=$($PY -c "print(' '.join(['cat'] * 24000))")
vtr-search --index "$dir/idx" "a cat" "$long" >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] || fail "long query: exit status"
one_line "$dir/err" "query 2: the text has 24000 words; at most 1000" "long query"
grep -q "query: a cat" "$dir/out" || fail "long query: the good one is searched"
vtr-search --index "$dir/idx" "$($PY -c "print(' '.join(['cat'] * 1000))")" -k 1 >/dev/null ||
    fail "a query of 1000 words"
# an empty query is a failed query; no queries at all (stdin closed, an empty file) is an
# error; a full disk is reported naming stdout and the cause (vtr-eval alike)
vtr-search --index "$dir/idx" "a cat" "" >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] || fail "empty query: exit status"
one_line "$dir/err" "^vtr-search: query 2: the text has no word\$" "empty query"
[ "$(grep -c '^query: ' "$dir/out")" -eq 1 ] || fail "empty query: searched: $(cat "$dir/out")"
vtr-search --index "$dir/idx" --queries - >"$dir/out" 2>"$dir/err" <&-
[ $? -eq 1 ] || fail "stdin closed: exit status"
one_line "$dir/err" "^vtr-search: stdin: no queries" "stdin closed"
printf '\n  \n' >"$dir/blank.txt"
vtr-search --index "$dir/idx" --queries "$dir/blank.txt" >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "no queries in a file: exit status"
one_line "$dir/err" "^vtr-search: $dir/blank.txt: no queries" "no queries in a file"
for j in "" --json; do
    # shellcheck disable=SC2086
    vtr-search --index "$dir/idx" "a cat" $j >/dev/full 2>"$dir/err"
    [ $? -eq 1 ] || fail "full disk $j: exit status"
    one_line "$dir/err" "^vtr-search: stdout: No space left on device\$" "full disk $j"
done
vtr-eval -c "$M" --split test >/dev/null 2>"$dir/err" || fail "vtr-eval: $(cat "$dir/err")"
vtr-eval -c "$M" --split test >/dev/full 2>"$dir/err"
[ $? -eq 1 ] || fail "vtr-eval, full disk: exit status"
one_line "$dir/err" "^vtr-eval: stdout: No space left on device\$" "vtr-eval, full disk"
# a key with a line break stays on its row of the table, escaped
mkdir "$dir/nl" && cp "$dir/feats/video3.npy" "$dir/nl/two
lines.npy" || fail "a key with a line break"
vtr-aggregate --model "$M" "$dir/nl" --index "$dir/nlidx" 2>"$dir/err" ||
    fail "a key with a line break: aggregate: $(cat "$dir/err")"
vtr-search --index "$dir/nlidx" "the fish appears" >"$dir/out" 2>"$dir/err" ||
    fail "a key with a line break: $(cat "$dir/err")"
[ "$(wc -l <"$dir/out")" -eq 3 ] && grep -qF '  two\x0alines' "$dir/out" ||
    fail "a key with a line break: $(cat "$dir/out")"

# 6. the approximate index: vtr-approx builds it; vtr-search --approx ranks FAISS's
#    candidates exactly (here every row is one: the same results as --exact); rows added
#    since are searched exactly until vtr-approx --update adds them; a damaged file, or
#    none, fails --approx in one line; the default (exact below 100,000 items) ignores it
cp -r "$dir/idx" "$dir/aidx"
vtr-search --index "$dir/aidx" --approx "a cat" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "--approx without an approximate index: exit status"
one_line "$dir/err" "has no approximate index (approx.ann): build one with vtr-approx" "--approx, none"
vtr-approx --index "$dir/aidx" --kind ivfpq 2>"$dir/err"
[ $? -eq 1 ] || fail "vtr-approx ivfpq of 16 rows: exit status"
one_line "$dir/err" "16 training rows; IVF-PQ needs at least 256" "vtr-approx ivfpq of 16 rows"
vtr-approx --index "$dir/aidx" --kind hnsw 2>"$dir/err" || fail "vtr-approx: $(cat "$dir/err")"
grep -q "approx.ann: built (.*): HNSW over 16 rows of generation 1" "$dir/err" &&
    grep -q "^vtr-approx: recall@10 1.000 against exact search, with 16 of the index's rows" "$dir/err" ||
    fail "vtr-approx report: $(cat "$dir/err")"
# --approx gives what --exact gives (every row is a candidate here); $1 names the case
same_as_exact() {
    vtr-search --index "$dir/aidx" --queries "$dir/queries.txt" --json -k 5 --exact \
        >"$dir/exact" || fail "--exact, $1"
    vtr-search --index "$dir/aidx" --queries "$dir/queries.txt" --json -k 5 --approx \
        >"$dir/out" 2>"$dir/err" || fail "--approx, $1: $(cat "$dir/err")"
    cmp -s "$dir/exact" "$dir/out" || fail "--approx, $1: $(diff "$dir/exact" "$dir/out")"
}
same_as_exact "built"
mkdir "$dir/untrained" && cp "$dir"/feats/video1[6-9].npy "$dir"/feats/video2[0-3].npy "$dir/untrained/" ||
    fail "untrained items"
vtr-aggregate --model "$M" "$dir/untrained" --index "$dir/aidx" 2>"$dir/err" ||
    fail "aggregate into aidx: $(cat "$dir/err")"
same_as_exact "8 rows since"
vtr-approx --index "$dir/aidx" --recall 0 2>"$dir/err" || fail "vtr-approx --update: $(cat "$dir/err")"
grep -q "new rows added (.*): HNSW over 24 rows of generation 2" "$dir/err" ||
    fail "vtr-approx --update: $(cat "$dir/err")"
same_as_exact "updated"
vtr-search --index "$dir/aidx" --approx --exact "a cat" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "--approx --exact: exit status"
one_line "$dir/err" "give --approx or --exact, not both" "--approx --exact"
head -c 100 "$dir/aidx/approx.ann" >"$dir/cut" && mv "$dir/cut" "$dir/aidx/approx.ann"
vtr-search --index "$dir/aidx" --approx "a cat" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] || fail "--approx, a cut file: exit status"
one_line "$dir/err" "index $dir/aidx: approx.ann: cut short" "--approx, a cut file"
vtr-search --index "$dir/aidx" "a cat" >/dev/null 2>"$dir/err" && [ ! -s "$dir/err" ] ||
    fail "a small index with a cut approximate file, by default: $(cat "$dir/err")"
vtr-approx --index "$dir/aidx" --remove 2>"$dir/err" && [ ! -e "$dir/aidx/approx.ann" ] ||
    fail "vtr-approx --remove: $(cat "$dir/err")"

# the model moved since the index was made: one line that says so; --model finds it
mv "$dir/run" "$dir/run-moved"
vtr-search --index "$dir/idx" "a cat" >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "moved model: exit status"
one_line "$dir/err" "index $dir/idx: its model (name it with --model if it moved): $M: " "moved model"
vtr-search --index "$dir/idx" "a cat" --model "$dir/run-moved/last.safetensors" >"$dir/out" \
    2>"$dir/err" || fail "moved model, --model: $(cat "$dir/err")"
grep -q "query: a cat" "$dir/out" || fail "moved model, --model: no results"
mv "$dir/run-moved" "$dir/run"
echo "ok"
