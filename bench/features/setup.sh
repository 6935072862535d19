# Sourced by bench/features/run.sh and bf16.sh from the top of the tree, with their
# arguments: parses [--append] [--threads N] [--runs R] [--archs A,B] into append, threads
# (default: the cores), runs (3), archs (resnet152,resnet18), sets warmup (1) and batch
# (32), checks the build and torchvision, builds bench/out/features_bench, makes $work (a
# temporary directory removed on exit) and gives every side the same threads and BLAS
# kernel (bench/blas_kernel.sh), libgomp's default wait policy.
threads=$(nproc) runs=3 warmup=1 batch=32 archs=resnet152,resnet18 append=
while [ $# -gt 0 ]; do
    case $1 in
    --append) append=--append ;;
    --threads) threads=$2; shift ;;
    --runs) runs=$2; shift ;;
    --archs) archs=$2; shift ;;
    *) echo "usage: sh $0 [--append] [--threads N] [--runs R] [--archs A,B]" >&2
       exit 2 ;;
    esac
    shift
done
[ -f Makefile ] || { echo "bench/features: run ./configure first" >&2; exit 1; }
/usr/bin/python3 -c 'import torchvision' 2>/dev/null ||
    { echo "bench/features: needs python3-torchvision" >&2; exit 1; }
sh bench/build.sh bench/features/features_bench.c bench/out/features_bench
work=$(mktemp -d "${TMPDIR:-/tmp}/vtr-bench-features-XXXXXX")
trap 'rm -rf "$work"' EXIT
unset OMP_WAIT_POLICY
. bench/blas_kernel.sh # one BLAS kernel for both sides: vtr's choice for this CPU
export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads"
