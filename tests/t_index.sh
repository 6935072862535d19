#!/bin/sh
# vtr-index end to end: a small archive made with vtr-synth, random ResNet-18 weights
# (tests/fixtures/make_backbone_fixtures.py), a tiny model trained by vtr-train on random
# 512-d features imported as a precomp dataset. Then: index; rerun = nothing redone; add,
# rewrite, delete and corrupt files -> exactly those redone / dropped / failed (exit 2,
# the reason in the catalog); failed files skipped, --retry-failed retries; unchanged
# embeddings keep their bytes; a run killed with SIGKILL and rerun gives the same content
# as the incremental index; a reader queries the index while vtr-index writes it; another
# model, other settings and a missing --weights are refused; a manifest source; an
# approximate index (vtr-approx) that a run with changes builds again; --decode-ahead 0
# and 1 give the same index as the default; --bf16 one close to it; the extensions taken
# from a directory are those the help, the docs and pipeline/videos.mk list.
set -u
for p in vtr-index vtr-synth vtr-train vtr-import; do
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

# ---- fixtures ------------------------------------------------------------------------
$PY $SCRIPT random-weights resnet18 "$dir/w.safetensors" 1 || fail "random weights"
. tests/fixtures/tiny_model.sh
tiny_model "$dir"

A="$dir/archive"
mkdir -p "$A/sub" "$A/.hidden"
vtr-synth --frames 12 --size 96x64 "$A/a.mp4" &&
    vtr-synth --frames 10 --size 64x64 "$A/b.webm" &&
    vtr-synth --frames 14 --size 80x64 --first-index 3 "$A/sub/c.mp4" &&
    vtr-synth --size 64x48 "$A/d.png" &&
    vtr-synth --frames 6 --size 64x64 "$A/.hidden/h.mp4" || fail "vtr-synth"
echo "not a video, and not listed" >"$A/notes.txt"

IX="vtr-index --model $CK --arch resnet18 --frames 3 --resize 72 --crop 64 --threads 2"

# Live rows of an index, "key hex-bytes" sorted: its content.
dump() {
    $PY - "$1" <<'EOF'
import sqlite3, sys
import numpy as np
d = sys.argv[1]
db = sqlite3.connect("file:%s/index.sqlite?mode=ro" % d, uri=True)
out = []
for sid, rows in db.execute("SELECT id, rows FROM segments ORDER BY id").fetchall():
    m = np.load("%s/seg-%06d.npy" % (d, sid))
    assert m.dtype == np.float16 and m.shape[0] == rows
    for row, key in db.execute("SELECT row, key FROM entries WHERE segment = ? AND live = 1",
                               (sid,)):
        v = m[row].astype(np.float64)
        assert abs(np.linalg.norm(v) - 1) < 2e-3, (key, np.linalg.norm(v))
        out.append(key + " " + m[row].tobytes().hex())
print("\n".join(sorted(out)))
EOF
}
# "key status" (and "error" when failed) of the archive's catalog items, sorted.
catalog() {
    $PY - "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect("file:%s/catalog.sqlite?mode=ro" % sys.argv[1], uri=True)
for key, status, err, size, mtime, dur, path in db.execute(
        "SELECT key, status, error, size_bytes, mtime_ns, duration_s, path FROM items "
        "ORDER BY key"):
    assert size > 0 and mtime > 0 and path.startswith("/"), (key, size, mtime, path)
    assert (status == "failed") == (err is not None), (key, status, err)
    print(key, status, "duration" if dur is not None else "-", err if err else "")
EOF
}
generation() {
    $PY -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT generation FROM meta").fetchone()[0])' \
        "$1/index.sqlite"
}
# signal_when DB PID SIGNAL SQL: sends SIGNAL (a name: KILL, INT) to the vtr-index PID the
# moment SQL on the SQLite file DB returns a row, polled from one process every 10 ms (a
# small archive is indexed in well under a second); exit 1 if PID ends first
signal_when() {
    $PY - "$@" <<'EOF'
import os, signal, sqlite3, sys, time
db_path, pid, sig, sql = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def running():  # not yet waited for, an ended vtr-index is a zombie
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while running():
    try:
        db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
        row = db.execute(sql).fetchone()
        db.close()
        if row:
            os.kill(pid, getattr(signal, "SIG" + sig))
            sys.exit(0)
    except sqlite3.OperationalError:
        pass
    time.sleep(0.01)
sys.exit(1)
EOF
}

