#!/bin/sh
# vtr-serve end to end over an archive indexed by vtr-index (vtr-synth videos, an image,
# random ResNet-18 weights, a tiny trained model): the page; /api/search gives what
# vtr-search --json gives, plus media URLs and the frames vtr-index kept (thumbnails that
# are JPEGs, the start at the best frame's time, recomputed here from the catalog);
# offset pages; "more like this" ranks by the stored rows' inner products and leaves the
# item out; a query by a path and by an upload find the file itself first; /media serves
# the file's bytes and byte ranges (206, suffix, 416); hostile requests: traversal in the
# URL and in keys, a file of the archive that is not indexed, unknown index, bad k,
# long queries, other methods, an upload over the cap: each a JSON error with its status;
# a client that disconnects mid-response; 32 concurrent clients for 3 s without an error
# (bench/serve/load.py); --approx and --exact (an approximate index made by vtr-approx
# gives the exact results); vtr-index adding a file while it serves (the
# next search sees it); a non-loopback address warns and refuses path queries; SIGTERM
# ends it with status 0; --device errors (a bad name, --approx with cuda, no GPU).
set -u
for p in vtr-serve vtr-index vtr-search vtr-approx vtr-synth vtr-train vtr-import; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
command -v curl >/dev/null 2>&1 || { echo "curl is not installed (apt-get install curl)"; exit 77; }
PY=/usr/bin/python3
SCRIPT=tests/fixtures/make_backbone_fixtures.py
[ -f "$SCRIPT" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy, sqlite3' 2>/dev/null || { echo "$PY with numpy is not available"; exit 77; }
dir=$(mktemp -d)
pids=
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

# ---- fixtures ------------------------------------------------------------------------
. tests/fixtures/served_archive.sh
served_archive "$dir"
echo "secret" >"$dir/secret.txt"

# expect STATUS PATH WORDS: GET answers STATUS with a JSON error naming WORDS
expect_error() {
    code=$(get "$2" "$dir/body")
    [ "$code" = "$1" ] || fail "GET $2: status $code, not $1: $(cat "$dir/body")"
    grep -q "\"error\":\"[^\"]*$3" "$dir/body" || fail "GET $2: error does not say '$3': $(cat "$dir/body")"
}

serve "$dir/serve.log" "$dir/ix"
grep -q 'serving 1 index at http://127.0.0.1:' "$dir/serve.log" || fail "address line: $(cat "$dir/serve.log")"

# ---- the page and the indexes ---------------------------------------------------------
[ "$(get / "$dir/page.html")" = 200 ] || fail "GET /"
grep -q '<title>vtr search</title>' "$dir/page.html" || fail "the page"
cmp -s "$dir/page.html" index/web_page.html || fail "the page is not index/web_page.html"
[ "$(get /api/indexes "$dir/ixs.json")" = 200 ] || fail "GET /api/indexes"
$PY - "$dir/ixs.json" <<'EOF' || fail "/api/indexes"
import json, sys
j = json.load(open(sys.argv[1]))
ix, = j["indexes"]
assert ix["name"] == "ix" and ix["items"] == 4 and ix["media_queries"] is True, j
assert ix["backbone"] == "resnet18" and j["path_queries"] is True, j
EOF

# ---- text search: vtr-search's answer, with media URLs and frames ----------------------
Q='a%20video%20of%20a%20cat'
[ "$(get "/api/search?q=$Q&k=4" "$dir/s.json")" = 200 ] || fail "search: $(cat "$dir/s.json")"
vtr-search --index "$dir/ix" --json -k 4 "a video of a cat" >"$dir/cli.json" 2>"$dir/err" ||
    fail "vtr-search: $(cat "$dir/err")"
[ "$(get "/api/search?q=$Q&k=2&offset=2" "$dir/s2.json")" = 200 ] || fail "search offset"
$PY - "$dir" <<'EOF' || fail "search results"
import json, sqlite3, sys
import numpy as np
d = sys.argv[1]
s = json.load(open(d + "/s.json"))
cli = json.load(open(d + "/cli.json"))
extra = ("media", "start", "thumb", "frames")
for a, b in zip(s["results"], cli["results"]):
    assert {k: v for k, v in a.items() if k not in extra} == b, (a, b)
assert len(s["results"]) == 4 and s["index"] == "ix" and s["offset"] == 0
assert s["query"] == cli["query"] and s["words"] == cli["words"]
page = json.load(open(d + "/s2.json"))
assert [r["key"] for r in page["results"]] == [r["key"] for r in s["results"][2:]], page
assert [r["rank"] for r in page["results"]] == [3, 4] and page["offset"] == 2
db = sqlite3.connect(d + "/ix/catalog.sqlite")
for r in s["results"]:
    assert r["media"].startswith("/media?index=ix&key="), r
    rows = db.execute("SELECT f.position, f.time_s, f.vector FROM item_frames f JOIN items i"
                      " ON i.id = f.item_id WHERE i.key = ? ORDER BY f.position",
                      (r["key"],)).fetchall()
    assert len(rows) == 3 and len(r["frames"]) == 3, r
    for (pos, t, v), f in zip(rows, r["frames"]):
        assert abs(f["time"] - t) < 1e-9 and f["thumb"].endswith("&frame=%d" % pos), (f, t)
    # the start is the time of the frame whose stored vector scores highest
    scores = [f["score"] for f in r["frames"]]
    assert r["start"] == r["frames"][int(np.argmax(scores))]["time"], r
    assert r["thumb"] == r["frames"][int(np.argmax(scores))]["thumb"], r
print("ok")
EOF
thumb=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["thumb"])' "$dir/s.json")
[ "$(get "$thumb" "$dir/t.jpg")" = 200 ] || fail "GET $thumb"
$PY -c 'import sys; b = open(sys.argv[1], "rb").read(); sys.exit(not (b[:2] == b"\xff\xd8" and b[-2:] == b"\xff\xd9"))' "$dir/t.jpg" ||
    fail "the thumbnail is not a JPEG"

