/* GGUF v3 reader: memory-maps the file, walks the header once and validates every
 * length, count and offset against the file size before anything is allocated on
 * its behalf. Format summary in include/oasiskv/gguf.h.
 *
 * After open, metadata keys and tensor names sit in hash tables (O(1) lookup), and
 * each array of strings has an index of element offsets so that element i of the
 * vocabulary is O(1). Allocations are bounded by the file size: every indexed item
 * occupies at least 8 bytes of the file. */
#include "oasiskv/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u
#define GGUF_VERSION 3u
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_ARRAY_DEPTH 4

/* ggml tensor types: name, elements per block, bytes per block. A type with
 * block 0 is unknown: its size cannot be validated and views of it are refused. */
struct ggml_type_info {
    const char *name;
    uint32_t blck;
    uint32_t size;
};

static const struct ggml_type_info k_ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},        [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof k_ggml_types / sizeof k_ggml_types[0])

struct gguf_kv {
    const char *key;        /* into the mapping, not NUL-terminated */
    size_t key_len;
    uint32_t type;
    const uint8_t *val;     /* scalar: the value; string: its bytes; array: first element */
    uint64_t len;           /* string: byte length; array: element count */
    uint32_t elem_type;     /* arrays */
    uint64_t *str_offs;     /* arrays of strings: offset of each element's u64 length */
};

struct gguf_tensor {
    char name[OKV_TENSOR_NAME_MAX];
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset;        /* from the start of the data section */
    uint64_t nbytes;        /* 0 when the type is unknown */
};

struct okv_gguf {
    char *path;
    uint32_t version;
    const uint8_t *base;
    size_t size;
    uint64_t n_kv;
    struct gguf_kv *kvs;
    uint32_t *kv_hash;      /* open addressing, index + 1, 0 = empty */
    uint64_t kv_hash_cap;
    uint64_t n_tensors;
    struct gguf_tensor *tensors;
    uint32_t *t_hash;
    uint64_t t_hash_cap;
    uint64_t alignment;
    uint64_t data_off;
};

/* ---- cursor over the mapping ---- */

struct cur {
    const uint8_t *base;
    size_t size;
    size_t off;
    const char *path;
};

static enum okv_status trunc_err(const struct cur *c, const char *what)
{
    return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated or corrupt: %s at offset %zu runs past the end of the file (%zu bytes)",
                         c->path, what, c->off, c->size);
}

static bool cur_need(const struct cur *c, uint64_t n) { return n <= c->size - c->off; }

static bool rd_u32(struct cur *c, uint32_t *v)
{
    if (!cur_need(c, 4))
        return false;
    memcpy(v, c->base + c->off, 4);
    c->off += 4;
    return true;
}

static bool rd_u64(struct cur *c, uint64_t *v)
{
    if (!cur_need(c, 8))
        return false;
    memcpy(v, c->base + c->off, 8);
    c->off += 8;
    return true;
}

/* A string: on success *s points into the mapping. */
static bool rd_str(struct cur *c, const char **s, uint64_t *len)
{
    uint64_t n;
    if (!rd_u64(c, &n))
        return false;
    if (!cur_need(c, n)) {
        c->off -= 8;
        return false;
    }
    *s = (const char *)c->base + c->off;
    *len = n;
    c->off += n;
    return true;
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case OKV_GGUF_TYPE_U8: case OKV_GGUF_TYPE_I8: case OKV_GGUF_TYPE_BOOL: return 1;
    case OKV_GGUF_TYPE_U16: case OKV_GGUF_TYPE_I16: return 2;
    case OKV_GGUF_TYPE_U32: case OKV_GGUF_TYPE_I32: case OKV_GGUF_TYPE_F32: return 4;
    case OKV_GGUF_TYPE_U64: case OKV_GGUF_TYPE_I64: case OKV_GGUF_TYPE_F64: return 8;
    default: return 0;
    }
}

