#!/bin/sh
# The GPU check's dry run (tests/gpu/run.sh --dry-run) against the system's OpenBLAS,
# jansson and oneDNN: the reduced build (tests/gpu/gpu.mk) compiles with warnings as errors
# and links, every library it loads resolves, and its parity tests run with no GPU visible:
# skipped, while the test of the no-GPU error passes. So that the minutes of a lent GPU go
# to measuring, not to debugging the build. Skipped where vtr is configured without CUDA.
set -u
grep -q '^HAVE_CUDA = yes' Makefile 2>/dev/null || { echo "configured without CUDA"; exit 77; }
unset OUT
log=$(mktemp)
trap 'rm -f "$log"' EXIT
sh tests/gpu/run.sh --dry-run --system-libs >"$log" 2>&1
rc=$?
fail() {
    tail -n 30 "$log"
    echo "t_gpu_dry: $*"
    exit 1
}
[ $rc -eq 0 ] || fail "tests/gpu/run.sh --dry-run --system-libs exited $rc"
for f in build-gpu/system-libs/unit-tests build-gpu/system-libs/op-timing; do
    [ -x "$f" ] || fail "$f was not built"
done
grep -q '^ok   test_cuda.c:cuda_unavailable_is_a_clear_error_or_works$' "$log" ||
    fail "the no-GPU error test did not pass"
for t in test_cuda.c:cuda_matmul_matches_cblas test_cuda_nn.c:cuda_nn_gru_one_and_two_directions_ragged \
    test_backbone.c:backbone_cuda_matches_cpu; do
    grep -q "^skip $t\$" "$log" || fail "$t did not run (and skip) in the reduced binary"
done
grep -q '^1 passed, 0 failed$' "$log" || fail "the reduced binary ran other tests than expected"
tail -n 1 "$log" | grep -q '^PASSED$' || fail "the summary does not say PASSED"
