/* safetensors reader.
 *
 * A file is a u64 (little-endian) header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [out, in], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {...}}
 * and then the byte buffer; offsets are relative to the buffer and [begin, end).
 * A sharded checkpoint adds model.safetensors.index.json whose "weight_map" maps
 * each tensor name to its shard's file name.
 *
 * Files are memory-mapped read-only. Every header is validated when opened: dtype,
 * shape, offsets inside the buffer and end - begin equal to the shape's bytes. Views
 * use GGUF's dimension order (ne[0] = the last, innermost dimension). */
#include "model/model_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER (256u << 20)
#define ST_MAX_RANK 8

enum st_dtype {
    ST_F32 = 0, ST_F16, ST_BF16,    /* supported */
    ST_F64, ST_I64, ST_U64, ST_I32, ST_U32, ST_I16, ST_U16, ST_I8, ST_U8, ST_BOOL, ST_F8_E4M3, ST_F8_E5M2,
    ST_N_DTYPES
};

static const struct { const char *name; size_t size; } k_st_dtypes[ST_N_DTYPES] = {
    [ST_F32] = {"F32", 4},   [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
    [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},   [ST_I32] = {"I32", 4},   [ST_U32] = {"U32", 4},
    [ST_I16] = {"I16", 2},   [ST_U16] = {"U16", 2},   [ST_I8] = {"I8", 1},     [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

struct st_file {
    char *path;
    const uint8_t *base;
    size_t size;
    size_t data_off;      /* 8 + N */
};

struct st_tensor {
    char *name;
    int file;
    int dtype;            /* enum st_dtype */
    int rank;
    int64_t shape[ST_MAX_RANK];
    size_t begin, nbytes; /* relative to the file's data section */
};

struct okv_st_set {
    struct st_file *files;
    int n_files;
    struct st_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    uint32_t *hash;       /* index + 1, 0 = empty */
    uint64_t hash_cap;
    int64_t fp8_block[2]; /* okv_st_set_fp8_block; 0: not given */
    int pack_layout;      /* okv_st_set_pack */
    int pack_bits;        /* 0: from the shapes */
    int64_t pack_group;   /* 0: from the shapes; < 0: one group a column */
    int pack_zero_offset;
};

void okv_st_set_pack(struct okv_st_set *s, int layout, int bits, int64_t group, int zero_offset)
{
    if (s) {
        s->pack_layout = layout;
        s->pack_bits = bits;
        s->pack_group = group;
        s->pack_zero_offset = zero_offset;
    }
}

void okv_st_set_fp8_block(struct okv_st_set *s, int64_t rows, int64_t cols)
{
    if (s) {
        s->fp8_block[0] = rows > 0 ? rows : 0;
        s->fp8_block[1] = cols > 0 ? cols : 0;
    }
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int64_t st_lookup(const struct okv_st_set *s, const char *name)
{
    if (!s || !s->hash || !name)
        return -1;
    uint64_t mask = s->hash_cap - 1;
    for (uint64_t h = hash_str(name) & mask; s->hash[h]; h = (h + 1) & mask)
        if (strcmp(s->tensors[s->hash[h] - 1].name, name) == 0)
            return s->hash[h] - 1;
    return -1;
}

void okv_st_close(struct okv_st_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].base)
            munmap((void *)s->files[i].base, s->files[i].size);
        okv_free(s->files[i].path);
    }
    okv_free(s->files);
    for (int64_t i = 0; i < s->n_tensors; i++)
        okv_free(s->tensors[i].name);
    okv_free(s->tensors);
    okv_free(s->hash);
    okv_free(s);
}

enum okv_status okv_model_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return okv_set_error(errno == ENOENT ? OKV_ERR_NOT_FOUND : OKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return okv_set_error(OKV_ERR_IO, "%s: not a readable regular file", path);
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        fclose(f);
        return okv_set_error(OKV_ERR_FORMAT, "%s: %lld bytes, larger than the %zu allowed", path, (long long)sb.st_size,
                             max_bytes);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = okv_malloc(n + 1, OKV_TAG_MODEL);
    if (!buf) {
        fclose(f);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for %zu bytes", path, n);
    }
    size_t got = n ? fread(buf, 1, n, f) : 0;
    fclose(f);
    if (got != n) {
        okv_free(buf);
        return okv_set_error(OKV_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return OKV_OK;
}

static enum okv_status add_file(struct okv_st_set *s, const char *path, int *idx)
{
    struct st_file *nf = okv_realloc(s->files, (size_t)(s->n_files + 1) * sizeof *nf, OKV_TAG_MODEL);
    if (!nf)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    s->files = nf;
    struct st_file *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    f->path = okv_strdup(path, OKV_TAG_MODEL);
    if (!f->path)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    *idx = s->n_files++;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return okv_set_error(errno == ENOENT ? OKV_ERR_NOT_FOUND : OKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return okv_set_error(OKV_ERR_IO, "%s: not a readable regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return okv_set_error(OKV_ERR_FORMAT, "%s: safetensors truncated: %lld bytes, no 8-byte header length", path,
                             (long long)sb.st_size);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return okv_set_error(OKV_ERR_IO, "%s: cannot mmap: %s", path, strerror(errno));
    f->base = p;
    f->size = (size_t)sb.st_size;
    return OKV_OK;
}

static int parse_dtype(const char *s)
{
    for (int i = 0; i < ST_N_DTYPES; i++)
        if (strcmp(s, k_st_dtypes[i].name) == 0)
            return i;
    return -1;
}

/* A JSON number that is a non-negative integer no larger than max. */
static bool json_uint(const cJSON *j, double max, uint64_t *out)
{
    if (!cJSON_IsNumber(j))
        return false;
    double v = j->valuedouble;
    if (!(v >= 0) || v > max || floor(v) != v)
        return false;
    *out = (uint64_t)v;
    return true;
}

static enum okv_status add_tensor(struct okv_st_set *s, struct st_tensor *t)
{
    if (s->n_tensors == s->cap_tensors) {
        int64_t cap = s->cap_tensors ? 2 * s->cap_tensors : 256;
        struct st_tensor *nt = okv_realloc(s->tensors, (size_t)cap * sizeof *nt, OKV_TAG_MODEL);
        if (!nt)
            return okv_set_error(OKV_ERR_NO_MEMORY, "no memory for the safetensors index");
        s->tensors = nt;
        s->cap_tensors = cap;
    }
    s->tensors[s->n_tensors++] = *t;
    return OKV_OK;
}

static int cmp_tensor_begin(const void *a, const void *b)
{
    const struct st_tensor *x = *(const struct st_tensor *const *)a, *y = *(const struct st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The tensors of file fi, s->tensors[first..), must not share bytes (the format forbids it:
 * a corrupt data_offsets would otherwise be read as another tensor's weights). */
static enum okv_status check_overlap(struct okv_st_set *s, int fi, int64_t first)
{
    int64_t n = s->n_tensors - first, k = 0;
    if (n < 2)
        return OKV_OK;
    const struct st_tensor **v = okv_malloc((size_t)n * sizeof *v, OKV_TAG_MODEL);
    if (!v)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", s->files[fi].path);
    for (int64_t i = first; i < s->n_tensors; i++)
        if (s->tensors[i].nbytes)
            v[k++] = &s->tensors[i];
    qsort(v, (size_t)k, sizeof *v, cmp_tensor_begin);
    enum okv_status st = OKV_OK;
    for (int64_t i = 1; i < k && !st; i++)
        if (v[i - 1]->begin + v[i - 1]->nbytes > v[i]->begin)
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensors '%s' and '%s' have overlapping data_offsets",
                               s->files[fi].path, v[i - 1]->name, v[i]->name);
    okv_free(v);
    return st;
}

/* Parse the header of file fi and append its tensors. */
static enum okv_status parse_header(struct okv_st_set *s, int fi)
{
    struct st_file *f = &s->files[fi];
    uint64_t n;
    memcpy(&n, f->base, 8);
    if (n > f->size - 8 || n > ST_MAX_HEADER)
        return okv_set_error(OKV_ERR_FORMAT, "%s: safetensors header length %llu exceeds the file (%zu bytes)", f->path,
                             (unsigned long long)n, f->size);
    f->data_off = 8 + (size_t)n;
    size_t data_size = f->size - f->data_off;
    /* Parse a NUL-terminated copy: the mapping may end right after the header. */
    char *text = okv_malloc((size_t)n + 1, OKV_TAG_MODEL);
    if (!text)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory for a %llu-byte header", f->path, (unsigned long long)n);
    memcpy(text, f->base + 8, (size_t)n);
    text[n] = '\0';
    cJSON *root = cJSON_ParseWithLength(text, (size_t)n);
    okv_free(text);
    if (!root)
        return okv_set_error(OKV_ERR_FORMAT, "%s: safetensors header is not valid JSON", f->path);
    enum okv_status st = OKV_OK;
    const int64_t first = s->n_tensors;
    if (!cJSON_IsObject(root)) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors header is not a JSON object", f->path);
        goto out;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        const char *name = e->string;
        if (!name) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors header entry without a name", f->path);
            goto out;
        }
        if (strcmp(name, "__metadata__") == 0)
            continue;
        if (!cJSON_IsObject(e)) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' is not an object", f->path, name);
            goto out;
        }
        const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' lacks a valid dtype, shape or data_offsets",
                               f->path, name);
            goto out;
        }
        struct st_tensor t = {0};
        t.file = fi;
        t.dtype = parse_dtype(jd->valuestring);
        if (t.dtype < 0) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' has an unknown dtype '%s'", f->path, name,
                               jd->valuestring);
            goto out;
        }
        t.rank = cJSON_GetArraySize(js);
        if (t.rank > ST_MAX_RANK) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' has rank %d", f->path, name, t.rank);
            goto out;
        }
        uint64_t nel = 1, begin, end;
        int d = 0;
        const cJSON *jv;
        cJSON_ArrayForEach(jv, js)
        {
            uint64_t v;
            if (!json_uint(jv, 9007199254740992.0, &v) || (v && nel > (UINT64_C(1) << 52) / v)) {
                st = okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' has an invalid shape[%d]", f->path, name, d);
                goto out;
            }
            nel *= v;
            t.shape[d++] = (int64_t)v;
        }
        if (!json_uint(cJSON_GetArrayItem(jo, 0), 9007199254740992.0, &begin) ||
            !json_uint(cJSON_GetArrayItem(jo, 1), 9007199254740992.0, &end) || begin > end || end > data_size) {
            st = okv_set_error(OKV_ERR_FORMAT,
                               "%s: safetensors tensor '%s' has data_offsets outside the data section (%zu bytes)",
                               f->path, name, data_size);
            goto out;
        }
        if (end - begin != nel * k_st_dtypes[t.dtype].size) {
            st = okv_set_error(OKV_ERR_FORMAT,
                               "%s: safetensors tensor '%s': data_offsets span %llu bytes, its shape and dtype need %llu",
                               f->path, name, (unsigned long long)(end - begin),
                               (unsigned long long)(nel * k_st_dtypes[t.dtype].size));
            goto out;
        }
        t.begin = (size_t)begin;
        t.nbytes = (size_t)(end - begin);
        t.name = okv_strdup(name, OKV_TAG_MODEL);
        if (!t.name) {
            st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", f->path);
            goto out;
        }
        if ((st = add_tensor(s, &t))) {
            okv_free(t.name);
            goto out;
        }
    }
    st = check_overlap(s, fi, first);
