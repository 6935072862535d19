#!/usr/bin/python3
"""The tables of bench/scaling/run.sh from the runs' JSON lines (bench/scaling/scaling.c);
with --append also adds them to bench/RESULTS.md.

  report.py RUN_JSON... --cores C --load BEFORE AFTER --uptime BEFORE AFTER --command CMD
            [--append]

One table per config, one row per run (ranks x threads per rank). Speed-up is against the
1 rank x 1 thread run of the config; efficiency = speed-up / the cores the run could use
(ranks x threads, at most C); "vs 1 x C" compares with one rank using every core (the
same cores, split differently). The all-reduce's bandwidth, as NCCL's tests state it:
algorithm bandwidth = parameter bytes / time, bus bandwidth = that x 2 (N-1) / N (the
bytes each rank sends and receives in a ring all-reduce, or in vtr_dist_sum's
all-to-all + all-gather).
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import cpu_model, git_version, publish  # noqa: E402

CONFIG_NAMES = {"msrvtt": "MSR-VTT VSE∞ (frames)", "coco": "COCO VSE∞ (regions, MLP)"}


def parse(argv):
    files, opts, i = [], {"append": False}, 0
    while i < len(argv):
        a = argv[i]
        if a in ("--load", "--uptime"):
            opts[a[2:]] = (argv[i + 1], argv[i + 2])
            i += 3
        elif a in ("--cores", "--command"):
            opts[a[2:]] = argv[i + 1]
            i += 2
        elif a == "--append":
            opts["append"] = True
            i += 1
        else:
            files.append(a)
            i += 1
    return files, opts


def ms(seconds):
    return "%.1f" % (seconds * 1e3)


def config_table(runs, cores):
    base = next(r for r in runs if r["ranks"] == 1 and r["threads_per_rank"] == 1)
    whole = next((r for r in runs if r["ranks"] == 1 and r["threads_per_rank"] == cores),
                 None)
    first = runs[0]
    lines = [
        "%s: batch %d, %d frames x %d features, E %d, MLP %s, vocabulary %d; %d trainable "
        "parameters = **%.1f MB** of float32 gradients summed per step; embeddings gathered "
        "per step: %.2f MB (2 x B x E floats); %.1f matrix-product GFLOP per step."
        % (CONFIG_NAMES.get(first["config"], first["config"]), first["B"], first["frames"],
           first["F"], first["E"], first["mlp_hidden"] or "none", first["vocab"],
           first["n_trainable"], first["param_bytes"] / 1e6, first["gather_bytes"] / 1e6,
           first["gflop_per_step"]),
        "",
        "| ranks x threads | step ms, median (min-max) | forward + backward ms, slowest / "
        "fastest rank | grad sum in step ms | grad sum alone ms | gather alone ms | comm share "
        "| wait share | speed-up vs 1 x 1 | efficiency | vs 1 x %s | all-reduce bus / alg GB/s "
        "| 1-float sum us | loss first / last |" % cores,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        n, t = r["ranks"], r["threads_per_rank"]
        step = r["step_s"]["median"]
        used = min(n * t, cores)
        speedup = base["step_s"]["median"] / step
        if n > 1:
            s, in_step = r["sum_s"]["median"], r["sum_in_step_s"]["median"]
            comm = s + r["gather_s"]["median"]
            bw = "%.2f / %.2f" % (r["param_bytes"] * 2 * (n - 1) / n / s / 1e9,
                                  r["param_bytes"] / s / 1e9)
            sums = (ms(in_step), ms(s), ms(r["gather_s"]["median"]),
                    "%.0f%%" % (100 * comm / step),
                    "%.0f%%" % (100 * max(0.0, in_step - s) / step),
                    "%.1f" % (r["tiny_sum_s"]["median"] * 1e6))
        else:
            bw = "-"
            sums = ("-", "-", "-", "-", "-", "-")
        vs_whole = "%.2fx" % (whole["step_s"]["median"] / step) if whole else "-"
        lines.append(
            "| %d x %d%s | **%s** (%s-%s) | %s / %s | %s | %s | %s | %s | %s | %.2fx | %.0f%% "
            "| %s | %s | %s | %.4f / %.4f |"
            % (n, t, " (oversubscribed)" if n * t > cores else "", ms(step),
               ms(r["step_s"]["min"]), ms(r["step_s"]["max"]), ms(r["compute_s"]["median"]),
               ms(r["compute_fastest_s"]["median"]), sums[0], sums[1], sums[2], sums[3],
               sums[4], speedup, 100 * speedup / used, vs_whole, bw, sums[5],
               r["loss_first"], r["loss_last"]))
    return "\n".join(lines)


def main(argv):
    files, o = parse(argv)
    runs = []
    for path in files:
        with open(path) as f:
            runs.append(json.loads(f.readline()))
    cores = int(o["cores"])
    configs = []
    for r in runs:
        if r["config"] not in configs:
            configs.append(r["config"])
    first = runs[0]
    report = [
        "## Data-parallel training: step, gradient sum and gather on 1-%d ranks (%s)"
        % (max(r["ranks"] for r in runs), datetime.date.today().isoformat()),
        "",
        "Command: `%s` (code %s). Machine: %s, %d cores; OpenBLAS kernel %s "
        "(openblas_get_corename in the bench process; OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE "
        "unset), OMP_WAIT_POLICY=passive, Open MPI over shared memory (btl self,vader, no "
        "binding). Threads per rank = OPENBLAS_NUM_THREADS = OMP_NUM_THREADS. Load average "
        "(1 min) %s before, %s after; uptime before: `%s`; after: `%s` (the machine is "
        "shared: a load above the run's own ranks x threads means other work took cores)."
        % (o["command"], git_version(), cpu_model(), cores, first["openblas_core"],
           o["load"][0], o["load"][1], o["uptime"][0].strip(), o["uptime"][1].strip()),
        "",
        "Each rank builds the whole global batch and trains its share of it as vtr-train "
        "does (vtr_vse_batch_share, vtr_vse_train_step with the embeddings gathered and "
        "BatchNorm synced, vtr_dist_agree, vtr_dist_sum of the gradients, clipping, AdamW). "
        "%d warm-up and %d timed steps per run, each step after a barrier; a step's time is "
        "the slowest rank's; medians. \"grad sum in step\" is vtr_dist_agree + vtr_dist_sum "
        "inside the step, waiting for the slowest rank included; \"alone\": the gradient "
        "sum and the gather of both sides' B x E embeddings, each timed %d times after a "
        "barrier with nothing else running. comm share = (grad sum alone + gather alone) / "
        "step: what the collectives themselves cost; wait share = (grad sum in step - grad "
        "sum alone) / step: the time the faster ranks wait for the slowest (its share of the "
        "batch took longer: load imbalance, or another process took its core). Efficiency = speed-up over 1 x 1 / the cores the run can use; the losses show "
        "that every run trains the same model (the same batches and initial weights)."
        % (first["warmup"], first["steps"], first["reps"]),
    ]
    for c in configs:
        report += ["", config_table([r for r in runs if r["config"] == c], cores)]
    report += ["", "Per-step seconds (timed steps, slowest rank): " + "; ".join(
        "%s %dx%d: %s" % (r["config"], r["ranks"], r["threads_per_rank"],
                          ", ".join("%.3f" % t for t in r["step_times"])) for r in runs)]
    publish("\n".join(report) + "\n", o["append"])


if __name__ == "__main__":
    main(sys.argv[1:])
