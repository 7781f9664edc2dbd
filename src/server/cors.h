/* CORS, as vLLM's server answers it (its --allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials;
 * by default every origin, method and header, without credentials): a browser's preflight (OPTIONS with
 * Access-Control-Request-Method) is answered here, before the API key is asked for, and every reply to a request
 * from an allowed Origin carries Access-Control-Allow-Origin. */
#ifndef OKV_SERVER_CORS_H
#define OKV_SERVER_CORS_H

#include <microhttpd.h>
#include <stdbool.h>

#include "oasiskv/common.h"

struct srv_cors {
    bool on;                       /* false: no CORS headers, OPTIONS is not answered as a preflight */
    bool any_origin, any_method, any_header, credentials;
    char **origins, **methods, **headers;   /* the lists (exact origins; methods upper case; headers lower case) */
    int n_origins, n_methods, n_headers;
};

/* Read the three JSON lists of strings (NULL: ["*"]); an error names the bad option. */
enum okv_status srv_cors_init(struct srv_cors *cc, const char *origins, const char *methods, const char *headers,
                              bool credentials);
void srv_cors_free(struct srv_cors *cc);
/* The headers of a reply to connection c (its request's Origin, where allowed). */
void srv_cors_headers(const struct srv_cors *cc, struct MHD_Connection *c, struct MHD_Response *r);
/* A preflight request (OPTIONS with Origin and Access-Control-Request-Method): its reply queued and *ret set, true.
 * False: not a preflight (or CORS off), nothing done. */
bool srv_cors_preflight(const struct srv_cors *cc, struct MHD_Connection *c, const char *method, enum MHD_Result *ret);

#endif
