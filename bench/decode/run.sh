#!/bin/sh
# vtr-decode against the ffmpeg command-line tool (issue 7, point 4). Run by hand from the
# top of the tree after `make`:
#
#   sh bench/decode/run.sh [CLIPS] [LONG_VIDEOS] [LONG_SECONDS]      (defaults: 3 1 600)
#   CONTAINER=mkv sh bench/decode/run.sh ...     (the same streams in Matroska)
#   CONTAINER=vob sh bench/decode/run.sh ...     (DVD-like MPEG-2 program streams)
#
# Inputs (made once with bin/vtr-synth, kept in bench/out/decode/): 1280x720 H.264 at
# 25 fps, a keyframe every 250 frames, 3 B-frames, in mp4 (or CONTAINER: copied there by
# ffmpeg -c copy); with CONTAINER=vob instead 720x576 MPEG-2 at 25 fps, a keyframe every 15
# frames, 2 B-frames (open GOPs), as on a DVD, written by vtr-synth. Two regimes, 20
# uniform frames each:
#   (a) 30-second clips (MSR-VTT-like: nearly every GOP holds a target);
#   (b) LONG_SECONDS-second videos.
# Three commands deliver the same 20 frames as RGB24 (checked byte for byte):
#   vtr     vtr-decode --frames 20 --out-dir DIR VIDEO
#   select  ffmpeg -i VIDEO -vf "select='eq(n,I1)+...'" -frames:v 20 -fps_mode passthrough
#           (one decoding pass; the frame numbers are vtr's)
#   seek    one "ffmpeg -ss T -i VIDEO -frames:v 1" per frame (fast seek to the keyframe
#           before T, then accurate to the frame; T is vtr's timestamp less 1 ms; in
#           MPEG-TS ffmpeg's seek can land off a keyframe, and `identical` then says so)
# all with the same conversion (-sws_flags bicubic+accurate_rnd+full_chroma_int) and
# default threading. Times: wall-clock and CPU (user + system) seconds, each the median of
# RUNS runs (default 3), the three commands interleaved run by run.
# vtr decodes with its default threads (one per core): stretches of the file at once
# (docs/decode.md), the count in the last column; ffmpeg with its default frame threads.
# Frames decoded per frame delivered: vtr's from its decoder counters; select's is every
# frame up to the last target; seek's counts each call's frames from its keyframe.
set -eu
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
sws=bicubic+accurate_rnd+full_chroma_int
if [ "${1:-}" = --seek-script ]; then # VIDEO "T1 T2 ..." OUTPUT: the per-frame-seek script
    : >"$4"
    for t in $3; do
        ffmpeg -nostdin -v error -ss "$(awk -v t="$t" 'BEGIN {printf "%.6f", t - 0.001}')" \
            -i "$2" -frames:v 1 -sws_flags $sws -pix_fmt rgb24 -f rawvideo - >>"$4"
    done
    exit 0
fi
cd "$(dirname "$0")/../.."
clips=${1:-3}
longs=${2:-1}
long_seconds=${3:-600}
runs=${RUNS:-3}
container=${CONTAINER:-mp4}
out=bench/out/decode
mkdir -p "$out"
PATH=$(pwd)/bin:$PATH
# the system's Python (json only), not a version manager's shim
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
for p in vtr-decode vtr-synth ffmpeg $py awk; do
    command -v $p >/dev/null 2>&1 || { echo "bench/decode: $p not found" >&2; exit 1; }
done


# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# the videos' frame size and keyframe interval
width=1280 height=720 gop=250
[ "$container" != vob ] || width=720 height=576 gop=15
make_video() { # name seconds first-index
    if [ "$container" = vob ]; then
        [ -s "$out/$1.vob" ] || vtr-synth --size ${width}x$height --fps 25 \
            --frames $(($2 * 25)) --gop $gop --bframes 2 --first-index "$3" "$out/$1.vob"
        return
    fi
    if ! [ -s "$out/$1.mp4" ]; then
        echo "making $1.mp4 ($2 s of 720p H.264)" >&2
        vtr-synth --size 1280x720 --fps 25 --frames $(($2 * 25)) --gop 250 --bframes 3 \
            --first-index "$3" "$out/$1.mp4"
    fi
    [ -s "$out/$1.$container" ] ||
        ffmpeg -nostdin -v error -i "$out/$1.mp4" -c copy "$out/$1.$container"
}

