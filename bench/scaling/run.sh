#!/bin/sh
# bench/scaling: data-parallel VSE∞ training on this machine, 1 rank against N ranks under
# mpirun (bench/scaling/scaling.c), at the MSR-VTT and COCO configs' sizes: step time, the
# gradient sum and the embedding gather per step, their share of the step, speed-up and
# efficiency, the all-reduce's achieved bandwidth; one markdown table per config
# (bench/scaling/report.py), which docs/scaling.md extrapolates to GPU clusters.
#
#   sh bench/scaling/run.sh [--append] [--small] [--configs msrvtt,coco] [--ranks 2,4]
#                           [--rounds K] [--warmup W] [--steps N] [--reps R]
#
# From the top of the tree after ./configure (with MPI). Builds the bench program
# (bench/build.sh), then per config runs these layouts one after the other: 1 rank with 1
# thread, 1 rank with C threads (C = the cores, nproc), and N ranks with max(1, C / N)
# threads each for every N of --ranks (default 2,4: on 2 cores, 2 x 1 thread uses the same
# cores as 1 x 2 threads; 4 ranks oversubscribe them, --oversubscribe); K rounds of that
# (default 2), every other round in the reverse order, so that a change of the machine's
# load touches every layout; the report pools a layout's rounds. --append adds the tables
# to bench/RESULTS.md. Defaults: 2 warm-up and 5 timed steps per run, 10 timed rounds of
# each collective alone; --small: the program's quick sizes.
#
# Every run: OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = its threads per rank, the BLAS kernel
# vtr chooses for this CPU (bench/blas_kernel.sh; the table names it), and
# OMP_WAIT_POLICY=passive (lib/nn.h). mpirun: shared memory only (--mca btl self,vader), no
# binding (--bind-to none: the machine is shared, and 1 rank runs without mpirun, unbound).
set -eu
cd "$(dirname "$0")/../.."
configs=msrvtt,coco ranks=2,4 rounds=2 warmup=2 steps=5 reps=10 append='' small=''
while [ $# -gt 0 ]; do
    case $1 in
    --append) append=--append ;;
    --small) small=--small ;;
    --configs) configs=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --steps) steps=$2; shift ;;
    --reps) reps=$2; shift ;;
    *) echo "usage: sh bench/scaling/run.sh [--append] [--small] [--configs msrvtt,coco]" \
            "[--ranks 2,4] [--rounds K] [--warmup W] [--steps N] [--reps R]" >&2
       exit 2 ;;
    esac
    shift
done
if [ ! -f Makefile ]; then
    echo "bench/scaling: run ./configure first" >&2
    exit 1
fi
if [ "$(sed -n 's/^HAVE_MPI *= *//p' Makefile)" != yes ] || ! command -v mpirun >/dev/null; then
    echo "bench/scaling: needs a build with MPI (./configure --with-mpi) and mpirun" >&2
    exit 1
fi
sh bench/build.sh bench/scaling/scaling.c bench/out/scaling

work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-scaling-XXXXXX")
trap 'rm -rf "$work"' EXIT
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
export OMP_WAIT_POLICY=passive
cores=$(nproc)
args="--warmup $warmup --steps $steps --reps $reps $small"
uptime_before=$(uptime)
load_before=$(cut -d' ' -f1 /proc/loadavg)
# the layouts, ranks x threads per rank
layouts="1x1 1x$cores"
for n in $(echo "$ranks" | tr , ' '); do
    layouts="$layouts ${n}x$((cores / n > 1 ? cores / n : 1))"
done
reversed=$(echo "$layouts" | tr ' ' '\n' | tac | tr '\n' ' ')
results=
round=1
while [ "$round" -le "$rounds" ]; do
    order=$layouts
    [ $((round % 2)) -eq 1 ] || order=$reversed
    for config in $(echo "$configs" | tr , ' '); do
        for layout in $order; do
            n=${layout%x*} threads=${layout#*x}
            out="$work/$config.$layout.$round.json"
            if [ "$n" -eq 1 ]; then
                # shellcheck disable=SC2086 # $args is a word list
                OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads \
                    bench/out/scaling --config "$config" $args >"$out"
            else
                # shellcheck disable=SC2086
                mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none \
                    -np "$n" -x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads" \
                    -x OMP_WAIT_POLICY bench/out/scaling --config "$config" $args >"$out"
            fi
            results="$results $out"
        done
    done
    round=$((round + 1))
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
uptime_after=$(uptime)
# shellcheck disable=SC2086 # $results and $append are word lists
/usr/bin/python3 bench/scaling/report.py $results --cores "$cores" --rounds "$rounds" \
    --load "$load_before" "$load_after" --uptime "$uptime_before" "$uptime_after" \
    --command "sh bench/scaling/run.sh --append${small:+ --small} --configs $configs --ranks $ranks --rounds $rounds --warmup $warmup --steps $steps --reps $reps" \
    $append
