#!/usr/bin/python3
"""bench/train_step, the PyTorch side: the reference VSE∞ for video (REFERENCE.md), one
training step timed per batch, on the batches and initial weights that
`train_step prepare DIR` wrote. Prints one JSON line. Driven by bench/train_step/run.sh.

    torch_step.py DIR [--warmup W] [--steps N]

The model follows the reference code (vse_infty): a frame branch Linear(2048 -> 1024) over
the padded frames, GPO(32, 32) (positional encodings, a packed BiGRU, a bias-free scorer,
softmax at temperature 0.1, per-dimension descending sort, weighted sum), l2norm; a text
branch Embedding(10000, 300), a packed BiGRU 300 -> 1024 with directions averaged, GPO,
l2norm; the VSE++ ContrastiveLoss with max violation (margin 0.2, sum); clip_grad_norm_ at
2.0; AdamW (lr 1e-4, weight decay 0.01). A timed step is zero_grad, forward, loss,
backward, clip, step, as in the reference's train_emb. The weights are vtr's initial ones
(init.safetensors, the reference tensor names; load_state_dict is strict), so the two
sides' losses can be compared step by step.
"""
import json
import math
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

FEAT, EMBED, WORD_DIM, VOCAB = 2048, 1024, 300, 10000
MARGIN, LR, WEIGHT_DECAY, CLIP = 0.2, 1e-4, 0.01, 2.0


def positional_encoding_1d(d_model, length):
    pe = torch.zeros(length, d_model)
    position = torch.arange(0, length).unsqueeze(1)
    div_term = torch.exp((torch.arange(0, d_model, 2, dtype=torch.float) *
                          -(math.log(10000.0) / d_model)))
    pe[:, 0::2] = torch.sin(position.float() * div_term)
    pe[:, 1::2] = torch.cos(position.float() * div_term)
    return pe


