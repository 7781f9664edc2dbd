/* The stored responses (resp_store.h): a list in the order they were kept, newest last, each as its JSON text (a
 * get parses a copy, so no tree is shared between connections); found by a linear search of the ids, which at the
 * store's size (1,024 by default) costs microseconds against the milliseconds of a reply. */
#define _GNU_SOURCE
#include "server/resp_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    struct entry *prev, *next;
    char id[48];
    char *response, *items;   /* JSON text */
    size_t bytes;
    int n_input;
};

struct srv_resp_store {
    pthread_mutex_t mu;
    struct entry *head, *tail;   /* oldest first */
    int n, max_entries;
    size_t bytes, max_bytes;
};

srv_resp_store *srv_resp_store_new(int max_entries, size_t max_bytes)
{
    srv_resp_store *s = okv_calloc(1, sizeof *s, OKV_TAG_SERVER);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max_entries = max_entries > 0 ? max_entries : 1;
    s->max_bytes = max_bytes > 0 ? max_bytes : 1;
    return s;
}

static void entry_free(struct entry *e)
{
    cJSON_free(e->response);
    cJSON_free(e->items);
    okv_free(e);
}

static void unlink_entry(srv_resp_store *s, struct entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        s->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    s->n--;
    s->bytes -= e->bytes;
}

void srv_resp_store_free(srv_resp_store *s)
{
    if (!s)
        return;
    for (struct entry *e = s->head, *nx; e; e = nx) {
        nx = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&s->mu);
    okv_free(s);
}

static struct entry *find(srv_resp_store *s, const char *id)
{
    for (struct entry *e = s->tail; e; e = e->prev)   /* the newest first: the one a conversation goes on from */
        if (!strcmp(e->id, id))
            return e;
    return NULL;
}

bool srv_resp_store_put(srv_resp_store *s, const char *id, const cJSON *response, const cJSON *items, int n_input)
{
    if (strlen(id) >= sizeof ((struct entry *)0)->id)
        return false;
    struct entry *e = okv_calloc(1, sizeof *e, OKV_TAG_SERVER);
    if (!e)
        return false;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->response = cJSON_PrintUnformatted(response);
    e->items = cJSON_PrintUnformatted(items);
    e->n_input = n_input;
    if (!e->response || !e->items) {
        entry_free(e);
        return false;
    }
    e->bytes = strlen(e->response) + strlen(e->items) + sizeof *e;
    if (e->bytes > s->max_bytes) {
        entry_free(e);
        return false;
    }
    pthread_mutex_lock(&s->mu);
    struct entry *old = find(s, id);
    if (old) {
        unlink_entry(s, old);
        entry_free(old);
    }
    while (s->head && (s->n + 1 > s->max_entries || s->bytes + e->bytes > s->max_bytes)) {
        struct entry *x = s->head;
        unlink_entry(s, x);
        entry_free(x);
    }
    e->prev = s->tail;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->n++;
    s->bytes += e->bytes;
    pthread_mutex_unlock(&s->mu);
    return true;
}

bool srv_resp_store_get(srv_resp_store *s, const char *id, cJSON **response, cJSON **items, int *n_input, bool *oom)
{
    if (response)
        *response = NULL;
    if (items)
        *items = NULL;
    *oom = false;
    pthread_mutex_lock(&s->mu);
    const struct entry *e = find(s, id);
    if (e) {
        if (response && !(*response = cJSON_Parse(e->response)))
            *oom = true;
        if (items && !*oom && !(*items = cJSON_Parse(e->items)))
            *oom = true;
        if (n_input)
            *n_input = e->n_input;
    }
    pthread_mutex_unlock(&s->mu);
    if (*oom) {
        if (response) {
            cJSON_Delete(*response);
            *response = NULL;
        }
        if (items) {
            cJSON_Delete(*items);
            *items = NULL;
        }
        return false;
    }
    return e != NULL;
}

bool srv_resp_store_delete(srv_resp_store *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, id);
    if (e)
        unlink_entry(s, e);
    pthread_mutex_unlock(&s->mu);
    if (e)
        entry_free(e);
    return e != NULL;
}

void srv_resp_store_count(srv_resp_store *s, int *n, size_t *bytes)
{
    pthread_mutex_lock(&s->mu);
    *n = s->n;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the endpoints ---- */

static enum MHD_Result not_found(struct MHD_Connection *c, const char *id)
{
    return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "response_id", "not_found",
                           "No response with id '%.80s' is stored here (never made, made with \"store\": false, "
                           "deleted, or evicted: the server keeps its last serve --max-stored-responses).", id);
}

