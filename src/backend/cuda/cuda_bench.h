/* Tuning hooks of the CUDA backend for bench/ (not part of the public interface). */
#ifndef OKV_BACKEND_CUDA_BENCH_H
#define OKV_BACKEND_CUDA_BENCH_H

#include "oasiskv/backend.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CTAs of the kv_fetch gather kernel: ctas > 0 forces that many, 0 restores the policy. */
void okv_cuda_set_fetch_ctas(okv_backend *be, int ctas);
/* CTAs the last kv_fetch launched. */
int okv_cuda_fetch_ctas_last(const okv_backend *be);

/* Attention: variant 0 = default (tensor-core kernel where head_dim allows it), -1 =
 * the SIMT kernel with its split policy, k > 0 = tuning variant k (head_dim 128);
 * keys_per_item > 0 forces the split size (0 = policy). Drops the cached plan. */
void okv_cuda_set_attn(okv_backend *be, int variant, int keys_per_item);
/* The last attention plan: work items and merges; returns the resident CTAs it was
 * planned for (0: SIMT policy). */
int okv_cuda_attn_info(const okv_backend *be, int *n_work, int *n_merge);

/* Segment graphs (cuda_graph.cu): on / off for this backend (drops its graphs), and
 * what they have done since creation. */
struct okv_cuda_graph_info {
    bool on;
    long long launched;     /* graph launches */
    long long captured;     /* graphs captured */
    long long eager_runs;   /* pending runs launched op by op (first sightings, single ops, off) */
    long long eager_ops;
    long long cleared;      /* times the full table was emptied */
    int graphs;             /* graphs held now */
};
enum okv_status okv_cuda_set_graphs(okv_backend *be, bool on);
void okv_cuda_graph_info(const okv_backend *be, struct okv_cuda_graph_info *out);

/* Small-batch projections (cuda_gemv.cu): projections of 1 to rows rows (at most 4; 0
 * off) take the GEMV kernel; drops the backend's graphs. Returns the value in force. */
int okv_cuda_set_gemv_rows(okv_backend *be, int rows);

/* Key-code scoring (cuda_select.cu): whether this geometry takes the tensor-core kernel
 * (codes_mma_k; OKV_CODES_MMA=0 takes codes_k anyway). */
bool okv_cuda_codes_mma_fits(const struct okv_kv_geometry *g);

/* The host KV tier's allocation (cuda_pin.cu): seconds it took, and whether it was
 * registered from a mapping populated in parallel (else cudaHostAlloc). */
double okv_cuda_kv_host_pin_seconds(const okv_bkv *kv, bool *registered);

/* The device's FP8 E4M3 conversions of an fp8 host tier (cuda_kv.cu): enc[65536], the code of
 * every bf16 bit pattern; dec[256], the bf16 bits of every code; dec2[65536][2], the gather's
 * two-code decoder on every pair (low byte first). test_cuda_ops compares them with
 * okv_bf16_to_e4m3 and okv_e4m3_to_f32. Runs on the current device. */
enum okv_status okv_cuda_e4m3_tables(uint8_t *enc, uint16_t *dec, uint16_t *dec2);

#ifdef __cplusplus
}
#endif
#endif
