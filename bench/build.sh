#!/bin/sh
# bench/build.sh: builds one benchmark program from its C source against build/libvtr.a,
# with the Makefile's CC, CFLAGS and LIBS (and, where the build has CUDA, the run path to
# build/libvtr-cuda.so, which its first CUDA call loads), as the benchmarks' run.sh
# scripts need it.
#
#   sh bench/build.sh SOURCE.c OUTPUT
#
# From the top of the tree after ./configure; brings build/libvtr.a up to date first.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: sh bench/build.sh SOURCE.c OUTPUT" >&2
    exit 2
fi
make -s build/libvtr.a
mkdir -p "$(dirname "$2")"
runpath=
if [ "$(sed -n 's/^HAVE_CUDA *= *//p' Makefile)" = yes ]; then
    make -s build/libvtr-cuda.so
    runpath="-Wl,-rpath,$(pwd)/build"
fi
# shellcheck disable=SC2046,SC2086 # the flags are word lists
$(sed -n 's/^CC *= *//p' Makefile) $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. "$1" \
    build/libvtr.a $(sed -n 's/^LIBS *= *//p' Makefile) $runpath -o "$2"
