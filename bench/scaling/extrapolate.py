#!/usr/bin/python3
"""docs/scaling.md's model: data-parallel efficiency of a VSE∞ training step on N GPUs,
from a config's measured communication volume (bench/scaling/run.sh) and an assumed
one-GPU step time, over the networks below. Prints markdown tables.

  extrapolate.py --config NAME PARAM_BYTES GATHER_BYTES STEP_MS SMALL [--config ...]
                 [--gpus 8,16,32,64] [--per-node 8] [--backward 0.67]

NAME: a label; PARAM_BYTES: the gradient bytes summed per step (n_trainable x 4);
GATHER_BYTES: the embeddings gathered per step (2 x B x E x 4); STEP_MS: the assumed step
time of the whole global batch on one GPU; SMALL: latency-bound collectives per step
besides the gradient sum (each costs log2 N link latencies: recursive doubling or Bruck's
algorithm, as MPI and NCCL run small messages).

Per step on N GPUs (strong scaling: the global batch split N ways, vtr's recipe):
  compute   = STEP_MS / N
  all-reduce = 2 (N-1)/N x PARAM_BYTES / bw + 2 (N-1) x latency   (ring, or vtr_dist_sum's
              all-to-all + all-gather: the same bytes per rank)
  gather    = (N-1)/N x GATHER_BYTES / bw + SMALL x ceil(log2 N) x latency
  step      = compute + all-reduce + gather          (vtr: the sum after the whole backward)
  overlap   = compute + max(0, all-reduce - backward x compute) + gather   (an all-reduce
              hidden behind the backward as far as it lasts: a bound, not vtr's code)
  efficiency = compute / step; speed-up = N x efficiency.
Weak scaling (each GPU keeps a batch of the config's size, the global batch grows N-fold):
compute = STEP_MS, the rest as above.
Links: up to --per-node GPUs share one node's NVLink; beyond, the ring crosses the nodes'
network, whose per-node bandwidth is the bottleneck (NCCL's rings spread over a node's
NICs, so a node with k NICs moves k x a NIC's rate).
"""
import math
import sys

NVLINK = ("NVLink (in a node)", 300e9, 3e-6)
NETWORKS = [  # (name, bytes/s per node, latency per hop in seconds)
    ("8 x IB HDR, 200 GB/s", 200e9, 5e-6),
    ("1 x IB HDR, 25 GB/s", 25e9, 5e-6),
    ("100 GbE, 12.5 GB/s", 12.5e9, 10e-6),
    ("25 GbE, 3.1 GB/s", 3.125e9, 30e-6),
]


def times(n, compute, p_bytes, g_bytes, small, link):
    _, bw, lat = link
    if n == 1:
        return compute, 0.0, 0.0
    allreduce = 2 * (n - 1) / n * p_bytes / bw + 2 * (n - 1) * lat
    gather = (n - 1) / n * g_bytes / bw + small * math.ceil(math.log2(n)) * lat
    return compute, allreduce, gather


def link_for(n, per_node, net):
    return NVLINK if n <= per_node else net


def table(cfg, gpus, per_node, backward):
    name, p_bytes, g_bytes, step_ms, small = cfg
    t1 = step_ms / 1e3
    head = "| GPUs | batch per GPU | compute ms | " + " | ".join(net[0] for net in NETWORKS) + " |"
    lines = ["%s: %.1f MB of gradients and %.2f MB of embeddings per step, one-GPU step %g ms "
             "(assumed), %d small collectives per step." % (name, p_bytes / 1e6,
                                                                  g_bytes / 1e6, step_ms, small),
             "", "Strong scaling (the global batch split N ways, as vtr trains); a cell: "
             "communication ms per step, **efficiency** (with the all-reduce ideally "
             "overlapped):", "", head,
             "|---|---|---|" + "---|" * len(NETWORKS)]
    for n in gpus:
        cells = []
        for net in NETWORKS:
            c, ar, ga = times(n, t1 / n, p_bytes, g_bytes, small, link_for(n, per_node, net))
            step = c + ar + ga
            ov = c + max(0.0, ar - backward * c) + ga
            cells.append("%.2f, **%.0f%%** (%.0f%%)" % ((ar + ga) * 1e3, 100 * c / step,
                                                       100 * c / ov))
        lines.append("| %d | %g | %.2f | %s |" % (n, 128 / n, t1 / n * 1e3, " | ".join(cells)))
    lines += ["", "Weak scaling (the config's batch on every GPU, a global batch N times "
              "larger: another recipe); a cell: **efficiency** (overlapped):", "",
              "| GPUs | " + " | ".join(net[0] for net in NETWORKS) + " |",
              "|---|" + "---|" * len(NETWORKS)]
    for n in gpus:
        cells = []
        for net in NETWORKS:
            c, ar, ga = times(n, t1, p_bytes, g_bytes * n, small, link_for(n, per_node, net))
            step = c + ar + ga
            ov = c + max(0.0, ar - backward * c) + ga
            cells.append("**%.0f%%** (%.0f%%)" % (100 * c / step, 100 * c / ov))
        lines.append("| %d | %s |" % (n, " | ".join(cells)))
    return "\n".join(lines)


def main(argv):
    cfgs, gpus, per_node, backward, i = [], [8, 16, 32, 64], 8, 0.67, 0
    while i < len(argv):
        if argv[i] == "--config":
            a = argv[i + 1:i + 6]
            cfgs.append((a[0], float(a[1]), float(a[2]), float(a[3]), int(a[4])))
            i += 6
        elif argv[i] == "--gpus":
            gpus = [int(x) for x in argv[i + 1].split(",")]
            i += 2
        elif argv[i] == "--per-node":
            per_node = int(argv[i + 1])
            i += 2
        elif argv[i] == "--backward":
            backward = float(argv[i + 1])
            i += 2
        else:
            sys.exit(__doc__)
    if not cfgs:
        sys.exit(__doc__)
    print("\n\n".join(table(c, gpus, per_node, backward) for c in cfgs))


if __name__ == "__main__":
    main(sys.argv[1:])
