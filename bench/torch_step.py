"""The peer for bench_step: one dense decode step of a Llama-shaped model in PyTorch
(bf16 weights, a static KV cache, scaled_dot_product_attention with GQA), timed with
CUDA events after warm-up, at the same batch and context points as bench_step.

  python3 bench/torch_step.py --config bench/configs/llama3-8b/config.json \
      --batch 1,16,64,128 --ctx 8192,32768 [--steps 20] [--json FILE]

Random weights (as --load-format dummy); points whose KV does not fit are reported."""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", default="1,16,64,128")
    ap.add_argument("--ctx", default="8192,32768")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    L, D, H, KV = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HD, F_, V = cfg.get("head_dim", D // H), cfg["intermediate_size"], cfg["vocab_size"]
    dev, dt = "cuda", torch.bfloat16
    torch.manual_seed(0)

    def w(*shape):
        return (torch.rand(*shape, device=dev, dtype=dt) - 0.5) * 0.1

    layers = [dict(wqkv=w((H + 2 * KV) * HD, D), wo=w(D, H * HD), wgu=w(2 * F_, D), wd=w(D, F_),
                   n1=torch.ones(D, device=dev, dtype=dt), n2=torch.ones(D, device=dev, dtype=dt)) for _ in range(L)]
    emb, lm = w(V, D), w(V, D)
    wbytes = sum(t.numel() * 2 for l in layers for t in l.values()) + emb.numel() * 2 + lm.numel() * 2
    points = []
    print("| batch | ctx | step ms | tok/s | roofline ms |")
    print("|---|---|---|---|---|")
    for ctx in [int(x) for x in a.ctx.split(",")]:
        for B in [int(x) for x in a.batch.split(",")]:
            try:
                kc = [torch.randn(B, KV, ctx + 1, HD, device=dev, dtype=dt) for _ in range(L)]
                vc = [torch.randn(B, KV, ctx + 1, HD, device=dev, dtype=dt) for _ in range(L)]
            except torch.OutOfMemoryError:
                print(f"| {B} | {ctx} | does not fit | | |")
                torch.cuda.empty_cache()
                continue
            tok = torch.randint(0, V, (B,), device=dev)
            pos = ctx
            cos = torch.randn(B, 1, 1, HD, device=dev, dtype=dt)
            sin = torch.randn(B, 1, 1, HD, device=dev, dtype=dt)

            def rope(x):
                x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
                return x * cos + torch.cat((-x2, x1), -1) * sin

            def step(tok):
                x = emb[tok]
                for li, l in enumerate(layers):
                    h = F.rms_norm(x, (D,), l["n1"], 1e-5)
                    qkv = h @ l["wqkv"].T
                    q, k, v = qkv.split([H * HD, KV * HD, KV * HD], -1)
                    q = rope(q.view(B, 1, H, HD).transpose(1, 2))
                    k = rope(k.view(B, 1, KV, HD).transpose(1, 2))
                    kc[li][:, :, pos: pos + 1] = k
                    vc[li][:, :, pos: pos + 1] = v.view(B, 1, KV, HD).transpose(1, 2)
                    o = F.scaled_dot_product_attention(q, kc[li], vc[li], enable_gqa=True)
                    x = x + o.transpose(1, 2).reshape(B, H * HD) @ l["wo"].T
                    h = F.rms_norm(x, (D,), l["n2"], 1e-5)
                    g, u = (h @ l["wgu"].T).chunk(2, -1)
                    x = x + (F.silu(g) * u) @ l["wd"].T
                return (F.rms_norm(x, (D,), None, 1e-5) @ lm.T).argmax(-1)

            with torch.no_grad():
                for _ in range(3):
                    tok = step(tok)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    tok = step(tok)
                torch.cuda.synchronize()
                dt_step = (time.perf_counter() - t0) / a.steps
            kvbytes = B * (ctx + 1) * L * KV * HD * 2 * 2
            roof = (wbytes + kvbytes) / 4.8e12
            print(f"| {B} | {ctx} | {dt_step * 1e3:.3f} | {B / dt_step:.0f} | {roof * 1e3:.3f} |", flush=True)
            points.append(dict(batch=B, ctx=ctx, step_ms=dt_step * 1e3, tokens_per_s=B / dt_step, roofline_ms=roof * 1e3))
            del kc, vc
            torch.cuda.empty_cache()
    if a.json:
        json.dump(dict(peer="pytorch " + torch.__version__, config=a.config, points=points), open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
