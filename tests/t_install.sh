#!/bin/sh
# make install honours DESTDIR and PREFIX and installs what a user needs: the programs
# (which run), their man pages (with help2man), libvtr with its headers and a pkg-config
# file that builds a program against it, the configs, the pipeline fragments and scripts,
# the docs; make uninstall removes all of it.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s install DESTDIR="$tmp" PREFIX=/opt/vtr >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
p="$tmp/opt/vtr"
for f in bin/vtr-*; do
    [ -x "$p/$f" ] || { echo "missing $p/$f"; exit 1; }
    if command -v help2man >/dev/null 2>&1; then
        grep -q '^\.TH ' "$p/share/man/man1/${f#bin/}.1" || { echo "no man page for $f"; exit 1; }
    fi
done
"$p/bin/vtr-inspect" --help | grep -q '^usage: vtr-inspect'
for f in lib/libvtr.a lib/pkgconfig/vtr.pc include/vtr/lib/npy.h include/vtr/match/vse_model.h \
    share/vtr/configs/msrvtt-vse-inf.yaml share/vtr/pipeline/videos.mk \
    share/vtr/pipeline/slurm-array.sh share/doc/vtr/README.md share/doc/vtr/docs/training.md; do
    [ -s "$p/$f" ] || { echo "missing $p/$f"; exit 1; }
done
# a program built against the installed library, through pkg-config
sed -i "s|^prefix=.*|prefix=$p|" "$p/lib/pkgconfig/vtr.pc"
cat >"$tmp/prog.c" <<'C'
#include <stdio.h>
#include "lib/error.h"
#include "lib/version.h"
int main(void)
{
    vtr_error err;
    vtr_fail(&err, VTR_ERR_INVALID, "built against vtr %s", vtr_version);
    puts(err.msg);
    return 0;
}
C
# shellcheck disable=SC2046
cc "$tmp/prog.c" -o "$tmp/prog" $(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs vtr) ||
    { echo "could not build against the installed libvtr"; exit 1; }
"$tmp/prog" | grep -q "^built against vtr $(cat VERSION)+g" || { "$tmp/prog"; exit 1; }
make -s uninstall DESTDIR="$tmp" PREFIX=/opt/vtr >/dev/null
left=$(find "$p" -type f)
[ -z "$left" ] || { echo "uninstall left files: $left"; exit 1; }
