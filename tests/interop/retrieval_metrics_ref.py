#!/usr/bin/python3
"""An independent numpy implementation of vtr's retrieval metrics (match/retrieval_metrics.h),
written from REFERENCE.md ("Datasets and evaluation"), for tests/test_retrieval_metrics.c
and bench/eval.

  retrieval_metrics_ref.py DIR [--fold-items F] [--dedup] [--ndcg-cutoff K]
                               [--median-no-floor] [--method sort|count] [--time]

Inputs in DIR (.npy): cap_item (n_caps,) int; either S (n_items, n_caps) float32, or
items_0, captions_0, items_1, captions_1, ... float32 (an ensemble: S = the float32 sum of
items_m @ captions_m.T in model order, divided by the number of models when > 1); with
--dedup, cap_text (n_caps,) int.
Outputs in DIR: ref_metrics.npy [v2t r1 r5 r10 medr meanr map ndcg, t2v (the same 7),
rsum, n_folds]; ref_{v2t,t2v}_{rank,ap,ndcg}.npy per query (v2t by item, t2v by caption;
AP and nDCG in [0, 1]). Ranks are int64; the float64 values are stored as their int64 bit
patterns (.view(np.int64)), since vtr's NPY reader has no float64. --time prints the
seconds spent after loading.

Definitions. A query's ranking is a stable sort of -scores (ties: lower index first).
With p_1 < ... < p_m the zero-based positions of the relevant candidates: rank = p_1;
AP = mean_k k / (p_k + 1); nDCG = sum_{p_k < K} 1/log2(p_k + 2) / sum_{p < min(m, K)}
1/log2(p + 2). R@K = 100 * mean(rank < K); medr = floor(median(rank)) + 1 (no floor with
--median-no-floor); meanr = mean(rank) + 1; mAP and nDCG in percent. Folds of F items:
each fold's items and their captions alone; metrics averaged over folds. --dedup: one
candidate / query per distinct text id, its lowest caption's column of S, relevant to
every item having it.

--method sort (default) ranks by sorting; --method count counts the candidates before
each relevant one (faster for big cases) and checks itself against sorting on a sample.
"""
import sys
import time

import numpy as np


def fail(msg):
    print("retrieval_metrics_ref: " + msg, file=sys.stderr)
    sys.exit(1)


def positions_sort(S, rel):
    """Per row of S (q, n): the sorted zero-based positions of rel's True entries in the
    stable descending order."""
    out = []
    for a in range(0, S.shape[0], 256):
        order = np.argsort(-S[a:a + 256], axis=1, kind="stable")
        relsorted = np.take_along_axis(rel[a:a + 256], order, axis=1)
        for row in relsorted:
            out.append(np.flatnonzero(row))
    return out


