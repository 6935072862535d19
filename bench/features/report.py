#!/usr/bin/python3
"""The table of bench/features/run.sh from the runs' JSON objects; with --append also adds
it to bench/RESULTS.md.

  report.py [VTR1 VTR2 TORCH1 TORCH2 FROZEN1 FROZEN2]... --threads N --load BEFORE AFTER
            --command CMD [--append]

Six files per architecture: each side ran twice, in turn with the others; a side's timed
(non-warm-up) batches of both runs are pooled. Throughput = batch / seconds per batch,
from the median batch and from the best one (on a shared machine other work only ever
slows a batch down, so the best is the less disturbed estimate). The machine's peak is the
highest float32 rate that any vtr run measured (OpenBLAS sgemm 2048^3 or a oneDNN ResNet
convolution at batch 32).
"""
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import blas_setting, cpu_model, git_version, publish  # noqa: E402

TARGET = 1.2  # issue 4: vtr's images/s at least 1.2x torchvision's


def load(path):
    with open(path) as f:
        return json.load(f)


def timed(run):
    return run["times"][run["warmup"]:]


def main(argv):
    i = argv.index("--threads")
    files, opts = argv[:i], argv[i:]
    threads = opts[opts.index("--threads") + 1]
    j = opts.index("--load")
    load_before, load_after = opts[j + 1], opts[j + 2]
    command = opts[opts.index("--command") + 1]
    append = "--append" in opts

    runs = [[load(p) for p in files[k:k + 6]] for k in range(0, len(files), 6)]
    peak = max(max(r["sgemm_peak_gflops"], r["conv_peak_gflops"])
               for group in runs for r in group[:2])
    rows, details, verdicts = [], [], []
    torch_version = ""
    for vtr1, vtr2, torch1, torch2, frozen1, frozen2 in runs:
        arch, batch = vtr1["arch"], vtr1["batch"]
        torch_version = "torch %s, torchvision %s" % (torch1["torch"], torch1["torchvision"])
        sides = {"vtr": timed(vtr1) + timed(vtr2), "torch": timed(torch1) + timed(torch2),
                 "frozen": timed(frozen1) + timed(frozen2)}
        med = {k: batch / statistics.median(v) for k, v in sides.items()}
        best = {k: batch / min(v) for k, v in sides.items()}
        gflop = vtr1["gflop_per_image"]
        floor_ips = peak / gflop
        rows.append("| %s | %.2f | **%.2f** / %.2f | %.2f / %.2f | %.2f / %.2f | "
                    "**%.2fx** / %.2fx | %.2fx / %.2fx | %.1f | %.0f%% |" %
                    (arch, gflop, med["vtr"], best["vtr"], med["torch"], best["torch"],
                     med["frozen"], best["frozen"], med["vtr"] / med["torch"],
                     best["vtr"] / best["torch"], med["vtr"] / med["frozen"],
                     best["vtr"] / best["frozen"], floor_ips, 100 * best["vtr"] / floor_ips))
        fmt = lambda r: ", ".join("%.3f" % t for t in r["times"])
        details.append(
            "%s: seconds per batch of %d (warm-up first), first | second run: vtr %s | %s; "
            "torchvision %s | %s; frozen %s | %s. Max RSS: vtr %.0f MB, torchvision %.0f MB, "
            "frozen %.0f MB. vtr load + fold: %.2f s." %
            (arch, batch, fmt(vtr1), fmt(vtr2), fmt(torch1), fmt(torch2), fmt(frozen1),
             fmt(frozen2), max(vtr1["max_rss_mb"], vtr2["max_rss_mb"]),
             max(torch1["max_rss_mb"], torch2["max_rss_mb"]),
             max(frozen1["max_rss_mb"], frozen2["max_rss_mb"]), vtr1["load_s"]))
        s_med, s_best = med["vtr"] / med["torch"], best["vtr"] / best["torch"]
        verdicts.append("%s %s (%.2fx median, %.2fx best)" %
                        (arch, "**met**" if min(s_med, s_best) >= TARGET else
                         "**met on the best batches only**" if s_best >= TARGET else
                         "**NOT met**", s_med, s_best))
    peaks = "; ".join("%s sgemm %s, conv %s" % (
        g[0]["arch"], " / ".join("%.0f" % r["sgemm_peak_gflops"] for r in g[:2]),
        " / ".join("%.0f" % r["conv_peak_gflops"] for r in g[:2])) for g in runs)

    report = "\n".join([
        "## CNN frame features: vtr vs torchvision, batch 32 at 224x224 (%s)" %
        datetime.date.today().isoformat(),
        "",
        "Command: `%s` (code %s). Machine: %s, %d cores; %s threads on every side "
        "(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, torch.set_num_threads), libgomp's default "
        "wait policy, %s; %s (its CPU convolutions "
        "are oneDNN 2.6.3, the library vtr uses). Both sides load the same random weights "
        "(torchvision's names) and run the backbone on a prepared float batch, pooled "
        "features out (fc dropped); no decoding or preprocessing is timed. Order per "
        "architecture: vtr, torchvision, torchvision frozen, twice. Load average (1 min) %s "
        "before, %s after (the machine is shared: a load above ~2 means other work took "
        "cores during the run)." %
        (command, git_version(), cpu_model(), os.cpu_count(), threads, blas_setting(),
         torch_version, load_before, load_after),
        "",
        "torchvision = `model.eval()` under `torch.no_grad()`, as feature-extraction scripts "
        "run it (convolutions through oneDNN with NCHW tensors, reorders around each "
        "convolution, batch norm and ReLU as separate passes). frozen = "
        "`torch.jit.optimize_for_inference(torch.jit.script(model))`, PyTorch's own best CPU "
        "path (batch norm folded, oneDNN layouts kept), for reference. vtr = oneDNN "
        "convolutions with batch norm folded at load time, ReLU and the residual addition "
        "fused into the convolution, oneDNN's preferred layout kept between layers, weights "
        "reordered once. "
        "FLOP floor = the highest float32 rate measured in the run (%.0f GFLOP/s; OpenBLAS "
        "sgemm 2048^3 or a oneDNN ResNet convolution at batch 32, GFLOP/s per vtr run: %s) / "
        "the convolutions' FLOPs per image; vtr's share of it from its best batch." %
        (peak, peaks),
        "",
        "Images/s as median / best batch:",
        "",
        "| backbone | GFLOP / image | vtr images/s | torchvision images/s | frozen images/s | "
        "vtr / torchvision | vtr / frozen | FLOP floor images/s | vtr % of floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ] + rows + [
        "",
        "Target (issue 4): at least %.1fx torchvision's throughput (median and best): %s." %
        (TARGET, "; ".join(verdicts)),
        "",
    ] + ["- " + d for d in details] + [""])
    publish(report, append)


if __name__ == "__main__":
    main(sys.argv[1:])