/* Skip one value of type t (used for nested arrays, whose elements we do not index). */
static enum okv_status skip_value(struct cur *c, uint32_t t, int depth, const char *key)
{
    size_t ss = scalar_size(t);
    if (ss) {
        if (!cur_need(c, ss))
            return trunc_err(c, "a value");
        c->off += ss;
        return OKV_OK;
    }
    if (t == OKV_GGUF_TYPE_STRING) {
        const char *s;
        uint64_t n;
        return rd_str(c, &s, &n) ? OKV_OK : trunc_err(c, "a string value");
    }
    if (t == OKV_GGUF_TYPE_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (depth >= GGUF_MAX_ARRAY_DEPTH)
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF key '%s': arrays nested too deep", c->path, key);
        if (!rd_u32(c, &et) || !rd_u64(c, &n))
            return trunc_err(c, "an array header");
        size_t es = scalar_size(et);
        if (es) {
            if (n > (c->size - c->off) / es)
                return trunc_err(c, "array elements");
            c->off += n * es;
            return OKV_OK;
        }
        if (et != OKV_GGUF_TYPE_STRING && et != OKV_GGUF_TYPE_ARRAY)
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF key '%s': bad array element type %u", c->path, key, et);
        if (n > (c->size - c->off) / 8)   /* each element takes at least 8 bytes */
            return trunc_err(c, "array elements");
        for (uint64_t i = 0; i < n; i++) {
            enum okv_status st = skip_value(c, et, depth + 1, key);
            if (st)
                return st;
        }
        return OKV_OK;
    }
    return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF key '%s': bad value type %u", c->path, key, t);
}

/* ---- hashing ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t hash_cap_for(uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    return cap;
}

static int64_t kv_find(const okv_gguf *g, const char *key)
{
    if (!g || !key || !g->kv_hash)
        return -1;
    size_t n = strlen(key);
    uint64_t mask = g->kv_hash_cap - 1;
    for (uint64_t h = hash_bytes(key, n) & mask;; h = (h + 1) & mask) {
        uint32_t slot = g->kv_hash[h];
        if (!slot)
            return -1;
        const struct gguf_kv *kv = &g->kvs[slot - 1];
        if (kv->key_len == n && memcmp(kv->key, key, n) == 0)
            return slot - 1;
    }
}

static int64_t tensor_find(const okv_gguf *g, const char *name)
{
    if (!g || !name || !g->t_hash)
        return -1;
    size_t n = strlen(name);
    uint64_t mask = g->t_hash_cap - 1;
    for (uint64_t h = hash_bytes(name, n) & mask;; h = (h + 1) & mask) {
        uint32_t slot = g->t_hash[h];
        if (!slot)
            return -1;
        if (strcmp(g->tensors[slot - 1].name, name) == 0)
            return slot - 1;
    }
}

/* ---- parsing ---- */

