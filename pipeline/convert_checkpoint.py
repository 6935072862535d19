#!/usr/bin/python3
"""Converts a released VSE∞ or HGR / HGR∞ PyTorch checkpoint into a vtr checkpoint
(docs/checkpoint.md).

    /usr/bin/python3 pipeline/convert_checkpoint.py model_best.pth converted.safetensors \\
        --vocab coco_precomp_vocab.json [--catalog vtr.db --dataset coco --store stores/coco]
    vtr-eval -c converted.safetensors --split testall --coco-1k

    /usr/bin/python3 pipeline/convert_checkpoint.py epoch.49.th \\
        models/msrvtt-hgr/model.safetensors --vocab MSRVTT/annotation/RET/word2int.json \\
        [--word-embeddings word_embeds.th] \\
        [--catalog vtr.db --dataset msrvtt --store stores/msrvtt-resnet152]
    vtr-eval -c models/msrvtt-hgr/model.safetensors

Input (torch.load, a pickle: convert only files you trust):
  - the VSE∞ reference's checkpoint: a dict whose 'model' is [img_enc state_dict,
    txt_enc state_dict] (names without the img_enc./txt_enc. prefix) and whose 'opt' is the
    argparse Namespace of its train.py; 'epoch' and 'best_rsum' are recorded when present;
  - a dict whose 'model' is one state_dict, or a plain state_dict, with the full names
    (img_enc.fc.weight, ...);
  - the HGR reference's checkpoint (cshizhe/hgr_v2t, ModelBase.save_checkpoint): a dict of
    its submodules' state_dicts, {'video_encoder': {...}, 'text_encoder': {...}}, told
    apart by that structure; each name becomes '<submodule>.<name>'
    (video_encoder.level_embeds.0.weight, ...). --word-embeddings FILE replaces
    text_encoder.embedding.we.weight with the one of FILE, a file of the same structure
    holding that tensor alone (the word embedding HGR's training starts from:
    {'text_encoder': {'embedding.we.weight': W}}).
A leading 'module.' (nn.DataParallel) is dropped from every name.

The model must be one that vtr builds. VSE (match/vse_model.h): the visual branch over
pre-extracted features (fc, with the MLP residual of precomp_enc_type 'basic' or without
it), the BiGRU text branch (one layer, directions averaged), GPO or mean pooling on each
side, l2-normalised embeddings. Sizes are read off the tensors and checked against 'opt'.
HGR (match/hgr_model.h): three video levels, the BiGRU (hidden = the embedding size), the
role embedding and one attention-GCN layer; HGR when both encoders pool with ft_attn,
HGR∞ when both pool with gpool, anything else refused. Sizes are read off the tensors;
what no tensor shows (4 verbs, 6 nouns, 30 words, 20 frames, sigma 4) is the release's
(prepare_mlmatch_configs.py, as configs/msrvtt-hgr.yaml).
Tensors the model does not have (a CNN backbone, BERT, a second GRU layer) and tensors it
lacks are an error naming them, as is a tensor of another shape. The one exception: the
VSE reference's MLP builds a BatchNorm per layer and uses all but the last, so its
checkpoints hold img_enc.mlp.bns.1.* (size embed_size), which its forward never reads;
those are dropped, and said so on stderr.

Vocabulary (--vocab): VSE, the reference vocabulary JSON, recorded as data.vocab. HGR, the
release's word2int.json, with the int2word.npy beside it (required); an HGR config reads
its vocabulary from the catalog (vtr-import hgr stores these words as 'hgr'), and vtr-eval
from vocab.json beside the checkpoint, as vtr-train leaves it in a run directory: the
converter writes that file there (the words in id order, a JSON array), or keeps one that
holds the same words. Either way the vocabulary must have as many ids as the word
embedding has rows, and the checkpoint records the file's SHA-256 (vocab_sha256).

Output: ONE safetensors file laid out as lib/checkpoint.c writes a best.safetensors:
tensors under the reference names in the model's parameter order (F32; num_batches_tracked
I64, shape []), each at an offset aligned for its dtype; metadata format, version,
code_version, step/epoch/iteration 0, rng {}, config (the YAML keys derived from the
tensors and the reference options or release settings; vtr fills every other key with its
default), then vocab_sha256 (with --vocab), converted_from, source_epoch and
source_best_rsum (when the source has them).

The safetensors layout (written here directly: Debian has no python3-safetensors):
  8 bytes   N, the JSON header's length, little-endian unsigned
  N bytes   JSON, compact, padded with spaces to a multiple of 8:
            {"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}}
  the data  each tensor's bytes, little-endian, C order, at [b, e) from the data start;
            largest element size first, in parameter order among equal sizes.

Exit status 0 converted; 1 bad usage or a source that does not convert (one line on
stderr naming the file and the cause). The outputs are written atomically, and only once
every check has passed.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

PROG = "convert_checkpoint.py"
CHECKPOINT_FORMAT = "vtr-checkpoint"
CHECKPOINT_VERSION = "1"
RUN_VOCAB = "vocab.json"  # match/run_dir.h: where vtr-eval finds a checkpoint's vocabulary


class ConvertError(Exception):
    pass


# ---- reading the source ---------------------------------------------------------------

def as_numpy(name, value):
    import torch
    if not torch.is_tensor(value):
        raise ConvertError("'%s' is a %s, not a tensor" % (name, type(value).__name__))
    return value.detach().cpu().numpy()


def strip_module(name):
    return name[len("module."):] if name.startswith("module.") else name


def torch_load(path):
    import torch
    try:
        try:  # the Namespace in 'opt' needs the full unpickler (torch >= 2.6 defaults to
            return torch.load(path, map_location="cpu", weights_only=False)  # weights only)
        except TypeError:  # torch < 1.13 has no weights_only
            return torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many kinds for a bad file
        raise ConvertError("cannot read it with torch.load: %s" % str(e).splitlines()[0])


HGR_SUBMODULES = ("video_encoder", "text_encoder")


def is_hgr_layout(ck):
    """Whether ck is laid out as the HGR reference saves a model: a dict of submodule
    state_dicts (ModelBase.save_checkpoint), video_encoder or text_encoder among them."""
    return (isinstance(ck, dict) and bool(ck) and all(isinstance(v, dict) for v in ck.values())
            and any(s in ck for s in HGR_SUBMODULES))


def prefixed(state_dicts):
    """[(prefix, state_dict)] -> {'<prefix>.<name>': value}."""
    return {"%s.%s" % (prefix, strip_module(name)): value
            for prefix, sd in state_dicts for name, value in sd.items()}


def as_arrays(tensors):
    """{name: tensor} -> {name: ndarray}."""
    return {name: as_numpy(name, v) for name, v in tensors.items()}


def load_source(path):
    """-> (kind 'vse' or 'hgr', tensors {full name: ndarray}, opt or None, extra metadata
    {key: str})."""
    ck = torch_load(path)
    if is_hgr_layout(ck):
        return "hgr", as_arrays(prefixed(ck.items())), None, {}
    opt, extra = None, {}
    if isinstance(ck, dict) and "model" in ck:
        model = ck["model"]
        opt = ck.get("opt")
        for key, meta in (("epoch", "source_epoch"), ("best_rsum", "source_best_rsum")):
            if isinstance(ck.get(key), (int, float)):
                extra[meta] = repr(ck[key])
    else:
        model = ck
    if isinstance(model, (list, tuple)):
        if len(model) != 2 or not all(isinstance(m, dict) for m in model):
            raise ConvertError("'model' is a list of %d, expected [img_enc state_dict, "
                               "txt_enc state_dict]" % len(model))
        tensors = prefixed(zip(("img_enc", "txt_enc"), model))
    elif isinstance(model, dict):
        tensors = {strip_module(name): value for name, value in model.items()}
    else:
        raise ConvertError("holds a %s, not a state_dict, a VSE∞ checkpoint or an HGR "
                           "checkpoint" % type(model).__name__)
    return "vse", as_arrays(tensors), opt, extra


WORD_EMBEDDING = "text_encoder.embedding.we.weight"


def override_word_embeddings(tensors, path):
    """Puts the word embedding of HGR's separate file path ({'text_encoder':
    {'embedding.we.weight': W}}, the file its training's --resume_file names) in place of
    the checkpoint's, which it must match in shape when the checkpoint has one."""
    try:
        ck = torch_load(path)
        if not is_hgr_layout(ck):
            raise ConvertError("not an HGR word embedding file ({'text_encoder': "
                               "{'embedding.we.weight': W}})")
        file_tensors = as_arrays(prefixed(ck.items()))
        if list(file_tensors) != [WORD_EMBEDDING]:
            raise ConvertError("holds %s; a word embedding file holds %s alone"
                               % (", ".join(sorted(file_tensors)), WORD_EMBEDDING))
        w = file_tensors[WORD_EMBEDDING]
        have = tensors.get(WORD_EMBEDDING)
        if have is not None and have.shape != w.shape:
            raise ConvertError("%s has shape %s, the checkpoint's %s" % (
                WORD_EMBEDDING, tuple(w.shape), tuple(have.shape)))
    except ConvertError as e:
        raise ConvertError("%s: %s" % (path, e))
    tensors[WORD_EMBEDDING] = w


