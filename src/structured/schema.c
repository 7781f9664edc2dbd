/* Structured output: a JSON schema compiled into the nodes that the recognizer follows
 * (include/oasiskv/structured.h names the subset). Each node is one JSON type with its
 * constraints, or a union dispatched on the type of a value's first byte; "$ref"s to
 * "#/$defs/..." (pydantic) or "#/definitions/..." become node indices, so recursive schemas
 * are a cycle of nodes. */
#include "structured/schema_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct cctx {
    okv_json_schema *s;
    const cJSON *root;
    enum okv_status st;   /* of the first error */
    struct { const char *ref; int node; } refs[64];
    int n_refs;
    int depth;
};

/* record an error (the first one's status is the compile's); returns -1 */
static int err(struct cctx *c, enum okv_status st, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->st == OKV_OK) {
        c->st = st;
        okv_set_error(st, "%s", buf);
    }
    return -1;
}

/* *p with room for `need` elements of `elem` bytes, its capacity *cap doubled from `first` as needed;
 * false when out of memory (*p as it was) */
static bool reserve(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : first;
    while (nc < need)
        nc *= 2;
    void *np = okv_realloc(*p, elem * nc, OKV_TAG_SERVER);
    if (!np)
        return false;
    *p = np;
    *cap = nc;
    return true;
}

static int new_node(struct cctx *c)
{
    okv_json_schema *s = c->s;
    if (s->n_nodes >= OKV_SCHEMA_MAX_NODES)
        return err(c, OKV_ERR_UNSUPPORTED, "JSON schema: more than %d nodes", OKV_SCHEMA_MAX_NODES);
    if (!reserve((void **)&s->nodes, &s->cap_nodes, (size_t)s->n_nodes + 1, sizeof *s->nodes, 16))
        return err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory");
    struct snode *n = &s->nodes[s->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = N_ANY;
    n->items = -1;
    n->max_items = INT32_MAX;
    n->rx = -1;
    for (int t = 0; t < T_COUNT; t++)
        n->alt[t] = -1;
    return s->n_nodes++;
}

/* a string's minimal JSON escape (the bytes between the quotes), into the literal arena */
static int add_literal(struct cctx *c, const char *str, int32_t *off, int32_t *len)
{
    okv_json_schema *s = c->s;
    const size_t n = strlen(str);
    if (!reserve((void **)&s->lit, &s->lit_cap, s->lit_len + 6 * n + 1, 1, 256))
        return err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory");
    *off = (int32_t)s->lit_len;
    char *o = s->lit + s->lit_len;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)str[i];
        if (ch == '"' || ch == '\\') {
            o[k++] = '\\';
            o[k++] = (char)ch;
        } else if (ch == '\n') {
            o[k++] = '\\', o[k++] = 'n';
        } else if (ch == '\t') {
            o[k++] = '\\', o[k++] = 't';
        } else if (ch == '\r') {
            o[k++] = '\\', o[k++] = 'r';
        } else if (ch < 0x20) {
            k += (size_t)snprintf(o + k, 7, "\\u%04x", ch);
        } else {
            o[k++] = (char)ch;
        }
    }
    *len = (int32_t)k;
    s->lit_len += k;
    return 0;
}

static bool annotation(const char *k)
{
    static const char *const ok[] = {"title", "description", "default", "examples", "format", "$schema", "$id",
                                     "$comment", "$defs", "definitions", "readOnly", "writeOnly", "deprecated",
                                     "discriminator", "strict"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(k, ok[i]) == 0)
            return true;
    return false;
}

static int compile(struct cctx *c, const cJSON *j, const char *where);

static int type_of(const char *t)
{
    static const char *const names[T_COUNT] = {"object", "array", "string", "number", "boolean", "null"};
    for (int i = 0; i < T_COUNT; i++)
        if (strcmp(t, names[i]) == 0)
            return i;
    return strcmp(t, "integer") == 0 ? T_NUMBER : -1;
}

