/* Model loading: a GGUF file or a Hugging Face folder -> struct okv_model.
 *
 * Both paths fill the same config and then bind every weight through one table of
 * (GGUF name, Hugging Face name, expected shape), so that a missing tensor, a wrong
 * shape or an unsupported dtype is reported the same way whatever the format. */
#include "model/model_internal.h"
#include "oasiskv/gguf.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define MODEL_MAX_DIM (1 << 24)

const char *okv_arch_name(enum okv_arch a)
{
    switch (a) {
    case OKV_ARCH_LLAMA: return "llama";
    case OKV_ARCH_MISTRAL: return "mistral";
    case OKV_ARCH_QWEN2: return "qwen2";
    case OKV_ARCH_QWEN3: return "qwen3";
    }
    return "unknown";
}

/* ---- tensor binding ---- */

enum shape_kind {
    SHAPE_DIM,          /* (dim) */
    SHAPE_HEAD,         /* (head_dim) */
    SHAPE_Q_OUT,        /* (n_heads*head_dim) */
    SHAPE_KV_OUT,       /* (n_kv_heads*head_dim) */
    SHAPE_WQ,           /* (q_out rows, dim) */
    SHAPE_WKV,          /* (kv_out rows, dim) */
    SHAPE_WO,           /* (dim rows, q_out) */
    SHAPE_W_UP,         /* (ffn rows, dim) */
    SHAPE_W_DOWN,       /* (dim rows, ffn) */
};

enum need { NEED_ALWAYS, NEED_QKV_BIAS, NEED_QK_NORM };

struct layer_tensor {
    size_t field;             /* offsetof(struct okv_layer_weights, ...) */
    const char *gguf;         /* printf format with the layer index */
    const char *hf;
    enum shape_kind shape;
    enum need need;
};

static const struct layer_tensor k_layer_tensors[] = {
    {offsetof(struct okv_layer_weights, attn_norm), "blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight", SHAPE_DIM, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, wq), "blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight", SHAPE_WQ, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, wk), "blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight", SHAPE_WKV, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, wv), "blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight", SHAPE_WKV, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, wo), "blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight", SHAPE_WO, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, bq), "blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias", SHAPE_Q_OUT, NEED_QKV_BIAS},
    {offsetof(struct okv_layer_weights, bk), "blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias", SHAPE_KV_OUT, NEED_QKV_BIAS},
    {offsetof(struct okv_layer_weights, bv), "blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias", SHAPE_KV_OUT, NEED_QKV_BIAS},
    {offsetof(struct okv_layer_weights, q_norm), "blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", SHAPE_HEAD, NEED_QK_NORM},
    {offsetof(struct okv_layer_weights, k_norm), "blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", SHAPE_HEAD, NEED_QK_NORM},
    {offsetof(struct okv_layer_weights, ffn_norm), "blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight", SHAPE_DIM, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, w_gate), "blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight", SHAPE_W_UP, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, w_up), "blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight", SHAPE_W_UP, NEED_ALWAYS},
    {offsetof(struct okv_layer_weights, w_down), "blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight", SHAPE_W_DOWN, NEED_ALWAYS},
};
#define N_LAYER_TENSORS (sizeof k_layer_tensors / sizeof k_layer_tensors[0])

/* Tensors that would change the computation but that we do not model: refuse them
 * rather than silently ignore them. */
static const char *const k_refused_gguf[] = {"blk.0.attn_output.bias", "blk.0.ffn_down.bias", "blk.0.ffn_up.bias"};
static const char *const k_refused_hf[] = {"model.layers.0.self_attn.o_proj.bias", "model.layers.0.mlp.down_proj.bias",
                                           "model.layers.0.mlp.up_proj.bias"};

struct loader {
    const char *path;
    okv_gguf *g;
    struct okv_st_set *st;
    const void *dummy;   /* dummy models: every tensor views this BF16 buffer */
};

