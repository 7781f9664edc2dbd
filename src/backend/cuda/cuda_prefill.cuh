/* Shared by the prefill attention kernels: cuda_prefill.cu (mma.sync, the tiles, split keys,
 * the merge, the host side) and cuda_prefill_wg.cu (the same tiles on Hopper's warpgroup
 * MMA). */
#ifndef OKV_CUDA_PREFILL_CUH
#define OKV_CUDA_PREFILL_CUH

#include "backend/cuda/cuda_internal.h"

#include <cuda_bf16.h>
#include <stdint.h>

#define PF_KC 64          /* keys per chunk */
#define PF_MIN_VECS 64    /* prefill-shaped: max rows of a sequence * group reaches this */

/* a CTA's work: a tile of a list and, when the call splits the keys, which part of the
 * list's chunks (the parts of a tile are consecutive items) */
struct pf_item { int list, tile, part; };

struct pf_args {
    const float *q;
    float *out;
    const okv_bf16 *dev;                 /* device tier base */
    long long layer_off, stage_off, unit_elems;
    const int32_t *blk_start, *blk_unit, *blk_index;
    const struct pf_item *items;         /* [gridDim.x] */
    const int32_t *seq_row_off, *seq_rows, *tok_pos, *seq_kv_len;
    int n_heads, nkv, group, bs;
    float scale_log2;                    /* scale * log2(e) */
    /* split keys (n_parts > 1): part j of a tile reads chunks [j nch / n_parts, (j+1) nch /
     * n_parts) of its list and writes its vectors' O / l to part_o and (m, l) to part_ml at
     * ((item / n_parts) * BM + vector of the tile) * n_parts + j; pf_merge_k combines them */
    int n_parts, bm;
    float *part_o;
    float2 *part_ml;
};

/* (x0, x1) rounded to bf16, x0 in the low half (the lower column of a fragment) */
static __device__ __forceinline__ uint32_t pf_pack(float x0, float x1)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(x0, x1);
    return *(uint32_t *)&v;
}

typedef void (*pf_fn)(const struct pf_args);
struct pf_kern {
    pf_fn fn, merge;
    int threads, bm;
    size_t smem;
    bool wg;     /* the warpgroup-MMA kernel (cuda_prefill_wg.cu) */
    bool wide;   /* the mma.sync kernel's default: tiles of 128 in 4 warps of 32 */
};

/* the warpgroup-MMA kernel for head_dim hd (64 or 128) into k (fn, threads, bm, smem, wg;
 * not merge); false when hd is not supported (cuda_prefill_wg.cu) */
bool okv_pf_wg_pick(int hd, struct pf_kern *k);
/* whether this process runs the kernel's sm_90a machine code on the current device (a
 * one-thread probe: under a JIT of the compute_90 PTX the kernel is absent) */
bool okv_pf_wg_probe(void);

#endif
