/* Residency of selected blocks in the device tier's sparse region.
 *
 * Each sparse sequence owns a quota of units in every layer (quota[l] units,
 * starting at base_unit + chunk*quota[l], where chunk is the sequence's share).
 * For each (sequence, layer) the module tracks which (logical block, KV head) each
 * unit holds, a map back from (block, head) to unit, the last step each unit was
 * selected (LRU), and the current selection. Each KV head owns the units of the
 * quota whose index is congruent to it modulo n_kv_heads (a tensor-parallel
 * backend keeps a head's units on the rank holding the head). Applying a new
 * selection keeps the units that are still wanted and hands each head's least
 * recently used others to its blocks that must be fetched.
 *
 * Driven by the engine's thread only. */
#ifndef OKV_KV_RESID_H
#define OKV_KV_RESID_H

#include "oasiskv/common.h"

typedef struct okv_resid okv_resid;

struct okv_resid_params {
    int n_layers;
    int n_kv_heads;
    int max_seqs;            /* quota chunks */
    int base_unit;           /* first unit of the sparse region (n_group_slots * n_kv_heads) */
    const int32_t *quota;    /* [n_layers] units per sequence per layer (multiple of n_kv_heads) */
};

enum okv_status okv_resid_create(const struct okv_resid_params *p, okv_resid **out);
void okv_resid_free(okv_resid *r);   /* NULL is fine */

/* Give engine sequence seq a quota chunk; OKV_ERR_NO_KV_SPACE when none is free. */
enum okv_status okv_resid_attach(okv_resid *r, int seq);
/* The same with a given free chunk (chunk < 0: any). */
enum okv_status okv_resid_attach_chunk(okv_resid *r, int seq, int chunk);
bool okv_resid_chunk_free(const okv_resid *r, int chunk);
void okv_resid_detach(okv_resid *r, int seq);   /* unknown ids are ignored */
bool okv_resid_attached(const okv_resid *r, int seq);
int okv_resid_free_chunks(const okv_resid *r);
/* Selection capacity per head in a layer (quota / n_kv_heads). */
int okv_resid_k(const okv_resid *r, int layer);

/* Install a new selection for (seq, layer): sel[h*k + i] logical blocks for each
 * head (k per head, -1 entries ignored). Units already holding a selected block are
 * kept; the others go, least recently used first, to the selected blocks not yet
 * resident, which are returned as (fetch_block[i], fetch_head[i]) -> fetch_unit[i]
 * (arrays of at least n_kv_heads*k). Returns the number to fetch. */
int okv_resid_apply(okv_resid *r, int seq, int layer, const int32_t *sel, int k, uint32_t stamp,
                    int32_t *fetch_block, int32_t *fetch_head, int32_t *fetch_unit);

/* Whether (seq, layer, head) has a unit holding block (resident, selected or cached). */
bool okv_resid_holds(const okv_resid *r, int seq, int layer, int head, int block);

/* The sticky cut (kv/select_rules.h: okv_sel_sticky) of one head's K blocks ids (best
 * first) down to k in out, with the blocks (seq, layer, head) holds as held; held:
 * scratch of K entries. */
void okv_resid_sticky_cut(const okv_resid *r, int seq, int layer, int head, const int32_t *ids, int K, int k,
                          uint8_t *held, int32_t *out);

/* The current selection of (seq, layer): [n_kv_heads][*k] blocks. */
const int32_t *okv_resid_selection(const okv_resid *r, int seq, int layer, int *k);
/* The unit holding each entry of that selection ([n_kv][k], -1 for an entry of -1). */
const int32_t *okv_resid_selection_units(const okv_resid *r, int seq, int layer);
/* The quota chunk of an attached sequence (-1 otherwise). */
int okv_resid_chunk(const okv_resid *r, int seq);
/* Device-side residency (the backend holds the maps): record that (seq, layer) now
 * has k blocks per head selected, so that okv_resid_selection reports k. */
void okv_resid_set_k(okv_resid *r, int seq, int layer, int k);
/* Forget every selection and mapping of seq (blocks truncated or sequence reset). */
void okv_resid_clear(okv_resid *r, int seq);

#endif