out:
    cJSON_Delete(root);
    return st;
}

static enum okv_status build_hash(struct okv_st_set *s)
{
    s->hash_cap = 16;
    while (s->hash_cap < 2 * (uint64_t)s->n_tensors)
        s->hash_cap <<= 1;
    s->hash = okv_calloc(s->hash_cap, sizeof *s->hash, OKV_TAG_MODEL);
    if (!s->hash)
        return okv_set_error(OKV_ERR_NO_MEMORY, "no memory for the safetensors index");
    uint64_t mask = s->hash_cap - 1;
    for (int64_t i = 0; i < s->n_tensors; i++) {
        const char *name = s->tensors[i].name;
        uint64_t h = hash_str(name) & mask;
        for (; s->hash[h]; h = (h + 1) & mask)
            if (strcmp(s->tensors[s->hash[h] - 1].name, name) == 0)
                return okv_set_error(OKV_ERR_FORMAT, "%s: safetensors tensor '%s' also appears in %s",
                                     s->files[s->tensors[i].file].path, name,
                                     s->files[s->tensors[s->hash[h] - 1].file].path);
        s->hash[h] = (uint32_t)(i + 1);
    }
    return OKV_OK;
}

enum okv_status okv_st_open_file(const char *path, struct okv_st_set **out)
{
    *out = NULL;
    struct okv_st_set *s = okv_calloc(1, sizeof *s, OKV_TAG_MODEL);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", path);
    int fi;
    enum okv_status st;
    if ((st = add_file(s, path, &fi)) || (st = parse_header(s, fi)) || (st = build_hash(s))) {
        okv_st_close(s);
        return st;
    }
    *out = s;
    return OKV_OK;
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Open every shard named by index.json's weight_map and check each mapping. */
static enum okv_status open_index(struct okv_st_set *s, const char *dir, const char *index_path)
{
    char *text;
    size_t len;
    enum okv_status st = okv_model_read_file(index_path, 64u << 20, &text, &len);
    if (st)
        return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    okv_free(text);
    if (!root)
        return okv_set_error(OKV_ERR_FORMAT, "%s: not valid JSON", index_path);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    const cJSON *e;
    char path[4096];
    if (!cJSON_IsObject(wm) || !wm->child) {
        st = okv_set_error(OKV_ERR_FORMAT, "%s: missing or empty \"weight_map\" object", index_path);
        goto out;
    }
    cJSON_ArrayForEach(e, wm)
    {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/') || e->valuestring[0] == '.') {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: weight_map entry '%s' does not name a shard file in the folder",
                               index_path, e->string ? e->string : "?");
            goto out;
        }
        if (snprintf(path, sizeof path, "%s/%s", dir, e->valuestring) >= (int)sizeof path) {
            st = okv_set_error(OKV_ERR_INVALID_ARG, "%s: shard path too long", index_path);
            goto out;
        }
        bool seen = false;
        for (int i = 0; i < s->n_files && !seen; i++)
            seen = strcmp(s->files[i].path, path) == 0;
        if (seen)
            continue;
        int fi;
        if ((st = add_file(s, path, &fi)) || (st = parse_header(s, fi)))
            goto out;
    }
    if ((st = build_hash(s)))
        goto out;
    cJSON_ArrayForEach(e, wm)
    {
        int64_t ti = st_lookup(s, e->string);
        snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
        if (ti < 0 || strcmp(s->files[s->tensors[ti].file].path, path) != 0) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: weight_map puts '%s' in %s, which does not hold it", index_path,
                               e->string, e->valuestring);
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    return st;
}

