#!/bin/sh
# The Slurm scripts of pipeline/ without Slurm (tests/t_pipeline_make.sh covers the make
# form of slurm-array.sh): slurm-array.sh --shards writes an array whose task i runs the
# program with --shard i/N, and a final job (--then) that joins the parts; run here with
# SLURM_ARRAY_TASK_ID set, they give the single run's store. slurm-train.sh writes an sbatch
# script for srun --mpi=pmix vtr-train across nodes; bad options are refused. sbatch and
# srun are stand-ins that record their arguments.
set -u
for p in vtr-features vtr-decode vtr-synth vtr-merge; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
. tests/fixtures/shard_checks.sh
mkdir "$dir/bin"
for tool in sbatch srun; do
    cat >"$dir/bin/$tool" <<EOF
#!/bin/sh
echo "$tool \$*" >>"$dir/calls"
echo "\$((4000 + \$(wc -l <"$dir/calls")));cluster"
EOF
    chmod +x "$dir/bin/$tool"
done

# 1. slurm-array.sh --shards: 3 shards of vtr-features, then vtr-merge
$PY $SCRIPT random-weights resnet18 "$dir/w.safetensors" 1 || fail "random weights"
for v in a b c d; do vtr-synth --size 64x48 "$dir/$v.png" || fail "vtr-synth"; done
vtr-decode -o "$dir/frames.rec" "$dir"/?.png 2>"$dir/err" || fail "vtr-decode: $(cat "$dir/err")"
F="vtr-features -w $dir/w.safetensors -a resnet18 --resize 72 --crop 64 --threads 1 --batch 1"
$F --store "$dir/S" "$dir/frames.rec" 2>"$dir/err" || fail "one run: $(cat "$dir/err")"
PATH=$dir/bin:$PATH sh pipeline/slurm-array.sh -s 3 -d "$dir/slurm" -o --partition=cpu \
    --then "vtr-merge $dir/SM $dir/S.shard-*-of-3" $F --store "$dir/S" "$dir/frames.rec" \
    >"$dir/log" 2>&1 || fail "slurm-array.sh --shards: $(cat "$dir/log")"
grep -q "3 shards of vtr-features: array job 4001, final job 4002" "$dir/log" ||
    fail "slurm-array.sh said: $(cat "$dir/log")"
[ "$(sed -n 1p "$dir/calls")" = "sbatch --parsable --array=0-2 --partition=cpu $dir/slurm/task.sh" ] ||
    fail "array submission: $(cat "$dir/calls")"
[ "$(sed -n 2p "$dir/calls")" = "sbatch --parsable --dependency=afterok:4001 --partition=cpu $dir/slurm/final.sh" ] ||
    fail "final submission: $(cat "$dir/calls")"
grep -q -- "--shard \"\$i/3\"\$" "$dir/slurm/task.sh" || fail "task.sh: $(cat "$dir/slurm/task.sh")"
(unset SLURM_ARRAY_TASK_ID; sh "$dir/slurm/task.sh" >/dev/null 2>&1) &&
    fail "a task without SLURM_ARRAY_TASK_ID ran"
for i in 0 1 2; do
    SLURM_ARRAY_TASK_ID=$i sh "$dir/slurm/task.sh" >"$dir/log" 2>&1 || fail "task $i: $(cat "$dir/log")"
done
[ "$(cat "$dir/S.shard-1-of-3/keys.txt")" = "b" ] || fail "task 1 took other than its share"
sh "$dir/slurm/final.sh" >"$dir/log" 2>&1 || fail "final: $(cat "$dir/log")"
same_store "$dir/S" "$dir/SM" || fail "the array's merged store differs from one run's"
sh pipeline/slurm-array.sh -s 0 vtr-index 2>/dev/null && fail "--shards 0 accepted"
sh pipeline/slurm-array.sh -s 2 -n 3 vtr-index 2>"$dir/err" && fail "--tasks with --shards accepted"
grep -q -- "-n is for a fragment, not --shards" "$dir/err" || fail "-n with -s: $(cat "$dir/err")"
sh pipeline/slurm-array.sh --then true pipeline/msrvtt.mk 2>/dev/null && fail "--then without --shards"
sh pipeline/slurm-array.sh -s 2 --no-submit -d "$dir/s2" vtr-index x >"$dir/log" 2>&1 &&
    [ "$(cat "$dir/log")" = "sbatch --parsable --array=0-1 '$dir/s2/task.sh'" ] ||
    fail "--no-submit: $(cat "$dir/log")"

# 2. slurm-train.sh: the sbatch script, with --no-submit and submitted
: >"$dir/calls"
echo "data: {}" >"$dir/cfg.yaml"
sh pipeline/slurm-train.sh -N 2 -n 4 -t 24:00:00 -p gpu -c 8 -o --account=vtr -d "$dir/t" \
    --no-submit "$dir/cfg.yaml" -o "$dir/runs/a b" >"$dir/log" 2>&1 ||
    fail "slurm-train.sh: $(cat "$dir/log")"
[ "$(cat "$dir/log")" = "sbatch --parsable '--account=vtr' '$dir/t/train.sh'" ] ||
    fail "--no-submit printed: $(cat "$dir/log")"
[ -s "$dir/calls" ] && fail "--no-submit submitted"
for line in "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=4" "#SBATCH --gpus-per-node=4" \
    "#SBATCH --cpus-per-task=8" "#SBATCH --time=24:00:00" "#SBATCH --partition=gpu" \
    "exec srun --mpi=pmix 'vtr-train' '$dir/cfg.yaml' '-o' '$dir/runs/a b'"; do
    grep -qxF -- "$line" "$dir/t/train.sh" || fail "train.sh lacks '$line': $(cat "$dir/t/train.sh")"
done
PATH=$dir/bin:$PATH sh "$dir/t/train.sh" >/dev/null || fail "train.sh"
[ "$(cat "$dir/calls")" = "srun --mpi=pmix vtr-train $dir/cfg.yaml -o $dir/runs/a b" ] ||
    fail "train.sh ran: $(cat "$dir/calls")"
PATH=$dir/bin:$PATH sh pipeline/slurm-train.sh -n 1 -g 0 -d "$dir/t1" "$dir/cfg.yaml" >"$dir/log" 2>&1 ||
    fail "slurm-train.sh submit: $(cat "$dir/log")"
grep -q "1 ranks on 1 nodes: job 4002" "$dir/log" || fail "slurm-train.sh said: $(cat "$dir/log")"
grep -q 'gpus-per-node' "$dir/t1/train.sh" && fail "-g 0 asked for GPUs"
sh pipeline/slurm-train.sh "$dir/none.yaml" 2>/dev/null && fail "a missing config accepted"
sh pipeline/slurm-train.sh -N 0 "$dir/cfg.yaml" 2>/dev/null && fail "--nodes 0 accepted"
sh pipeline/slurm-train.sh -t '1:00; rm -rf x' "$dir/cfg.yaml" 2>/dev/null && fail "a bad --time accepted"
sh pipeline/slurm-train.sh --help | grep -q -- '--tasks-per-node' || fail "--help"
exit 0
