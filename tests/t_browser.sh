#!/bin/sh
# vtr-serve's page in a real browser (headless Chromium, driven over the DevTools protocol
# by tests/browser/check_page.py): it loads, a query is typed and Search clicked, the hits
# appear with their thumbnails, clicking the WebM hit plays it from the moment the server
# chose; the runs page lists the model's training run and draws its curves and GPO's
# coefficients. Screenshots of the hits, the player and the runs page go to
# $VTR_SCREENSHOTS (kept)
# or a temporary folder. Skips where Chromium or python3-websocket is not installed
# (apt-get install chromium python3-websocket; .ci/run installs them).
set -u
for p in vtr-serve vtr-index vtr-synth vtr-train vtr-import; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
command -v chromium >/dev/null 2>&1 || { echo "chromium is not installed (apt-get install chromium)"; exit 77; }
$PY -c 'import numpy, websocket' 2>/dev/null ||
    { echo "$PY lacks numpy or websocket (apt-get install python3-websocket)"; exit 77; }
dir=$(mktemp -d)
pids=
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
. tests/fixtures/served_archive.sh
served_archive "$dir"
serve "$dir/serve.log" --runs "$dir/run" "$dir/ix"
shots=${VTR_SCREENSHOTS:-$dir/shots}
timeout 120 $PY tests/browser/check_page.py "$URL/" "a video of a cat" b.webm "$shots" 1 ||
    fail "the page in Chromium (vtr-serve's log: $(cat "$dir/serve.log"))"
for f in hits player runs; do
    $PY -c 'import sys; sys.exit(open(sys.argv[1], "rb").read(8) != b"\x89PNG\r\n\x1a\n")' \
        "$shots/$f.png" || fail "no screenshot $f.png"
done
echo "ok"
