/* label: unit */
/* Tensor parallelism's sharding math on the CPU: the shards of a model run in one
 * process (N CPU rank backends under the tensor-parallel backend, partial sums
 * combined by the host-staged communicator) and must give the logits of the
 * unsharded engine:
 *  - TP=1 through the wrapper equals the plain backend bit for bit;
 *  - TP=2 (KV heads split) and TP=4 (KV heads replicated: 2 KV heads, 4 ranks)
 *    agree within float rounding (the all-reduce sums in another order) for Llama
 *    (interleaved RoPE, tied head split by vocabulary), Qwen2 (q/k/v biases) and
 *    Qwen3 (q/k norm), and for a Q4_0 GGUF checkpoint (quantized rows sliced in
 *    place, columns converted) and for SmolLM2 at TP=3 (9 heads, 3 KV heads);
 *  - sparse attention with a real budget selects and fetches the same blocks (each
 *    rank selects for its own KV heads from its own host tier) and gives the same
 *    logits;
 *  - the same with every rank driven by the calling thread (OKV_TP_THREADS=0) as with
 *    one worker thread per rank (the default; the all-reduce then meets at a barrier),
 *    whether the workers sleep as soon as their queue is empty or poll it first;
 *  - a model that cannot be split is a clear error; nothing leaks. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/tp.h"
#include "synth_model.h"
#include "testutil.h"
#include "tp_compare.h"

static void compare(const struct okv_model *m, const struct okv_engine_params *ep, const char *what)
{
    compare_on("cpu", 4, 1e-5, 1e-4f, true, m, ep, what);
}

int main(void)
{
    struct okv_rng rng;
    okv_rng_seed(&rng, 11);
    /* 38 blocks of context, budget 10 blocks: 1 sink + 4 window + 5 selected */
    const struct tp_case cases[] = {
        {"dense", {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32}, true},
        {"sparse budget 40",
         {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40, .predict = OKV_PREDICT_CURRENT}, true},
        {"sparse budget 40 cache x2",
         {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40, .predict = OKV_PREDICT_CURRENT,
          .cache_factor = 2.0f},
         true},
    };
    compare_synth("cpu", 4, 1e-5, 1e-4f, cases, 3, &rng);

    /* the ranks driven by the calling thread instead of one worker each */
    {
        setenv("OKV_TP_THREADS", "0", 1);
        struct synth_model sm;
        synth_model_init(&sm, OKV_ARCH_QWEN2, 100 + 1);
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)sm.m.cfg.vocab_size);
        struct okv_engine_params sparse = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_CURRENT};
        compare(&sm.m, &sparse, "qwen2 sparse, ranks on one thread");
        synth_model_free(&sm);
        unsetenv("OKV_TP_THREADS");
    }

    /* the whole prompt in one forward pass, lookahead prediction (what generate does) */
    {
        prefill_chunk = PROMPT;
        struct synth_model sm;
        synth_model_init(&sm, OKV_ARCH_LLAMA, 100);
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)sm.m.cfg.vocab_size);
        struct okv_engine_params sparse = {.block_size = 4, .max_ctx = 256, .max_batch_tokens = 512, .kv_budget = 32, .host_blocks = 45,
                                           .predict = OKV_PREDICT_LOOKAHEAD};
        compare(&sm.m, &sparse, "llama sparse, one prefill pass");
        setenv("OKV_TP_SPIN_US", "30", 1);   /* workers poll their queues before sleeping */
        compare(&sm.m, &sparse, "llama sparse, one pass, polling");
        unsetenv("OKV_TP_SPIN_US");
        setenv("OKV_TP_THREADS", "0", 1);
        compare(&sm.m, &sparse, "llama sparse, one pass, one thread");
        unsetenv("OKV_TP_THREADS");
        synth_model_free(&sm);
        prefill_chunk = 16;
    }

    /* a quantized checkpoint */
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/models/llama_gqa.Q4_0.gguf", tu_src_dir());
    struct okv_model *m = NULL;
    if (okv_model_load(path, &m) == OKV_OK) {
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)m->cfg.vocab_size);
        struct okv_engine_params dense = {.block_size = 16, .max_ctx = 256, .max_batch_tokens = 32};
        compare(m, &dense, "llama_gqa Q4_0 dense");
        okv_model_free(m);
    } else {
        CHECK(0, "load %s: %s", path, okv_last_error());
    }

    /* the other stored formats: llama.cpp's K formats, Hugging Face FP8, GPTQ (activation order), AWQ and
     * compressed-tensors' packed integers, whose shards are cut from their converted rows and columns */
    {
        static const char *const quantized[] = {"llama_kq.Q4_K_M.gguf", "llama_kq.Q2_K.gguf", "llama_fp8_block",
                                                "llama_gptq_actorder", "qwen2_awq", "llama_w4a16_group"};
        for (size_t k = 0; k < sizeof quantized / sizeof quantized[0]; k++) {
            snprintf(path, sizeof path, "%s/tests/data/models/%s", tu_src_dir(), quantized[k]);
            if (okv_model_load(path, &m) != OKV_OK) {
                CHECK(0, "load %s: %s", path, okv_last_error());
                continue;
            }
            for (int i = 0; i < PROMPT; i++)
                prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)m->cfg.vocab_size);
            struct okv_engine_params dense = {.block_size = 16, .max_ctx = 256, .max_batch_tokens = 32};
            char what[128];
            snprintf(what, sizeof what, "%s dense", quantized[k]);
            compare(m, &dense, what);
            okv_model_free(m);
        }
    }

    /* SmolLM2 (9 heads, 3 KV heads: TP=3), when the default model is there */
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", tu_src_dir());
    if (TU_TSAN) {   /* ~230 s under ThreadSanitizer: the ranks' threads are those the synthetic models ran above */
        printf("SKIP SmolLM2 part under ThreadSanitizer (the plain build's run checks it)\n");
    } else if (okv_model_load(path, &m) == OKV_OK) {
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(1000 + okv_rng_next(&rng) % 20000);
        struct okv_engine_params dense = {.block_size = 16, .max_ctx = 512, .max_batch_tokens = 32};
        compare(m, &dense, "SmolLM2-135M Q4_1 dense");
        okv_model_free(m);
    } else {
        printf("SKIP SmolLM2 part: %s\n", okv_last_error());
    }

    /* models that cannot be split */
    {
        struct synth_model sm;
        synth_model_init(&sm, OKV_ARCH_LLAMA, 5);
        okv_backend *tp = NULL;
        struct okv_backend_params bp = {.n_threads = 1};
        CHECK(okv_backend_create_tp("cpu", &bp, 3, &sm.m.cfg, &tp) == OKV_ERR_UNSUPPORTED && strstr(okv_last_error(), "heads"),
              "TP=3 of 4 heads: %s", okv_last_error());
        CHECK(okv_backend_create_tp("cpu", &bp, 0, &sm.m.cfg, &tp) == OKV_ERR_INVALID_ARG, "TP=0: %s", okv_last_error());
        CHECK(okv_backend_create_tp("cuda-nope", &bp, 2, &sm.m.cfg, &tp) != OKV_OK, "unknown device accepted");
        synth_model_free(&sm);
    }
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_tp");
}
