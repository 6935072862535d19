#!/bin/sh
# bench/demo_search: do the demo's searches find what they ask for? On archives of held-out
# seeds (the demo's own is 1), the demo's pipeline (pipeline/demo.sh, VSE∞ only:
# VTR_DEMO_MODELS=vse-inf) renders, trains and indexes; then its three example queries and
# "a COLOUR SHAPE" for every colour and shape of the generator (and those with a size, a
# motion or "appears briefly") are searched in its VSE∞ index (vtr-search --json -k 5) and
# scored against what each clip shows (the archive's scenes.json, written by vtr-synth):
# bench/demo_search/score.py.
#
#   sh bench/demo_search/run.sh [--seeds 2,3,4] [--reuse] [--append]
#
# From the top of the tree after ./configure && make. Each seed's demo goes to
# bench/out/demo_search/seed-S/ (its log: demo.log there); --reuse keeps a seed's demo
# that finished before instead of running it again. --append adds the report to
# bench/RESULTS.md. Other VTR_DEMO_* variables in the environment (VTR_DEMO_CLIPS,
# VTR_DEMO_EPOCHS, a backbone setting) reach the demo and are named in the report's
# command; the report names the backbone from the index's record of it.
set -eu
cd "$(dirname "$0")/../.."
usage() { echo "usage: sh bench/demo_search/run.sh [--seeds 2,3,4] [--reuse] [--append]"; }
seeds=2,3,4
reuse=
append=
while [ $# -gt 0 ]; do
    case $1 in
    --seeds) [ $# -ge 2 ] || { usage >&2; exit 1; }; seeds=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --append) append=--append; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 1 ;;
    esac
done
case $seeds in
'' | *[!0-9,]* | ,* | *, | *,,*) echo "bench/demo_search: --seeds wants numbers separated by commas, got '$seeds'" >&2; exit 1 ;;
esac
if [ ! -x bin/vtr-search ] || [ ! -x bin/vtr-inspect ]; then
    echo "bench/demo_search: run ./configure && make first" >&2
    exit 1
fi
command="$(env | grep '^VTR_DEMO_' | sort | tr '\n' ' ')sh bench/demo_search/run.sh --seeds $seeds${reuse:+ --reuse}${append:+ --append}"
out=bench/out/demo_search
mkdir -p "$out"
load_before=$(cut -d' ' -f1 /proc/loadavg)
dirs=
for s in $(echo "$seeds" | tr , ' '); do
    dir=$out/seed-$s
    dirs="$dirs $dir"
    if [ -n "$reuse" ] && grep -q '^demo finished' "$dir/demo.log" 2>/dev/null; then
        echo "bench/demo_search: seed $s: reusing $dir" >&2
        continue
    fi
    echo "bench/demo_search: seed $s: running the demo into $dir (log: $dir/demo.log)" >&2
    VTR_DEMO_SEED=$s VTR_DEMO_DIR=$dir VTR_DEMO_MODELS=vse-inf sh pipeline/demo.sh >"$out/seed-$s.log" 2>&1 || {
        tail -20 "$out/seed-$s.log" >&2
        echo "bench/demo_search: the demo failed for seed $s (log: $out/seed-$s.log)" >&2
        exit 1
    }
    mv "$out/seed-$s.log" "$dir/demo.log" # the demo empties its directory first
done
# shellcheck disable=SC2086 # the directories are a word list
/usr/bin/python3 bench/demo_search/score.py --command "$command" --load-before "$load_before" $append $dirs
