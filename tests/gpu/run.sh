#!/bin/sh
# tests/gpu/run.sh: the GPU check, one command on a machine lent with a GPU (issue 15,
# item 5; tests/gpu/README.md says how to call it). From the top of the tree:
#
#   sh tests/gpu/run.sh [--dry-run] [--system-libs]
#
# Steps, each under a time limit (under 10 minutes in all at the worst), each logged to
# $OUT/STEP.log when OUT is set (the device tool brings those files back), else to
# build-gpu/logs/:
#   env     the GPU, driver, nvcc, host compiler, PyTorch, and where cuBLAS, cuDNN and
#           the other libraries were found (cuBLAS and cuDNN in the toolkit, in a Python
#           environment's nvidia-* packages, or under /usr)                         30 s
#   deps    .gpu-deps/*.deb (sh tests/gpu/fetch-deps.sh, here) unpacked into
#           build-gpu/deps: OpenBLAS, jansson, oneDNN, and make where none is here   30 s
#   build   make -f tests/gpu/gpu.mk: build-gpu/unit-tests (the parity tests),
#           build-gpu/op-timing, train-step, features-bench and search-timing, for the
#           GPU's architecture, then every library they load resolved (ldd)       140 s
#   tests   build-gpu/unit-tests cuda: tests/test_cuda.c (with the upload stage),
#           tests/test_cuda_nn.c (the ops, cuDNN's GRU and the optimizer),
#           tests/test_cuda_model.c (a
#           VSE training step, 300 steps of training, two GPU runs, tf32 and bfloat16
#           training against float32's seed spread, a set-embedding step,
#           HGR and HGR∞ steps, encoders and score blocks, each against the CPU),
#           test_topk.c's cuda_topk tests (the search),
#           test_retrieval_metrics.c:cuda_scoring_gives_the_cpu_bytes (evaluation) and
#           test_backbone.c's cuDNN engine against the CPU's, float32 and bfloat16,
#           relative errors printed, and
#           test_cuda.c:cuda_nccl_alone (NCCL, one rank: PyTorch's libnccl where found); on
#           a GPU each must pass (a skip fails the check, except NCCL's where none is
#           found, and the host waits' count, which only the emulation makes); after a
#           crash or a failure, each
#           test not passed runs again alone, the first failing one under
#           compute-sanitizer too (step_tests)                                      100 s
#   timing  build-gpu/op-timing: the ops of a VSE∞ step at MSR-VTT sizes on the GPU,
#           the caption BiGRU on vtr's kernels and on cuDNN's RNN                   30 s
#   bench   bench/train_step's VSE∞ step at MSR-VTT sizes: vtr on the GPU against
#           PyTorch on the same GPU, eager and torch.compile, and vtr's step in tf32
#           and bfloat16 against its float32 one (bench.log)                       120 s
#   features  bench/features' ResNet-152 at batch 32: vtr's cuDNN engine, float32 and
#           bfloat16, against torchvision on the same GPU, float32 with TF32 off and on,
#           and bfloat16 (features.log)                                             90 s
#   search  build-gpu/search-timing: one query's top 10 over 10^7 x 1024 float16 rows
#           against the GPU's memory-bandwidth floor                                50 s
# then summary.txt.
#
# --dry-run (the test suite's tests/t_gpu_dry.sh): everything up to the GPU: the build,
# then the tests with no GPU visible (CUDA_VISIBLE_DEVICES empty), where they skip and
# test_cuda.c:cuda_unavailable_is_a_clear_error_or_works passes, and the benchmarks' vtr
# sides on the CPU, one small run each; no timing.
# --system-libs: OpenBLAS, jansson and oneDNN from the system (pkg-config) even when
# .gpu-deps holds packages; the build goes to build-gpu/system-libs/ instead.
#
# Exit 0 when every step passed; 1 when one failed, or when, without --dry-run, no GPU
# was found (the steps then ran as a dry run, and the last line says so).
set -u
cd "$(dirname "$0")/../.." || exit 1

# ---- the steps that are shell code run as `sh run.sh __step NAME` (under timeout), with
# the variables that the code after them exports