# ---- usage ---------------------------------------------------------------------------
vtr-index --help | grep -q 'retry-failed' || fail "--help"
vtr-index --version | grep -q '^vtr-index ' || fail "--version"
vtr-index "$A" --index "$dir/ix" 2>"$dir/err"
[ $? -eq 1 ] && grep -q -- '--model' "$dir/err" || fail "no --model: $(cat "$dir/err")"
vtr-index "$A" --model "$CK" --index "$dir/ix" --frames 0 2>"$dir/err"
[ $? -eq 1 ] && grep -q -- '--frames' "$dir/err" || fail "--frames 0 accepted"
$IX "$A" --index "$dir/ix" 2>"$dir/err"
[ $? -eq 1 ] && grep -q -- 'name the backbone weights (--weights FILE)' "$dir/err" ||
    fail "a new index without --weights: $(cat "$dir/err")"
[ -e "$dir/ix/index.sqlite" ] && fail "a refused run created the index"
$IX "$dir/nowhere" --weights "$dir/w.safetensors" --index "$dir/ix" 2>"$dir/err"
[ $? -eq 1 ] && grep -q 'nowhere' "$dir/err" || fail "a missing source: $(cat "$dir/err")"
# --device: a bad name; a GPU where none is (or without CUDA): one line that says what to
# do, exit 1, no index left behind
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/ix" --device tpu 2>"$dir/err"
[ $? -eq 1 ] && grep -q -- "--device is cpu, cuda or cuda:N (got 'tpu')" "$dir/err" ||
    fail "--device tpu: $(cat "$dir/err")"
if ! nvidia-smi -L >/dev/null 2>&1; then
    $IX "$A" --weights "$dir/w.safetensors" --index "$dir/ix" --device cuda:2 2>"$dir/err"
    [ $? -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q 'run on the CPU (--device cpu)' "$dir/err" ||
        fail "--device cuda:2 without a GPU: $(cat "$dir/err")"
    [ -e "$dir/ix/index.sqlite" ] && fail "a run refused by the GPU left the index"
fi

# ---- 1. first run: every media file, hidden ones and other extensions left out --------
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/ix" 2>"$dir/err1" ||
    fail "first run: exit $? $(cat "$dir/err1")"
grep -q '4 added, 0 updated, 0 removed, 0 failed, 0 unchanged' "$dir/err1" ||
    fail "first run summary: $(cat "$dir/err1")"
dump "$dir/ix" >"$dir/d1" || fail "dump 1"
[ "$(cut -d' ' -f1 "$dir/d1" | tr '\n' ' ')" = "a.mp4 b.webm d.png sub/c.mp4 " ] ||
    fail "keys: $(cut -d' ' -f1 "$dir/d1")"
catalog "$dir/ix" >"$dir/c1" || fail "catalog 1"
[ "$(grep -c ' ok duration $' "$dir/c1")" -eq 4 ] ||
    fail "catalog after the first run: $(cat "$dir/c1")"
# a photo's duration is 0 (lib/catalog.h), a video's its stream's; vtr-search says "image"
$PY - "$dir/ix" <<'EOF' || fail "durations"
import sqlite3, sys
db = sqlite3.connect("file:%s/catalog.sqlite?mode=ro" % sys.argv[1], uri=True)
d = dict(db.execute("SELECT key, duration_s FROM items"))
assert d["d.png"] == 0 and all(v > 0 for k, v in d.items() if k != "d.png"), d
EOF
# decoding ahead (the default, 2 files) or each file in its turn: the same index
for ahead in 0 1; do
    $IX "$A" --weights "$dir/w.safetensors" --index "$dir/ix-ahead$ahead" --decode-ahead $ahead \
        2>"$dir/err" || fail "--decode-ahead $ahead: exit $? $(cat "$dir/err")"
    dump "$dir/ix-ahead$ahead" >"$dir/d-ahead" && catalog "$dir/ix-ahead$ahead" >"$dir/c-ahead" ||
        fail "dump --decode-ahead $ahead"
    cmp -s "$dir/d1" "$dir/d-ahead" && cmp -s "$dir/c1" "$dir/c-ahead" ||
        fail "--decode-ahead $ahead gave another index"
    rm -rf "$dir/ix-ahead$ahead"
done
vtr-index "$A" --model "$CK" --index "$dir/ix-x" --decode-ahead -1 2>"$dir/err"
[ $? -eq 1 ] && grep -q -- '--decode-ahead' "$dir/err" || fail "--decode-ahead -1 accepted"
# --bf16: the backbone in bfloat16 where the CPU has it (embeddings within a cosine of
# 0.99 of float32's, after the model), else one warning line and the float32 index
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/ix-bf16" --bf16 2>"$dir/err" ||
    fail "--bf16: exit $? $(cat "$dir/err")"
dump "$dir/ix-bf16" >"$dir/d-bf16" || fail "dump --bf16"
case $(vtr-index --version | sed -n 3p) in
*"ISA avx512_core_bf16"* | *"ISA avx512_core_amx"*)
    grep -q 'warning' "$dir/err" && fail "--bf16 warned: $(cat "$dir/err")"
    $PY - "$dir/d1" "$dir/d-bf16" <<'EOF' || fail "--bf16 embeddings"
