#!/usr/bin/python3
"""numpy's side of bench/search, and the report (run.sh calls each step).

  baseline.py queries WORK Q DIM   WORK/queries.npy: Q random unit vectors, float32, seed 1
  baseline.py tune WORK K          picks numpy's best block sizes on a sample
  baseline.py single WORK N K      the first N queries one at a time
  baseline.py batch WORK K         all queries at once, one run
  baseline.py f16 WORK K           the float16-matmul variant on a sample, extrapolated
  baseline.py report WORK [--append]
        reads WORK/vtr.txt and WORK/numpy.txt (the steps' output), compares the results
        and prints the report; --append adds it to bench/RESULTS.md.

The index is WORK/index; numpy reads its segment files with np.load(mmap_mode="r") in
the order index.sqlite lists them (the same pages vtr maps). The baseline is what a numpy
user would write for exact top-k over a float16 matrix: per block of rows, widen to
float32 (blk.astype(np.float32)), multiply with the queries (OpenBLAS sgemm, or sgemv for
one query, as vtr), np.argpartition for the block's top k, one final sort of the
candidates. Multiplying in float16 directly (blk @ q.astype(np.float16)) is timed on a
sample and extrapolated: numpy has no float16 BLAS, so that product runs in numpy's own
loops, rounds to float16 as it accumulates (less exact than vtr's float32) and is far
slower; the float32 variant is both the fairer one (the same arithmetic as vtr) and the
faster, and it is the one compared.
"""
import datetime
import os
import sqlite3
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import blas_setting, cpu_model, git_version, publish  # noqa: E402

COMMAND = "sh bench/search/run.sh --append"


def segments(work):
    db = sqlite3.connect("file:%s/index/index.sqlite?mode=ro" % work, uri=True)
    segs = db.execute("SELECT id, rows FROM segments ORDER BY id").fetchall()
    dead = db.execute("SELECT count(*) FROM entries WHERE live = 0").fetchone()[0]
    db.close()
    assert dead == 0, "the benchmark index has no tombstones"
    mats = [np.load("%s/index/seg-%06d.npy" % (work, i), mmap_mode="r") for i, _ in segs]
    assert [m.shape[0] for m in mats] == [r for _, r in segs]
    return mats


def warm(mats):
    """Maps the pages in (one read of every byte), as vtr's side does before timing."""
    for m in mats:
        np.bitwise_xor.reduce(m.view(np.uint16).ravel())


def topk(mats, Q, k, block, f16=False, limit=None):
    """Exact top-k rows of each query (rows of Q) over the row blocks of mats: (rows,
    scores), each (q, k), ties by lower row. limit: stop after that many rows (samples)."""
    cand_s, cand_i, base, seen = [], [], 0, 0
    single = Q.shape[0] == 1
    q = Q.astype(np.float16) if f16 else Q
    for m in mats:
        for s in range(0, m.shape[0], block):
            if limit is not None and seen >= limit:
                break
            blk = m[s:s + block] if f16 else m[s:s + block].astype(np.float32)
            S = (blk @ q[0])[None, :] if single else q @ blk.T
            kk = min(k, S.shape[1])
            idx = np.argpartition(S, S.shape[1] - kk, axis=1)[:, -kk:]
            cand_i.append(idx + base + s)
            cand_s.append(np.take_along_axis(S, idx, axis=1).astype(np.float32))
            seen += blk.shape[0]
        base += m.shape[0]
    S, I = np.concatenate(cand_s, axis=1), np.concatenate(cand_i, axis=1)
    order = np.lexsort((I, -S), axis=1)[:, :k]
    return np.take_along_axis(I, order, axis=1), np.take_along_axis(S, order, axis=1)


def best_block(mats, Q, k, blocks, sample_rows):
    """The block size with which numpy runs fastest on the first sample_rows rows (several
    blocks of each size, so that the cost of allocating a block's arrays counts)."""
    times = {}
    for b in blocks:
        topk(mats, Q, k, b, limit=b)  # warm: one block
        t0 = time.perf_counter()
        topk(mats, Q, k, b, limit=sample_rows)
        times[b] = time.perf_counter() - t0
    return min(times, key=times.get), times


