#!/bin/sh
# bench/serve/large.sh: the search page's text query over a large index, with and without
# the approximate index. A text query through vtr-serve's JSON API
# (/api/search?q=...&k=10, what the page calls), timed by curl one after the other, on:
# - a VSE∞ model with the MSR-VTT config's text side (word_dim 300, a BiGRU, GPO,
#   embed_size 1024), trained one epoch on a small precomp fixture: its text encoder
#   costs what a real one does, its embeddings mean nothing;
# - ROWS (1,000,000) synthetic rows with neighbourhoods (bench/search/search_bench.c
#   build, bench/search/faiss.sh's data), whose index then names that model;
# - the index's IVF-PQ approximate index (vtr-approx --kind ivfpq);
# - vtr-serve INDEX (the approximate index, its default from 100,000 items on), then
#   vtr-serve --exact INDEX, each started fresh.
#
#   sh bench/serve/large.sh [--append]      (from the top of the tree, after make)
#
# Needs about 2.3 GB of disk in TMPDIR and 5 GB of memory; ROWS=N for a quick try.
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh
append=
[ "${1:-}" = --append ] && append=--append
ROWS=${ROWS:-1000000}
PY=/usr/bin/python3
PATH=$(pwd)/bin:$PATH
export OMP_WAIT_POLICY=passive
[ -f build/libvtr.a ] && [ -f Makefile ] || { echo "bench/serve: run ./configure && make first" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-serve-large-XXXXXX")
pids=
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT
fail() {
    echo "bench/serve: $*" >&2
    exit 1
}
say() { echo "bench/serve: $*" >&2; }

say "a model with the MSR-VTT config's text side"
. tests/fixtures/tiny_model.sh
tiny_model "$dir" 512 1024 300 32
ck=$CK

say "$ROWS rows"
# shellcheck disable=SC2046 # the flags are word lists
cc $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. bench/search/search_bench.c build/libvtr.a \
    $(sed -n 's/^LIBS *= *//p' Makefile) -o "$dir/search_bench"
"$dir/search_bench" build "$dir/ix" "$ROWS" 1024 0 10000 >"$dir/build.txt"
# the index names the model, as vtr-index records it (index/archive_index.c)
$PY - "$dir/ix/index.sqlite" "$ck" <<'PYEOF'
import hashlib, json, sqlite3, sys
ck = sys.argv[2]
model = {"format": "vtr-archive-index", "model_id": hashlib.sha256(open(ck, "rb").read()).hexdigest(),
         "checkpoint": ck, "backbone": {"arch": "resnet18", "weights": "", "sha256": ""},
         "frames": 8, "preprocess": {"resize": 256, "crop": 224}}
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE meta SET model = ?", (json.dumps(model, sort_keys=True),))
db.commit()
PYEOF
say "the approximate index (IVF-PQ)"
t0=$(date +%s)
vtr-approx --index "$dir/ix" --kind ivfpq >"$dir/approx.txt" 2>&1 || fail "vtr-approx: $(cat "$dir/approx.txt")"
approx_s=$(($(date +%s) - t0))

. tests/fixtures/served_archive.sh # serve()
cat >"$dir/q.txt" <<'QEOF'
a video of a cat
a man is cooking in a kitchen
people dance on a stage
a red car drives down a road
a woman sings a song
children play football in a park
a dog runs on the beach
someone explains how to fix a bike
a news anchor talks about the weather
two men play tennis
QEOF
# time_queries: one line of seconds per query of q.txt against $URL
time_queries() {
    while IFS= read -r q; do
        enc=$($PY -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$q")
        curl -s -o "$dir/answer.json" -w '%{time_total}\n' "$URL/api/search?q=$enc&k=10"
        grep -q '"results"' "$dir/answer.json" || fail "query '$q': $(cat "$dir/answer.json")"
    done <"$dir/q.txt"
}
# uses_approx true|false: what the server's /api/indexes says of its index
uses_approx() {
    curl -s "$URL/api/indexes" >"$dir/indexes.json"
    $PY -c 'import json, sys; j = json.load(open(sys.argv[1]))
sys.exit(0 if str(j["indexes"][0]["approximate"]).lower() == sys.argv[2] else 1)' \
        "$dir/indexes.json" "$1" || fail "the server's approximate index is not $1: $(cat "$dir/indexes.json")"
}
load_before=$(cut -d' ' -f1 /proc/loadavg)
say "queries with the approximate index"
serve "$dir/serve.log" "$dir/ix"
time_queries >"$dir/approx_times.txt"
uses_approx true
kill "$PID"
wait "$PID" 2>/dev/null || true
say "queries, exact"
serve "$dir/serve-exact.log" --exact "$dir/ix"
time_queries >"$dir/exact_times.txt"
uses_approx false
kill "$PID"
wait "$PID" 2>/dev/null || true
load_after=$(cut -d' ' -f1 /proc/loadavg)

command="sh bench/serve/large.sh${append:+ --append}"
[ "$ROWS" = 1000000 ] || command="ROWS=$ROWS $command"
$PY - "$dir" "$command" "$load_before" "$load_after" "$approx_s" "$ROWS" $append <<'PYEOF'
import datetime, statistics, sys
sys.path.insert(0, "bench")
import machine
d, command, lb, la, approx_s, rows = sys.argv[1:7]
def times(name):
    return [float(x) * 1e3 for x in open("%s/%s_times.txt" % (d, name)).read().split()]
a, e = times("approx"), times("exact")
row = lambda t: "%.0f ms (%.0f to %.0f ms)" % (statistics.median(t), min(t), max(t))
report = f"""## The search page over {int(rows):,} items, with and without the approximate index ({datetime.date.today()})

`{command}` at {machine.git_version()}, {machine.cpu_model()}, {machine.blas_setting()};
load average (1 min) {lb} before and {la} after. A text query through `vtr-serve`'s JSON
API (`/api/search?q=...&k=10`, what the page calls), timed by `curl -w %{{time_total}}`,
10 different queries one after the other, each server started fresh. The model: VSE∞ with
the MSR-VTT config's text side (word_dim 300, a BiGRU, GPO, embed_size 1024) trained one
epoch on a small fixture; the index: {int(rows):,} synthetic 1024-d rows with
neighbourhoods (bench/search/faiss.sh's data) named for that model, and its IVF-PQ
approximate index (`vtr-approx --kind ivfpq`, {approx_s} s).

| | median of 10 (min to max) |
|---|---|
| with the approximate index (vtr-serve's default from 100,000 items) | {row(a)} |
| exact (`vtr-serve --exact`) | {row(e)} |

Per query, in order: approximate {" ".join("%.0f" % t for t in a)} ms; exact {" ".join("%.0f" % t for t in e)} ms.
"""
machine.publish(report, len(sys.argv) > 7)
PYEOF
