"""The values of the arrays the interop tests exchange; see pattern.h (change both)."""
import numpy as np

# numpy dtype of each vtr dtype name; bfloat16 travels as its uint16 bit pattern
NUMPY_DTYPES = {"float32": "<f4", "float16": "<f2", "uint8": "|u1", "int32": "<i4",
                "int64": "<i8", "bfloat16": "<u2"}


def base(n):
    i = np.arange(n, dtype=np.int64)
    return (i * 37 + 11) % 256 - 100


def pattern(dtype, shape):
    """The test array of a vtr dtype name and shape (bfloat16 as uint16 bits)."""
    shape = tuple(shape)
    b = base(int(np.prod(shape, dtype=np.int64)))
    if dtype in ("float32", "float16"):
        a = (b * 0.25).astype(NUMPY_DTYPES[dtype])
    elif dtype == "bfloat16":
        # every pattern value is exact in bfloat16: its bits are the float32's top half
        a = ((b * 0.25).astype("<f4").view("<u4") >> 16).astype("<u2")
    elif dtype == "uint8":
        a = (b + 100).astype("|u1")
    elif dtype == "int32":
        a = (b * 65537).astype("<i4")
    elif dtype == "int64":
        a = (b * 4294967311).astype("<i8")
    else:
        raise ValueError("unknown dtype " + dtype)
    return a.reshape(shape)


def parse_shape(text):
    """"2,3,4" -> (2, 3, 4); "" -> () (a scalar)."""
    return tuple(int(x) for x in text.split(",") if x != "")
