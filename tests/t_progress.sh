#!/bin/sh
# Progress on a terminal (lib/log.h), under a pseudo-terminal made by script(1): in a
# pipeline (vtr-decode | vtr-features) each stage prints whole lines that name it, never
# redrawing a line another stage shares; a failed item's message stays one line.
set -u
for p in vtr-decode vtr-features vtr-synth; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
command -v script >/dev/null 2>&1 || { echo "script (util-linux) not found"; exit 77; }
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
cd "$dir" || exit 1
vtr-synth --frames 10 --size 64x64 a.mp4 && vtr-synth --frames 10 --size 64x64 b.mp4 ||
    fail "vtr-synth"
$PY "$OLDPWD/tests/fixtures/make_backbone_fixtures.py" random-weights resnet18 w.safetensors 1 ||
    fail "weights"
script -qec "vtr-decode --frames 2 --size 64x64 a.mp4 b.mp4 | vtr-features -w w.safetensors --resize 0 --crop 0 >f.rec" \
    log >/dev/null 2>&1 || fail "the pipeline under script: $(cat log)"
# the terminal's lines (its \r\n turned into \n); script's own first and last lines dropped
tr -d '\r' <log | grep -v '^Script ' | grep -v '^$' >lines
grep -qx 'vtr-decode: items: 2/2, [0-9.]*/s' lines && grep -qx 'vtr-features: items: 2, [0-9.]*/s' lines ||
    fail "each stage's final line, named: $(cat lines)"
grep -v '^vtr-decode: items: \|^vtr-features: items: ' lines && fail "other lines: $(cat lines)"
$PY -c 'import sys; b = open(sys.argv[1], "rb").read(); assert b"\x1b[K" not in b and b"\r\r" not in b, b' log ||
    fail "a stage redrew a line: $(cat -A log)"
exit 0
