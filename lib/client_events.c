/* client_events.c: a GPU rank's CUDA interprocess events (kvf_register_events, kvferry.h; issue
 * 28): the handles are kept with the registration and passed again after every REGISTER of a
 * reconnect (client_conn_open), so the daemon that serves the rank always has them open. Called
 * under c->mu except kvf_register_events, which takes it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

int client_conn_events(struct kvf_client *c, char *err, size_t errlen)
{
    struct proto_msg m = {.type = PROTO_EVENTS};
    m.u.events = (struct proto_events){.n = c->n_events, .handles = c->ev_handles};
    c->got_registered = false;
    int rc = client_conn_send(c, &m, NULL, 0); /* handles borrowed: nothing to release */
    if (rc) {
        snprintf(err, errlen, "sending EVENTS: %s", c->sock < 0 ? c->lost_why : strerror(-rc));
        return rc;
    }
    rc = client_conn_wait(c, client_have_registered, mono_now_ms() + c->timeout_ms);
    if (rc) {
        snprintf(err, errlen, "waiting for the answer to EVENTS: %s",
                 c->sock < 0 && c->lost_why[0] ? c->lost_why : strerror(-rc));
        return rc;
    }
    if (c->registered_reply.status != KVF_OK) {
        snprintf(err, errlen, "%s: %s",
                 kvf_error_to_string((kvf_error_t)c->registered_reply.status),
                 c->registered_reply.message);
        return -EINVAL;
    }
    return 0;
}

int kvf_register_events(struct kvf_client *c, const uint8_t *handles, uint32_t n, char *err,
                        size_t errlen)
{
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = 0;
    if (!handles || n == 0 || n > KVF_EVENTS_MAX) {
        snprintf(err, errlen, "BAD_REQUEST: %u CUDA events: a rank passes 1 to %d", n,
                 KVF_EVENTS_MAX);
        return -EINVAL;
    }
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (c->n_events) {
        rc = -EALREADY;
        snprintf(err, errlen, "%u CUDA events were passed already", c->n_events);
    } else if (!c->layout_json) {
        rc = -ENOTCONN;
        snprintf(err, errlen, "not registered: kvf_register first");
    } else if (c->sock < 0 && client_conn_maybe_reconnect(c)) {
        rc = -ENOTCONN;
        snprintf(err, errlen, "not connected to the daemon");
    } else if (!(c->ev_handles = malloc((size_t)n * PROTO_IPC_HANDLE))) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
    } else {
        memcpy(c->ev_handles, handles, (size_t)n * PROTO_IPC_HANDLE);
        c->n_events = n;
        if ((rc = client_conn_events(c, err, errlen)) != 0) { /* refused: nothing kept */
            free(c->ev_handles);
            c->ev_handles = NULL;
            c->n_events = 0;
        }
    }
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
