#!/usr/bin/env python3
"""Make the quantized Hugging Face reference checkpoints under tests/data/models: tiny random
models saved the way FP8 and packed-integer checkpoints on the hub are (quantized matrices with
their scales beside them, BF16 for the rest, a "quantization_config" in config.json), with
greedy tokens and logits from transformers running the dequantized weights (for FP8, torch's
float8_e4m3fn -> float32 conversion times the scale; for integers, (q - zero) times the scale,
the formats' definition), cross-checked against the libraries' own loaders (transformers'
FineGrainedFP8 dequantization, compressed-tensors' decompression).

  llama_fp8_block     quant_method "fp8" (transformers' FineGrainedFP8: Qwen3-*-FP8, DeepSeek):
                      128 x 128 blocks, "<name>_scale_inv" F32 of shape [out/128, in/128]
                      (FFN 384; transformers' own FP8 dequantization, which the script also
                      runs as a cross-check, needs whole blocks; partial ones: test_model).
  qwen2_fp8_channel   quant_method "compressed-tensors", format "float-quantized" (llm-compressor's
                      FP8 / FP8-dynamic: RedHatAI's checkpoints): per output channel,
                      "<name>_scale" BF16 of shape [out, 1]; lm_head left unquantized
                      ("ignore"), q/k/v biases. Weights only ("input_activations": null), so
                      that compressed-tensors' own forward, the cross-check, does not quantize
                      activations: the engine computes them in bf16 / fp32 in every FP8 scheme
                      (FP8_DYNAMIC and static input scales included; vLLM's FP8 GEMMs quantize
                      them, so its logits differ from the engine's by that rounding).
  llama_w4a16_group   compressed-tensors "pack-quantized" (llm-compressor's W4A16, as RedHatAI's
                      *-quantized.w4a16 checkpoints): 4-bit symmetric integers in groups of 128,
                      packed 8 to an int32 word along each row ("weight_packed"), BF16
                      "weight_scale" [out, in/128], "weight_shape".
  qwen3_w8a16_asym    the same format with 8-bit asymmetric integers in groups of 64: the
                      "weight_zero_point" I32 packed down the rows ([out/4, in/64]).

    python tests/py/make_quantized_hf_models.py   (same packages as make_reference_models.py, plus
                                                  compressed-tensors, optimum and gptqmodel (built
                                                  without CUDA) for the cross-checks)"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference_models as mrm  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,  # noqa: E402
                          Qwen3Config, Qwen3ForCausalLM)

F8 = torch.float8_e4m3fn
F8_MAX = 448.0
MATS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

SPECS = [
    dict(name="llama_fp8_block", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=8000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="block",
         cfg=dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=384, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)),
    dict(name="qwen2_fp8_channel", cls=Qwen2ForCausalLM, cfg_cls=Qwen2Config, seed=9000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="channel",
         cfg=dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  intermediate_size=192, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False,
                  tie_word_embeddings=False)),
    dict(name="llama_w4a16_group", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=10000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="int", bits=4, group=128, symmetric=True,
         cfg=dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=384, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)),
    dict(name="qwen3_w8a16_asym", cls=Qwen3ForCausalLM, cfg_cls=Qwen3Config, seed=11000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="int", bits=8, group=64, symmetric=False,
         cfg=dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  intermediate_size=192, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False,
                  attention_bias=False, tie_word_embeddings=False)),
    dict(name="llama_gptq_actorder", cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=12000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="gptq", bits=4, group=64, desc_act=True,
         cfg=dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=384, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)),
    dict(name="qwen2_awq", cls=Qwen2ForCausalLM, cfg_cls=Qwen2Config, seed=13000, prompt_len=40,
         config_form="rope_parameters", lm_std=1.5, scheme="awq", bits=4, group=64,
         cfg=dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  intermediate_size=192, vocab_size=mrm.VOCAB, max_position_embeddings=256, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False,
                  tie_word_embeddings=False)),
]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]   # nibble k of an AWQ word holds output 8w + AWQ_ORDER[k]


def quantize_gptq_awq(w, spec, rng):
    """GPTQ (v1: zero points stored minus one) or AWQ (GEMM) tensors of an [out, in] float32
    matrix, asymmetric 4-bit in groups, and its dequantization (q - zero) * scale (fp16 scale)."""
    out_f, in_f = w.shape
    group = spec["group"]
    G = in_f // group
    if spec.get("desc_act"):   # activation order: input i belongs to the group of its rank in a permutation
        perm = rng.permutation(in_f)
        g_idx = np.empty(in_f, dtype=np.int32)
        g_idx[perm] = np.arange(in_f) // group
    else:
        g_idx = (np.arange(in_f) // group).astype(np.int32)
    gi = torch.from_numpy(g_idx).long()
    scale = torch.zeros(G, out_f)
    zero = torch.zeros(G, out_f, dtype=torch.int32)
    for g in range(G):
        cols = w[:, gi == g]
        lo, hi = cols.amin(1).clamp(max=0), cols.amax(1).clamp(min=0)
        sc = ((hi - lo) / 15).clamp(min=1e-8).half().float()
        scale[g] = sc
        zero[g] = torch.round(-lo / sc).clamp(0, 15).int()
    s_i = scale[gi].T   # [out, in]
    z_i = zero[gi].T
    q = (torch.round(w / s_i) + z_i).clamp(0, 15).int()
    deq = (q - z_i).float() * s_i
    qn = q.numpy().astype(np.uint32)          # [out, in]
    zn = zero.numpy().astype(np.uint32)       # [G, out]
    t = {"scales": scale.half()}
    if spec["scheme"] == "gptq":
        qw = np.zeros((in_f // 8, out_f), dtype=np.uint32)
        for k in range(8):                     # 8 inputs of one output a word
            qw |= qn.T[k::8, :] << np.uint32(4 * k)
        zs = (zn - 1) & 15                     # v1: stored minus one
        qz = np.zeros((G, out_f // 8), dtype=np.uint32)
        for k in range(8):
            qz |= zs[:, k::8] << np.uint32(4 * k)
        t["g_idx"] = torch.from_numpy(g_idx)
    else:
        qw = np.zeros((in_f, out_f // 8), dtype=np.uint32)
        qz = np.zeros((G, out_f // 8), dtype=np.uint32)
        for k in range(8):                     # 8 outputs of one input a word, in AWQ's order
            qw |= qn.T[:, AWQ_ORDER[k]::8] << np.uint32(4 * k)
            qz |= zn[:, AWQ_ORDER[k]::8] << np.uint32(4 * k)
    t["qweight"] = torch.from_numpy(qw.view(np.int32))
    t["qzeros"] = torch.from_numpy(qz.view(np.int32))
    return t, deq


def pack_rows(u, bits):
    """uint values [R, C] (< 2^bits) packed along each row into little-endian int32 words:
    element c at bit c * bits of the row's words."""
    R, C = u.shape
    per = 32 // bits
    words = -(-C // per)
    out = np.zeros((R, words), dtype=np.uint32)
    for c in range(C):
        out[:, c // per] |= (u[:, c].astype(np.uint32) & ((1 << bits) - 1)) << np.uint32((c % per) * bits)
    return torch.from_numpy(out.view(np.int32))


def quantize_int(w, bits, group, symmetric):
    """compressed-tensors pack-quantized tensors of an [out, in] float32 matrix, and its
    dequantization (q - zero) * scale (the scale rounded to bf16 first, as stored)."""
    out_f, in_f = w.shape
    G = in_f // group
    wg = w.reshape(out_f, G, group)
    off = 1 << (bits - 1)
    if symmetric:
        scale = (wg.abs().amax(dim=2) / (off - 1)).clamp(min=1e-8).to(torch.bfloat16)
        zp = torch.zeros(out_f, G, dtype=torch.int32)
    else:
        lo, hi = wg.amin(dim=2).clamp(max=0), wg.amax(dim=2).clamp(min=0)
        scale = ((hi - lo) / ((1 << bits) - 1)).clamp(min=1e-8).to(torch.bfloat16)
        zp = (torch.round(-lo / scale.float()) - off).clamp(-off, off - 1).to(torch.int32)
    sf = scale.float()
    q = torch.round(wg / sf[:, :, None]) + zp[:, :, None]
    q = q.clamp(-off, off - 1).to(torch.int32)
    deq = ((q - zp[:, :, None]).float() * sf[:, :, None]).reshape(out_f, in_f)
    t = {"weight_packed": pack_rows((q.reshape(out_f, in_f) + off).numpy(), bits),
         "weight_scale": scale,
         "weight_shape": torch.tensor([out_f, in_f], dtype=torch.int64)}
    if not symmetric:
        t["weight_zero_point"] = pack_rows((zp + off).numpy().T, bits).T.contiguous()   # packed down the rows
    return t, deq


def quantize(w, scheme):
    """(fp8 tensor, scale tensor, dequantized float32 tensor) of an [out, in] float32 matrix."""
    out_f, in_f = w.shape
    if scheme == "block":
        B = 128
        gr, gc = -(-out_f // B), -(-in_f // B)
        scale = torch.zeros(gr, gc, dtype=torch.float32)
        for i in range(gr):
            for j in range(gc):
                blk = w[i * B:(i + 1) * B, j * B:(j + 1) * B]
                scale[i, j] = blk.abs().max().clamp(min=1e-12) / F8_MAX
        full = scale.repeat_interleave(B, 0)[:out_f].repeat_interleave(B, 1)[:, :in_f]
    else:
        scale = (w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / F8_MAX).to(torch.bfloat16)
        full = scale.to(torch.float32).expand(out_f, in_f)
    q = (w / full).clamp(-F8_MAX, F8_MAX).to(F8)
    deq = q.to(torch.float32) * full
    return q, scale, deq


def build(spec, seed):
    model = mrm.build_model(spec, seed)
    rng = np.random.default_rng(seed)
    sd = {}
    deq_sd = {}
    for k, v in model.state_dict().items():
        v = v.detach().clone()
        if k.endswith(".weight") and k.split(".")[-2] in MATS and spec["scheme"] in ("gptq", "awq"):
            t, deq = quantize_gptq_awq(v, spec, rng)
            for suffix, x in t.items():
                sd[k[:-len("weight")] + suffix] = x
            deq_sd[k] = deq
        elif k.endswith(".weight") and k.split(".")[-2] in MATS and spec["scheme"] == "int":
            t, deq = quantize_int(v, spec["bits"], spec["group"], spec["symmetric"])
            for suffix, x in t.items():
                sd[k + suffix[len("weight"):]] = x
            deq_sd[k] = deq
        elif k.endswith(".weight") and k.split(".")[-2] in MATS:
            q, scale, deq = quantize(v, spec["scheme"])
            sd[k] = q
            sd[k + ("_scale_inv" if spec["scheme"] == "block" else "_scale")] = scale
            deq_sd[k] = deq
        else:   # embeddings, norms, biases, lm_head: BF16, as FP8 checkpoints keep them
            b = v.to(torch.bfloat16)
            sd[k] = b
            deq_sd[k] = b.to(torch.float32)
    ref = mrm.build_model(spec)
    ref.load_state_dict(deq_sd)
    ref.eval()
    return model, sd, ref


def deq_of(ref):
    """the reference model's quantized matrices (their dequantized values)"""
    return {k: v for k, v in ref.state_dict().items() if k.endswith(".weight") and k.split(".")[-2] in MATS}


def quant_config(scheme, spec=None):
    if scheme == "gptq":
        return {"quant_method": "gptq", "bits": spec["bits"], "group_size": spec["group"], "desc_act": spec["desc_act"],
                "sym": False, "checkpoint_format": "gptq", "true_sequential": True, "damp_percent": 0.01}
    if scheme == "awq":
        return {"quant_method": "awq", "bits": spec["bits"], "group_size": spec["group"], "zero_point": True,
                "version": "gemm", "modules_to_not_convert": None}
    if scheme == "int":
        return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                    "num_bits": spec["bits"], "type": "int", "symmetric": spec["symmetric"], "strategy": "group",
                    "group_size": spec["group"], "dynamic": False, "actorder": None},
                    "input_activations": None, "output_activations": None}},
                "ignore": ["lm_head"]}
    if scheme == "block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False},
                "input_activations": None}},
            "ignore": ["lm_head"]}