def positions_count(S, rel):
    """Like positions_sort, by counting for each relevant candidate the candidates with a
    higher score or an equal score and a lower index; queries with the same number of
    relevant candidates go together, in chunks."""
    out = [None] * S.shape[0]
    counts = rel.sum(axis=1)
    idx = np.arange(S.shape[1])
    for m in np.unique(counts):
        queries = np.flatnonzero(counts == m)
        step = max(1, int(1e6 // (m * S.shape[1])))
        for a in range(0, len(queries), step):
            q = queries[a:a + step]
            targets = np.nonzero(rel[q])[1].reshape(len(q), m)
            s = S[q]
            t = np.take_along_axis(s, targets, axis=1)
            before = s[:, None, :] > t[:, :, None]
            tie = s[:, None, :] == t[:, :, None]
            tie &= idx[None, None, :] < targets[:, :, None]
            before |= tie
            pos = np.sort(np.count_nonzero(before, axis=2), axis=1)
            for k, row in zip(q, pos):
                out[k] = row
    return out


def positions(S, rel, method):
    if method == "sort":
        return positions_sort(S, rel)
    pos = positions_count(S, rel)
    rng = np.random.default_rng(0)
    sample = rng.choice(S.shape[0], size=min(64, S.shape[0]), replace=False)
    check = positions_sort(S[sample], rel[sample])
    for q, p in zip(sample, check):
        if not np.array_equal(pos[q], p):
            fail("count and sort disagree on query %d" % q)
    return pos


def query_values(pos_list, cutoff):
    """rank, AP and nDCG of each query from its positions (queries grouped by count)."""
    n = len(pos_list)
    ranks = np.array([p[0] for p in pos_list], dtype=np.int64)
    aps, ndcgs = np.zeros(n), np.zeros(n)
    counts = np.array([len(p) for p in pos_list])
    K = cutoff if cutoff > 0 else np.inf
    for m in np.unique(counts):
        q = np.flatnonzero(counts == m)
        p = np.array([pos_list[k] for k in q], dtype=np.float64).reshape(len(q), m)
        aps[q] = np.mean(np.arange(1, m + 1) / (p + 1), axis=1)
        dcg = np.sum(np.where(p < K, 1.0 / np.log2(p + 2), 0.0), axis=1)
        idcg = np.sum(1.0 / np.log2(np.arange(int(min(m, K))) + 2.0))
        ndcgs[q] = dcg / idcg
    return ranks, aps, ndcgs


def summary(ranks, aps, ndcgs, no_floor):
    med = np.median(ranks)
    return [100.0 * np.mean(ranks < 1), 100.0 * np.mean(ranks < 5),
            100.0 * np.mean(ranks < 10), (med if no_floor else np.floor(med)) + 1,
            ranks.mean() + 1, 100.0 * aps.mean(), 100.0 * ndcgs.mean()]


def similarity(d, rows, cols):
    """S restricted to item rows [rows) and caption columns cols, in float32."""
    if "S" in d:
        return d["S"][rows][:, cols]
    S = None
    for items, caps in d["models"]:
        P = items[rows] @ caps[cols].T
        S = P if S is None else S + P
    if len(d["models"]) > 1:
        S = S / np.float32(len(d["models"]))
    return S


def main(argv):
    if len(argv) < 1:
        fail(__doc__)
    folder, args = argv[0], argv[1:]
    fold_items, cutoff, dedup, no_floor, method, timing = 0, 0, False, False, "sort", False
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--fold-items":
            fold_items = int(args[k + 1]); k += 1
        elif a == "--ndcg-cutoff":
            cutoff = int(args[k + 1]); k += 1
        elif a == "--method":
            method = args[k + 1]; k += 1
        elif a == "--dedup":
            dedup = True
        elif a == "--median-no-floor":
            no_floor = True
        elif a == "--time":
            timing = True
        else:
            fail("unknown argument " + a)
        k += 1

    load = lambda name: np.load("%s/%s.npy" % (folder, name))
    cap_item = load("cap_item").astype(np.int64)
    n_caps = len(cap_item)
    d = {}
    try:
        d["S"] = load("S")
        n_items = d["S"].shape[0]
    except FileNotFoundError:
        d["models"] = []
        m = 0
        while True:
            try:
                d["models"].append((load("items_%d" % m), load("captions_%d" % m)))
            except FileNotFoundError:
                break
            m += 1
        n_items = d["models"][0][0].shape[0]
    cap_text = load("cap_text").astype(np.int64) if dedup else np.arange(n_caps)

    start = time.time()
    F = fold_items if fold_items > 0 else n_items
    per = {name: np.zeros(n, dt) for name, n, dt in [
        ("v2t_rank", n_items, np.int64), ("v2t_ap", n_items, np.float64),
        ("v2t_ndcg", n_items, np.float64), ("t2v_rank", n_caps, np.int64),
        ("t2v_ap", n_caps, np.float64), ("t2v_ndcg", n_caps, np.float64)]}
    folds = []
    for a in range(0, n_items, F):
        caps = np.flatnonzero((cap_item >= a) & (cap_item < a + F))
        # distinct texts in increasing id; np.unique's index = first (lowest) caption
        texts, first, inverse = np.unique(cap_text[caps], return_index=True,
                                          return_inverse=True)
        rep = caps[first]
        rel = np.zeros((F, len(texts)), dtype=bool)
        rel[cap_item[caps] - a, inverse] = True
        S = similarity(d, np.arange(a, a + F), rep)
        v = query_values(positions(S, rel, method), cutoff)
        t = query_values(positions(S.T, rel.T, method), cutoff)  # views: no big copies
        for name, val in zip(("rank", "ap", "ndcg"), v):
            per["v2t_" + name][a:a + F] = val
        for name, val in zip(("rank", "ap", "ndcg"), t):
            per["t2v_" + name][caps] = val[inverse]
        folds.append(summary(*v, no_floor) + summary(*t, no_floor))
    mean = np.mean(np.array(folds), axis=0)
    rsum = mean[0] + mean[1] + mean[2] + mean[7] + mean[8] + mean[9]
    elapsed = time.time() - start
    np.save("%s/ref_metrics.npy" % folder,
            np.concatenate([mean, [rsum, len(folds)]]).astype(np.float64).view(np.int64))
    for name, val in per.items():
        if val.dtype == np.float64:
            val = val.view(np.int64)
        np.save("%s/ref_%s.npy" % (folder, name), val)
    if timing:
        print("%.3f" % elapsed)


if __name__ == "__main__":
    main(sys.argv[1:])
