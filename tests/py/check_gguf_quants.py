"""The loader's float32 conversion of every GGUF block format it reads, against the
`gguf` package's own dequantization (numpy, llama.cpp's gguf-py), on fresh random blocks.

usage: check_gguf_quants.py OKV_TENSOR_DUMP [SEED]

Each format gets two tensors of random bytes (rows of several blocks), so every bit of
every field is exercised; only the fp16 scale and offset fields are set, to random finite
values, so that no block decodes to inf or NaN. The C tool writes its conversion of each
tensor; the two must agree to float32 rounding (the formulas are the same products and
differences, so the only slack is the order of a product of three factors)."""
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
}


def random_blocks(rng, n_blocks, size, half_offs):
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in half_offs:
        mag = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), size=n_blocks))
        val = (mag * rng.choice([-1.0, 1.0], size=n_blocks)).astype(np.float16)
        b[:, off:off + 2] = val.view(np.uint8).reshape(n_blocks, 2)
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
                raw = random_blocks(rng, rows * blocks_per_row, size, offs).reshape(rows, blocks_per_row * size)
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
            print(f"{tname:8s} {dtype:5s} {ref.size:6d} values, {exact} bit-exact, max |err| {err.max():.3g}, "
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