step_env() {
    echo "host: $(uname -srm), $(nproc) cores"
    if command -v nvidia-smi >/dev/null 2>&1; then
        timeout 10 nvidia-smi -L
        timeout 10 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total \
            --format=csv,noheader
    else
        echo "nvidia-smi: not found"
    fi
    echo "nvcc: $NVCC"
    "$NVCC" --version | tail -n 2
    echo "host compiler: $(cc --version | head -n 1)"
    echo "CUDA_ARCH: $CUDA_ARCH"
    echo "cuBLAS: $CUBLAS_FOUND"
    echo "cuDNN: $CUDNN_FOUND"
    echo "OpenBLAS, jansson, oneDNN: $DEPS_FOUND"
    echo "fixture python (test_backbone.c's /usr/bin/python3 + numpy): $FIXTURE_PYTHON"
    echo "NCCL (test_cuda.c:cuda_nccl_alone): $NCCL_FOUND"
    # PyTorch with the machine's own LD_LIBRARY_PATH, not the one set for vtr's libraries
    LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH timeout 25 python3 -c '
try:
    import torch
except ImportError:
    raise SystemExit("python3: no torch")
print("python3: torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN",
      torch.backends.cudnn.version(), "device",
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
try:
    import torchvision
    print("python3: torchvision", torchvision.__version__)
except ImportError:
    print("python3: no torchvision")
' 2>&1
    return 0
}

# Unpacks each .deb of .gpu-deps into build-gpu/deps, once per set of packages.
step_deps() {
    if [ "$LIBS_FROM" != .gpu-deps ]; then
        echo "deps: the system's libraries ($DEPS_FOUND)"
        return 0
    fi
    list=$(ls .gpu-deps/*.deb)
    if [ "$(cat "$B/deps/.unpacked" 2>/dev/null)" = "$list" ]; then
        echo "deps: already unpacked in $B/deps"
        return 0
    fi
    rm -rf "$B/deps" && mkdir -p "$B/deps" || return 1
    for deb in $list; do
        echo "deps: $deb"
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$deb" "$B/deps" || return 1
        else # a .deb is an ar archive holding data.tar.*
            member=$(ar t "$deb" | grep '^data\.tar') || return 1
            case $member in
            *.xz) unpack="tar -xJf -" ;;
            *.zst) unpack="tar --zstd -xf -" ;;
            *) unpack="tar -xzf -" ;;
            esac
            ar p "$deb" "$member" | (cd "$B/deps" && $unpack) || return 1
        fi
    done
    echo "$list" >"$B/deps/.unpacked"
    du -sh "$B/deps" | sed 's/^/deps: unpacked /'
}

step_build() {
    make='make'
    if ! command -v make >/dev/null 2>&1 && [ -x "$B/deps/usr/bin/make" ]; then
        make=$B/deps/usr/bin/make # .gpu-deps's, where the machine has none
        echo "build: make from .gpu-deps"
    fi
    "$make" -s -f tests/gpu/gpu.mk -j"$(nproc)" B="$B" NVCC="$NVCC" CUDA_ARCH="$CUDA_ARCH" \
        WERROR="$WERROR" DEP_CFLAGS="$DEP_CFLAGS" CUDA_CFLAGS="$CUDA_CFLAGS" LIBS="$LIBS" ||
        return 1
    echo "flags ($B/flags):"
    sed 's/^/  /' "$B/flags"
    echo "libraries loaded by $B/libvtr-cuda.so (the CUDA backend, loaded on first use):"
    ldd "$B/libvtr-cuda.so" | sed 's/^[[:space:]]*/  /'
    if ldd "$B/libvtr-cuda.so" "$B/unit-tests" "$B/op-timing" "$B/train-step" \
        "$B/features-bench" "$B/search-timing" | grep 'not found'; then
        echo "build: a library above is not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
        return 1
    fi
}

# The parity tests on the GPU, in one process. Where that process dies (a signal) or tests
# fail, each test it did not pass runs again in a process of its own, so that one crash,
# or a CUDA error that poisons every later call of its process (an illegal address), hides
# no other result; the first that fails alone then runs under compute-sanitizer's memcheck
# where the toolkit has it, which names the kernel and the address. Stops rerunning 15 s
# before the step's limit (TESTS_LIMIT).
step_tests() {
    deadline=$(($(date +%s) + TESTS_LIMIT - 15))
    VTR_TEST_VERBOSE=1 "$B/unit-tests" cuda >"$B/tests.out" 2>&1
    rc=$?
    cat "$B/tests.out"
    [ $rc -eq 0 ] && return 0
    [ $rc -ge 128 ] && echo "tests: the run died (exit $rc) after the last line above"
    sanitizer=$(dirname "$NVCC")/compute-sanitizer
    [ -x "$sanitizer" ] || sanitizer=$(command -v compute-sanitizer || true)
    for t in $("$B/unit-tests" --list cuda); do
        grep -q -x -F -e "ok   $t" -e "skip $t" "$B/tests.out" && continue
        left=$((deadline - $(date +%s)))
        if [ $left -lt 5 ]; then
            echo "tests: no time left to rerun $t and those after it alone"
            break
        fi
        echo "-- $t, alone:"
        timeout -k 2 "$left" env VTR_TEST_VERBOSE=1 "$B/unit-tests" "$t" >"$B/alone.out" 2>&1
        alone=$?
        tail -n 25 "$B/alone.out"
        [ $alone -ne 0 ] && [ -n "$sanitizer" ] && [ -z "${sanitized:-}" ] || continue
        sanitized=$t
        left=$((deadline - $(date +%s)))
        [ $left -ge 5 ] || continue
        echo "-- $t under $(basename "$sanitizer") --tool memcheck:"
        timeout -k 2 "$left" "$sanitizer" --tool memcheck --print-limit 5 \
            "$B/unit-tests" "$t" 2>&1 | tail -n 40
    done
    return 1
}

# The VSE∞ video step at the MSR-VTT sizes (bench/train_step): vtr on BENCH_DEVICE, then,
# on a GPU, the same model in PyTorch on the same GPU, eager and through torch.compile, on
# the same batches from the same initial weights: one JSON line each, then the ratios.
step_bench() {
    work=$B/bench-step
    rm -rf "$work" && mkdir -p "$work" || return 1
    steps="--warmup ${BENCH_WARMUP:-3} --steps ${BENCH_STEPS:-20}"
    # shellcheck disable=SC2086 # $steps is a word list
    "$B/train-step" prepare "$work" $steps || return 1
    # shellcheck disable=SC2086
    "$B/train-step" run --device "$BENCH_DEVICE" $steps | tee "$work/vtr.json"
    [ -s "$work/vtr.json" ] || return 1
    [ "$BENCH_DEVICE" = cuda ] || return 0
    for precision in tf32 bfloat16; do # vtr's reduced-precision steps (train.precision)
        # shellcheck disable=SC2086
        "$B/train-step" run --device cuda --precision $precision $steps |
            tee "$work/vtr-$precision.json"
    done
    for compile in '' --compile; do
        # shellcheck disable=SC2086 # $compile is one word or none
        LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH timeout 80 python3 \
            bench/train_step/torch_step.py "$work" --device cuda $steps $compile |
            tee "$work/torch$compile.json"
    done
    python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
vtr = json.load(open(os.path.join(work, "vtr.json")))
print("vtr on %s: median %.2f ms per step, %.0f%% of the cuBLAS sgemm peak (%.0f GFLOP/s)" % (
    vtr["device"], 1e3 * vtr["median_s"], 100 * vtr["effective_gflops"] / vtr["sgemm_peak_gflops"],
    vtr["sgemm_peak_gflops"]))
for precision in ("tf32", "bfloat16"):
    try:
        r = json.load(open(os.path.join(work, "vtr-%s.json" % precision)))
    except (OSError, ValueError):
        print("vtr %s: no result" % precision)
        continue
    print("vtr %s: median %.2f ms per step (%.2fx float32's), %.0f GFLOP/s peak; last losses "
          "%.6g (float32 %.6g)" % (precision, 1e3 * r["median_s"], vtr["median_s"] / r["median_s"],
          r["sgemm_peak_gflops"], r["losses"][-1], vtr["losses"][-1]))
for name in ("torch.json", "torch--compile.json"):
    try:
        t = json.load(open(os.path.join(work, name)))
    except (OSError, ValueError):
        print("%s: no result" % name)
        continue
    print("PyTorch %s%s: median %.2f ms per step; vtr is %.2fx faster; last losses %.6g / %.6g" % (
        t["torch"], " compiled" if t["compiled"] else " eager", 1e3 * t["median_s"],
        t["median_s"] / vtr["median_s"], vtr["losses"][-1], t["losses"][-1]))
PY
}

# bench/features at batch 32 on 224 x 224: vtr's cuDNN engine (FEATURES_DEVICE cuda), float32
# and bfloat16, against torchvision on the same GPU, float32 with TF32 off and on, and
# bfloat16, random weights of FEATURES_ARCH with torchvision's names (written by a python3
# that has numpy); on the CPU (the dry run), vtr's float32 side alone.
step_features() {
    py=python3
    LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH $py -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
    w=$B/$FEATURES_ARCH.safetensors
    LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH $py tests/fixtures/make_backbone_fixtures.py \
        random-weights "$FEATURES_ARCH" "$w" 0 || return 1
    if [ "$FEATURES_DEVICE" = cpu ]; then
        "$B/features-bench" "$w" "$FEATURES_ARCH" 2 1 0
        return
    fi
    rm -f "$B"/features-*.json
    for bf16 in '' --bf16; do
        # shellcheck disable=SC2086 # $bf16 is one word or none
        "$B/features-bench" "$w" "$FEATURES_ARCH" 32 10 3 --device cuda $bf16 |
            tee "$B/features-vtr$bf16.json"
    done
    LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH timeout 60 python3 bench/features/torch_bench.py \
        "$w" "$FEATURES_ARCH" 32 10 3 "$(nproc)" --cuda | tee "$B/features-torch.json"
    python3 - "$B" <<'PY'
import json, os, sys
def median(r):
    t = sorted(r["times"][r["warmup"]:])
    return t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])
def load(name):
    try:
        return [json.loads(line) for line in open(os.path.join(sys.argv[1], name)) if line.strip()]
    except (OSError, ValueError):
        return []
runs = {r["side"]: r for name in ("features-vtr.json", "features-vtr--bf16.json",
                                  "features-torch.json") for r in load(name)}
def cosine(r):
    return ", cosine to its float32 %.6f (min %.6f)" % (r["cosine_mean"], r["cosine_min"]) \
        if "cosine_min" in r else ""
failed = False
for mine, theirs in (("vtr-cuda", ("torch-cuda", "torch-cuda-tf32")),
                     ("vtr-cuda-bf16", ("torch-cuda-bf16",))):
    if mine not in runs:
        print("%s: no result" % mine)
        failed = True
        continue
    v = runs[mine]
    print("%s on %s: %.1f images/s (%.1f ms per batch of %d)%s" % (
        mine, v["device"], v["batch"] / median(v), 1e3 * median(v), v["batch"], cosine(v)))
    for side in theirs:
        if side not in runs:
            print("  %s: no result" % side)
            continue
        t = runs[side]
        print("  %s (torchvision %s): %.1f images/s%s; vtr is %.2fx as fast" % (
            side, t["torchvision"], t["batch"] / median(t), cosine(t), median(t) / median(v)))
sys.exit(1 if failed else 0)
PY
}

