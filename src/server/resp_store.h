/* Stored responses of the Responses API (`store`, true unless the request says false): a response's object and the
 * conversation it ended (the items before it, its input, its output), kept in memory so that a later request can go
 * on from it (`previous_response_id`) and so that GET /v1/responses/{id}, GET /v1/responses/{id}/input_items and
 * DELETE /v1/responses/{id} find it. Bounded by a number of responses and by the bytes of their JSON text: the
 * oldest go first (an evicted id is then unknown, as a deleted one). Thread-safe. */
#ifndef OKV_SERVER_RESP_STORE_H
#define OKV_SERVER_RESP_STORE_H

#include "server/server_internal.h"

typedef struct srv_resp_store srv_resp_store;

/* NULL: out of memory. max_entries > 0, max_bytes > 0. */
srv_resp_store *srv_resp_store_new(int max_entries, size_t max_bytes);
void srv_resp_store_free(srv_resp_store *s);

/* Keep id's response object and items (the conversation through its output; the first n_input of them are its
 * input, as GET .../input_items lists them), as copies. An id kept before is replaced. False: out of memory, or the
 * two are larger than the store's bytes (nothing kept). */
bool srv_resp_store_put(srv_resp_store *s, const char *id, const cJSON *response, const cJSON *items, int n_input);
/* Copies of what id kept (the caller deletes them; either pointer may be NULL: not wanted). False: an unknown id
 * (*response, *items left NULL), or out of memory (*oom set). */
bool srv_resp_store_get(srv_resp_store *s, const char *id, cJSON **response, cJSON **items, int *n_input, bool *oom);
/* False: an unknown id. */
bool srv_resp_store_delete(srv_resp_store *s, const char *id);
/* responses kept and the bytes of their text */
void srv_resp_store_count(srv_resp_store *s, int *n, size_t *bytes);

/* GET /v1/responses/{id}, GET /v1/responses/{id}/input_items (?limit=1..100, default 20; order=asc|desc, default
 * desc; after=ITEM_ID), DELETE /v1/responses/{id} and POST /v1/responses/{id}/cancel (openai.c's
 * srv_handle_cancel_response); rest: the URL after "/v1/responses/". */
enum MHD_Result srv_handle_stored_response(okv_server *sv, struct MHD_Connection *c, const char *method, const char *rest);

#endif