# field NAME of DIR/VIDEO.json as one line (arrays space-separated)
field() {
    $py -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(" ".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2"
}

# runs "$@" under GNU time; appends "wall cpu" (cpu: user + system, children included)
timed() {
    log=$1
    shift
    /usr/bin/time -f '%e %U %S' -o "$out/time.tmp" "$@"
    awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$out/time.tmp" >>"$log"
}

bench_one() { # name regime
    v=$out/$1.$container
    d=$out/vtr-$1
    rm -rf "$d"
    vtr-decode --frames 20 --out-dir "$d" "$v" # the frames the others must deliver
    meta=$d/$1.json
    indices=$(field "$meta" frame_indices)
    if [ "$indices" = None ]; then # lost in jumps into open GOPs: a straight decode's
        vtr-decode --frames 20 --straight --out-dir "$d.straight" "$v"
        indices=$(field "$d.straight/$1.json" frame_indices)
        rm -rf "$d.straight"
    fi
    times=$(field "$meta" timestamps)
    decoded=$(field "$meta" decode.frames_decoded)
    stretches=$(field "$meta" decode.stretches)
    total=$(field "$meta" duration)
    expr=$(echo "$indices" | awk '{for (i = 1; i <= NF; i++) printf "%seq(n\\,%s)", (i > 1 ? "+" : ""), $i}')
    : >"$out/t-vtr"
    : >"$out/t-select"
    : >"$out/t-seek"
    # interleaved, so that a change of load on a shared machine hits all three alike
    for _ in $(seq "$runs"); do
        timed "$out/t-vtr" vtr-decode --frames 20 --out-dir "$d" "$v"
        timed "$out/t-select" ffmpeg -nostdin -v error -y -i "$v" -vf "select='$expr'" \
            -frames:v 20 -fps_mode passthrough -sws_flags $sws -pix_fmt rgb24 -f rawvideo \
            "$out/$1.select.rgb"
        timed "$out/t-seek" sh "$self" --seek-script "$v" "$times" "$out/$1.seek.rgb"
    done
    # the raw RGB of vtr's NPY: its last 20 * width * height * 3 bytes
    tail -c $((20 * width * height * 3)) "$d/$1.npy" >"$out/$1.vtr.rgb"
    same=yes
    cmp -s "$out/$1.vtr.rgb" "$out/$1.select.rgb" || same="NO (select differs)"
    if ! cmp -s "$out/$1.vtr.rgb" "$out/$1.seek.rgb"; then
        [ "$same" = yes ] && same="select only (seek differs)" || same="NO (both differ)"
    fi
    last=$(echo "$indices" | awk '{print $NF}')
    seek_decoded=$(echo "$indices" | awk -v g=$gop '{s = 0; for (i = 1; i <= NF; i++) s += $i % g + 1; print s}')
    tv=$(cut -d' ' -f1 "$out/t-vtr" | median)
    ts=$(cut -d' ' -f1 "$out/t-select" | median)
    tk=$(cut -d' ' -f1 "$out/t-seek" | median)
    cv=$(cut -d' ' -f2 "$out/t-vtr" | median)
    cs=$(cut -d' ' -f2 "$out/t-select" | median)
    ck=$(cut -d' ' -f2 "$out/t-seek" | median)
    awk -v r="$2" -v n="$1" -v len="$total" -v tv="$tv" -v ts="$ts" -v tk="$tk" -v cv="$cv" \
        -v cs="$cs" -v ck="$ck" -v dv="$decoded" -v last="$last" -v dk="$seek_decoded" \
        -v same="$same" -v st="$stretches" 'BEGIN {
        printf "%s\t%s\t%.0f s\t%.2f / %.2f\t%.2f / %.2f\t%.2f / %.2f\t%.2fx / %.2fx\t%.2fx / %.2fx\t%.1f\t%.1f\t%.1f\t%s\t%s\n",
            r, n, len, tv, cv, ts, cs, tk, ck, ts / tv, cs / cv, tk / tv, ck / cv,
            dv / 20, (last + 1) / 20, dk / 20, same, st }'
}

for i in $(seq "$clips"); do make_video "clip$i" 30 $((i * 1000)); done
for i in $(seq "$longs"); do make_video "long$i" "$long_seconds" $((i * 100)); done

echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(ffmpeg -version | head -n 1 | cut -d' ' -f1-3), runs=$runs, $container"
printf 'regime\tvideo\tlength\tvtr wall/cpu s\tselect wall/cpu s\tseek wall/cpu s\tselect/vtr wall/cpu\tseek/vtr wall/cpu\tdecoded per delivered: vtr\tselect\tseek\tidentical\tvtr stretches\n'
for i in $(seq "$clips"); do bench_one "clip$i" a; done
for i in $(seq "$longs"); do bench_one "long$i" b; done
