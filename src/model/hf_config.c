/* Hugging Face config.json -> struct okv_model_config.
 *
 * Architecture from "model_type" (else "architectures"[0]): llama, mistral, qwen2,
 * qwen3. RoPE settings come in two forms: the older top-level "rope_theta" plus
 * "rope_scaling" {type|rope_type, factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings}, and transformers 5's "rope_parameters"
 * {rope_theta, rope_type, factor, ...}; the latter wins when both are present.
 * Hugging Face checkpoints always pair RoPE dimensions as rotate-half. */
#include "model/model_internal.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HF_MAX_DIM (1 << 24)

struct arch_info {
    const char *model_type;
    const char *class_name;
    enum okv_arch arch;
    int default_max_ctx;
};

static const struct arch_info k_archs[] = {
    {"llama", "LlamaForCausalLM", OKV_ARCH_LLAMA, 2048},
    {"mistral", "MistralForCausalLM", OKV_ARCH_MISTRAL, 32768},
    {"qwen2", "Qwen2ForCausalLM", OKV_ARCH_QWEN2, 32768},
    {"qwen3", "Qwen3ForCausalLM", OKV_ARCH_QWEN3, 32768},
};

static const cJSON *item(const cJSON *o, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(j) ? NULL : j;
}

/* A positive integer field; absent => *out unchanged and OK unless required. */
static enum okv_status get_int(const char *path, const cJSON *o, const char *key, bool required, int *out)
{
    const cJSON *j = item(o, key);
    if (!j) {
        if (required)
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required field \"%s\"", path, key);
        return OKV_OK;
    }
    if (!cJSON_IsNumber(j) || floor(j->valuedouble) != j->valuedouble || j->valuedouble < 1 ||
        j->valuedouble > HF_MAX_DIM)
        return okv_set_error(OKV_ERR_FORMAT, "%s: field \"%s\" must be an integer in [1, %d]", path, key, HF_MAX_DIM);
    *out = (int)j->valuedouble;
    return OKV_OK;
}

static enum okv_status get_float(const char *path, const cJSON *o, const char *key, bool required, float *out)
{
    const cJSON *j = item(o, key);
    if (!j) {
        if (required)
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required field \"%s\"", path, key);
        return OKV_OK;
    }
    /* read as a float: a value past FLT_MAX would become inf */
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble <= 0 || j->valuedouble > FLT_MAX)
        return okv_set_error(OKV_ERR_FORMAT, "%s: field \"%s\" must be a positive number no larger than %g", path, key,
                             (double)FLT_MAX);
    *out = (float)j->valuedouble;
    return OKV_OK;
}

