#!/bin/sh
# bench/features/bf16.sh: CNN frame features in bfloat16 (vtr-features --bf16: oneDNN's
# bfloat16 convolutions, AMX or AVX512-BF16, float32 sums) against torchvision's bfloat16
# inference on the CPU (channels_last, torch.autocast("cpu", dtype=torch.bfloat16)) and
# against both sides in float32, in one run on the same machine, threads and weights:
# images/s at batch 32 on 224x224, and the cosine of vtr's bfloat16 features to its float32
# ones, per image. Targets (issue 21): vtr bf16 at least 1.5x torchvision bf16 and 3x
# torchvision float32; cosine at least 0.999.
#
#   sh bench/features/bf16.sh [--append] [--threads N] [--runs R] [--archs A,B]
#
# From the top of the tree after ./configure; needs python3-torchvision and a CPU with
# AVX512-BF16 or AMX. Per architecture, twice in turn: vtr float32, vtr bfloat16,
# torchvision float32, torchvision bfloat16 (bench/features/features_bench.c and
# torch_bench.py, as bench/features/run.sh runs them). Random weights with torchvision's
# names, the same file for both sides.
set -eu
cd "$(dirname "$0")/../.."
. bench/features/setup.sh
load_before=$(cut -d' ' -f1 /proc/loadavg)
for arch in $(echo "$archs" | tr , ' '); do
    w="$work/$arch.safetensors"
    /usr/bin/python3 tests/fixtures/make_backbone_fixtures.py random-weights "$arch" "$w" 0
    for round in 1 2; do
        bench/out/features_bench "$w" "$arch" "$batch" "$runs" "$warmup" >"$work/$arch.vtr$round.json"
        bench/out/features_bench "$w" "$arch" "$batch" "$runs" "$warmup" --bf16 \
            >"$work/$arch.vtr-bf16$round.json"
        /usr/bin/python3 bench/features/torch_bench.py "$w" "$arch" "$batch" "$runs" "$warmup" \
            "$threads" >"$work/$arch.torch$round.json"
        /usr/bin/python3 bench/features/torch_bench.py "$w" "$arch" "$batch" "$runs" "$warmup" \
            "$threads" --bf16 >"$work/$arch.torch-bf16$round.json"
    done
    rm -f "$w"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/python3 - "$work" "$archs" "$threads" "$runs" "$load_before" "$load_after" $append <<'PYEOF'
import datetime, json, statistics, sys
sys.path.insert(0, "bench")
import machine
work, archs, threads, runs, lb, la = sys.argv[1:7]
sides = ["vtr", "vtr-bf16", "torch", "torch-bf16"]
rows, notes = [], []
for arch in archs.split(","):
    runs_of = {s: [json.load(open("%s/%s.%s%d.json" % (work, arch, s, r))) for r in (1, 2)]
               for s in sides}
    # images/s per timed batch (warm-up dropped), both rounds
    rate = {s: [j["batch"] / t for j in runs_of[s] for t in j["times"][j["warmup"]:]]
            for s in sides}
    med = {s: statistics.median(rate[s]) for s in sides}
    cos_min = min(j["cosine_min"] for j in runs_of["vtr-bf16"])
    rows.append("| %s | %.2f | **%.2f** | %.2f | %.2f | **%.2fx** | **%.2fx** | %.2fx | %.5f |" % (
        arch, med["vtr"], med["vtr-bf16"], med["torch"], med["torch-bf16"],
        med["vtr-bf16"] / med["torch-bf16"], med["vtr-bf16"] / med["torch"],
        med["vtr-bf16"] / med["vtr"], cos_min))
    notes.append("- %s: images/s per batch, first | second round: %s." % (arch, "; ".join(
        "%s %s" % (s, " | ".join(" ".join("%.2f" % (j["batch"] / t)
                                          for t in j["times"][j["warmup"]:]) for j in runs_of[s]))
        for s in sides)))
j = runs_of["vtr"][0]
t = runs_of["torch"][0]
cmd = "sh bench/features/bf16.sh%s --threads %s --runs %s --archs %s" % (
    " --append" if len(sys.argv) > 7 else "", threads, runs, archs)
report = f"""## CNN features in bfloat16: vtr vs torchvision, batch 32 at 224x224 ({datetime.date.today()})

Command: `{cmd}` (code {machine.git_version()}). Machine: {machine.cpu_model()}, {threads}
threads on every side; {machine.blas_setting()}; {j['isa']}; torch {t['torch']}, torchvision
{t['torchvision']}. Load average (1 min) {lb} before, {la} after. vtr float32 and
`vtr-features --bf16` (oneDNN's bfloat16 convolutions, float32 sums and biases, features
widened to float32); torchvision float32 (`model.eval()`, `torch.no_grad()`) and bfloat16
(channels_last model and input under `torch.autocast("cpu", dtype=torch.bfloat16)`). Random
weights with torchvision's names, the same file for both sides; random input; the forward
pass only. Images/s: median over {2 * int(runs)} timed batches per side (two rounds, each
after a warm-up batch). Cosine: of each image's bfloat16 features to vtr's float32 ones,
the lowest over the batch and both rounds.

| backbone | vtr f32 | vtr bf16 | torchvision f32 | torchvision bf16 | vtr bf16 / torchvision bf16 | vtr bf16 / torchvision f32 | vtr bf16 / vtr f32 | cosine (min) |
|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + """

Targets (issue 21 item 3): at least 1.5x torchvision bf16, at least 3x torchvision float32,
cosine at least 0.999.

""" + "\n".join(notes) + "\n"
machine.publish(report, len(sys.argv) > 7)
PYEOF