import sys
import numpy as np
rows = [dict(l.split() for l in open(p)) for p in sys.argv[1:3]]
assert rows[0].keys() == rows[1].keys(), (rows[0].keys(), rows[1].keys())
for k in rows[0]:
    a, b = (np.frombuffer(bytes.fromhex(r[k]), np.float16).astype(np.float64) for r in rows)
    cos = a @ b / np.sqrt((a @ a) * (b @ b))
    assert cos > 0.99, (k, cos)
assert any(rows[0][k] != rows[1][k] for k in rows[0]), "bfloat16 gave float32's bytes"
EOF
    ;;
*)
    grep -q '^vtr-index: warning: --bf16: .*; running float32$' "$dir/err" ||
        fail "--bf16 on a CPU without bfloat16: $(cat "$dir/err")"
    cmp -s "$dir/d1" "$dir/d-bf16" || fail "--bf16 fell back, yet another index"
    ;;
esac
rm -rf "$dir/ix-bf16"
if command -v vtr-search >/dev/null 2>&1; then
    vtr-search "a video of a cat" --index "$dir/ix" --model "$CK" -k 4 >"$dir/search" 2>"$dir/err" &&
        vtr-search "a video of a cat" --index "$dir/ix" --model "$CK" -k 4 --json >"$dir/search.json" 2>>"$dir/err" ||
        fail "vtr-search: $(cat "$dir/err")"
    grep -q " image  .*/d\.png$" "$dir/search" && [ "$(grep -c ' image  ' "$dir/search")" -eq 1 ] ||
        fail "the photo in the table: $(cat "$dir/search")"
    $PY -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]; assert sorted((x["key"], x["image"]) for x in r) == [("a.mp4", False), ("b.webm", False), ("d.png", True), ("sub/c.mp4", False)], r' \
        "$dir/search.json" || fail "the photo in --json: $(cat "$dir/search.json")"
fi
# vtr-inspect describes the index
if command -v vtr-inspect >/dev/null 2>&1; then
    vtr-inspect "$dir/ix" | grep -q "^$dir/ix: embedding index, 4 rows (4 live) in [0-9]* segments, dimension 16, generation [0-9]*, model " ||
        fail "vtr-inspect of the index: $(vtr-inspect "$dir/ix" 2>&1)"
fi
g1=$(generation "$dir/ix")

# ---- 2. rerun: nothing redone, nothing published ---------------------------------------
$IX "$A" --index "$dir/ix" 2>"$dir/err2" || fail "rerun: exit $? $(cat "$dir/err2")"
grep -q '0 added, 0 updated, 0 removed, 0 failed, 4 unchanged' "$dir/err2" ||
    fail "rerun summary: $(cat "$dir/err2")"
