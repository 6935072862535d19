#!/bin/sh
# tests/gpu/emulate/run.sh: the GPU parity tests (unit-tests cuda: tests/test_cuda.c,
# test_cuda_nn.c, test_cuda_model.c, test_retrieval_metrics.c's) on the CPU, against an
# emulation of CUDA, where no GPU is (CI). From the top of the tree or anywhere:
#
#   sh tests/gpu/emulate/run.sh [--asan] [--copies late|early] [FILTER...]
#
# Builds build-emu/ (emulate.mk: tests/gpu/gpu.mk's sources, each .cu rewritten by
# cu_to_cc.py and compiled by g++ against include/; incremental), then runs
# build-emu/emu/unit-tests FILTER... (default: cuda) with VTR_CUDA_LIBRARY set to the emulated
# backend, once with another stream's copies run as late as a GPU may run them and the
# threads of a block (and the blocks) run first to last, once with the copies run as early and
# the threads last to first (EMU_COPIES, EMU_THREADS; the log says which), or only in the copy
# order --copies gives, with its thread order. --asan: built with AddressSanitizer
# into build-emu/asan/ (a kernel's loads and stores out of an allocation then stop the test).
# With the default filter and no --asan it then runs, copies late, tests/gpu/programs.sh (bin/'s
# programs with --device cuda against their CPU runs) and tests/gpu/train_mpi.sh (bin/vtr-train's
# data-parallel training on the emulated GPU under mpirun; skipped without MPI).
# Exit 0 when every run passed.
#
# What the emulation checks: the .cu files' kernels, run thread by thread, give the CPU's
# results within the tests' tolerances; every copy, memset, cuBLAS and cuDNN operand lies inside
# one device allocation; cuDNN's calls get arguments it accepts (cudnn.cc computes them); a
# warp's shuffles and __syncwarp reach its 32 lanes, each at the same collective;
# device memory starts as 0xFF bytes (NaN), as do shared memory at each block's start and
# pinned host memory, so a value read before it is written shows; a stream's copy read before
# its wait shows; a kernel whose result hangs on the order of its threads (a missing
# __syncthreads) is wrong in one of the two thread orders; a block whose threads do not all
# reach a __syncthreads stops; launch configurations over a GPU's limits fail as on one.
# What it cannot: threads, blocks, streams and the host never run at the same time, so a race
# gives one of two orders' results and the default stream never overlaps a copy stream; no
# lockstep within a warp and no collectives of part of one, no atomics; cuBLAS and cuDNN sum in
# another order than a GPU's, and cuDNN's algorithms are not its own; a kernel's own
# out-of-bounds access is caught only with --asan. x86-64 only (the fibers switch stacks in
# x86-64 assembly).
set -u
cd "$(dirname "$0")/../../.." || exit 1

B=build-emu
sanitize=
orders="late early"
while [ $# -gt 0 ]; do
    case $1 in
    --asan) B=build-emu/asan sanitize=-fsanitize=address ;;
    --copies) orders=${2:-}; shift ;;
    -*) echo "usage: sh tests/gpu/emulate/run.sh [--asan] [--copies late|early] [FILTER...]" >&2
        exit 1 ;;
    *) break ;;
    esac
    shift
done
case $orders in
"late early" | late | early) ;;
*) echo "run.sh: --copies takes late or early" >&2; exit 1 ;;
esac
training=
[ $# -gt 0 ] || { set -- cuda; training=yes; }

start=$(date +%s)
make -s -f tests/gpu/emulate/emulate.mk -j"$(nproc)" B="$B" SANITIZE="$sanitize" || exit 1
echo "emulate: built $B/emu in $(($(date +%s) - start))s"

VTR_CUDA_LIBRARY=$(pwd)/$B/emu/libvtr-cuda.so
VTR_NCCL_LIBRARY=$(pwd)/$B/emu/libnccl.so.2 # where Open MPI is (emulate.mk)
export VTR_CUDA_LIBRARY VTR_NCCL_LIBRARY
failed=
for order in $orders; do
    threads=forward
    [ "$order" = late ] || threads=reverse
    echo "== unit-tests $*, another stream's copies run $order, threads $threads" \
        "(EMU_COPIES=$order EMU_THREADS=$threads)"
    start=$(date +%s)
    EMU_COPIES=$order EMU_THREADS=$threads "$B/emu/unit-tests" "$@" || failed="$failed $order"
    echo "== copies $order: $(($(date +%s) - start))s"
done
# the programs with --device cuda against the CPU, and data-parallel training, on the
# emulated GPU (with the default filter; bin/ built, with MPI for the training)
if [ -n "$training" ] && [ -z "$sanitize" ]; then
    for script in programs.sh train_mpi.sh; do
        echo "== tests/gpu/$script, copies late"
        start=$(date +%s)
        EMU_COPIES=late sh tests/gpu/$script
        case $? in
        0) ;;
        77) echo "(skipped)" ;;
        *) failed="$failed $script" ;;
        esac
        echo "== $script: $(($(date +%s) - start))s"
    done
fi
if [ -n "$failed" ]; then
    echo "emulate: FAILED:$failed"
    exit 1
fi
echo "emulate: PASSED"
