#!/bin/sh
# Sharded work without mpirun (tests/t_shard_mpi.sh runs the same under mpirun): --shard
# I/N on vtr-features (a record stream: round-robin), vtr-aggregate (a feature store:
# contiguous shares) and vtr-index (an archive: contiguous shares), each shard writing
# OUT.shard-I-of-N; vtr-merge joins the parts into what one process writes: the same keys
# and feature bytes as a single run's store, the same entries (keys, embedding bytes,
# norms, in order) and catalog as a single run's index, and the same vtr-search results.
# Bad input: a shard out of range, a malformed --shard, a missing part, overlapping parts,
# parts of other settings or models, an existing OUT: exit 1 with one line naming it.
set -u
for p in vtr-features vtr-aggregate vtr-index vtr-merge vtr-search vtr-decode vtr-synth \
    vtr-train vtr-import; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy, sqlite3' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# expect RC PATTERN NAME CMD...: CMD exits with RC and prints one line matching PATTERN
expect() {
    rc=$1 pattern=$2 name=$3
    shift 3
    "$@" >/dev/null 2>"$dir/err"
    got=$?
    [ $got -eq "$rc" ] || fail "$name: exit $got, expected $rc: $(cat "$dir/err")"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "$name: expected one line: $(cat "$dir/err")"
    grep -q -- "$pattern" "$dir/err" || fail "$name: no '$pattern' in: $(cat "$dir/err")"
}
. tests/fixtures/shard_checks.sh

# ---- fixtures ------------------------------------------------------------------------
$PY $SCRIPT random-weights resnet18 "$dir/w.safetensors" 1 || fail "random weights"
. tests/fixtures/tiny_model.sh
tiny_model "$dir"
A="$dir/archive"
mkdir -p "$A/sub"
vtr-synth --frames 8 --size 64x48 "$A/a.mp4" &&
    vtr-synth --frames 8 --size 64x64 "$A/b.webm" &&
    vtr-synth --frames 8 --size 80x64 "$A/sub/c.mp4" &&
    vtr-synth --size 64x48 "$A/d.png" &&
    vtr-synth --size 48x64 "$A/e.png" || fail "vtr-synth"
vtr-decode --frames 2 -o "$dir/frames.rec" "$A/a.mp4" "$A/b.webm" "$A/sub/c.mp4" "$A/d.png" \
    "$A/e.png" 2>"$dir/err" || fail "vtr-decode: $(cat "$dir/err")"
# --batch 2 = the frames of one item: a frame's features do not depend on the other
# items in its batch, so shards and a single run compute the same bytes
F="vtr-features -w $dir/w.safetensors -a resnet18 --resize 72 --crop 64 --threads 1 --batch 2"
IX="vtr-index --model $CK --weights $dir/w.safetensors --arch resnet18 --frames 2 --resize 72 --crop 64 --threads 1"

# ---- 1. bad --shard: one line naming the option, exit 1, nothing written ---------------
expect 1 '^vtr-features: --shard 3/2: shard index out of range (0..1)$' "features 3/2" \
    $F --shard 3/2 --store "$dir/bad" "$dir/frames.rec"
expect 1 '^vtr-features: --shard 1: not I/N' "features --shard 1" \
    $F --shard 1 --store "$dir/bad" "$dir/frames.rec"
expect 1 '^vtr-aggregate: --shard 2/2: shard index out of range (0..1)$' "aggregate 2/2" \
    vtr-aggregate --model "$CK" --shard 2/2 -o "$dir/bad.rec" "$dir/frames.rec"
expect 1 '^vtr-aggregate: --shard 1/0: the shard count' "aggregate 1/0" \
    vtr-aggregate --model "$CK" --shard 1/0 -o "$dir/bad.rec" "$dir/frames.rec"
expect 1 '^vtr-index: --shard 5/3: shard index out of range (0..2)$' "index 5/3" \
    $IX --shard 5/3 --index "$dir/bad" "$A"