# ---- the model vtr builds ----------------------------------------------------------------

def gru_entries(prefix, D, H):
    """A GRU's tensors in state_dict order (lib/gru.h)."""
    out = []
    for suffix in ("", "_reverse"):
        out += [(prefix + "weight_ih_l0" + suffix, (3 * H, D), "F32"),
                (prefix + "weight_hh_l0" + suffix, (3 * H, H), "F32"),
                (prefix + "bias_ih_l0" + suffix, (3 * H,), "F32"),
                (prefix + "bias_hh_l0" + suffix, (3 * H,), "F32")]
    return out


def gpo_entries(prefix, c):
    """A GPO's tensors under prefix + 'gpool.' (match/model_params.h)."""
    pe, h = c["gpo_pe"], c["gpo_hidden"]
    return gru_entries(prefix + "gpool.gru.", pe, h) + [(prefix + "gpool.linear.weight", (1, h),
                                                          "F32")]


def model_entries(c):
    """(name, shape, dtype) of every parameter-set entry, in match/vse_model.c's order."""
    F, E, M = c["feature_dim"], c["embed_size"], c["mlp_hidden"]
    out = [("img_enc.fc.weight", (E, F), "F32"), ("img_enc.fc.bias", (E,), "F32")]
    if M > 0:
        p = "img_enc.mlp."
        out += [(p + "layers.0.weight", (M, F), "F32"), (p + "layers.0.bias", (M,), "F32"),
                (p + "layers.1.weight", (E, M), "F32"), (p + "layers.1.bias", (E,), "F32"),
                (p + "bns.0.weight", (M,), "F32"), (p + "bns.0.bias", (M,), "F32"),
                (p + "bns.0.running_mean", (M,), "F32"), (p + "bns.0.running_var", (M,), "F32"),
                (p + "bns.0.num_batches_tracked", (), "I64")]
    if c["img_pool"] == "gpo":
        out += gpo_entries("img_enc.", c)
    out += [("txt_enc.embed.weight", (c["vocab_size"], c["word_dim"]), "F32")]
    out += gru_entries("txt_enc.rnn.", c["word_dim"], E)
    if c["txt_pool"] == "gpo":
        out += gpo_entries("txt_enc.", c)
    return out


