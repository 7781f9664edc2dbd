/* Private state of the engine, shared by engine.c (construction, sequences) and
 * forward.c (the forward pass and the sparse selection around it). */
#ifndef OKV_ENGINE_INTERNAL_H
#define OKV_ENGINE_INTERNAL_H

#include "kv/resid.h"
#include "oasiskv/engine.h"

struct layer_w {
    okv_bweight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm;
    okv_bweight *ffn_norm, *w_gate, *w_up, *w_down;
};

/* Per engine sequence (indexed by the KV cache's sequence id). */
struct eseq {
    bool decode;       /* its prefill has finished */
    bool sparse;       /* a selection for the coming step exists (cand_end valid) */
    int cand_end;      /* blocks [sink, cand_end) are reached through selection only */
    int pc_n;          /* prefix caching: leading blocks attached from the cache or registered in it */
    uint64_t pc_hash;  /* the hash of block pc_n - 1 (the seed before the first) */
    bool dense_phase;  /* dense while room (okv_engine_params.dense_while_room): every block stays on the
                          device and nothing is selected; no quota chunk yet */
    bool demoting;     /* being turned sparse (a demotion that makes room by demoting others) */
    bool prefilling_now;   /* its prefill chunk is in the step being planned: demoted last (its staging
                              was not planned by the scheduler) */
    bool rows_stale;   /* its last step had rows after the first that read a set predicted before them
                          (a verify step on a predicted selection): okv_engine_seq_defer_own */
};

/* Per batch-local sequence of the current step. */
struct bseq {
    int id;            /* engine sequence */
    int r0, r1;        /* its rows */
    int len0;          /* length before the step */
    int len;           /* length after the step */
    int nb;            /* blocks after the step */
    bool sel;          /* attention reads candidates through the selection */
    bool inline_sel;   /* ... chosen now with the step's own queries (oracle mode, or no prediction) */
    int cand_end;      /* window starts here when sel */
    bool predict;      /* choose the next step's blocks after each layer's attention */
    int pred_cand_end;
    bool ends_prefill;
};

struct okv_engine {
    struct okv_model_config cfg;
    okv_backend *be;
    okv_kv_cache *kv;
    okv_resid *resid;           /* sparse mode only */
    bool dev_resid;             /* the backend holds the residency maps (select_install); resid keeps chunks and k */
    /* overlapped decoding (okv_engine_forward_queue): steps queued and not collected, the
     * backend id slot of the last one queued (-1: none yet) and the logit rows per slot */
    int q_count, q_last_slot, q_rows[2], q_copy[2];   /* q_copy: logit rows each queued step copies to the host */
    unsigned q_collects;
    int32_t *sel_fill;          /* [max_batch * n_kv_heads][3] attention placeholders (dev_resid) */
    int sel_fill_cap;
    bool streaming;             /* bounded KV: sink + window, nothing selected */
    int max_ctx;
    int max_batch;
    size_t weight_bytes;
    struct okv_engine_params prm;
    int sel_k_sparse;           /* selected blocks per head in a sparse layer */
    int32_t *sel_k;             /* [n_layers] blocks selected per head (dense layers: every candidate) */
    int succ_blocks;            /* okv_engine_params.successor_blocks, resolved */
    uint64_t lists_version;     /* okv_attn_blocks.version: bumped whenever the block lists are rebuilt */
    float own_share;            /* lookahead: the real token's share of a merged selection (0.5; OKV_LOOKAHEAD_OWN) */
    bool rank_inline;           /* several rows' selections merged by rank: a step's own rows (inline) and */
    bool rank_predict;          /* drafted rows' predictions (okv_engine_params.merge, or OKV_LOOKAHEAD_MERGE) */
    float sticky;               /* okv_engine_params.sticky, or OKV_STICKY (0: off) */
    bool verify_inline;         /* okv_engine_params.verify_inline, or OKV_VERIFY_INLINE */
    bool la_prefetch;           /* layer-ahead: also predict a step ahead (OKV_LA_PREFETCH; sparse.c) */
    bool la_sticky;             /* layer-ahead: its selections sticky as predictions are (default; OKV_LA_STICKY=0: not) */
    bool la_mid;                /* layer-ahead: layer l+1's blocks chosen after layer l's attention, not at its start
                                   (okv_engine_params.ahead_after_attention, or OKV_LA_MID; forward.c) */
    bool la_early;              /* la_mid: layer l+1's blocks also chosen and fetched at layer l's start (OKV_LA_EARLY=1, an
                                   experiment; forward.c) */
    bool verify_defer;          /* okv_engine_params.verify_defer, or OKV_VERIFY_DEFER */
    int dense_upto;             /* contexts up to this many tokens run dense (the budget, or sink + window) */
    bool lend;                  /* dense while room: unclaimed quota chunks are lent as group slots (kv.h) */

