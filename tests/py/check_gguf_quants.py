"""The loader's float32 conversion of every GGUF block format it reads, against the
`gguf` package's own dequantization (numpy, llama.cpp's gguf-py), on fresh random blocks.

usage: check_gguf_quants.py OKV_TENSOR_DUMP [SEED]

Each format gets two tensors of random bytes (rows of several blocks), so every bit of
every field is exercised; only the fp16 scale and offset fields are set, to random finite
values, so that no block decodes to inf or NaN (IQ1_M, whose scale has no field of its own,
through a hook: see FIX_BLOCKS). The IQ1-IQ3 formats' grid indices come from these random
bytes too; their tables as a whole are checked by scripts/gen_iq_grids.py --check. The C
tool writes its conversion of each tensor; the two must agree to float32 rounding (the
formulas are the same products and differences, so the only slack is the order of a
product of three factors)."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

# format: (elements a block, bytes a block, byte offsets of fp16 scale/offset fields)
FORMATS = {
    "Q8_0": (T.Q8_0, 32, 34, [0]),
    "Q4_0": (T.Q4_0, 32, 18, [0]),
    "Q4_1": (T.Q4_1, 32, 20, [0, 2]),
    "Q5_0": (T.Q5_0, 32, 22, [0]),
    "Q5_1": (T.Q5_1, 32, 24, [0, 2]),
    "Q2_K": (T.Q2_K, 256, 84, [80, 82]),
    "Q3_K": (T.Q3_K, 256, 110, [108]),
    "Q4_K": (T.Q4_K, 256, 144, [0, 2]),
    "Q5_K": (T.Q5_K, 256, 176, [0, 2]),
    "Q6_K": (T.Q6_K, 256, 210, [208]),
    "IQ4_NL": (T.IQ4_NL, 32, 18, [0]),
    "IQ4_XS": (T.IQ4_XS, 256, 136, [0]),
    "IQ2_XXS": (T.IQ2_XXS, 256, 66, [0]),
    "IQ2_XS": (T.IQ2_XS, 256, 74, [0]),
    "IQ2_S": (T.IQ2_S, 256, 82, [0]),
    "IQ3_XXS": (T.IQ3_XXS, 256, 98, [0]),
    "IQ3_S": (T.IQ3_S, 256, 110, [0]),
    "IQ1_S": (T.IQ1_S, 256, 50, [0]),
    "IQ1_M": (T.IQ1_M, 256, 56, []),   # no fp16 field: FIX_BLOCKS
}


def random_halves(rng, n_blocks):
    """n_blocks random finite fp16 values, magnitudes 1e-3 .. 2, either sign"""
    mag = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), size=n_blocks))
    return (mag * rng.choice([-1.0, 1.0], size=n_blocks)).astype(np.float16)


def fix_iq1_m(rng, b):
    """IQ1_M's fp16 scale d is assembled from the top 4 bits of its four u16 scale words
    (bytes 48-55; d's bits 4w .. 4w + 3 in word w's bits 12-15, i.e. the high nibble of byte
    49 + 2w); random bytes there could make d inf or NaN, so write a random finite d into
    those nibbles and keep the words' low 12 bits (the 3-bit sub-block scales) random."""
    d = random_halves(rng, b.shape[0]).view(np.uint16)
    for w in range(4):
        nib = ((d >> (4 * w)) & 0xF).astype(np.uint8)
        b[:, 49 + 2 * w] = (b[:, 49 + 2 * w] & 0x0F) | (nib << 4)


# formats whose scale cannot be set as a plain fp16 field: a hook fixing the random blocks
FIX_BLOCKS = {"IQ1_M": fix_iq1_m}


def random_blocks(rng, name, n_blocks, size, half_offs):
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in half_offs:
        b[:, off:off + 2] = random_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if name in FIX_BLOCKS:
        FIX_BLOCKS[name](rng, b)
    return b


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
    print(f"seed {seed} (check_gguf_quants.py TOOL {seed} repeats this run)")
    rng = np.random.default_rng(seed)
    expect = {}
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "quants.gguf")
        w = gguf.GGUFWriter(path, "llama")
        for name, (qt, blk, size, offs) in FORMATS.items():
            for k, (rows, blocks_per_row) in enumerate([(3, 2), (int(rng.integers(1, 6)), int(rng.integers(1, 5)))]):
                raw = random_blocks(rng, name, rows * blocks_per_row, size, offs).reshape(rows, blocks_per_row * size)
                tname = f"{name}.{k}"
                w.add_tensor(tname, raw, raw_shape=(rows, blocks_per_row * size), raw_dtype=qt)
                ref = gguf.quants.dequantize(raw, qt).astype(np.float32).reshape(-1)
                expect[tname] = (name, ref)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        out = subprocess.run([tool, path, td], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            print("FAIL: okv_tensor_dump failed")
            return 1
        fails = 0
        for line in out.stdout.splitlines():
            tname, dtype, n = line.split()[:3]
            name, ref = expect[tname]
            got = np.fromfile(os.path.join(td, tname + ".f32"), dtype=np.float32)
            if dtype != name.lower() or got.size != ref.size:
                print(f"FAIL {tname}: dtype {dtype}, {got.size} elements; want {name.lower()}, {ref.size}")
                fails += 1
                continue
            if not np.all(np.isfinite(ref)):
                print(f"FAIL {tname}: the reference has non-finite values (test data)")
                fails += 1
                continue
            # one rounding of a product of three float32 factors: a few ulp of the value
            tol = 4 * np.finfo(np.float32).eps * np.abs(ref) + 1e-30
            err = np.abs(got - ref)
            bad = int(np.sum(err > tol))
            exact = int(np.sum(got == ref))
            print(f"{tname:10s} {dtype:7s} {ref.size:6d} values, {exact} bit-exact, max |err| {err.max():.3g}, "
                  f"{bad} beyond 4 ulp")
            if bad:
                i = int(np.argmax(err - tol))
                print(f"FAIL {tname}: element {i}: loader {got[i]!r}, gguf {ref[i]!r}")
                fails += 1
        seen = {l.split()[0] for l in out.stdout.splitlines()}
        missing = set(expect) - seen
        if missing:
            print(f"FAIL: tensors not converted: {sorted(missing)}")
            fails += 1
        if fails:
            print(f"FAIL: {fails} tensors differ")
            return 1
        print(f"OK: {len(expect)} tensors of {len(FORMATS)} formats equal gguf's dequantization")
        return 0


if __name__ == "__main__":
    sys.exit(main())