def hgr_entries(c):
    """(name, shape, dtype) of every parameter of the HGR model, in match/hgr_model.c's
    order; the GCN's query and key are E/2 wide (the reference's d_ff = hidden // 2)."""
    F, E, H = c["feature_dim"], c["embed_size"], c["embed_size"] // 2
    v, t, g = "video_encoder.", "text_encoder.", "text_encoder.gcn.layers.0."

    def pool(side):
        if c["global_pool"] == "gpo":
            return gpo_entries(side, c)
        return [(side + "ft_attn.weight", (1, E), "F32"), (side + "ft_attn.bias", (1,), "F32")]
    out = []
    for k in range(3):
        out += [(v + "level_embeds.%d.weight" % k, (E, F), "F32"),
                (v + "level_embeds.%d.bias" % k, (E,), "F32")]
    out += pool(v)
    out += [(WORD_EMBEDDING, (c["vocab_size"], c["word_dim"]), "F32")]
    out += gru_entries(t + "rnn.", c["word_dim"], E)
    out += pool(t)
    out += [(t + "role_embedding.weight", (c["num_roles"], E), "F32"),
            (g + "ctx_layer.weight", (E, E), "F32"), (g + "layernorm.weight", (E,), "F32"),
            (g + "layernorm.bias", (E,), "F32"), (g + "edge_attn_query.weight", (H, E), "F32"),
            (g + "edge_attn_query.bias", (H,), "F32"), (g + "edge_attn_key.weight", (H, E), "F32"),
            (g + "edge_attn_key.bias", (H,), "F32")]
    return out


