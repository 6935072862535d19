#!/bin/sh
# Data-parallel training under mpirun (match/trainer.h, lib/dist.h) on one machine:
# lib/dist.h's collectives on 2, 3 and 4 ranks; one rank at batch 8 and 2 and 4 ranks
# (4 and 2 pairs each) train the same model (losses and weights, VSE∞ with BatchNorm, 200
# steps; set embeddings and HGR, with dropout); the same N twice gives the same bytes;
# validation split across the ranks gives one process's metrics; only rank 0 writes, and
# the catalog records the ranks; a run stopped on 2 ranks resumes on 2 (the
# same bytes as uninterrupted), 4 and 1; a killed rank ends the job within seconds and
# the run resumes from its last checkpoint; bad input (batch not divisible, configs that
# differ between ranks, a config that one rank cannot read) fails with one line from rank 0
# and leaves no run behind.
set -u
. tests/mpi.sh
for p in vtr-train vtr-import; do
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

# ---- lib/dist.h ------------------------------------------------------------------------
for n in 2 3 4; do
    $MPIRUN -np $n build/tests/unit-tests dist_ >"$dir/out" 2>&1 || fail "dist on $n ranks: $(cat "$dir/out")"
    [ "$(grep -c '^ok   test_dist.c:dist_collectives' "$dir/out")" -eq $n ] ||
        fail "dist on $n ranks: $(cat "$dir/out")"
done

# ---- data: 32 items of 3 random 64-d frames, 5 captions each ---------------------------
. tests/train_runs.sh
# VSE∞ with the region branch's MLP (BatchNorm over the global batch): 20 steps an epoch
precomp_run "epochs: 10, batch_size: 8, checkpoint_every: 5"
train() { # RANKS OUT [vtr-train arguments]
    n=$1 out=$2
    shift 2
    $MPIRUN -np "$n" vtr-train "$dir/cfg.yaml" -o "$dir/$out" --threads 1 "$@" \
        >"$dir/$out.log" 2>&1 || fail "$n ranks, $out: $(cat "$dir/$out.log")"
}

# ---- the same model on 1, 2 and 4 ranks -------------------------------------------------
train 1 r1
train 2 r2
train 4 r4
for n in 2 4; do
    same_losses "$dir/r1/metrics.jsonl" "$dir/r$n/metrics.jsonl"
    echo "1 vs $n ranks, weights after 200 steps: $(close "$dir/r1/last.safetensors" "$dir/r$n/last.safetensors" 0.02)"
done
grep -q "data parallel: 4 ranks, 2 pairs each per batch of 8" "$dir/r4.log" || fail "no rank line: $(cat "$dir/r4.log")"
[ "$(grep -c 'finished 10 epochs' "$dir/r4.log")" -eq 1 ] || fail "ranks other than 0 talk: $(cat "$dir/r4.log")"
# the same N again: the same bytes (a fixed reduction order)
train 2 r2again
[ "$($PY "$dir/compare.py" "$dir/r2/last.safetensors" "$dir/r2again/last.safetensors")" = same ] ||
    fail "two 2-rank runs differ"
# the catalog records every run once, with its ranks
$PY - "$dir/train.db" <<'EOF' || fail "catalog records"
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT result FROM runs WHERE kind = 'train' ORDER BY id").fetchall()
ranks = [json.loads(r[0])["ranks"] for r in rows]
assert ranks == [1, 2, 4, 2], ranks
EOF

# set embeddings (dropout in the set modules drawn per pair, whatever rank holds it)
S="--set model.set_size=2 --set model.set_attention_dim=16 --set model.set_iterations=2 --set train.epochs=3"
train 1 k1 $S
train 2 k2 $S
same_losses "$dir/k1/metrics.jsonl" "$dir/k2/metrics.jsonl"
echo "set embeddings, 1 vs 2 ranks: $(close "$dir/k1/last.safetensors" "$dir/k2/last.safetensors" 0.01)"

# HGR (dropout on frames, words and the role graph's GCN; the fused score over the gathered
# encodings) on the release-layout fixture of tests/interop/import_fixtures.py: 7 training
# captions, batches of 4 and a rest of 3 (20 epochs, 40 steps)
$PY -c 'import h5py' 2>/dev/null || { echo "$PY without h5py: HGR not tested"; exit 1; }
hgr_import
hgr_train 1 h1 --set train.epochs=20
hgr_train 2 h2 --set train.epochs=20
same_losses "$dir/h1/metrics.jsonl" "$dir/h2/metrics.jsonl"
echo "HGR, 1 vs 2 ranks: $(close "$dir/h1/last.safetensors" "$dir/h2/last.safetensors" 0.01)"

# ---- validation split across the ranks: the same metrics as one process ------------------
# (a learning rate too small to move a weight: the same model on any N; no BatchNorm,
# whose running statistics would differ in their last bits; validation batches of 3, so
# that 1, 2 and 3 ranks split the 8 items and 40 captions differently)
val_json() {
    $PY -c 'import json, sys; [print(json.dumps(json.loads(l)["val"], sort_keys=True)) for l in open(sys.argv[1])]' "$1"
}
for n in 1 2 3; do
    train $n v$n --set train.epochs=2 --set train.lr=1e-30 --set model.mlp_hidden=0 \
        --set train.batch_size=6 --set val.batch_size=3
    val_json "$dir/v$n/metrics.jsonl" >"$dir/v$n.val"