/* A string's pattern, or its minLength / maxLength, as a regex its content must fully match: its index in rxs, -1
 * when j has none, -2 on an error. A JSON schema's pattern matches anywhere in the string (ECMA-262's search)
 * unless anchored: an unanchored end gets [\s\S]* (any code point). The lengths count code points. */
static int string_regex(struct cctx *c, const cJSON *j, const char *where)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(j, "minLength"), *mx = cJSON_GetObjectItemCaseSensitive(j, "maxLength");
    if (!pat && !mn && !mx)
        return -1;
    char re[2048];
    if (pat && (mn || mx))
        return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: pattern together with minLength / maxLength is not "
                                           "supported", where) - 1;
    if (pat) {
        if (!cJSON_IsString(pat))
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: pattern must be a string", where) - 1;
        const char *p = pat->valuestring;
        size_t n = strlen(p);
        const bool head = n > 0 && p[0] == '^';
        size_t bs = 0;   /* backslashes before a final $ (an odd count escapes it) */
        while (n >= 2 + bs && p[n - 2 - bs] == '\\')
            bs++;
        const bool tail = n > (size_t)head && p[n - 1] == '$' && bs % 2 == 0;
        if (snprintf(re, sizeof re, "%s(?:%.*s)%s", head ? "" : "[\\s\\S]*", (int)(n - head - tail), p + head,
                     tail ? "" : "[\\s\\S]*") >= (int)sizeof re)
            return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: the pattern is longer than %zu bytes", where,
                       sizeof re - 32) - 1;
    } else {
        if ((mn && (!cJSON_IsNumber(mn) || mn->valuedouble < 0 || mn->valuedouble != (int)mn->valuedouble)) ||
            (mx && (!cJSON_IsNumber(mx) || mx->valuedouble < 0 || mx->valuedouble != (int)mx->valuedouble)))
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: minLength / maxLength must be non-negative integers", where) - 1;
        const int lo = mn ? (int)mn->valuedouble : 0;
        if (mx && mx->valuedouble < lo)
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: minLength > maxLength", where) - 1;
        if (mx)
            snprintf(re, sizeof re, "[\\s\\S]{%d,%d}", lo, (int)mx->valuedouble);
        else
            snprintf(re, sizeof re, "[\\s\\S]{%d,}", lo);
    }
    okv_json_schema *s = c->s;
    if (!reserve((void **)&s->rxs, &s->cap_rxs, (size_t)s->n_rxs + 1, sizeof *s->rxs, 4))
        return err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory") - 1;
    okv_regex *rx = NULL;
    if (okv_regex_compile(re, strlen(re), &rx) != OKV_OK) {
        char why[300];
        snprintf(why, sizeof why, "%s", okv_last_error());
        return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: %s: %s", where, pat ? "pattern" : "minLength / maxLength",
                   why) - 1;
    }
    s->rxs[s->n_rxs] = rx;
    return s->n_rxs++;
}