static enum okv_status find(const struct loader *L, const char *name, struct okv_tensor_view *out)
{
    return L->g ? okv_gguf_find_tensor(L->g, name, out) : okv_st_find(L->st, name, out);
}

static bool has(const struct loader *L, const char *name)
{
    struct okv_tensor_view v;
    if (L->dummy)
        return false;
    if (L->g)
        return okv_gguf_find_tensor(L->g, name, &v) != OKV_ERR_NOT_FOUND;
    return okv_st_has(L->st, name);
}

static void shape_of(const struct okv_model_config *c, enum shape_kind k, int *n_dims, int64_t *ne0, int64_t *ne1)
{
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    *n_dims = 2;
    *ne1 = 1;
    switch (k) {
    case SHAPE_DIM: *n_dims = 1; *ne0 = c->dim; break;
    case SHAPE_HEAD: *n_dims = 1; *ne0 = c->head_dim; break;
    case SHAPE_Q_OUT: *n_dims = 1; *ne0 = q; break;
    case SHAPE_KV_OUT: *n_dims = 1; *ne0 = kv; break;
    case SHAPE_WQ: *ne0 = c->dim; *ne1 = q; break;
    case SHAPE_WKV: *ne0 = c->dim; *ne1 = kv; break;
    case SHAPE_WO: *ne0 = q; *ne1 = c->dim; break;
    case SHAPE_W_UP: *ne0 = c->dim; *ne1 = c->ffn_dim; break;
    case SHAPE_W_DOWN: *ne0 = c->ffn_dim; *ne1 = c->dim; break;
    }
}

/* Find a tensor and check that it has exactly n_dims dimensions (ne0, ne1). */
static enum okv_status bind(const struct loader *L, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                            struct okv_tensor_view *out)
{
    if (L->dummy) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", name);
        out->dtype = OKV_DTYPE_BF16;
        out->n_dims = n_dims;
        out->ne[0] = ne0;
        out->ne[1] = ne1;
        out->ne[2] = out->ne[3] = 1;
        out->data = L->dummy;
        out->nbytes = okv_dtype_nbytes(OKV_DTYPE_BF16, ne0 * ne1);
        return OKV_OK;
    }
    enum okv_status st = find(L, name, out);
    if (st == OKV_ERR_NOT_FOUND)
        return okv_set_error(OKV_ERR_NOT_FOUND, "%s: required tensor '%s' is missing", L->path, name);
    if (st)
        return st;   /* unsupported dtype: the message names file and tensor */
    int64_t want[OKV_TENSOR_MAX_DIMS] = {ne0, ne1, 1, 1};
    bool ok = out->n_dims == n_dims;
    for (int d = 0; d < OKV_TENSOR_MAX_DIMS; d++)
        ok = ok && out->ne[d] == want[d];
    if (!ok) {
        char got[96];
        int pos = 0;
        for (int d = 0; d < out->n_dims && d < OKV_TENSOR_MAX_DIMS; d++)
            pos += snprintf(got + pos, sizeof got - (size_t)pos, "%s%lld", d ? ", " : "", (long long)out->ne[d]);
        if (n_dims == 1)
            return okv_set_error(OKV_ERR_FORMAT, "%s: tensor '%s' has shape ne=[%s], expected [%lld]", L->path, name, got,
                                 (long long)ne0);
        return okv_set_error(OKV_ERR_FORMAT, "%s: tensor '%s' has shape ne=[%s], expected [%lld, %lld]", L->path, name, got,
                             (long long)ne0, (long long)ne1);
    }
    return OKV_OK;
}

