#!/bin/sh
# Every program answers --help (exit 0) and --version with its name and the version: the
# release of the file VERSION and the commit ("vtr-train 0.1.0+g1a2b3c4"), as README says.
set -u
cd "$(dirname "$0")/.." || exit 1
release=$(cat VERSION)
n=0
for p in bin/vtr-*; do
    [ -x "$p" ] || continue
    name=${p#bin/}
    "$p" --help >/dev/null 2>&1 || { echo "FAIL: $name --help"; exit 1; }
    v=$("$p" --version 2>&1) || { echo "FAIL: $name --version: $v"; exit 1; }
    case $v in
    "$name $release+g"*) ;;
    *) echo "FAIL: $name --version said '$v', expected '$name $release+g...'"; exit 1 ;;
    esac
    n=$((n + 1))
done
[ $n -ge 12 ] || { echo "FAIL: only $n programs in bin/"; exit 1; }