static enum okv_status parse_kv(okv_gguf *g, struct cur *c, uint64_t idx)
{
    struct gguf_kv *kv = &g->kvs[idx];
    uint64_t klen;
    if (!rd_str(c, &kv->key, &klen))
        return trunc_err(c, "a metadata key");
    kv->key_len = (size_t)klen;
    if (!rd_u32(c, &kv->type))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the type of key '%.*s' (metadata entry %llu)",
                             g->path, (int)(klen > 200 ? 200 : klen), kv->key, (unsigned long long)idx);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(klen > 200 ? 200 : klen), kv->key);

    size_t ss = scalar_size(kv->type);
    if (ss) {
        if (!cur_need(c, ss))
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the value of key '%s'", g->path, key);
        kv->val = c->base + c->off;
        c->off += ss;
        return OKV_OK;
    }
    if (kv->type == OKV_GGUF_TYPE_STRING) {
        const char *s;
        if (!rd_str(c, &s, &kv->len))
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the string value of key '%s'", g->path, key);
        kv->val = (const uint8_t *)s;
        return OKV_OK;
    }
    if (kv->type != OKV_GGUF_TYPE_ARRAY)
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF key '%s' has an invalid value type %u", g->path, key, kv->type);

    if (!rd_u32(c, &kv->elem_type) || !rd_u64(c, &kv->len))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the array header of key '%s'", g->path, key);
    kv->val = c->base + c->off;
    size_t es = scalar_size(kv->elem_type);
    if (es) {
        if (kv->len > (c->size - c->off) / es)
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF array '%s' of %llu elements runs past the end of the file",
                                 g->path, key, (unsigned long long)kv->len);
        c->off += kv->len * es;
        return OKV_OK;
    }
    if (kv->elem_type == OKV_GGUF_TYPE_STRING) {
        if (kv->len > (c->size - c->off) / 8)
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF array '%s' of %llu strings runs past the end of the file",
                                 g->path, key, (unsigned long long)kv->len);
        kv->str_offs = okv_malloc((kv->len ? kv->len : 1) * sizeof(uint64_t), OKV_TAG_MODEL);
        if (!kv->str_offs)
            return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory to index array '%s'", g->path, key);
        for (uint64_t i = 0; i < kv->len; i++) {
            kv->str_offs[i] = c->off;
            const char *s;
            uint64_t n;
            if (!rd_str(c, &s, &n))
                return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in element %llu of string array '%s'",
                                     g->path, (unsigned long long)i, key);
        }
        return OKV_OK;
    }
    if (kv->elem_type == OKV_GGUF_TYPE_ARRAY) {
        /* Nested arrays are legal but unused by the models we load: skip them. */
        c->off -= 12;
        return skip_value(c, OKV_GGUF_TYPE_ARRAY, 0, key);
    }
    return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF array '%s' has an invalid element type %u", g->path, key, kv->elem_type);
}

static enum okv_status parse_tensor_info(okv_gguf *g, struct cur *c, uint64_t idx)
{
    struct gguf_tensor *t = &g->tensors[idx];
    const char *name;
    uint64_t nlen;
    if (!rd_str(c, &name, &nlen))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the name of tensor %llu", g->path, (unsigned long long)idx);
    if (nlen == 0 || nlen >= OKV_TENSOR_NAME_MAX)
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor %llu has a name of %llu bytes (1..%d allowed)", g->path,
                             (unsigned long long)idx, (unsigned long long)nlen, OKV_TENSOR_NAME_MAX - 1);
    memcpy(t->name, name, nlen);
    t->name[nlen] = '\0';
    if (memchr(t->name, '\0', nlen))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor %llu has a NUL byte in its name", g->path, (unsigned long long)idx);
    if (!rd_u32(c, &t->n_dims))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the info of tensor '%s'", g->path, t->name);
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor '%s' has %u dimensions (1..%u allowed)", g->path, t->name,
                             t->n_dims, GGUF_MAX_DIMS);
    uint64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && !rd_u64(c, &ne))
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the shape of tensor '%s'", g->path, t->name);
        if (ne == 0 || ne > (uint64_t)INT64_MAX || ne > UINT64_MAX / nel || nel * ne > ((uint64_t)1 << 50))
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor '%s' has an invalid dimension ne[%u] = %llu", g->path,
                                 t->name, d, (unsigned long long)ne);
        nel *= ne;
        t->ne[d] = (int64_t)ne;
    }
    if (!rd_u32(c, &t->type) || !rd_u64(c, &t->offset))
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated in the info of tensor '%s'", g->path, t->name);
    if (t->type < N_GGML_TYPES && k_ggml_types[t->type].blck) {
        const struct ggml_type_info *ti = &k_ggml_types[t->type];
        if ((uint64_t)t->ne[0] % ti->blck)
            return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor '%s' of type %s: row length %lld is not a multiple of %u",
                                 g->path, t->name, ti->name, (long long)t->ne[0], ti->blck);
        t->nbytes = nel / ti->blck * ti->size;
    }
    if (t->offset % g->alignment)
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor '%s' has offset %llu, not a multiple of the alignment %llu",
                             g->path, t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
    return OKV_OK;
}

void okv_gguf_close(okv_gguf *g)
{
    if (!g)
        return;
    if (g->kvs)
        for (uint64_t i = 0; i < g->n_kv; i++)
            okv_free(g->kvs[i].str_offs);
    okv_free(g->kvs);
    okv_free(g->kv_hash);
    okv_free(g->tensors);
    okv_free(g->t_hash);
    if (g->base)
        munmap((void *)g->base, g->size);
    okv_free(g->path);
    okv_free(g);
}

