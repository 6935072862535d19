#!/usr/bin/python3
"""bench/train_step, the PyTorch side: the reference VSE∞ for video (REFERENCE.md), or with
--model set the set-embedding model on its encoders, one training step timed per batch, on
the batches and initial weights that `train_step prepare DIR [--model set]` wrote. Prints
one JSON line. Driven by bench/train_step/run.sh.

    torch_step.py DIR [--model vse|set] [--warmup W] [--steps N] [--dropout-off]
                  [--precision float32|bfloat16] [--device cpu|cuda] [--compile]

The model follows the reference code (vse_infty): a frame branch Linear(2048 -> 1024) over
the padded frames, GPO(32, 32) (positional encodings, a packed BiGRU, a bias-free scorer,
softmax at temperature 0.1, per-dimension descending sort, weighted sum), l2norm; a text
branch Embedding(10000, 300), a packed BiGRU 300 -> 1024 with directions averaged, GPO,
l2norm; the VSE++ ContrastiveLoss with max violation (margin 0.2, sum); clip_grad_norm_ at
2.0; AdamW (lr 1e-4, weight decay 0.01). A timed step is zero_grad, forward, loss,
backward, clip, step, as in the reference's train_emb. The weights are vtr's initial ones
(init.safetensors, the reference tensor names; load_state_dict is strict), so the two
sides' losses can be compared step by step.

--precision bfloat16: the forward and the loss run under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's CPU mixed precision (its own choice of the ops that run in
bfloat16: the linear layers and matrix products), against vtr's train.precision bfloat16.

--device cuda: the model, the batches and the optimizer on the GPU (eager float32; TF32
off, as vtr's cuBLAS products); the batch is copied to the GPU outside the timed region, and
a timed step ends with torch.cuda.synchronize(). --compile: both encoders through
torch.compile (the default inductor backend), its compilation inside the warm-up steps.

--model set (configs/msrvtt-set.yaml's model; match/vse_model.h): the same encoders give
each side's element embeddings and GPO-pooled global feature (before l2norm); a set
prediction module per side (the parity tests' reference, imported from
tests/fixtures/make_set_prediction_fixtures.py, in a module that holds its tensors under
vtr's names: K 4, T 4, Dh 2048, H 4096, dropout 0.1 with torch's own masks, none with
--dropout-off) makes K unit vectors; S is their smooth-Chamfer similarity (alpha 16), the
loss the hinge with max violation averaged over the batch + 0.01 (L_div of both sides'
slots) + 0.01 L_mmd (tests/fixtures/make_set_similarity_fixtures.py; the MMD over
torch.cdist's distances, as the official code has it: the reference's exact ones would
hold three (512, 512, 1024) differences); clip_grad_norm_ at 1.0; AdamW (lr 1e-4, weight
decay 1e-4) with the set modules in a parameter group at lr x 0.1.
"""
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "fixtures"))
from make_set_prediction_fixtures import set_prediction  # noqa: E402
from make_set_similarity_fixtures import diversity, mmd, smooth_chamfer  # noqa: E402

FEAT, EMBED, WORD_DIM, VOCAB = 2048, 1024, 300, 10000
MARGIN, LR = 0.2, 1e-4
# model -> (weight decay, clipping norm)
RECIPES = {"vse": (0.01, 2.0), "set": (1e-4, 1.0)}
SET_K, SET_T, SET_DH, SET_H, SET_DROPOUT = 4, 4, 2048, 4 * EMBED, 0.1
SET_ALPHA, SET_GAMMA, DIV_WEIGHT, MMD_WEIGHT, SET_LR_SCALE = 16.0, 0.5, 0.01, 0.01, 0.1


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
        max_len, dev = int(lengths.max()), features.device
        pe_max_len = positional_encoding_1d(self.d_pe, max_len)
        pes = pe_max_len.unsqueeze(0).repeat(lengths.size(0), 1, 1).to(dev)
        mask = torch.arange(max_len, device=dev).expand(lengths.size(0), max_len)
        mask = (mask < lengths.to(dev).long().unsqueeze(1)).unsqueeze(-1)
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


