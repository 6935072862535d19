#!/usr/bin/python3
"""Writes the fuzz seed corpora: small valid files in tests/fuzz/corpus/npy/ and
tests/fuzz/corpus/safetensors/. Run from the top of the tree; the output is checked in."""
import io
import os

import numpy as np
import numpy.lib.format as npf

from pattern import pattern
from safetensors_ref import REF_METADATA, REF_TENSORS, serialize

NPY_DIR = "tests/fuzz/corpus/npy"
ST_DIR = "tests/fuzz/corpus/safetensors"


def main():
    os.makedirs(NPY_DIR, exist_ok=True)
    os.makedirs(ST_DIR, exist_ok=True)
    for name, dtype, shape, version in [
        ("f4_2x3_v1", "float32", (2, 3), 1), ("f2_5_v3", "float16", (5,), 3),
        ("u1_scalar_v1", "uint8", (), 1), ("i4_0x4_v2", "int32", (0, 4), 2),
        ("i8_1x1x2_v1", "int64", (1, 1, 2), 1),
    ]:
        buf = io.BytesIO()
        npf.write_array(buf, pattern(dtype, shape), version=(version, 0))
        with open(os.path.join(NPY_DIR, name + ".npy"), "wb") as f:
            f.write(buf.getvalue())
    with open(os.path.join(NPY_DIR, "fortran.npy"), "wb") as f:
        np.save(f, np.asfortranarray(pattern("float32", (2, 2))))

    with open(os.path.join(ST_DIR, "ref.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS, REF_METADATA))
    with open(os.path.join(ST_DIR, "unaligned.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS[:3], None, reference_order=False, pad=False))
    with open(os.path.join(ST_DIR, "metadata_only.safetensors"), "wb") as f:
        f.write(serialize([], {"k": "v"}))


if __name__ == "__main__":
    main()
