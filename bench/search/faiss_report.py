#!/usr/bin/python3
"""The report of bench/search/faiss.sh: reads WORK/out.txt (the steps' output, in order)
and the result rows the steps saved, prints the report, and with --append adds it to
bench/RESULTS.md.

  faiss_report.py WORK [--append]
"""
import datetime
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import blas_setting, cpu_model, git_version, publish  # noqa: E402
from baseline import agreement, segments  # noqa: E402

COMMAND = "sh bench/search/faiss.sh --append"


def parse(path):
    """The lines "name v1 v2 ..." of out.txt: the exact steps' values by name (repeated
    names concatenated), and one dict per approximate run (from its "approx_kind" line on),
    whose per-effort lines "name EFFORT v..." are keyed (name, effort)."""
    top, runs = {}, []
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "approx_kind":
                runs.append({"kind": p[1], "efforts": []})
            elif p[0].startswith("approx_") and runs:
                run = runs[-1]
                if p[0] in ("approx_single_s", "approx_single_recall", "approx_batch_s",
                            "approx_recall"):
                    e = int(p[1])
                    if e not in run["efforts"]:
                        run["efforts"].append(e)
                    run[(p[0], e)] = [float(x) for x in p[2:]]
                else:
                    run[p[0]] = float(p[1])
            else:
                top.setdefault(p[0], []).extend(p[1:])
    return top, runs


def median(v):
    return float(np.median([float(x) for x in v]))


