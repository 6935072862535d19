#!/bin/sh
# pipeline/released.mk on the fixtures of tests/interop/import_fixtures.py: the HGR layout
# (mean-pooled, float16) and SCAN precomp into one catalog and two stores; a rerun does
# nothing; a changed source file imports that release again; a missing release is one
# line and a failed make.
set -u
PY=/usr/bin/python3
FX=tests/interop/import_fixtures.py
for p in vtr-import make; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
[ -r "$FX" ] || { echo "run from the top of the source tree"; exit 77; }
$PY -c 'import numpy, h5py' 2>/dev/null || { echo "$PY with numpy and h5py is not available"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
$PY $FX hgr "$dir/hgr" || fail "fixture hgr"
$PY $FX precomp "$dir/precomp" || fail "fixture precomp"
rel() {
    make --no-print-directory -f pipeline/released.mk OUT="$dir/out" "$@"
}

rel HGR="$dir/hgr" HGR_MEAN_POOLED=1 IMPORT_FLAGS=--half DATASET=msrvtt >"$dir/log" 2>&1 ||
    fail "hgr: exit $?: $(cat "$dir/log")"
grep -q "store $dir/out/stores/msrvtt-hgr: 6 items, 6 rows of dim 8" "$dir/log" ||
    fail "hgr: $(cat "$dir/log")"
grep -q '"dtype": *"float16"' "$dir/out/stores/msrvtt-hgr/meta.json" || fail "hgr: not float16"
rel PRECOMP="$dir/precomp" DATASET=coco >"$dir/log" 2>&1 || fail "precomp: exit $?: $(cat "$dir/log")"
grep -q "coco: 9 items (9 new), 45 captions; splits: train 4, val 2, test 2, testall 3; store $dir/out/stores/coco-precomp: 9 items, 27 rows" \
    "$dir/log" || fail "precomp: $(cat "$dir/log")"
$PY -c "
import sqlite3, sys
db = sqlite3.connect('$dir/out/catalog.db')
names = sorted(r[0] for r in db.execute('select name from feature_stores'))
assert names == ['coco-precomp', 'msrvtt-hgr'], names
assert db.execute('select count(*) from datasets').fetchone()[0] == 2
" || fail "catalog"

# a rerun does nothing; a touched source imports again (replacing the store)
rel HGR="$dir/hgr" HGR_MEAN_POOLED=1 IMPORT_FLAGS=--half DATASET=msrvtt -q || fail "hgr: not up to date"
rel PRECOMP="$dir/precomp" DATASET=coco >"$dir/log" 2>&1 || fail "precomp rerun: exit $?"
grep -q vtr-import "$dir/log" && fail "precomp rerun imported again: $(cat "$dir/log")"
sleep 1
touch "$dir/precomp/test_caps.txt"
rel PRECOMP="$dir/precomp" DATASET=coco >"$dir/log" 2>&1 || fail "precomp after touch: exit $?"
grep -q "coco: 9 items (0 new), 45 captions" "$dir/log" || fail "precomp after touch: $(cat "$dir/log")"

# nothing there, nothing named
rel HGR="$dir/nowhere" >"$dir/log" 2>&1 && fail "a missing release: exit 0"
grep -q "HGR=$dir/nowhere: no annotation/RET/ref_captions.json" "$dir/log" || fail "missing: $(cat "$dir/log")"
rel >"$dir/log" 2>&1 && fail "no release named: exit 0"
grep -q "name a release" "$dir/log" || fail "no release: $(cat "$dir/log")"
exit 0
