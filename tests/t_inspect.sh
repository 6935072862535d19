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
vtr-inspect --json "$tmp/ref.safetensors" | /usr/bin/python3 -c "
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert rows and all(r['kind'] == 'safetensors' and 'name' in r for r in rows), rows
"

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
