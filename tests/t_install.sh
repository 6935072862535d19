#!/bin/sh
# make install honours DESTDIR and PREFIX, and the installed programs run.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s install DESTDIR="$tmp" PREFIX=/opt/vtr >/dev/null
for p in bin/vtr-*; do
    [ -x "$tmp/opt/vtr/$p" ] || { echo "missing $tmp/opt/vtr/$p"; exit 1; }
done
"$tmp/opt/vtr/bin/vtr-inspect" --help | grep -q '^usage: vtr-inspect'
make -s uninstall DESTDIR="$tmp" PREFIX=/opt/vtr >/dev/null
[ -z "$(ls "$tmp/opt/vtr/bin")" ] || { echo "uninstall left files"; exit 1; }
