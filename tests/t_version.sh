#!/bin/sh
# Every program answers --help (exit 0) and --version with its name and the version: the
# release of the file VERSION and the commit ("vtr-train 0.1.0+g1a2b3c4"), as README says,
# then the BLAS it uses. The BLAS kernel (lib/blas_kernel.h): with OPENBLAS_CORETYPE unset,
# a CPU whose /proc/cpuinfo shows AVX-512 gets an AVX-512 kernel, whatever OpenBLAS makes
# of its model name; a set OPENBLAS_CORETYPE is kept. vtr-search and vtr-serve add their
# top-k kernels (index/topk.h), vtr-features and vtr-index their convolutions' oneDNN,
# vtr-train its bfloat16 products' (lib/matmul.h).
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
    "$name $release+g"*"
BLAS: "*) ;;
    *) echo "FAIL: $name --version said '$v', expected '$name $release+g...' and 'BLAS: ...'"; exit 1 ;;
    esac
    n=$((n + 1))
done
[ $n -ge 12 ] || { echo "FAIL: only $n programs in bin/"; exit 1; }
# the programs that run CNNs also say which oneDNN and instruction set run them
for p in vtr-features vtr-index; do
    case $(bin/$p --version | sed -n 3p) in
    "convolutions: oneDNN "*", ISA "?*) ;;
    *) echo "FAIL: $p --version: no 'convolutions: oneDNN ..., ISA ...' line"; exit 1 ;;
    esac
done
flags=" $(sed -n 's/^flags[[:space:]]*:\(.*\)/\1/p' /proc/cpuinfo | head -1) "
# vtr-train says what its bfloat16 products (train.precision) would run on: natively on a
# CPU whose /proc/cpuinfo shows AVX512-BF16 (or AMX-BF16, which comes with it)
bf16=$(bin/vtr-train --version | sed -n 3p)
case $bf16 in
"bfloat16 products: oneDNN "*", ISA "?*) ;;
*) echo "FAIL: vtr-train --version: no 'bfloat16 products: ...' line, got '$bf16'"; exit 1 ;;
esac
case $flags:$bf16 in
*" avx512_bf16 "*:*"(not native: off)") echo "FAIL: AVX512-BF16 here, and vtr-train says '$bf16'"; exit 1 ;;
esac
# the programs that search say which top-k kernels they run; a CPU whose /proc/cpuinfo
# shows AMX-BF16 runs batches through AMX (Linux lets a process use the tiles since 5.16)
for p in vtr-search vtr-serve; do
    topk=$(bin/$p --version | sed -n 3p)
    case $topk in
    "top-k: "*" queries at once: "*"; fewer: a pass over the rows per 4 queries ("*")") ;;
    *) echo "FAIL: $p --version: no 'top-k: ...' line, got '$topk'"; exit 1 ;;
    esac
    case $flags in
    *" amx_bf16 "*" amx_tile "* | *" amx_tile "*" amx_bf16 "*)
        case $topk in
        *": amx-filter (AMX-BF16);"*) ;;
        *) echo "FAIL: a CPU with AMX-BF16, and $p --version says '$topk'"; exit 1 ;;
        esac ;;
    esac
done

blas=$(env -u OPENBLAS_CORETYPE bin/vtr-train --version | sed -n 2p)
case $blas in
"BLAS: OpenBLAS "*) ;;
*) exit 0 ;; # another BLAS, or none: nothing for vtr to choose
esac
# configure links OpenBLAS's OpenMP build when it is installed (one thread pool, lib/nn.h)
if [ -f "/usr/lib/$(cc -print-multiarch)/openblas-openmp/pkgconfig/openblas.pc" ]; then
    case $blas in
    "BLAS: OpenBLAS "*" (OpenMP build), kernel "*) ;;
    *) echo "FAIL: OpenBLAS's OpenMP build is installed, and vtr-train --version says '$blas'"
       exit 1 ;;
    esac
fi
avx512=yes
for f in avx512f avx512cd avx512bw avx512dq avx512vl; do
    case $flags in *" $f "*) ;; *) avx512=no ;; esac
done
if [ $avx512 = yes ]; then
    case $blas in
    *"kernel SkylakeX ("* | *"kernel Cooperlake ("* | *"kernel SapphireRapids ("*) ;;
    *) echo "FAIL: an AVX-512 CPU, and vtr-train --version says '$blas'"; exit 1 ;;
    esac
fi
# the switch happens while OpenBLAS's threads start: a race there crashed 1 start in 12
i=0
while [ $i -lt 60 ]; do
    env -u OPENBLAS_CORETYPE bin/vtr-train --version >/dev/null ||
        { echo "FAIL: vtr-train --version failed on start $i"; exit 1; }
    i=$((i + 1))
done
blas=$(OPENBLAS_CORETYPE=Haswell bin/vtr-train --version | sed -n 2p)
case $blas in
*"kernel Haswell (set by OPENBLAS_CORETYPE=Haswell)") ;;
*) echo "FAIL: OPENBLAS_CORETYPE=Haswell, and vtr-train --version says '$blas'"; exit 1 ;;
esac