/* one JSON type's node: its constraints from j */
static int compile_type(struct cctx *c, const cJSON *j, const char *type, const char *where)
{
    const int t = type_of(type);
    if (t < 0)
        return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: type \"%s\" is not a JSON type", where, type);
    int id = new_node(c);
    if (id < 0)
        return -1;
    static const uint8_t kinds[T_COUNT] = {N_OBJECT, N_ARRAY, N_STRING, N_NUMBER, N_BOOLEAN, N_NULL};
    c->s->nodes[id].kind = strcmp(type, "integer") == 0 ? N_INTEGER : kinds[t];
    if (t == T_OBJECT) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(j, "properties"), *p;
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "required");
        if (props && !cJSON_IsObject(props))
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: \"properties\" is not an object", where);
        if (req && !cJSON_IsArray(req))
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: \"required\" is not an array", where);
        int n = cJSON_GetArraySize(props);
        if (n > 64)
            return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: more than 64 properties", where);
        /* every required name must be a property (it could never be generated otherwise) */
        const cJSON *r;
        cJSON_ArrayForEach(r, req) {
            if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
                return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: required \"%s\" is not among its properties",
                                     where, cJSON_IsString(r) ? r->valuestring : "?");
        }
        okv_json_schema *s = c->s;
        if (!reserve((void **)&s->props, &s->cap_props, (size_t)(s->n_props + n), sizeof *s->props, 16))
            return err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory");
        c->s->nodes[id].open = props == NULL;   /* {"type": "object"} alone: any object */
        const int first = s->n_props;
        s->n_props += n;
        s->nodes[id].first_prop = first;
        s->nodes[id].n_props = n;
        int k = 0;
        cJSON_ArrayForEach(p, props) {
            char w[256];
            snprintf(w, sizeof w, "%s.%s", where, p->string);
            struct sprop *sp = &c->s->props[first + k];
            if (add_literal(c, p->string, &sp->name_off, &sp->name_len) < 0)
                return -1;
            sp->required = false;
            cJSON_ArrayForEach(r, req)
                sp->required |= strcmp(r->valuestring, p->string) == 0;
            const int child = compile(c, p, w);
            if (child < 0)
                return -1;
            c->s->props[first + k].node = child;
            k++;
        }
    } else if (t == T_ARRAY) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(j, "minItems"), *mx = cJSON_GetObjectItemCaseSensitive(j, "maxItems");
        if ((mn && (!cJSON_IsNumber(mn) || mn->valuedouble < 0)) || (mx && (!cJSON_IsNumber(mx) || mx->valuedouble < 0)))
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: minItems / maxItems must be non-negative numbers", where);
        int child = -1;
        if (items) {
            char w[256];
            snprintf(w, sizeof w, "%s[]", where);
            if ((child = compile(c, items, w)) < 0)
                return -1;
        }
        struct snode *nd = &c->s->nodes[id];
        nd->items = child;
        nd->min_items = mn ? (int32_t)mn->valuedouble : 0;
        nd->max_items = mx ? (int32_t)(mx->valuedouble > INT32_MAX ? INT32_MAX : mx->valuedouble) : INT32_MAX;
        if (nd->min_items > nd->max_items)
            return err(c, OKV_ERR_FORMAT, "JSON schema %s: minItems > maxItems", where);
    } else if (t == T_STRING) {
        const int rx = string_regex(c, j, where);
        if (rx < -1)
            return -1;
        c->s->nodes[id].rx = rx;
    }
    return id;
}

/* whether two literals (minimal escapes in the arena) are the same string */
static bool same_lit(const okv_json_schema *s, int32_t off_a, int32_t len_a, int32_t off_b, int32_t len_b)
{
    return len_a == len_b && memcmp(s->lit + off_a, s->lit + off_b, (size_t)len_a) == 0;
}

/* objects of n alternatives (closed objects, nodes objs[]) as one N_OBJUNION node: the first property of
 * objs[0] that every alternative requires with string values (enum / const), no value in two of them, is the
 * discriminator; each alternative then writes it first */