static enum okv_status bind_all(struct okv_model *m, const struct loader *L)
{
    const struct okv_model_config *c = &m->cfg;
    bool gguf = L->g != NULL;
    enum okv_status st;
    const char *const *refused = gguf ? k_refused_gguf : k_refused_hf;
    for (int i = 0; i < 3; i++)
        if (has(L, refused[i]))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: tensor '%s' (a bias the %s architecture does not have) is not supported",
                                 L->path, refused[i], c->arch_name);

    if ((st = bind(L, gguf ? "token_embd.weight" : "model.embed_tokens.weight", 2, c->dim, c->vocab_size, &m->tok_embd)) ||
        (st = bind(L, gguf ? "output_norm.weight" : "model.norm.weight", 1, c->dim, 1, &m->output_norm)))
        return st;
    if (c->tied_embeddings) {
        m->output = m->tok_embd;
    } else if ((st = bind(L, gguf ? "output.weight" : "lm_head.weight", 2, c->dim, c->vocab_size, &m->output))) {
        return st;
    }

    m->layers = okv_calloc((size_t)c->n_layers, sizeof *m->layers, OKV_TAG_MODEL);
    if (!m->layers)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for %d layers", L->path, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        for (size_t i = 0; i < N_LAYER_TENSORS; i++) {
            const struct layer_tensor *lt = &k_layer_tensors[i];
            if ((lt->need == NEED_QKV_BIAS && !c->qkv_bias) || (lt->need == NEED_QK_NORM && !c->qk_norm))
                continue;
            char name[OKV_TENSOR_NAME_MAX];
            snprintf(name, sizeof name, gguf ? lt->gguf : lt->hf, l);
            int nd;
            int64_t ne0 = 0, ne1 = 0;
            shape_of(c, lt->shape, &nd, &ne0, &ne1);
            struct okv_tensor_view *v = (struct okv_tensor_view *)((char *)&m->layers[l] + lt->field);
            if ((st = bind(L, name, nd, ne0, ne1, v)))
                return st;
        }
    }
    return OKV_OK;
}

static enum okv_status check_config(const char *path, const struct okv_model_config *c)
{
    const struct { const char *name; int v; } ints[] = {
        {"n_layers", c->n_layers}, {"dim", c->dim}, {"n_heads", c->n_heads}, {"n_kv_heads", c->n_kv_heads},
        {"head_dim", c->head_dim}, {"ffn_dim", c->ffn_dim}, {"vocab_size", c->vocab_size}, {"context length", c->max_ctx},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < 1 || ints[i].v > MODEL_MAX_DIM)
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s = %d is out of range [1, %d]", path, ints[i].name, ints[i].v,
                                 MODEL_MAX_DIM);
    if (c->n_layers > 4096)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %d layers is out of range", path, c->n_layers);
    if (c->n_heads % c->n_kv_heads)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %d heads is not a multiple of %d kv heads", path, c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return okv_set_error(OKV_ERR_FORMAT, "%s: head_dim %d is odd", path, c->head_dim);
    if (!(c->rms_eps > 0) || !isfinite(c->rms_eps) || !(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return okv_set_error(OKV_ERR_FORMAT, "%s: rms eps %g and rope theta %g must be positive", path, (double)c->rms_eps,
                             (double)c->rope_theta);
    if (c->rope_scaling != OKV_ROPE_SCALING_NONE && (!(c->rope_factor > 0) || !isfinite(c->rope_factor)))
        return okv_set_error(OKV_ERR_FORMAT, "%s: rope scaling factor %g must be positive", path, (double)c->rope_factor);
    return OKV_OK;
}

/* ---- GGUF ---- */

static enum okv_status gguf_int(const okv_gguf *g, const char *arch, const char *suffix, bool required, int *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (!okv_gguf_has(g, key)) {
        if (required)
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required key '%s'", okv_gguf_path(g), key);
        return OKV_OK;
    }
    if (!okv_gguf_get_int(g, key, &v))
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: key '%s' is not a single integer (per-layer values are not supported)",
                             okv_gguf_path(g), key);
    if (v < 1 || v > MODEL_MAX_DIM)
        return okv_set_error(OKV_ERR_FORMAT, "%s: key '%s' = %lld is out of range [1, %d]", okv_gguf_path(g), key,
                             (long long)v, MODEL_MAX_DIM);
    *out = (int)v;
    return OKV_OK;
}

