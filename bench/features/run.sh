#!/bin/sh
# bench/features: CNN frame features, vtr's backbone (oneDNN, batch norm folded) against
# torchvision's model on the same machine, threads and weights, in one run: images/s at
# batch 32 on 224x224 for ResNet-152 and the light backbone (ResNet-18), and vtr against
# the FLOP floor at the peak measured in the same run.
#
#   sh bench/features/run.sh [--append] [--threads N] [--runs R] [--archs A,B]
#
# From the top of the tree after ./configure; needs python3-torchvision. Builds
# build/libvtr.a and the bench program (the Makefile's CC, CFLAGS and LIBS), writes random
# weights with torchvision's names once per architecture (both sides load the same file;
# speed does not depend on the values), then per architecture times vtr, torchvision
# (plain eval forward under no_grad), torchvision frozen (torch.jit.optimize_for_inference:
# PyTorch's best CPU path, for reference), twice in turn, so that a change of the machine's
# load touches every side; prints one table (bench/features/report.py), and --append adds
# it to bench/RESULTS.md. Defaults: threads = cores, 1 warm-up and 3 timed batches per run
# (6 timed batches per side and architecture).
#
# Every side: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = threads (torch.set_num_threads too),
# libgomp's default wait policy, the BLAS kernel vtr chooses (bench/blas_kernel.sh). Timed: the
# backbone's forward on a prepared float batch (no decoding or preprocessing on either
# side), pooled features out.
set -eu
cd "$(dirname "$0")/../.."
. bench/features/setup.sh
load_before=$(cut -d' ' -f1 /proc/loadavg)
results=
for arch in $(echo "$archs" | tr , ' '); do
    w="$work/$arch.safetensors"
    /usr/bin/python3 tests/fixtures/make_backbone_fixtures.py random-weights "$arch" "$w" 0
    for round in 1 2; do
        bench/out/features_bench "$w" "$arch" "$batch" "$runs" "$warmup" \
            >"$work/$arch.vtr$round.json"
        /usr/bin/python3 bench/features/torch_bench.py "$w" "$arch" "$batch" "$runs" "$warmup" \
            "$threads" >"$work/$arch.torch$round.json"
        /usr/bin/python3 bench/features/torch_bench.py "$w" "$arch" "$batch" "$runs" "$warmup" \
            "$threads" --frozen >"$work/$arch.frozen$round.json"
    done
    for side in vtr torch frozen; do
        results="$results $work/$arch.${side}1.json $work/$arch.${side}2.json"
    done
    rm -f "$w"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
# shellcheck disable=SC2086 # a list of files
/usr/bin/python3 bench/features/report.py $results --threads "$threads" \
    --load "$load_before" "$load_after" \
    --command "sh bench/features/run.sh --append --threads $threads --runs $runs --archs $archs" \
    $append