static int make_objunion(struct cctx *c, const int *objs, int n, const char *where)
{
    okv_json_schema *s = c->s;
    const int np0 = s->nodes[objs[0]].n_props;
    for (int p = 0; p < np0; p++) {
        const struct sprop d0 = s->props[s->nodes[objs[0]].first_prop + p];
        int where_in[16], total = 0;
        bool ok = d0.required;
        for (int i = 0; i < n && ok; i++) {
            const struct snode *a = &s->nodes[objs[i]];
            where_in[i] = -1;
            for (int k = 0; k < a->n_props; k++) {
                const struct sprop *q = &s->props[a->first_prop + k];
                if (same_lit(s, q->name_off, q->name_len, d0.name_off, d0.name_len))
                    where_in[i] = k;
            }
            const struct sprop *q = where_in[i] >= 0 ? &s->props[a->first_prop + where_in[i]] : NULL;
            ok = q && q->required && s->nodes[q->node].kind == N_STRING && s->nodes[q->node].n_lit > 0;
            if (ok)
                total += s->nodes[q->node].n_lit;
        }
        if (!ok || total > 64)
            continue;
        /* no value selects two alternatives */
        for (int i = 0; i < n && ok; i++)
            for (int j = i + 1; j < n && ok; j++) {
                const struct snode *ei = &s->nodes[s->props[s->nodes[objs[i]].first_prop + where_in[i]].node];
                const struct snode *ej = &s->nodes[s->props[s->nodes[objs[j]].first_prop + where_in[j]].node];
                for (int x = 0; x < ei->n_lit && ok; x++)
                    for (int y = 0; y < ej->n_lit && ok; y++) {
                        const struct slit *lx = &s->lits[ei->first_lit + x], *ly = &s->lits[ej->first_lit + y];
                        ok = !same_lit(s, lx->off, lx->len, ly->off, ly->len);
                    }
            }
        if (!ok)
            continue;
        const int e = new_node(c), u = e >= 0 ? new_node(c) : -1;
        if (u < 0)
            return -1;
        if (!reserve((void **)&s->lits, &s->cap_lits, (size_t)(s->n_lits + total), sizeof *s->lits, 16) ||
            !reserve((void **)&s->props, &s->cap_props, (size_t)s->n_props + 1, sizeof *s->props, 16))
            return err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory");
        s->nodes[e].kind = N_STRING;
        s->nodes[e].first_lit = s->n_lits;
        s->nodes[e].n_lit = total;
        for (int i = 0; i < n; i++) {
            const int first = s->nodes[objs[i]].first_prop;
            const struct snode *ei = &s->nodes[s->props[first + where_in[i]].node];
            for (int x = 0; x < ei->n_lit; x++) {
                s->lits[s->n_lits] = s->lits[ei->first_lit + x];
                s->lits[s->n_lits++].alt = objs[i];
            }
            /* the discriminator first: the alternative goes on after it */
            const struct sprop dp = s->props[first + where_in[i]];
            memmove(&s->props[first + 1], &s->props[first], sizeof dp * (size_t)where_in[i]);
            s->props[first] = dp;
        }
        s->props[s->n_props] = (struct sprop){d0.name_off, d0.name_len, e, true};
        s->nodes[u].kind = N_OBJUNION;
        s->nodes[u].first_prop = s->n_props++;
        s->nodes[u].n_props = 1;
        return u;
    }
    return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: alternatives that are objects need a discriminator: a property "
               "that every one of them requires, with string values (enum / const) that tell them apart", where);
}

/* a union of nodes, one per JSON type of its first byte (objects of several alternatives: make_objunion) */
static int make_union(struct cctx *c, const int *alts, int n, const char *where)
{
    int objs[16], n_obj = 0;
    for (int i = 0; i < n; i++) {
        const struct snode *a = &c->s->nodes[alts[i]];
        const int o = a->kind == N_UNION ? a->alt[T_OBJECT] : node_type(a->kind) == T_OBJECT ? alts[i] : -1;
        bool seen = false;
        for (int k = 0; k < n_obj; k++)
            seen |= objs[k] == o;
        if (o >= 0 && !seen)
            objs[n_obj++] = o;
    }
    int objunion = -1;
    if (n_obj > 1) {
        for (int k = 0; k < n_obj; k++) {
            const struct snode *o = &c->s->nodes[objs[k]];
            if (o->kind != N_OBJECT || o->open)
                return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: alternatives that are objects must each list "
                           "their properties (a discriminated union)", where);
        }
        if ((objunion = make_objunion(c, objs, n_obj, where)) < 0)
            return -1;
    }
    int id = new_node(c);
    if (id < 0)
        return -1;
    c->s->nodes[id].kind = N_UNION;
    if (objunion >= 0)
        c->s->nodes[id].alt[T_OBJECT] = objunion;
    for (int i = 0; i < n; i++) {
        const struct snode *a = &c->s->nodes[alts[i]];
        if (a->kind == N_ANY)
            return alts[i];   /* anything goes */
        int ts[T_COUNT], nt = 0;
        if (a->kind == N_UNION) {
            for (int t = 0; t < T_COUNT; t++)
                if (a->alt[t] >= 0)
                    ts[nt++] = t;
        } else {
            ts[nt++] = node_type(a->kind);
        }
        for (int k = 0; k < nt; k++) {
            const int t = ts[k];
            const int target = a->kind == N_UNION ? a->alt[t] : alts[i];
            if (t == T_OBJECT && objunion >= 0)
                continue;   /* the objects' union took them */
            if (c->s->nodes[id].alt[t] >= 0 && c->s->nodes[id].alt[t] != target)
                return err(c, OKV_ERR_UNSUPPORTED,
                                     "JSON schema %s: alternatives of the same JSON type (%s) are not supported", where,
                                     t == T_OBJECT ? "object" : t == T_ARRAY ? "array" : t == T_STRING ? "string"
                                     : t == T_NUMBER ? "number" : t == T_BOOLEAN ? "boolean" : "null");
            c->s->nodes[id].alt[t] = target;
        }
    }
    return id;
}

