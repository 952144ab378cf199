/* client_req.c: libkvferry's request calls and event polling (kvf_send, kvf_send_begin,
 * kvf_send_ready, kvf_send_ready_event, kvf_recv, kvf_cancel, kvf_poll). Each call takes c->mu; see kvferry.h for the contract. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_int.h"

static int check_items(const struct kvf_client *c, uint32_t n_groups, const uint32_t *counts,
                       const uint32_t *ids, struct proto_items *ret)
{
    if (n_groups > LAYOUT_MAX_GROUPS || (n_groups && !counts))
        return -EINVAL;
    memset(ret, 0, sizeof *ret);
    ret->n_groups = n_groups;
    uint64_t total = 0;
    for (uint32_t g = 0; g < n_groups; g++) {
        ret->counts[g] = counts[g];
        total += counts[g];
    }
    if (total > c->lim.max_blocks)
        return -EMSGSIZE;
    if (total && !ids)
        return -EINVAL;
    ret->ids = (uint32_t *)(uintptr_t)ids; /* borrowed: only read by the encoder */
    return 0;
}

/* Common to SEND and RECV: connection, duplicates, in-flight limit; then send and track. */
static int submit(struct kvf_client *c, struct proto_msg *m, uint64_t req_id, char kind)
{
    client_conn_maybe_reconnect(c);
    if (c->sock >= 0)
        client_conn_pump(c); /* collect finished requests first: frees in-flight room */
    if (c->sock < 0 || !c->registered)
        return -ENOTCONN;
    for (uint32_t i = 0; i < c->n_reqs; i++)
        if (c->reqs[i].id == req_id)
            return -EEXIST;
    if (c->n_reqs >= c->max_inflight)
        return -EBUSY;
    if (c->n_reqs == c->cap_reqs) {
        uint32_t ncap = c->cap_reqs ? c->cap_reqs * 2 : 64;
        struct client_req *nr = realloc(c->reqs, ncap * sizeof *nr);
        if (!nr)
            return -ENOMEM;
        c->reqs = nr;
        c->cap_reqs = ncap;
    }
    int rc = client_conn_send(c, m, NULL, 0);
    if (rc)
        return rc;
    c->reqs[c->n_reqs++] = (struct client_req){.id = req_id, .kind = kind};
    return 0;
}

static int send_items(struct kvf_client *c, uint64_t req_id, uint32_t n_groups,
                      const uint32_t *counts, const uint32_t *ids, uint32_t n_readers,
                      uint32_t stream)
{
    if (req_id == 0 || n_readers > LAYOUT_MAX_TP * LAYOUT_MAX_PP)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    struct proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = PROTO_SEND;
    m.u.send.req_id = req_id;
    m.u.send.n_readers = n_readers;
    m.u.send.stream = stream;
    int rc = check_items(c, n_groups, counts, ids, &m.u.send.items);
    if (!rc)
        rc = submit(c, &m, req_id, 'S');
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kvf_send(struct kvf_client *c, uint64_t req_id, uint32_t n_groups, const uint32_t *counts,
             const uint32_t *ids, uint32_t n_readers)
{
    return send_items(c, req_id, n_groups, counts, ids, n_readers, 0);
}

int kvf_send_begin(struct kvf_client *c, uint64_t req_id, uint32_t n_groups,
                   const uint32_t *counts, const uint32_t *ids, uint32_t n_readers)
{
    return send_items(c, req_id, n_groups, counts, ids, n_readers, 1);
}

static int send_ready(struct kvf_client *c, uint64_t req_id, uint32_t layers_upto,
                      uint32_t event)
{
    if (layers_upto > LAYOUT_MAX_LAYERS || event > PROTO_EVENTS_MAX)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    if (c->sock >= 0)
        client_conn_pump(c); /* every call that writes also reads: events never pile up */
    int rc = -ENOENT;
    for (uint32_t i = 0; i < c->n_reqs; i++) {
        if (c->reqs[i].id == req_id && c->reqs[i].kind == 'S') {
            struct proto_msg m = {.type = PROTO_READY};
            m.u.ready = (struct proto_ready){.req_id = req_id, .layers_upto = layers_upto,
                                             .event = event};
            rc = client_conn_send(c, &m, NULL, 0);
            break;
        }
    }
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kvf_send_ready(struct kvf_client *c, uint64_t req_id, uint32_t layers_upto)
{
    return send_ready(c, req_id, layers_upto, 0);
}

int kvf_send_ready_event(struct kvf_client *c, uint64_t req_id, uint32_t layers_upto,
                         uint32_t event)
{
    return event < KVF_EVENTS_MAX ? send_ready(c, req_id, layers_upto, event + 1) : -EINVAL;
}

int kvf_recv(struct kvf_client *c, const struct kvf_recv_args *a)
{
    if (!a || a->req_id == 0 || !a->ctx_instance || !a->ctx_instance[0] ||
        strlen(a->ctx_instance) >= LAYOUT_NAME_MAX || a->ctx_dp_rank < -1 ||
        a->ctx_dp_rank >= LAYOUT_MAX_TP || (a->ctx_home && strlen(a->ctx_home) > PROTO_HOME_MAX) ||
        a->tokens > PROTO_TOKENS_MAX)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    struct proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = PROTO_RECV;
    m.u.recv.req_id = a->req_id;
    m.u.recv.ctx_dp_rank = a->ctx_dp_rank;
    m.u.recv.deadline_ms = a->deadline_ms;
    m.u.recv.tokens = a->tokens;
    strcpy(m.u.recv.ctx_instance, a->ctx_instance);
    if (a->ctx_home)
        strcpy(m.u.recv.ctx_home, a->ctx_home);
    int rc = check_items(c, a->n_groups, a->counts, a->ids, &m.u.recv.items);
    if (!rc)
        rc = submit(c, &m, a->req_id, 'R');
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kvf_cancel(struct kvf_client *c, uint64_t req_id)
{
    pthread_mutex_lock(&c->mu);
    if (c->sock >= 0)
        client_conn_pump(c); /* every call that writes also reads: events never pile up */
    int rc = -ENOENT;
    for (uint32_t i = 0; i < c->n_reqs; i++) {
        if (c->reqs[i].id == req_id) {
            struct proto_msg m = {.type = PROTO_CANCEL, .u.cancel.req_id = req_id};
            rc = client_conn_send(c, &m, NULL, 0);
            break;
        }
    }
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kvf_poll(struct kvf_client *c, struct kvf_event *ret, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : mono_now_ms() + timeout_ms;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        uint64_t v;
        if (read(c->tfd, &v, sizeof v) < 0) {
            /* EAGAIN: the reconnect timer has not fired */
        }
        if (c->sock < 0)
            client_conn_maybe_reconnect(c);
        if (c->sock >= 0)
            client_conn_pump(c);
        if (c->q_len > 0) {
            *ret = c->evq[c->q_head];
            c->q_head = (c->q_head + 1) % c->q_cap;
            c->q_len--;
            client_sync_fds(c);
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
        client_sync_fds(c);
        int64_t now = mono_now_ms();
        int64_t wait = deadline < 0 ? INT32_MAX : deadline - now;
        if (c->sock < 0 && c->next_attempt_ms >= 0 && c->next_attempt_ms - now < wait)
            wait = c->next_attempt_ms - now < 0 ? 0 : c->next_attempt_ms - now;
        if (deadline >= 0 && deadline - now <= 0)
            break;
        pthread_mutex_unlock(&c->mu);
        struct pollfd p = {.fd = c->epfd, .events = POLLIN};
        poll(&p, 1, (int)wait);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}
