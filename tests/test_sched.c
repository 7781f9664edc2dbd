/* label: unit */
/* The scheduler under memory pressure: the host tier is sized so that the running
 * requests cannot all finish; a forward then fails with OKV_ERR_NO_KV_SPACE and the
 * scheduler preempts (frees the youngest request and recomputes it later) instead
 * of failing. Every request must finish with the greedy tokens it gets alone, the
 * preemption counter must move, and every block must be free at the end. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/sched.h"
#include "synth_model.h"
#include "testutil.h"

#define NREQ 4
#define PROMPT 50
#define GEN 60

struct out {
    int32_t toks[GEN + 8];
    int n;
    bool done;
    enum okv_finish reason;
    int preempt;
};

static void on_token(void *user, int32_t token, const char *text, size_t len)
{
    struct out *o = user;
    if (token >= 0 && o->n < GEN + 8)
        o->toks[o->n++] = token;
}

static void on_finish(void *user, const struct okv_sched_result *r)
{
    struct out *o = user;
    o->done = true;
    o->reason = r->reason;
    o->preempt = r->n_preemptions;
}

static void run(okv_engine *e, int32_t prompts[NREQ][PROMPT], int first, int count, struct out *outs)
{
    struct okv_sched_params sp = {.max_num_seqs = NREQ, .max_num_batched_tokens = 64};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (!s)
        return;
    for (int i = first; i < first + count; i++) {
        struct okv_sched_request rq = {.prompt = prompts[i], .n_prompt = PROMPT, .max_tokens = GEN,
                                       .ignore_eos = true, .on_token = on_token, .on_finish = on_finish, .user = &outs[i]};
        uint64_t id;
        CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    }
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++)
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    CHECK(!busy, "the scheduler did not finish");
    okv_sched_free(s);
}

int main(void)
{
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    struct synth_model sm;
    synth_model_init(&sm, OKV_ARCH_LLAMA, 77);
    int32_t prompts[NREQ][PROMPT];
    struct okv_rng rng;
    okv_rng_seed(&rng, 3);
    for (int i = 0; i < NREQ; i++)
        for (int t = 0; t < PROMPT; t++)
            prompts[i][t] = (int32_t)(okv_rng_next(&rng) % 200);

    /* references: each request alone on a roomy engine */
    static struct out alone[NREQ], together[NREQ];
    struct okv_engine_params big = {.block_size = 4, .max_ctx = 256, .max_seqs = NREQ, .max_batch_tokens = 64,
                                    .kv_budget = 256};
    okv_engine *e = NULL;
    CHECK(okv_engine_create(&sm.m, be, &big, &e) == OKV_OK, "%s", okv_last_error());
    for (int i = 0; i < NREQ; i++)
        run(e, prompts, i, 1, alone);
    okv_engine_free(e);

    /* the same four at once, with a host tier of 60 blocks: each request needs 28 */
    struct okv_engine_params tight = big;
    tight.host_blocks = 60;
    CHECK(okv_engine_create(&sm.m, be, &tight, &e) == OKV_OK, "%s", okv_last_error());
    run(e, prompts, 0, NREQ, together);
    int preempted = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(alone[i].done && alone[i].n == GEN, "request %d alone: %d tokens", i, alone[i].n);
        CHECK(together[i].done && together[i].reason == OKV_FINISH_LENGTH, "request %d: finished %d with %d tokens", i,
              together[i].reason, together[i].n);
        CHECK(together[i].n == GEN && !memcmp(alone[i].toks, together[i].toks, sizeof(int32_t) * GEN),
              "request %d: tokens differ from its run alone", i);
        preempted += together[i].preempt;
    }
    CHECK(preempted > 0, "the pool never ran out: no preemption happened");
    printf("  %d preemptions; all %d requests equal their runs alone\n", preempted, NREQ);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0 && okv_kv_used_host_blocks(okv_engine_kv(e)) == 0, "blocks leaked");
    okv_engine_free(e);
    synth_model_free(&sm);
    okv_backend_free(be);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_sched");
}