expect 1 '^vtr-index: --shard -1/2: not I/N' "index -1/2" $IX --shard -1/2 --index "$dir/bad" "$A"
ls "$dir" | grep -q '^bad' && fail "a refused run wrote $(ls "$dir" | grep '^bad')"
vtr-features --help | grep -q 'shard-I-of-N' || fail "vtr-features --help lacks the shard form"
vtr-aggregate --help | grep -q 'shard-I-of-N' || fail "vtr-aggregate --help lacks the shard form"
vtr-index --help | grep -q 'shard-I-of-N' || fail "vtr-index --help lacks the shard form"
vtr-merge --help | grep -q 'OUT PART' || fail "vtr-merge --help"

# ---- 2. vtr-features: a record stream, round-robin; merged = the single run's items ----
$F --store "$dir/S" "$dir/frames.rec" 2>"$dir/err" || fail "features, one run: $(cat "$dir/err")"
for i in 0 1; do
    $F --shard $i/2 --store "$dir/S" "$dir/frames.rec" 2>"$dir/err" ||
        fail "features shard $i: $(cat "$dir/err")"
done
[ -d "$dir/S.shard-0-of-2" ] && [ -d "$dir/S.shard-1-of-2" ] || fail "no store parts: $(ls "$dir")"
[ "$(cat "$dir/S.shard-0-of-2/keys.txt" | tr '\n' ' ')" = "a c e " ] ||
    fail "shard 0 of a stream: $(cat "$dir/S.shard-0-of-2/keys.txt")"
vtr-merge "$dir/SM" "$dir/S.shard-1-of-2" "$dir/S.shard-0-of-2" 2>"$dir/err" ||
    fail "vtr-merge stores: $(cat "$dir/err")"
grep -q 'feature store .*SM: 5 items, 10 rows from 2 parts' "$dir/err" || fail "merge said: $(cat "$dir/err")"
same_store "$dir/S" "$dir/SM" || fail "merged store differs from the single run's"
# --shard 0/1 is the single run itself; stdout is fine for one process
$F --shard 0/1 --store "$dir/S01" "$dir/frames.rec" 2>/dev/null && [ -d "$dir/S01" ] ||
    fail "--shard 0/1 did not write the store itself"
$F --shard 1/2 "$dir/frames.rec" >"$dir/s1.rec" 2>"$dir/err" && [ -s "$dir/s1.rec" ] ||
    fail "--shard 1/2 to stdout: $(cat "$dir/err")"

# ---- 3. vtr-aggregate: a feature store, contiguous shares; the index parts merged -----
AG="vtr-aggregate --model $CK --threads 1"
$AG --index "$dir/AI" "$dir/S" 2>"$dir/err" || fail "aggregate, one run: $(cat "$dir/err")"
for i in 0 1 2; do
    $AG --shard $i/3 --index "$dir/AI" "$dir/S" 2>"$dir/err" ||
        fail "aggregate shard $i: $(cat "$dir/err")"
done
vtr-merge "$dir/AIM" "$dir"/AI.shard-*-of-3 2>"$dir/err" || fail "merge indexes: $(cat "$dir/err")"
same_index "$dir/AI" "$dir/AIM" || fail "merged aggregate index differs from the single run's"
$AG --shard 1/2 -o "$dir/emb.rec" "$dir/frames.rec" 2>/dev/null
[ -f "$dir/emb.rec.shard-1-of-2" ] || fail "-o FILE of shard 1/2: $(ls "$dir")"

# ---- 4. vtr-index: an archive, contiguous shares; index and catalog merged -------------
$IX --index "$dir/X" "$A" 2>"$dir/err" || fail "index, one run: $(cat "$dir/err")"
for i in 0 1; do
    $IX --shard $i/2 --index "$dir/X/" "$A" 2>"$dir/err" || fail "index shard $i: $(cat "$dir/err")"
