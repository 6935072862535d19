#!/bin/sh
# bench/set_search: search-time cost of set embeddings (K = 4 vectors per item, smooth-
# Chamfer) against one vector per item (exact top-k), both vtr's, in one run on the same
# synthetic data (set_search.c). From the top of the tree after ./configure && make.
#
#   sh bench/set_search/run.sh [--append]    (N=items, QUERIES=q override the sizes)
#
# Both sides run the BLAS kernel vtr chooses for this CPU (bench/blas_kernel.sh);
# OMP_WAIT_POLICY=passive.
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
N=${N:-100000}
QUERIES=${QUERIES:-100}
append=
[ "${1:-}" = --append ] && append=1
[ -f build/libvtr.a ] && [ -f Makefile ] || { echo "bench/set_search: run ./configure && make first" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-sets-XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2046 # the flags are word lists
cc $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. bench/set_search/set_search.c build/libvtr.a \
    $(sed -n 's/^LIBS *= *//p' Makefile) -o "$work/set_search"
load_before=$(cut -d' ' -f1 /proc/loadavg)
OMP_WAIT_POLICY=passive "$work/set_search" "$N" "$QUERIES" 1 >"$work/out.txt"
load_after=$(cut -d' ' -f1 /proc/loadavg)
kernel=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "bench"); import machine; print(machine.blas_core())' 2>/dev/null || echo unknown)
v() { sed -n "s/^$1 //p" "$work/out.txt"; }
report=$(awk -v one="$(v one_vector_s)" -v sets="$(v sets_s)" -v oneb="$(v one_vector_batch_s)" \
    -v setsb="$(v sets_batch_s)" -v n="$N" -v q="$QUERIES" -v kernel="$kernel" -v setting="$VTR_BENCH_BLAS" \
    -v lb="$load_before" -v la="$load_after" -v cpu="$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)" \
    -v date="$(date +%Y-%m-%d)" -v code="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" 'BEGIN {
    printf "## Search with set embeddings against one vector per item (%s)\n\n", date
    printf "Command: `sh bench/set_search/run.sh --append` (code %s, N=%d, QUERIES=%d). Machine: %s, ", code, n, q, cpu
    printf "OpenBLAS kernel %s (%s), OMP_WAIT_POLICY=passive; load average (1 min) %s before, %s after.\n\n", kernel, setting, lb, la
    printf "Data: %d items of 1024-d unit vectors, one per item or a set of 4 (float32: 4 MB per 1,000 items, 16 MB as sets); queries alike. One vector: index/topk.h exact top 10 (float32 matrix). Sets: smooth-Chamfer (alpha 16) of every query set against every item set, then the top 10. Scoring only: vtr-search also reads the index (float16 rows; decoded to float32 for sets).\n\n", n
    printf "| | one vector | sets (K 4) | sets / one vector |\n|---|---|---|---|\n"
    printf "| one query, median of 5 | %.1f ms | %.1f ms | %.1fx |\n", one * 1e3, sets * 1e3, sets / one
    printf "| %d queries in one call | %.1f ms | %.1f ms | %.1fx |\n", q, oneb * 1e3, setsb * 1e3, setsb / oneb
    printf "| index rows per item | 1 | 4 | 4x |\n"
}')
echo "$report"
[ -z "$append" ] || { printf '\n%s\n' "$report" >>bench/RESULTS.md; echo "appended to bench/RESULTS.md"; }