enum okv_status okv_st_open_dir(const char *dir, struct okv_st_set **out)
{
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir) >= (int)sizeof path)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: path too long", dir);
    if (!file_exists(path)) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (!file_exists(path))
            return okv_set_error(OKV_ERR_NOT_FOUND, "%s: no model.safetensors or model.safetensors.index.json", dir);
        return okv_st_open_file(path, out);
    }
    struct okv_st_set *s = okv_calloc(1, sizeof *s, OKV_TAG_MODEL);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", dir);
    enum okv_status st = open_index(s, dir, path);
    if (st) {
        okv_st_close(s);
        return st;
    }
    *out = s;
    return OKV_OK;
}

int64_t okv_st_n_tensors(const struct okv_st_set *s) { return s ? s->n_tensors : 0; }

static int64_t lookup_suffix(const struct okv_st_set *s, const char *name, const char *suffix)
{
    char n[600];
    if (snprintf(n, sizeof n, "%s%s", name, suffix) >= (int)sizeof n)
        return -1;
    return st_lookup(s, n);
}

/* "X.weight" -> "X.<suffix>" (GPTQ and AWQ name their tensors beside the module, not the weight) */
static int64_t lookup_module(const struct okv_st_set *s, const char *name, const char *suffix)
{
    const size_t n = strlen(name);
    if (n < 7 || strcmp(name + n - 7, ".weight") != 0)
        return -1;
    char m[600];
    if (snprintf(m, sizeof m, "%.*s.%s", (int)(n - 7), name, suffix) >= (int)sizeof m)
        return -1;
    return st_lookup(s, m);
}