static enum okv_status gguf_float(const okv_gguf *g, const char *arch, const char *suffix, bool required, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!okv_gguf_has(g, key)) {
        if (required)
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required key '%s'", okv_gguf_path(g), key);
        return OKV_OK;
    }
    float v;
    if (!okv_gguf_get_f32(g, key, &v) || !isfinite(v) || v <= 0)
        return okv_set_error(OKV_ERR_FORMAT, "%s: key '%s' must be a positive float", okv_gguf_path(g), key);
    *out = v;
    return OKV_OK;
}

/* llama.cpp stores Llama 3.1 rope scaling as rope_freqs.weight: per frequency i,
 * the divisor of theta_i. Recover (factor, low, high, original context) from it so
 * that the engine needs one llama3 code path, and check that the recovered
 * parameters reproduce every stored value. */
static enum okv_status gguf_rope_freqs(const okv_gguf *g, struct okv_model_config *c)
{
    const char *path = okv_gguf_path(g);
    struct okv_tensor_view v;
    enum okv_status st = okv_gguf_find_tensor(g, "rope_freqs.weight", &v);
    if (st == OKV_ERR_NOT_FOUND)
        return OKV_OK;
    if (st)
        return st;
    int n = c->head_dim / 2;
    if (v.n_dims != 1 || v.ne[0] != n || v.dtype != OKV_DTYPE_F32)
        return okv_set_error(OKV_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' must be f32 of shape [%d]", path, n);
    float f[4096];
    if (n > 4096)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: rope_freqs.weight too long", path);
    if ((st = okv_tensor_to_f32(&v, 0, n, f)))
        return st;
    float factor = 1;
    for (int i = 0; i < n; i++) {
        if (!(f[i] >= 1) || !isfinite(f[i]))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: rope_freqs.weight[%d] = %g is not a llama3 scaling factor", path,
                                 i, (double)f[i]);
        factor = f[i] > factor ? f[i] : factor;
    }
    if (factor <= 1.0001f)
        return OKV_OK;   /* all ones: no scaling */
    /* wavelen_i = 2*pi * theta^(2i/d); for middle frequencies
     * 1/f_i = (1-s)/factor + s with s = orig/(wavelen*(high-low)) - low/(high-low). */
    int orig = 8192;
    gguf_int(g, c->arch_name, "rope.scaling.original_context_length", false, &orig);
    double A = 0, B = 0;
    int i1 = -1, i2 = -1;
    for (int i = 0; i < n; i++)
        if (f[i] > 1.0001f && f[i] < factor * 0.9999f) {
            if (i1 < 0)
                i1 = i;
            i2 = i;
        }
    double lo = 1, hi = 4;
    if (i1 >= 0 && i2 > i1) {
        double w1 = 2 * M_PI * pow(c->rope_theta, 2.0 * i1 / c->head_dim);
        double w2 = 2 * M_PI * pow(c->rope_theta, 2.0 * i2 / c->head_dim);
        double s1 = (1.0 / f[i1] - 1.0 / factor) / (1 - 1.0 / factor);
        double s2 = (1.0 / f[i2] - 1.0 / factor) / (1 - 1.0 / factor);
        A = (s1 - s2) / (1 / w1 - 1 / w2);   /* orig/(high-low) */
        B = A / w1 - s1;                     /* low/(high-low) */
        if (A > 0) {
            lo = B * orig / A;
            hi = lo + orig / A;
        }
    }
    for (int i = 0; i < n; i++) {
        double w = 2 * M_PI * pow(c->rope_theta, 2.0 * i / c->head_dim);
        double want;
        if (w < orig / hi)
            want = 1;
        else if (w > orig / lo)
            want = factor;
        else {
            double s = (orig / w - lo) / (hi - lo);
            want = 1 / ((1 - s) / factor + s);
        }
        if (fabs(want - f[i]) > 1e-3 * want)
            return okv_set_error(OKV_ERR_UNSUPPORTED,
                                 "%s: rope_freqs.weight does not follow llama3 scaling (element %d: %g, expected %g)", path, i,
                                 (double)f[i], want);
    }
    c->rope_scaling = OKV_ROPE_SCALING_LLAMA3;
    c->rope_factor = factor;
    c->rope_low_freq_factor = (float)lo;
    c->rope_high_freq_factor = (float)hi;
    c->rope_orig_max_ctx = orig;
    return OKV_OK;
}