static int compile(struct cctx *c, const cJSON *j, const char *where)
{
    if (++c->depth > 64) {
        c->depth--;
        return err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: nested too deeply", where);
    }
    int id = -1;
    if (cJSON_IsTrue(j) || (cJSON_IsObject(j) && !j->child)) {
        id = new_node(c);   /* any value */
        goto out;
    }
    if (!cJSON_IsObject(j)) {
        err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: a schema must be an object (or true)", where);
        goto out;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, j) {
        static const char *const known[] = {"type", "properties", "required", "additionalProperties", "items",
                                            "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "$ref",
                                            "pattern", "minLength", "maxLength"};
        bool ok = annotation(k->string);
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++)
            ok = strcmp(k->string, known[i]) == 0;
        if (!ok) {
            err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: keyword \"%s\" is not supported (a constraint that is "
                          "not enforced is not accepted)", where, k->string);
            goto out;
        }
    }
    /* a string's pattern / minLength / maxLength hold for strings only: a schema that could give another kind of
     * string (an enum, a union, a reference, no type) would leave them unenforced */
    const bool str_kw = cJSON_GetObjectItemCaseSensitive(j, "pattern") || cJSON_GetObjectItemCaseSensitive(j, "minLength") ||
                        cJSON_GetObjectItemCaseSensitive(j, "maxLength");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (str_kw && (!cJSON_IsString(ty) || cJSON_GetObjectItemCaseSensitive(j, "enum") ||
                   cJSON_GetObjectItemCaseSensitive(j, "const") || cJSON_GetObjectItemCaseSensitive(j, "$ref") ||
                   cJSON_GetObjectItemCaseSensitive(j, "anyOf") || cJSON_GetObjectItemCaseSensitive(j, "oneOf"))) {
        err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: pattern / minLength / maxLength are supported with \"type\": "
                                    "\"string\" alone (not with a list of types, enum, const, $ref or anyOf)", where);
        goto out;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "$ref");
    if (ref) {
        const char *r = cJSON_IsString(ref) ? ref->valuestring : "";
        const char *name = strncmp(r, "#/$defs/", 8) == 0 ? r + 8 : strncmp(r, "#/definitions/", 14) == 0 ? r + 14 : NULL;
        const cJSON *defs = cJSON_GetObjectItemCaseSensitive(c->root, strncmp(r, "#/$defs/", 8) == 0 ? "$defs" : "definitions");
        const cJSON *target = name ? cJSON_GetObjectItemCaseSensitive(defs, name) : NULL;
        if (!target) {
            err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: $ref \"%s\" is not a definition of this schema", where, r);
            goto out;
        }
        for (int i = 0; i < c->n_refs; i++)
            if (strcmp(c->refs[i].ref, r) == 0) {
                id = c->refs[i].node;   /* compiled, or being compiled (a recursive schema) */
                goto out;
            }
        if (c->n_refs == 64) {
            err(c, OKV_ERR_UNSUPPORTED, "JSON schema: more than 64 definitions");
            goto out;
        }
        /* a forwarding node, filled once the definition is compiled (recursion comes back to it) */
        const int fwd = new_node(c);
        if (fwd < 0)
            goto out;
        c->refs[c->n_refs].ref = r;
        c->refs[c->n_refs++].node = fwd;
        const int body = compile(c, target, r);
        if (body < 0)
            goto out;
        c->s->nodes[fwd] = c->s->nodes[body];
        id = fwd;
        goto out;
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(j, "const");
    if (en || cn) {
        const cJSON *list = en, *v;
        cJSON *one = NULL;
        if (!en) {
            one = cJSON_CreateArray();
            cJSON_AddItemToArray(one, cJSON_Duplicate(cn, 1));
            list = one;
        }
        int n = cJSON_GetArraySize(list);
        bool strings = cJSON_IsArray(list) && n > 0 && n <= 64;
        cJSON_ArrayForEach(v, list)
            strings &= cJSON_IsString(v);
        if (!strings) {
            cJSON_Delete(one);
            err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: enum / const of other values than 1 to 64 strings", where);
            goto out;
        }
        if ((id = new_node(c)) < 0) {
            cJSON_Delete(one);
            goto out;
        }
        okv_json_schema *s = c->s;
        if (!reserve((void **)&s->lits, &s->cap_lits, (size_t)(s->n_lits + n), sizeof *s->lits, 16)) {
            cJSON_Delete(one);
            err(c, OKV_ERR_NO_MEMORY, "JSON schema: no memory");
            id = -1;
            goto out;
        }
        s->nodes[id].kind = N_STRING;
        s->nodes[id].first_lit = s->n_lits;
        s->nodes[id].n_lit = n;
        cJSON_ArrayForEach(v, list) {
            struct slit *l = &c->s->lits[c->s->n_lits++];
            l->alt = -1;
            if (add_literal(c, v->valuestring, &l->off, &l->len) < 0) {
                id = -1;
                break;
            }
        }
        cJSON_Delete(one);
        goto out;
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(j, "anyOf");
    if (!any)
        any = cJSON_GetObjectItemCaseSensitive(j, "oneOf");
    if (any) {
        int alts[16], n = 0;
        const cJSON *a;
        if (!cJSON_IsArray(any) || cJSON_GetArraySize(any) < 1 || cJSON_GetArraySize(any) > 16) {
            err(c, OKV_ERR_UNSUPPORTED, "JSON schema %s: anyOf / oneOf must list 1 to 16 schemas", where);
            goto out;
        }
        cJSON_ArrayForEach(a, any) {
            char w[256];
            snprintf(w, sizeof w, "%s|%d", where, n);
            if ((alts[n++] = compile(c, a, w)) < 0)
                goto out;
        }
        id = n == 1 ? alts[0] : make_union(c, alts, n, where);
        goto out;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!type) {
        id = new_node(c);   /* no type: any value (the other keywords are annotations) */
        goto out;
    }
    if (cJSON_IsString(type)) {
        id = compile_type(c, j, type->valuestring, where);
        goto out;
    }
    if (cJSON_IsArray(type) && cJSON_GetArraySize(type) >= 1 && cJSON_GetArraySize(type) <= 7) {
        int alts[8], n = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, type) {
            if (!cJSON_IsString(t)) {
                err(c, OKV_ERR_FORMAT, "JSON schema %s: \"type\" lists a non-string", where);
                goto out;
            }
            if ((alts[n++] = compile_type(c, j, t->valuestring, where)) < 0)
                goto out;
        }
        id = n == 1 ? alts[0] : make_union(c, alts, n, where);
        goto out;
    }
    err(c, OKV_ERR_FORMAT, "JSON schema %s: \"type\" must be a string or a list of strings", where);