/* the input_items page: items[0..n_input) in the order asked, after the item `after`, at most limit */
static enum MHD_Result list_items(struct MHD_Connection *c, const char *id, cJSON *items, int n_input)
{
    const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    const char *order = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "order");
    const char *after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
    long limit = 20;
    if (ls) {
        char *end;
        limit = strtol(ls, &end, 10);
        if (!*ls || *end || limit < 1 || limit > 100) {
            cJSON_Delete(items);
            return srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "limit", NULL,
                                   "'limit' must be an integer from 1 to 100 (got '%.40s')", ls);
        }
    }
    if (order && strcmp(order, "asc") && strcmp(order, "desc")) {
        cJSON_Delete(items);
        return srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "order", NULL,
                               "'order' must be asc or desc (got '%.40s')", order);
    }
    const bool asc = order && !strcmp(order, "asc");
    const int n = n_input < cJSON_GetArraySize(items) ? n_input : cJSON_GetArraySize(items);
    int start = 0;   /* the position in the order asked */
    if (after) {
        start = -1;
        for (int k = 0; k < n; k++) {
            const cJSON *it = cJSON_GetArrayItem(items, asc ? k : n - 1 - k);
            const cJSON *iid = cJSON_GetObjectItemCaseSensitive(it, "id");
            if (cJSON_IsString(iid) && !strcmp(iid->valuestring, after)) {
                start = k + 1;
                break;
            }
        }
        if (start < 0) {
            cJSON_Delete(items);
            return srv_reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "after", NULL,
                                   "'after': no input item '%.80s' in response '%.80s'", after, id);
        }
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    int k = start;
    for (; k < n && k - start < limit; k++)
        cJSON_AddItemToArray(data, cJSON_Duplicate(cJSON_GetArrayItem(items, asc ? k : n - 1 - k), true));
    const int got = cJSON_GetArraySize(data);
    const cJSON *first = got ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "id") : NULL;
    const cJSON *last = got ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, got - 1), "id") : NULL;
    if (cJSON_IsString(first))
        cJSON_AddStringToObject(o, "first_id", first->valuestring);
    else
        cJSON_AddNullToObject(o, "first_id");
    if (cJSON_IsString(last))
        cJSON_AddStringToObject(o, "last_id", last->valuestring);
    else
        cJSON_AddNullToObject(o, "last_id");
    cJSON_AddBoolToObject(o, "has_more", k < n);
    cJSON_Delete(items);
    return srv_reply_json(c, MHD_HTTP_OK, o);
}

enum MHD_Result srv_handle_stored_response(okv_server *sv, struct MHD_Connection *c, const char *method, const char *rest)
{
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), del = !strcmp(method, "DELETE");
    char id[128];
    const char *slash = strchr(rest, '/');
    const size_t idn = slash ? (size_t)(slash - rest) : strlen(rest);
    snprintf(id, sizeof id, "%.*s", (int)(idn < sizeof id ? idn : sizeof id - 1), rest);
    const bool items = slash && !strcmp(slash, "/input_items"), cancel = slash && !strcmp(slash, "/cancel");
    if (!idn || (slash && !items && !cancel))
        return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", NULL, "not_found",
                               "Unknown endpoint '%s /v1/responses/%.100s'.", method, rest);
    if (cancel ? strcmp(method, "POST") != 0 : !(get || (del && !items)))
        return srv_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "method_not_allowed",
                               "Method %s is not allowed on /v1/responses/%.100s.", method, rest);
    if (cancel)
        return srv_handle_cancel_response(sv, c, id);
    if (!sv->responses)
        return srv_reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "response_id", "not_found",
                               "This server stores no responses (serve --max-stored-responses 0).");
    if (del) {
        if (!srv_resp_store_delete(sv->responses, id))
            return not_found(c, id);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "object", "response");
        cJSON_AddBoolToObject(o, "deleted", true);
        return srv_reply_json(c, MHD_HTTP_OK, o);
    }
    cJSON *resp = NULL, *its = NULL;
    int n_input = 0;
    bool oom;
    if (!srv_resp_store_get(sv->responses, id, items ? NULL : &resp, items ? &its : NULL, &n_input, &oom))
        return oom ? srv_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "out of memory")
                   : not_found(c, id);
    if (items)
        return list_items(c, id, its, n_input);
    return srv_reply_json(c, MHD_HTTP_OK, resp);
}