[ "$(generation "$dir/ix")" = "$g1" ] || fail "a rerun without changes made a generation"
dump "$dir/ix" | cmp -s - "$dir/d1" || fail "a rerun changed the index"

# an approximate index (vtr-approx), which the next run keeps up to date
if command -v vtr-approx >/dev/null 2>&1; then
    vtr-approx --index "$dir/ix" --kind hnsw --recall 0 2>"$dir/err" ||
        fail "vtr-approx: $(cat "$dir/err")"
fi

# ---- 3. add, rewrite, delete, corrupt ---------------------------------------------------
vtr-synth --frames 8 --size 64x64 --first-index 20 "$A/e.mp4" || fail "vtr-synth e"
sleep 0.01
vtr-synth --frames 16 --size 64x64 --first-index 40 "$A/b.webm" || fail "rewrite b"
rm "$A/sub/c.mp4"
head -c 3000 /dev/urandom >"$A/bad.mp4"
$IX "$A" --index "$dir/ix" 2>"$dir/err3"
rc=$?
[ $rc -eq 2 ] || fail "a failed file: exit $rc, not 2: $(cat "$dir/err3")"
grep -q '1 added, 1 updated, 1 removed, 1 failed, 2 unchanged' "$dir/err3" ||
    fail "changes summary: $(cat "$dir/err3")"
if command -v vtr-approx >/dev/null 2>&1; then
    # two of its four rows replaced or removed: built again over the live ones
    grep -q '; approximate index rebuilt$' "$dir/err3" || fail "approximate index: $(cat "$dir/err3")"
    vtr-approx --index "$dir/ix" --update --recall 0 2>"$dir/err" &&
        grep -q "up to date (.*): HNSW over 4 rows of generation $(generation "$dir/ix")," "$dir/err" ||
        fail "vtr-approx --update after vtr-index: $(cat "$dir/err")"
fi
[ "$(grep -c 'bad\.mp4' "$dir/err3")" -eq 1 ] && grep -q '^vtr-index: bad\.mp4: .' "$dir/err3" ||
    fail "one error line naming bad.mp4: $(cat "$dir/err3")"
dump "$dir/ix" >"$dir/d3" || fail "dump 3"
[ "$(cut -d' ' -f1 "$dir/d3" | tr '\n' ' ')" = "a.mp4 b.webm d.png e.mp4 " ] ||
    fail "keys after the changes: $(cut -d' ' -f1 "$dir/d3")"
for k in a.mp4 d.png; do
    [ "$(grep "^$k " "$dir/d1")" = "$(grep "^$k " "$dir/d3")" ] || fail "$k: bytes changed"
done
[ "$(grep '^b.webm ' "$dir/d1")" != "$(grep '^b.webm ' "$dir/d3")" ] ||
    fail "b.webm was rewritten but its embedding is the old one"
catalog "$dir/ix" >"$dir/c3" || fail "catalog 3"
grep -q '^bad.mp4 failed .* .' "$dir/c3" || fail "no failure recorded: $(cat "$dir/c3")"
grep -q '^sub/c.mp4' "$dir/c3" && fail "the deleted file is still in the catalog"
[ "$(wc -l <"$dir/c3")" -eq 5 ] || fail "catalog: $(cat "$dir/c3")"

# ---- 4. the failed file is skipped, then retried ----------------------------------------
$IX "$A" --index "$dir/ix" 2>"$dir/err4" || fail "skip run: exit $? $(cat "$dir/err4")"
grep -q '0 failed, 4 unchanged, 1 skipped (failed before)' "$dir/err4" ||
    fail "skip summary: $(cat "$dir/err4")"
grep -q 'bad\.mp4' "$dir/err4" && fail "the failed file was tried again"
$IX "$A" --index "$dir/ix" --retry-failed 2>"$dir/err5"
[ $? -eq 2 ] && grep -q '0 added, 0 updated, 0 removed, 1 failed, 4 unchanged' "$dir/err5" &&
    grep -q '^vtr-index: bad\.mp4: ' "$dir/err5" || fail "--retry-failed: $(cat "$dir/err5")"
