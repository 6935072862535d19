#!/bin/sh
# bench/serve: vtr-serve under load. CLIENTS (32) concurrent keep-alive clients for SECONDS
# (30) on loopback (bench/serve/load.py), cycling through what the search page asks for:
# a text query, "more like this", a thumbnail, a 64 KiB byte range of a video; over the
# archive tests/t_serve.sh indexes (three vtr-synth videos and an image, ResNet-18 random
# weights, a tiny model). Reports requests per second, errors (must be 0) and p50 / p99
# latency overall and per kind, with the load average before and after (the clients run
# on the same 2 cores as the server).
#
#   sh bench/serve/run.sh [--append]      (from the top of the tree, after make)
set -eu
cd "$(dirname "$0")/../.."
. bench/blas_kernel.sh
append=
[ "${1:-}" = --append ] && append=--append
CLIENTS=${CLIENTS:-32}
SECONDS_=${SECONDS_:-30}
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
PATH=$(pwd)/bin:$PATH
dir=$(mktemp -d)
pids=
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT
fail() {
    echo "bench/serve: $*" >&2
    exit 1
}
. tests/fixtures/served_archive.sh
served_archive "$dir"
serve "$dir/serve.log" "$dir/ix"
printf 'a video of a cat\nthe dog appears\nsomeone filmed a bird here\na red circle\n' >"$dir/q.txt"
load_before=$(cut -d' ' -f1 /proc/loadavg)
$PY bench/serve/load.py "$URL" "$CLIENTS" "$SECONDS_" "$dir/q.txt" a.mp4 b.webm "sub/c d.mp4" \
    e.png >"$dir/load.json" || fail "requests failed: $(cat "$dir/load.json")"
load_after=$(cut -d' ' -f1 /proc/loadavg)
command="sh bench/serve/run.sh${append:+ --append}"
[ "$CLIENTS" = 32 ] && [ "$SECONDS_" = 30 ] || command="CLIENTS=$CLIENTS SECONDS_=$SECONDS_ $command"
$PY - "$dir/load.json" "$command" "$load_before" "$load_after" $append <<'PYEOF'
import datetime, json, sys
sys.path.insert(0, "bench")
import machine
j = json.load(open(sys.argv[1]))
rows = "\n".join("| %s | %d | %.1f | %.1f |" % (k, v["requests"], v["p50_ms"], v["p99_ms"])
                 for k, v in j["kinds"].items())
report = f"""## vtr-serve under load: {j['clients']} clients on loopback ({datetime.date.today()})

`{sys.argv[2]}` at {machine.git_version()}, {machine.cpu_model()}, load average
{sys.argv[3]} before and {sys.argv[4]} after (the clients share the 2 cores with the server).
{j['clients']} keep-alive clients for {j['seconds']} s, each cycling through a text query
(k = 20), "more like this" (k = 20), a thumbnail and a 64 KiB byte range of a video, on the
archive of tests/t_serve.sh (4 items).

| requests | errors | per second | p50 ms | p99 ms |
|---|---|---|---|---|
| {j['requests']} | {j['errors']} | {j['per_second']} | {j['p50_ms']} | {j['p99_ms']} |

| kind | requests | p50 ms | p99 ms |
|---|---|---|---|
{rows}
"""
machine.publish(report, len(sys.argv) > 5)
PYEOF
