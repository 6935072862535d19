#!/bin/sh
# tests/gpu/fetch-deps.sh: downloads, here (Debian 12, amd64, with network), the Debian
# packages that the GPU check's reduced build (tests/gpu/gpu.mk) needs and that a machine
# lent with a GPU lacks: OpenBLAS (its library, cblas.h, and the Fortran runtime it
# links), jansson (safetensors), oneDNN (the backbone's CPU engine, with the OpenCL
# loader it links), and GNU make, for a machine with a compiler but no make. They go
# into .gpu-deps/ (ignored by git) as .deb files, about 20 MB, that travel with the
# working tree (carry ".gpu-deps"); unpacked they take 143 MB (84 MB of shared libraries
# alone), over the 64 MiB a call may carry, so tests/gpu/run.sh unpacks them where it
# runs.
#
#   sh tests/gpu/fetch-deps.sh
#
# Idempotent: a package already downloaded is kept. Exit 0 and the folder's size, or 1
# with one line saying what failed.
cd "$(dirname "$0")/../.." || exit 1
dir=.gpu-deps
packages="libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
libjansson4 libjansson-dev libdnnl2 libdnnl-dev ocl-icd-libopencl1 make"

arch=$(dpkg --print-architecture 2>/dev/null)
if [ "$arch" != amd64 ]; then
    echo "fetch-deps: needs Debian's apt on amd64 (the GPU machines are x86-64); this is '${arch:-not Debian}'" >&2
    exit 1
fi
mkdir -p "$dir" || exit 1
missing=
for p in $packages; do
    ls "$dir/${p}"_*_amd64.deb >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    # apt-get download writes into the current folder; a stale package list is refreshed once.
    # shellcheck disable=SC2086 # a list of names
    if ! (cd "$dir" && apt-get download $missing); then
        apt-get update >/dev/null || { echo "fetch-deps: apt-get update failed" >&2; exit 1; }
        # shellcheck disable=SC2086
        (cd "$dir" && apt-get download $missing) ||
            { echo "fetch-deps: apt-get download$missing failed" >&2; exit 1; }
    fi
fi
for f in "$dir"/*.deb; do echo "  ${f##*/}"; done
echo "fetch-deps: $(du -sh "$dir" | cut -f1) in $dir (carry it: [\"$dir\"])"
