#!/usr/bin/python3
"""The tables of bench/scaling/run.sh from the runs' JSON lines (bench/scaling/scaling.c);
with --append also adds them to bench/RESULTS.md.

  report.py RUN_JSON... --cores C --rounds R --load BEFORE AFTER --uptime BEFORE AFTER
            --command CMD [--append]

One table per config, one row per layout (ranks x threads per rank), its runs pooled (the
rounds of run.sh): medians over every timed step and collective round. Speed-up is against the
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
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import blas_setting, cpu_model, git_version, publish  # noqa: E402

CONFIG_NAMES = {"msrvtt": "MSR-VTT VSE∞ (frames)", "coco": "COCO VSE∞ (regions, MLP)"}


def parse(argv):
    files, opts, i = [], {"append": False}, 0
    while i < len(argv):
        a = argv[i]
        if a in ("--load", "--uptime"):
            opts[a[2:]] = (argv[i + 1], argv[i + 2])
            i += 3
        elif a in ("--cores", "--command", "--rounds"):
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


TIMES = ("step_s", "compute_s", "compute_fastest_s", "sum_in_step_s", "sum_s", "gather_s",
         "tiny_sum_s")


def pool(runs):
    """The runs of one config and layout -> one, its time lists joined, and "med" holding
    each list's median."""
    r = dict(runs[0])
    for key in TIMES:
        r[key] = [t for run in runs for t in run[key]]
    r["med"] = {key: statistics.median(r[key]) for key in TIMES}
    r["rounds"] = len(runs)
    return r


def config_table(runs, cores):
    layouts = []
    for r in runs:
        if (r["ranks"], r["threads_per_rank"]) not in layouts:
            layouts.append((r["ranks"], r["threads_per_rank"]))
    runs = [pool([r for r in runs if (r["ranks"], r["threads_per_rank"]) == k])
            for k in layouts]
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
        step = r["med"]["step_s"]
        used = min(n * t, cores)
        speedup = base["med"]["step_s"] / step
        if n > 1:
            s, in_step = r["med"]["sum_s"], r["med"]["sum_in_step_s"]
            comm = s + r["med"]["gather_s"]
            bw = "%.2f / %.2f" % (r["param_bytes"] * 2 * (n - 1) / n / s / 1e9,
                                  r["param_bytes"] / s / 1e9)
            sums = (ms(in_step), ms(s), ms(r["med"]["gather_s"]),
                    "%.0f%%" % (100 * comm / step),
                    "%.0f%%" % (100 * max(0.0, in_step - s) / step),
                    "%.1f" % (r["med"]["tiny_sum_s"] * 1e6))
        else:
            bw = "-"
            sums = ("-", "-", "-", "-", "-", "-")
        vs_whole = "%.2fx" % (whole["med"]["step_s"] / step) if whole else "-"
        lines.append(
            "| %d x %d%s | **%s** (%s-%s) | %s / %s | %s | %s | %s | %s | %s | %.2fx | %.0f%% "
            "| %s | %s | %s | %.4f / %.4f |"
            % (n, t, " (oversubscribed)" if n * t > cores else "", ms(step),
               ms(min(r["step_s"])), ms(max(r["step_s"])), ms(r["med"]["compute_s"]),
               ms(r["med"]["compute_fastest_s"]), sums[0], sums[1], sums[2], sums[3],
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
        "(openblas_get_corename in the bench process; %s), OMP_WAIT_POLICY=passive, Open MPI "
        "over shared memory (btl self,vader, no binding). Threads per rank = "
        "OPENBLAS_NUM_THREADS = OMP_NUM_THREADS. Load average (1 min) %s before, %s after; "
        "uptime before: `%s`; after: `%s` (the machine is "
        "shared: a load above the run's own ranks x threads means other work took cores)."
        % (o["command"], git_version(), cpu_model(), cores, first["openblas_core"],
           blas_setting(), o["load"][0], o["load"][1], o["uptime"][0].strip(),
           o["uptime"][1].strip()),
        "",
        "Each rank builds the whole global batch and trains its share of it as vtr-train "
        "does (vtr_vse_batch_share, vtr_vse_train_step with the embeddings gathered and "
        "BatchNorm synced, vtr_dist_agree, vtr_dist_sum of the gradients, clipping, AdamW). "
        "%d warm-up and %d timed steps per run, %d runs of each layout (run.sh's rounds, "
        "the layouts in turn, so that a change of the machine's load touches every layout), "
        "each step after a barrier; a step's time is the slowest rank's; medians over the "
        "runs' steps pooled. \"grad sum in step\" is vtr_dist_agree + vtr_dist_sum "
        "inside the step, waiting for the slowest rank included; \"alone\": the gradient "
        "sum and the gather of both sides' B x E embeddings, each timed %d times after a "
        "barrier with nothing else running. comm share = (grad sum alone + gather alone) / "
        "step: what the collectives themselves cost; wait share = (grad sum in step - grad "
        "sum alone) / step: the time the faster ranks wait for the slowest (its share of the "
        "batch took longer: load imbalance, or another process took its core). Efficiency = "
        "speed-up over 1 x 1 / the cores the run can use; the losses show that every run "
        "trains the same model (the same batches and initial weights; to float rounding "
        "where sums run in another order)."
        % (first["warmup"], first["steps"], int(o["rounds"]), first["reps"]),
    ]
    for c in configs:
        report += ["", config_table([r for r in runs if r["config"] == c], cores)]
    report += ["", "Per-step seconds (each run's timed steps, slowest rank; the runs in the "
               "order they ran): " +
               "; ".join("%s %dx%d: %s" % (r["config"], r["ranks"], r["threads_per_rank"],
                                           ", ".join("%.2f" % t for t in r["step_s"]))
                         for r in runs)]
    publish("\n".join(report) + "\n", o["append"])


if __name__ == "__main__":
    main(sys.argv[1:])