def read_kv(path):
    """Lines "name v1 v2 ..." -> {name: [v1, v2, ...]}, repeated names concatenated."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                out.setdefault(parts[0], []).extend(parts[1:])
    return out


def exact_scores(mats, q, rows):
    """float64 scores of the given global rows for query q."""
    out, starts = [], np.cumsum([0] + [m.shape[0] for m in mats])
    for r in rows:
        p = int(np.searchsorted(starts, r, side="right")) - 1
        out.append(np.dot(mats[p][r - starts[p]].astype(np.float64), q.astype(np.float64)))
    return np.array(out)


def agreement(mats, Q, rows_a, rows_b):
    """Queries whose top-k lists are identical, and for the others the largest difference,
    rank by rank, between the exact (float64) scores of the two lists' rows: rounding
    can only swap rows whose exact scores are that close."""
    same, worst = 0, 0.0
    for i in range(rows_a.shape[0]):
        if np.array_equal(rows_a[i], rows_b[i]):
            same += 1
            continue
        ea, eb = exact_scores(mats, Q[i], rows_a[i]), exact_scores(mats, Q[i], rows_b[i])
        worst = max(worst, float(np.max(np.abs(ea - eb))))
    return same, worst


def report(work, append):
    v, n = read_kv(work + "/vtr.txt"), read_kv(work + "/numpy.txt")
    Q = np.load(work + "/queries.npy")
    mats = segments(work)
    n_rows, dim = sum(m.shape[0] for m in mats), mats[0].shape[1]
    k = int(n["k"][0])
    floor = np.array([float(x) for x in v["floor_s"]])
    vtr_single = np.array([float(x) for x in v["single_s"]])
    vtr_batch = [float(x) for x in v["batch_s"]]
    # the other kernels, in the order they ran: {name: [seconds per run]}
    others = {key[:-len("_batch_s")]: [float(x) for x in val] for key, val in v.items()
              if key.endswith("_batch_s")}
    np_single = [float(x) for x in n["single_s"]]
    np_batch = [float(x) for x in n["batch_s"]]
    loads = [float(x) for x in v["load"]]
    fs, vs = float(np.median(floor)), float(np.median(vtr_single))
    ratio = float(np.median(vtr_single / floor))  # each query against the pass before it
    vb, nb = float(np.median(vtr_batch)), float(np.median(np_batch))
    ns = float(np.median(np_single))
    single = len(vtr_single)

    vtr_srows = np.load(work + "/vtr_single_rows.npy")
    vtr_brows = np.load(work + "/vtr_batch_rows.npy")
    s_same, s_worst = agreement(mats, Q, vtr_srows, np.load(work + "/numpy_single_rows.npy"))
    np_brows = np.load(work + "/numpy_batch_rows.npy")
    b_same, b_worst = agreement(mats, Q, vtr_brows, np_brows)
    other_agree = {name: agreement(mats, Q, np.load(work + "/vtr_%s_batch_rows.npy" % name),
                                   np_brows) for name in others}

    ms = lambda s: "%.1f ms" % (s * 1e3)
    gb = n_rows * dim * 2 / 1e9
    lines = [
        "## Exact top-k search: vtr vs numpy and the memory-bandwidth floor, %s x %d "
        "float16 (%s)" % (format(n_rows, ","), dim, datetime.date.today().isoformat()),
        "",
        "Command: `%s` (code %s). Machine: %s, %d cores, %.0f GiB; vtr with %s OpenMP "
        "threads (OMP_WAIT_POLICY=passive), both sides with the default OpenBLAS threads; "
        "%s. Load average (1 min) during the run: "
        "%.1f to %.1f (the machine is shared; a load above %d means other processes took "
        "CPU time from both sides)." % (
            COMMAND, git_version(), cpu_model(), os.cpu_count(),
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            v["threads"][0], blas_setting(), min(loads), max(loads), os.cpu_count()),
        "",
        "Data: %s synthetic embeddings (uniform components, L2-normalized), %d-d float16, "
        "%.2f GB in %d segments, built by the benchmark through vtr_embedding_index_writer "
        "(%.0f s, %s rows/s) and read by both sides from the same segment files, pages "
        "mapped in before timing. Queries: %d random unit vectors, k = %d. Times are "
        "wall-clock for the search call only." % (
            format(n_rows, ","), dim, gb, len(mats), float(v["build_s"][0]),
            format(int(float(v["rows_per_s"][0])), ","), Q.shape[0], k),
        "",
        "| | vtr | numpy float32 blockwise | numpy float16 matmul (sample, extrapolated) | "
        "bandwidth floor |",
        "|---|---|---|---|---|",
        "| one query (median of %d) | %s | %s (block %s) | %s | %s (%.1f GB/s) |" % (
            single, ms(vs), ms(ns), n["single_block"][0], ms(float(n["f16_single_s"][0])),
            ms(fs), gb / fs),
        "| %d queries at once (median of %d), vtr's default kernel (%s) | %.2f s (%.0f "
        "queries/s) | %.2f s (block %s) | %.0f s | |" % (
            Q.shape[0], len(vtr_batch), v["kernel"][0], vb, Q.shape[0] / vb, nb,
            n["batch_block"][0], float(n["f16_batch_s"][0])),
    ] + [
        "| %d queries at once, vtr's %s kernel | %.2f s (%.0f queries/s) | | | |" % (
            Q.shape[0], name, np.median(t), Q.shape[0] / np.median(t))
        for name, t in others.items()
    ] + [
        "",
        "- One query: vtr **%.2fx** the bandwidth floor (median over the queries of the "
        "query's time over the floor pass just before it; target: at most 2x); numpy takes "
        "%.1fx vtr's time. vtr: %s ms; floor passes: %s ms." % (
            ratio, ns / vs, " ".join("%.0f" % (t * 1e3) for t in vtr_single),
            " ".join("%.0f" % (t * 1e3) for t in floor)),
        "- Batch: numpy / vtr = **%.2fx** with the default kernel (%s), %s (target: at "
        "least 2x without a bfloat16 filter); runs alternated vtr, %s, numpy. vtr: %s s; "
        "%s; numpy: %s s." % (
            nb / vb, v["kernel"][0],
            ", ".join("%.2fx with %s" % (nb / np.median(t), name) for name, t in others.items()),
            ", ".join("vtr " + name for name in others),
            " ".join("%.2f" % t for t in vtr_batch),
            "; ".join("vtr %s: %s s" % (name, " ".join("%.2f" % x for x in t))
                      for name, t in others.items()),
            " ".join("%.2f" % t for t in np_batch)),
        "- The floor: one streaming read of the whole matrix (every byte once, 32-byte loads, "
        "the same OpenMP threads and row ranges as vtr's one-query pass), timed right before "
        "each single query in the same process. numpy's block sizes were its fastest on a "
        "sample: one query %s; batch %s." % (n["single_tried"][0], n["batch_tried"][0]),
        "- Results: the top-%d lists equal numpy's for %d of %d single queries, %d of %d "
        "batch queries (default kernel)%s; where they differ, the exact (float64) scores of "
        "the two lists differ rank by rank by at most %.1e (near-ties that float32 rounding "
        "orders either way)." % (
            k, s_same, single, b_same, Q.shape[0],
            "".join(" and %d of %d (%s)" % (a[0], Q.shape[0], name)
                    for name, a in other_agree.items()),
            max([s_worst, b_worst] + [a[1] for a in other_agree.values()])),
        "",
    ]
    text = "\n".join(lines)
    publish(text, append)


def main(argv):
    cmd = argv[0] if argv else ""
    if cmd == "queries" and len(argv) == 4:
        work, q, dim = argv[1], int(argv[2]), int(argv[3])
        rng = np.random.default_rng(1)
        Q = rng.standard_normal((q, dim), dtype=np.float32)
        Q /= np.linalg.norm(Q, axis=1, keepdims=True)
        np.save(work + "/queries.npy", Q)
        return
    if cmd == "report" and len(argv) >= 2:
        report(argv[1], "--append" in argv[2:])
        return
    if cmd not in ("tune", "single", "batch", "f16") or len(argv) < 3:
        sys.exit(__doc__)
    work, k = argv[1], int(argv[-1])
    Q = np.load(work + "/queries.npy")
    mats = segments(work)
    n_rows = sum(m.shape[0] for m in mats)
    blocks = read_kv(work + "/numpy.txt") if cmd in ("single", "batch") else {}
    warm(mats)
    if cmd == "tune":
        sb, st = best_block(mats, Q[:1], k, [1024, 4096, 16384, 65536], min(262144, n_rows))
        bb, bt = best_block(mats, Q, k, [4096, 16384, 65536], min(262144, n_rows))
        fmt = lambda t: ",".join("%d:%.0fms" % (b, s * 1e3) for b, s in t.items())
        print("k %d\nsingle_block %d\nsingle_tried %s\nbatch_block %d\nbatch_tried %s"
              % (k, sb, fmt(st), bb, fmt(bt)))
    elif cmd == "single":
        n, block = int(argv[2]), int(blocks["single_block"][0])
        times, rows = [], []
        for i in range(n):
            t0 = time.perf_counter()
            r, _ = topk(mats, Q[i:i + 1], k, block)
            times.append(time.perf_counter() - t0)
            rows.append(r[0])
        np.save(work + "/numpy_single_rows.npy", np.array(rows))
        print("single_s " + " ".join("%.5f" % t for t in times))
    elif cmd == "batch":
        t0 = time.perf_counter()
        rows, _ = topk(mats, Q, k, int(blocks["batch_block"][0]))
        print("batch_s %.3f" % (time.perf_counter() - t0))
        np.save(work + "/numpy_batch_rows.npy", rows)
    else:  # f16, on samples
        single_rows, batch_rows = min(65536, n_rows), min(2048, n_rows)
        t0 = time.perf_counter()
        topk(mats, Q[:1], k, 65536, f16=True, limit=single_rows)
        f16_single = (time.perf_counter() - t0) * n_rows / single_rows
        t0 = time.perf_counter()
        topk(mats, Q, k, 2048, f16=True, limit=batch_rows)
        f16_batch = (time.perf_counter() - t0) * n_rows / batch_rows
        print("f16_single_s %.5f\nf16_batch_s %.3f" % (f16_single, f16_batch))


if __name__ == "__main__":
    main(sys.argv[1:])
