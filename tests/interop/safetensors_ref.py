#!/usr/bin/python3
"""A reference safetensors writer and reader in plain Python (json + struct + numpy),
following the format of Hugging Face's safetensors library, for tests/test_safetensors.c.

  safetensors_ref.py check FILE SPEC
      Reads FILE written by vtr with the reference rules (header size, JSON, offsets that
      tile the buffer exactly) and checks it against SPEC, a JSON object
      {"tensors": [[name, dtype, shape], ...], "metadata": {...} or null}: the header keys
      in SPEC's order ("__metadata__" first), the values (pattern.py), the header padded
      with spaces to a multiple of 8, and every tensor aligned for its dtype.
  safetensors_ref.py write DIR
      Writes with the reference layout the files vtr must read:
      ref.safetensors      every dtype, a scalar, a 0-length and a 3-D tensor, metadata;
                           buffer ordered as the reference writer does (dtype size
                           descending, then name)
      unaligned.safetensors  the same tensors in the listed order, header unpadded, so
                           that most tensors are misaligned
Exit status 0 when every check passes; otherwise 1 with the reason on stderr.
"""
import json
import os
import struct
import sys

import numpy as np

from pattern import pattern

# safetensors dtype -> (vtr dtype name, element size)
DTYPES = {"F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
          "U8": ("uint8", 1), "I32": ("int32", 4), "I64": ("int64", 8)}

# the tensors of the files that "write" makes; test_safetensors.c lists the same
REF_TENSORS = [
    ("encoder.weight", "F32", [2, 3, 4]),
    ("encoder.bias", "F16", [5]),
    ("gpo.gru.weight_ih", "BF16", [3, 2]),
    ("step", "I64", []),
    ("tokens", "I32", [2, 2]),
    ("mask", "U8", [7]),
    ("empty", "F32", [0, 3]),
    ("caf\u00e9", "I64", [2]),
]
REF_METADATA = {"format": "pt", "note": "caf\u00e9 \"quoted\""}


def fail(msg):
    print("safetensors_ref: " + msg, file=sys.stderr)
    sys.exit(1)


def tensor_bytes(dtype, shape):
    return pattern(DTYPES[dtype][0], shape).tobytes()


def serialize(tensors, metadata, reference_order=True, pad=True):
    """The file's bytes. reference_order sorts the buffer as the reference writer does."""
    order = list(tensors)
    if reference_order:
        order.sort(key=lambda t: (-DTYPES[t[1]][1], t[0]))
    offsets, pos = {}, 0
    for name, dtype, shape in order:
        n = len(tensor_bytes(dtype, shape))
        offsets[name] = [pos, pos + n]
        pos += n
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": offsets[name]}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    data = b"".join(tensor_bytes(d, s) for _, d, s in order)
    return struct.pack("<Q", len(text)) + text + data


def read(path):
    """Parses a file with the reference library's rules; returns (keys, header, buffer)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail("%s: shorter than 8 bytes" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > 100_000_000 or 8 + n > len(raw):
        fail("%s: header size %d" % (path, n))
    text = raw[8:8 + n]
    if not text.startswith(b"{"):
        fail("%s: header does not start with '{'" % path)
    pairs = json.loads(text.decode("utf-8"), object_pairs_hook=lambda p: p)
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        fail("%s: duplicate keys" % path)
    header = {k: (dict(v) if isinstance(v, list) else v) for k, v in pairs}
    buffer = raw[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__")
    pos = 0
    for begin, end in spans:
        if begin != pos or end < begin:
            fail("%s: offsets do not tile the buffer (at %d: %d..%d)" % (path, pos, begin, end))
        pos = end
    if pos != len(buffer):
        fail("%s: tensors cover %d of %d buffer bytes" % (path, pos, len(buffer)))
    return keys, header, buffer, n


def check(path, spec_text):
    spec = json.loads(spec_text)
    keys, header, buffer, n = read(path)
    want_keys = ([] if spec.get("metadata") is None else ["__metadata__"]) + \
        [t[0] for t in spec["tensors"]]
    if keys != want_keys:
        fail("%s: header keys %s, expected %s" % (path, keys, want_keys))
    if n % 8 != 0:
        fail("%s: header size %d is not a multiple of 8" % (path, n))
    with open(path, "rb") as f:
        text = f.read()[8:8 + n]
    if not text.rstrip(b" ").endswith(b"}"):
        fail("%s: header is not JSON padded with spaces" % path)
    if spec.get("metadata") is not None:
        meta = dict(header["__metadata__"])
        if meta != spec["metadata"]:
            fail("%s: metadata %s, expected %s" % (path, meta, spec["metadata"]))
    for name, dtype, shape in spec["tensors"]:
        info = header[name]
        if info["dtype"] != dtype or info["shape"] != shape:
            fail("%s: %s is %s %s, expected %s %s" % (path, name, info["dtype"],
                                                       info["shape"], dtype, shape))
        begin, end = info["data_offsets"]
        if (8 + n + begin) % DTYPES[dtype][1] != 0:
            fail("%s: %s at file offset %d is misaligned" % (path, name, 8 + n + begin))
        vtr_name, _ = DTYPES[dtype]
        want = pattern(vtr_name, shape)
        got = np.frombuffer(buffer[begin:end], dtype=want.dtype).reshape(shape)
        if not np.array_equal(got, want):
            fail("%s: values of %s differ" % (path, name))


def write(directory):
    with open(os.path.join(directory, "ref.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS, REF_METADATA))
    with open(os.path.join(directory, "unaligned.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS, None, reference_order=False, pad=False))
    # the reference reader accepts its own files
    read(os.path.join(directory, "ref.safetensors"))


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        check(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "write":
        write(argv[2])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv)
