"""The structured-output JSON recognizer (src/structured/json.c) against Python's json module.

usage: check_json_ref.py OKV_JSON_CHECK [SEED]

Documents: json.dumps of random values (nested objects, arrays, strings with escapes and
non-ASCII text, numbers of every form, literals), with and without indentation, and mutations
of them (a byte deleted, inserted or replaced, a prefix cut). For each, the reference is
Python: a document is complete exactly when bytes.decode("utf-8") and json.loads (without
NaN / Infinity, which JSON does not have) accept it; with --object the value must be a dict.
The recognizer must call complete exactly those (within its limits: nesting 64, runs of 64
whitespace bytes, no trailing whitespace, none of which the documents reach), and every strict
prefix of a complete document a prefix."""
import json
import random
import subprocess
import sys
import time


def rand_str(rng):
    pool = ['a', 'b', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\x01', 'é', '中', '😀', '\u2028', '\ud7ff', '\ue000']
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, 6)))


def rand_num(rng):
    k = rng.randint(0, 5)
    if k == 0:
        return rng.randint(-10**6, 10**6)
    if k == 1:
        return 0
    if k == 2:
        return rng.uniform(-1e3, 1e3)
    if k == 3:
        return rng.choice([1e-7, -2.5e+30, 1e308, 5e-324, 0.5])
    if k == 4:
        return -0.0
    return rng.randint(0, 9)


def rand_value(rng, depth):
    k = rng.randint(0, 6 if depth < 5 else 3)
    if k == 0:
        return rand_str(rng)
    if k == 1:
        return rand_num(rng)
    if k == 2:
        return rng.choice([True, False, None])
    if k == 3:
        return rand_num(rng)
    if k in (4, 5):
        return {rand_str(rng): rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def reference(b, object_only):
    try:
        v = json.loads(b.decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(v, dict) if object_only else True


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
    print(f"seed {seed} (check_json_ref.py TOOL {seed} repeats this run)")
    rng = random.Random(seed)
    docs = []
    for _ in range(400):
        v = rand_value(rng, 0)
        if rng.random() < 0.5:
            v = {"k": v, rand_str(rng): [v]}
        ind = rng.choice([None, None, 2, 0])
        s = json.dumps(v, ensure_ascii=rng.random() < 0.3, indent=ind)
        docs.append(s.encode("utf-8"))
    hand = [b'{}', b'[]', b'{"a":1}', b' {"a" : [1, 2.5e-3, -0, true, false, null, "x\\u00e9\\n"]}', b'01', b'1.', b'.5',
            b'-', b'1e', b'1e+', b'"\\x"', b'"\\u12"', b'{"a" 1}', b'{"a":}', b'[1,]', b'{,}', b'tru', b'nul', b'"abc',
            b'"\xc3\xa9"', b'"\xc3"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe0\x80\x80"', b'"\xc0\xaf"',
            b'"\x1f"', b'{"a":1}}', b'[1 2]', b'-01', b'1.5e+07', b'"\\/"', b'{"":""}', b'[[[[]]]]', b'{"a":[{}]}',
            b'NaN', b'Infinity', b'[-Infinity]', b'\t[\r\n1\n]']
    cands = list(hand)
    for d in docs:
        cands.append(d)
        for _ in range(3):   # mutations
            b = bytearray(d)
            op = rng.randint(0, 3)
            i = rng.randrange(len(b) + 1)
            if op == 0 and len(b) > 1:
                del b[min(i, len(b) - 1)]
            elif op == 1:
                b.insert(i, rng.choice(b'{}[],:"\\0123456789.eE+-tfn \xc3\xa9\x80'))
            elif op == 2 and len(b) > 0:
                b[min(i, len(b) - 1)] = rng.choice(b'{}[],:"\\0123456789.eE+-tfn \xff')
            else:
                b = b[:i]
            cands.append(bytes(b))
    fails = 0
    for mode in (False, True):
        args = [tool] + (["--object"] if mode else [])
        inp = "".join(c.hex() + "\n" for c in cands)
        out = subprocess.run(args, input=inp, capture_output=True, text=True).stdout.splitlines()
        assert len(out) == len(cands), (len(out), len(cands))
        n_complete = 0
        for c, v in zip(cands, out):
            want = reference(c, mode) and not c.endswith((b" ", b"\n", b"\t", b"\r"))
            got = v == "complete"
            n_complete += got
            if got != want:
                fails += 1
                if fails < 15:
                    print(f"FAIL {'object' if mode else 'any'}: {c!r}: recognizer {v}, Python {'accepts' if want else 'refuses'}")
        # every strict prefix of a complete document is a prefix
        n_pre = 0
        pre = []
        for c, v in zip(cands, out):
            if v == "complete":
                for i in range(1, len(c)):
                    pre.append(c[:i])
        out2 = subprocess.run(args, input="".join(p.hex() + "\n" for p in pre), capture_output=True,
                              text=True).stdout.splitlines()
        for p, v in zip(pre, out2):
            n_pre += 1
            # a strict prefix of a complete top-level number may itself be complete ("12" of "123")
            if v.startswith("fail"):
                fails += 1
                if fails < 15:
                    print(f"FAIL {'object' if mode else 'any'}: prefix {p!r} refused ({v})")
        print(f"{'object' if mode else 'any value'}: {len(cands)} documents ({n_complete} complete), "
              f"{n_pre} prefixes of complete ones: verdicts equal Python's")
    if fails:
        print(f"FAIL: {fails} disagreements")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