static enum okv_status get_bool(const char *path, const cJSON *o, const char *key, bool *out)
{
    const cJSON *j = item(o, key);
    if (!j)
        return OKV_OK;
    if (!cJSON_IsBool(j))
        return okv_set_error(OKV_ERR_FORMAT, "%s: field \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(j);
    return OKV_OK;
}

/* rope_scaling or rope_parameters object: scaling kind and its parameters. */
static enum okv_status parse_rope(const char *path, const cJSON *r, const char *where, struct okv_model_config *cfg)
{
    if (!cJSON_IsObject(r))
        return okv_set_error(OKV_ERR_FORMAT, "%s: \"%s\" must be an object", path, where);
    enum okv_status st;
    if ((st = get_float(path, r, "rope_theta", false, &cfg->rope_theta)))
        return st;
    const cJSON *t = item(r, "rope_type");
    if (!t)
        t = item(r, "type");
    if (t && !cJSON_IsString(t))
        return okv_set_error(OKV_ERR_FORMAT, "%s: \"%s.rope_type\" must be a string", path, where);
    const char *type = t ? t->valuestring : "default";
    if (strcmp(type, "default") == 0) {
        cfg->rope_scaling = OKV_ROPE_SCALING_NONE;
        return OKV_OK;
    }
    char key[64];
    snprintf(key, sizeof key, "%s.factor", where);
    if (strcmp(type, "linear") == 0) {
        cfg->rope_scaling = OKV_ROPE_SCALING_LINEAR;
        if (!item(r, "factor"))
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required field \"%s\"", path, key);
        return get_float(path, r, "factor", true, &cfg->rope_factor);
    }
    if (strcmp(type, "llama3") == 0) {
        cfg->rope_scaling = OKV_ROPE_SCALING_LLAMA3;
        static const char *fields[] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
        for (int i = 0; i < 4; i++)
            if (!item(r, fields[i]))
                return okv_set_error(OKV_ERR_FORMAT, "%s: llama3 rope scaling lacks \"%s.%s\"", path, where, fields[i]);
        if ((st = get_float(path, r, "factor", true, &cfg->rope_factor)) ||
            (st = get_float(path, r, "low_freq_factor", true, &cfg->rope_low_freq_factor)) ||
            (st = get_float(path, r, "high_freq_factor", true, &cfg->rope_high_freq_factor)) ||
            (st = get_int(path, r, "original_max_position_embeddings", true, &cfg->rope_orig_max_ctx)))
            return st;
        if (cfg->rope_high_freq_factor <= cfg->rope_low_freq_factor)
            return okv_set_error(OKV_ERR_FORMAT, "%s: llama3 rope scaling needs high_freq_factor > low_freq_factor", path);
        return OKV_OK;
    }
    if (strcmp(type, "yarn") == 0) {
        /* as transformers and vLLM read it: factor as given; the original context from the
         * parameters, else max_position_embeddings (and then the served context is that x factor) */
        cfg->rope_scaling = OKV_ROPE_SCALING_YARN;
        if (!item(r, "factor"))
            return okv_set_error(OKV_ERR_FORMAT, "%s: missing required field \"%s\"", path, key);
        const int pretrained = cfg->max_ctx;
        cfg->rope_orig_max_ctx = 0;
        cfg->rope_beta_fast = 32.0f;
        cfg->rope_beta_slow = 1.0f;
        float attn = 0, mscale = 0, mscale_all = 0;
        if ((st = get_float(path, r, "factor", true, &cfg->rope_factor)) ||
            (st = get_int(path, r, "original_max_position_embeddings", false, &cfg->rope_orig_max_ctx)) ||
            (st = get_float(path, r, "beta_fast", false, &cfg->rope_beta_fast)) ||
            (st = get_float(path, r, "beta_slow", false, &cfg->rope_beta_slow)) ||
            (st = get_float(path, r, "attention_factor", false, &attn)) ||
            (st = get_float(path, r, "mscale", false, &mscale)) ||
            (st = get_float(path, r, "mscale_all_dim", false, &mscale_all)))
            return st;
        const cJSON *tr = item(r, "truncate");
        if (tr && !cJSON_IsTrue(tr))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: yarn rope scaling with \"truncate\": false is not supported", path);
        if (!cfg->rope_orig_max_ctx) {
            if (pretrained <= 0)
                return okv_set_error(OKV_ERR_FORMAT, "%s: yarn rope scaling needs \"%s.original_max_position_embeddings\" "
                                                     "or max_position_embeddings", path, where);
            cfg->rope_orig_max_ctx = pretrained;
        }
        /* the attention factor (the paper's 0.1 ln s + 1, or DeepSeek's ratio of two such) */
        const double s = cfg->rope_factor;
#define YARN_MSCALE(m) (s <= 1.0 ? 1.0 : 0.1 * (m) * log(s) + 1.0)
        cfg->rope_attn_factor = attn > 0 ? attn
                                : mscale > 0 && mscale_all > 0 ? (float)(YARN_MSCALE(mscale) / YARN_MSCALE(mscale_all))
                                                               : (float)YARN_MSCALE(1.0);
#undef YARN_MSCALE
        /* the context it serves: the original one x factor (as vLLM derives max_model_len) */
        const double ext = (double)cfg->rope_orig_max_ctx * s;
        if (ext > cfg->max_ctx && ext <= HF_MAX_DIM)
            cfg->max_ctx = (int)ext;
        return OKV_OK;
    }
    return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: rope scaling type \"%s\" is not supported (default, linear, llama3, yarn)",
                         path, type);
}