bool okv_st_has(const struct okv_st_set *s, const char *name)
{
    return st_lookup(s, name) >= 0 || lookup_suffix(s, name, "_packed") >= 0 || lookup_module(s, name, "qweight") >= 0;
}

static bool st_int(const struct okv_st_set *s, const struct st_tensor *t, int64_t i, int64_t *out)
{
    const uint8_t *p = s->files[t->file].base + s->files[t->file].data_off + t->begin;
    if (t->dtype == ST_I64 && (size_t)(i + 1) * 8 <= t->nbytes) {
        memcpy(out, p + 8 * i, 8);
        return true;
    }
    if (t->dtype == ST_I32 && (size_t)(i + 1) * 4 <= t->nbytes) {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        *out = v;
        return true;
    }
    return false;
}

/* The fields every packed-integer view shares: a [rows][cols] matrix whose words are tensor P, with
 * the scale grid S of gr x gc values */
static void packed_fill(const struct okv_st_set *s, const char *name, const struct st_tensor *P, const struct st_tensor *S,
                        int64_t rows, int64_t cols, int64_t gr, int64_t gc, int bits, struct okv_tensor_view *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->dtype = OKV_DTYPE_INT_PACKED;
    out->n_dims = 2;
    out->ne[0] = cols;
    out->ne[1] = rows;
    out->ne[2] = out->ne[3] = 1;
    out->data = s->files[P->file].base + s->files[P->file].data_off + P->begin;
    out->nbytes = P->nbytes;
    out->scale.data = s->files[S->file].base + s->files[S->file].data_off + S->begin;
    out->scale.dtype = S->dtype == ST_F32 ? OKV_DTYPE_F32 : S->dtype == ST_F16 ? OKV_DTYPE_F16 : OKV_DTYPE_BF16;
    out->scale.rows = gr;
    out->scale.cols = gc;
    out->scale.bits = bits;
}

