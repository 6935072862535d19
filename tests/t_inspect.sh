#!/bin/sh
# vtr-inspect on files numpy and the reference safetensors writer made, and on bad input.
set -eu
command -v /usr/bin/python3 >/dev/null || { echo "no /usr/bin/python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "no numpy"; exit 77; }

/usr/bin/python3 -c "
import numpy as np
np.save('$tmp/a.npy', np.zeros((20, 2048), np.float16))"
(cd tests/interop && /usr/bin/python3 safetensors_ref.py write "$tmp")

out=$(vtr-inspect "$tmp/a.npy")
[ "$out" = "$tmp/a.npy: float16 (20, 2048)" ] || { echo "npy line: $out"; exit 1; }

vtr-inspect "$tmp/ref.safetensors" >"$tmp/st.txt"
head -n 1 "$tmp/st.txt" | grep -q "safetensors, [0-9]* tensors, metadata" ||
    { cat "$tmp/st.txt"; exit 1; }
# --json: the file's line (tensor count and metadata) first, then one per tensor
vtr-inspect --json "$tmp/ref.safetensors" | /usr/bin/python3 -c "
import json, sys
rows = [json.loads(l) for l in sys.stdin]
head, rows = rows[0], rows[1:]
assert head['kind'] == 'safetensors file' and head['tensors'] == len(rows) > 0, head
assert isinstance(head['metadata'], dict) and head['metadata'], head
assert all(r['kind'] == 'safetensors' and 'name' in r for r in rows), rows
"

# --version: the release and the commit
vtr-inspect --version | grep -Eq '^vtr-inspect [0-9]+\.[0-9]+\.[0-9]+\+g' ||
    { vtr-inspect --version; exit 1; }

# directories: a feature store and an embedding index (made by vtr-aggregate from it)
/usr/bin/python3 -c "
import numpy as np
for i in range(3):
    np.save('$tmp/feats_%d.npy' % i, np.ones((2 + i, 8), np.float32))"
mkdir "$tmp/npys"
mv "$tmp"/feats_*.npy "$tmp/npys/"
vtr-features --help >/dev/null 2>&1 && command -v vtr-import >/dev/null || { echo "vtr-import not built"; exit 77; }
vtr-import npy-dir "all=$tmp/npys" -c "$tmp/c.db" -d d --store "$tmp/store" 2>/dev/null
out=$(vtr-inspect "$tmp/store")
[ "$out" = "$tmp/store: feature store, 3 items, 9 rows of dimension 8" ] || { echo "store: $out"; exit 1; }
vtr-inspect --json "$tmp/store" | /usr/bin/python3 -c "
import json, sys
r = json.loads(sys.stdin.read())
assert r['kind'] == 'feature store' and (r['items'], r['rows'], r['dim']) == (3, 9, 8), r
"
set +e
vtr-inspect "$tmp/npys" >/dev/null 2>"$tmp/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "npys: a directory, but neither an embedding index" "$tmp/err.txt" ||
    { cat "$tmp/err.txt"; exit 1; }

# a bad file among good ones: reported by name, the others still shown, exit 2
printf 'garbage' >"$tmp/bad.bin"
set +e
vtr-inspect "$tmp/a.npy" "$tmp/bad.bin" "$tmp/ref.safetensors" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] || { echo "exit $rc, expected 2"; exit 1; }
grep -q "bad.bin: not an NPY file" "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
[ "$(wc -l <"$tmp/err.txt")" -eq 1 ] || { cat "$tmp/err.txt"; exit 1; }
grep -q "a.npy: float16" "$tmp/out.txt"
grep -q "safetensors, " "$tmp/out.txt"

# a file name that is not UTF-8 is shown escaped, in the table and in JSON
bad="$tmp/$(printf 'x\377').npy"
cp "$tmp/a.npy" "$bad"
out=$(vtr-inspect "$bad")
[ "$out" = "$tmp/x\xff.npy: float16 (20, 2048)" ] || { echo "non-UTF-8 name: $out"; exit 1; }
vtr-inspect --json "$bad" | /usr/bin/python3 -c "
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 1 and rows[0]['source'].endswith('/x\\\\xff.npy'), rows
" || { echo "non-UTF-8 name, --json"; exit 1; }

# usage error: exit 1
set +e
vtr-inspect --no-such-option >/dev/null 2>&1
[ $? -eq 1 ] || { echo "bad option did not exit 1"; exit 1; }
exit 0
