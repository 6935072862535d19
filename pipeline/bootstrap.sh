#!/bin/sh
# Quick start on Debian 12: install the packages vtr needs (as root), configure (once),
# build, fetch nsfwjs's pretrained models with npm when it can (.cache/nsfwjs), then run
# `make TARGET`. Usage: sh pipeline/bootstrap.sh [demo|check|all|...]
# Safe to rerun: installed packages and an up-to-date build are left as they are.
set -eu
cd "$(dirname "$0")/.."
target=${1:-all}

missing=
for p in $(grep -v '^#' pipeline/debian-packages); do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bootstrap: missing Debian packages:$missing" >&2
        echo "bootstrap: run as root, or install them: sudo apt-get install$missing" >&2
        exit 1
    fi
    echo "bootstrap: installing$missing"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

if [ ! -f Makefile ] || [ configure -nt Makefile ] || [ Makefile.in -nt Makefile ]; then
    ./configure --enable-werror
fi
make -j"$(nproc)" all
# a pretrained backbone for the demo and the TF.js parity tests, when npm can fetch it
sh pipeline/nsfwjs.sh .cache/nsfwjs ||
    echo "bootstrap: no pretrained MobileNetV2 (above): the demo falls back to an untrained" \
        "ResNet-18, and the tests against TensorFlow.js skip"
make "$target"
