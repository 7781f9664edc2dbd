/* CORS (cors.h): the rules of the Fetch standard's CORS protocol as Starlette's CORSMiddleware (vLLM's) applies
 * them. A preflight is allowed when its origin, its requested method and every requested header are; the simple
 * headers (Accept, Accept-Language, Content-Language, Content-Type) are always allowed. */
#define _GNU_SOURCE
#include "server/cors.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>


static const char *const simple_headers[] = {"accept", "accept-language", "content-language", "content-type"};
#define ALL_METHODS "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        okv_free(v[i]);
    okv_free(v);
}

/* json (NULL: ["*"]) -> v[0..n), each case-folded by fold (0 none, 1 upper, -1 lower); *any: "*" is among them */
static enum okv_status read_list(const char *opt, const char *json, int fold, char ***v, int *n, bool *any)
{
    *v = NULL;
    *n = 0;
    *any = json == NULL;
    if (!json)
        return OKV_OK;
    cJSON *a = cJSON_Parse(json);
    if (!a || !cJSON_IsArray(a)) {
        cJSON_Delete(a);
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: '%s' is not a JSON list of strings (e.g. '[\"*\"]' or "
                             "'[\"https://example.com\"]')", opt, json);
    }
    const int cnt = cJSON_GetArraySize(a);
    *v = okv_calloc((size_t)(cnt ? cnt : 1), sizeof **v, OKV_TAG_SERVER);
    if (!*v) {
        cJSON_Delete(a);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory", opt);
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsString(x)) {
            cJSON_Delete(a);
            free_list(*v, *n);
            *v = NULL;
            *n = 0;
            return okv_set_error(OKV_ERR_INVALID_ARG, "%s: '%s' is not a JSON list of strings", opt, json);
        }
        if (!strcmp(x->valuestring, "*"))
            *any = true;
        char *s = okv_strdup(x->valuestring, OKV_TAG_SERVER);
        if (!s) {
            cJSON_Delete(a);
            free_list(*v, *n);
            *v = NULL;
            *n = 0;
            return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory", opt);
        }
        for (char *p = s; fold && *p; p++)
            *p = (char)(fold > 0 ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
        (*v)[(*n)++] = s;
    }
    cJSON_Delete(a);
    return OKV_OK;
}

enum okv_status srv_cors_init(struct srv_cors *cc, const char *origins, const char *methods, const char *headers,
                              bool credentials)
{
    memset(cc, 0, sizeof *cc);
    enum okv_status st;
    if ((st = read_list("--allowed-origins", origins, 0, &cc->origins, &cc->n_origins, &cc->any_origin)) != OKV_OK ||
        (st = read_list("--allowed-methods", methods, 1, &cc->methods, &cc->n_methods, &cc->any_method)) != OKV_OK ||
        (st = read_list("--allowed-headers", headers, -1, &cc->headers, &cc->n_headers, &cc->any_header)) != OKV_OK) {
        srv_cors_free(cc);
        return st;
    }
    cc->credentials = credentials;
    cc->on = cc->any_origin || cc->n_origins > 0;
    return OKV_OK;
}

void srv_cors_free(struct srv_cors *cc)
{
    free_list(cc->origins, cc->n_origins);
    free_list(cc->methods, cc->n_methods);
    free_list(cc->headers, cc->n_headers);
    memset(cc, 0, sizeof *cc);
}

static bool in_list(char *const *v, int n, const char *s, bool nocase)
{
    for (int i = 0; i < n; i++)
        if (nocase ? !strcasecmp(v[i], s) : !strcmp(v[i], s))
            return true;
    return false;
}

static bool origin_ok(const struct srv_cors *cc, const char *origin)
{
    return cc->any_origin || in_list(cc->origins, cc->n_origins, origin, false);
}

/* Access-Control-Allow-Origin (and -Credentials, Vary) for an allowed origin */
static void origin_headers(const struct srv_cors *cc, struct MHD_Response *r, const char *origin)
{
    if (cc->any_origin && !cc->credentials) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    } else {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
    if (cc->credentials)
        MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
}

void srv_cors_headers(const struct srv_cors *cc, struct MHD_Connection *c, struct MHD_Response *r)
{
    if (!cc || !cc->on)
        return;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin && origin_ok(cc, origin))
        origin_headers(cc, r, origin);
}

/* whether every header named in the comma-separated list is allowed (the names folded to lower case) */
static bool headers_ok(const struct srv_cors *cc, const char *list)
{
    if (cc->any_header || !list)
        return true;
    char name[128];
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = 0;
        while (*p && *p != ',') {
            if (n + 1 < sizeof name)
                name[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        while (n && (name[n - 1] == ' ' || name[n - 1] == '\t'))
            n--;
        name[n] = 0;
        if (!n)
            continue;
        bool ok = in_list(cc->headers, cc->n_headers, name, true);
        for (size_t i = 0; !ok && i < sizeof simple_headers / sizeof simple_headers[0]; i++)
            ok = !strcmp(name, simple_headers[i]);
        if (!ok)
            return false;
    }
    return true;
}

static char *joined(char *const *v, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(v[i]) + 2;
    char *s = okv_malloc(len, OKV_TAG_SERVER);
    if (!s)
        return NULL;
    s[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, v[i]);
    }
    return s;
}

bool srv_cors_preflight(const struct srv_cors *cc, struct MHD_Connection *c, const char *method, enum MHD_Result *ret)
{
    if (!cc || !cc->on || strcmp(method, "OPTIONS"))
        return false;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (!origin || !want)
        return false;
    const char *want_h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    char why[160] = "";
    if (!origin_ok(cc, origin))
        snprintf(why, sizeof why, "origin");
    if (!cc->any_method && !in_list(cc->methods, cc->n_methods, want, true))
        snprintf(why + strlen(why), sizeof why - strlen(why), "%smethod", why[0] ? ", " : "");
    if (!headers_ok(cc, want_h))
        snprintf(why + strlen(why), sizeof why - strlen(why), "%sheaders", why[0] ? ", " : "");
    char body[200];
    snprintf(body, sizeof body, "%s%s", why[0] ? "Disallowed CORS " : "OK", why);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (!r) {
        *ret = MHD_NO;
        return true;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (!why[0]) {
        origin_headers(cc, r, origin);
        char *m = cc->any_method ? NULL : joined(cc->methods, cc->n_methods);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", m ? m : ALL_METHODS);
        okv_free(m);
        char *h = cc->any_header ? NULL : joined(cc->headers, cc->n_headers);
        if (cc->any_header) {
            if (want_h)
                MHD_add_response_header(r, "Access-Control-Allow-Headers", want_h);
        } else {
            MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                    h && h[0] ? h : "Accept, Accept-Language, Content-Language, Content-Type");
        }
        okv_free(h);
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    } else if (origin_ok(cc, origin)) {
        origin_headers(cc, r, origin);
    }
    *ret = MHD_queue_response(c, why[0] ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return true;
}
