#!/bin/sh
# make install honours DESTDIR and PREFIX and installs what a user needs: the programs
# (which run), their man pages (with help2man), libvtr with its headers and a pkg-config
# file that builds a program against it, the configs, the pipeline fragments and scripts,
# the docs; make uninstall removes all of it. With CUDA, the backend (lib/vtr/libvtr-cuda.so),
# which the installed programs and a program built through pkg-config find and load.
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
#include "lib/device.h"
#include "lib/error.h"
#include "lib/version.h"
int main(void)
{
    vtr_error err;
    vtr_fail(&err, VTR_ERR_INVALID, "built against vtr %s", vtr_version);
    puts(err.msg);
    char gpu[256];
    puts(vtr_cuda_init(0, gpu, sizeof gpu, &err) == VTR_OK ? gpu : err.msg);
    return 0;
}
C
# shellcheck disable=SC2046
cc "$tmp/prog.c" -o "$tmp/prog" $(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs vtr) ||
    { echo "could not build against the installed libvtr"; exit 1; }
"$tmp/prog" | grep -q "^built against vtr $(cat VERSION)+g" || { "$tmp/prog"; exit 1; }
if [ -f build/libvtr-cuda.so ]; then
    [ -s "$p/lib/vtr/libvtr-cuda.so" ] || { echo "missing $p/lib/vtr/libvtr-cuda.so"; exit 1; }
    # the program loaded the installed backend: it found a GPU or said none is visible
    "$tmp/prog" | sed -n 2p | grep -q -e '^no CUDA GPU is visible' -e ', cc [0-9]' ||
        { echo "the installed CUDA backend did not load: $("$tmp/prog" | sed -n 2p)"; exit 1; }
    readelf -d "$p/bin/vtr-train" | grep -q 'RUNPATH.*\$ORIGIN/../lib/vtr' ||
        { echo "installed vtr-train does not look in ../lib/vtr"; exit 1; }
fi
make -s uninstall DESTDIR="$tmp" PREFIX=/opt/vtr >/dev/null
left=$(find "$p" -type f)
[ -z "$left" ] || { echo "uninstall left files: $left"; exit 1; }