class SetPrediction(nn.Module):
    """aggregate/set_prediction.h's module: its tensors under vtr's names (the values come
    from init.safetensors), the forward of the parity tests' reference."""

    def __init__(self):
        super().__init__()
        d = EMBED
        self.slots = nn.Parameter(torch.zeros(SET_K, d))
        self.norm_in, self.norm_q = nn.LayerNorm(d), nn.LayerNorm(d)
        self.to_q, self.to_k = nn.Linear(d, SET_DH, bias=False), nn.Linear(d, SET_DH, bias=False)
        self.to_v, self.to_out = nn.Linear(d, SET_DH, bias=False), nn.Linear(SET_DH, d, bias=False)
        self.norm_mlp = nn.LayerNorm(d)
        self.mlp = nn.ModuleList([nn.Linear(d, SET_H), nn.Linear(SET_H, d)])
        self.norm_out, self.norm_global = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, features, lengths, glob, dropout):
        """-> set (B,K,D), slots_n (B,K,D)"""
        out_set, slots_n, _ = set_prediction(features, lengths, glob, dict(self.named_parameters()),
                                             SET_T, dropout)
        return out_set, slots_n


class FrameEncoder(nn.Module):
    """Frame features: fc alone (REFERENCE.md, video-text), GPO, l2norm."""

    def __init__(self, sets):
        super().__init__()
        self.fc = nn.Linear(FEAT, EMBED)
        self.gpool = GPO(32, 32)
        if sets:
            self.spm = SetPrediction()

    def encode(self, images, lengths):
        """the frame embeddings (B,T,E) and the pooled one (B,E), before l2norm"""
        features = self.fc(images)
        pooled, _ = self.gpool(features, lengths)
        return features, pooled

    def forward(self, images, lengths):
        return l2norm(self.encode(images, lengths)[1])