/* compressed-tensors "pack-quantized" weight `name` ("X.weight"): X.weight_packed (I32 [rows,
 * words]), X.weight_shape ([rows, cols]), X.weight_scale ([rows, groups] or [rows, 1] or [1]),
 * X.weight_zero_point when asymmetric (I32, packed down the rows: [ceil(rows * bits / 32),
 * groups]). Activation-ordered groups (X.weight_g_idx) are refused. */
static enum okv_status packed_view(const struct okv_st_set *s, const char *name, struct okv_tensor_view *out)
{
    const int64_t ip = lookup_suffix(s, name, "_packed"), ish = lookup_suffix(s, name, "_shape"),
                  isc = lookup_suffix(s, name, "_scale"), iz = lookup_suffix(s, name, "_zero_point");
    const struct st_tensor *P = &s->tensors[ip];
    const char *path = s->files[P->file].path;
    if (lookup_suffix(s, name, "_g_idx") >= 0)
        return okv_set_error(OKV_ERR_UNSUPPORTED,
                             "%s: '%s' is quantized with activation-ordered groups (%s_g_idx); not supported", path, name,
                             name);
    int64_t rows = 0, cols = 0;
    if (ish < 0 || isc < 0 || P->dtype != ST_I32 || P->rank != 2 || !st_int(s, &s->tensors[ish], 0, &rows) ||
        !st_int(s, &s->tensors[ish], 1, &cols) || rows != P->shape[0] || cols < 1)
        return okv_set_error(OKV_ERR_FORMAT,
                             "%s: packed weight '%s' needs %s_packed (I32 [rows, words]), %s_shape ([rows, cols]) and "
                             "%s_scale that agree",
                             path, name, name, name, name);
    const int64_t wpr = P->shape[1];
    int bits = s->pack_bits;
    if (!bits)
        bits = cols % 32 == 0 && (wpr * 32) % cols == 0 ? (int)(wpr * 32 / cols) : 0;
    if ((bits != 4 && bits != 8) || wpr != (cols * bits + 31) / 32)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: packed weight '%s' ([%lld, %lld] in %lld words a row): only 4- and 8-bit "
                             "integers are supported",
                             path, name, (long long)rows, (long long)cols, (long long)wpr);
    const struct st_tensor *S = &s->tensors[isc];
    if (S->dtype > ST_BF16 || S->rank > 2)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: scale of '%s' has dtype %s / rank %d (F32, F16 or BF16, rank <= 2)", path,
                             name, k_st_dtypes[S->dtype].name, S->rank);
    int64_t gr = S->rank == 2 ? S->shape[0] : 1, gc = S->rank == 2 ? S->shape[1] : 1;
    if (S->rank == 1 && S->shape[0] != 1)
        gr = -1;
    int64_t group = gc == 1 ? cols : s->pack_group > 0 ? s->pack_group : (cols + gc - 1) / gc;   /* compressed-tensors */
    if (!(gr == rows || (gr == 1 && gc == 1)) || (cols + group - 1) / group != gc)
        return okv_set_error(OKV_ERR_FORMAT, "%s: scale of '%s' ([%lld, %lld]) does not fit its [%lld, %lld] in groups of %lld", path,
                             name, (long long)gr, (long long)gc, (long long)rows, (long long)cols, (long long)group);
    packed_fill(s, name, P, S, rows, cols, gr, gc, bits, out);
    out->scale.block_rows = gr == 1 ? rows : 1;
    out->scale.block_cols = group;
    out->scale.words_per_row = wpr;
    if (iz >= 0) {
        const struct st_tensor *Z = &s->tensors[iz];
        if (Z->dtype != ST_I32 || Z->rank != 2 || Z->shape[0] != (gr * bits + 31) / 32 || Z->shape[1] != gc)
            return okv_set_error(OKV_ERR_UNSUPPORTED,
                                 "%s: zero points of '%s' are not I32 packed down the rows ([%lld, %lld] expected)", path,
                                 name, (long long)((gr * bits + 31) / 32), (long long)gc);
        out->scale.zero = s->files[Z->file].base + s->files[Z->file].data_off + Z->begin;
    }
    return OKV_OK;
}

