"""Reference table for the FP8 E4M3 conversions (src/util/half.c), from the ml_dtypes package
(float8_e4m3fn, the OCP format).

    .venv/bin/python tests/py/make_e4m3_ref.py   # writes tests/data/e4m3_ref.bin

Layout: 65536 bytes, the e4m3 code of every bfloat16 bit pattern (by its float32 value, cast
with ml_dtypes: round to nearest even; past the largest finite value ml_dtypes gives NaN where
OasisKV saturates, and tests/test_fp8.c checks that difference explicitly); then 256
little-endian float32, the value of every e4m3 code."""
import os

import ml_dtypes
import numpy as np

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
bf = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
with np.errstate(all="ignore"):
    enc = bf.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
dec = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
with open(os.path.join(root, "tests", "data", "e4m3_ref.bin"), "wb") as f:
    f.write(enc.tobytes())
    f.write(dec.astype("<f4").tobytes())
print("wrote tests/data/e4m3_ref.bin (ml_dtypes %s)" % ml_dtypes.__version__)