def gptqmodel_check(d, ref, prompt, toks):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float16, device_map="cpu")
    mine = deq_of(ref)
    rel = 0.0
    n = 0
    for name, mod in m.named_modules():
        if hasattr(mod, "dequantize_weight") and hasattr(mod, "qweight"):
            w = mod.dequantize_weight().float().T   # [in, out] there
            v = mine[name + ".weight"]
            rel = max(rel, float((w - v).abs().max()) / float(v.abs().max()))
            n += 1
    assert n == len(mine), (n, len(mine))
    lg = mrm.teacher_forced(m, prompt, toks)
    return rel, [int(x) for x in lg.argmax(1)], float(np.abs(lg - mrm.teacher_forced(ref, prompt, toks)).max())


def library_logits(d, spec, prompt, toks):
    """transformers' own loading of the folder (FineGrainedFP8 with dequantize=True for "fp8";
    compressed-tensors' decompression when that package is installed): teacher-forced logits,
    or None where it cannot load it on the CPU."""
    from transformers import AutoModelForCausalLM
    kw = {}
    if spec["scheme"] == "block":
        from transformers import FineGrainedFP8Config
        kw["quantization_config"] = FineGrainedFP8Config(dequantize=True, weight_block_size=(128, 128))
    try:
        m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", **kw).eval()
    except Exception as e:  # noqa: BLE001
        mrm.log("[%s] transformers' own loader: not on this CPU (%s)" % (spec["name"], str(e).splitlines()[0][:120]))
        return None
    return mrm.teacher_forced(m, prompt, toks)