def unused_entries(c):
    """(name, shape) of the tensors the reference builds and never uses: its MLP
    (lib/modules/mlp.py) makes one BatchNorm1d per Linear layer, bns.K of the layer's output
    size, and applies all but the last; with the two layers of the model here, bns.1 of
    size embed_size."""
    if c["mlp_hidden"] <= 0:
        return []
    p, E = "img_enc.mlp.bns.1.", c["embed_size"]
    return [(p + "weight", (E,)), (p + "bias", (E,)), (p + "running_mean", (E,)),
            (p + "running_var", (E,)), (p + "num_batches_tracked", ())]


def drop_unused(tensors, c):
    """Removes unused_entries(c) from tensors (name and shape must match: anything else
    stays and check_tensors refuses it). -> the names dropped, sorted."""
    dropped = [n for n, shape in unused_entries(c)
               if n in tensors and tuple(tensors[n].shape) == shape]
    for n in dropped:
        del tensors[n]
    return sorted(dropped)


def shape_of(tensors, name):
    if name not in tensors:
        raise ConvertError("tensor '%s' is missing" % name)
    return tensors[name].shape


def gpo_sizes(tensors, sides):
    """(gpo_pe, gpo_hidden) of the GPOs under the prefixes sides, which must agree (vtr's
    config has one pair for both); vtr's defaults (32, 32) when sides is empty."""
    sizes = set()
    for side in sides:
        three_h, pe = shape_of(tensors, side + "gpool.gru.weight_ih_l0")
        sizes.add((int(pe), int(three_h) // 3))
    if len(sizes) > 1:
        raise ConvertError("the two GPOs differ in size %s; vtr's config has one gpo_pe and "
                           "gpo_hidden for both sides" % sorted(sizes))
    return sizes.pop() if sizes else (32, 32)


def infer_config(tensors, opt):
    """The VSE model config, from the tensors' shapes, checked against the reference
    options."""
    E, F = shape_of(tensors, "img_enc.fc.weight")
    c = {"feature_dim": int(F), "embed_size": int(E)}
    has_mlp = any(n.startswith("img_enc.mlp.") for n in tensors)
    c["mlp_hidden"] = int(shape_of(tensors, "img_enc.mlp.layers.0.weight")[0]) if has_mlp else 0
    V, W = shape_of(tensors, "txt_enc.embed.weight")
    c["vocab_size"], c["word_dim"] = int(V), int(W)
    for side in ("img", "txt"):
        gpo = any(n.startswith(side + "_enc.gpool.") for n in tensors)
        c[side + "_pool"] = "gpo" if gpo else "mean"
    c["gpo_pe"], c["gpo_hidden"] = gpo_sizes(
        tensors, [s + "_enc." for s in ("img", "txt") if c[s + "_pool"] == "gpo"])
    if opt is not None:
        check_options(c, opt)
    return c


HGR_POOLS = {"ft_attn": "attention", "gpool": "gpo"}  # tensor name -> model.global_pool


def hgr_global_pool(tensors):
    """'attention' (HGR: ft_attn in both encoders) or 'gpo' (HGR∞: gpool in both)."""
    found = {side: [p for p in HGR_POOLS if any(n.startswith("%s.%s." % (side, p))
                                                 for n in tensors)]
             for side in HGR_SUBMODULES}
    video, text = (found[side] for side in HGR_SUBMODULES)
    if video == text and len(video) == 1:
        return HGR_POOLS[video[0]]
    raise ConvertError("cannot tell HGR (ft_attn in both encoders) from HGR∞ (gpool in both): "
                       + ", ".join("%s has %s" % (side, " and ".join(found[side]) or "neither")
                                   for side in HGR_SUBMODULES))


def infer_hgr_config(tensors):
    """The HGR model config, from the tensors' shapes."""
    E, F = shape_of(tensors, "video_encoder.level_embeds.0.weight")
    V, W = shape_of(tensors, WORD_EMBEDDING)
    R = shape_of(tensors, "text_encoder.role_embedding.weight")[0]
    if E % 2:
        raise ConvertError("the embedding size %d is odd: vtr's HGR halves it for the GCN's "
                           "attention" % E)
    c = {"feature_dim": int(F), "embed_size": int(E), "vocab_size": int(V),
         "word_dim": int(W), "num_roles": int(R), "global_pool": hgr_global_pool(tensors)}
    c["gpo_pe"], c["gpo_hidden"] = gpo_sizes(
        tensors, [s + "." for s in HGR_SUBMODULES if c["global_pool"] == "gpo"])
    return c


def check_options(c, opt):
    """The reference options must describe the same model as the tensors."""
    def want(key, value, what):
        have = getattr(opt, key, None)
        if have is not None and have != value:
            raise ConvertError("opt.%s is %r but the tensors give %s %r" % (key, have, what,
                                                                              value))
    want("img_dim", c["feature_dim"], "feature size")
    want("embed_size", c["embed_size"], "embedding size")
    want("word_dim", c["word_dim"], "word embedding size")
    want("vocab_size", c["vocab_size"], "vocabulary size")
    want("num_layers", 1, "GRU layers")
    enc = getattr(opt, "precomp_enc_type", None)
    if enc is not None and enc != "basic":
        raise ConvertError("opt.precomp_enc_type is %r: vtr converts the pre-extracted feature "
                           "model ('basic') only" % enc)
    if enc == "basic" and c["mlp_hidden"] == 0:
        raise ConvertError("opt.precomp_enc_type is 'basic' but there is no img_enc.mlp")
    for key in ("no_imgnorm", "no_txtnorm"):
        if getattr(opt, key, False):
            raise ConvertError("opt.%s is set: vtr's embeddings are always l2-normalised" % key)
    if getattr(opt, "text_enc_type", "bigru") != "bigru" or getattr(opt, "use_bi_gru", True) \
            is False:
        raise ConvertError("the text encoder is not the bidirectional GRU")


def check_tensors(tensors, entries):
    """Every entry present with its shape, nothing else; -> arrays in entry order."""
    names = {n for n, _, _ in entries}
    unexpected = sorted(set(tensors) - names)
    if unexpected:
        raise ConvertError("unexpected tensors not in the model: %s" % ", ".join(unexpected))
    missing = [n for n, _, _ in entries if n not in tensors]
    if missing:
        raise ConvertError("missing tensors: %s" % ", ".join(missing))
    out = []
    for name, shape, dtype in entries:
        a = tensors[name]
        if tuple(a.shape) != tuple(shape):
            raise ConvertError("tensor '%s' has shape %s, the model expects %s"
                               % (name, tuple(a.shape), tuple(shape)))
        if dtype == "I64":
            if a.dtype.kind not in "iu":
                raise ConvertError("tensor '%s' is %s, expected an integer" % (name, a.dtype))
            a = a.astype("<i8")
        else:
            if a.dtype.kind != "f":
                raise ConvertError("tensor '%s' is %s, expected floating point" % (name, a.dtype))
            a = a.astype("<f4")
        out.append((name, a.copy(order="C")))  # (ascontiguousarray makes 0-d arrays 1-d)
    return out


# ---- the vtr config ---------------------------------------------------------------------

def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a double-quoted YAML scalar


def config_yaml(sections):
    """[(section, {key: value})] as vtr_config_dump writes them, for the keys known here
    (empty sections left out)."""
    lines = []
    for section, keys in sections:
        if keys:
            lines.append(section + ":")
            lines += ["  %s: %s" % (k, yaml_value(v)) for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def data_keys(args):
    return {key: value for key, value in (("catalog", args.catalog), ("dataset", args.dataset),
                                          ("features", args.store)) if value}


def vse_config(c, opt, args):
    """The VSE model's config sections: the tensors' sizes, the data options, and what the
    reference options say of the loss and the training."""
    data = data_keys(args)
    if args.vocab:
        data["vocab"] = args.vocab
    data["tokenizer"] = args.tokenizer or "words"
    data["max_frames"] = args.max_frames if args.max_frames is not None else 0
    model = {k: c[k] for k in ("feature_dim", "embed_size", "mlp_hidden", "word_dim",
                               "img_pool", "txt_pool", "gpo_pe", "gpo_hidden")}
    loss, train = {}, {}
    if opt is not None:
        def get(key, cast):
            v = getattr(opt, key, None)
            return cast(v) if v is not None else None
        values = {
            ("loss", "margin"): get("margin", float),
            ("loss", "warmup_epochs"): get("vse_mean_warmup_epochs", int),
            ("train", "epochs"): get("num_epochs", int),
            ("train", "batch_size"): get("batch_size", int),
            ("train", "grad_clip"): get("grad_clip", float),
            ("train", "lr"): get("learning_rate", float),
        }
        lr_update = get("lr_update", int)
        if lr_update is not None:
            values[("train", "lr_schedule")] = "multistep"
            values[("train", "lr_decay_epochs")] = [lr_update]
        for (section, key), v in values.items():
            if v is not None:
                (loss if section == "loss" else train)[key] = v
    return [("data", data), ("model", model), ("loss", loss), ("train", train)]


# What no HGR tensor shows: the release's settings (prepare_mlmatch_configs.py), as
# configs/msrvtt-hgr.yaml and msrvtt-hgr-inf.yaml write them, with the loss and training
# keys an hgr config must have and each variant's schedule (for vtr-train --init).
HGR_MODEL = {"num_verbs": 4, "num_nouns": 6, "max_words": 30, "sigma": 4.0}
HGR_LOSS = {"type": "hinge", "margin": 0.2, "reduction": "mean", "warmup_epochs": 0,
            "negatives": "hardest"}
HGR_TRAIN = {
    "attention": {"epochs": 50, "batch_size": 64, "lr_schedule": "constant"},
    "gpo": {"epochs": 35, "batch_size": 128, "lr_schedule": "multistep", "lr_gamma": 0.1,
            "lr_decay_epochs": [25]},
}


def hgr_config(c, args):
    """The HGR model's config sections: the tensors' sizes, the data options, the release's
    settings."""
    if args.tokenizer is not None or args.max_frames is not None:
        raise ConvertError("--tokenizer and --max-frames are for VSE models: HGR reads "
                           "whitespace tokens and 20 frames")
    data = data_keys(args)
    data.update({"catalog_vocab": "hgr", "tokenizer": "whitespace", "max_frames": 20})
    model = {"kind": "hgr"}
    model.update({k: c[k] for k in ("global_pool", "feature_dim", "embed_size", "word_dim",
                                    "gpo_pe", "gpo_hidden", "num_roles")})
    model.update(HGR_MODEL)
    train = {"drop_last": False, "optimizer": "adam", "weight_decay": 0.0, "grad_clip": 0.0,
             "lr": 1e-4, "size_augment": False}
    train.update(HGR_TRAIN[c["global_pool"]])
    return [("data", data), ("model", model), ("loss", dict(HGR_LOSS)), ("train", train)]


# ---- writing ----------------------------------------------------------------------------

def safetensors_bytes(arrays, metadata):
    """The file's bytes (layout in the module docstring)."""
    dtype_name = {"<f4": "F32", "<i8": "I64"}
    header = {"__metadata__": metadata}
    for name, a in arrays:
        header[name] = {"dtype": dtype_name[a.dtype.str], "shape": list(a.shape)}
    order = sorted(range(len(arrays)), key=lambda i: -arrays[i][1].dtype.itemsize)  # stable
    offset = 0
    for i in order:
        name, a = arrays[i]
        header[name]["data_offsets"] = [offset, offset + a.nbytes]
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return (len(text).to_bytes(8, "little") + text +
            b"".join(arrays[i][1].tobytes() for i in order))


def write_atomic(path, data):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise



def check_vocab_size(path, ids, rows, note=""):
    if ids != rows:
        raise ConvertError("%s gives %d ids%s, the word embedding has %d rows"
                           % (path, ids, note, rows))


def vocab_check(path, vocab_size):
    """The reference vocabulary JSON must give vocab_size ids (<mask> appended when absent,
    as VSE∞ and text/vocab.h do). -> its SHA-256."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        v = json.loads(raw)
        n = int(v["idx"])
        last = v["idx2word"][str(n - 1)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConvertError("%s: not a reference vocabulary JSON (%s)" % (path, e))
    check_vocab_size(path, n if last == "<mask>" else n + 1, vocab_size, " (with <mask>)")
    return hashlib.sha256(raw).hexdigest()


def hgr_release_words(word2int_path):
    """The words by id of HGR's release vocabulary: word2int.json ({word: id}) and the
    int2word.npy beside it, which must agree (as vtr-import hgr reads them)."""
    int2word_path = os.path.join(os.path.dirname(word2int_path), "int2word.npy")
    try:
        with open(word2int_path, encoding="utf-8") as f:
            word2int = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError("%s: not HGR's word2int.json (%s)" % (word2int_path, e))
    try:
        int2word = [str(w) for w in np.load(int2word_path)]
    except FileNotFoundError:
        raise ConvertError("%s: missing (the vocabulary needs it beside word2int.json)"
                           % int2word_path)
    except (OSError, ValueError) as e:
        raise ConvertError("%s: not a numpy str array (%s)" % (int2word_path, e))
    if not isinstance(word2int, dict):
        raise ConvertError("%s: not a JSON object {word: id}" % word2int_path)
    words = [None] * len(word2int)
    for word, i in word2int.items():
        if not isinstance(i, int) or not 0 <= i < len(words) or words[i] is not None:
            raise ConvertError("%s: \"%s\" has id %r, not one of 0 .. %d each once"
                               % (word2int_path, word, i, len(words) - 1))
        words[i] = word
    if len(int2word) != len(words):
        raise ConvertError("%s has %d words, %s %d" % (int2word_path, len(int2word),
                                                       word2int_path, len(words)))
    for i, (a, b) in enumerate(zip(int2word, words)):
        if a != b:
            raise ConvertError("%s: id %d is \"%s\", but \"%s\" in %s"
                               % (int2word_path, i, a, b, word2int_path))
    return words


def run_vocab_path(output):
    return os.path.join(os.path.dirname(os.path.abspath(output)), RUN_VOCAB)


def run_vocab_bytes(path, words):
    """The bytes of vocab.json holding words (a JSON array in id order, as vtr-train writes
    an HGR run's vocabulary): those of the file at path when it holds the same words, else
    new ones; a file of other words is an error (vtr-eval would read it)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return (json.dumps(words, ensure_ascii=False) + "\n").encode("utf-8")
    except OSError as e:
        raise ConvertError("%s: %s" % (path, e.strerror))
    try:
        same = json.loads(raw) == words
    except ValueError:
        same = False
    if not same:
        raise ConvertError("%s holds another vocabulary, which vtr-eval would read for the "
                           "output: convert into another directory" % path)
    return raw


def convert(args):
    kind, tensors, opt, extra = load_source(args.source)
    if args.word_embeddings:
        if kind != "hgr":
            raise ConvertError("--word-embeddings is for HGR checkpoints")
        override_word_embeddings(tensors, args.word_embeddings)
    dropped = []
    if kind == "hgr":
        if not args.vocab:
            raise ConvertError("an HGR checkpoint needs --vocab (the release's word2int.json): "
                               "vtr-eval reads the words from %s beside the output" % RUN_VOCAB)
        c = infer_hgr_config(tensors)
        entries, sections = hgr_entries(c), hgr_config(c, args)
    else:
        c = infer_config(tensors, opt)
        dropped = drop_unused(tensors, c)
        entries, sections = model_entries(c), vse_config(c, opt, args)
    arrays = check_tensors(tensors, entries)
    metadata = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "code_version": args.code_version, "step": "0", "epoch": "0",
                "iteration": "0", "rng": "{}", "config": config_yaml(sections)}
    run_vocab = None  # HGR: (path, bytes) of the vocab.json beside the output
    if kind == "hgr":
        words = hgr_release_words(args.vocab)
        check_vocab_size(args.vocab, len(words), c["vocab_size"])
        path = run_vocab_path(args.output)
        run_vocab = (path, run_vocab_bytes(path, words))
        metadata["vocab_sha256"] = hashlib.sha256(run_vocab[1]).hexdigest()
    elif args.vocab:
        metadata["vocab_sha256"] = vocab_check(args.vocab, c["vocab_size"])
    metadata["converted_from"] = os.path.basename(args.source)
    metadata.update(extra)
    if run_vocab:
        write_atomic(*run_vocab)
    write_atomic(args.output, safetensors_bytes(arrays, metadata))
    return kind, c, len(arrays), dropped


def describe(kind, c):
    """The converted model in a few words, for the summary line."""
    if kind == "hgr":
        return ("%s: video %d -> %d, vocabulary %d x %d, %d roles"
                % ("HGR∞ (gpool)" if c["global_pool"] == "gpo" else "HGR (ft_attn)",
                   c["feature_dim"], c["embed_size"], c["vocab_size"], c["word_dim"],
                   c["num_roles"]))
    return ("visual %d -> %d (%s), vocabulary %d x %d, pooling %s/%s"
            % (c["feature_dim"], c["embed_size"],
               "fc + MLP %d" % c["mlp_hidden"] if c["mlp_hidden"] else "fc",
               c["vocab_size"], c["word_dim"], c["img_pool"], c["txt_pool"]))


def main(argv):
    ap = argparse.ArgumentParser(
        prog=PROG, description="Converts a VSE∞ PyTorch checkpoint (model_best.pth) or an HGR "
        "/ HGR∞ one (the HGR code's epoch.N.th) into a vtr checkpoint that vtr-eval reads "
        "(docs/training.md).")
    ap.add_argument("source", help="the PyTorch checkpoint (.pth / .pth.tar / .th)")
    ap.add_argument("output", help="the vtr checkpoint to write (.safetensors)")
    ap.add_argument("--vocab", help="VSE: the reference vocabulary JSON the model was trained "
                    "with, recorded as data.vocab and by its SHA-256; HGR (required): the "
                    "release's word2int.json (int2word.npy beside it), written as vocab.json "
                    "beside the output")
    ap.add_argument("--word-embeddings", metavar="FILE",
                    help="HGR: a word embedding file ({'text_encoder': {'embedding.we.weight': "
                    "W}}) whose W replaces the checkpoint's")
    ap.add_argument("--catalog", help="data.catalog of the stored config")
    ap.add_argument("--dataset", help="data.dataset of the stored config")
    ap.add_argument("--store", help="data.features of the stored config")
    ap.add_argument("--tokenizer", choices=("words", "whitespace"),
                    help="VSE: data.tokenizer [words: lowercase + NLTK word_tokenize, as VSE∞]")
    ap.add_argument("--max-frames", type=int,
                    help="VSE: data.max_frames [0: every row]")
    ap.add_argument("--code-version", default=PROG,
                    help="the code_version metadata [%(default)s]")
    args = ap.parse_args(argv)
    try:
        kind, c, n, dropped = convert(args)
    except ConvertError as e:
        print("%s: %s: %s" % (PROG, args.source, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: %s: %s" % (PROG, args.output, e), file=sys.stderr)
        return 1
    if dropped:
        print("%s: %s: dropped %d tensors the reference builds and never uses: %s"
              % (PROG, args.source, len(dropped), ", ".join(dropped)), file=sys.stderr)
    print("%s: %s -> %s: %d tensors; %s" % (PROG, args.source, args.output, n, describe(kind, c)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
