/* label: cuda */
/* Tensor parallelism on CUDA ranks against the plain CUDA backend:
 *  - TP=1 (the tensor-parallel backend over one GPU, NCCL communicator) equals the
 *    plain CUDA engine bit for bit, dense and sparse;
 *  - TP=2/3/4 with several ranks placed on one GPU (OKV_TP_DEVICES=0,0,..., host-staged
 *    communicator: NCCL wants one rank per GPU) run every sharded kernel path
 *    (sliced weights, per-rank KV tiers, selection, fetch, attention lists, vocabulary
 *    gather) and agree with TP=1 within bf16 tolerance: max relative logit
 *    difference 5e-2 and the same greedy token wherever the top-1 margin exceeds 10%
 *    of max |logit| (the bound test_cuda_engine uses for bf16 against fp32);
 *  - with two or more GPUs, the same over NCCL with one rank per GPU.
 * Dense, sparse with every block selected (all layers dense through the selection
 * path) checked; sparse with a small budget reported for TP > 1 (near-ties of the
 * selection can go either way once sums are reordered), checked for TP=1.
 * Skips (77) without a CUDA device. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/tp.h"
#include "synth_model.h"
#include "testutil.h"
#include "tp_compare.h"

#include <cuda_runtime_api.h>

static void models(int max_n, struct okv_rng *rng)
{
    /* all layers dense through the selection path: every block selected */
    const struct tp_case cases[] = {
        {"dense", {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32}, true},
        {"sparse, all selected", {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40, .dense_layers = 2},
         true},
        {"sparse budget 40", {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40}, false},
    };
    compare_synth("cuda", max_n, 5e-2, 0.1f, cases, 3, rng);
    const char *files[] = {"tests/data/models/llama_gqa.Q4_0.gguf", "tests/data/models/qwen2_bias_tied.F32.gguf",
                           "models/SmolLM2-135M-Instruct.Q4_1.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", tu_src_dir(), files[f]);
        struct okv_model *m = NULL;
        if (okv_model_load(path, &m) != OKV_OK) {
            CHECK(f == 2, "load %s: %s", path, okv_last_error());   /* SmolLM2 may be absent */
            continue;
        }
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(rng) % (uint64_t)(m->cfg.vocab_size < 20000 ? m->cfg.vocab_size : 20000));
        struct okv_engine_params dense = {.block_size = 16, .max_ctx = 256, .max_batch_tokens = 32};
        compare_on("cuda", max_n, 5e-2, 0.1f, true, m, &dense, files[f]);
        okv_model_free(m);
    }
}

int main(void)
{
    int n_gpu = 0;
    cudaError_t e = cudaGetDeviceCount(&n_gpu);
    if (e != cudaSuccess || n_gpu == 0) {
        printf("test_cuda_tp: skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    struct okv_rng rng;
    okv_rng_seed(&rng, 23);
    printf("-- NCCL, one rank per GPU (%d GPU%s)\n", n_gpu, n_gpu > 1 ? "s" : "");
    models(n_gpu < 4 ? n_gpu : 4, &rng);
    printf("-- several ranks on GPU 0, host-staged communicator\n");
    setenv("OKV_TP_DEVICES", "0,0,0,0", 1);
    setenv("OKV_TP_COMM", "local", 1);
    models(4, &rng);
    unsetenv("OKV_TP_DEVICES");
    unsetenv("OKV_TP_COMM");
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_cuda_tp");
}