out:
    c->depth--;
    return id;
}

uint64_t okv_json_schema_next_id(void)
{
    static _Atomic uint64_t next = 1;
    return atomic_fetch_add(&next, 1);
}

enum okv_status okv_json_schema_compile(const char *text, size_t len, okv_json_schema **out)
{
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return okv_set_error(OKV_ERR_FORMAT, "JSON schema: not valid JSON");
    okv_json_schema *s = okv_calloc(1, sizeof *s, OKV_TAG_SERVER);
    if (!s) {
        cJSON_Delete(root);
        return okv_set_error(OKV_ERR_NO_MEMORY, "JSON schema: no memory");
    }
    struct cctx c = {.s = s, .root = root};
    const int top = compile(&c, root, "#");
    cJSON_Delete(root);
    if (top < 0) {
        okv_json_schema_free(s);
        return c.st != OKV_OK ? c.st : OKV_ERR_FORMAT;
    }
    s->root = top;
    s->id = okv_json_schema_next_id();
    *out = s;
    return OKV_OK;
}

void okv_json_schema_free(okv_json_schema *s)
{
    if (!s)
        return;
    okv_free(s->nodes);
    okv_free(s->props);
    okv_free(s->lits);
    okv_free(s->lit);
    okv_regex_free(s->regex);
    okv_grammar_free(s->grammar);
    for (int i = 0; i < s->n_rxs; i++)
        okv_regex_free(s->rxs[i]);
    okv_free(s->rxs);
    okv_free(s);
}

