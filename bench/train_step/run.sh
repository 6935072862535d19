#!/bin/sh
# bench/train_step: one VSE∞ video training step, vtr (train_step.c) against the same model
# in PyTorch (torch_step.py), in one run, same threads, same OpenBLAS; with --model hgr, one
# HGR step at the MSR-VTT sizes instead (train_step_hgr.c against torch_hgr_step.py); with
# --model set, one set-embedding step on VSE∞'s video encoders (train_step.c and
# torch_step.py with --model set).
#
#   sh bench/train_step/run.sh [--model vse|hgr|set] [--append] [--threads N] [--warmup W]
#                              [--steps N] [--precision float32|bfloat16]
#
# --precision bfloat16 (vse, set): vtr trains with bfloat16 products (train.precision,
# lib/matmul.h), PyTorch under CPU autocast to bfloat16 (torch_step.py); the table is
# judged against issue 21's target for it (2x PyTorch autocast).
#
# From the top of the tree after ./configure. Builds build/libvtr.a and the bench program
# (the Makefile's CC, CFLAGS and LIBS), writes the batches and the initial weights once
# (both sides train on the same data from the same weights), then times vtr, PyTorch
# (twice, see below) and vtr again, one after the other, so that a change in the machine's
# load during the run touches both sides, and prints one table
# (bench/train_step/report.py); --append adds it to bench/RESULTS.md. Defaults: 2 threads,
# 2 warm-up steps, then 10 timed steps per run (vtr's median is over both of its runs); for
# hgr and set 1 and 5 (such a step takes seconds to tens of seconds on 2 cores).
#
# hgr, set: the timed runs train with the released dropouts on both sides, whose masks
# differ (vtr draws its own), so their losses agree only roughly; after them (outside the
# timing and the load readings) each side runs 2 more steps with dropout off, untimed for
# the table, whose losses show that the two compute the same step.
#
# Both sides: OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = threads, the BLAS kernel vtr chooses
# for this CPU (bench/blas_kernel.sh). vtr runs with
# OMP_WAIT_POLICY=passive (lib/nn.h: libgomp's spinning threads would take the cores from
# OpenBLAS's). PyTorch runs twice: as it comes (libgomp's default wait policy), and with
# OMP_WAIT_POLICY=passive too, which helps it as much; the table reports both.
set -eu
cd "$(dirname "$0")/../.."
threads=2 warmup='' steps='' append='' model=vse precision=float32
while [ $# -gt 0 ]; do
    case $1 in
    --model) model=$2; shift ;;
    --append) append=--append ;;
    --threads) threads=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --steps) steps=$2; shift ;;
    --precision) precision=$2; shift ;;
    *) echo "usage: sh bench/train_step/run.sh [--model vse|hgr|set] [--append] [--threads N]" \
            "[--warmup W] [--steps N] [--precision float32|bfloat16]" >&2
       exit 2 ;;
    esac
    shift
done
# model_args: how both sides' programs pick the model (none for train_step_hgr: it has one)
case $model in
vse) prog=train_step torch_py=torch_step.py model_opt='' model_args="--model vse" ;;
hgr) prog=train_step_hgr torch_py=torch_hgr_step.py model_opt="--model hgr " model_args=
     warmup=${warmup:-1} steps=${steps:-5} ;;
set) prog=train_step torch_py=torch_step.py model_opt="--model set " model_args="--model set"
     warmup=${warmup:-1} steps=${steps:-5} ;;
*) echo "bench/train_step: --model is vse, hgr or set" >&2; exit 2 ;;
esac
warmup=${warmup:-2} steps=${steps:-10}
case $precision in
float32) precision_opt='' ;;
bfloat16) [ "$model" != hgr ] || { echo "bench/train_step: --precision is for vse and set" >&2; exit 2; }
          precision_opt="--precision bfloat16 " ;;
*) echo "bench/train_step: --precision is float32 or bfloat16" >&2; exit 2 ;;
esac
model_args="$model_args ${precision_opt% }"
if [ ! -f Makefile ]; then
    echo "bench/train_step: run ./configure first" >&2
    exit 1
fi
sh bench/build.sh "bench/train_step/$prog.c" "bench/out/$prog"

work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-train-XXXXXX")
trap 'rm -rf "$work"' EXIT
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads"
# shellcheck disable=SC2086 # $model_args is a word list
if [ "$model" = hgr ]; then
    bench/out/train_step_hgr prepare "$work"
else
    # the batches of the timed runs, and at least the 2 of the dropout-off runs
    bench/out/train_step prepare "$work" $model_args --warmup 0 \
        --steps $((warmup + steps < 2 ? 2 : warmup + steps))
fi
load_before=$(cut -d' ' -f1 /proc/loadavg)
# shellcheck disable=SC2086
OMP_WAIT_POLICY=passive "bench/out/$prog" run $model_args --warmup "$warmup" --steps "$steps" \
    >"$work/vtr.json"
# shellcheck disable=SC2086
/usr/bin/python3 "bench/train_step/$torch_py" "$work" $model_args --warmup "$warmup" \
    --steps "$steps" >"$work/torch.json"
# shellcheck disable=SC2086
OMP_WAIT_POLICY=passive /usr/bin/python3 "bench/train_step/$torch_py" "$work" $model_args \
    --warmup "$warmup" --steps "$steps" >"$work/torch_passive.json"
# shellcheck disable=SC2086
OMP_WAIT_POLICY=passive "bench/out/$prog" run $model_args --warmup "$warmup" --steps "$steps" \
    >"$work/vtr_after.json"
load_after=$(cut -d' ' -f1 /proc/loadavg)
parity=
if [ "$model" != vse ]; then
    # shellcheck disable=SC2086
    OMP_WAIT_POLICY=passive "bench/out/$prog" run $model_args --warmup 0 --steps 2 \
        --dropout-off >"$work/vtr_p0.json"
    # shellcheck disable=SC2086
    OMP_WAIT_POLICY=passive /usr/bin/python3 "bench/train_step/$torch_py" "$work" $model_args \
        --warmup 0 --steps 2 --dropout-off >"$work/torch_p0.json"
    parity="--parity $work/vtr_p0.json $work/torch_p0.json"
fi
# shellcheck disable=SC2086 # $parity and $append are word lists
/usr/bin/python3 bench/train_step/report.py "$work/vtr.json" "$work/vtr_after.json" \
    "$work/torch.json" "$work/torch_passive.json" \
    --model "$model" --precision "$precision" --threads "$threads" \
    --load "$load_before" "$load_after" \
    --command "sh bench/train_step/run.sh ${model_opt}${precision_opt}--append --threads $threads --warmup $warmup --steps $steps" \
    $parity $append