static enum okv_status map_file(okv_gguf *g)
{
    int fd = open(g->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return okv_set_error(OKV_ERR_IO, "%s: cannot open: %s", g->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return okv_set_error(OKV_ERR_IO, "%s: cannot stat: %s", g->path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return okv_set_error(OKV_ERR_IO, "%s: not a regular file", g->path);
    }
    if (sb.st_size < 24) {
        close(fd);
        return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF truncated: %lld bytes, shorter than the 24-byte header", g->path,
                             (long long)sb.st_size);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return okv_set_error(OKV_ERR_IO, "%s: cannot mmap %lld bytes: %s", g->path, (long long)sb.st_size, strerror(errno));
    g->base = p;
    g->size = (size_t)sb.st_size;
    return OKV_OK;
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a, *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* No two tensors may share bytes: a corrupt type, shape or offset that makes one tensor's
 * range run into another's is refused rather than read as weights. */
static enum okv_status check_overlap(okv_gguf *g)
{
    if (g->n_tensors < 2)
        return OKV_OK;
    const struct gguf_tensor **v = okv_malloc(g->n_tensors * sizeof *v, OKV_TAG_MODEL);
    if (!v)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for the GGUF index", g->path);
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].nbytes)
            v[n++] = &g->tensors[i];
    qsort(v, n, sizeof *v, cmp_tensor_offset);
    enum okv_status st = OKV_OK;
    for (uint64_t i = 1; i < n && !st; i++)
        if (v[i - 1]->offset + v[i - 1]->nbytes > v[i]->offset)   /* both bounded by the file size */
            st = okv_set_error(OKV_ERR_FORMAT,
                               "%s: GGUF tensors '%s' (data [%llu, +%llu)) and '%s' (data at %llu) overlap: a corrupt "
                               "type, shape or offset",
                               g->path, v[i - 1]->name, (unsigned long long)v[i - 1]->offset,
                               (unsigned long long)v[i - 1]->nbytes, v[i]->name, (unsigned long long)v[i]->offset);
    okv_free(v);
    return st;
}

static enum okv_status build_hashes(okv_gguf *g)
{
    g->kv_hash_cap = hash_cap_for(g->n_kv);
    g->kv_hash = okv_calloc(g->kv_hash_cap, sizeof(uint32_t), OKV_TAG_MODEL);
    g->t_hash_cap = hash_cap_for(g->n_tensors);
    g->t_hash = okv_calloc(g->t_hash_cap, sizeof(uint32_t), OKV_TAG_MODEL);
    if (!g->kv_hash || !g->t_hash)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for the GGUF index", g->path);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct gguf_kv *kv = &g->kvs[i];
        uint64_t mask = g->kv_hash_cap - 1, h = hash_bytes(kv->key, kv->key_len) & mask;
        for (; g->kv_hash[h]; h = (h + 1) & mask) {
            const struct gguf_kv *o = &g->kvs[g->kv_hash[h] - 1];
            if (o->key_len == kv->key_len && memcmp(o->key, kv->key, kv->key_len) == 0)
                return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF metadata key '%.*s' appears twice", g->path,
                                     (int)(kv->key_len > 200 ? 200 : kv->key_len), kv->key);
        }
        g->kv_hash[h] = (uint32_t)(i + 1);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        uint64_t mask = g->t_hash_cap - 1, h = hash_bytes(name, strlen(name)) & mask;
        for (; g->t_hash[h]; h = (h + 1) & mask)
            if (strcmp(g->tensors[g->t_hash[h] - 1].name, name) == 0)
                return okv_set_error(OKV_ERR_FORMAT, "%s: GGUF tensor '%s' appears twice", g->path, name);
        g->t_hash[h] = (uint32_t)(i + 1);
    }
    return OKV_OK;
}

