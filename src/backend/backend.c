/* Backend selection by name. Backends other than the CPU register here when
 * built in (OKV_HAVE_CUDA). */
#include "oasiskv/backend.h"

#include <stdlib.h>
#include <string.h>

#ifdef OKV_HAVE_CUDA
enum okv_status okv_backend_cuda_create(const struct okv_backend_params *p, okv_backend **out);
int okv_cuda_device_count(void);
#endif

const char *okv_backend_default_name(void)
{
#ifdef OKV_HAVE_CUDA
    if (okv_cuda_device_count() > 0)
        return "cuda";
#endif
    return "cpu";
}

enum okv_status okv_backend_create(const char *name, const struct okv_backend_params *p, okv_backend **out)
{
    *out = NULL;
    if (!name)
        name = okv_backend_default_name();
    if (!strcmp(name, "cpu"))
        return okv_backend_cpu_create(p, out);
#ifdef OKV_HAVE_CUDA
    if (!strcmp(name, "cuda"))
        return okv_backend_cuda_create(p, out);
#endif
    if (!strcmp(name, "cuda"))
        return okv_set_error(OKV_ERR_UNSUPPORTED, "device cuda: this build has no CUDA backend (configure with -DOKV_CUDA=ON)");
    return okv_set_error(OKV_ERR_INVALID_ARG, "unknown device '%s' (expected cpu or cuda)", name);
}

void okv_backend_free(okv_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

int okv_backend_shards(const okv_backend *be) { return be && be->ops->shards ? be->ops->shards(be) : 1; }

size_t okv_backend_host_unit_bytes(const okv_backend *be, const okv_bkv *kv)
{
    return be->ops->kv_host_unit_bytes ? be->ops->kv_host_unit_bytes(kv) : be->ops->kv_unit_bytes(kv);
}

float okv_key_code_blend(void)
{
    const char *e = getenv("OKV_CODES_BLEND");
    if (!e || !*e)
        return OKV_KEY_CODE_BLEND;
    const float b = strtof(e, NULL);
    return b > 0.0f ? (b < 1.0f ? b : 1.0f) : 0.0f;
}

int okv_backend_kv_heads_per_device(const okv_backend *be, int n_kv_heads)
{
    int n = okv_backend_shards(be);
    return n_kv_heads >= n ? n_kv_heads / n : 1;
}