/* "quantization_config": the FP8 weight formats are read (their F8_E4M3 tensors and scales:
 * src/model/safetensors.c), every other method is refused by name, before a tensor is looked
 * for (an AWQ or GPTQ folder would otherwise fail on a missing "q_proj.weight"). */
static enum okv_status check_quant(const char *path, const cJSON *qc, struct okv_model_config *cfg)
{
    if (!qc || cJSON_IsNull(qc))
        return OKV_OK;
    const cJSON *m = item(qc, "quant_method");
    if (!cJSON_IsObject(qc) || !cJSON_IsString(m))
        return okv_set_error(OKV_ERR_FORMAT, "%s: \"quantization_config\" must be an object with a \"quant_method\" string", path);
    const char *qm = m->valuestring;
    if (strcmp(qm, "fp8") == 0) {   /* transformers' FineGrainedFP8 (Qwen3 FP8, DeepSeek): 128 x 128 blocks */
        const cJSON *fmt = item(qc, "fmt");
        if (fmt && !(cJSON_IsString(fmt) && strcmp(fmt->valuestring, "e4m3") == 0))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: fp8 \"fmt\" %s is not supported (e4m3)", path,
                                 cJSON_IsString(fmt) ? fmt->valuestring : "(not a string)");
        const cJSON *wb = item(qc, "weight_block_size");
        if (wb) {
            const cJSON *r = cJSON_GetArrayItem(wb, 0), *c = cJSON_GetArrayItem(wb, 1);
            if (!cJSON_IsArray(wb) || cJSON_GetArraySize(wb) != 2 || !cJSON_IsNumber(r) || !cJSON_IsNumber(c) ||
                r->valuedouble < 1 || c->valuedouble < 1 || r->valuedouble > 1 << 20 || c->valuedouble > 1 << 20 ||
                r->valuedouble != (int)r->valuedouble || c->valuedouble != (int)c->valuedouble)
                return okv_set_error(OKV_ERR_FORMAT, "%s: quantization_config.weight_block_size must be two positive integers",
                                     path);
            cfg->fp8_block[0] = r->valueint;
            cfg->fp8_block[1] = c->valueint;
        }
        return OKV_OK;
    }
    if (strcmp(qm, "fbgemm_fp8") == 0)   /* per-channel scales */
        return OKV_OK;
    if (strcmp(qm, "gptq") == 0 || strcmp(qm, "awq") == 0) {
        const bool awq = qm[0] == 'a';
        const cJSON *bits = item(qc, "bits"), *gs = item(qc, "group_size"), *fmt = item(qc, "checkpoint_format"),
                    *ver = item(qc, "version"), *zp = item(qc, "zero_point");
        if (!cJSON_IsNumber(bits) || !(bits->valueint == 4 || (!awq && bits->valueint == 8)))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: %s with %d bits is not supported (%s)", path, qm,
                                 cJSON_IsNumber(bits) ? bits->valueint : 0, awq ? "4" : "4 or 8");
        if (gs && !(cJSON_IsNumber(gs) && (gs->valueint == -1 || gs->valueint > 0)))
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s group_size must be -1 or positive", path, qm);
        cfg->pack_layout = awq ? OKV_PACK_AWQ : OKV_PACK_GPTQ;
        cfg->pack_bits = bits->valueint;
        cfg->pack_group = cJSON_IsNumber(gs) ? gs->valueint : -1;
        if (!awq) {   /* v1 ("gptq", the usual) stores zero points minus one; v2 as they are */
            const char *f = cJSON_IsString(fmt) ? fmt->valuestring : "gptq";
            if (strcmp(f, "gptq") != 0 && strcmp(f, "gptq_v2") != 0)
                return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: gptq checkpoint_format \"%s\" is not supported (gptq, gptq_v2)",
                                     path, f);
            cfg->pack_zero_offset = strcmp(f, "gptq") == 0;
        } else {
            const char *v = cJSON_IsString(ver) ? ver->valuestring : "gemm";
            if (strcasecmp(v, "gemm") != 0)
                return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: awq version \"%s\" is not supported (gemm)", path, v);
            if (cJSON_IsFalse(zp))
                return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: awq without zero points is not supported", path);
        }
        return OKV_OK;
    }
    if (strcmp(qm, "compressed-tensors") == 0) {
        /* llm-compressor's checkpoints: FP8 weights ("float-quantized") or 4- / 8-bit integers
         * packed in int32 words ("pack-quantized": W4A16, W8A16) */
        const cJSON *top = item(qc, "format");
        const cJSON *groups = item(qc, "config_groups"), *g;
        cJSON_ArrayForEach(g, groups)
        {
            const cJSON *gf = item(g, "format");
            const char *fmt = cJSON_IsString(gf) ? gf->valuestring : cJSON_IsString(top) ? top->valuestring : "";
            const cJSON *w = item(g, "weights");
            if (!w)
                continue;
            const cJSON *type = item(w, "type"), *bits = item(w, "num_bits"), *gs = item(w, "group_size"),
                        *ao = item(w, "actorder"), *strat = item(w, "strategy");
            const char *ty = cJSON_IsString(type) ? type->valuestring : "?";
            const int nb = cJSON_IsNumber(bits) ? bits->valueint : 0;
            const char *gname = g->string ? g->string : "?";
            if (strcmp(ty, "float") == 0 && nb == 8 &&
                (!*fmt || strcmp(fmt, "float-quantized") == 0 || strcmp(fmt, "naive-quantized") == 0))
                continue;
            if (strcmp(ty, "int") == 0 && (nb == 4 || nb == 8) && strcmp(fmt, "pack-quantized") == 0) {
                if (cJSON_IsString(ao) && strcmp(ao->valuestring, "group") == 0)
                    return okv_set_error(OKV_ERR_UNSUPPORTED,
                                         "%s: compressed-tensors group \"%s\" orders its groups by activation (actorder "
                                         "\"group\"); not supported",
                                         path, gname);
                if (cJSON_IsString(strat) && strcmp(strat->valuestring, "group") != 0 &&
                    strcmp(strat->valuestring, "channel") != 0)
                    return okv_set_error(OKV_ERR_UNSUPPORTED,
                                         "%s: compressed-tensors group \"%s\": strategy \"%s\" of packed weights is not "
                                         "supported (group, channel)",
                                         path, gname, strat->valuestring);
                if (cfg->pack_bits && cfg->pack_bits != nb)
                    return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: compressed-tensors groups with different bit widths", path);
                cfg->pack_bits = nb;
                if (cJSON_IsNumber(gs) && gs->valueint > 0)
                    cfg->pack_group = gs->valueint;
                continue;
            }
            return okv_set_error(OKV_ERR_UNSUPPORTED,
                                 "%s: compressed-tensors group \"%s\" quantizes weights to %d-bit %s in format \"%s\"; "
                                 "supported: 8-bit float (FP8), 4- and 8-bit int \"pack-quantized\"",
                                 path, gname, nb, ty, *fmt ? fmt : "(none)");
        }
        if (cJSON_IsString(top) && strcmp(top->valuestring, "float-quantized") != 0 &&
            strcmp(top->valuestring, "naive-quantized") != 0 && strcmp(top->valuestring, "pack-quantized") != 0 &&
            strcmp(top->valuestring, "mixed-precision") != 0)
            return okv_set_error(OKV_ERR_UNSUPPORTED,
                                 "%s: compressed-tensors format \"%s\" is not supported (float-quantized, pack-quantized)",
                                 path, top->valuestring);
        return OKV_OK;
    }
    return okv_set_error(OKV_ERR_UNSUPPORTED,
                         "%s: quantization method \"%s\" is not supported (supported: \"fp8\", \"fbgemm_fp8\", \"gptq\", \"awq\", "
                         "\"compressed-tensors\" FP8 and packed int4 / int8); use the bf16 / fp16 checkpoint or a GGUF file",
                         path, qm);
}

