/* The host KV tier's memory: pinned, mapped into the GPU's address space, allocated fast.
 *
 * cudaHostAlloc of tens of GiB takes about a minute on the GPU machine (bench/RESULTS.md
 * section 13: a 32 GiB host tier added 59 s to a run), because one thread faults in and
 * zeroes every 4 KiB page before the driver pins it. Here the memory is an anonymous
 * mapping, 2 MiB aligned, with transparent huge pages asked for; all cores fault it in at
 * once (one write per page: the kernel zeroes it); then cudaHostRegister pins and maps the
 * populated range. Where any step is refused (no mmap, a driver that cannot register), it
 * falls back to cudaHostAlloc, as it does for a size the host's available memory does not
 * cover. The device alias is what cudaHostGetDevicePointer gives.
 * OKV_HOST_PIN=alloc forces the fallback (for comparison). */
#include "backend/cuda/cuda_bench.h"
#include "backend/cuda/cuda_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PIN_ALIGN ((size_t)2 << 20)
#define PIN_MAX_THREADS 32

struct fault_job {
    char *p;
    size_t n, page;
};

static void *fault_range(void *arg)
{
    const struct fault_job *j = (const struct fault_job *)arg;
    for (size_t o = 0; o < j->n; o += j->page)
        ((volatile char *)j->p)[o] = 0;
    return NULL;
}

/* fault in [p, p + n) with up to `threads` threads (the caller's among them) */
static void fault_in(char *p, size_t n, int threads)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (threads > PIN_MAX_THREADS)
        threads = PIN_MAX_THREADS;
    if (threads < 1 || n < ((size_t)256 << 20))
        threads = 1;
    pthread_t th[PIN_MAX_THREADS];
    bool running[PIN_MAX_THREADS] = {false};
    struct fault_job jobs[PIN_MAX_THREADS];
    const size_t per = ((n / (size_t)threads) + PIN_ALIGN - 1) & ~(PIN_ALIGN - 1);
    int n_jobs = 0;
    for (size_t b = 0; b < n && n_jobs < threads; b += per)
        jobs[n_jobs++] = (struct fault_job){p + b, (b + per < n ? per : n - b), page};
    for (int i = 1; i < n_jobs; i++)   /* job 0 is the caller's; a thread that cannot start is done here */
        if (!(running[i] = pthread_create(&th[i], NULL, fault_range, &jobs[i]) == 0))
            fault_range(&jobs[i]);
    fault_range(&jobs[0]);
    for (int i = 1; i < n_jobs; i++)
        if (running[i])
            pthread_join(th[i], NULL);
}

/* MemAvailable of /proc/meminfo in bytes, or 0 when unknown */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb << 10;
}

enum okv_status okv_cuda_host_pin_alloc(size_t bytes, struct okv_cuda_pinned *out)
{
    memset(out, 0, sizeof *out);
    const char *mode = getenv("OKV_HOST_PIN");
    const double t0 = okv_now();
    const size_t n = (bytes + PIN_ALIGN - 1) & ~(PIN_ALIGN - 1), avail = mem_available();
    /* faulting pages in that the host cannot give would summon the OOM killer, not an
     * error: past what the host has free, cudaHostAlloc fails cleanly instead */
    const bool fits = avail == 0 || n + ((size_t)1 << 30) <= avail;
    if (!(mode && !strcmp(mode, "alloc")) && fits) {
        void *raw = mmap(NULL, n + PIN_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw != MAP_FAILED) {
            char *p = (char *)(((uintptr_t)raw + PIN_ALIGN - 1) & ~(uintptr_t)(PIN_ALIGN - 1));
#ifdef MADV_HUGEPAGE
            (void)madvise(p, n, MADV_HUGEPAGE);   /* a hint: fewer faults, fewer pages to pin */
#endif
            const long cores = sysconf(_SC_NPROCESSORS_ONLN);
            fault_in(p, n, cores > 0 ? (int)cores : 1);
            cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterMapped);
            void *d = NULL;
            if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&d, p, 0)) != cudaSuccess)
                cudaHostUnregister(p);
            if (e == cudaSuccess) {
                *out = (struct okv_cuda_pinned){p, d, n, raw, n + PIN_ALIGN, true, okv_now() - t0};
                return OKV_OK;
            }
            (void)cudaGetLastError();
            munmap(raw, n + PIN_ALIGN);
        }
    }
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: cannot allocate the host KV tier (%zu MiB pinned): %s",
                             bytes >> 20, cudaGetErrorString(e));
    }
    if ((e = cudaHostGetDevicePointer(&d, h, 0)) != cudaSuccess) {
        cudaFreeHost(h);
        return okv_cuda_err(e, "device pointer of the host KV tier", __FILE__, __LINE__);
    }
    /* zeros, as the anonymous mapping above has them: unwritten rows of a block travel with it to
     * the device tier, where the warp-specialised prefill multiplies their V by 0 (a NaN byte
     * pattern would poison the row) */
    memset(h, 0, bytes);
    *out = (struct okv_cuda_pinned){h, d, bytes, NULL, 0, false, okv_now() - t0};
    return OKV_OK;
}

void okv_cuda_host_pin_free(struct okv_cuda_pinned *p)
{
    if (!p->h)
        return;
    if (p->registered) {
        cudaHostUnregister(p->h);
        munmap(p->map, p->map_bytes);
    } else {
        cudaFreeHost(p->h);
    }
    memset(p, 0, sizeof *p);
}

extern "C" double okv_cuda_kv_host_pin_seconds(const okv_bkv *kv, bool *registered)
{
    *registered = kv->host_mem.registered;
    return kv->host_mem.seconds;
}