done
grep -q 'X.shard-1-of-2: 2 added' "$dir/err" || fail "shard 1 of 5 files: $(cat "$dir/err")"
vtr-merge "$dir/XM" "$dir/X.shard-0-of-2" "$dir/X.shard-1-of-2" 2>"$dir/err" ||
    fail "merge archive indexes: $(cat "$dir/err")"
grep -q 'XM: 5 items, 5 rows from 2 parts, with their catalogs' "$dir/err" ||
    fail "merge said: $(cat "$dir/err")"
same_index "$dir/X" "$dir/XM" || fail "merged archive index differs from the single run's"
same_catalog "$dir/X" "$dir/XM" || fail "merged catalog differs from the single run's"
for q in "a video of a cat" "a video of a dog number 2"; do
    vtr-search --index "$dir/X" -k 5 "$q" >"$dir/r1" 2>&1 && vtr-search --index "$dir/XM" -k 5 "$q" >"$dir/r2" 2>&1 ||
        fail "vtr-search: $(cat "$dir/r1" "$dir/r2")"
    cmp -s "$dir/r1" "$dir/r2" || fail "search '$q' differs: $(cat "$dir/r1") vs $(cat "$dir/r2")"
done
# a rerun of a shard is incremental, over its share only
$IX --shard 1/2 --index "$dir/X" "$A" 2>"$dir/err" &&
    grep -q '0 added, 0 updated, 0 removed, 0 failed, 2 unchanged' "$dir/err" ||
    fail "shard rerun: $(cat "$dir/err")"

# ---- 5. parts that do not fit: one line naming the part and the cause, exit 1 ----------
expect 1 "missing shard 1 of 2 (.*/X.shard-1-of-2)" "missing part" \
    vtr-merge "$dir/M1" "$dir/X.shard-0-of-2"
expect 1 "are both shard 0 of 2" "a part twice" \
    vtr-merge "$dir/M1" "$dir/X.shard-0-of-2" "$dir/X.shard-0-of-2/"
expect 1 "is a shard of 2 and .* of 3" "shard counts" \
    vtr-merge "$dir/M1" "$dir/S.shard-0-of-2" "$dir/AI.shard-0-of-3"
expect 1 "XM exists" "existing OUT" vtr-merge "$dir/XM" "$dir/X.shard-0-of-2" "$dir/X.shard-1-of-2"
cp -r "$dir/S.shard-0-of-2" "$dir/sA" && cp -r "$dir/S.shard-0-of-2" "$dir/sB" || fail "cp"
expect 1 'key "a" is in feature store .*/sA and in feature store .*/sB' "overlapping stores" \
    vtr-merge "$dir/M1" "$dir/sA" "$dir/sB"
cp -r "$dir/X.shard-0-of-2" "$dir/xA" && cp -r "$dir/X" "$dir/xB" || fail "cp"
expect 1 "index .*/xB: item a.mp4 is in .*M1.tmp.[0-9]* already" "overlapping indexes" \
    vtr-merge "$dir/M1" "$dir/xA" "$dir/xB"
$F --resize 80 --store "$dir/other" "$dir/frames.rec" 2>/dev/null || fail "features --resize 80"
expect 1 "feature store .*/other was made with other settings than feature store .*: preprocess: " \
    "stores of other settings" vtr-merge "$dir/M1" "$dir/sA" "$dir/other"
rm "$dir/xA/catalog.sqlite"
expect 1 "index .*/xA holds embeddings of another model than index" "indexes of other models" \
    vtr-merge "$dir/M1" "$dir/AI" "$dir/xA"
expect 1 "lacks a catalog" "a catalog missing" vtr-merge "$dir/M1" "$dir/X" "$dir/xA"
expect 1 "is a feature store, .* an embedding index" "two kinds" vtr-merge "$dir/M1" "$dir/AI" "$dir/S"
expect 1 "neither a feature store" "not a part" vtr-merge "$dir/M1" "$dir/S" "$A"
ls "$dir" | grep -q '^M1' && fail "a refused merge left $(ls "$dir" | grep '^M1')"
exit 0