if [ "${1:-}" = __step ]; then
    "step_$2"
    exit $?
fi

# ---- options, then what this machine has -------------------------------------------

B=build-gpu
dry=no
libs=auto
for a in "$@"; do
    case $a in
    --dry-run) dry=yes ;;
    --system-libs) libs=system B=build-gpu/system-libs ;;
    *) echo "usage: sh tests/gpu/run.sh [--dry-run] [--system-libs]" >&2; exit 1 ;;
    esac
done
logs=${OUT:-$B/logs}
mkdir -p "$logs" || exit 1

gpu=no
if [ $dry = no ] && command -v nvidia-smi >/dev/null 2>&1 &&
    timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    gpu=yes
fi

# nvcc, and the toolkit it belongs to
NVCC=
for c in ${CUDA_HOME:+"$CUDA_HOME/bin/nvcc"} /usr/local/cuda/bin/nvcc "$(command -v nvcc)"; do
    if [ -x "$c" ]; then
        NVCC=$(readlink -f "$c")
        break
    fi
done
if [ -z "$NVCC" ]; then
    echo "run.sh: nvcc not found (CUDA_HOME, /usr/local/cuda, PATH): install the CUDA toolkit" >&2
    exit 1
fi
cuda_dir=$(dirname "$(dirname "$NVCC")")
CUDA_ARCH=90
if [ $gpu = yes ]; then
    cap=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
    [ -n "$cap" ] && CUDA_ARCH=$cap