# ---- the runs page's data: the model's training run, its curves and GPO figure ----------
kill $PID
wait $PID 2>/dev/null
serve "$dir/serve.log" --runs "$dir" --runs "$dir/run/" "$dir/ix"
[ "$(get /api/runs "$dir/runs.json")" = 200 ] || fail "GET /api/runs: $(cat "$dir/runs.json")"
[ "$(get "/plot/curves?runs=run" "$dir/curves.svg")" = 200 ] || fail "curves: $(cat "$dir/curves.svg")"
[ "$(get "/plot/gpo?run=run&format=png" "$dir/gpo.png")" = 200 ] || fail "gpo: $(cat "$dir/gpo.png")"
$PY - "$dir" <<'EOF' || fail "the runs' data"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
runs = json.load(open(d + "/runs.json"))["runs"]
# the root $dir holds one run ("run"); naming it again lists it once
assert [r["name"] for r in runs] == ["run"], runs
m = [json.loads(l) for l in open(d + "/run/metrics.jsonl") if l.strip()]
assert runs[0]["epochs"] == len(m) and abs(runs[0]["last_loss"] - m[-1]["loss"]) < 1e-9, runs
ET.parse(d + "/curves.svg")
assert open(d + "/gpo.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("ok")
EOF
expect_error 404 "/plot/curves?runs=run,../../etc" "no run named ../../etc"
expect_error 404 "/plot/gpo?run=$dir/run" "no run named"
expect_error 400 "/plot/gpo?run=run&format=gif" "unknown plot format"
expect_error 400 "/plot/curves" "no run"

# ---- more like this -----------------------------------------------------------------
[ "$(get "/api/similar?key=a.mp4&k=10" "$dir/sim.json")" = 200 ] || fail "similar: $(cat "$dir/sim.json")"
$PY - "$dir" <<'EOF' || fail "more like this"
import json, sqlite3, sys
import numpy as np
d = sys.argv[1]
sim = json.load(open(d + "/sim.json"))
db = sqlite3.connect(d + "/ix/index.sqlite")
vec = {}
for sid, in db.execute("SELECT id FROM segments ORDER BY id"):
    m = np.load("%s/ix/seg-%06d.npy" % (d, sid)).astype(np.float64)
    for row, key in db.execute("SELECT row, key FROM entries WHERE segment = ? AND live = 1",
                               (sid,)):
        vec[key] = m[row]
assert sim["similar_to"] == "a.mp4"
want = sorted((k for k in vec if k != "a.mp4"), key=lambda k: -vec[k] @ vec["a.mp4"])
got = [r["key"] for r in sim["results"]]
assert got == want, (got, want)
for r in sim["results"]:
    assert abs(r["score"] - vec[r["key"]] @ vec["a.mp4"]) < 1e-3, r
print("ok")
EOF

# ---- queries by a file: by path, and uploaded ----------------------------------------
[ "$(get "/api/query-media?path=$A/e.png&k=2" "$dir/qp.json")" = 200 ] || fail "query by path: $(cat "$dir/qp.json")"
code=$(curl -s -o "$dir/qu.json" -w '%{http_code}' --data-binary @"$A/b.webm" "$URL/api/query-media?k=2&name=b.webm")
[ "$code" = 200 ] || fail "upload: $code $(cat "$dir/qu.json")"
$PY - "$dir" <<'EOF' || fail "queries by a file"
import json, sys
d = sys.argv[1]
qp, qu = json.load(open(d + "/qp.json")), json.load(open(d + "/qu.json"))
assert qp["results"][0]["key"] == "e.png" and qp["results"][0]["score"] > 0.999, qp
assert qp["media"].endswith("/e.png") and qp["duration"] == 0, qp
assert qu["results"][0]["key"] == "b.webm" and qu["results"][0]["score"] > 0.999, qu
assert qu["media"] == "b.webm", qu
print("ok")
EOF
code=$(curl -s -o "$dir/bad.json" -w '%{http_code}' --data-binary @"$dir/secret.txt" "$URL/api/query-media")
[ "$code" = 400 ] || fail "a text file uploaded: status $code: $(cat "$dir/bad.json")"

# ---- media: whole files, ranges ---------------------------------------------------------
[ "$(get "/media?key=sub%2Fc%20d.mp4" "$dir/m.mp4")" = 200 ] || fail "GET media"
cmp -s "$dir/m.mp4" "$A/sub/c d.mp4" || fail "media bytes differ"
size=$(wc -c <"$A/a.mp4")
code=$(curl -s -D "$dir/h" -o "$dir/part" -w '%{http_code}' -H 'Range: bytes=10-29' "$URL/media?key=a.mp4")
[ "$code" = 206 ] || fail "range: status $code"
grep -qi "^content-range: bytes 10-29/$size" "$dir/h" || fail "range header: $(cat "$dir/h")"
grep -qi '^content-type: video/mp4' "$dir/h" || fail "content type: $(cat "$dir/h")"
dd if="$A/a.mp4" bs=1 skip=10 count=20 2>/dev/null | cmp -s - "$dir/part" || fail "range bytes"
code=$(curl -s -o "$dir/part" -w '%{http_code}' -H 'Range: bytes=-7' "$URL/media?key=a.mp4")
[ "$code" = 206 ] && tail -c 7 "$A/a.mp4" | cmp -s - "$dir/part" || fail "suffix range"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Range: bytes=$size-" "$URL/media?key=a.mp4")
[ "$code" = 416 ] || fail "a range past the end: status $code"

# ---- hostile and bad requests ---------------------------------------------------------
expect_error 404 "/../../../../etc/passwd" "nothing at"
expect_error 404 "/media?key=../../../../etc/passwd" "no item"
expect_error 404 "/media?key=$dir/secret.txt" "no item"
expect_error 404 "/media?key=a.mp4&index=nope" "no index named nope"
expect_error 404 "/thumb?key=a.mp4&frame=9" "no picture of frame 9"
expect_error 400 "/api/search?q=cat&k=0" "k wants an integer"
expect_error 400 "/api/search?q=cat&k=600&offset=600" "offset + k is at most 1000"
expect_error 400 "/api/search" "no query"
expect_error 404 "/api/similar?key=nope.mp4" "no item nope.mp4"
long=$($PY -c 'print("cat%20" * 300)')
expect_error 414 "/api/search?q=$long" "at most 1000"
code=$(curl -s -o "$dir/body" -w '%{http_code}' -X DELETE "$URL/media?key=a.mp4")
[ "$code" = 405 ] || fail "DELETE: status $code"
head -c 3000000 /dev/zero >"$dir/big"
serve "$dir/serve2.log" --max-upload 1 "$dir/ix"
code=$(curl -s -o "$dir/body" -w '%{http_code}' --data-binary @"$dir/big" "$URL/api/query-media")
[ "$code" = 413 ] || fail "an upload over --max-upload: status $code $(cat "$dir/body")"
code=$(curl -s -o "$dir/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$dir/big" "$URL/api/query-media")
[ "$code" = 413 ] || fail "a chunked upload over --max-upload: status $code $(cat "$dir/body")"
kill $PID
wait $PID 2>/dev/null
serve "$dir/serve.log" "$dir/ix"

# a client that goes away in the middle of a response, many times; the server goes on
$PY - "${URL#http://}" <<'EOF' || fail "disconnecting clients"
import socket, sys
host, port = sys.argv[1].split(":")
for _ in range(20):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /media?key=a.mp4 HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(10)
    s.close()
EOF
[ "$(get "/api/search?q=cat&k=1" "$dir/body")" = 200 ] || fail "after disconnects"

# 32 clients at once for 3 s (bench/serve runs 30 s): no request fails
printf 'a video of a cat\nthe dog appears\n' >"$dir/q.txt"
$PY bench/serve/load.py "$URL" 32 3 "$dir/q.txt" a.mp4 b.webm "sub/c d.mp4" >"$dir/load.json" ||
    fail "under load: $(cat "$dir/load.json")"

# ---- an update while it serves --------------------------------------------------------
vtr-synth --frames 8 --size 64x64 --first-index 40 "$A/new.mp4" || fail "vtr-synth new"
$IX "$A" --index "$dir/ix" 2>"$dir/err" || fail "vtr-index update: $(cat "$dir/err")"
sleep 1.2
[ "$(get "/api/search?q=cat&k=10" "$dir/body")" = 200 ] || fail "search after the update"
grep -q '"key":"new.mp4"' "$dir/body" || fail "the new file is not found: $(cat "$dir/body")"
grep -q '"generation":2' "$dir/body" || fail "generation: $(cat "$dir/body")"
kill -TERM $PID
wait $PID
[ $? -eq 0 ] || fail "SIGTERM: exit status not 0"

# ---- the approximate index: --approx without one is refused; with one (vtr-approx), the
#      same results as exact search; --exact does not use it ----------------------------
vtr-serve --port 0 --approx "$dir/ix" 2>"$dir/err" && fail "--approx without an approximate index"
[ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q 'approx' "$dir/err" || fail "--approx: $(cat "$dir/err")"
vtr-approx --index "$dir/ix" --kind hnsw 2>"$dir/err" || fail "vtr-approx: $(cat "$dir/err")"
serve "$dir/serve4.log" --approx "$dir/ix"
[ "$(get /api/indexes "$dir/ixs.json")" = 200 ] || fail "indexes with --approx"
grep -q '"approximate":true' "$dir/ixs.json" || fail "not approximate: $(cat "$dir/ixs.json")"
[ "$(get "/api/search?q=$Q&k=5" "$dir/sa.json")" = 200 ] || fail "approximate search"
kill $PID
serve "$dir/serve5.log" --exact "$dir/ix"
[ "$(get /api/indexes "$dir/ixs.json")" = 200 ] || fail "indexes with --exact"
grep -q '"approximate":false' "$dir/ixs.json" || fail "--exact: $(cat "$dir/ixs.json")"
[ "$(get "/api/search?q=$Q&k=5" "$dir/se.json")" = 200 ] || fail "exact search"
kill $PID
$PY - "$dir" <<'EOF' || fail "approximate and exact results differ"
import json, sys
d = sys.argv[1]
a, e = json.load(open(d + "/sa.json")), json.load(open(d + "/se.json"))
assert [(r["key"], r["score"]) for r in a["results"]] == \
    [(r["key"], r["score"]) for r in e["results"]], (a, e)
print("ok")
EOF
vtr-serve --approx --exact "$dir/ix" 2>"$dir/err" && fail "--approx --exact accepted"
grep -q 'not both' "$dir/err" || fail "--approx --exact: $(cat "$dir/err")"

# ---- another address ------------------------------------------------------------------
serve "$dir/serve3.log" --address 0.0.0.0 "$dir/ix"
grep -q 'not a loopback address' "$dir/serve3.log" || fail "no warning: $(cat "$dir/serve3.log")"
URL=$(echo "$URL" | sed 's|0.0.0.0|127.0.0.1|')
expect_error 403 "/api/query-media?path=$A/e.png" "loopback"
kill $PID

# ---- bad command lines ------------------------------------------------------------------
vtr-serve 2>"$dir/err" && fail "no index accepted"
grep -q 'no index' "$dir/err" || fail "no index: $(cat "$dir/err")"
vtr-serve --port 0 "$dir/nowhere" 2>"$dir/err" && fail "a missing index accepted"
[ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q 'nowhere' "$dir/err" || fail "missing index: $(cat "$dir/err")"
vtr-serve --port 0 --address 'not an address' "$dir/ix" 2>"$dir/err" && fail "a bad address accepted"
grep -q "not an IPv4 or IPv6 address" "$dir/err" || fail "bad address: $(cat "$dir/err")"
# --device: a bad name, --approx with cuda, and cuda where no GPU is (or in a build without
# CUDA): one line, exit 1, before listening
vtr-serve --port 0 --device tpu "$dir/ix" 2>"$dir/err"
[ $? -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "unknown device 'tpu' (expected cpu, cuda or cuda:N)" "$dir/err" ||
    fail "--device tpu: $(cat "$dir/err")"
vtr-serve --port 0 --device cuda --approx "$dir/ix" 2>"$dir/err"
[ $? -eq 1 ] && grep -q 'searches exactly' "$dir/err" || fail "--device cuda --approx: $(cat "$dir/err")"
if ! nvidia-smi -L >/dev/null 2>&1; then
    vtr-serve --port 0 --device cuda:1 "$dir/ix" 2>"$dir/err"
    [ $? -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q 'run on the CPU (--device cpu)' "$dir/err" && grep -q 'ix' "$dir/err" ||
        fail "--device cuda without a GPU: $(cat "$dir/err")"
fi
vtr-serve --help | grep -q 'api/search' || fail "--help"
vtr-serve --version | grep -q '^vtr-serve ' || fail "--version"
echo "ok"
