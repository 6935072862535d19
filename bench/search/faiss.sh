#!/bin/sh
# bench/search/faiss.sh: vtr's search against FAISS (Debian's libfaiss-dev) on 1,000,000
# synthetic 1024-d embeddings with neighbourhoods (CLUSTERS centres, each row its centre
# plus noise; search_bench.c "build"), k = 10:
#   1. exact search: vtr (index/topk.c over the float16 segments) against FAISS's exact
#      IndexFlatIP over the same rows widened to float32 (faiss_flat.cc), one query at a
#      time and 1,000 queries at once;
#   2. the approximate index (index/approx_index.h): IVF-PQ over the 1,000,000 rows and
#      HNSW over HNSW_ROWS rows of the same density (50,000 rows, HNSW_ROWS / 100 centres:
#      Debian's FAISS is built for SSE only, and its HNSW takes about 2.3 ms per row of
#      1024 values on 2 cores, 40 minutes for 1,000,000),
#      build time, file size, queries per second (one at a time and 1,000 at once) and
#      recall@10 against vtr's exact search, at the default effort and others.
#
#   sh bench/search/faiss.sh [--append]     (from the top of the tree, after make)
#
# Needs about 2.3 GB of free disk in TMPDIR and 8 GB of free memory (FAISS's flat index
# holds the rows as float32: 4 GB). ROWS=N, HNSW_ROWS=N (0: no HNSW) and EFFORTS="0 16 32"
# (IVF-PQ's nprobe; 0 the default) change the sizes for a quick try; KEEP_WORK=1 keeps the
# work directory (its out.txt and rows: faiss_report.py WORK redoes the report). --append adds the
# report to bench/RESULTS.md. Every program runs with OMP_WAIT_POLICY=passive and the BLAS
# kernel vtr chooses (bench/blas_kernel.sh); the batches alternate vtr, vtr sgemm and
# FAISS so that load from other processes falls on all alike.
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh
ROWS=${ROWS:-1000000}
HNSW_ROWS=${HNSW_ROWS:-50000}
DIM=1024
CLUSTERS=${CLUSTERS:-$((ROWS / 100))}
QUERIES=1000
SINGLE=20  # exact single queries timed (each alone), each side
APPROX_SINGLE=100
EFFORTS=${EFFORTS:-0 16 32}
K=10
if [ ! -f build/libvtr.a ] || [ ! -f Makefile ]; then
    echo "bench/search/faiss.sh: run ./configure && make first" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-faiss-XXXXXX")
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "$mem_kb" -lt $((ROWS * DIM * 8 / 1024)) ]; then
    echo "bench/search/faiss.sh: needs about $((ROWS * DIM * 8 / 1048576)) MiB of free memory, has $((mem_kb / 1024))" >&2
    exit 1
fi
flags() { sed -n "s/^$1 *= *//p" Makefile; }
# shellcheck disable=SC2046 # the flags are word lists
cc $(flags CFLAGS) $(flags DEPFLAGS) -I. bench/search/search_bench.c build/libvtr.a $(flags LIBS) \
    -o "$work/search_bench"
# shellcheck disable=SC2046
$(flags CXX) $(flags CXXFLAGS) $(flags DEPFLAGS) -I. bench/search/faiss_flat.cc build/libvtr.a \
    $(flags LIBS) -o "$work/faiss_flat"
export OMP_WAIT_POLICY=passive
out="$work/out.txt"
vtr() { "$work/search_bench" "$@" >>"$out"; }
load() { echo "load $(cut -d ' ' -f 1 /proc/loadavg)" >>"$out"; }
say() { echo "bench/search/faiss.sh: $*" >&2; }

say "building the index ($ROWS rows, $CLUSTERS clusters) in $work"
echo "clusters $CLUSTERS" >>"$out"
load
vtr build "$work/index" "$ROWS" "$DIM" 0 "$CLUSTERS"
vtr queries "$work/queries.npy" "$QUERIES" "$DIM" 0 "$CLUSTERS"
say "exact, one query at a time"
load
vtr single "$work/index" "$work/queries.npy" "$SINGLE" "$K" "$work"
say "exact, FAISS IndexFlatIP (single, then three batches) and vtr's batches"
vtr batch "$work/index" "$work/queries.npy" "$K" "$work"
vtr batch "$work/index" "$work/queries.npy" "$K" "$work" sgemm
load
"$work/faiss_flat" "$work/index" "$work/queries.npy" "$SINGLE" "$K" "$work" >>"$out"
load
for r in 1 2; do
    vtr batch "$work/index" "$work/queries.npy" "$K" "$work"
    vtr batch "$work/index" "$work/queries.npy" "$K" "$work" sgemm
done
say "approximate: IVF-PQ over $ROWS rows"
load
# shellcheck disable=SC2086 # EFFORTS is a list
vtr approx "$work/index" "$work/queries.npy" "$K" ivfpq "$APPROX_SINGLE" \
    "$work/vtr_batch_rows.npy" $EFFORTS
load
if [ "$HNSW_ROWS" -gt 0 ]; then
    say "approximate: HNSW over $HNSW_ROWS rows"
    echo "hnsw_rows $HNSW_ROWS" >>"$out"
    "$work/search_bench" build "$work/small" "$HNSW_ROWS" "$DIM" 0 $((HNSW_ROWS / 100)) >/dev/null
    "$work/search_bench" queries "$work/small-queries.npy" "$QUERIES" "$DIM" 0 $((HNSW_ROWS / 100))
    mkdir "$work/exact-small"
    "$work/search_bench" batch "$work/small" "$work/small-queries.npy" "$K" "$work/exact-small" |
        sed -n 's/^batch_s /small_batch_s /p' >>"$out"
    vtr approx "$work/small" "$work/small-queries.npy" "$K" hnsw "$APPROX_SINGLE" \
        "$work/exact-small/vtr_batch_rows.npy" 0 200
    load
fi
/usr/bin/python3 bench/search/faiss_report.py "$work" "$@"
