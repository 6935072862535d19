"""What the benchmark reports say about the run (the CPU and the code version), and where
the reports go."""

import ctypes
import os
import platform
import subprocess


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def blas_core():
    """OpenBLAS's kernel choice (openblas_get_corename) in this process's environment, or
    "unknown" without libopenblas.so.0."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown"


def blas_build():
    """Which OpenBLAS build this process loads (openblas_get_parallel): "OpenMP build",
    "pthreads build" or "serial build"; "unknown" without libopenblas.so.0."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        return {0: "serial build", 1: "pthreads build", 2: "OpenMP build"}.get(
            lib.openblas_get_parallel(), "unknown")
    except (OSError, AttributeError):
        return "unknown"


def blas_setting():
    """What bench/blas_kernel.sh set for the BLAS kernel (its VTR_BENCH_BLAS), for the
    reports."""
    return os.environ.get("VTR_BENCH_BLAS",
                          "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE as the environment had them")


def git_version():
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def publish(report, append):
    """Prints a report; with append, also adds it to bench/RESULTS.md (run from the top of
    the tree)."""
    print(report)
    if append:
        with open("bench/RESULTS.md", "a") as f:
            f.write("\n" + report)
