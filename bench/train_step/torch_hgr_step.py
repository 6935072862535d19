#!/usr/bin/python3
"""bench/train_step --model hgr, the PyTorch side: HGR (attention pooling) at the released
MSR-VTT sizes, one training step timed per batch, on the data set and initial weights that
`train_step_hgr prepare DIR` wrote. Prints one JSON line. Driven by bench/train_step/run.sh.

    torch_hgr_step.py DIR [--warmup W] [--steps N] [--dropout-off]

The model is the PyTorch reference module of the parity tests
(tests/fixtures/make_hgr_fixtures.py), imported, with its sizes set to the released ones
(F 2048, E 1024, W 300, V 10,000, 16 roles, 4 verbs, 6 nouns). That module has no dropout
(its fixtures compare at p = 0); the released dropouts are added here by forward hooks on
the modules whose outputs vtr drops (match/hgr_model.h): each video level's Linear (0.2),
the word embedding (0.2) and the GCN's context layer (0.5); --dropout-off leaves them out.
The scores and the loss are the fixture's (cosine global level, phrase attention for the
verb and noun levels, their mean, hinge with the hardest negative averaged over the batch).
Adam (lr 1e-4), no clipping. A timed step is zero_grad, forward, loss, backward, step. The
weights are vtr's initial ones (init.safetensors, the reference names; load_state_dict is
strict). Step s trains on items 64 (s mod 2) .. +63, as train_step_hgr.c does.
"""
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as Fn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures"))
sys.path.insert(0, HERE)
import make_hgr_fixtures as ref  # noqa: E402
from make_nn_fixtures import mask_of  # noqa: E402
from make_phrase_attention_fixtures import cosine_sim, phrase_scores  # noqa: E402
from torch_step import load_safetensors  # noqa: E402

BATCH, LR = 64, 1e-4
VIDEO_DROPOUT, TEXT_DROPOUT, GCN_DROPOUT = 0.2, 0.2, 0.5

# the released sizes (the module reads them when it builds its layers)
ref.F, ref.E, ref.W, ref.V = 2048, 1024, 300, 10000
ref.ROLES, ref.NV, ref.NN = 16, 4, 6
ref.N = 1 + ref.NV + ref.NN


def add_dropout(module, p):
    module.register_forward_hook(lambda mod, inp, out: Fn.dropout(out, p, training=True))


def step_loss(model, frames, flen, ids, clen, verb_masks, noun_masks, roles, rel):
    """the fixture's forward and loss (make_hgr_fixtures.make)"""
    T = frames.size(1)
    vid_global, vid_verb, vid_noun = model.video_encoder(frames, flen)
    sent, verbs, nouns = model.text_encoder(ids, clen, verb_masks, noun_masks, roles, rel)
    n_verbs = (verb_masks.sum(2) > 0).sum(1)
    n_nouns = (noun_masks.sum(2) > 0).sum(1)
    s_global = cosine_sim(vid_global, sent)
    vid_masks = mask_of(flen, T)
    s_verb = phrase_scores(vid_verb, vid_masks, verbs,
                           torch.arange(ref.NV) < n_verbs.unsqueeze(1), ref.SIGMA)
    s_noun = phrase_scores(vid_noun, vid_masks, nouns,
                           torch.arange(ref.NN) < n_nouns.unsqueeze(1), ref.SIGMA)
    return ref.hinge_mean_max_violation((s_global + s_verb + s_noun) / 3)


def main(argv):
    work = argv[0]
    warmup, steps, dropout = 2, 10, True
    args = argv[1:]
    while args:
        if args[0] == "--warmup":
            warmup, args = int(args[1]), args[2:]
        elif args[0] == "--steps":
            steps, args = int(args[1]), args[2:]
        elif args[0] == "--dropout-off":
            dropout, args = False, args[1:]
        else:
            sys.exit("usage: torch_hgr_step.py DIR [--warmup W] [--steps N] [--dropout-off]")
    torch.manual_seed(0)

    data = {name: np.load("%s/%s.npy" % (work, name)) for name in (
        "frames", "frame_len", "ids", "cap_len", "verb_masks", "noun_masks", "node_roles",
        "rel_edges")}

    model = ref.HGR(False)
    model.load_state_dict(load_safetensors(work + "/init.safetensors"), strict=True)
    model.train()
    if dropout:
        for lin in model.video_encoder.level_embeds:
            add_dropout(lin, VIDEO_DROPOUT)
        add_dropout(model.text_encoder.embedding.we, TEXT_DROPOUT)
        add_dropout(model.text_encoder.gcn.layers[0].ctx_layer, GCN_DROPOUT)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    times, losses = [], []
    for s in range(warmup + steps):
        # the batch, outside the timed region
        items = slice((s % 2) * BATCH, (s % 2) * BATCH + BATCH)
        flen, clen = data["frame_len"][items], data["cap_len"][items]
        T, L = int(flen.max()), int(clen.max())
        batch = [torch.from_numpy(np.ascontiguousarray(data["frames"][items, :T])),
                 torch.from_numpy(flen.astype(np.int64)),
                 torch.from_numpy(data["ids"][items, :L].astype(np.int64)),
                 torch.from_numpy(clen.astype(np.int64)),
                 torch.from_numpy(data["verb_masks"][items, :, :L].astype(np.int64)),
                 torch.from_numpy(data["noun_masks"][items, :, :L].astype(np.int64)),
                 torch.from_numpy(data["node_roles"][items].astype(np.int64)),
                 torch.from_numpy(data["rel_edges"][items])]

        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = step_loss(model, *batch)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
        del loss

    timed = sorted(times[warmup:])
    n = len(timed)
    median = timed[n // 2] if n % 2 else 0.5 * (timed[n // 2 - 1] + timed[n // 2])
    print(json.dumps({
        "side": "torch", "model": "hgr", "dropout": dropout, "torch": torch.__version__,
        "threads": torch.get_num_threads(), "warmup": warmup, "steps": steps,
        "median_s": median, "min_s": timed[0], "max_s": timed[-1], "mean_s": sum(timed) / n,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "times": times, "losses": losses}))


if __name__ == "__main__":
    main(sys.argv[1:])