static enum okv_status gguf_config(const okv_gguf *g, struct okv_model_config *c)
{
    const char *path = okv_gguf_path(g);
    const char *s;
    size_t len;
    memset(c, 0, sizeof *c);
    if (!okv_gguf_get_str(g, "general.architecture", &s, &len))
        return okv_set_error(OKV_ERR_FORMAT, "%s: missing string key 'general.architecture'", path);
    snprintf(c->arch_name, sizeof c->arch_name, "%.*s", (int)(len < 31 ? len : 31), s);
    if (len >= sizeof c->arch_name || strlen(c->arch_name) != len)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported", path, (int)(len > 64 ? 64 : len), s);
    if (strcmp(c->arch_name, "llama") == 0)
        c->arch = OKV_ARCH_LLAMA;
    else if (strcmp(c->arch_name, "mistral") == 0)
        c->arch = OKV_ARCH_MISTRAL;
    else if (strcmp(c->arch_name, "qwen2") == 0)
        c->arch = OKV_ARCH_QWEN2;
    else if (strcmp(c->arch_name, "qwen3") == 0)
        c->arch = OKV_ARCH_QWEN3;
    else
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (llama, mistral, qwen2, qwen3)", path,
                             c->arch_name);
    const char *a = c->arch_name;
    enum okv_status st;
    if ((st = gguf_int(g, a, "block_count", true, &c->n_layers)) ||
        (st = gguf_int(g, a, "embedding_length", true, &c->dim)) ||
        (st = gguf_int(g, a, "feed_forward_length", true, &c->ffn_dim)) ||
        (st = gguf_int(g, a, "attention.head_count", true, &c->n_heads)) ||
        (st = gguf_int(g, a, "context_length", true, &c->max_ctx)) ||
        (st = gguf_float(g, a, "attention.layer_norm_rms_epsilon", true, &c->rms_eps)))
        return st;
    c->n_kv_heads = c->n_heads;
    if ((st = gguf_int(g, a, "attention.head_count_kv", false, &c->n_kv_heads)))
        return st;
    c->head_dim = c->dim / c->n_heads;
    if (c->dim % c->n_heads) {
        char key[96];
        snprintf(key, sizeof key, "%s.attention.key_length", a);
        if (!okv_gguf_has(g, key))
            return okv_set_error(OKV_ERR_FORMAT, "%s: embedding_length %d is not a multiple of head_count %d and no '%s'",
                                 path, c->dim, c->n_heads, key);
    }
    if ((st = gguf_int(g, a, "attention.key_length", false, &c->head_dim)))
        return st;
    int vdim = c->head_dim, rot = c->head_dim;
    if ((st = gguf_int(g, a, "attention.value_length", false, &vdim)) || (st = gguf_int(g, a, "rope.dimension_count", false, &rot)))
        return st;
    if (vdim != c->head_dim)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: value_length %d differs from key_length %d", path, vdim, c->head_dim);
    if (rot != c->head_dim)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: partial rotary embedding (rope.dimension_count %d, head_dim %d)", path,
                             rot, c->head_dim);
    c->rope_theta = 10000.0f;
    if ((st = gguf_float(g, a, "rope.freq_base", false, &c->rope_theta)))
        return st;
    c->rope_pairing = (c->arch == OKV_ARCH_LLAMA || c->arch == OKV_ARCH_MISTRAL) ? OKV_ROPE_PAIRING_INTERLEAVED
                                                                                  : OKV_ROPE_PAIRING_HALF;
    c->rope_scaling = OKV_ROPE_SCALING_NONE;
    c->rope_factor = 1.0f;

    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (okv_gguf_get_str(g, key, &s, &len)) {
        if (len == 4 && memcmp(s, "none", 4) == 0) {
            /* nothing */
        } else if (len == 6 && memcmp(s, "linear", 6) == 0) {
            c->rope_scaling = OKV_ROPE_SCALING_LINEAR;
            if ((st = gguf_float(g, a, "rope.scaling.factor", true, &c->rope_factor)))
                return st;
        } else {
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported (none, linear)", path,
                                 (int)(len > 64 ? 64 : len), s);
        }
    } else {
        snprintf(key, sizeof key, "%s.rope.scale_linear", a);   /* older files */
        float f;
        if (okv_gguf_get_f32(g, key, &f) && f != 1.0f) {
            if (!(f > 0) || !isfinite(f))
                return okv_set_error(OKV_ERR_FORMAT, "%s: key '%s' must be positive", path, key);
            c->rope_scaling = OKV_ROPE_SCALING_LINEAR;
            c->rope_factor = f;
        }
    }
    if (c->rope_scaling == OKV_ROPE_SCALING_NONE && (st = gguf_rope_freqs(g, c)))
        return st;

    c->qkv_bias = c->arch == OKV_ARCH_QWEN2;
    struct okv_tensor_view v;
    if (okv_gguf_find_tensor(g, "blk.0.attn_q.bias", &v) != OKV_ERR_NOT_FOUND)
        c->qkv_bias = true;
    c->qk_norm = c->arch == OKV_ARCH_QWEN3;
    c->tied_embeddings = okv_gguf_find_tensor(g, "output.weight", &v) == OKV_ERR_NOT_FOUND;

    st = okv_gguf_find_tensor(g, "token_embd.weight", &v);
    if (st == OKV_ERR_NOT_FOUND)
        return okv_set_error(OKV_ERR_NOT_FOUND, "%s: required tensor 'token_embd.weight' is missing", path);
    if (st)
        return st;
    if (v.n_dims != 2 || v.ne[1] < 1 || v.ne[1] > MODEL_MAX_DIM)
        return okv_set_error(OKV_ERR_FORMAT, "%s: tensor 'token_embd.weight' must be 2-D with at most %d rows", path,
                             MODEL_MAX_DIM);
    c->vocab_size = (int)v.ne[1];
    return OKV_OK;
}

