# Sourced by every benchmark, from the top of the tree after the build: one BLAS kernel for
# both sides of a comparison. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE from the environment
# are dropped; then OPENBLAS_CORETYPE is set to the kernel vtr chooses for this CPU from
# its instructions (lib/blas_kernel.h; bin/vtr-train --version says which), so that the
# anchor (PyTorch, numpy: Debian's OpenBLAS too) runs that kernel rather than OpenBLAS's
# guess from the CPU's model name (Prescott, SSE3, on VMs that hide the model). The
# reports quote VTR_BENCH_BLAS, which says what was set (bench/machine.py: blas_setting).
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
vtr_blas=$(bin/vtr-train --version 2>/dev/null | sed -n 2p)
vtr_kernel=$(echo "$vtr_blas" | sed -n 's/^BLAS: OpenBLAS.*, kernel \([A-Za-z0-9]*\) (.*/\1/p')
vtr_origin=$(echo "$vtr_blas" | sed -n 's/^BLAS: OpenBLAS.*, kernel [A-Za-z0-9]* (\(.*\))$/\1/p')
if [ -n "$vtr_kernel" ]; then
    export OPENBLAS_CORETYPE="$vtr_kernel"
    VTR_BENCH_BLAS="OPENBLAS_CORETYPE=$vtr_kernel for both sides, the kernel vtr uses here"
    VTR_BENCH_BLAS="$VTR_BENCH_BLAS ($vtr_origin); OPENBLAS_L2_SIZE unset"
else
    VTR_BENCH_BLAS="OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
    VTR_BENCH_BLAS="$VTR_BENCH_BLAS (vtr-train --version: ${vtr_blas:-nothing})"
fi
# ... and the same library: the libopenblas.so.0 vtr loads (configure prefers OpenBLAS's
# OpenMP build, lib/nn.h) comes first for every side, the anchors included
vtr_blas_dir=$(ldd bin/vtr-train 2>/dev/null | sed -n 's|^[[:space:]]*libopenblas\.so\.0 => \(/.*\)/libopenblas\.so\.0 .*|\1|p')
if [ -n "$vtr_blas_dir" ]; then
    export LD_LIBRARY_PATH="$vtr_blas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    VTR_BENCH_BLAS="$VTR_BENCH_BLAS; every side loads $vtr_blas_dir/libopenblas.so.0"
fi
export VTR_BENCH_BLAS
unset vtr_blas vtr_kernel vtr_origin vtr_blas_dir
