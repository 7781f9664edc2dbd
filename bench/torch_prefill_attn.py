"""The peer for `cuda_attention --prefill`: one layer's prefill attention in PyTorch, a chunk of
ROWS query rows at the end of a CTX-token prompt (bottom-right causal mask), GQA, bf16, through
scaled_dot_product_attention with each backend PyTorch has here (flash, cuDNN, memory-efficient),
timed with CUDA events after warm-up. TFLOPS count the keys the causal mask lets each row read,
as cuda_attention does (4 * head_dim * query heads * sum over rows of the keys it reads).

  python3 bench/torch_prefill_attn.py --rows 512,2048 --ctx 8192,32768 --shape 32,8,128 [--iters 20]

Backends that refuse a shape (or are missing) are reported as such. Written in session 22, first run in
session 23 (bench/gpu_run145.sh; bench/RESULTS.md section 35). The flash and memory-efficient backends get K and V repeated to every
query head (their lower-right causal bias takes no GQA), which costs them memory traffic."""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="512,2048")
    ap.add_argument("--ctx", default="8192,32768")
    ap.add_argument("--shape", default="32,8,128", help="query heads, KV heads, head_dim")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    nh, nkv, hd = (int(x) for x in a.shape.split(","))
    torch.manual_seed(0)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; {nh} query heads, {nkv} KV heads, head_dim {hd}")
    print("ctx\trows\tbackend\tms\tTFLOPS")
    for ctx in (int(x) for x in a.ctx.split(",")):
        for rows in (int(x) for x in a.rows.split(",")):
            q = torch.randn(1, nh, rows, hd, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(1, nkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(1, nkv, ctx, hd, device="cuda", dtype=torch.bfloat16)
            # row i sits at position ctx - rows + i and reads keys 0 .. ctx - rows + i
            keys = rows * (ctx - rows) + rows * (rows + 1) // 2
            flops = 4.0 * hd * nh * keys
            for name, be in backends:
                try:
                    with sdpa_kernel([be]):
                        if be == SDPBackend.CUDNN_ATTENTION:   # no lower-right causal bias object: as a boolean mask
                            m = torch.ones(rows, ctx, dtype=torch.bool, device="cuda").tril(ctx - rows)
                            run = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
                        else:
                            bias = causal_lower_right(rows, ctx)
                            kk = k.repeat_interleave(nh // nkv, dim=1)
                            vv = v.repeat_interleave(nh // nkv, dim=1)
                            run = lambda: F.scaled_dot_product_attention(q, kk, vv, attn_mask=bias)
                        for _ in range(3):
                            run()
                        torch.cuda.synchronize()
                        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        t0.record()
                        for _ in range(a.iters):
                            run()
                        t1.record()
                        torch.cuda.synchronize()
                        ms = t0.elapsed_time(t1) / a.iters
                        print(f"{ctx}\t{rows}\t{name}\t{ms:.3f}\t{flops / ms / 1e9:.1f}")
                except Exception as e:   # a backend that refuses the shape
                    print(f"{ctx}\t{rows}\t{name}\t-\tnot run: {str(e).splitlines()[0][:100]}")


if __name__ == "__main__":
    main()
