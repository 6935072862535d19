#!/bin/sh
# Sharded work under mpirun -np 2 (skipped without an MPI build; tests/t_shard.sh covers
# --shard I/N without it): rank R of 2 is shard R of 2 of vtr-features and vtr-index, each
# writing OUT.shard-R-of-2, and vtr-merge of the parts equals a single run; stdout and
# --shard under several ranks are refused; a rank that cannot read an item of its share
# says so in one line naming the rank.
set -u
. tests/mpi.sh
for p in vtr-features vtr-index vtr-merge vtr-decode vtr-synth vtr-train vtr-import; do
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
. tests/fixtures/shard_checks.sh

$PY $SCRIPT random-weights resnet18 "$dir/w.safetensors" 1 || fail "random weights"
. tests/fixtures/tiny_model.sh
tiny_model "$dir"
A="$dir/archive"
mkdir -p "$A"
vtr-synth --frames 8 --size 64x48 "$A/a.mp4" &&
    vtr-synth --frames 8 --size 64x64 "$A/b.webm" &&
    vtr-synth --size 64x48 "$A/c.png" || fail "vtr-synth"
vtr-decode --frames 2 -o "$dir/frames.rec" "$A/a.mp4" "$A/b.webm" "$A/c.png" 2>"$dir/err" ||
    fail "vtr-decode: $(cat "$dir/err")"
F="vtr-features -w $dir/w.safetensors -a resnet18 --resize 72 --crop 64 --threads 1 --batch 2"
IX="vtr-index --model $CK --weights $dir/w.safetensors --arch resnet18 --frames 2 --resize 72 --crop 64 --threads 1"

# 1. vtr-features: two ranks, two stores, merged = one run
$F --store "$dir/S" "$dir/frames.rec" 2>"$dir/err" || fail "features, one run: $(cat "$dir/err")"
$MPIRUN -np 2 $F --store "$dir/S" "$dir/frames.rec" >"$dir/log" 2>&1 ||
    fail "mpirun vtr-features: $(cat "$dir/log")"
vtr-merge "$dir/SM" "$dir/S.shard-0-of-2" "$dir/S.shard-1-of-2" 2>"$dir/err" ||
    fail "merge: $(cat "$dir/err")"
same_store "$dir/S" "$dir/SM" || fail "merged store differs from the single run's"

# 2. vtr-index: two ranks, two indexes, merged = one run
$IX --index "$dir/X" "$A" 2>"$dir/err" || fail "index, one run: $(cat "$dir/err")"
$MPIRUN -np 2 $IX --index "$dir/X" "$A" >"$dir/log" 2>&1 || fail "mpirun vtr-index: $(cat "$dir/log")"
grep -q '^vtr-index (rank 1 of 2): .*X.shard-1-of-2: 1 added' "$dir/log" ||
    fail "rank 1's summary: $(cat "$dir/log")"
vtr-merge "$dir/XM" "$dir"/X.shard-*-of-2 2>"$dir/err" || fail "merge: $(cat "$dir/err")"
same_index "$dir/X" "$dir/XM" || fail "merged index differs from the single run's"
same_catalog "$dir/X" "$dir/XM" || fail "merged catalog differs from the single run's"

# 3. refused under several ranks: stdout (the ranks would interleave), --shard
$MPIRUN -np 2 $F "$dir/frames.rec" >"$dir/out" 2>"$dir/log"
[ $? -ne 0 ] || fail "stdout under mpirun accepted"
grep -q '^vtr-features: stdout under mpirun with 2 ranks' "$dir/log" || fail "stdout: $(cat "$dir/log")"
[ -s "$dir/out" ] && fail "records written to stdout under mpirun"
$MPIRUN -np 2 $F --shard 0/2 --store "$dir/bad" "$dir/frames.rec" >"$dir/log" 2>&1
[ $? -ne 0 ] && grep -q -- '--shard 0/2 under mpirun with 2 ranks: the ranks are the shards' \
    "$dir/log" || fail "--shard under mpirun: $(cat "$dir/log")"

# 4. a rank that cannot read an item of its share: one line naming the rank, exit 2
printf '%s\n' "$A/a.mp4" "$A/b.webm" "$A/c.png" "$A/zz-gone.mp4" >"$dir/list.txt"
$MPIRUN -np 2 $IX --index "$dir/L" "$dir/list.txt" >"$dir/log" 2>&1
[ $? -eq 2 ] || fail "a missing file in rank 1's share: exit $?: $(cat "$dir/log")"
[ "$(grep -c '^vtr-index (rank 1 of 2): .*zz-gone.mp4: .*No such file' "$dir/log")" -eq 1 ] ||
    fail "rank 1's error: $(cat "$dir/log")"
exit 0
