#!/bin/sh
# bench/scaling/extract.sh: the extraction side of docs/scaling.md, the throughput that
# sharding multiplies: frames per second of vtr-decode and vtr-features (the programs, as a
# pipeline runs them) on this machine, and vtr-features as 1 process using every core
# against 2 processes of 1 thread on half the records each (what --shard I/N does on one
# node); prints a markdown table, --append adds it to bench/RESULTS.md.
#
#   sh bench/scaling/extract.sh [--append] [--arch resnet152] [--clips N] [--frames N]
#
# From the top of the tree after make (bin/). Inputs, made once per run in a temporary
# directory: N (default 4) MSR-VTT-like clips from vtr-synth (320x240 H.264, 15 s at
# 30 fps) and random weights for ARCH (tests/fixtures/make_backbone_fixtures.py, numpy
# only; speed does not depend on the values). Timed (wall clock):
#   decode    vtr-decode --frames F --size 224x224 over all clips (F per clip, default 20,
#             the MSR-VTT config's max_frames) into one record file
#   features  vtr-features --arch ARCH over those records, 1 process with C threads
#             (C = nproc), then 2 processes with 1 thread each, on the records of half the
#             clips each (decoded beforehand, untimed), at the same time; and once on a
#             single frame: the program's start (weights read, batch norm folded, oneDNN's
#             primitives made), which every process pays once and the rates above include
# Every side: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = its threads, the BLAS kernel vtr
# chooses for this CPU (bench/blas_kernel.sh).
set -eu
cd "$(dirname "$0")/../.."
arch=resnet152 clips=4 frames=20 append=
while [ $# -gt 0 ]; do
    case $1 in
    --append) append=yes ;;
    --arch) arch=$2; shift ;;
    --clips) clips=$2; shift ;;
    --frames) frames=$2; shift ;;
    *) echo "usage: sh bench/scaling/extract.sh [--append] [--arch A] [--clips N] [--frames N]" >&2
       exit 2 ;;
    esac
    shift
done
for p in vtr-synth vtr-decode vtr-features; do
    [ -x "bin/$p" ] || { echo "bench/scaling: bin/$p not built (make)" >&2; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-extract-XXXXXX")
trap 'rm -rf "$work"' EXIT
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
cores=$(nproc)
half=$((clips / 2))
i=0
while [ $i -lt "$clips" ]; do
    bin/vtr-synth --size 320x240 --frames 450 --fps 30 "$work/clip$i.mp4" 2>/dev/null
    if [ $i -lt "$half" ]; then echo "$work/clip$i.mp4" >>"$work/a.txt"
    else echo "$work/clip$i.mp4" >>"$work/b.txt"; fi
    i=$((i + 1))
done
cat "$work/a.txt" "$work/b.txt" >"$work/all.txt"
/usr/bin/python3 tests/fixtures/make_backbone_fixtures.py random-weights "$arch" "$work/w.safetensors" 0
decode="bin/vtr-decode --frames $frames --size 224x224"
features="bin/vtr-features --weights $work/w.safetensors --arch $arch -o /dev/null"
clock() { date +%s.%N; }

uptime_before=$(uptime)
t0=$(clock)
$decode -m "$work/all.txt" -o "$work/all.rec" 2>/dev/null
t1=$(clock)
$decode -m "$work/a.txt" -o "$work/a.rec" 2>/dev/null
$decode -m "$work/b.txt" -o "$work/b.rec" 2>/dev/null
bin/vtr-decode --frames 1 --size 224x224 -o "$work/one.rec" "$work/clip0.mp4" 2>/dev/null
ts=$(clock)
OMP_NUM_THREADS=$cores OPENBLAS_NUM_THREADS=$cores $features --threads "$cores" "$work/one.rec"
t2=$(clock)
OMP_NUM_THREADS=$cores OPENBLAS_NUM_THREADS=$cores $features --threads "$cores" "$work/all.rec"
t3=$(clock)
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $features --threads 1 "$work/a.rec" &
pid=$!
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $features --threads 1 "$work/b.rec"
wait $pid
t4=$(clock)
uptime_after=$(uptime)

n=$((clips * frames))
video_bytes=$(cat "$work"/clip*.mp4 | wc -c)
version=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "bench")
from machine import cpu_model, git_version; print(git_version() + "|" + cpu_model())')
report=$(awk -v n="$n" -v t0="$t0" -v t1="$t1" -v ts="$ts" -v t3="$t3" -v t2="$t2" -v t4="$t4" \
    -v c="$cores" -v arch="$arch" 'BEGIN {
    printf "| stage | processes x threads | seconds | frames/s | frames/s per core |\n"
    printf "|---|---|---|---|---|\n"
    printf "| vtr-decode (all clips) | 1 x default | %.2f | %.1f | - |\n", t1 - t0, n / (t1 - t0)
    printf "| vtr-features %s | 1 x %d | %.2f | **%.2f** | %.2f |\n", arch, c, t3 - t2, n / (t3 - t2), n / (t3 - t2) / c
    printf "| vtr-features %s, sharded | 2 x 1 | %.2f | **%.2f** | %.2f |\n", arch, t4 - t3, n / (t4 - t3), n / (t4 - t3) / 2
    printf "| vtr-features %s, one frame (the start) | 1 x %d | %.2f | - | - |\n", arch, c, t2 - ts
}')
text="## Extraction throughput for scaling: vtr-decode and vtr-features on one node ($(date +%F))

Command: \`sh bench/scaling/extract.sh${append:+ --append} --arch $arch --clips $clips --frames $frames\` (code ${version%%|*}). Machine: ${version#*|}, $cores cores; $VTR_BENCH_BLAS. Inputs: $clips vtr-synth clips, 320x240 H.264, 15 s at 30 fps ($((video_bytes / clips / 1024)) KiB per clip, $((video_bytes / n / 1024)) KiB of video read per frame delivered); $frames frames per clip decoded to 224x224 (vtr-decode --frames $frames --size 224x224), $n frames in all; $arch with random weights, pooled features written to /dev/null. uptime before: \`$uptime_before\`; after: \`$uptime_after\` (the machine is shared).

$report
"
printf '%s\n' "$text"
[ -z "$append" ] || printf '\n%s' "$text" >>bench/RESULTS.md