/* The scale of FP8 weight t: "<name>_scale_inv" (Hugging Face "fp8", 128 x 128 blocks) or
 * "<name>_scale" (compressed-tensors, fbgemm: per tensor or per output channel), F32, F16
 * or BF16, a grid that tiles the [rows][cols] matrix. The weight is q times it in every one
 * of these formats ("_inv" names what the quantizer divided by). */
static enum okv_status fp8_scale(const struct okv_st_set *s, const struct st_tensor *t, const struct st_file *f,
                                 const char *name, struct okv_tensor_scale *out)
{
    if (t->rank != 2)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: FP8 tensor '%s' has rank %d; only matrices can be FP8", f->path,
                             name, t->rank);
    char sn[600];
    int64_t j = -1;
    static const char *suffix[] = {"_scale_inv", "_scale"};
    for (int k = 0; k < 2 && j < 0; k++) {
        if (snprintf(sn, sizeof sn, "%s%s", name, suffix[k]) >= (int)sizeof sn)
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: tensor name '%s' is too long", f->path, name);
        j = st_lookup(s, sn);
    }
    if (j < 0)
        return okv_set_error(OKV_ERR_FORMAT, "%s: FP8 tensor '%s' has no scale ('%s_scale_inv' or '%s_scale')", f->path,
                             name, name, name);
    const struct st_tensor *ts = &s->tensors[j];
    const struct st_file *fs = &s->files[ts->file];
    if (ts->dtype > ST_BF16)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: scale '%s' has dtype %s; supported: F32, F16, BF16", fs->path, sn,
                             k_st_dtypes[ts->dtype].name);
    int64_t gr = 1, gc = 1;
    if (ts->rank == 2)
        gr = ts->shape[0], gc = ts->shape[1];
    else if (ts->rank == 1)
        gr = ts->shape[0];   /* 1: per tensor; rows: one a row */
    else if (ts->rank > 2)
        gr = -1;
    const int64_t rows = t->shape[0], cols = t->shape[1];
    if (gr < 1 || gc < 1 || gr > rows || gc > cols)
        return okv_set_error(OKV_ERR_FORMAT, "%s: scale '%s' of shape [%lld, %lld] does not fit FP8 tensor '%s' [%lld, %lld]",
                             fs->path, sn, (long long)gr, (long long)gc, name, (long long)rows, (long long)cols);
    int64_t br = (rows + gr - 1) / gr, bc = (cols + gc - 1) / gc;
    if (!(gr == 1 && gc == 1) && !(gr == rows && gc == 1)) {
        /* blocks (neither per tensor nor per row): the configured size, else one that divides
         * evenly, else 128 */
        if (s->fp8_block[0] > 0)
            br = s->fp8_block[0], bc = s->fp8_block[1];
        else if (rows % gr || cols % gc)
            br = bc = 128;
    }
    if ((rows + br - 1) / br != gr || (cols + bc - 1) / bc != gc)
        return okv_set_error(OKV_ERR_FORMAT, "%s: scale '%s' ([%lld, %lld]) does not tile FP8 tensor '%s' ([%lld, %lld]) in blocks of %lld x %lld",
                             fs->path, sn, (long long)gr, (long long)gc, name, (long long)rows, (long long)cols, (long long)br,
                             (long long)bc);
    out->data = fs->base + fs->data_off + ts->begin;
    out->dtype = ts->dtype == ST_F32 ? OKV_DTYPE_F32 : ts->dtype == ST_F16 ? OKV_DTYPE_F16 : OKV_DTYPE_BF16;
    out->rows = gr;
    out->cols = gc;
    out->block_rows = br;
    out->block_cols = bc;
    return OKV_OK;
}