/* A schema of raw text (no JSON): the regex or the grammar that compile() puts into it. */
static enum okv_status raw_text_schema(const char *what, enum okv_status (*compile)(okv_json_schema *, void *),
                                       void *arg, okv_json_schema **out)
{
    *out = NULL;
    okv_json_schema *s = okv_calloc(1, sizeof *s, OKV_TAG_SERVER);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: no memory", what);
    const enum okv_status st = compile(s, arg);
    if (st != OKV_OK) {
        okv_json_schema_free(s);
        return st;
    }
    s->root = -1;
    s->id = okv_json_schema_next_id();
    *out = s;
    return OKV_OK;
}

struct raw_text { const char *text; size_t len; };

static enum okv_status put_regex(okv_json_schema *s, void *arg)
{
    const struct raw_text *t = arg;
    return okv_regex_compile(t->text, t->len, &s->regex);
}

static enum okv_status put_grammar(okv_json_schema *s, void *arg)
{
    const struct raw_text *t = arg;
    return okv_grammar_compile(t->text, t->len, NULL, &s->grammar);
}

enum okv_status okv_json_regex_compile(const char *pattern, size_t len, okv_json_schema **out)
{
    struct raw_text t = {pattern, len};
    return raw_text_schema("regex", put_regex, &t, out);
}

enum okv_status okv_json_grammar_compile(const char *text, size_t len, okv_json_schema **out)
{
    struct raw_text t = {text, len};
    return raw_text_schema("grammar", put_grammar, &t, out);
}

enum okv_status okv_json_choice_compile(const char *const *choices, int n, okv_json_schema **out)
{
    *out = NULL;
    if (n < 1 || n > 64)
        return okv_set_error(OKV_ERR_INVALID_ARG, "a choice needs 1 to 64 strings (%d given)", n);
    okv_json_schema *s = okv_calloc(1, sizeof *s, OKV_TAG_SERVER);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "choice: no memory");
    struct cctx c = {.s = s};
    size_t total = 1;
    for (int i = 0; i < n; i++)
        total += strlen(choices[i]);
    const int id = new_node(&c);
    s->lits = okv_malloc(sizeof *s->lits * (size_t)n, OKV_TAG_SERVER);
    s->lit = okv_malloc(total, OKV_TAG_SERVER);
    if (id < 0 || !s->lits || !s->lit) {
        okv_json_schema_free(s);
        return okv_set_error(OKV_ERR_NO_MEMORY, "choice: no memory");
    }
    for (int i = 0; i < n; i++) {   /* as they are (the text is not JSON) */
        const size_t l = strlen(choices[i]);
        if (l == 0) {
            okv_json_schema_free(s);
            return okv_set_error(OKV_ERR_INVALID_ARG, "choice %d is empty", i);
        }
        s->lits[i] = (struct slit){(int32_t)s->lit_len, (int32_t)l, -1};
        memcpy(s->lit + s->lit_len, choices[i], l);
        s->lit_len += l;
    }
    s->n_lits = n;
    s->cap_lits = (size_t)n;
    s->lit_cap = total;
    s->nodes[id].kind = N_STRING;
    s->nodes[id].first_lit = 0;
    s->nodes[id].n_lit = n;
    s->root = id;
    s->choice = true;
    s->id = okv_json_schema_next_id();
    *out = s;
    return OKV_OK;
}