class GPO(nn.Module):
    def __init__(self, d_pe, d_hidden):
        super().__init__()
        self.d_pe = d_pe
        self.gru = nn.GRU(d_pe, d_hidden, 1, batch_first=True, bidirectional=True)
        self.linear = nn.Linear(d_hidden, 1, bias=False)

    def compute_pool_weights(self, lengths, features):
        max_len = int(lengths.max())
        pe_max_len = positional_encoding_1d(self.d_pe, max_len)
        pes = pe_max_len.unsqueeze(0).repeat(lengths.size(0), 1, 1)
        mask = torch.arange(max_len).expand(lengths.size(0), max_len)
        mask = (mask < lengths.long().unsqueeze(1)).unsqueeze(-1)
        pes = pes.masked_fill(mask == 0, 0)
        packed = pack_padded_sequence(pes, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.gru(packed)
        padded = pad_packed_sequence(out, batch_first=True)
        out_emb, out_len = padded
        out_emb = (out_emb[:, :, :out_emb.size(2) // 2] + out_emb[:, :, out_emb.size(2) // 2:]) / 2
        scores = self.linear(out_emb)
        scores[torch.where(mask == 0)] = -10000
        weights = torch.softmax(scores / 0.1, 1)
        return weights, mask

    def forward(self, features, lengths):
        pool_weights, mask = self.compute_pool_weights(lengths, features)
        features = features[:, :int(lengths.max()), :]
        sorted_features = features.masked_fill(mask == 0, -10000)
        sorted_features = sorted_features.sort(dim=1, descending=True)[0]
        sorted_features = sorted_features.masked_fill(mask == 0, 0)
        pooled_features = (sorted_features * pool_weights).sum(1)
        return pooled_features, pool_weights


def l2norm(x, dim=-1, eps=1e-8):
    return x / (torch.pow(x, 2).sum(dim=dim, keepdim=True).sqrt() + eps)


class FrameEncoder(nn.Module):
    """Frame features: fc alone (REFERENCE.md, video-text), GPO, l2norm."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(FEAT, EMBED)
        self.gpool = GPO(32, 32)

    def forward(self, images, lengths):
        features = self.fc(images)
        features, _ = self.gpool(features, lengths)
        return l2norm(features)


class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WORD_DIM)
        self.rnn = nn.GRU(WORD_DIM, EMBED, 1, batch_first=True, bidirectional=True)
        self.gpool = GPO(32, 32)

    def forward(self, x, lengths):
        x_emb = self.embed(x)
        packed = pack_padded_sequence(x_emb, lengths.cpu(), batch_first=True)  # sorted batch
        out, _ = self.rnn(packed)
        cap_emb, _ = pad_packed_sequence(out, batch_first=True)
        cap_emb = (cap_emb[:, :, :cap_emb.size(2) // 2] + cap_emb[:, :, cap_emb.size(2) // 2:]) / 2
        pooled, _ = self.gpool(cap_emb, lengths.to(cap_emb.device))
        return l2norm(pooled)


class VSE(nn.Module):
    def __init__(self):
        super().__init__()
        self.img_enc = FrameEncoder()
        self.txt_enc = TextEncoder()


def contrastive_loss_max_violation(im, s):
    scores = im @ s.t()
    diagonal = scores.diag().view(im.size(0), 1)
    d1 = diagonal.expand_as(scores)
    d2 = diagonal.t().expand_as(scores)
    cost_s = (MARGIN + scores - d1).clamp(min=0)
    cost_im = (MARGIN + scores - d2).clamp(min=0)
    mask = torch.eye(scores.size(0)) > .5
    cost_s = cost_s.masked_fill_(mask, 0)
    cost_im = cost_im.masked_fill_(mask, 0)
    cost_s = cost_s.max(1)[0]
    cost_im = cost_im.max(0)[0]
    return cost_s.sum() + cost_im.sum()


def load_safetensors(path):
    """{name: tensor} of a safetensors file (F32 and I64 only, what vtr writes here)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=dtype).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def main(argv):
    work = argv[0]
    warmup, steps = 2, 10
    args = argv[1:]
    while args:
        if args[0] == "--warmup":
            warmup = int(args[1])
        elif args[0] == "--steps":
            steps = int(args[1])
        else:
            sys.exit("usage: torch_step.py DIR [--warmup W] [--steps N]")
        args = args[2:]
    torch.manual_seed(0)

    frames = np.load(work + "/frames.npy")  # (items, 20, 2048)
    item, keep = np.load(work + "/item.npy"), np.load(work + "/keep.npy")
    frame_len, cap_len = np.load(work + "/frame_len.npy"), np.load(work + "/cap_len.npy")
    ids = np.load(work + "/ids.npy")
    if item.shape[0] < warmup + steps:
        sys.exit("torch_step.py: %s holds %d batches, %d wanted" %
                 (work, item.shape[0], warmup + steps))

    model = VSE()
    model.load_state_dict(load_safetensors(work + "/init.safetensors"), strict=True)
    model.train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)

    times, losses = [], []
    for s in range(warmup + steps):
        # the batch, outside the timed region (the reference builds it in its DataLoader)
        T, L = int(frame_len[s].max()), int(cap_len[s].max())
        k = keep[s, :, :T]
        images = frames[item[s][:, None], np.maximum(k, 0)]
        images[k < 0] = 0
        images = torch.from_numpy(images)
        img_lengths = torch.from_numpy(frame_len[s].astype(np.int64))
        targets = torch.from_numpy(ids[s, :, :L].astype(np.int64))
        lengths = torch.from_numpy(cap_len[s].astype(np.int64))

        t0 = time.perf_counter()
        optimizer.zero_grad()
        img_emb = model.img_enc(images, img_lengths)
        cap_emb = model.txt_enc(targets, lengths)
        loss = contrastive_loss_max_violation(img_emb, cap_emb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
        del images, img_emb, cap_emb, loss

    timed = sorted(times[warmup:])
    n = len(timed)
    median = timed[n // 2] if n % 2 else 0.5 * (timed[n // 2 - 1] + timed[n // 2])
    print(json.dumps({
        "side": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "warmup": warmup, "steps": steps, "median_s": median, "min_s": timed[0],
        "max_s": timed[-1], "mean_s": sum(timed) / n,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "times": times, "losses": losses}))


if __name__ == "__main__":
    main(sys.argv[1:])
