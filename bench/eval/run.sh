#!/bin/sh
# bench/eval: vtr's retrieval metrics (match/retrieval_metrics.c) against the numpy
# reference (tests/interop/retrieval_metrics_ref.py) at MSR-VTT test size: 2,990 videos x
# 59,800 captions (20 each), 1024-d random l2-normalized float32 embeddings.
#
#   sh bench/eval/run.sh [--append]      (from the top of the tree, after make)
#
# Prints both times (computation only: data generated and loaded beforehand) and their
# ratio, and how far the results agree; --append adds the section to bench/RESULTS.md.
# Both sides run with the machine's default threads (OpenBLAS and OpenMP) and the BLAS
# kernel vtr chooses for this CPU (bench/blas_kernel.sh).
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
if [ ! -f build/libvtr.a ] || [ ! -f Makefile ]; then
    echo "bench/eval: run ./configure && make first" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-eval-XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2046 # the flags are word lists
cc $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. bench/eval/retrieval_bench.c build/libvtr.a \
    $(sed -n 's/^LIBS *= *//p' Makefile) -o "$work/retrieval_bench"
/usr/bin/python3 bench/eval/compare.py "$work" "$@"