dump "$dir/ix" | cmp -s - "$dir/d3" || fail "the retry changed the index"

# ---- 5. refusals: another model, other settings ------------------------------------------
$IX "$A" --index "$dir/ix" --model "$dir/run/best.safetensors" 2>"$dir/err"
[ $? -eq 1 ] && grep -q 'built with another model' "$dir/err" &&
    grep -q 'use a new --index directory' "$dir/err" || fail "another model: $(cat "$dir/err")"
$IX "$A" --index "$dir/ix" --frames 5 2>"$dir/err"
[ $? -eq 1 ] && grep -q 'another sampling' "$dir/err" || fail "--frames 5: $(cat "$dir/err")"
dump "$dir/ix" | cmp -s - "$dir/d3" || fail "a refused run changed the index"

# ---- 6. killed in the middle, rerun: the same content -----------------------------------
for i in 1 2 3 4 5 6; do
    vtr-synth --frames 9 --size 64x64 --first-index $((i * 7)) "$A/more$i.mp4" || fail "more$i"
done
$IX "$A" --index "$dir/ix" 2>"$dir/err6"
[ $? -eq 0 ] && grep -q '6 added, 0 updated, 0 removed, 0 failed, 4 unchanged, 1 skipped' "$dir/err6" ||
    fail "more files: $(cat "$dir/err6")"
dump "$dir/ix" >"$dir/d6"
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/ik" --commit-every 1 2>/dev/null &
pid=$!
signal_when "$dir/ik/index.sqlite" $pid KILL "SELECT 1 FROM meta WHERE generation >= 2" ||
    fail "vtr-index finished before it could be killed"
wait $pid 2>/dev/null
killed_at=$(generation "$dir/ik")
[ "$(dump "$dir/ik" | wc -l)" -lt 10 ] || fail "the killed run had finished"
# the file the kill interrupted counts as one that killed the run (section 10):
# --retry-failed redoes it (and bad.mp4, which fails again)
$IX "$A" --index "$dir/ik" --retry-failed 2>"$dir/err7"
rc=$?
[ $rc -eq 2 ] || fail "rerun after the kill: exit $rc $(cat "$dir/err7")"
dump "$dir/ik" | cmp -s - "$dir/d6" ||
    fail "killed (at generation $killed_at) and rerun: not the content of the incremental index"
ls "$dir/ik" | grep -q '\.tmp' && fail "temporary files left after the rerun"

# ---- 6a. stopped with SIGINT (Ctrl-C): the work done is committed, exit 2, no file is
# marked as one that killed the run; a plain rerun finishes with the same content
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/iint" --commit-every 1 2>"$dir/err6a" &
pid=$!
signal_when "$dir/iint/index.sqlite" $pid INT "SELECT 1 FROM meta WHERE generation >= 2" ||
    fail "vtr-index finished before SIGINT"
wait $pid
rc=$?
[ $rc -eq 2 ] && grep -q 'stopped by a signal; the work done is committed' "$dir/err6a" ||
    fail "SIGINT: exit $rc: $(cat "$dir/err6a")"
[ "$(dump "$dir/iint" | wc -l)" -lt 10 ] || fail "the interrupted run had finished"
$IX "$A" --index "$dir/iint" 2>"$dir/err6b"
! grep -q 'stopped while processing' "$dir/err6b" ||
    fail "rerun after SIGINT: a file was marked as one that killed the run: $(cat "$dir/err6b")"
dump "$dir/iint" | cmp -s - "$dir/d6" || fail "stopped by SIGINT and rerun: not the same content"

