#!/bin/sh
# Output to a full disk (/dev/full): every program that prints results says so in one
# line naming the output and the cause ("stdout: No space left on device") and exits 1,
# never 0 and never silently. vtr-search and vtr-eval are checked in t_search.sh, where
# their index and model are made.
set -u
for p in vtr-gpo-synthetic vtr-inspect vtr-decode vtr-synth; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
[ -w /dev/full ] || { echo "no /dev/full"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# full CMD...: CMD's stdout on /dev/full: exit 1 and one line naming stdout and the cause
full() {
    "$@" >/dev/full 2>"$dir/err"
    rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q "^$1: .*stdout: .*No space left on device\$" "$dir/err" ||
        fail "$*: exit $rc: $(cat "$dir/err")"
}

vtr-synth --frames 3 "$dir/a.mp4" || fail "vtr-synth"
vtr-decode -o "$dir/a.vtr" "$dir/a.mp4" || fail "vtr-decode"
full vtr-gpo-synthetic --quick --steps 2 --patterns A --generators interp --threads 1
full vtr-gpo-synthetic --quick --steps 2 --patterns A --generators interp --threads 1 --json
full vtr-inspect "$dir/a.vtr"
full vtr-inspect --json "$dir/a.vtr"
full vtr-decode "$dir/a.mp4"
echo "ok"
