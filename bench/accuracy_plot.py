#!/usr/bin/env python3
"""Plot `oasiskv eval --sweep --json` results: accuracy against KV budget per task and
context length, one line per predict mode, dense as a horizontal line with its 95%
interval; fidelity files (--task fidelity) get a panel of top-1 agreement with dense.

    .venv/bin/pip install matplotlib      # local only; not needed by CI
    .venv/bin/python bench/accuracy_plot.py bench/accuracy.json -o bench/accuracy.png

Rows that speculate or merge rows (a draft, verify-inline, a merge rule, drafted tokens a step) are their
own lines, labelled from the JSON; FILE::LABEL gives every sparse row of FILE that label instead (files
written before the JSON recorded those fields); FILE::dense takes only FILE's dense rows.
"""
import argparse
import json
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = {"current": ("tab:blue", "o"), "lookahead": ("tab:orange", "s"), "oracle": ("tab:green", "^"),
         "current-from-prompt": ("tab:cyan", "v"), "lookahead-from-prompt": ("tab:red", "D"),
         "layer-ahead": ("tab:pink", "P"), "layer-ahead-attn": ("tab:gray", "X")}
# the same modes run with key codes (dashed)
CODES = {"current": "tab:purple", "oracle": "tab:olive", "lookahead": "tab:brown", "layer-ahead": "tab:red",
         "layer-ahead-attn": "tab:blue"}


VARIANT_STYLES = [("tab:red", "D"), ("tab:purple", "v"), ("tab:olive", "<"), ("tab:cyan", ">"), ("tab:brown", "h"),
                  ("tab:pink", "*"), ("tab:green", "p")]


def variant(r):
    """the row's speculation and merge settings, "" when it has none"""
    parts = []
    drafting = r.get("draft") or r["predict"] == "lookahead"
    if r.get("draft"):
        parts.append(f"{r['draft']} drafts")
    if drafting and r.get("spec_tokens"):
        parts.append(f"adaptive, at most {r['spec_tokens']} a step" if r.get("spec_adaptive") else f"{r['spec_tokens']} a step")
    if r.get("verify_inline"):
        parts.append("verify inline")
    if drafting and r.get("merge") in ("share", "rank"):
        parts.append(f"{r['merge']} merge")
    return ", ".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("-o", "--out", default="bench/accuracy.png")
    ap.add_argument("--title", default="OasisKV vs dense: SmolLM2-135M-Instruct (Q4_1), CPU")
    ap.add_argument("--codes-label", default="{mode}, {bits}-bit key codes",
                    help="legend of rows run with key codes (their score blend is not in the JSON: say it here)")
    ap.add_argument("--legend-below", action="store_true", help="the legend under the panel (many lines)")
    ap.add_argument("--metric", choices=("accuracy", "partial"), default="accuracy",
                    help="what the task panels plot: exact accuracy with its 95%% interval, or the mean partial "
                    "credit (chain_long: lookups right in order), which has no interval")
    a = ap.parse_args()
    acc = defaultdict(list)   # (task, ctx) -> rows
    fid = defaultdict(list)   # ctx -> rows
    seen = {}
    for arg in a.json:   # a cell given twice: the later file's row
        path, _, label = arg.partition("::")
        for r in json.load(open(path))["rows"]:
            if label == "dense" and r["kv_budget"]:
                continue
            r["variant"] = (label or variant(r)) if r["kv_budget"] else ""
            seen[(r["task"], r["context_len"], r["kv_budget"], r["predict"], r.get("key_code_bits", 0), r["variant"])] = r
    for r in seen.values():
        (fid[r["context_len"]] if r["task"] == "fidelity" else acc[(r["task"], r["context_len"])]).append(r)
    panels = [("acc", k) for k in sorted(acc)] + [("fid", k) for k in sorted(fid)]
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols * (1.4 if a.legend_below else 1), (3.9 + 2.6 * a.legend_below) * rows),
                             squeeze=False)
    for ax, (kind, key) in zip(axes.flat, panels):
        if kind == "acc":
            task, ctx = key
            rs = acc[key]
            dense = [r for r in rs if r["kv_budget"] == 0]
            if dense:
                d = dense[0]
                if a.metric == "partial":
                    ax.axhline(d["partial"], color="black", lw=1.5, label=f"dense ({d['partial']:.3f})")
                else:
                    ax.axhline(d["accuracy"], color="black", lw=1.5, label=f"dense ({d['correct']}/{d['n']})")
                    ax.axhspan(d["ci95"][0], d["ci95"][1], color="gray", alpha=0.15, lw=0)
            n_var = 0
            for mode, (color, marker) in MODES.items():
                for bits in sorted({r.get("key_code_bits", 0) for r in rs}):
                    for var in sorted({r["variant"] for r in rs if r["predict"] == mode}):
                        pts = sorted((r["kv_budget"], r[a.metric], r["ci95"]) for r in rs
                                     if r["kv_budget"] and r["predict"] == mode and r.get("key_code_bits", 0) == bits
                                     and r["variant"] == var)
                        if not pts:
                            continue
                        xs = [p[0] for p in pts]
                        ys = [p[1] for p in pts]
                        # partial credit has no interval
                        err = [[p[1] - p[2][0] for p in pts], [p[2][1] - p[1] for p in pts]] if a.metric == "accuracy" else None
                        label = a.codes_label.format(mode=mode, bits=bits) if bits else mode
                        c, m, ls = CODES.get(mode, "tab:purple") if bits else color, marker, "--" if bits else "-"
                        if var:
                            c, m = VARIANT_STYLES[n_var % len(VARIANT_STYLES)]
                            n_var += 1
                            label, ls = f"{label}: {var}", ":"
                        ax.errorbar(xs, ys, yerr=err, color=c, marker=m, capsize=3, lw=1.2, alpha=0.85, ls=ls, label=label)
            n = max((r["n"] for r in rs), default=0)
            ax.set_title(f"{task}, context {ctx} (N={n})", fontsize=10)
            ax.set_ylabel("accuracy (95% Wilson)" if a.metric == "accuracy" else "partial credit (mean)")
            ax.set_ylim(-0.05, 1.05)
            ax.axvline(ctx, color="gray", ls=":", lw=1)
        else:
            ctx = key
            rs = fid[key]
            for mode, (color, marker) in MODES.items():
                pts = sorted((r["kv_budget"], r["top1_agreement"]) for r in rs if r["kv_budget"] and r["predict"] == mode)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, label=mode)
            ax.axhline(1.0, color="black", lw=1.5, label="dense")
            steps = rs[0]["steps"] if rs else 0
            ax.set_title(f"fidelity: {steps} teacher-forced steps, context {ctx}", fontsize=10)
            ax.set_ylabel("top-1 = dense")
            ax.axvline(ctx, color="gray", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ticks = sorted({r["kv_budget"] for r in (acc[key] if kind == "acc" else fid[key]) if r["kv_budget"]})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("KV budget (tokens)")
        ax.grid(alpha=0.3)
        if a.legend_below:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1)
        else:
            ax.legend(fontsize=8, loc="best")   # "best": clear of points at 0 (a bound that loses every sample)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(a.title, fontsize=11)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(a.out)


if __name__ == "__main__":
    main()