/* GPTQ or AWQ weight `name` ("X.weight"): X.qweight, X.qzeros, X.scales (and GPTQ's X.g_idx),
 * laid out as okv_tensor_scale describes; the method comes from config.json (okv_st_set_pack). */
static enum okv_status gptq_awq_view(const struct okv_st_set *s, const char *name, struct okv_tensor_view *out)
{
    const int64_t iq = lookup_module(s, name, "qweight"), iz = lookup_module(s, name, "qzeros"),
                  isc = lookup_module(s, name, "scales"), ig = lookup_module(s, name, "g_idx");
    const struct st_tensor *Q = &s->tensors[iq];
    const char *path = s->files[Q->file].path;
    const bool awq = s->pack_layout == OKV_PACK_AWQ;
    if (s->pack_layout != OKV_PACK_GPTQ && !awq)
        return okv_set_error(OKV_ERR_FORMAT, "%s: '%s' is stored as GPTQ / AWQ (qweight) but config.json's "
                             "quantization_config names neither method", path, name);
    const int bits = s->pack_bits, per = bits ? 32 / bits : 0;
    if (iz < 0 || isc < 0 || Q->dtype != ST_I32 || Q->rank != 2 || !per)
        return okv_set_error(OKV_ERR_FORMAT, "%s: '%s' needs I32 qweight and qzeros and a scales tensor beside it", path, name);
    const struct st_tensor *Z = &s->tensors[iz], *S = &s->tensors[isc];
    const int64_t in = awq ? Q->shape[0] : Q->shape[0] * per, outn = awq ? Q->shape[1] * per : Q->shape[1];
    const int64_t group = s->pack_group > 0 ? s->pack_group : in, G = (in + group - 1) / group;
    if (S->dtype > ST_BF16 || S->rank != 2 || S->shape[0] != G || S->shape[1] != outn || Z->dtype != ST_I32 ||
        Z->rank != 2 || Z->shape[0] != G || Z->shape[1] * per != outn || outn % per)
        return okv_set_error(OKV_ERR_FORMAT,
                             "%s: '%s': qweight [%lld, %lld] (%d-bit, %s), scales and qzeros do not agree on %lld inputs, "
                             "%lld outputs in groups of %lld",
                             path, name, (long long)Q->shape[0], (long long)Q->shape[1], bits, awq ? "AWQ" : "GPTQ",
                             (long long)in, (long long)outn, (long long)group);
    const uint8_t *gdata = NULL;
    if (ig >= 0 && !awq) {
        const struct st_tensor *I = &s->tensors[ig];
        if (I->dtype != ST_I32 || I->rank != 1 || I->shape[0] != in)
            return okv_set_error(OKV_ERR_FORMAT, "%s: g_idx of '%s' is not I32 [%lld]", path, name, (long long)in);
        gdata = s->files[I->file].base + s->files[I->file].data_off + I->begin;
        for (int64_t k = 0; k < in; k++) {   /* every group index in range: the conversion reads scales with it */
            int32_t v;
            memcpy(&v, gdata + 4 * k, 4);
            if (v < 0 || v >= G)
                return okv_set_error(OKV_ERR_FORMAT, "%s: g_idx[%lld] of '%s' is %d, outside its %lld groups", path,
                                     (long long)k, name, v, (long long)G);
        }
    }
    packed_fill(s, name, Q, S, outn, in, G, outn, bits, out);
    out->scale.block_rows = 1;
    out->scale.block_cols = group;
    out->scale.zero = s->files[Z->file].base + s->files[Z->file].data_off + Z->begin;
    out->scale.layout = s->pack_layout;
    out->scale.g_idx = gdata;
    out->scale.zero_offset = s->pack_zero_offset;
    return OKV_OK;
}

