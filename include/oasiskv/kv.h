/* The paged, tiered KV cache: group slots of the device tier (one slot holds a
 * block of every layer and KV head), host-tier blocks (the full KV of every
 * sequence when the host tier exists) and a block table per sequence mapping
 * logical block i (positions i*block_size ...) to both. Storage lives in the
 * backend (okv_bkv); this module owns allocation, tables and lengths. The sparse
 * region's units are managed by the residency module (okv_resid).
 *
 * Not thread-safe: the engine's driving thread owns it. */
#ifndef OASISKV_KV_H
#define OASISKV_KV_H

#include "oasiskv/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_kv_cache okv_kv_cache;

/* Create a cache over backend storage of the given geometry. The caller owns *out. */
enum okv_status okv_kv_cache_create(okv_backend *be, const struct okv_kv_geometry *g, okv_kv_cache **out);
void okv_kv_cache_free(okv_kv_cache *c);   /* NULL is fine; frees the backend storage */

const struct okv_kv_geometry *okv_kv_geometry(const okv_kv_cache *c);
okv_bkv *okv_kv_storage(okv_kv_cache *c);
int okv_kv_free_slots(const okv_kv_cache *c);
int okv_kv_used_slots(const okv_kv_cache *c);

/* Sequences: small integer ids, reused after free. */
enum okv_status okv_kv_seq_create(okv_kv_cache *c, int *seq);
/* Release a sequence and all its blocks. Unknown ids are ignored. */
void okv_kv_seq_free(okv_kv_cache *c, int seq);
bool okv_kv_seq_valid(const okv_kv_cache *c, int seq);
int okv_kv_seq_len(const okv_kv_cache *c, int seq);
int okv_kv_n_seqs(const okv_kv_cache *c);
int okv_kv_free_host_blocks(const okv_kv_cache *c);
int okv_kv_used_host_blocks(const okv_kv_cache *c);

/* Make room for n more tokens after the current length (allocating a group slot
 * and, with a host tier, a host block for each new block); OKV_ERR_NO_KV_SPACE,
 * with nothing allocated, when a tier cannot hold them. */
enum okv_status okv_kv_seq_reserve(okv_kv_cache *c, int seq, int n);
/* The flat group-slot index (slot*block_size + offset) of position pos (reserved,
 * its block still holding a group slot). */
int32_t okv_kv_seq_slot(const okv_kv_cache *c, int seq, int pos);
/* The flat host index (host_block*block_size + offset) of pos, -1 without host tier. */
int32_t okv_kv_seq_host_slot(const okv_kv_cache *c, int seq, int pos);
/* Advance the length by n (positions must have been reserved and written). */
void okv_kv_seq_commit(okv_kv_cache *c, int seq, int n);
/* Shorten to len tokens, freeing blocks past it (speculative rejection). */
void okv_kv_seq_truncate(okv_kv_cache *c, int seq, int len);
/* The block tables of logical blocks 0..n-1, every allocated block (covering
 * committed and reserved tokens): group slots (-1 when released) and host blocks
 * (-1 without host tier). Borrowed; valid until the next call that changes this
 * sequence. */
const int32_t *okv_kv_seq_blocks(const okv_kv_cache *c, int seq, int *n);
const int32_t *okv_kv_seq_host_blocks(const okv_kv_cache *c, int seq, int *n);
/* Blocks of the sequence that hold a group slot. */
int okv_kv_seq_group_blocks(const okv_kv_cache *c, int seq);
/* Give a block's group slot back; the block lives on in the host tier alone. */
void okv_kv_seq_release_group(okv_kv_cache *c, int seq, int block);
/* Give a block's group slot back and forget the block (streaming KV: it is never
 * read again). */
void okv_kv_seq_drop_group(okv_kv_cache *c, int seq, int block);

/* Prefix caching (enabled before any block is used): full blocks registered under a hash of
 * their tokens and of the blocks before them are shared by the sequences that start with the
 * same tokens. The cached blocks are host blocks when the cache has a host tier, else group
 * slots. A registered block that no sequence holds stays cached until reserve needs it (least
 * recently freed first); such blocks count as free (okv_kv_free_slots / okv_kv_free_host_blocks). */
enum okv_status okv_kv_prefix_enable(okv_kv_cache *c);
void okv_kv_prefix_free(okv_kv_cache *c);   /* (okv_kv_cache_free calls it) */
bool okv_kv_prefix_enabled(const okv_kv_cache *c);
int okv_kv_prefix_cached_blocks(const okv_kv_cache *c);
/* The cached block (host block or group slot) with this hash, parent hash and block_size tokens, or -1. */
int32_t okv_kv_prefix_lookup(const okv_kv_cache *c, uint64_t parent, uint64_t hash, const int32_t *tokens);
/* Append a cached block to a block-aligned sequence (its length grows by block_size). With a host
 * tier, with_group also gives it a new group slot (OKV_ERR_NO_KV_SPACE when none is free), whose
 * contents the caller fills (kv_fetch from the host block); without, the block is the group slot. */
enum okv_status okv_kv_seq_attach_block(okv_kv_cache *c, int seq, int32_t id, bool with_group);
/* Register the sequence's full, committed block `block` (no-op when prefix caching is off, the
 * block is partial, or an equal block is cached already). */
void okv_kv_prefix_register(okv_kv_cache *c, int seq, int block, uint64_t parent, uint64_t hash, const int32_t *tokens);

/* Lending (sparse engines that keep sequences dense while the device pool has room): the
 * selection quota chunks (units past the group slots, n_chunks runs of chunk_slots slots'
 * worth in every layer) become extra group slot ids [n_group_slots + i*chunk_slots, ...)
 * while no sequence selects into them. Group slots are then handed out lowest id first, and
 * the cache tracks which sequence block holds each. */
enum okv_status okv_kv_lend_chunks(okv_kv_cache *c, int chunk_slots, int n_chunks);
int okv_kv_lent_chunks(const okv_kv_cache *c);   /* 0 without lending */
int okv_kv_chunk_slots(const okv_kv_cache *c);   /* slots of a chunk */
int okv_kv_chunk_of(const okv_kv_cache *c, int32_t slot);   /* the lent chunk holding a group slot id, or -1 */
/* Occupied slots of an unclaimed chunk (0 for a claimed one). */
int okv_kv_chunk_used(const okv_kv_cache *c, int chunk);
/* Take a chunk back for selection: its free slots leave the pool; the blocks still inside
 * must be moved out (okv_kv_chunk_occupant, okv_kv_seq_move_block) before its units are used. */
void okv_kv_chunk_claim(okv_kv_cache *c, int chunk);
/* Lend a claimed chunk again (its sequence is gone). */
void okv_kv_chunk_unclaim(okv_kv_cache *c, int chunk);
/* A block still inside a chunk: true and (seq, block), or false when it is empty. */
bool okv_kv_chunk_occupant(const okv_kv_cache *c, int chunk, int *seq, int *block);
/* Give block `block` of seq a new group slot (the lowest free, never in a claimed chunk) and
 * let its old one go: *from -> *to, whose contents the caller copies (kv_move).
 * OKV_ERR_NO_KV_SPACE when no slot is free. */
enum okv_status okv_kv_seq_move_block(okv_kv_cache *c, int seq, int block, int32_t *from, int32_t *to);

#ifdef __cplusplus
}
#endif
#endif