enum okv_status okv_gguf_open(const char *path, okv_gguf **out)
{
    if (!path || !out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_gguf_open: NULL argument");
    *out = NULL;
    okv_gguf *g = okv_calloc(1, sizeof *g, OKV_TAG_MODEL);
    if (!g)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    enum okv_status st = OKV_ERR_NO_MEMORY;
    g->path = okv_strdup(path, OKV_TAG_MODEL);
    if (!g->path) {
        okv_set_error(st, "%s: no memory", path);
        goto fail;
    }
    if ((st = map_file(g)))
        goto fail;

    struct cur c = {g->base, g->size, 0, g->path};
    uint32_t magic = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    rd_u32(&c, &magic);       /* the 24-byte header is known to be present */
    rd_u32(&c, &g->version);
    rd_u64(&c, &n_tensors);
    rd_u64(&c, &n_kv);
    st = OKV_ERR_FORMAT;
    if (magic != GGUF_MAGIC) {
        okv_set_error(st, "%s: not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")", path, magic, GGUF_MAGIC);
        goto fail;
    }
    if (g->version != GGUF_VERSION) {
        okv_set_error(st, "%s: GGUF version %u is not supported (only version %u)", path, g->version, GGUF_VERSION);
        goto fail;
    }
    /* A metadata entry takes at least 8 (key) + 4 (type) + 1 bytes; a tensor info
     * 8 (name) + 4 + 8 + 4 + 8 bytes. Larger counts cannot fit in the file. */
    if (n_kv > (g->size - c.off) / 13) {
        okv_set_error(st, "%s: GGUF kv_count %llu cannot fit in a file of %zu bytes", path, (unsigned long long)n_kv, g->size);
        goto fail;
    }
    if (n_tensors > (g->size - c.off) / 32) {
        okv_set_error(st, "%s: GGUF tensor_count %llu cannot fit in a file of %zu bytes", path,
                      (unsigned long long)n_tensors, g->size);
        goto fail;
    }
    if (n_kv >= UINT32_MAX || n_tensors >= UINT32_MAX) {
        okv_set_error(st, "%s: GGUF counts too large", path);
        goto fail;
    }
    g->n_kv = n_kv;
    g->kvs = okv_calloc(n_kv ? n_kv : 1, sizeof *g->kvs, OKV_TAG_MODEL);
    if (!g->kvs) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for %llu metadata entries", path, (unsigned long long)n_kv);
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++)
        if ((st = parse_kv(g, &c, i)))
            goto fail;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        const struct gguf_kv *kv = &g->kvs[i];
        if (kv->key_len == 17 && memcmp(kv->key, "general.alignment", 17) == 0) {
            uint32_t a = 0;
            if (kv->type != OKV_GGUF_TYPE_U32) {
                st = okv_set_error(OKV_ERR_FORMAT, "%s: GGUF general.alignment must be a u32 (type %u)", path, kv->type);
                goto fail;
            }
            memcpy(&a, kv->val, 4);
            if (a == 0 || (a & (a - 1)) || a > (1u << 20)) {
                st = okv_set_error(OKV_ERR_FORMAT, "%s: GGUF general.alignment %u is not a power of two", path, a);
                goto fail;
            }
            g->alignment = a;
        }
    }

    g->n_tensors = n_tensors;
    g->tensors = okv_calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors, OKV_TAG_MODEL);
    if (!g->tensors) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for %llu tensor infos", path, (unsigned long long)n_tensors);
        goto fail;
    }
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((st = parse_tensor_info(g, &c, i)))
            goto fail;

    g->data_off = (c.off + g->alignment - 1) / g->alignment * g->alignment;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        if (!t->nbytes)
            continue;   /* unknown type: refused when viewed */
        if (g->data_off > g->size || t->offset > g->size - g->data_off || t->nbytes > g->size - g->data_off - t->offset) {
            st = okv_set_error(OKV_ERR_FORMAT,
                               "%s: GGUF tensor '%s' data [%llu, +%llu) runs past the end of the file (%zu bytes, data section at %llu)",
                               path, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes, g->size,
                               (unsigned long long)g->data_off);
            goto fail;
        }
    }
    if ((st = check_overlap(g)) || (st = build_hashes(g)))
        goto fail;
    *out = g;
    return OKV_OK;

