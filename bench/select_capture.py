#!/usr/bin/env python3
"""Where a block score loses: for each layer and KV head of a Llama checkpoint, the share of the
attention mass that the best k candidate blocks hold which each block score's top k captures
(teacher-forced with PyTorch on one sample's prompt and reference answer, at every answer step).

    oasiskv eval --task chain --model M --context-len 8192 --num-samples 1 --seed 0 --dump-samples S.jsonl
    python3 bench/select_capture.py M S.jsonl [--k 27] [--block 16] [--window 4]

The candidates are blocks 1 .. (the step's blocks - window), as the engine's (block 0 is the sink,
the last `window` blocks the local window, both always read). A block's attention mass is the sum of
its tokens' softmax weights, the maximum over the GQA group's query heads (as the engine selects one
set per KV head). Scores, each the maximum over the group's heads:
  bound   Quest's bound, sum_d max(q_d kmin_d, q_d kmax_d) (the engine's default)
  exact   max over the block's keys of q.k (a perfect summary)
  codes2  as exact, each key channel rounded to one of 4 levels of the block's [kmin, kmax]
          (`--kv-key-codes 2`), codes1 the same with 2 levels (`--kv-key-codes 1`)
  mean    q . (the mean of the block's keys)
  blend   q.c + 0.5 |q|.r, c and r the box's centre and half-range
  bound8  the bound of each half block (8 tokens), the larger
Prints one line a (layer, head): the mass that sink + window + the best k blocks hold (a maximum
over heads, so it may pass 1), then each score's captured share of it (1: the best k found).
Needs torch, numpy, safetensors (train/train.py's model class: the project's checkpoints and other
Llama checkpoints with tied embeddings).
"""
import argparse
import json
import math
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import train as T  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("samples", help="a JSON-lines file from oasiskv eval --dump-samples (its first sample)")
    ap.add_argument("--k", type=int, default=27, help="blocks selected per KV head (budget / block - sink - window)")
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--window", type=int, default=4)
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    m = T.Llama(cfg)
    T.load_model(m, a.model)
    m.eval()
    d = json.loads(open(a.samples).readline())
    ids = d["prompt_tokens"] + d["target_tokens"]
    p0 = len(d["prompt_tokens"]) - 1
    cap = {}

    def hooked(idx):
        def fwd(self, x, cos, sin):
            b, n, _ = x.shape
            q = self.q_proj(x).view(b, n, self.nh, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(b, n, self.nkv, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(b, n, self.nkv, self.hd).transpose(1, 2)
            q = q * cos + T.rotate_half(q) * sin
            k = k * cos + T.rotate_half(k) * sin
            cap[idx] = (q[0], k[0])
            rep = self.nh // self.nkv
            o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1),
                                                                 v.repeat_interleave(rep, 1), is_causal=True)
            return self.o_proj(o.transpose(1, 2).reshape(b, n, self.nh * self.hd))
        return fwd

    for i, layer in enumerate(m.model.layers):
        layer.self_attn.forward = types.MethodType(hooked(i), layer.self_attn)
    m.hidden(torch.tensor([ids]))
    nh, nkv, hd, bs = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], a.block
    g = nh // nkv
    steps = list(range(p0, len(ids) - 1))
    names = ["bound", "exact", "codes2", "codes1", "mean", "blend", "bound8"]
    print(f"{a.model}: {len(ids)} tokens, {len(steps)} answer steps, k = {a.k}, blocks of {bs}, window {a.window}")
    print("layer head  held  " + " ".join(f"{n:>7}" for n in names))
    for l in range(cfg["num_hidden_layers"]):
        q, k = cap[l]
        for h in range(nkv):
            tot = dict.fromkeys(names, 0.0)
            held = 0.0
            for p in steps:
                nb = (p + 1 + bs - 1) // bs
                ce = max(1, nb - a.window)
                kk = k[h, :ce * bs].view(ce, bs, hd)[1:]
                if kk.shape[0] == 0:
                    continue
                qq = q[h * g:(h + 1) * g, p]
                pr = torch.softmax((qq @ k[h, :p + 1].T) / math.sqrt(hd), -1)
                prb = torch.nn.functional.pad(pr, (0, nb * bs - (p + 1))).view(g, nb, bs).sum(-1)
                mass = prb.max(0).values
                fixed = mass[0] + mass[ce:].sum()
                mc = mass[1:ce]
                kmin, kmax = kk.min(1).values, kk.max(1).values
                span = (kmax - kmin).clamp(min=1e-12)

                def coded(levels):
                    c = torch.round((kk - kmin[:, None]) / span[:, None] * levels) / levels
                    return torch.einsum("gd,ntd->gnt", qq, c * span[:, None] + kmin[:, None]).amax(-1).amax(0)

                hk = kk.view(-1, 2, bs // 2, hd)
                sc = {
                    "bound": torch.maximum(qq[:, None] * kmin[None], qq[:, None] * kmax[None]).sum(-1).amax(0),
                    "exact": torch.einsum("gd,ntd->gnt", qq, kk).amax(-1).amax(0),
                    "codes2": coded(3),
                    "codes1": coded(1),
                    "mean": (qq @ kk.mean(1).T).amax(0),
                    "blend": (qq @ ((kmin + kmax) / 2).T + 0.5 * (qq.abs() @ ((kmax - kmin) / 2).T)).amax(0),
                    "bound8": torch.maximum(qq[:, None, None] * hk.amin(2)[None], qq[:, None, None] * hk.amax(2)[None])
                    .sum(-1).amax(-1).amax(0),
                }
                kk_ = min(a.k, mc.numel())
                best = fixed + torch.topk(mc, kk_).values.sum()
                held += float(best)
                for n in names:
                    tot[n] += float((fixed + mc[torch.topk(sc[n], kk_).indices].sum()) / best)
            ns = len(steps)
            print(f"{l:5d} {h:4d} {held / ns:5.3f}  " + " ".join(f"{tot[n] / ns:7.3f}" for n in names))


if __name__ == "__main__":
    main()
