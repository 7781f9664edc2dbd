/* Sorting inside one CTA, shared by the selection (cuda_select.cu) and the residency
 * install (cuda_resid.cu) kernels. */
#ifndef OKV_BACKEND_CUDA_SORT_CUH
#define OKV_BACKEND_CUDA_SORT_CUH

/* Sort a[0..np) ascending in shared memory, np a power of two; the whole block takes part
 * (synchronises before and after). */
static __device__ void okv_bitonic_sort_u64(unsigned long long *a, int np)
{
    for (int size = 2; size <= np; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < np / 2; t += blockDim.x) {
                const int i = 2 * stride * (t / stride) + (t % stride), j = i + stride;
                const bool up = (i & size) == 0;
                const unsigned long long x = a[i], y = a[j];
                if ((x > y) == up) {
                    a[i] = y;
                    a[j] = x;
                }
            }
        }
    __syncthreads();
}

#endif