fail:
    okv_gguf_close(g);
    return st;
}

const char *okv_gguf_path(const okv_gguf *g) { return g ? g->path : NULL; }
uint32_t okv_gguf_version(const okv_gguf *g) { return g ? g->version : 0; }

bool okv_gguf_has(const okv_gguf *g, const char *key) { return kv_find(g, key) >= 0; }

static bool read_int(uint32_t type, const uint8_t *p, int64_t *out)
{
    switch (type) {
    case OKV_GGUF_TYPE_U8: case OKV_GGUF_TYPE_BOOL: *out = *p; return true;
    case OKV_GGUF_TYPE_I8: *out = (int8_t)*p; return true;
    case OKV_GGUF_TYPE_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case OKV_GGUF_TYPE_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case OKV_GGUF_TYPE_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case OKV_GGUF_TYPE_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case OKV_GGUF_TYPE_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)v;
        return true;
    }
    case OKV_GGUF_TYPE_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return true; }
    default: return false;
    }
}

static bool read_f32(uint32_t type, const uint8_t *p, float *out)
{
    if (type == OKV_GGUF_TYPE_F32) {
        memcpy(out, p, 4);
        return true;
    }
    if (type == OKV_GGUF_TYPE_F64) {
        double d;
        memcpy(&d, p, 8);
        *out = (float)d;
        return true;
    }
    return false;
}

bool okv_gguf_get_int(const okv_gguf *g, const char *key, int64_t *out)
{
    int64_t i = kv_find(g, key);
    return i >= 0 && read_int(g->kvs[i].type, g->kvs[i].val, out);
}

bool okv_gguf_get_f32(const okv_gguf *g, const char *key, float *out)
{
    int64_t i = kv_find(g, key);
    return i >= 0 && read_f32(g->kvs[i].type, g->kvs[i].val, out);
}

bool okv_gguf_get_bool(const okv_gguf *g, const char *key, bool *out)
{
    int64_t i = kv_find(g, key);
    if (i < 0 || g->kvs[i].type != OKV_GGUF_TYPE_BOOL)
        return false;
    *out = *g->kvs[i].val != 0;
    return true;
}

bool okv_gguf_get_str(const okv_gguf *g, const char *key, const char **s, size_t *len)
{
    int64_t i = kv_find(g, key);
    if (i < 0 || g->kvs[i].type != OKV_GGUF_TYPE_STRING)
        return false;
    *s = (const char *)g->kvs[i].val;
    *len = (size_t)g->kvs[i].len;
    return true;
}

bool okv_gguf_get_arr(const okv_gguf *g, const char *key, enum okv_gguf_type *elem, uint64_t *n)
{
    int64_t i = kv_find(g, key);
    if (i < 0 || g->kvs[i].type != OKV_GGUF_TYPE_ARRAY)
        return false;
    if (elem)
        *elem = (enum okv_gguf_type)g->kvs[i].elem_type;
    if (n)
        *n = g->kvs[i].len;
    return true;
}

static const struct gguf_kv *arr_kv(const okv_gguf *g, const char *key, uint64_t i)
{
    int64_t k = kv_find(g, key);
    if (k < 0 || g->kvs[k].type != OKV_GGUF_TYPE_ARRAY || i >= g->kvs[k].len)
        return NULL;
    return &g->kvs[k];
}

bool okv_gguf_arr_str(const okv_gguf *g, const char *key, uint64_t i, const char **s, size_t *len)
{
    const struct gguf_kv *kv = arr_kv(g, key, i);
    if (!kv || kv->elem_type != OKV_GGUF_TYPE_STRING || !kv->str_offs)
        return false;
    uint64_t n;
    memcpy(&n, g->base + kv->str_offs[i], 8);
    *s = (const char *)g->base + kv->str_offs[i] + 8;
    *len = (size_t)n;
    return true;
}

