#!/usr/bin/env python3
"""One markdown table from `oasiskv eval --sweep --json` files: a row a task, a column a
(predict mode, key codes, budget), each cell `correct` (of n); dense first. Where several files
hold the same cell, the last file on the command line wins (pass the newest last).

    python3 bench/accuracy_table.py FILE.json [FILE.json ...] [--ctx 32768]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--ctx", type=int, default=None, help="only this context length")
    a = ap.parse_args()
    cells, tasks, cols, ns = {}, [], set(), set()
    for path in a.json:
        for r in json.load(open(path))["rows"]:
            if a.ctx and r["context_len"] != a.ctx:
                continue
            if r["task"] not in tasks:
                tasks.append(r["task"])
            if r["predict"] == "dense" or r["kv_budget"] == 0:
                col = ("dense", 0, 0, "")
            else:
                # speculation's switches, where they differ from the defaults (deferred own token, no inline)
                v = ""
                if r.get("draft") and r["predict"] != "lookahead":
                    v += " + draft"
                if r.get("draft") and r.get("verify_inline"):
                    v += " inline"
                elif r.get("draft") and not r.get("verify_defer"):
                    v += " no defer"
                if r.get("spec_adaptive"):
                    v += " adaptive"
                col = (r["predict"], r.get("key_code_bits", 0), r["kv_budget"], v)
            cols.add(col)
            ns.add(r["n"])
            cells[(r["task"], col)] = r
    order = {"dense": 0, "current": 1, "oracle": 2, "lookahead": 3}
    cols = sorted(cols, key=lambda c: (order.get(c[0], 9), c[3], -c[1] if c[0] != "current" else c[1], c[2]))

    def name(c):
        if c[0] == "dense":
            return "dense"
        return f"{c[0]}{c[3]}{' codes' if c[1] else ' bound'} {c[2]}"

    print("| task | " + " | ".join(name(c) for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for t in tasks:
        row = []
        for c in cols:
            r = cells.get((t, c))
            row.append("" if r is None else str(r["correct"]))
        print(f"| {t} | " + " | ".join(row) + " |")
    print(f"\n(n per cell: {sorted(ns)})")


if __name__ == "__main__":
    main()
