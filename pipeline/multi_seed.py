#!/usr/bin/python3
"""Trains one config with several seeds and reports mean ± sd of the test metrics
(REFERENCE.md "Reproducibility": report mean and standard deviation over seeds, never the
best run).

    pipeline/multi_seed.py configs/msrvtt-vse-inf.yaml --seeds 1,2,3 -o runs/msrvtt-3seeds

For every seed N, in order: vtr-train CONFIG --seed N -o RUN_DIR/seed-N [--set ...]
(or vtr-train --resume RUN_DIR/seed-N when that run exists: an interrupted series
continues where it stopped, a finished run is not trained again), then
vtr-eval -c RUN_DIR/seed-N/best.safetensors --split SPLIT --json, kept as
RUN_DIR/seed-N/eval-SPLIT.json (and recorded in the catalog by vtr-eval). Then:

  RUN_DIR/summary.json  {"config", "split", "seeds", "n", "runs": [{"seed", "dir",
                        "checkpoint", "v2t", "t2v", "rsum"}], "mean": {"v2t": {...},
                        "t2v": {...}, "rsum"}, "sd": {... the same keys}}; sd is the
                        sample standard deviation (n - 1 in the denominator), null for one
                        seed. Written atomically.
  stdout                a table of mean ± sd: R@1, R@5, R@10 both ways and RSUM.

The programs are taken from the bin/ beside this script when built there, else from PATH.
Exit status: 0 done; 1 bad usage or a run or evaluation that failed (its output is shown;
the runs done so far stay and a rerun continues).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

PROG = "multi_seed.py"
RECALLS = ("r1", "r5", "r10")


def program(name):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bin", name)
    if os.access(here, os.X_OK):
        return os.path.normpath(here)
    found = shutil.which(name)
    if not found:
        raise SystemExit("%s: %s not found (build it, or put it on PATH)" % (PROG, name))
    return found


def parse_seeds(text):
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        seeds = []
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError("wants distinct integers >= 0 separated by commas, "
                                         "got '%s'" % text)
    return seeds


def run(cmd, capture=False):
    """Runs cmd; on failure exits 1 naming it. -> its stdout when captured."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: '%s' failed with exit status %d" % (PROG, " ".join(cmd),
                                                                  r.returncode))
    return r.stdout


def mean_sd(values):
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def summarize(runs):
    """-> (mean, sd), each {"v2t": {metric: x}, "t2v": {...}, "rsum": x}."""
    mean, sd = {}, {}
    for direction in ("v2t", "t2v"):
        mean[direction], sd[direction] = {}, {}
        for metric in runs[0][direction]:
            m, s = mean_sd([r[direction][metric] for r in runs])
            mean[direction][metric], sd[direction][metric] = m, s
    mean["rsum"], sd["rsum"] = mean_sd([r["rsum"] for r in runs])
    return mean, sd


def write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def pm(m, s):
    return "%6.2f ± %-5s" % (m, "%.2f" % s if s is not None else "-")


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="Runs a vtr-train config once per "
                                 "seed into RUN_DIR/seed-N/ and reports mean ± sd of the "
                                 "best checkpoints' test metrics (docs/training.md).")
    ap.add_argument("config", help="the vtr-train config (YAML)")
    ap.add_argument("--seeds", required=True, type=parse_seeds, help="e.g. 1,2,3")
    ap.add_argument("-o", "--output", required=True, help="RUN_DIR")
    ap.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every run (repeatable)")
    ap.add_argument("--split", default="test", help="split evaluated [test]")
    ap.add_argument("--threads", type=int, help="--threads of vtr-train and vtr-eval")
    ap.add_argument("--eval-option", action="append", default=[], metavar="OPTION",
                    help="passed to vtr-eval, e.g. --eval-option=--coco-1k (repeatable)")
    a = ap.parse_args(argv)
    train, evaluate = program("vtr-train"), program("vtr-eval")
    threads = ["--threads", str(a.threads)] if a.threads else []
    os.makedirs(a.output, exist_ok=True)

    runs = []
    for seed in a.seeds:
        d = os.path.join(a.output, "seed-%d" % seed)
        if os.path.exists(os.path.join(d, "last.safetensors")):
            run([train, "--resume", d] + threads)
        else:
            sets = [x for s in a.set for x in ("--set", s)]
            run([train, a.config, "--seed", str(seed), "-o", d] + sets + threads)
        best = os.path.join(d, "best.safetensors")
        out = run([evaluate, "-c", best, "--split", a.split, "--json"] + threads +
                  a.eval_option, capture=True)
        write_atomic(os.path.join(d, "eval-%s.json" % a.split), out)
        r = json.loads(out)
        runs.append({"seed": seed, "dir": d, "checkpoint": best, "v2t": r["v2t"],
                     "t2v": r["t2v"], "rsum": r["rsum"]})

    mean, sd = summarize(runs)
    summary = {"config": a.config, "split": a.split, "seeds": a.seeds, "n": len(runs),
               "runs": runs, "mean": mean, "sd": sd}
    write_atomic(os.path.join(a.output, "summary.json"), json.dumps(summary, indent=1) + "\n")

    print("%s, split %s: mean ± sd over %d seeds (%s; sd with n - 1)"
          % (a.config, a.split, len(runs), ", ".join(str(s) for s in a.seeds)))
    print("%-5s %-14s %-14s %-14s" % ("", "R@1", "R@5", "R@10"))
    for direction in ("v2t", "t2v"):
        print("%-5s %s" % (direction, " ".join(pm(mean[direction][k], sd[direction][k])
                                              for k in RECALLS)))
    print("RSUM  %s" % pm(mean["rsum"], sd["rsum"]))
    print("summary: %s" % os.path.join(a.output, "summary.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