def report(work, append):
    v, runs = parse(work + "/out.txt")
    Q = np.load(work + "/queries.npy")
    mats = segments(work)
    n_rows, dim = sum(m.shape[0] for m in mats), mats[0].shape[1]
    k = 10
    loads = [float(x) for x in v["load"]]
    vs, fs = median(v["single_s"]), median(v["faiss_single_s"])
    floor = median(v["floor_s"])
    vb, vg, fb = median(v["batch_s"]), median(v["sgemm_batch_s"]), median(v["faiss_batch_s"])
    single = len(v["single_s"])
    vtr_s = np.load(work + "/vtr_single_rows.npy")
    fa_s = np.load(work + "/faiss_single_rows.npy")
    s_same, s_worst = agreement(mats, Q, vtr_s, fa_s[:vtr_s.shape[0]])
    b_same, b_worst = agreement(mats, Q, np.load(work + "/vtr_batch_rows.npy"),
                                np.load(work + "/faiss_batch_rows.npy"))
    ms = lambda s: "%.1f ms" % (s * 1e3)
    join = lambda xs, f="%.2f": " ".join(f % float(x) for x in xs)
    lines = [
        "## Search against FAISS: exact (IndexFlatIP) and the approximate index (IVF-PQ, "
        "HNSW), %s x %d (%s)" % (format(n_rows, ","), dim, datetime.date.today().isoformat()),
        "",
        "Command: `%s` (code %s). Machine: %s, %d cores, %.0f GiB; every program with %s "
        "OpenMP threads and OMP_WAIT_POLICY=passive, the default OpenBLAS threads; %s. "
        "FAISS: Debian's libfaiss-dev 1.7.3 (a static library built for SSE, not AVX2). Load "
        "average (1 min) during the run: %.1f to %.1f (the machine is shared; above %d, other "
        "processes took CPU time from every side)." % (
            COMMAND, git_version(), cpu_model(), os.cpu_count(),
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            v["threads"][0], blas_setting(), min(loads), max(loads), os.cpu_count()),
        "",
        "Data: %s synthetic embeddings with neighbourhoods (%s cluster centres of uniform "
        "components, each row its centre plus uniform noise of the same scale, "
        "L2-normalized; bench/search/search_bench.c), %d-d float16, %.2f GB in %d segments, "
        "built through vtr_embedding_index_writer (%.0f s). Queries: %d unit vectors, each "
        "a random centre plus noise of half its scale; k = %d. Times are wall-clock for "
        "the search calls only (index and rows loaded and paged in before)." % (
            format(n_rows, ","), format(int(v["clusters"][0]), ","), dim,
            n_rows * dim * 2 / 1e9, len(mats), float(v["build_s"][0]), Q.shape[0], k),
        "",
        "### Exact: vtr against FAISS's IndexFlatIP on the same rows",
        "",
        "| | vtr (float16 rows) | FAISS IndexFlatIP (float32 rows) | FAISS / vtr |",
        "|---|---|---|---|",
        "| one query (median of %d) | %s | %s | %.1fx |" % (single, ms(vs), ms(fs), fs / vs),
        "| %d queries at once (median of 3), vtr's default kernel (%s) | %.2f s (%.0f "
        "queries/s) | %.2f s (%.0f queries/s) | %.2fx |" % (
            Q.shape[0], v["kernel"][0], vb, Q.shape[0] / vb, fb, Q.shape[0] / fb, fb / vb),
        "| %d queries at once, vtr's sgemm kernel | %.2f s (%.0f queries/s) | | %.2fx |" % (
            Q.shape[0], vg, Q.shape[0] / vg, fb / vg),
        "",
        "- One query: vtr %s ms (the memory-bandwidth floor of the float16 matrix, one "
        "streaming read timed before each query: %s median); FAISS %s ms: Debian's FAISS "
        "scores one query on one thread with SSE over float32 rows (twice the bytes)." % (
            join([float(x) * 1e3 for x in v["single_s"]], "%.0f"), ms(floor),
            join([float(x) * 1e3 for x in v["faiss_single_s"]], "%.0f")),
        "- Batch: runs alternated vtr, vtr sgemm, FAISS (its three batches in one process, "
        "after loading the rows: %.0f s), then vtr, vtr sgemm twice more. vtr: %s s; vtr "
        "sgemm: %s s; FAISS: %s s. FAISS and vtr's sgemm kernel are bound by the float32 "
        "product (OpenBLAS sgemm, %d x %s x %d); vtr's bfloat16 filters multiply in bfloat16 "
        "and score exactly what may reach the top %d (index/topk.h)." % (
            float(v["faiss_load_s"][0]), join(v["batch_s"]), join(v["sgemm_batch_s"]),
            join(v["faiss_batch_s"]), Q.shape[0], format(n_rows, ","), dim, k),
        "- Results: the top-%d lists are identical for %d of %d single queries and %d of %d "
        "batch queries; where they differ, the exact (float64) scores of the two lists "
        "differ rank by rank by at most %.1e (near-ties that float32 rounding orders either "
        "way)." % (k, s_same, single, b_same, Q.shape[0], max(s_worst, b_worst)),
        "",
        "### The approximate index (vtr-approx): FAISS's candidates, scored exactly",
        "",
        "Each query asks FAISS for max(10 k, 100) = 100 candidates, which are scored exactly "
        "from the float16 rows (the exact search's scores, bit for bit); recall@10 is the "
        "share of the exact search's top 10 (vtr's batch above) among the 10 returned. "
        "\"one at a time\": %d queries, each alone (the latency of a web page's query, "
        "without the text encoder); \"at once\": all %d in one call." % (
            APPROX_SINGLE_DEFAULT, Q.shape[0]),
        "",
        "| index | rows | build | file | effort | one at a time: median latency (queries/s) "
        "| recall@10 | %d at once: queries/s | recall@10 |" % Q.shape[0],
        "|---|---|---|---|---|---|---|---|---|",
    ]
    exact_small = v.get("small_batch_s")
    for run in runs:
        rows = int(v["hnsw_rows"][0]) if run["kind"] == "hnsw" else n_rows
        for e in run["efforts"]:
            lat = median(run[("approx_single_s", e)])
            name = ("efSearch" if run["kind"] == "hnsw" else "nprobe") + (
                " %d" % e if e else " default")
            lines.append("| %s | %s | %.0f s | %.0f MB | %s | %s (%.0f) | %.3f | %.0f | %.3f |" % (
                "HNSW" if run["kind"] == "hnsw" else "IVF-PQ", format(rows, ","),
                run["approx_build_s"], run["approx_bytes"] / 1e6, name, ms(lat),
                len(run[("approx_single_s", e)]) / sum(run[("approx_single_s", e)]),
                run[("approx_single_recall", e)][0], Q.shape[0] / run[("approx_batch_s", e)][0],
                run[("approx_recall", e)][0]))
    lines += [
        "",
        "- Exact search for comparison: one query %s (%.0f queries/s), %d at once %.0f "
        "queries/s over %s rows%s." % (
            ms(vs), 1 / vs, Q.shape[0], Q.shape[0] / vb, format(n_rows, ","),
            "; %.0f queries/s at once over the HNSW's %s rows" % (
                Q.shape[0] / median(exact_small), format(int(v["hnsw_rows"][0]), ","))
            if exact_small else ""),
        "- HNSW: over its own %s rows of the same density (one centre per 100 rows) and its "
        "own %d queries, since Debian's FAISS (SSE only) adds about one 1024-d row per 2 ms "
        "to an HNSW graph on 2 cores (40 minutes for 1,000,000)." % (
            format(int(v["hnsw_rows"][0]), ",") if "hnsw_rows" in v else "no", Q.shape[0]),
        "- Defaults: IVF-PQ sqrt(N) lists (k-means on 65,536 sampled rows, 10 iterations), "
        "codes of D/32 = %d bytes, nprobe = lists / 8; HNSW 32 links, efConstruction 40, "
        "rows as 8-bit values, efSearch = max(candidates, 64). Reading the file "
        "(vtr_approx_index_open: whole, checksum, FAISS's parse): %s." % (
            dim // 32, "; ".join("%s %.2f s" % (r["kind"], r["approx_open_s"]) for r in runs)),
        "",
    ]
    publish("\n".join(lines), append)


APPROX_SINGLE_DEFAULT = 100

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report(sys.argv[1], "--append" in sys.argv[2:])