/* ---- load / free ---- */

void okv_model_free(struct okv_model *m)
{
    if (!m)
        return;
    okv_free(m->layers);
    okv_gguf_close(m->gguf);
    okv_st_close(m->priv);
    okv_free(m->dummy);
    okv_free(m->path);
    okv_free(m);
}

enum okv_status okv_model_load(const char *path, struct okv_model **out)
{
    if (!path || !out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_model_load: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return okv_set_error(OKV_ERR_IO, "%s: cannot access the model path: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        return okv_set_error(OKV_ERR_IO, "%s: neither a GGUF file nor a Hugging Face folder", path);
    struct okv_model *m = okv_calloc(1, sizeof *m, OKV_TAG_MODEL);
    if (!m)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    enum okv_status st = OKV_ERR_NO_MEMORY;
    m->path = okv_strdup(path, OKV_TAG_MODEL);
    if (!m->path) {
        okv_set_error(st, "%s: no memory", path);
        goto fail;
    }
    struct loader L = {path, NULL, NULL, NULL};
    if (S_ISREG(sb.st_mode)) {
        m->format = OKV_MODEL_FORMAT_GGUF;
        if ((st = okv_gguf_open(path, &m->gguf)) || (st = gguf_config(m->gguf, &m->cfg)))
            goto fail;
        L.g = m->gguf;
    } else {
        m->format = OKV_MODEL_FORMAT_HF;
        struct okv_st_set *s = NULL;
        char cfg_path[4096];
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
        if (stat(cfg_path, &sb) != 0) {
            st = okv_set_error(OKV_ERR_NOT_FOUND, "%s: not a Hugging Face model folder: config.json is missing", path);
            goto fail;
        }
        if ((st = okv_hf_config_load(path, &m->cfg)))
            goto fail;
        if ((st = okv_st_open_dir(path, &s)))
            goto fail;
        m->priv = s;
        L.st = s;
        okv_st_set_fp8_block(s, m->cfg.fp8_block[0], m->cfg.fp8_block[1]);
        okv_st_set_pack(s, m->cfg.pack_layout, m->cfg.pack_bits, m->cfg.pack_group, m->cfg.pack_zero_offset);
        if (!m->cfg.tied_embeddings && !okv_st_has(s, "lm_head.weight"))
            m->cfg.tied_embeddings = true;
    }
    if ((st = check_config(path, &m->cfg)) || (st = bind_all(m, &L)))
        goto fail;
    *out = m;
    return OKV_OK;
fail:
    okv_model_free(m);
    return st;
}

/* ---- describe ---- */

static int64_t count_params(const struct okv_model *m, int64_t per_dtype[OKV_DTYPE_COUNT], int64_t n_per_dtype[OKV_DTYPE_COUNT])
{
    int64_t total = 0;
    const struct okv_tensor_view *list[3] = {&m->tok_embd, &m->output_norm, m->cfg.tied_embeddings ? NULL : &m->output};
    for (int i = 0; i < 3; i++) {
        if (!list[i] || !list[i]->data)
            continue;
        int64_t n = okv_tensor_nelements(list[i]);
        total += n;
        per_dtype[list[i]->dtype] += n;
        n_per_dtype[list[i]->dtype]++;
    }
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++)
        for (size_t i = 0; i < N_LAYER_TENSORS; i++) {
            const struct okv_tensor_view *v =
                (const struct okv_tensor_view *)((const char *)&m->layers[l] + k_layer_tensors[i].field);
            if (!v->data)
                continue;
            int64_t n = okv_tensor_nelements(v);
            total += n;
            per_dtype[v->dtype] += n;
            n_per_dtype[v->dtype]++;
        }
    return total;
}

int64_t okv_model_n_params(const struct okv_model *m)
{
    int64_t per[OKV_DTYPE_COUNT] = {0}, cnt[OKV_DTYPE_COUNT] = {0};
    return m ? count_params(m, per, cnt) : 0;
}

void okv_model_describe(const struct okv_model *m, char *buf, size_t cap)
{
    if (!buf || !cap)
        return;
    if (!m) {
        snprintf(buf, cap, "(no model)");
        return;
    }
    const struct okv_model_config *c = &m->cfg;
    static const char *scaling[] = {"none", "linear", "llama3", "yarn"};
    size_t pos = 0;
#define APPEND(...)                                                            \
    do {                                                                       \
        if (pos < cap) {                                                       \
            int k_ = snprintf(buf + pos, cap - pos, __VA_ARGS__);              \
            pos += k_ > 0 ? (size_t)k_ : 0;                                    \
        }                                                                      \
    } while (0)
    APPEND("model %s (%s)\n", m->path ? m->path : "?", m->format == OKV_MODEL_FORMAT_GGUF ? "gguf" : "hugging face");
    APPEND("arch %s (%s), layers %d, dim %d, heads %d, kv heads %d, head_dim %d, ffn %d, vocab %d, context %d\n",
           okv_arch_name(c->arch), c->arch_name, c->n_layers, c->dim, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn_dim,
           c->vocab_size, c->max_ctx);
    APPEND("rope theta %g, pairing %s, scaling %s", (double)c->rope_theta,
           c->rope_pairing == OKV_ROPE_PAIRING_INTERLEAVED ? "interleaved" : "half",
           (unsigned)c->rope_scaling < sizeof scaling / sizeof scaling[0] ? scaling[c->rope_scaling] : "?");
    if (c->rope_scaling == OKV_ROPE_SCALING_LINEAR)
        APPEND(" (factor %g)", (double)c->rope_factor);
    else if (c->rope_scaling == OKV_ROPE_SCALING_LLAMA3)
        APPEND(" (factor %g, low %g, high %g, original context %d)", (double)c->rope_factor, (double)c->rope_low_freq_factor,
               (double)c->rope_high_freq_factor, c->rope_orig_max_ctx);
    else if (c->rope_scaling == OKV_ROPE_SCALING_YARN)
        APPEND(" (factor %g, original context %d, beta %g / %g, attention factor %g)", (double)c->rope_factor,
               c->rope_orig_max_ctx, (double)c->rope_beta_fast, (double)c->rope_beta_slow, (double)c->rope_attn_factor);
    APPEND("\nrms eps %g, qkv bias %s, qk norm %s, tied embeddings %s\n", (double)c->rms_eps, c->qkv_bias ? "yes" : "no",
           c->qk_norm ? "yes" : "no", c->tied_embeddings ? "yes" : "no");
    int64_t per[OKV_DTYPE_COUNT] = {0}, cnt[OKV_DTYPE_COUNT] = {0};
    int64_t total = count_params(m, per, cnt);
    APPEND("weights:");
    for (int d = 0; d < OKV_DTYPE_COUNT; d++)
        if (cnt[d])
            APPEND(" %s x %lld (%.1fM)", okv_dtype_name((enum okv_dtype)d), (long long)cnt[d], (double)per[d] / 1e6);
    APPEND("\nparameters %lld (%.1fM)\n", (long long)total, (double)total / 1e6);
#undef APPEND
}

enum okv_status okv_model_load_dummy(const char *path, uint64_t seed, struct okv_model **out)
{
    if (!path || !out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_model_load_dummy: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return okv_set_error(OKV_ERR_IO, "%s: cannot access the config: %s", path, strerror(errno));
    struct okv_model *m = okv_calloc(1, sizeof *m, OKV_TAG_MODEL);
    if (!m)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    enum okv_status st;
    m->format = OKV_MODEL_FORMAT_HF;
    if (!(m->path = okv_strdup(path, OKV_TAG_MODEL))) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        if ((st = okv_hf_config_load(path, &m->cfg)))
            goto fail;
    } else {
        char *text = NULL;
        size_t len = 0;
        if ((st = okv_model_read_file(path, 1 << 20, &text, &len)))
            goto fail;
        st = okv_hf_config_parse(path, text, len, &m->cfg);
        okv_free(text);
        if (st)
            goto fail;
    }
    if ((st = check_config(path, &m->cfg)))
        goto fail;
    const struct okv_model_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim;
    int64_t biggest = (int64_t)c->vocab_size * c->dim;
    int64_t others[] = {q * c->dim, (int64_t)c->ffn_dim * c->dim};
    for (int i = 0; i < 2; i++)
        biggest = others[i] > biggest ? others[i] : biggest;
    uint16_t *buf = okv_malloc(sizeof(uint16_t) * (size_t)biggest, OKV_TAG_MODEL);
    if (!buf) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for %lld dummy weights", path, (long long)biggest);
        goto fail;
    }
    m->dummy = buf;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < biggest; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float u = (float)(x >> 40) * (1.0f / 16777216.0f);   /* [0, 1) */
        buf[i] = okv_f32_to_bf16(0.1f * u - 0.05f);
    }
    struct loader L = {path, NULL, NULL, buf};
    m->cfg.tied_embeddings = true;   /* one view serves both */
    if ((st = bind_all(m, &L)))
        goto fail;
    *out = m;
    return OKV_OK;
fail:
    okv_model_free(m);
    return st;
}
