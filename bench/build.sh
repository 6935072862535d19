#!/bin/sh
# bench/build.sh: builds one benchmark program from its C source against build/libvtr.a,
# with the Makefile's CC, CFLAGS and LIBS (and the CUDA libraries where the build has
# CUDA), as the benchmarks' run.sh scripts need it.
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
cuda_libs=
if [ "$(sed -n 's/^HAVE_CUDA *= *//p' Makefile)" = yes ]; then
    cuda_libs="$(sed -n 's/^CUDA_LIBS *= *//p' Makefile) -lstdc++"
fi
# shellcheck disable=SC2046,SC2086 # the flags are word lists
$(sed -n 's/^CC *= *//p' Makefile) $(sed -n 's/^CFLAGS *= *//p' Makefile) -I. "$1" \
    build/libvtr.a $(sed -n 's/^LIBS *= *//p' Makefile) $cuda_libs -o "$2"