# ---- 7. a reader queries while vtr-index writes -------------------------------------------
$IX "$A" --weights "$dir/w.safetensors" --index "$dir/ir" --commit-every 1 2>/dev/null &
pid=$!
$PY - "$dir/ir" $pid <<'EOF' || fail "reader during the run"
import os, sqlite3, sys, time
import numpy as np
d, pid = sys.argv[1], int(sys.argv[2])
queries = 0
q = np.random.default_rng(0).standard_normal(16).astype(np.float32)
t0 = time.time()
while time.time() - t0 < 120:
    try:  # the writer may exit between any two of these calls
        alive = open("/proc/%d/stat" % pid).read().split()[2] != "Z"
    except OSError:
        alive = False
    if not alive:
        break
    if os.path.exists(d + "/index.sqlite"):
        try:
            db = sqlite3.connect("file:%s/index.sqlite?mode=ro" % d, uri=True)
            db.execute("BEGIN")
            segs = db.execute("SELECT id, rows FROM segments ORDER BY id").fetchall()
            live = db.execute("SELECT segment, row, key FROM entries WHERE live = 1").fetchall()
            mats = {s: np.load("%s/seg-%06d.npy" % (d, s), mmap_mode="r") for s, _ in segs}
            db.execute("COMMIT")
            db.close()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                continue
            raise
        except FileNotFoundError:
            # a compaction deleted a listed segment before it was mapped: retry on the
            # newer snapshot, as vtr's reader does (docs/index.md)
            continue
        if live:
            scores = [(float(mats[s][r].astype(np.float32) @ q), k) for s, r, k in live]
            best = max(scores)
            assert np.isfinite(best[0]), best
            queries += 1
    time.sleep(0.02)
assert queries >= 2, "only %d queries saw rows while vtr-index ran" % queries
print("reader: %d queries during the run" % queries)
EOF
wait $pid
[ $? -eq 2 ] || fail "the run under the reader"
dump "$dir/ir" | cmp -s - "$dir/d6" || fail "the run under the reader: other content"
if command -v vtr-search >/dev/null 2>&1; then
    vtr-search "a video of a cat" --index "$dir/ir" --model "$CK" -k 3 >"$dir/search" 2>"$dir/err" ||
        fail "vtr-search: $(cat "$dir/err")"
fi

# ---- 8. a manifest -------------------------------------------------------------------------
printf '# two files\n%s\n\n%s\n%s\n%s\n' "$A/a.mp4" "$A/e.mp4" "$A/a.mp4" "$dir/ghost.mp4" \
    >"$dir/list.txt"
$IX "$dir/list.txt" --weights "$dir/w.safetensors" --index "$dir/im" 2>"$dir/err"
[ $? -eq 2 ] && grep -q "^vtr-index: $dir/ghost.mp4: " "$dir/err" ||
    fail "manifest with a missing file: $(cat "$dir/err")"