bool okv_gguf_arr_int(const okv_gguf *g, const char *key, uint64_t i, int64_t *out)
{
    const struct gguf_kv *kv = arr_kv(g, key, i);
    size_t es = kv ? scalar_size(kv->elem_type) : 0;
    return es && read_int(kv->elem_type, kv->val + i * es, out);
}

bool okv_gguf_arr_f32(const okv_gguf *g, const char *key, uint64_t i, float *out)
{
    const struct gguf_kv *kv = arr_kv(g, key, i);
    size_t es = kv ? scalar_size(kv->elem_type) : 0;
    return es && read_f32(kv->elem_type, kv->val + i * es, out);
}

int64_t okv_gguf_n_tensors(const okv_gguf *g) { return g ? (int64_t)g->n_tensors : 0; }

static enum okv_status make_view(const okv_gguf *g, const struct gguf_tensor *t, struct okv_tensor_view *out)
{
    memset(out, 0, sizeof *out);
    enum okv_dtype dt;
    switch (t->type) {
    case 0: dt = OKV_DTYPE_F32; break;
    case 1: dt = OKV_DTYPE_F16; break;
    case 2: dt = OKV_DTYPE_Q4_0; break;
    case 3: dt = OKV_DTYPE_Q4_1; break;
    case 6: dt = OKV_DTYPE_Q5_0; break;
    case 7: dt = OKV_DTYPE_Q5_1; break;
    case 8: dt = OKV_DTYPE_Q8_0; break;
    case 10: dt = OKV_DTYPE_Q2_K; break;
    case 11: dt = OKV_DTYPE_Q3_K; break;
    case 12: dt = OKV_DTYPE_Q4_K; break;
    case 13: dt = OKV_DTYPE_Q5_K; break;
    case 14: dt = OKV_DTYPE_Q6_K; break;
    case 16: dt = OKV_DTYPE_IQ2_XXS; break;
    case 17: dt = OKV_DTYPE_IQ2_XS; break;
    case 18: dt = OKV_DTYPE_IQ3_XXS; break;
    case 19: dt = OKV_DTYPE_IQ1_S; break;
    case 20: dt = OKV_DTYPE_IQ4_NL; break;
    case 21: dt = OKV_DTYPE_IQ3_S; break;
    case 22: dt = OKV_DTYPE_IQ2_S; break;
    case 23: dt = OKV_DTYPE_IQ4_XS; break;
    case 29: dt = OKV_DTYPE_IQ1_M; break;
    case 30: dt = OKV_DTYPE_BF16; break;
    default: {
        const char *tn = t->type < N_GGML_TYPES && k_ggml_types[t->type].name ? k_ggml_types[t->type].name : "unknown";
        return okv_set_error(OKV_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has ggml type %s (%u); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                             "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, "
                             "IQ4_NL, IQ4_XS",
                             g->path, t->name, tn, t->type);
    }
    }
    memcpy(out->name, t->name, sizeof out->name);
    out->dtype = dt;
    out->n_dims = (int)t->n_dims;
    for (int d = 0; d < OKV_TENSOR_MAX_DIMS; d++)
        out->ne[d] = t->ne[d];
    out->data = g->base + g->data_off + t->offset;
    out->nbytes = (size_t)t->nbytes;
    return OKV_OK;
}

enum okv_status okv_gguf_tensor(const okv_gguf *g, int64_t i, struct okv_tensor_view *out)
{
    if (!g || !out || i < 0 || (uint64_t)i >= g->n_tensors)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: tensor index %lld out of range", g ? g->path : "(null)", (long long)i);
    return make_view(g, &g->tensors[i], out);
}

enum okv_status okv_gguf_find_tensor(const okv_gguf *g, const char *name, struct okv_tensor_view *out)
{
    if (!g || !name || !out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_gguf_find_tensor: NULL argument");
    int64_t i = tensor_find(g, name);
    if (i < 0) {
        memset(out, 0, sizeof *out);
        return okv_set_error(OKV_ERR_NOT_FOUND, "%s: tensor '%s' not found", g->path, name);
    }
    return make_view(g, &g->tensors[i], out);
}
