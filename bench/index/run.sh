#!/bin/sh
# bench/index: vtr-index's rate against the rate of its stages alone, with and without
# decoding ahead (--decode-ahead): CLIPS (24) vtr-synth scene clips (H.264, 640x360, 150
# frames at 25 fps), 8 frames each, ResNet-50 (random weights: speed does not depend on
# them) and a VSE model trained one epoch on a small 2048-d fixture. Per thread count T
# (1, then the cores), items per second of:
# - decode alone: vtr-decode --frames 8 --threads T, the frames thrown away;
# - backbone alone: vtr-features --threads T on those frames, decoded before (its
#   preprocessing included: the resize and crop that vtr-index does too);
# - vtr-index --threads T --decode-ahead 0 (each file decoded in its turn), then
#   --decode-ahead 2 (the default: the next files decoded on a thread of their own while
#   the backbone and the model embed the current one), each into a new index; vtr-index
#   also makes each sampled frame's thumbnail and one-frame embedding and commits to the
#   catalog.
# Target (issue 21 item 4): vtr-index at least 0.9x the rate of its slowest stage alone.
#
#   sh bench/index/run.sh [--append]      (from the top of the tree, after make)
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh
append=
[ "${1:-}" = --append ] && append=--append
CLIPS=${CLIPS:-24}
PY=/usr/bin/python3
PATH=$(pwd)/bin:$PATH
export OMP_WAIT_POLICY=passive
dir=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-index-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "bench/index: $*" >&2
    exit 1
}
say() { echo "bench/index: $*" >&2; }
now() { $PY -c 'import time; print(time.monotonic())'; }

say "$CLIPS clips, ResNet-50 weights, a model"
vtr-synth --scenes "$CLIPS" --size 640x360 --frames 150 "$dir/archive" >/dev/null 2>&1 ||
    fail "vtr-synth"
rm -f "$dir/archive"/*.json
$PY tests/fixtures/make_backbone_fixtures.py random-weights resnet50 "$dir/w.safetensors" 0 ||
    fail "weights"
. tests/fixtures/tiny_model.sh
tiny_model "$dir" 2048 1024 300 32
files=$(ls "$dir/archive"/*.mp4)
n=$(echo "$files" | wc -l)

load_before=$(cut -d' ' -f1 /proc/loadavg)
: >"$dir/times.txt"
for t in 1 $(nproc); do
    say "$t thread(s)"
    # shellcheck disable=SC2086 # a list of files
    vtr-decode --frames 8 --threads "$t" -o "$dir/frames.rec" $files 2>"$dir/err" ||
        fail "vtr-decode: $(cat "$dir/err")"
    for round in 1 2; do
        a=$(now)
        # shellcheck disable=SC2086
        vtr-decode --frames 8 --threads "$t" $files >/dev/null 2>"$dir/err" ||
            fail "vtr-decode: $(cat "$dir/err")"
        b=$(now)
        vtr-features -w "$dir/w.safetensors" -a resnet50 --threads "$t" "$dir/frames.rec" \
            >/dev/null 2>"$dir/err" || fail "vtr-features: $(cat "$dir/err")"
        c=$(now)
        for ahead in 0 2; do
            rm -rf "$dir/ix"
            s=$(now)
            vtr-index --model "$CK" --weights "$dir/w.safetensors" \
                --arch resnet50 --frames 8 --threads "$t" --decode-ahead "$ahead" \
                "$dir/archive" --index "$dir/ix" 2>"$dir/err" || fail "vtr-index: $(cat "$dir/err")"
            e=$(now)
            echo "$t index$ahead $s $e" >>"$dir/times.txt"
        done
        echo "$t decode $a $b" >>"$dir/times.txt"
        echo "$t backbone $b $c" >>"$dir/times.txt"
    done
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
command="sh bench/index/run.sh${append:+ --append}"
[ "$CLIPS" = 24 ] || command="CLIPS=$CLIPS $command"
$PY - "$dir/times.txt" "$n" "$command" "$load_before" "$load_after" $append <<'PYEOF'
import collections, datetime, sys
sys.path.insert(0, "bench")
import machine
path, n, command, lb, la = sys.argv[1:6]
n = int(n)
runs = collections.defaultdict(list)  # (threads, what) -> [seconds]
for line in open(path):
    t, what, a, b = line.split()
    runs[(int(t), what)].append(float(b) - float(a))
rate = lambda t, w: n / min(runs[(t, w)])
rows = []
for t in sorted({t for t, _ in runs}):
    d, bb, i0, i2 = (rate(t, w) for w in ("decode", "backbone", "index0", "index2"))
    slowest = min(d, bb)
    rows.append("| %d | %.2f | %.2f | %.2f | **%.2f** | %.2fx | **%.2fx** |" % (
        t, d, bb, i0, i2, i2 / i0, i2 / slowest))
times = "; ".join("%d thread(s) %s %s s" % (t, w, " ".join("%.2f" % x for x in v))
                  for (t, w), v in sorted(runs.items()))
report = f"""## vtr-index against its stages alone, decoding ahead (issue 21 item 4, {datetime.date.today()})

`{command}` at {machine.git_version()}, {machine.cpu_model()}, {machine.blas_setting()};
load average (1 min) {lb} before and {la} after. {n} vtr-synth scene clips (H.264,
640x360, 150 frames), 8 frames each, ResNet-50 (random weights), a VSE model (embed_size
1024); OMP_WAIT_POLICY=passive. Items per second from the faster of two runs of each:
decode alone (`vtr-decode --frames 8`), backbone alone (`vtr-features -a resnet50` on the
decoded frames, preprocessing included), and `vtr-index` (decode, backbone, model,
thumbnails, one-frame embeddings, catalog) with each file decoded in its turn
(`--decode-ahead 0`) and with the next files decoded ahead on a thread of their own
(`--decode-ahead 2`, the default), all with `--threads T`.

| T | decode alone | backbone alone | vtr-index, decode in turn | vtr-index, decode ahead | ahead / in turn | ahead / slowest stage |
|---|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

Target: vtr-index at least 0.9x the rate of its slowest stage alone. Seconds per run: {times}.
"""
machine.publish(report, len(sys.argv) > 6)
PYEOF