def main():
    for spec in SPECS:
        prompt = mrm.make_prompt(spec["seed"], spec["prompt_len"])
        chosen = None
        for t in range(mrm.MAX_SEED_TRIES):
            seed = spec["seed"] + t
            model, sd, ref = build(spec, seed)
            toks, logits = mrm.greedy(ref, prompt, mrm.N_STEPS)
            if min(mrm.top1_margin(r) for r in logits) >= mrm.MARGIN_MIN and len(set(toks)) >= mrm.MIN_DISTINCT:
                chosen = seed
                break
        if chosen is None:
            raise RuntimeError("no acceptable seed for " + spec["name"])
        d = os.path.join(mrm.OUT, spec["name"])
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with tempfile.TemporaryDirectory() as td:   # config.json as save_pretrained writes it
            model.config.save_pretrained(td)
            with open(os.path.join(td, "config.json")) as f:
                cfg = json.load(f)
        cfg["quantization_config"] = quant_config(spec["scheme"], spec)
        cfg["torch_dtype"] = "bfloat16"
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        # read back: the saved bytes are the same
        from safetensors.torch import load_file
        back = load_file(os.path.join(d, "model.safetensors"))
        assert all(torch.equal(back[k].view(torch.uint8) if back[k].dtype == F8 else back[k],
                               sd[k].view(torch.uint8) if sd[k].dtype == F8 else sd[k]) for k in sd)
        f32toks, _ = mrm.greedy(mrm.build_model(spec, chosen), prompt, mrm.N_STEPS)
        fp8 = spec["scheme"] in ("block", "channel")
        extra = {"method": "transformers_dequantized_fp8" if fp8 else "transformers_dequantized_int",
                 "model_dir": spec["name"], "weight_seed": chosen, "prompt_seed": spec["seed"],
                 ("fp8_scheme" if fp8 else "int_scheme"):
                     spec["scheme"] if fp8 else
                     "%s %d-bit %s, groups of %d%s" % (spec["scheme"], spec["bits"],
                                                      "symmetric" if spec.get("symmetric") else "asymmetric",
                                                      spec["group"], ", activation order" if spec.get("desc_act") else ""),
                 "quantization_config": cfg["quantization_config"],
                 "n_greedy_equal_to_unquantized_f32": next((i for i, (a, b) in enumerate(zip(f32toks, toks)) if a != b),
                                                           mrm.N_STEPS)}
        if fp8:
            # sensitivity: the fp8 bytes without their scales decode to a different model
            noscale = {k: v.to(torch.float32) for k, v in sd.items()
                       if not (k.endswith("_scale") or k.endswith("_scale_inv") or k.endswith("input_scale"))}
            m2 = mrm.build_model(spec)
            m2.load_state_dict(noscale)
            ntoks, _ = mrm.greedy(m2, prompt, mrm.N_STEPS)
            extra["without_scales_diverges_at_step"] = next((i for i, (a, b) in enumerate(zip(ntoks, toks)) if a != b),
                                                            None)
            assert extra["without_scales_diverges_at_step"] is not None
        if spec["scheme"] == "int":
            # the file's packed integers, zero points and scales as compressed-tensors' own decompressor
            # reads them, matrix by matrix, against the weights the reference model runs
            from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
            from compressed_tensors.quantization import QuantizationScheme
            scheme = QuantizationScheme(targets=["Linear"],
                                        weights=cfg["quantization_config"]["config_groups"]["group_0"]["weights"])
            worst = 0.0
            for k, v in deq_of(ref).items():
                base = k[:-len("weight")]
                local = {n[len(base):]: back[n] for n in back if n.startswith(base) and n[len(base):].startswith("weight_")}
                local["weight_scale"] = local["weight_scale"].float()   # in float32, as a float32 model holds it
                w = PackedQuantizationCompressor.decompress(local, scheme)["weight"].float()
                worst = max(worst, float((w - v).abs().max()))
            extra["compressed_tensors_decompress_max_abs_diff"] = worst
            assert worst == 0.0, worst
        if spec["scheme"] in ("gptq", "awq"):
            # GPTQModel (what transformers loads GPTQ and AWQ checkpoints with) on the CPU: each matrix as its
            # module dequantizes it (in fp16: within fp16 rounding of ours), and its fp16 forward's greedy tokens
            rel, lib_toks, lib_diff = gptqmodel_check(d, ref, prompt, toks)
            extra["gptqmodel_dequantize_max_rel_diff"] = rel
            extra["gptqmodel_fp16_logits_max_abs_diff"] = lib_diff
            extra["gptqmodel_fp16_greedy_equal"] = lib_toks == toks
            assert rel < 2e-3, rel
        # cross-check with the library's own reading of the format, where it has one on the CPU
        lib = library_logits(d, spec, prompt, toks) if spec["scheme"] not in ("gptq", "awq") else None
        if lib is not None:
            extra["transformers_own_loader_max_abs_diff"] = float(np.abs(lib - logits).max())
            assert extra["transformers_own_loader_max_abs_diff"] < 1e-4, extra
        mm = mrm.write_reference(os.path.join(d, "reference.json"), os.path.join(d, "logits.f32"), prompt, toks, logits,
                                 extra)
        mrm.log("[%s] seed %d, min margin %.4f, %d tensors, without scales diverges at step %s, "
                "equals the unquantized model for %d steps, the library's own loader differs by %s, its decompressor by %s, "
                "gptqmodel's dequantization by %s (relative), its fp16 logits by %s, greedy equal %s"
                % (spec["name"], chosen, mm, len(sd), extra.get("without_scales_diverges_at_step"),
                   extra["n_greedy_equal_to_unquantized_f32"], extra.get("transformers_own_loader_max_abs_diff"),
                   extra.get("compressed_tensors_decompress_max_abs_diff"), extra.get("gptqmodel_dequantize_max_rel_diff"),
                   extra.get("gptqmodel_fp16_logits_max_abs_diff"), extra.get("gptqmodel_fp16_greedy_equal")))


if __name__ == "__main__":
    main()