done
cmp -s "$dir/v1.val" "$dir/v2.val" && cmp -s "$dir/v1.val" "$dir/v3.val" ||
    fail "validation on 1, 2, 3 ranks differs: $(cat "$dir/v1.val" "$dir/v2.val" "$dir/v3.val")"
for n in 1 2; do
    hgr_train $n hv$n --set train.epochs=1 --set train.lr=1e-30 --set val.batch_size=1 \
        --set data.val_split=test
    val_json "$dir/hv$n/metrics.jsonl" >"$dir/hv$n.val"
done
cmp -s "$dir/hv1.val" "$dir/hv2.val" || fail "HGR validation on 1 and 2 ranks differs"

# ---- resume on the same and on another N -------------------------------------------------
train 2 s --max-steps 70
cp -r "$dir/s" "$dir/s4"
cp -r "$dir/s" "$dir/s1"
$MPIRUN -np 2 vtr-train --resume "$dir/s" --threads 1 >"$dir/log" 2>&1 || fail "resume: $(cat "$dir/log")"
[ "$($PY "$dir/compare.py" "$dir/s/last.safetensors" "$dir/r2/last.safetensors")" = same ] ||
    fail "a 2-rank run resumed on 2 ranks differs from the uninterrupted one"
$MPIRUN -np 4 vtr-train --resume "$dir/s4" --threads 1 >"$dir/log" 2>&1 || fail "resume on 4: $(cat "$dir/log")"
vtr-train --resume "$dir/s1" --threads 1 >"$dir/log" 2>&1 || fail "resume on 1: $(cat "$dir/log")"
for n in 4 1; do
    echo "stopped on 2 ranks, resumed on $n: $(close "$dir/s$n/last.safetensors" "$dir/r2/last.safetensors" 0.02)"
done

# ---- a killed rank ends the job; the run resumes from its last checkpoint -----------------
($MPIRUN -np 2 vtr-train "$dir/cfg.yaml" -o "$dir/k" --threads 1 --set train.epochs=1000 \
    >"$dir/k.log" 2>&1; echo $? >"$dir/k.rc") &
i=0
while [ ! -f "$dir/k/last.safetensors" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$dir/k/last.safetensors" ] || fail "no checkpoint: $(cat "$dir/k.log")"
victim=$(pgrep -f "^vtr-train $dir/cfg.yaml -o $dir/k " | tail -n 1)
[ -n "$victim" ] || fail "no rank process found"
kill -9 "$victim"
i=0
while [ ! -f "$dir/k.rc" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$dir/k.rc" ] || fail "the job did not end within 15 s of a killed rank"
echo "a killed rank ended the job after $((i / 10)).$((i % 10)) s"
[ "$(cat "$dir/k.rc")" -ne 0 ] || fail "the job of a killed rank exited 0"
grep -q "exited on signal 9" "$dir/k.log" || fail "mpirun did not name the killed rank: $(cat "$dir/k.log")"
# (--max-steps 1: the checkpoint's state loads; it has taken more steps, so it stays there)
vtr-train --resume "$dir/k" --threads 1 --max-steps 1 >"$dir/log" 2>&1 ||
    fail "resume after the kill: $(cat "$dir/log")"
grep -q "resuming at epoch" "$dir/log" || fail "no resume after the kill: $(cat "$dir/log")"

# ---- bad input: one line from rank 0, nothing left behind ----------------------------------
$MPIRUN -np 3 vtr-train "$dir/cfg.yaml" -o "$dir/b3" --threads 1 >"$dir/log" 2>&1 && fail "3 ranks for a batch of 8 ran"
[ "$(grep -c '^vtr-train: ' "$dir/log")" -eq 1 ] && grep -q "^vtr-train: train.batch_size 8 is not a multiple of the 3 ranks$" "$dir/log" ||
    fail "batch of 8 on 3 ranks: $(cat "$dir/log")"
[ ! -e "$dir/b3" ] || fail "a refused run left $dir/b3"
sed 's/epochs: 10/epochs: 11/' "$dir/cfg.yaml" >"$dir/cfg2.yaml"
$MPIRUN -np 1 vtr-train "$dir/cfg.yaml" -o "$dir/mm" --threads 1 : \
    -np 1 vtr-train "$dir/cfg2.yaml" -o "$dir/mm" --threads 1 >"$dir/log" 2>&1 && fail "different configs ran"
grep -q "^vtr-train: rank 1 has another config than rank 0$" "$dir/log" || fail "configs: $(cat "$dir/log")"
[ ! -e "$dir/mm" ] || fail "a refused run left $dir/mm"
# a config that only rank 1 cannot read (a path on rank 0's disk alone): rank 0 says so
# for it, at once (the job used to wait forever, silent)
timeout 60 $MPIRUN -np 1 vtr-train "$dir/cfg.yaml" -o "$dir/mc" --threads 1 : \
    -np 1 vtr-train "$dir/gone.yaml" -o "$dir/mc" --threads 1 >"$dir/log" 2>&1
status=$?
[ $status -ne 124 ] || fail "a config missing on rank 1 left the job waiting: $(cat "$dir/log")"
[ $status -ne 0 ] || fail "a config missing on rank 1: exit 0"
[ "$(grep -c '^vtr-train: ' "$dir/log")" -eq 1 ] &&
    grep -q "^vtr-train: rank 1: $dir/gone.yaml: No such file or directory$" "$dir/log" ||
    fail "config missing on rank 1: $(cat "$dir/log")"
[ ! -e "$dir/mc" ] || fail "a refused run left $dir/mc"
exit 0