$IX "$dir/list.txt" --index "$dir/im" 2>"$dir/err" || fail "manifest rerun: $(cat "$dir/err")"
grep -q '0 failed, 2 unchanged, 1 skipped' "$dir/err" || fail "manifest rerun: $(cat "$dir/err")"
# the recorded weights moved: one line naming them; --weights with the same bytes is fine
# and recorded, so that the next run finds them without it
mv "$dir/w.safetensors" "$dir/w-moved.safetensors"
$IX "$dir/list.txt" --index "$dir/im" 2>"$dir/err"
[ $? -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "index $dir/im: its backbone weights (name them with --weights if they moved): $dir/w.safetensors: " "$dir/err" ||
    fail "moved weights: $(cat "$dir/err")"
$IX "$dir/list.txt" --index "$dir/im" --weights "$dir/w-moved.safetensors" 2>"$dir/err" ||
    fail "moved weights, --weights: $(cat "$dir/err")"
$IX "$dir/list.txt" --index "$dir/im" 2>"$dir/err" ||
    fail "moved weights, recorded: $(cat "$dir/err")"
mv "$dir/w-moved.safetensors" "$dir/w.safetensors"
# the model moved: vtr-index with it at its new place records that, and vtr-search finds it
if command -v vtr-search >/dev/null 2>&1; then
    mv "$dir/run" "$dir/run-moved"
    vtr-index "$dir/list.txt" --index "$dir/im" --model "$dir/run-moved/last.safetensors" \
        --weights "$dir/w.safetensors" 2>"$dir/err" || fail "moved model: $(cat "$dir/err")"
    vtr-search "a video of a cat" --index "$dir/im" -k 1 >/dev/null 2>"$dir/err" ||
        fail "vtr-search after the model moved: $(cat "$dir/err")"
    mv "$dir/run-moved" "$dir/run"
fi
dump "$dir/im" >"$dir/dm"
[ "$(wc -l <"$dir/dm")" -eq 2 ] && grep -q "^$A/a.mp4 " "$dir/dm" || fail "manifest keys: $(cut -d' ' -f1 "$dir/dm")"
[ "$(grep "^$A/a.mp4 " "$dir/dm" | cut -d' ' -f2)" = "$(grep '^a.mp4 ' "$dir/d6" | cut -d' ' -f2)" ] ||
    fail "the same file through a manifest: other bytes"
# the same weights as a torch.save .pth, without --arch (the weights tell it): the same
# embeddings
if $PY -c 'import torch, torchvision' 2>/dev/null; then
    $PY $SCRIPT random-weights resnet18 "$dir/w.pth" 1 || fail "random weights as .pth"
    vtr-index "$dir/list.txt" --model "$CK" --frames 3 --resize 72 --crop 64 --threads 2 \
        --weights "$dir/w.pth" --index "$dir/ipth" 2>"$dir/err"
    [ $? -eq 2 ] || fail "index from .pth: $(cat "$dir/err")"
    dump "$dir/ipth" | cmp -s - "$dir/dm" || fail "index from .pth: other embeddings"
else
    echo "skipped the .pth index: $PY cannot import torch and torchvision"
fi
# a KEY<TAB>PATH line: PATH indexed under KEY; the catalog records the path (absolute)
printf '# keyed\r\nclips/first\t%s\r\n' "$A/a.mp4" >"$dir/keyed.txt"
$IX "$dir/keyed.txt" --weights "$dir/w.safetensors" --index "$dir/ik" 2>"$dir/err" ||
    fail "keyed manifest: $(cat "$dir/err")"
dump "$dir/ik" >"$dir/dk"
[ "$(cut -d' ' -f1 "$dir/dk")" = "clips/first" ] &&
    [ "$(cut -d' ' -f2 "$dir/dk")" = "$(grep '^a.mp4 ' "$dir/d6" | cut -d' ' -f2)" ] ||
    fail "keyed manifest: $(cat "$dir/dk")"
[ "$(catalog "$dir/ik")" = "clips/first ok duration " ] &&
    $PY -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1] + "/ik/catalog.sqlite")
assert [p for (p,) in db.execute("SELECT path FROM items")] == [sys.argv[2]]' \
        "$dir" "$(cd "$A" && pwd -P)/a.mp4" || fail "keyed manifest catalog: $(catalog "$dir/ik")"
# a FIFO in a manifest fails alone, at once (opening it would wait for a writer for ever)
mkfifo "$dir/pipe.mp4" || fail "mkfifo"
printf '%s\n%s\n' "$dir/pipe.mp4" "$A/a.mp4" >"$dir/fifo.txt"
timeout 120 $IX "$dir/fifo.txt" --weights "$dir/w.safetensors" --index "$dir/if" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && grep -q "^vtr-index: $dir/pipe.mp4: not a regular file (a FIFO)\$" "$dir/err" &&
    grep -q '1 added, 0 updated, 0 removed, 1 failed' "$dir/err" ||
    fail "a FIFO in a manifest: exit $rc: $(cat "$dir/err")"
[ "$(dump "$dir/if" | cut -d' ' -f1)" = "$A/a.mp4" ] || fail "a FIFO in a manifest: the good file"
# ---- 9. the archive moved: nothing redone, the catalog's paths follow ----------------------
mv "$A" "$dir/moved"
$IX "$dir/moved" --index "$dir/ix" 2>"$dir/err" || fail "moved archive: $(cat "$dir/err")"
grep -q '0 added, 0 updated, 0 removed, 0 failed, 10 unchanged, 1 skipped' "$dir/err" ||
    fail "moved archive summary: $(cat "$dir/err")"
$PY -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1] + "/ix/catalog.sqlite")
paths = [p for (p,) in db.execute("SELECT path FROM items")]
assert len(paths) == 11 and all(p.startswith(sys.argv[1] + "/moved/") for p in paths), paths' \
    "$(cd "$dir" && pwd -P)" || fail "catalog paths after the move"
