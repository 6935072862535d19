#!/usr/bin/python3
"""Converts a released VSE∞ PyTorch checkpoint into a vtr checkpoint (docs/checkpoint.md).

    /usr/bin/python3 pipeline/convert_checkpoint.py model_best.pth converted.safetensors \\
        --vocab coco_precomp_vocab.json [--catalog vtr.db --dataset coco --store stores/coco]
    vtr-eval -c converted.safetensors --split testall --coco-1k

Input (torch.load, a pickle: convert only files you trust):
  - the VSE∞ reference's checkpoint: a dict whose 'model' is [img_enc state_dict,
    txt_enc state_dict] (names without the img_enc./txt_enc. prefix) and whose 'opt' is the
    argparse Namespace of its train.py; 'epoch' and 'best_rsum' are recorded when present;
  - a dict whose 'model' is one state_dict, or a plain state_dict, with the full names
    (img_enc.fc.weight, ...).
A leading 'module.' (nn.DataParallel) is dropped from every name.

The model must be one that vtr builds (match/vse_model.h): the visual branch over
pre-extracted features (fc, with the MLP residual of precomp_enc_type 'basic' or without
it), the BiGRU text branch (one layer, directions averaged), GPO or mean pooling on each
side, l2-normalised embeddings. Sizes are read off the tensors and checked against 'opt'.
Tensors the model does not have (a CNN backbone, BERT, a second GRU layer) and tensors it
lacks are an error naming them. The one exception: the reference's MLP builds a BatchNorm
per layer and uses all but the last, so its checkpoints hold img_enc.mlp.bns.1.* (size
embed_size), which its forward never reads; those are dropped, and said so on stderr.

Output: ONE safetensors file laid out as lib/checkpoint.c writes a best.safetensors:
tensors under the reference names in the model's parameter order (F32; num_batches_tracked
I64, shape []), each at an offset aligned for its dtype; metadata format, version,
code_version, step/epoch/iteration 0, rng {}, config (the YAML keys derived from the
reference options; vtr fills every other key with its default), then vocab_sha256 (with
--vocab), converted_from, source_epoch and source_best_rsum (when the source has them).

The safetensors layout (written here directly: Debian has no python3-safetensors):
  8 bytes   N, the JSON header's length, little-endian unsigned
  N bytes   JSON, compact, padded with spaces to a multiple of 8:
            {"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}}
  the data  each tensor's bytes, little-endian, C order, at [b, e) from the data start;
            largest element size first, in parameter order among equal sizes.

Exit status 0 converted; 1 bad usage or a source that does not convert (one line on
stderr naming the file and the cause). The output is written atomically.
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


def load_source(path):
    """-> (tensors {full name: ndarray}, opt or None, extra metadata {key: str})."""
    import torch
    try:
        try:  # the Namespace in 'opt' needs the full unpickler (torch >= 2.6 defaults to
            ck = torch.load(path, map_location="cpu", weights_only=False)  # weights only)
        except TypeError:  # torch < 1.13 has no weights_only
            ck = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many kinds for a bad file
        raise ConvertError("cannot read it with torch.load: %s" % str(e).splitlines()[0])
    opt, extra = None, {}
    if isinstance(ck, dict) and "model" in ck:
        model = ck["model"]
        opt = ck.get("opt")
        for key, meta in (("epoch", "source_epoch"), ("best_rsum", "source_best_rsum")):
            if isinstance(ck.get(key), (int, float)):
                extra[meta] = repr(ck[key])
    else:
        model = ck
    tensors = {}
    if isinstance(model, (list, tuple)):
        if len(model) != 2 or not all(isinstance(m, dict) for m in model):
            raise ConvertError("'model' is a list of %d, expected [img_enc state_dict, "
                               "txt_enc state_dict]" % len(model))
        for prefix, sd in zip(("img_enc.", "txt_enc."), model):
            for name, value in sd.items():
                tensors[prefix + strip_module(name)] = value
    elif isinstance(model, dict):
        for name, value in model.items():
            tensors[strip_module(name)] = value
    else:
        raise ConvertError("holds a %s, not a state_dict or a VSE∞ checkpoint"
                           % type(model).__name__)
    return {name: as_numpy(name, v) for name, v in tensors.items()}, opt, extra


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

    def pool(side, kind):
        if kind != "gpo":
            return []
        pe, h = c["gpo_pe"], c["gpo_hidden"]
        return gru_entries(side + "gpool.gru.", pe, h) + [(side + "gpool.linear.weight", (1, h),
                                                           "F32")]
    out += pool("img_enc.", c["img_pool"])
    out += [("txt_enc.embed.weight", (c["vocab_size"], c["word_dim"]), "F32")]
    out += gru_entries("txt_enc.rnn.", c["word_dim"], E)
    out += pool("txt_enc.", c["txt_pool"])
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


def infer_config(tensors, opt):
    """The model config, from the tensors' shapes, checked against the reference options."""
    E, F = shape_of(tensors, "img_enc.fc.weight")
    c = {"feature_dim": int(F), "embed_size": int(E)}
    has_mlp = any(n.startswith("img_enc.mlp.") for n in tensors)
    c["mlp_hidden"] = int(shape_of(tensors, "img_enc.mlp.layers.0.weight")[0]) if has_mlp else 0
    V, W = shape_of(tensors, "txt_enc.embed.weight")
    c["vocab_size"], c["word_dim"] = int(V), int(W)
    gpo = set()
    for side in ("img", "txt"):
        if any(n.startswith(side + "_enc.gpool.") for n in tensors):
            three_h, pe = shape_of(tensors, side + "_enc.gpool.gru.weight_ih_l0")
            gpo.add((int(pe), int(three_h) // 3))
            c[side + "_pool"] = "gpo"
        else:
            c[side + "_pool"] = "mean"
    if len(gpo) > 1:
        raise ConvertError("the two GPOs differ in size %s; vtr's config has one gpo_pe and "
                           "gpo_hidden for both sides" % sorted(gpo))
    c["gpo_pe"], c["gpo_hidden"] = gpo.pop() if gpo else (32, 32)
    if opt is not None:
        check_options(c, opt)
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


def config_yaml(c, opt, args, vocab_path):
    """The config as vtr_config_dump writes it, for the keys known here."""
    data = {}
    for key, value in (("catalog", args.catalog), ("dataset", args.dataset),
                       ("features", args.store)):
        if value:
            data[key] = value
    if vocab_path:
        data["vocab"] = vocab_path
    data["tokenizer"] = args.tokenizer
    data["max_frames"] = args.max_frames
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
    lines = []
    for section, keys in (("data", data), ("model", model), ("loss", loss), ("train", train)):
        if keys:
            lines.append(section + ":")
            lines += ["  %s: %s" % (k, yaml_value(v)) for k, v in keys.items()]
    return "\n".join(lines) + "\n"


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
    ids = n if last == "<mask>" else n + 1
    if ids != vocab_size:
        raise ConvertError("%s gives %d ids (with <mask>), the word embedding has %d rows"
                           % (path, ids, vocab_size))
    return hashlib.sha256(raw).hexdigest()


def convert(args):
    tensors, opt, extra = load_source(args.source)
    c = infer_config(tensors, opt)
    dropped = drop_unused(tensors, c)
    arrays = check_tensors(tensors, model_entries(c))
    metadata = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "code_version": args.code_version, "step": "0", "epoch": "0",
                "iteration": "0", "rng": "{}",
                "config": config_yaml(c, opt, args, args.vocab)}
    if args.vocab:
        metadata["vocab_sha256"] = vocab_check(args.vocab, c["vocab_size"])
    metadata["converted_from"] = os.path.basename(args.source)
    metadata.update(extra)
    write_atomic(args.output, safetensors_bytes(arrays, metadata))
    return c, len(arrays), dropped


def main(argv):
    ap = argparse.ArgumentParser(
        prog=PROG, description="Converts a VSE∞ PyTorch checkpoint (model_best.pth) into a "
        "vtr checkpoint that vtr-eval reads (docs/training.md).")
    ap.add_argument("source", help="the PyTorch checkpoint (.pth / .pth.tar)")
    ap.add_argument("output", help="the vtr checkpoint to write (.safetensors)")
    ap.add_argument("--vocab", help="the reference vocabulary JSON the model was trained with; "
                    "recorded as data.vocab and by its SHA-256")
    ap.add_argument("--catalog", help="data.catalog of the stored config")
    ap.add_argument("--dataset", help="data.dataset of the stored config")
    ap.add_argument("--store", help="data.features of the stored config")
    ap.add_argument("--tokenizer", default="words", choices=("words", "whitespace"),
                    help="data.tokenizer [words: lowercase + NLTK word_tokenize, as VSE∞]")
    ap.add_argument("--max-frames", type=int, default=0,
                    help="data.max_frames [0: every row]")
    ap.add_argument("--code-version", default=PROG,
                    help="the code_version metadata [%(default)s]")
    args = ap.parse_args(argv)
    try:
        c, n, dropped = convert(args)
    except ConvertError as e:
        print("%s: %s: %s" % (PROG, args.source, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: %s: %s" % (PROG, args.output, e), file=sys.stderr)
        return 1
    if dropped:
        print("%s: %s: dropped %d tensors the reference builds and never uses: %s"
              % (PROG, args.source, len(dropped), ", ".join(dropped)), file=sys.stderr)
    print("%s: %s -> %s: %d tensors; visual %d -> %d (%s), vocabulary %d x %d, pooling %s/%s"
          % (PROG, args.source, args.output, n, c["feature_dim"], c["embed_size"],
             "fc + MLP %d" % c["mlp_hidden"] if c["mlp_hidden"] else "fc",
             c["vocab_size"], c["word_dim"], c["img_pool"], c["txt_pool"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
