#!/bin/sh
# bench/train_step: one VSE∞ video training step, vtr (train_step.c) against the same model
# in PyTorch (torch_step.py), in one run, same threads, same OpenBLAS.
#
#   sh bench/train_step/run.sh [--append] [--threads N] [--warmup W] [--steps N]
#
# From the top of the tree after ./configure. Builds build/libvtr.a and the bench program
# (the Makefile's CC, CFLAGS and LIBS), writes the batches and the initial weights once
# (both sides train on the same data from the same weights), then times vtr, PyTorch
# (twice, see below) and vtr again, one after the other, so that a change in the machine's
# load during the run touches both sides, and prints one table
# (bench/train_step/report.py); --append adds it to bench/RESULTS.md. Defaults: 2 threads,
# 2 warm-up steps, then 10 timed steps per run (vtr's median is over both of its runs).
#
# Both sides: OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = threads, OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE unset (OpenBLAS picks its kernels the same way for both). vtr runs with
# OMP_WAIT_POLICY=passive (lib/nn.h: libgomp's spinning threads would take the cores from
# OpenBLAS's). PyTorch runs twice: as it comes (libgomp's default wait policy), and with
# OMP_WAIT_POLICY=passive too, which helps it as much; the table reports both.
set -eu
cd "$(dirname "$0")/../.."
threads=2 warmup=2 steps=10 append=
while [ $# -gt 0 ]; do
    case $1 in
    --append) append=--append ;;
    --threads) threads=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --steps) steps=$2; shift ;;
    *) echo "usage: sh bench/train_step/run.sh [--append] [--threads N] [--warmup W] [--steps N]" >&2
       exit 2 ;;
    esac
    shift
done
if [ ! -f Makefile ]; then
    echo "bench/train_step: run ./configure first" >&2
    exit 1
fi
make -s build/libvtr.a
mkdir -p bench/out
cuda_libs=
if [ "$(sed -n 's/^HAVE_CUDA *= *//p' Makefile)" = yes ]; then
    cuda_libs="$(sed -n 's/^CUDA_LIBS *= *//p' Makefile) -lstdc++"
fi
# shellcheck disable=SC2046,SC2086 # the flags are word lists
$(sed -n 's/^CC *= *//p' Makefile) $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. \
    bench/train_step/train_step.c build/libvtr.a $(sed -n 's/^LIBS *= *//p' Makefile) \
    $cuda_libs -o bench/out/train_step

work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-train-XXXXXX")
trap 'rm -rf "$work"' EXIT
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads"
bench/out/train_step prepare "$work" --warmup "$warmup" --steps "$steps"
load_before=$(cut -d' ' -f1 /proc/loadavg)
OMP_WAIT_POLICY=passive bench/out/train_step run --warmup "$warmup" --steps "$steps" \
    >"$work/vtr.json"
/usr/bin/python3 bench/train_step/torch_step.py "$work" --warmup "$warmup" --steps "$steps" \
    >"$work/torch.json"
OMP_WAIT_POLICY=passive /usr/bin/python3 bench/train_step/torch_step.py "$work" \
    --warmup "$warmup" --steps "$steps" >"$work/torch_passive.json"
OMP_WAIT_POLICY=passive bench/out/train_step run --warmup "$warmup" --steps "$steps" \
    >"$work/vtr_after.json"
load_after=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/python3 bench/train_step/report.py "$work/vtr.json" "$work/vtr_after.json" \
    "$work/torch.json" "$work/torch_passive.json" \
    --threads "$threads" --load "$load_before" "$load_after" \
    --command "sh bench/train_step/run.sh --append --threads $threads --warmup $warmup --steps $steps" \
    $append