dump "$dir/ix" | cmp -s - "$dir/d6" || fail "the move changed the index"

# ---- 10. a file that kills vtr-index (issue 16: FFmpeg aborted on a damaged file, and every
# rerun died on it again): the catalog marks a file before its decoding, so the run after
# the death records it failed, with the reason, and indexes the rest ------------------------
vtr-synth --frames 1500 --gop 1500 --size 320x240 "$dir/slow.mp4" || fail "slow.mp4"
printf 'a\t%s\nz\t%s\n' "$dir/moved/a.mp4" "$dir/slow.mp4" >"$dir/crash.txt"
$IX "$dir/crash.txt" --weights "$dir/w.safetensors" --index "$dir/ic" 2>/dev/null &
pid=$!
# stand-in for a crash: SIGKILL once z is marked in progress, while it is decoded
signal_when "$dir/ic/catalog.sqlite" $pid KILL "SELECT 1 FROM items WHERE key = 'z' AND
    status = 'pending' AND error LIKE '%stopped while processing%'" ||
    fail "z was never marked in progress"
wait $pid 2>/dev/null
$IX "$dir/crash.txt" --index "$dir/ic" 2>"$dir/err10"
rc=$?
[ $rc -eq 2 ] || fail "rerun after the death: exit $rc $(cat "$dir/err10")"
grep -q "^vtr-index: z: .*slow.mp4: vtr-index stopped while processing this file" "$dir/err10" ||
    fail "rerun after the death: $(cat "$dir/err10")"
catalog "$dir/ic" | grep -q '^a ok ' || fail "a after the death: $(catalog "$dir/ic")"
catalog "$dir/ic" | grep -q '^z failed .*stopped while processing' ||
    fail "z after the death: $(catalog "$dir/ic")"
$IX "$dir/crash.txt" --index "$dir/ic" 2>"$dir/err11" || fail "third run: $(cat "$dir/err11")"
grep -q '0 added, 0 updated, 0 removed, 0 failed, 1 unchanged, 1 skipped' "$dir/err11" ||
    fail "third run: $(cat "$dir/err11")"

# ---- 11. the extensions: vtr-index --help, docs/indexing.md and pipeline/videos.mk list the
# same, and a directory walk takes each in lower and upper case (empty files: each fails) ---
words() { tr -s ' \n' '\n\n' | grep -v '^$'; }
exts=$(sed -n '/^VIDEO_EXTS ?=/,/[^\\]$/p' pipeline/videos.mk | sed 's/^VIDEO_EXTS ?=//; s/\\$//' |
    words)
[ "$(echo "$exts" | wc -l)" -gt 30 ] || fail "VIDEO_EXTS of videos.mk: $exts"
help=$(vtr-index --help | sed -n '/by extension:/,/skipped/p' | tr '\n' ' ' |
    sed 's/.*by extension://; s/;.*//' | words)
[ "$help" = "$exts" ] || fail "vtr-index --help's extensions differ from videos.mk's"
doc=$(sed -n '/with a video or image extension/,/any case/p' docs/indexing.md | tr '\n' ' ' |
    sed 's/[^`]*`//; s/`.*//' | words)
[ "$doc" = "$exts" ] || fail "docs/indexing.md's extensions differ from videos.mk's"
mkdir "$dir/exts"
for e in $exts; do
    : >"$dir/exts/x.$e"
    : >"$dir/exts/Y.$(echo "$e" | tr a-z A-Z)"
done
: >"$dir/exts/x.txt"
$IX "$dir/exts" --weights "$dir/w.safetensors" --index "$dir/iext" 2>"$dir/err12"
rc=$?
n=$(echo "$exts" | wc -l)
[ $rc -eq 2 ] && grep -q "0 added, 0 updated, 0 removed, $((2 * n)) failed" "$dir/err12" &&
    [ "$(grep -c ': empty file$' "$dir/err12")" -eq $((2 * n)) ] ||
    fail "one empty file per extension: exit $rc: $(tail -3 "$dir/err12")"
echo "ok"
