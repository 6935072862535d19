#!/usr/bin/python3
"""The driver behind bench/eval/run.sh: makes the data, times vtr (bench/eval/retrieval_bench,
three runs, the median counts) and the numpy reference (one run), compares their results
and prints a report; with --append also adds it to bench/RESULTS.md.

  compare.py WORKDIR [--append]     (WORKDIR holds the compiled retrieval_bench)
"""
import datetime
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import blas_setting, cpu_model, git_version, publish  # noqa: E402

N_ITEMS, PER_ITEM, DIM, SEED = 2990, 20, 1024, 0
COMMAND = "sh bench/eval/run.sh --append"


def unit_rows(rng, n, d):
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main(argv):
    work, append = argv[0], "--append" in argv[1:]
    rng = np.random.default_rng(SEED)
    items, captions = unit_rows(rng, N_ITEMS, DIM), unit_rows(rng, N_ITEMS * PER_ITEM, DIM)
    np.save(work + "/items_0.npy", items)
    np.save(work + "/captions_0.npy", captions)
    np.save(work + "/cap_item.npy", np.repeat(np.arange(N_ITEMS), PER_ITEM).astype(np.int32))

    load_before = os.getloadavg()[0]
    out = subprocess.run([work + "/retrieval_bench", work, "3"], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    vtr_times = [float(x) for x in out[0].split()[1:]]
    vtr_metrics = np.array([float(x) for x in out[1].split()[1:]])
    vtr_time = float(np.median(vtr_times))

    ref = subprocess.run(["/usr/bin/python3", "tests/interop/retrieval_metrics_ref.py", work,
                          "--time"], capture_output=True, text=True, check=True)
    ref_time = float(ref.stdout.split()[-1])
    start = time.time()  # the floor: one float32 product of that size, nothing else
    S = items @ captions.T
    product_time = time.time() - start
    del S
    load_after = os.getloadavg()[0]
    ref_metrics = np.load(work + "/ref_metrics.npy").view(np.float64)[:15]
    v2t_diff = int(np.sum(np.load(work + "/vtr_v2t_rank.npy") !=
                          np.load(work + "/ref_v2t_rank.npy")))
    t2v_diff = int(np.sum(np.load(work + "/vtr_t2v_rank.npy") !=
                          np.load(work + "/ref_t2v_rank.npy")))

    names = ["R@1", "R@5", "R@10", "medr", "meanr", "mAP", "nDCG"]
    row = lambda m: " | ".join("%.4g" % x for x in m)
    report = "\n".join([
        "## Retrieval metrics: vtr vs the numpy reference, MSR-VTT test size (%s)"
        % datetime.date.today().isoformat(),
        "",
        "Command: `%s` (code %s). Machine: %s, %d cores; default OpenBLAS and OpenMP threads; "
        "%s." % (COMMAND, git_version(), cpu_model(), os.cpu_count(), blas_setting()),
        "Data: %d videos x %d captions (%d each), %d-d random l2-normalized float32, seed %d. "
        "Times cover the computation only (products, ranks, all metrics), not data loading. "
        "Load average (1 min) %.1f before, %.1f after." %
        (N_ITEMS, N_ITEMS * PER_ITEM, PER_ITEM, DIM, SEED, load_before, load_after),
        "",
        "| side | seconds |",
        "|---|---|",
        "| vtr, vtr_retrieval_evaluate_embeddings (median of %s; best %.2f) | %.2f |"
        % (", ".join("%.2f" % t for t in vtr_times), min(vtr_times), vtr_time),
        "| numpy reference, tests/interop/retrieval_metrics_ref.py (full S, stable argsort) "
        "| %.2f |" % ref_time,
        "| (for scale) numpy S = items @ captions.T alone, no metrics | %.2f |" % product_time,
        "",
        "Ratio numpy reference / vtr: **%.1fx** (median; %.1fx with vtr's best run)."
        % (ref_time / vtr_time, ref_time / min(vtr_times)),
        "",
        "| | " + " | ".join("V->T " + n for n in names) + " | " +
        " | ".join("T->V " + n for n in names) + " | RSUM |",
        "|---" * 16 + "|",
        "| vtr | " + row(vtr_metrics) + " |",
        "| numpy | " + row(ref_metrics) + " |",
        "",
        "Largest metric difference %.3g (%s); first-correct ranks that differ: %d of %d V->T, "
        "%d of %d T->V. The two sides compute the float32 products in different orders, "
        "which can swap near-equal scores; mAP and nDCG see the positions of all 20 "
        "captions, the ranks only the first." %
        (float(np.max(np.abs(vtr_metrics - ref_metrics))),
         (["V->T " + n for n in names] + ["T->V " + n for n in names] + ["RSUM"])[
             int(np.argmax(np.abs(vtr_metrics - ref_metrics)))],
         v2t_diff, N_ITEMS, t2v_diff, N_ITEMS * PER_ITEM),
        ""])
    publish(report, append)


if __name__ == "__main__":
    main(sys.argv[1:])
