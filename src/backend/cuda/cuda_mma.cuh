/* Device helpers shared by the attention kernels (cuda_attention.cu, cuda_prefill.cu) and the
 * key-code scoring (cuda_select.cu): cp.async copies, ldmatrix, the bf16 m16n8k16 and int8
 * m16n8k32 tensor-core products, S = Q K^T, ex2. */
#ifndef OKV_CUDA_MMA_CUH
#define OKV_CUDA_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}

static __device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

static __device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* D += A B with 8-bit integers, 32-bit sums (m16n8k32): a[0] rows g, columns 4t..4t+3; a[1]
 * rows g + 8, the same columns; a[2], a[3] the same 16 columns on; b0 rows 4t..4t+3 of
 * column g, b1 rows 16 + 4t..; c[0..1] row g columns 2t, 2t + 1, c[2..3] row g + 8
 * (g = lane / 4, t = lane % 4; four elements a register, lowest byte first) */
static __device__ __forceinline__ void mma_s8(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* S = Q K^T over KC keys staged in shared memory (rows of ROW bf16 elements, K of key
 * j at kb + j * ROW): s[n] accumulates key n-tile n (8 keys), zeroed first; qa holds the
 * warp's 16 query vectors as mma A fragments, one per 16 dims. */
template <int HD, int KC, int ROW>
static __device__ __forceinline__ void mma_qk(float s[][4], const uint32_t qa[][4], const __nv_bfloat16 *kb, int lane)
{
#pragma unroll
    for (int n = 0; n < KC / 8; n++)
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int k16 = 0; k16 < KC / 16; k16++) {
        /* x4: keys +0..7 dims +0..7, keys +0..7 dims +8..15, keys +8..15 dims +0..7, keys +8..15 dims +8..15 */
        const __nv_bfloat16 *kr = kb + (k16 * 16 + (lane >> 4) * 8 + (lane & 7)) * ROW + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            uint32_t b[4];
            ldsm_x4(b, kr + kk * 16);
            mma_bf16(s[2 * k16], qa[kk], b[0], b[1]);
            mma_bf16(s[2 * k16 + 1], qa[kk], b[2], b[3]);
        }
    }
}

template <int N>
static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
#endif
