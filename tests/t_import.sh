#!/bin/sh
# vtr-import from the command line: every layout's fixture (tests/interop/import_fixtures.py)
# into a catalog, the summary line, --store/--half/--keep-going, --log-json, bad usage and
# bad inputs with their exit codes; the catalog is read back with Python's sqlite3.
set -u
PY=/usr/bin/python3
FX=tests/interop/import_fixtures.py
command -v vtr-import >/dev/null 2>&1 || { echo "vtr-import not built"; exit 77; }
[ -r "$FX" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy, h5py' 2>/dev/null || { echo "$PY with numpy and h5py is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# sql CATALOG QUERY: the first column of the first row
sql() {
    $PY -c 'import sqlite3, sys; r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone(); print(r[0] if r else "")' "$1" "$2"
}
for layout in npy-dir precomp hgr msrvtt vatex karpathy; do
    $PY $FX $layout "$dir/$layout" || fail "fixture $layout"
done
$PY $FX hgr "$dir/hgr-missing" missing-video || fail "fixture hgr missing-video"
$PY $FX hgr "$dir/hgr-bad-graph" bad-graph || fail "fixture hgr bad-graph"
$PY $FX precomp "$dir/precomp-bad" caps-mismatch || fail "fixture precomp caps-mismatch"
$PY $FX msrvtt "$dir/msrvtt-bad" bad-json || fail "fixture msrvtt bad-json"
cat="$dir/cat.db"

# 1. MSR-VTT annotations: the summary, the rows
vtr-import msrvtt "$dir/msrvtt/train_val_videodatainfo.json" "$dir/msrvtt/test_videodatainfo.json" \
    --catalog "$cat" --dataset msrvtt 2>"$dir/err" || fail "msrvtt: exit $?: $(cat "$dir/err")"
grep -q "msrvtt: 4 items (4 new), 9 captions; splits: train 2, val 1, test 1" "$dir/err" ||
    fail "msrvtt summary: $(cat "$dir/err")"
[ "$(sql "$cat" "select count(*) from captions")" = 9 ] || fail "msrvtt: captions in the catalog"
[ "$(sql "$cat" "select count(*) from splits where split = 'val'")" = 1 ] || fail "msrvtt: val split"

# 1b. MSR-VTT with a role graph file beside the annotations (as vtr-synth --scenes writes
# it): the graphs of 7 of the 9 captions stored, validated as hgr's, in the summary
mkdir "$dir/msrvtt-graphs" && cp "$dir/msrvtt"/*.json "$dir/msrvtt-graphs/" || fail "copy msrvtt"
$PY - "$dir/msrvtt-graphs" <<'PYEOF' || fail "msrvtt graph file"
import json, os, sys
d = sys.argv[1]
caps = [s["caption"] for f in ("train_val_videodatainfo.json", "test_videodatainfo.json")
        for s in json.load(open(os.path.join(d, f), encoding="utf-8"))["sentences"]]
def graph(c):
    w = c.split()
    nodes = {"ROOT": {"role": "ROOT", "spans": list(range(len(w))), "words": w},
             "1": {"role": "V", "spans": [1], "words": [w[1]]},
             "2": {"role": "ARG1", "spans": [0], "words": [w[0]]}}
    return [nodes, [["1", "2", "ARG1"]]]
g = {c: graph(c) for c in caps[:7]}
g["a caption nobody has"] = graph("a caption")
json.dump(g, open(os.path.join(d, "sent2rolegraph.augment.json"), "w", encoding="utf-8"), ensure_ascii=False)
PYEOF
vtr-import msrvtt "$dir/msrvtt-graphs/train_val_videodatainfo.json" "$dir/msrvtt-graphs/test_videodatainfo.json" \
    -c "$dir/graphs.db" -d msrvtt 2>"$dir/err" || fail "msrvtt graphs: exit $?: $(cat "$dir/err")"
grep -q "msrvtt: 4 items (4 new), 9 captions; splits: train 2, val 1, test 1; role graphs for 7 captions, 2 without one" "$dir/err" ||
    fail "msrvtt graphs summary: $(cat "$dir/err")"
[ "$(sql "$dir/graphs.db" "select count(*) from caption_graphs")" = 7 ] || fail "msrvtt: graphs in the catalog"
$PY -c "
import json, sqlite3
g = json.load(open('$dir/msrvtt-graphs/sent2rolegraph.augment.json', encoding='utf-8'))
db = sqlite3.connect('$dir/graphs.db')
for text, graph in db.execute('select c.text, g.graph from caption_graphs g join captions c on c.id = g.caption_id'):
    assert graph == json.dumps(g[text], separators=(',', ':'), ensure_ascii=False), graph
" || fail "msrvtt: stored graphs differ from the file's"
# an invalid graph fails the import with one line naming the file and the caption
$PY -c "
import json
p = '$dir/msrvtt-graphs/sent2rolegraph.augment.json'
g = json.load(open(p, encoding='utf-8'))
g['video1 caption 0'][0]['2']['spans'] = [-3]
json.dump(g, open(p, 'w', encoding='utf-8'), ensure_ascii=False)
" || fail "msrvtt bad graph file"
vtr-import msrvtt "$dir/msrvtt-graphs/train_val_videodatainfo.json" -c "$dir/graphs.db" -d msrvtt-bad-graph 2>"$dir/err"
rc=$?
[ $rc -eq 1 ] || fail "msrvtt bad graph: exit $rc, expected 1"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "msrvtt bad graph: expected one line: $(cat "$dir/err")"
grep -q 'msrvtt-graphs/sent2rolegraph.augment.json: role graph of caption "video1 caption 0": node "2"' "$dir/err" ||
    fail "msrvtt bad graph: $(cat "$dir/err")"
[ -z "$(sql "$dir/graphs.db" "select id from datasets where name = 'msrvtt-bad-graph'")" ] ||
    fail "msrvtt bad graph: dataset written"

# 2. HGR with frame features into a float16 store
vtr-import hgr "$dir/hgr" -c "$cat" -d msrvtt-hgr --store "$dir/sa" --half 2>"$dir/err" ||
    fail "hgr: exit $?: $(cat "$dir/err")"
grep -q "store $dir/sa: 6 items, 21 rows of dim 8" "$dir/err" || fail "hgr summary: $(cat "$dir/err")"
grep -q "13 captions; splits: train 3, val 1, test 2; role graphs for 11 captions, 2 without one; vocabulary of 16 words;" "$dir/err" ||
    fail "hgr summary of graphs and vocabulary: $(cat "$dir/err")"
[ "$(sql "$cat" "select count(*) from caption_graphs")" = 11 ] || fail "hgr: graphs in the catalog"
# the stored graph is the one Python's json.load reads for the caption (the last of a
# duplicate key), re-serialized compactly
$PY -c "
import json, sqlite3, sys
g = json.load(open('$dir/hgr/annotation/RET/sent2rolegraph.augment.json', encoding='utf-8'))
db = sqlite3.connect('$cat')
n = 0
for text, graph in db.execute('select c.text, g.graph from caption_graphs g join captions c on c.id = g.caption_id'):
    assert json.loads(graph) == g[text], text
    assert graph == json.dumps(g[text], separators=(',', ':'), ensure_ascii=False), graph
    n += 1
assert n == 11
w = json.loads(db.execute(\"select words from vocabularies where name = 'hgr'\").fetchone()[0])
assert w == list(json.load(open('$dir/hgr/annotation/RET/word2int.json')))
" || fail "hgr: graphs and vocabulary in the catalog"
grep -q '"dtype":"float16"' "$dir/sa/meta.json" || grep -q '"dtype": "float16"' "$dir/sa/meta.json" ||
    fail "hgr: the store is not float16: $(cat "$dir/sa/meta.json")"
[ "$(sql "$cat" "select rows from feature_stores where name = 'sa'")" = 21 ] ||
    fail "hgr: the store is not registered"
$PY -c "
import numpy as np, sys
rows = np.load('$dir/sa/rows.npy'); off = np.load('$dir/sa/offsets.npy')
keys = open('$dir/sa/keys.txt', encoding='utf-8').read().split('\n')[:-1]
i = keys.index('clips/v2')
assert rows[off[i] + 1, 4] == 2014, rows[off[i]:off[i + 1]]
assert keys[-1] == 'vid\u00e95' and off[-1] - off[-2] == 6
" || fail "hgr: store contents"

# an invalid role graph: exit 1, one line naming the caption and the cause
vtr-import hgr "$dir/hgr-bad-graph" -c "$cat" -d bad-graph 2>"$dir/err"
rc=$?
[ $rc -eq 1 ] || fail "bad graph: exit $rc, expected 1"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "bad graph: expected one line: $(cat "$dir/err")"
grep -q 'sent2rolegraph.augment.json: role graph of caption "a video3 caption number 1": node "3"' "$dir/err" ||
    fail "bad graph: $(cat "$dir/err")"

# 3. a video missing from the HDF5: exit 1, one line naming the file and the video, nothing
#    written; with --keep-going: exit 2, the item imported as failed
vtr-import hgr "$dir/hgr-missing" -c "$cat" -d bad --store "$dir/bad-sa" 2>"$dir/err"
rc=$?
[ $rc -eq 1 ] || fail "missing video: exit $rc, expected 1"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "missing video: expected one line: $(cat "$dir/err")"
grep -q 'tst_ft.hdf5: no dataset "vidé5" for video "vidé5"' "$dir/err" ||
    fail "missing video: message: $(cat "$dir/err")"
[ ! -e "$dir/bad-sa" ] || fail "missing video: a store was left"
[ -z "$(sql "$cat" "select id from datasets where name = 'bad'")" ] || fail "missing video: dataset written"
vtr-import hgr "$dir/hgr-missing" -c "$cat" -d bad --store "$dir/bad-sa" -k 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] || fail "--keep-going: exit $rc, expected 2: $(cat "$dir/err")"
grep -q "skipped the features of 1 item$" "$dir/err" || fail "--keep-going summary: $(cat "$dir/err")"
[ "$(sql "$cat" "select status from items where key = 'vidé5' and dataset_id = (select id from datasets where name = 'bad')")" = failed ] ||
    fail "--keep-going: the item's status"

# 4. precomp: the whole layout, then a caption count that does not match
vtr-import precomp "$dir/precomp" -c "$cat" -d coco --store "$dir/regions" 2>"$dir/err" ||
    fail "precomp: exit $?: $(cat "$dir/err")"
grep -q "coco: 9 items (9 new), 45 captions; splits: train 4, val 2, test 2, testall 3" "$dir/err" ||
    fail "precomp summary: $(cat "$dir/err")"
vtr-import precomp "$dir/precomp-bad" -c "$cat" -d coco2 2>"$dir/err"
[ $? -eq 1 ] || fail "precomp caps mismatch: expected exit 1"
grep -q "test_caps.txt: 9 lines for 2 images of test_ims.npy; expected 5 per image (10)" "$dir/err" ||
    fail "precomp caps mismatch: message: $(cat "$dir/err")"

# 5. npy-dir and vatex with SPLIT=, karpathy, with JSON events
vtr-import npy-dir train="$dir/npy-dir/a" "$dir/npy-dir/b" -c "$cat" -d npy -s "$dir/npy-store" \
    2>"$dir/err" || fail "npy-dir: exit $?: $(cat "$dir/err")"
grep -q "npy: 4 items (4 new), 0 captions; splits: train 3; store" "$dir/err" ||
    fail "npy-dir summary: $(cat "$dir/err")"
vtr-import vatex "$dir/vatex/vatex_training_v1.0.json" "$dir/vatex/vatex_validation_v1.0.json" \
    extra="$dir/vatex/other.json" -c "$cat" -d vatex 2>"$dir/err" || fail "vatex: exit $?"
grep -q "vatex: 6 items (6 new), 11 captions; splits: train 2, val 2, extra 2" "$dir/err" ||
    fail "vatex summary: $(cat "$dir/err")"
vtr-import karpathy "$dir/karpathy/dataset_coco.json" -c "$cat" -d coco-karpathy --log-json \
    2>"$dir/err" || fail "karpathy: exit $?"
grep -q '"event":"imported"' "$dir/err" || fail "karpathy: no imported event: $(cat "$dir/err")"
grep '"event":"imported"' "$dir/err" | grep -q '"splits":{"train":2,"restval":1,"val":1,"test":2}' ||
    fail "karpathy: splits in the event: $(cat "$dir/err")"

# 6. bad JSON names the file and the place; nothing is written
vtr-import msrvtt "$dir/msrvtt-bad/train_val_videodatainfo.json" "$dir/msrvtt-bad/test_videodatainfo.json" \
    -c "$cat" -d msrvtt-bad 2>"$dir/err"
[ $? -eq 1 ] || fail "bad JSON: expected exit 1"
grep -q "test_videodatainfo.json: line 1 column" "$dir/err" || fail "bad JSON: message: $(cat "$dir/err")"
[ -z "$(sql "$cat" "select id from datasets where name = 'msrvtt-bad'")" ] || fail "bad JSON: dataset written"
vtr-import karpathy "$dir/nowhere.json" -c "$cat" -d x 2>"$dir/err"
[ $? -eq 1 ] || fail "missing file: expected exit 1"
grep -q "nowhere.json: No such file or directory" "$dir/err" || fail "missing file: $(cat "$dir/err")"

# 7. bad usage: exit 1 with a hint
for args in "" "nosuch x -c $cat -d d" "msrvtt -c $cat -d d" "npy-dir $dir/npy-dir/a -c $cat -d d" \
    "msrvtt x.json -c $cat -d d --store $dir/s" "precomp a b -c $cat -d d" "msrvtt x.json -d d" \
    "msrvtt x.json -c $cat" "karpathy x.json -c $cat -d d --hgr-mean-pooled" \
    "precomp x -c $cat -d d --captions-per-image 0"; do
    # shellcheck disable=SC2086
    vtr-import $args 2>"$dir/err" >/dev/null
    rc=$?
    [ $rc -eq 1 ] || fail "'vtr-import $args': exit $rc, expected 1"
    grep -q "vtr-import: " "$dir/err" || fail "'vtr-import $args': no message"
done
vtr-import --help | grep -q "Usage: vtr-import LAYOUT" || fail "--help"
exit 0
