#!/bin/bash
# Planned in session 39 of 2026-12-05 (no GPU was lent that session; not run yet): the CUDA backend on the checkpoint
# formats and the structured output that session added on the CPU. (1) test_cuda_engine runs every reference of
# tests/data/models against transformers' logits on the GPU, which now includes llama.cpp's K presets
# (llama_kq.{Q2_K,Q3_K_M,Q4_K_M,Q5_K_M,Q6_K,Q5_1}.gguf) and the Hugging Face FP8, GPTQ (activation order), AWQ and
# compressed-tensors W4A16/W8A16 folders: their bf16 copies are made from the loader's float32 conversion, in
# chunks of whole blocks (cuda_backend.cu). (2) JSON mode through a CUDA server: the host-sampled row path with the
# token mask (SmolLM2, 6 requests, each answer must parse as a JSON object).
# (3), added in session 40: JSON mode under load (bench/structured_serve.sh).
#   bash bench/gpu_run178.sh     (carry build-gc; the checkpoints under train/ are not needed)
set -u
. bench/gpu_env.sh build-gc
for t in test_cuda_engine test_cuda_ops; do
  timeout 200 $B/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc $?: $(tail -n 1 $OUT/$t.txt)"
done
grep -hE "llama_kq|fp8|gptq|awq|w4a16|w8a16" $OUT/test_cuda_engine.txt | head -40
PORT=8431
$B/oasiskv serve -m models/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda --port $PORT > $OUT/serve.log 2>&1 &
SP=$!
for i in $(seq 60); do curl -s localhost:$PORT/health > /dev/null && break; sleep 1; done
python3 - "$PORT" <<'PY' | tee $OUT/json_mode.md
import json, sys, urllib.request
port = sys.argv[1]
ok = 0
asks = ["Give me a JSON object describing a cat with its name and age.", "List three fruits and their colours.",
        "What is the capital of France?"]
for i, ask in enumerate(asks):
    for temp in (0.0, 0.9):
        body = {"messages": [{"role": "user", "content": ask}], "max_tokens": 200, "temperature": temp, "seed": i,
                "response_format": {"type": "json_object"}}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        r = json.load(urllib.request.urlopen(req, timeout=120))
        txt = r["choices"][0]["message"]["content"]
        try:
            ok += isinstance(json.loads(txt), dict) and r["choices"][0]["finish_reason"] == "stop"
        except ValueError:
            print("not JSON:", repr(txt))
print(f"cuda json mode: {ok} of {2 * len(asks)} answers are complete JSON objects")
PY
kill $SP; wait $SP 2>/dev/null
# (3) JSON mode under load (session 40): 128 chat requests at c64, plain / JSON with the masks' thread pool /
# JSON with every mask walked on the engine thread (OKV_MASK_THREADS=1 then; OKV_HOST_THREADS=1 since)
OUT=$OUT/ss timeout 150 bash bench/structured_serve.sh $B "-m models/SmolLM2-135M-Instruct.Q4_1.gguf" 64 128 300 "--device cuda" | tee $OUT/structured.md
echo "done at $SECONDS s"