enum okv_status okv_hf_config_parse(const char *path, const char *text, size_t len, struct okv_model_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return okv_set_error(OKV_ERR_FORMAT, "%s: not valid JSON", path);
    enum okv_status st = OKV_OK;
    if (!cJSON_IsObject(root)) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: not a JSON object", path);
        goto out;
    }

    const struct arch_info *ai = NULL;
    const cJSON *mt = item(root, "model_type");
    const cJSON *archs = item(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const char *named = NULL;
    if (cJSON_IsString(mt)) {
        named = mt->valuestring;
        for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
            if (strcmp(named, k_archs[i].model_type) == 0)
                ai = &k_archs[i];
    } else if (cJSON_IsString(a0)) {
        named = a0->valuestring;
        for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
            if (strcmp(named, k_archs[i].class_name) == 0)
                ai = &k_archs[i];
    }
    if (!named) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: missing \"model_type\" and \"architectures\"", path);
        goto out;
    }
    if (!ai) {
        st = okv_set_error(OKV_ERR_UNSUPPORTED, "%s: architecture \"%s\" is not supported (llama, mistral, qwen2, qwen3)",
                           path, named);
        goto out;
    }
    cfg->arch = ai->arch;
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", ai->model_type);

    cfg->max_ctx = ai->default_max_ctx;
    cfg->rms_eps = 1e-6f;
    cfg->rope_theta = 10000.0f;
    cfg->rope_pairing = OKV_ROPE_PAIRING_HALF;
    cfg->rope_scaling = OKV_ROPE_SCALING_NONE;
    cfg->rope_factor = 1.0f;
    if ((st = get_int(path, root, "hidden_size", true, &cfg->dim)) ||
        (st = get_int(path, root, "intermediate_size", true, &cfg->ffn_dim)) ||
        (st = get_int(path, root, "num_hidden_layers", true, &cfg->n_layers)) ||
        (st = get_int(path, root, "num_attention_heads", true, &cfg->n_heads)) ||
        (st = get_int(path, root, "vocab_size", true, &cfg->vocab_size)) ||
        (st = get_int(path, root, "max_position_embeddings", false, &cfg->max_ctx)) ||
        (st = get_float(path, root, "rms_norm_eps", false, &cfg->rms_eps)) ||
        (st = get_float(path, root, "rope_theta", false, &cfg->rope_theta)) ||
        (st = get_bool(path, root, "tie_word_embeddings", &cfg->tied_embeddings)) ||
        (st = get_bool(path, root, "attention_bias", &cfg->qkv_bias)))
        goto out;
    cfg->n_kv_heads = cfg->n_heads;
    if ((st = get_int(path, root, "num_key_value_heads", false, &cfg->n_kv_heads)))
        goto out;
    if (!item(root, "head_dim") && cfg->dim % cfg->n_heads) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: hidden_size %d is not a multiple of num_attention_heads %d and no head_dim",
                           path, cfg->dim, cfg->n_heads);
        goto out;
    }
    cfg->head_dim = cfg->dim / cfg->n_heads;
    if ((st = get_int(path, root, "head_dim", false, &cfg->head_dim)))
        goto out;
    if (cfg->n_heads % cfg->n_kv_heads) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                           cfg->n_heads, cfg->n_kv_heads);
        goto out;
    }
    if (cfg->head_dim % 2) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: head_dim %d is odd", path, cfg->head_dim);
        goto out;
    }

    const cJSON *rp = item(root, "rope_parameters");
    const cJSON *rs = item(root, "rope_scaling");
    if (rp)
        st = parse_rope(path, rp, "rope_parameters", cfg);
    else if (rs)
        st = parse_rope(path, rs, "rope_scaling", cfg);
    if (st)
        goto out;

    if ((st = check_quant(path, item(root, "quantization_config"), cfg)))
        goto out;

    if (cfg->arch == OKV_ARCH_QWEN2)
        cfg->qkv_bias = true;
    if (cfg->arch == OKV_ARCH_QWEN3)
        cfg->qk_norm = true;
out:
    cJSON_Delete(root);
    return st;
}

enum okv_status okv_hf_config_load(const char *dir, struct okv_model_config *cfg)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: path too long", dir);
    char *text;
    size_t len;
    enum okv_status st = okv_model_read_file(path, 16u << 20, &text, &len);
    if (st)
        return st;
    st = okv_hf_config_parse(path, text, len, cfg);
    okv_free(text);
    return st;
}