enum okv_status okv_st_find(const struct okv_st_set *s, const char *name, struct okv_tensor_view *out)
{
    memset(out, 0, sizeof *out);
    int64_t i = st_lookup(s, name);
    if (i < 0 && lookup_suffix(s, name, "_packed") >= 0)
        return packed_view(s, name, out);
    if (i < 0 && lookup_module(s, name, "qweight") >= 0)
        return gptq_awq_view(s, name, out);
    if (i < 0)
        return okv_set_error(OKV_ERR_NOT_FOUND, "%s: tensor '%s' not found", s && s->n_files ? s->files[0].path : "safetensors",
                             name);
    const struct st_tensor *t = &s->tensors[i];
    const struct st_file *f = &s->files[t->file];
    if (t->dtype > ST_BF16 && t->dtype != ST_F8_E4M3)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; supported: F32, F16, BF16, F8_E4M3 (with a scale)",
                             f->path, name, k_st_dtypes[t->dtype].name);
    if (t->rank > OKV_TENSOR_MAX_DIMS)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: tensor '%s' has rank %d (at most %d)", f->path, name, t->rank,
                             OKV_TENSOR_MAX_DIMS);
    if (strlen(name) >= sizeof out->name)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: tensor name '%s' is too long", f->path, name);
    strcpy(out->name, name);
    if (t->dtype == ST_F8_E4M3) {
        enum okv_status st = fp8_scale(s, t, f, name, &out->scale);
        if (st)
            return st;
    }
    out->dtype = t->dtype == ST_F32    ? OKV_DTYPE_F32
                 : t->dtype == ST_F16  ? OKV_DTYPE_F16
                 : t->dtype == ST_BF16 ? OKV_DTYPE_BF16
                                       : OKV_DTYPE_F8_E4M3;
    out->n_dims = t->rank ? t->rank : 1;
    for (int d = 0; d < OKV_TENSOR_MAX_DIMS; d++)
        out->ne[d] = d < t->rank ? t->shape[t->rank - 1 - d] : 1;
    out->data = f->base + f->data_off + t->begin;
    out->nbytes = t->nbytes;
    return OKV_OK;
}
