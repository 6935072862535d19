#!/bin/sh
# bench/search: exact top-k over 1,000,000 synthetic 1024-d float16 embeddings (2.05 GB),
# vtr (index/topk.c over an index/embedding_index_reader.c snapshot) against a numpy brute force
# (bench/search/baseline.py) and against the memory-bandwidth floor measured in the same
# run: single-query latency and 1,000-query batch throughput, k = 10.
#
#   sh bench/search/run.sh [--append]      (from the top of the tree, after make)
#
# bench/search/faiss.sh compares the same search with FAISS's and measures the approximate
# index (vtr-approx).
#
# The benchmark builds the index itself, through the writer API, in a temporary directory
# that it removes at the end: it needs about 2.2 GB of free disk there (TMPDIR) and 6 GB
# of free memory (the matrix stays in the page cache; numpy's blocks come on top).
# ROWS=N overrides the row count for a quick try. --append adds the report to
# bench/RESULTS.md. Both sides run the BLAS kernel vtr chooses for this CPU
# (bench/blas_kernel.sh) with the default BLAS threads; vtr with OMP_WAIT_POLICY=passive (its OpenMP threads sleep
# while the BLAS threads work). The single queries alternate with the floor's streaming
# passes, and the batch runs alternate vtr (default kernel), vtr with each other batch
# kernel this CPU has (sgemm always; the AVX512-BF16 filter where AMX is the default),
# numpy, so that load from other processes on a shared machine falls on all alike.
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
ROWS=${ROWS:-1000000}
DIM=1024
QUERIES=1000
SINGLE=20   # single queries timed (each alone)
REPEATS=3   # batch runs timed, per side
K=10
if [ ! -f build/libvtr.a ] || [ ! -f Makefile ]; then
    echo "bench/search: run ./configure && make first" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-search-XXXXXX")
trap 'rm -rf "$work"' EXIT
need_kb=$((ROWS * DIM * 2 / 1024 * 11 / 10 + 65536))
free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt "$need_kb" ]; then
    echo "bench/search: needs $((need_kb / 1024)) MiB free in $work, has $((free_kb / 1024))" >&2
    exit 1
fi
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "$mem_kb" -lt $((ROWS * DIM * 6 / 1024)) ]; then
    echo "bench/search: needs about $((ROWS * DIM * 6 / 1048576)) MiB of free memory, has $((mem_kb / 1024))" >&2
    exit 1
fi
# shellcheck disable=SC2046 # the flags are word lists
cc $(sed -n 's/^CFLAGS *= *//p' Makefile) $(sed -n 's/^DEPFLAGS *= *//p' Makefile) -I. \
    bench/search/search_bench.c build/libvtr.a $(sed -n 's/^LIBS *= *//p' Makefile) \
    -o "$work/search_bench"
vtr() { OMP_WAIT_POLICY=passive "$work/search_bench" "$@" >>"$work/vtr.txt"; }
numpy() { /usr/bin/python3 bench/search/baseline.py "$@" >>"$work/numpy.txt"; }
load() { echo "load $(cut -d ' ' -f 1 /proc/loadavg)" >>"$work/vtr.txt"; }

echo "bench/search: building the index ($ROWS rows) in $work" >&2
load
vtr build "$work/index" "$ROWS" "$DIM" 0
/usr/bin/python3 bench/search/baseline.py queries "$work" "$QUERIES" "$DIM"
echo "bench/search: single queries" >&2
load
vtr single "$work/index" "$work/queries.npy" "$SINGLE" "$K" "$work"
numpy tune "$work" "$K"
load
numpy single "$work" "$SINGLE" "$K"
echo "bench/search: batches" >&2
for r in $(seq "$REPEATS"); do
    load
    vtr batch "$work/index" "$work/queries.npy" "$K" "$work"
    for kernel in $("$work/search_bench" kernels); do
        vtr batch "$work/index" "$work/queries.npy" "$K" "$work" "$kernel"
    done
    load
    numpy batch "$work" "$K"
done
numpy f16 "$work" "$K"
load
/usr/bin/python3 bench/search/baseline.py report "$work" "$@"
