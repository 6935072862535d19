#!/bin/sh
# pipeline/msrvtt.mk on a tiny MSR-VTT-layout archive (vtr-synth clips video0..video3 in
# TrainValVideo/ and TestVideo/, the annotation JSON of tests/interop/import_fixtures.py,
# random ResNet-18 weights): make -j2 builds every item, the store and the catalog; a
# rerun does nothing; a deleted output alone is rebuilt; a corrupt video fails alone
# under -k and is listed at the end; pipeline/slurm-array.sh writes an array whose task
# scripts, run here with SLURM_ARRAY_TASK_ID and a fake sbatch, build their shares.
set -u
for p in vtr-features vtr-decode vtr-synth vtr-import make; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
[ -f pipeline/msrvtt.mk ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
src=$dir/msrvtt
out=$dir/out
$PY tests/interop/import_fixtures.py msrvtt "$src" || fail "annotation fixture"
mkdir -p "$src/TrainValVideo" "$src/TestVideo"
for i in 0 1 2; do
    vtr-synth --frames 8 --size 64x48 "$src/TrainValVideo/video$i.mp4" || fail "vtr-synth video$i"
done
vtr-synth --frames 8 --size 64x48 "$src/TestVideo/video3.mp4" || fail "vtr-synth video3"
$PY tests/fixtures/make_backbone_fixtures.py random-weights resnet18 "$dir/w.safetensors" 1 ||
    fail "random weights"
: | vtr-features -w "$dir/w.safetensors" -a resnet18 >/dev/null 2>"$dir/err" || {
    grep -q 'need oneDNN' "$dir/err" && { echo "built without oneDNN"; exit 77; }
    fail "vtr-features: $(cat "$dir/err")"
}
# pipe_make ARGS...: the fragment with the archive and small, fast settings
pipe_make() {
    make --no-print-directory -f pipeline/msrvtt.mk MSRVTT="$src" OUT="$out" \
        WEIGHTS="$dir/w.safetensors" ARCH=resnet18 DECODE_FLAGS="--frames 2" \
        FEATURES_FLAGS="--resize 72 --crop 64 --threads 1" "$@"
}
# stamp: the modification times of the outputs
stamp() {
    ls -l --time-style=+%s.%N "$out/features"/*.npy "$out/store/rows.npy" | awk '{print $6, $7}'
}

# 1. everything, two items at a time
pipe_make -j2 >"$dir/log" 2>&1 || fail "make -j2: exit $?: $(cat "$dir/log")"
[ "$(grep -c '^item video' "$dir/log")" -eq 4 ] || fail "expected 4 items: $(cat "$dir/log")"
$PY - "$out" <<'PYEOF' || fail "outputs"
import json, sqlite3, sys
import numpy as np
out = sys.argv[1]
keys = open(out + "/store/keys.txt").read().split("\n")[:-1]
assert keys == ["video0", "video1", "video2", "video3"], keys
rows = np.load(out + "/store/rows.npy")
offsets = np.load(out + "/store/offsets.npy")
for i, k in enumerate(keys):
    a = np.load("%s/features/%s.npy" % (out, k))
    assert a.shape == (2, 512) and a.dtype == np.float32, (k, a.shape)
    assert np.array_equal(rows[offsets[i]:offsets[i + 1]], a), k
    assert json.load(open("%s/features/%s.json" % (out, k)))["extractor"]["arch"] == "resnet18"
db = sqlite3.connect(out + "/catalog.db")
assert db.execute("select count(*) from captions").fetchone()[0] == 9
assert db.execute("select count(*) from splits where split = 'test'").fetchone()[0] == 1
assert db.execute("select rows from feature_stores").fetchone()[0] == 8
PYEOF
[ -z "$(ls "$out/tmp")" ] || fail "temporary frames left: $(ls "$out/tmp")"

# 2. a rerun does nothing
pipe_make -q store || fail "make -q: not up to date after a full build"
before=$(stamp)
sleep 1
pipe_make -j2 >"$dir/log" 2>&1 || fail "rerun: exit $?"
grep -q -e '^item' -e 'vtr-import' "$dir/log" && fail "the rerun rebuilt: $(cat "$dir/log")"
[ "$(stamp)" = "$before" ] || fail "the rerun touched outputs"

# 3. a deleted output alone is rebuilt (then the store)
rm "$out/features/video1.npy"
pipe_make -q store && fail "make -q: up to date without video1.npy"
pipe_make -j2 >"$dir/log" 2>&1 || fail "after a delete: exit $?"
[ "$(grep '^item' "$dir/log")" = "item video1" ] || fail "expected video1 alone: $(cat "$dir/log")"
grep -q 'vtr-import npy-dir' "$dir/log" || fail "the store was not rebuilt"
after=$(stamp)
[ "$(echo "$before" | sed -n '1p;3p;4p')" = "$(echo "$after" | sed -n '1p;3p;4p')" ] ||
    fail "items other than video1 were rebuilt"

# 4. a corrupt video fails alone (without -k too), the store is built from the others, the
# failure is listed at the end, nothing is left behind
echo "not a video" >"$src/TestVideo/video4.mp4"
vtr-synth --frames 8 --size 64x48 "$src/TestVideo/video5.mp4" || fail "vtr-synth video5"
pipe_make -j2 >"$dir/log" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "a corrupt video: exit 0"
[ -f "$out/features/video5.npy" ] || fail "video5 was not built beside the corrupt video4"
[ ! -e "$out/features/video4.npy" ] || fail "video4.npy exists"
grep -q "store $out/store: 5 items, 10 rows" "$dir/log" ||
    fail "the store was not built from the 5 items that succeeded: $(cat "$dir/log")"
tail -n 3 "$dir/log" | grep -q '^failed items (1; ' || fail "no list at the end: $(cat "$dir/log")"
tail -n 2 "$dir/log" | grep -q "^  video4: vtr-decode: video4: .*video4.mp4: not a video" ||
    fail "video4 not listed: $(cat "$dir/log")"
[ -s "$out/failed/video4.err" ] || fail "no failed/video4.err"
[ -z "$(ls "$out/tmp")" ] && [ -z "$(ls "$out/features" | grep -v '\.npy$' | grep -v '\.json$')" ] ||
    fail "temporary files left"
pipe_make -s failed | grep -q "video4" || fail "make failed"
# an item that built once and then fails takes its old features out of the store
cp "$src/TestVideo/video5.mp4" "$dir/video5.mp4"
echo "not a video either" >"$src/TestVideo/video5.mp4"
pipe_make -j2 >"$dir/log" 2>&1 && fail "a video5 gone bad: exit 0"
[ ! -e "$out/features/video5.npy" ] && grep -q "store $out/store: 4 items, 8 rows" "$dir/log" ||
    fail "the stale features of video5 stayed: $(cat "$dir/log")"
mv "$dir/video5.mp4" "$src/TestVideo/video5.mp4"
# EXCLUDE leaves the corrupt video out: nothing fails
printf '# left out
video4
' >"$dir/exclude.txt"
pipe_make -j2 EXCLUDE="$dir/exclude.txt" >"$dir/log" 2>&1 || fail "EXCLUDE: exit $?: $(cat "$dir/log")"
grep -q "video4" "$dir/log" && fail "EXCLUDE built video4: $(cat "$dir/log")"
grep -q "store $out/store: 5 items, 10 rows" "$dir/log" || fail "EXCLUDE's store: $(cat "$dir/log")"
rm -f "$src/TestVideo/video4.mp4" "$out/failed/video4.err"
# vtr-index's extensions, in either case: an MPEG-TS and an upper-case .MP4 are items
vtr-synth --frames 8 --size 64x48 "$src/TestVideo/video6.ts" &&
    vtr-synth --frames 8 --size 64x48 "$src/TestVideo/video7.MP4" || fail "vtr-synth ts, MP4"
pipe_make -j2 >"$dir/log" 2>&1 || fail "ts, MP4: exit $?: $(cat "$dir/log")"
[ "$(grep '^item' "$dir/log" | sort | tr '\n' ' ')" = "item video6 item video7 " ] ||
    fail "ts, MP4 not built: $(cat "$dir/log")"
rm "$src/TestVideo/video6.ts" "$src/TestVideo/video7.MP4"
pipe_make -j2 >"$dir/log" 2>&1 || fail "after ts, MP4: exit $?: $(cat "$dir/log")"

# 4a. a removed video leaves the store: its features are set aside in OUT/gone/, nothing
# else is rebuilt, and a rerun has nothing to do
mv "$src/TestVideo/video5.mp4" "$dir/video5.mp4"
pipe_make -q store && fail "make -q: up to date after a video was removed"
pipe_make -j2 >"$dir/log" 2>&1 || fail "after a removal: exit $?: $(cat "$dir/log")"
grep -q '^item' "$dir/log" && fail "a removal rebuilt items: $(cat "$dir/log")"
grep -q "^set aside video5: its video is gone (features in $out/gone/)" "$dir/log" ||
    fail "video5 not set aside: $(cat "$dir/log")"
grep -q "store $out/store: 4 items, 8 rows" "$dir/log" || fail "store after a removal: $(cat "$dir/log")"
[ -f "$out/gone/video5.npy" ] && [ -f "$out/gone/video5.json" ] && [ ! -e "$out/features/video5.npy" ] ||
    fail "video5's features not in gone/"
pipe_make -q store || fail "make -q: not up to date after the removal was handled"
# back again: built anew, in the store again
mv "$dir/video5.mp4" "$src/TestVideo/video5.mp4"
pipe_make -j2 >"$dir/log" 2>&1 || fail "after a return: exit $?: $(cat "$dir/log")"
[ "$(grep '^item' "$dir/log")" = "item video5" ] || fail "video5 not rebuilt: $(cat "$dir/log")"
grep -q "store $out/store: 5 items, 10 rows" "$dir/log" || fail "store after a return: $(cat "$dir/log")"

# 4b. a file name with a space stops make at once, with a message that says so
cp "$src/TestVideo/video5.mp4" "$src/TestVideo/my clip.mp4"
pipe_make -n >"$dir/log" 2>&1 && fail "a name with a space: exit 0"
grep -q "a video file name holds a space (make sees a piece of it: '$src/TestVideo/my')" "$dir/log" ||
    fail "a name with a space: $(cat "$dir/log")"
rm "$src/TestVideo/my clip.mp4"

# 4c. hostile names: quotes, backticks and redirections are built as names, never run (a
# name like a`id>X`b.mp4 ran `id`); a name make cannot carry in a target (';', '|') stops
# make at once with a message naming it, before any recipe
rm -f X
cp "$src/TestVideo/video5.mp4" "$src/TestVideo/a\`id>X\`b.mp4"
cp "$src/TestVideo/video5.mp4" "$src/TestVideo/it's&<more>.mp4"
pipe_make -j2 >"$dir/log" 2>&1 || fail "hostile names: exit $?: $(cat "$dir/log")"
[ ! -e X ] && [ ! -e "$out/X" ] || fail "a file name ran a command"
[ -f "$out/features/a\`id>X\`b.npy" ] && [ -f "$out/features/it's&<more>.npy" ] ||
    fail "hostile names: features missing: $(ls "$out/features")"
grep -q "store $out/store: 7 items, 14 rows" "$dir/log" || fail "store with hostile names: $(cat "$dir/log")"
pipe_make -s list-targets | grep -qxF "$out/features/it's&<more>.npy" || fail "list-targets quoting"
rm "$src/TestVideo/a\`id>X\`b.mp4" "$src/TestVideo/it's&<more>.mp4"
for bad in "a;b.mp4" "c'|id>X|'d.mp4"; do
    cp "$src/TestVideo/video5.mp4" "$src/TestVideo/$bad"
    pipe_make -n >"$dir/log" 2>&1 && fail "'$bad': exit 0"
    grep -qF "holds a character make cannot carry in a target" "$dir/log" &&
        grep -qF "$src/TestVideo/$bad" "$dir/log" || fail "'$bad': $(cat "$dir/log")"
    [ ! -e X ] || fail "'$bad' ran a command"
    rm "$src/TestVideo/$bad"
done

# 5. the Slurm helper: 6 targets in 3 tasks; the task scripts build their shares
mkdir "$dir/bin"
cat >"$dir/bin/sbatch" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/sbatch.calls"
echo "\$((4000 + \$(wc -l <"$dir/sbatch.calls")));cluster"
EOF
chmod +x "$dir/bin/sbatch"
rm "$out/features/video0.npy" "$out/features/video3.npy"
PATH=$dir/bin:$PATH sh pipeline/slurm-array.sh -n 3 -d "$dir/slurm" -o --partition=cpu \
    pipeline/msrvtt.mk MSRVTT="$src" OUT="$out" WEIGHTS="$dir/w.safetensors" ARCH=resnet18 \
    "DECODE_FLAGS=--frames 2" "FEATURES_FLAGS=--resize 72 --crop 64 --threads 1" \
    >"$dir/log" 2>&1 || fail "slurm-array.sh: exit $?: $(cat "$dir/log")"
grep -q "5 targets in 3 tasks of up to 2: array job 4001, final job 4002" "$dir/log" ||
    fail "slurm-array.sh said: $(cat "$dir/log")"
[ "$(sed -n 1p "$dir/sbatch.calls")" = "--parsable --array=0-2 --partition=cpu $dir/slurm/task.sh" ] ||
    fail "array submission: $(cat "$dir/sbatch.calls")"
[ "$(sed -n 2p "$dir/sbatch.calls")" = "--parsable --dependency=afterok:4001 --partition=cpu $dir/slurm/final.sh" ] ||
    fail "final submission: $(cat "$dir/sbatch.calls")"
SLURM_ARRAY_TASK_ID=0 sh "$dir/slurm/task.sh" >"$dir/log" 2>&1 || fail "task 0: $(cat "$dir/log")"
[ -f "$out/features/video0.npy" ] && [ ! -f "$out/features/video3.npy" ] ||
    fail "task 0 built other than its share (video0, video1)"
SLURM_ARRAY_TASK_ID=1 sh "$dir/slurm/task.sh" >"$dir/log" 2>&1 || fail "task 1: $(cat "$dir/log")"
[ "$(grep '^item' "$dir/log")" = "item video3" ] || fail "task 1 (video2, video3): $(cat "$dir/log")"
SLURM_ARRAY_TASK_ID=2 sh "$dir/slurm/task.sh" >"$dir/log" 2>&1 || fail "task 2: $(cat "$dir/log")"
grep -q '^item' "$dir/log" && fail "task 2 (video5, built) rebuilt: $(cat "$dir/log")"
sh "$dir/slurm/final.sh" >"$dir/log" 2>&1 || fail "final: $(cat "$dir/log")"
grep -q '^item' "$dir/log" && fail "the final job built items: $(cat "$dir/log")"
grep -q "store $out/store: 5 items, 10 rows" "$dir/log" || fail "final store: $(cat "$dir/log")"
pipe_make -q store || fail "not up to date after the array"
sh pipeline/slurm-array.sh -n 0 pipeline/msrvtt.mk 2>/dev/null && fail "--tasks 0 accepted"
exit 0