class TextEncoder(nn.Module):
    def __init__(self, sets):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WORD_DIM)
        self.rnn = nn.GRU(WORD_DIM, EMBED, 1, batch_first=True, bidirectional=True)
        self.gpool = GPO(32, 32)
        if sets:
            self.spm = SetPrediction()

    def encode(self, x, lengths):
        """the BiGRU states (B,L,E) and the pooled one (B,E), before l2norm"""
        x_emb = self.embed(x)
        packed = pack_padded_sequence(x_emb, lengths.cpu(), batch_first=True)  # sorted batch
        out, _ = self.rnn(packed)
        cap_emb, _ = pad_packed_sequence(out, batch_first=True)
        cap_emb = (cap_emb[:, :, :cap_emb.size(2) // 2] + cap_emb[:, :, cap_emb.size(2) // 2:]) / 2
        pooled, _ = self.gpool(cap_emb, lengths.to(cap_emb.device))
        return cap_emb, pooled

    def forward(self, x, lengths):
        return l2norm(self.encode(x, lengths)[1])


class VSE(nn.Module):
    def __init__(self, sets=False):
        super().__init__()
        self.img_enc = FrameEncoder(sets)
        self.txt_enc = TextEncoder(sets)


def set_loss(model, images, img_lengths, targets, lengths, dropout):
    """the set path of match/vse_model.h: the hinge on smooth-Chamfer S + the regularisers"""
    sets, slots = [], []
    for enc, x, n in ((model.img_enc, images, img_lengths), (model.txt_enc, targets, lengths)):
        features, pooled = enc.encode(x, n)
        out_set, slots_n = enc.spm(features, n, pooled, dropout)
        sets.append(out_set)
        slots.append(slots_n)
    scores = smooth_chamfer(sets[0], sets[1], SET_ALPHA)
    return (contrastive_loss_max_violation(scores, mean=True) +
            DIV_WEIGHT * (diversity(slots[0]) + diversity(slots[1])) +
            MMD_WEIGHT * mmd(sets[0].reshape(-1, EMBED), sets[1].reshape(-1, EMBED), SET_GAMMA,
                             torch.cdist))


def contrastive_loss_max_violation(scores, mean=False):
    """VSE++'s ContrastiveLoss with max violation on S (B,B), summed or averaged"""
    diagonal = scores.diag().view(scores.size(0), 1)
    d1 = diagonal.expand_as(scores)
    d2 = diagonal.t().expand_as(scores)
    cost_s = (MARGIN + scores - d1).clamp(min=0)
    cost_im = (MARGIN + scores - d2).clamp(min=0)
    mask = torch.eye(scores.size(0), device=scores.device) > .5
    cost_s = cost_s.masked_fill_(mask, 0)
    cost_im = cost_im.masked_fill_(mask, 0)
    cost_s = cost_s.max(1)[0]
    cost_im = cost_im.max(0)[0]
    loss = cost_s.sum() + cost_im.sum()
    return loss / scores.size(0) if mean else loss


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
    warmup, steps, model_name, dropout, precision = 2, 10, "vse", SET_DROPOUT, "float32"
    device, compiled = "cpu", False
    args = argv[1:]
    while args:
        if args[0] == "--warmup" and len(args) > 1:
            warmup, args = int(args[1]), args[2:]
        elif args[0] == "--steps" and len(args) > 1:
            steps, args = int(args[1]), args[2:]
        elif args[0] == "--model" and len(args) > 1 and args[1] in RECIPES:
            model_name, args = args[1], args[2:]
        elif args[0] == "--dropout-off":
            dropout, args = 0.0, args[1:]
        elif args[0] == "--precision" and len(args) > 1 and args[1] in ("float32", "bfloat16"):
            precision, args = args[1], args[2:]
        elif args[0] == "--device" and len(args) > 1 and args[1] in ("cpu", "cuda"):
            device, args = args[1], args[2:]
        elif args[0] == "--compile":
            compiled, args = True, args[1:]
        else:
            sys.exit("usage: torch_step.py DIR [--model vse|set] [--warmup W] [--steps N] "
                     "[--dropout-off] [--precision float32|bfloat16] [--device cpu|cuda] "
                     "[--compile]")
    autocast = precision == "bfloat16"
    weight_decay, clip = RECIPES[model_name]
    sets = model_name == "set"
    torch.manual_seed(0)

    frames = np.load(work + "/frames.npy")  # (items, 20, 2048)
    item, keep = np.load(work + "/item.npy"), np.load(work + "/keep.npy")
    frame_len, cap_len = np.load(work + "/frame_len.npy"), np.load(work + "/cap_len.npy")
    ids = np.load(work + "/ids.npy")
    if item.shape[0] < warmup + steps:
        sys.exit("torch_step.py: %s holds %d batches, %d wanted" %
                 (work, item.shape[0], warmup + steps))

    model = VSE(sets)
    model.load_state_dict(load_safetensors(work + "/init.safetensors"), strict=True)
    model.to(device)
    model.train()
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if compiled:
        model.img_enc = torch.compile(model.img_enc)
        model.txt_enc = torch.compile(model.txt_enc)
    params = list(model.parameters())
    spm = [p for name, p in model.named_parameters() if ".spm." in name]
    rest = [p for name, p in model.named_parameters() if ".spm." not in name]
    groups = [{"params": rest}] + ([{"params": spm, "lr": LR * SET_LR_SCALE}] if spm else [])
    optimizer = torch.optim.AdamW(groups, lr=LR, weight_decay=weight_decay)

    times, losses = [], []
    for s in range(warmup + steps):
        # the batch, outside the timed region (the reference builds it in its DataLoader)
        T, L = int(frame_len[s].max()), int(cap_len[s].max())
        k = keep[s, :, :T]
        images = frames[item[s][:, None], np.maximum(k, 0)]
        images[k < 0] = 0
        images = torch.from_numpy(images).to(device)
        img_lengths = torch.from_numpy(frame_len[s].astype(np.int64))
        targets = torch.from_numpy(ids[s, :, :L].astype(np.int64)).to(device)
        lengths = torch.from_numpy(cap_len[s].astype(np.int64))
        if device == "cuda":
            torch.cuda.synchronize()

        t0 = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if sets:
                loss = set_loss(model, images, img_lengths, targets, lengths, dropout)
            else:
                img_emb = model.img_enc(images, img_lengths)
                cap_emb = model.txt_enc(targets, lengths)
                loss = contrastive_loss_max_violation((img_emb @ cap_emb.t()).float())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
        del images, loss

    timed = sorted(times[warmup:])
    n = len(timed)
    median = timed[n // 2] if n % 2 else 0.5 * (timed[n // 2 - 1] + timed[n // 2])
    print(json.dumps({
        "side": "torch", "model": model_name, "dropout": sets and dropout > 0,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "precision": precision, "device": device if device == "cpu" else
        torch.cuda.get_device_name(0), "compiled": compiled, "warmup": warmup, "steps": steps, "median_s": median,
        "min_s": timed[0],
        "max_s": timed[-1], "mean_s": sum(timed) / n,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "times": times, "losses": losses}))


if __name__ == "__main__":
    main(sys.argv[1:])
