#!/bin/sh
# Data-parallel training on GPUs under mpirun (lib/dist_device.h), with the CUDA backend that
# VTR_CUDA_LIBRARY names (tests/gpu/emulate/run.sh passes its emulation) and bin/'s programs
# built with MPI, on the fixtures of tests/t_train_mpi.sh. The ranks exchange through NCCL
# (build-emu/emu/libnccl.so.2, the emulation's stand-in over MPI, or NCCL_LIBRARY) or
# through host memory:
# - VSE∞ with the region MLP's BatchNorm: 1 rank at batch 8 and 2 ranks at 4 pairs each
#   train the same model on the GPU (losses, weights), and what 2 ranks on the CPU train;
#   the same 2-rank run twice gives the same bytes, and so do the exchange through host
#   memory (VTR_NCCL_LIBRARY=none) and through it after NCCL refused the ranks
#   (EMU_NCCL_REFUSE=1), which the log says;
# - set embeddings and HGR (dropout, the fused score over the gathered encodings): 1 and
#   2 ranks on the GPU train the same model;
# - on the emulation, rank 1's GPU short of memory for the model (EMU_DEVICE_MEMORY): one
#   line from rank 0 that names rank 1 and says what to do, no run left; a GPU fault on rank
#   1 in the middle of a step (EMU_FAIL_LAUNCH): the job ends within seconds, not waiting in
#   the step's collectives, with rank 1's own line, and the run goes on with --resume.
#
#   VTR_CUDA_LIBRARY=... [NCCL_LIBRARY=...] sh tests/gpu/train_mpi.sh
#                                               (exit 0 passed, 1 failed, 77 skipped)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/mpi.sh
PATH=$(pwd)/bin:$PATH
for p in vtr-train vtr-import; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
$PY -c 'import numpy, h5py' 2>/dev/null || { echo "$PY with numpy and h5py is not available"; exit 77; }
[ -n "${VTR_CUDA_LIBRARY:-}" ] || { echo "set VTR_CUDA_LIBRARY to the CUDA backend"; exit 77; }
nccl=${NCCL_LIBRARY:-$(dirname "$VTR_CUDA_LIBRARY")/libnccl.so.2}
[ -f "$nccl" ] || { echo "no NCCL at $nccl (set NCCL_LIBRARY)"; exit 77; }
VTR_NCCL_LIBRARY=$nccl EMU_NCCL_REFUSE=0 EMU_COPIES=${EMU_COPIES:-late}
export VTR_NCCL_LIBRARY EMU_NCCL_REFUSE EMU_COPIES
MPIRUN="$MPIRUN -x VTR_CUDA_LIBRARY -x EMU_COPIES -x VTR_NCCL_LIBRARY -x EMU_NCCL_REFUSE"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
. tests/train_runs.sh
precomp_run "epochs: 3, batch_size: 8"
train() { # RANKS DEVICE OUT [vtr-train arguments]
    n=$1 device=$2 out=$3
    shift 3
    $MPIRUN -np "$n" vtr-train "$dir/cfg.yaml" -o "$dir/$out" --threads 1 --device "$device" "$@" \
        >"$dir/$out.log" 2>&1 || fail "$n ranks on $device, $out: $(cat "$dir/$out.log")"
}

train 1 cuda g1
train 2 cuda g2
train 2 cpu c2
same_losses "$dir/g1/metrics.jsonl" "$dir/g2/metrics.jsonl"
echo "VSE∞ on the GPU, 1 vs 2 ranks: $(close "$dir/g1/last.safetensors" "$dir/g2/last.safetensors" 0.01)"
same_losses "$dir/c2/metrics.jsonl" "$dir/g2/metrics.jsonl"
echo "VSE∞ on 2 ranks, CPU vs GPU: $(close "$dir/c2/last.safetensors" "$dir/g2/last.safetensors" 0.01)"
grep -q "data parallel: 2 ranks, 4 pairs each per batch of 8" "$dir/g2.log" || fail "no rank line: $(cat "$dir/g2.log")"
grep -q "training on .*; the ranks exchange through NCCL 2.28.0$" "$dir/g2.log" || fail "no NCCL: $(cat "$dir/g2.log")"
same_bytes() { # RUN: its weights are g2's bytes
    [ "$($PY "$dir/compare.py" "$dir/g2/last.safetensors" "$dir/$1/last.safetensors")" = same ] ||
        fail "$1 differs from g2"
}
train 2 cuda g2again
same_bytes g2again
VTR_NCCL_LIBRARY=none
train 2 cuda host
same_bytes host
grep -q "; the ranks exchange through host memory (NCCL: VTR_NCCL_LIBRARY=none)$" "$dir/host.log" ||
    fail "no host exchange: $(cat "$dir/host.log")"