fi

# Python's site-packages, where pip's nvidia-* packages put cuBLAS and cuDNN
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)

# find_library HEADER LIB: the first install that has both (the toolkit, pip's nvidia-*
# packages, the system), as "INCLUDE_DIR LIB_DIR LIB_FILE"; nothing when none has.
find_library() {
    for root in "$cuda_dir" "$site"/nvidia/* /opt/*/.venv/lib/python3*/site-packages/nvidia/* /usr; do
        [ -d "$root" ] || continue
        h=$(find -L "$root" -maxdepth 3 -name "$1" ! -path '*/stubs/*' 2>/dev/null | sort | head -n 1)
        l=$(find -L "$root" -maxdepth 3 \( -name "$2.so" -o -name "$2.so.[0-9]*" \) \
            ! -path '*/stubs/*' 2>/dev/null | sort | head -n 1)
        if [ -n "$h" ] && [ -n "$l" ]; then
            echo "$(dirname "$h") $(dirname "$l") $(basename "$l")"
            return
        fi
    done
}

CUDA_CFLAGS=
LIBS=
ld_path=
# use_library NAME HEADER LIB: adds the include and link flags of the install found and
# says which in $found, or stops
use_library() {
    found=$(find_library "$2" "$3")
    if [ -z "$found" ]; then
        echo "run.sh: $1 not found ($2 and $3.so* under $cuda_dir, ${site:-no python3}/nvidia, /usr)" >&2
        exit 1
    fi
    # shellcheck disable=SC2086 # three words
    set -- $found
    case " $CUDA_CFLAGS " in *" -I$1 "*) ;; *) CUDA_CFLAGS="$CUDA_CFLAGS -I$1" ;; esac
    add_lib_dir "$2"
    LIBS="$LIBS -l:$3"
    found="$1/, $2/$3"
}
# add_lib_dir DIR: where the linker and the loader look, once per folder
add_lib_dir() {
    case ":$ld_path:" in *":$1:"*) return ;; esac
    LIBS="$LIBS -L$1 -Wl,-rpath,$1 -Wl,-rpath-link,$1"
    ld_path="$ld_path:$1"
}
use_library cuBLAS cublas_v2.h libcublas
CUBLAS_FOUND=$found
use_library cuDNN cudnn.h libcudnn
CUDNN_FOUND=$found
cudart=$(find -L "$cuda_dir" -maxdepth 3 -name 'libcudart.so' ! -path '*/stubs/*' 2>/dev/null | sort | head -n 1)
if [ -z "$cudart" ]; then
    echo "run.sh: libcudart.so not found under $cuda_dir" >&2
    exit 1
fi
add_lib_dir "$(dirname "$cudart")"
LIBS="$LIBS -lcudart"

# OpenBLAS, jansson, oneDNN: .gpu-deps's packages, else the system's
if [ $libs = auto ] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
    LIBS_FROM=.gpu-deps
    d=$(pwd)/$B/deps/usr
    DEP_CFLAGS="-I$d/include -I$d/include/x86_64-linux-gnu/openblas-pthread"
    add_lib_dir "$d/lib/x86_64-linux-gnu"
    add_lib_dir "$d/lib/x86_64-linux-gnu/openblas-pthread"
    LIBS="$LIBS -lopenblas -ljansson -ldnnl"
    DEPS_FOUND="Debian's packages in .gpu-deps, unpacked in $B/deps"
else
    LIBS_FROM=system
    if ! pkg-config --exists openblas jansson 2>/dev/null; then
        echo "run.sh: OpenBLAS and jansson not found: run 'sh tests/gpu/fetch-deps.sh' on a Debian machine and carry .gpu-deps" >&2
        exit 1
    fi
    DEP_CFLAGS=$(pkg-config --cflags openblas jansson)
    LIBS="$LIBS $(pkg-config --libs openblas jansson) -ldnnl"
    DEPS_FOUND="the system's (pkg-config openblas jansson; -ldnnl)"
fi
MACHINE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
LD_LIBRARY_PATH=${ld_path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# test_backbone.c writes its random weights with /usr/bin/python3 and numpy; where only
# another python3 (a virtual environment) has numpy, its site-packages serve.
if /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
    FIXTURE_PYTHON="/usr/bin/python3 has numpy"
elif [ -n "$site" ] && PYTHONPATH=$site /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
    PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONPATH
    FIXTURE_PYTHON="/usr/bin/python3 with PYTHONPATH=$site"
else
    FIXTURE_PYTHON="none: backbone_cuda_matches_cpu will skip"
fi

# NCCL for test_cuda.c:cuda_nccl_alone (lib/dist_nccl.cu loads it at run time): VTR_NCCL_LIBRARY,
# else PyTorch's wheel's (nvidia-nccl), else the toolkit's; none found: that test may skip
if [ -z "${VTR_NCCL_LIBRARY:-}" ]; then
    wheel=$(LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH timeout 20 python3 -c '
import os, nvidia.nccl as n
print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    for f in "$wheel" "$cuda_dir/lib64/libnccl.so.2" "$cuda_dir/lib/libnccl.so.2"; do
        [ -n "$f" ] && [ -f "$f" ] && VTR_NCCL_LIBRARY=$f && break
    done
fi
NCCL_FOUND=${VTR_NCCL_LIBRARY:-none}
VTR_NCCL_LIBRARY=${VTR_NCCL_LIBRARY:-none}

WERROR=
[ $dry = yes ] && WERROR=yes # here, with this project's compilers: warnings are errors
export B NVCC CUDA_ARCH CUDA_CFLAGS LIBS DEP_CFLAGS LIBS_FROM LD_LIBRARY_PATH WERROR \
    MACHINE_LD_LIBRARY_PATH CUBLAS_FOUND CUDNN_FOUND DEPS_FOUND FIXTURE_PYTHON NCCL_FOUND \
    VTR_NCCL_LIBRARY

# ---- the steps ---------------------------------------------------------------------

failed=
summary=
# step NAME SECONDS COMMAND...: COMMAND under a time limit, its output shown and kept in
# $logs/NAME.log; a failure is recorded.
step() {
    name=$1 limit=$2
    shift 2
    echo "== $name (at most ${limit}s)"
    start=$(date +%s)
    { timeout -k 5 "$limit" "$@" 2>&1; echo $? >"$B/.status"; } | tee "$logs/$name.log"
    rc=$(cat "$B/.status")
    took=$(($(date +%s) - start))
    case $rc in
    0) result=ok ;;
    124|137) result="FAILED: over ${limit}s" ;;
    *) result="FAILED (exit $rc)" ;;
    esac
    echo "== $name: $result in ${took}s"
    summary="$summary$name: $result in ${took}s
"
    [ "$rc" -eq 0 ] || failed="$failed $name"
}

mkdir -p "$B"
self=tests/gpu/run.sh
step env 30 sh $self __step env
step deps 30 sh $self __step deps
[ -z "$failed" ] && step build 140 sh $self __step build

if [ -z "$failed" ]; then
    if [ $gpu = yes ]; then
        step tests 100 env TESTS_LIMIT=100 sh $self __step tests
        # on a GPU a skipped parity test is a check not made (but NCCL is optional, and the
        # host's waits are counted by the emulation only)
        skipped=$(grep '^skip ' "$logs/tests.log" | grep -v -e '^skip test_cuda.c:cuda_nccl_alone$' \
            -e '^skip test_cuda_model.c:cuda_[a-z]*_step_waits_for_the_gpu_[a-z]*$')
        if [ -z "$failed" ] && [ -n "$skipped" ]; then
            echo "tests: these skipped on a GPU, so they were not checked:"
            echo "$skipped"
            failed="$failed tests"
            summary="${summary}tests: FAILED: $(echo "$skipped" | wc -l) skipped on a GPU
"
        fi
        step timing 30 "$B/op-timing" 20
        step bench 120 env BENCH_DEVICE=cuda sh $self __step bench
        step features 90 env FEATURES_DEVICE=cuda FEATURES_ARCH=resnet152 sh $self __step features
        step search 50 "$B/search-timing" 10000000
    else
        step tests 120 env CUDA_VISIBLE_DEVICES= "$B/unit-tests" cuda
        if [ -z "$failed" ] && ! grep -q '^ok   test_cuda.c:cuda_unavailable_is_a_clear_error_or_works$' "$logs/tests.log"; then
            echo "tests: cuda_unavailable_is_a_clear_error_or_works did not pass without a GPU"
            failed="$failed tests"
        fi
        # the bench's vtr side on the CPU, one step: its program and data work
        step bench 60 env BENCH_DEVICE=cpu BENCH_WARMUP=0 BENCH_STEPS=1 OMP_WAIT_POLICY=passive \
            sh $self __step bench
        step features 60 env FEATURES_DEVICE=cpu FEATURES_ARCH=resnet18 sh $self __step features
    fi
fi

if [ $gpu = yes ]; then
    mode="GPU run ($(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
elif [ $dry = yes ]; then
    mode="dry run (--dry-run): CUDA tests skipped"
else
    mode="dry run: NO GPU FOUND (nvidia-smi -L lists none), so nothing ran on a GPU"
fi
{
    echo "tests/gpu/run.sh: $mode; libraries: $LIBS_FROM; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    printf '%s' "$summary"
    if [ -n "$failed" ]; then
        echo "FAILED:$failed"
    elif [ $dry = no ] && [ $gpu = no ]; then
        echo "FAILED: no GPU"
    else
        echo "PASSED"
    fi
} | tee "$logs/summary.txt"
[ -z "$failed" ] && { [ $dry = yes ] || [ $gpu = yes ]; }
