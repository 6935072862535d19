#!/usr/bin/python3
"""numpy's side of the feature store tests (tests/test_feature_store.c).

  feature_store_check.py check DIR DTYPE ITEMS DIM
      Reads the store DIR written by vtr with numpy and plain Python: rows.npy (memory
      mapped), offsets.npy, keys.txt, meta.json; checks the dtype, the shapes, that item i
      is keyed "video<i>" and holds rows_of(i) rows of value(i, r, c) (below; the C test
      writes the same), that meta.json agrees, and that the bytes of rows.npy and
      offsets.npy equal what numpy itself writes for the same arrays.
  feature_store_check.py corrupt DIR WHAT
      Rewrites one file of the store DIR so that it is inconsistent: WHAT is
      offsets-decreasing, offsets-start, offsets-end, offsets-count or offsets-dtype.
Exit status 0 when every check passes; otherwise 1 with the reason on stderr.
"""
import io
import json
import os
import sys

import numpy as np
import numpy.lib.format as npf


def rows_of(i):
    return i % 4  # 0, 1, 2, 3, 0, ...: items without rows included


def value(i, r, c):
    return i + r / 4 + c / 16  # exact in float16 for i < 32, r < 4, c < 16


def fail(msg):
    print("feature_store_check: " + msg, file=sys.stderr)
    sys.exit(1)


def same_bytes_as_numpy(path, array):
    if not hasattr(npf, "GROWTH_AXIS_MAX_DIGITS"):  # numpy < 1.24 pads differently
        return
    buf = io.BytesIO()
    npf.write_array(buf, array, version=(1, 0))
    with open(path, "rb") as f:
        if f.read() != buf.getvalue():
            fail("%s: bytes differ from numpy's for the same array" % path)


def check(directory, dtype, items, dim):
    rows = np.load(os.path.join(directory, "rows.npy"), mmap_mode="r")
    offsets = np.load(os.path.join(directory, "offsets.npy"))
    with open(os.path.join(directory, "keys.txt"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    keys = text.split("\n")
    if keys[-1] != "":
        fail("keys.txt does not end with a newline")
    keys = keys[:-1]
    if rows.dtype != np.dtype(dtype) or rows.ndim != 2 or rows.shape[1] != dim:
        fail("rows.npy: %s %s" % (rows.dtype, rows.shape))
    if offsets.dtype != np.int64 or offsets.shape != (items + 1,):
        fail("offsets.npy: %s %s" % (offsets.dtype, offsets.shape))
    if len(keys) != items or len(set(keys)) != items:
        fail("keys.txt: %d keys, %d distinct" % (len(keys), len(set(keys))))
    total = 0
    for i in range(items):
        n = rows_of(i)
        if keys[i] != "video%d" % i:
            fail("key %d is %r" % (i, keys[i]))
        if offsets[i] != total or offsets[i + 1] != total + n:
            fail("item %d: offsets %d..%d" % (i, offsets[i], offsets[i + 1]))
        want = np.array([[value(i, r, c) for c in range(dim)] for r in range(n)],
                        dtype=dtype).reshape(n, dim)
        got = rows[offsets[i]:offsets[i + 1]]
        if not np.array_equal(got, want):
            fail("item %d: values differ" % i)
        total += n
    if rows.shape[0] != total:
        fail("rows.npy has %d rows, expected %d" % (rows.shape[0], total))
    expect = {"format": "vtr-feature-store", "version": 1, "dim": dim, "dtype": dtype,
              "items": items, "rows": total}
    for k, v in expect.items():
        if meta.get(k) != v:
            fail("meta.json: %s = %r, expected %r" % (k, meta.get(k), v))
    for k in ("extractor", "created", "source"):
        if k not in meta:
            fail("meta.json lacks %s" % k)
    same_bytes_as_numpy(os.path.join(directory, "rows.npy"), np.asarray(rows))
    same_bytes_as_numpy(os.path.join(directory, "offsets.npy"), offsets)


def corrupt(directory, what):
    path = os.path.join(directory, "offsets.npy")
    offsets = np.load(path)
    if what == "offsets-decreasing":
        offsets[2], offsets[3] = offsets[3], offsets[2] - 1
    elif what == "offsets-start":
        offsets[0] = 1
    elif what == "offsets-end":
        offsets[-1] += 1
    elif what == "offsets-count":
        offsets = offsets[:-1]
    elif what == "offsets-dtype":
        offsets = offsets.astype(np.int32)
    else:
        fail("unknown corruption %s" % what)
    np.save(path, offsets)


def main(argv):
    if len(argv) == 6 and argv[1] == "check":
        check(argv[2], argv[3], int(argv[4]), int(argv[5]))
    elif len(argv) == 4 and argv[1] == "corrupt":
        corrupt(argv[2], argv[3])
    else:
        fail("usage: see the top of this file")


if __name__ == "__main__":
    main(sys.argv)
