#!/usr/bin/python3
"""numpy's side of the NPY interop tests (tests/test_npy.c).

  npy_check.py check FILE DTYPE SHAPE VERSION [FILE DTYPE SHAPE VERSION ...]
      Loads each FILE written by vtr with numpy.load and checks its dtype, shape, values
      (pattern.py), format version and 64-byte data alignment, and that its bytes equal
      what numpy writes for the same array. SHAPE is "2,3,4", "5," or "" (a scalar).
  npy_check.py write DIR
      Writes with numpy the files that vtr must read (good_*.npy, named
      good_<dtype>_<shape>_v<version>.npy) or refuse (bad_<cause>.npy).
Exit status 0 when every check passes; otherwise 1 with the reason on stderr.
"""
import io
import os
import sys

import numpy as np
import numpy.lib.format as npf

from pattern import NUMPY_DTYPES, parse_shape, pattern


def fail(msg):
    print("npy_check: " + msg, file=sys.stderr)
    sys.exit(1)


def check(path, dtype, shape_text, version):
    shape = parse_shape(shape_text)
    want = pattern(dtype, shape)
    got = np.load(path, allow_pickle=False)
    if got.dtype != np.dtype(NUMPY_DTYPES[dtype]):
        fail("%s: dtype %s, expected %s" % (path, got.dtype, NUMPY_DTYPES[dtype]))
    if got.shape != shape:
        fail("%s: shape %s, expected %s" % (path, got.shape, shape))
    if not np.array_equal(got, want):
        fail("%s: values differ" % path)
    with open(path, "rb") as f:
        data = f.read()
    if data[6] != version or data[7] != 0:
        fail("%s: version %d.%d, expected %d.0" % (path, data[6], data[7], version))
    if (len(data) - want.nbytes) % 64 != 0:
        fail("%s: data starts at %d, not a multiple of 64" % (path, len(data) - want.nbytes))
    # numpy >= 1.24 pads the header for in-place growth; vtr writes those bytes exactly
    if hasattr(npf, "GROWTH_AXIS_MAX_DIGITS"):
        buf = io.BytesIO()
        npf.write_array(buf, want, version=(version, 0))
        if buf.getvalue() != data:
            fail("%s: bytes differ from numpy's for the same array" % path)


def write(directory):
    def good(dtype, shape, version):
        name = "good_%s_%s_v%d.npy" % (dtype, "x".join(map(str, shape)) or "scalar",
                                      version)
        with open(os.path.join(directory, name), "wb") as f:
            npf.write_array(f, pattern(dtype, shape), version=(version, 0))

    for dtype in ("float32", "float16", "uint8", "int32", "int64"):
        for shape in ((), (5,), (0,), (2, 3, 4)):
            good(dtype, shape, 1)
    for version in (2, 3):
        good("float32", (3, 4), version)
        good("int64", (7,), version)

    def bad(cause, array, **kw):
        np.save(os.path.join(directory, "bad_%s.npy" % cause), array, **kw)

    bad("fortran", np.asfortranarray(pattern("float32", (3, 4))))
    bad("object", np.array([1, "two", None], dtype=object), allow_pickle=True)
    bad("bigendian", pattern("float32", (3,)).astype(">f4"))
    bad("structured", np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    bad("float64", np.zeros(3, dtype="<f8"))
    bad("bool", np.zeros(3, dtype=bool))
    bad("unicode", np.array(["ab", "c"]))


def main(argv):
    if len(argv) >= 6 and len(argv) % 4 == 2 and argv[1] == "check":
        for i in range(2, len(argv), 4):
            check(argv[i], argv[i + 1], argv[i + 2], int(argv[i + 3]))
    elif len(argv) == 3 and argv[1] == "write":
        write(argv[2])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv)