VTR_NCCL_LIBRARY=$nccl EMU_NCCL_REFUSE=1
train 2 cuda refused
same_bytes refused
grep -q "; the ranks exchange through host memory (NCCL: NCCL communicator: invalid usage" "$dir/refused.log" ||
    fail "no fallback: $(cat "$dir/refused.log")"
EMU_NCCL_REFUSE=0
echo "VSE∞ on 2 GPUs: NCCL, host memory, and host memory after NCCL refused give the same bytes"

S="--set model.set_size=2 --set model.set_attention_dim=16 --set model.set_iterations=2 --set train.epochs=2"
train 1 cuda k1 $S
train 2 cuda k2 $S
same_losses "$dir/k1/metrics.jsonl" "$dir/k2/metrics.jsonl"
echo "set embeddings on the GPU, 1 vs 2 ranks: $(close "$dir/k1/last.safetensors" "$dir/k2/last.safetensors" 0.01)"

hgr_import
hgr_train 1 h1 --device cuda --set train.epochs=5
hgr_train 2 h2 --device cuda --set train.epochs=5
same_losses "$dir/h1/metrics.jsonl" "$dir/h2/metrics.jsonl"
echo "HGR on the GPU, 1 vs 2 ranks: $(close "$dir/h1/last.safetensors" "$dir/h2/last.safetensors" 0.01)"

# Rank 1's GPU short of memory for the model (100 kB), rank 0's not: every rank learns it;
# then a fault on one rank's GPU between the step's collectives (the 3000th launch: in epoch
# 2's steps, after epoch 1's checkpoint), where rank 0 waits for it: rank 1 says why itself
# (mpirun --tag-output: "[1,1]") and that the run can go on, and ends the job (lib/dist.h: a
# failure of this rank alone); the run then goes on from its checkpoint. Both used to leave
# the job waiting forever.
case $VTR_CUDA_LIBRARY in
*/build-emu/*)
    timeout 120 $MPIRUN -np 1 vtr-train "$dir/cfg.yaml" -o "$dir/short" --threads 1 --device cuda : \
        -np 1 -x EMU_DEVICE_MEMORY=100000 vtr-train "$dir/cfg.yaml" -o "$dir/short" --threads 1 \
        --device cuda >"$dir/short.log" 2>&1
    status=$?
    [ $status -ne 124 ] || fail "rank 1 short of GPU memory left the job waiting: $(cat "$dir/short.log")"
    [ $status -ne 0 ] || fail "rank 1 short of GPU memory: exit 0"
    grep -q "^vtr-train: rank 1: .*(a smaller batch, or --device cpu): .*out of memory$" \
        "$dir/short.log" || fail "no line for rank 1 short of GPU memory: $(cat "$dir/short.log")"
    [ ! -e "$dir/short" ] || fail "a run refused by rank 1's GPU left $dir/short"
    echo "rank 1's GPU short of memory: one line from rank 0, exit $status"
    start=$(date +%s)
    timeout 120 $MPIRUN --tag-output -np 1 vtr-train "$dir/cfg.yaml" -o "$dir/fault" --threads 1 \
        --device cuda : -np 1 -x EMU_FAIL_LAUNCH=3000 vtr-train "$dir/cfg.yaml" -o "$dir/fault" \
        --threads 1 --device cuda >"$dir/fault.log" 2>&1
    status=$? took=$(($(date +%s) - start))
    [ $status -ne 124 ] || fail "a GPU fault on rank 1 left the job waiting: $(cat "$dir/fault.log")"
    [ $status -ne 0 ] || fail "a GPU fault on rank 1: exit 0"
    grep -q '^\[1,1\]<stderr>:vtr-train: rank 1: CUDA .*: unspecified launch failure$' "$dir/fault.log" ||
        fail "no line from rank 1: $(cat "$dir/fault.log")"
    grep -q "^\[1,1\]<stderr>:vtr-train: $dir/fault keeps its last checkpoint: vtr-train --resume $dir/fault goes on from there$" \
        "$dir/fault.log" || fail "no word of the checkpoint: $(cat "$dir/fault.log")"
    $MPIRUN -np 2 vtr-train --resume "$dir/fault" --threads 1 >"$dir/fault2.log" 2>&1 &&
        grep -q "^vtr-train: finished 3 epochs" "$dir/fault2.log" ||
        fail "the run of the GPU fault did not go on: $(cat "$dir/fault2.log")"
    echo "a GPU fault on rank 1 in a step ended the job in $took s (exit $status)"
    ;;
esac
exit 0