    okv_bweight *tok_embd, *output_norm, *output;   /* output may alias tok_embd */
    struct layer_w *layers;
    float *inv_freq;            /* [head_dim/2] */

    /* activations, [max_batch][...] */
    okv_bmem *x, *h, *q, *k, *v, *att, *tmp, *gate, *up, *rows, *logits;
    /* the queries a layer's selection scores: q, or in layer-ahead mode qla[l & 1], the estimate
     * made from the previous layer's input (forward.c) */
    okv_bmem *sel_q, *qla[2];
    int64_t ahead_units[2];     /* layer-ahead: units selected for layer l (at l - 1's start), by l's parity */
    int logits_rows_cap;
    okv_bmem *copied;           /* [copied_cap][vocab] logit rows gathered for one read (forward_sample_rows) */
    int copied_cap;

    /* per-step host metadata */
    int32_t *tok_seq, *tok_pos, *tok_slot, *tok_host, *rows_idx;
    float *rope_cs;             /* [max_batch][head_dim/2][2] */
    struct bseq *bs;            /* [max_batch] */
    int32_t *bseq_len;          /* [max_batch] KV length after the step */
    int32_t *blk_start, *blk_unit, *blk_index;
    int blk_cap;
    uint64_t *sel_bits;         /* [max_ctx blocks / 64]: one head's selection, as a bitmap */
    int32_t *sel_tmp;           /* [max_ctx blocks]: the unit of each selected block meanwhile */

    /* sparse scratch */
    int32_t *sel_host, *sel_logical, *cand, *host_to_logical, *pred_rows;
    int32_t *f_block, *f_head, *f_unit, *f_src;
    int scr_cap, h2l_cap;
    int32_t *pc_ids, *pc_units;   /* prefix caching: the blocks found, the units an attach fetches */
    int pc_ids_cap, pc_units_cap;

    /* an asynchronous selection in flight (predict_after -> predict_complete) */
    void *pend_items;
    int pend_n, pend_layer, pend_out;

    struct eseq *seqs;
    int seqs_cap;
    uint32_t step_stamp;
    struct okv_engine_stats stats;
};

enum okv_status okv_engine_grow_i32(int32_t **p, int *cap, int need);

/* Contexts up to this many tokens keep every block on the device (sparse engines). */
static inline int okv_engine_seq_dense_upto(const okv_engine *e, const struct eseq *es)
{
    return es->dense_phase ? 0x7fffffff : e->dense_upto;
}
/* Dense while room: make free device blocks for need more, demoting dense-phase sequences to
 * sparse (largest first) while there are too few; OKV_ERR_NO_KV_SPACE is left to the caller's
 * reservation. */
enum okv_status okv_engine_make_room(okv_engine *e, int need);

/* The selection around the forward pass (sparse.c), in the order forward.c calls them. */
/* Staging units for the step's prefill chunks whose older blocks left the device;
 * returns the units used, or -1 when they do not fit. */
int okv_sparse_stage_plan(okv_engine *e, int n_seqs, int32_t *stage_base);
/* Fetch those blocks of one layer into its staging buffer (layer % 2). */
enum okv_status okv_sparse_stage_fetch(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer);
/* Before layer's attention: inline selections, recall, the wait for the layer's fetches. */
enum okv_status okv_sparse_before_attention(okv_engine *e, int n_seqs, int layer, bool any_fetch);
enum okv_status okv_sparse_select_inline(okv_engine *e, int n_seqs, int layer, int64_t *units);
/* The layer's attention block lists (e->blk_*; e->sel_fill with residency in the backend). */
enum okv_status okv_sparse_build_lists(okv_engine *e, int n_seqs, const int32_t *stage_base, int layer);
/* After the layer's attention: the next step's selection for it (may stay in flight until
 * okv_sparse_predict_complete, which the forward pass calls after the layer's MLP). */
enum okv_status okv_sparse_predict_after(okv_engine *e, const struct okv_batch *b, int n_seqs, int layer);
enum okv_status okv_sparse_predict_complete(okv_engine *e);
/* Forget seq's selections and mappings, on the host and, with device-side residency, on
 * the backend. */
void okv_engine_resid_clear(okv_engine *e, int seq);
void okv_engine_update_mem_stats(okv_engine *e);

#endif
