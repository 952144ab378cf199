/* engine_send.c: control messages out (see engine_int.h). One allocation per send holds its
 * record and the encoded bytes, listed in e->msgs while in flight. Over a cma lane a message
 * above UCX's rendezvous threshold (a table, a RECV_REQ with many ids or its layout) is read by
 * the peer from here with process_vm_readv. After the send failed (the peer declared lost, its
 * endpoint closed) a peer that was only frozen may still read it when it runs again (docs/UCX.md
 * "cma under peer error handling"), so a failed send's allocation goes to the staging hold under
 * the peer's share key, as a failed chunk's buffer does (bounce_stage.c): freed once the peer
 * cannot read it (bstage_hold_peer_down sets when). Loop thread only. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_hold.h"
#include "daemon.h"
#include "engine_peer.h"
#include "engine_share.h"
#include "log.h"

struct msg_out {
    struct msg_out *next, *prev; /* e->msgs */
    struct engine *e;
    uint64_t key; /* the peer's share key: what a failed send exposed is held under it */
    size_t len;
    uint8_t bytes[]; /* the encoded message */
};

static void unlink_msg(struct msg_out *o)
{
    if (o->prev)
        o->prev->next = o->next;
    else
        o->e->msgs = o->next;
    if (o->next)
        o->next->prev = o->prev;
}

static void msg_sent(void *arg, int status)
{
    struct msg_out *o = arg;
    struct engine *e = o->e;
    unlink_msg(o);
    if (status >= 0 || !e->shold) {
        free(o);
        return;
    }
    /* a backstop of deadlines.transfer while the peer still looks up; its loss sets the time */
    uint64_t now = engine_now(e);
    if (hold_add(e->shold, o->key, o, o->len, now + (uint64_t)e->d->cfg.deadlines_transfer_ms,
                 now) < 0) {
        log_error("engine: out of memory holding a failed message's bytes (%zu) for a peer that "
                  "may still read them: they stay unused until the daemon exits", o->len);
        return; /* never freed under a reader */
    }
    e->c.msgs_held++;
    engine_due(e, EPART_HOLD, ENGINE_DUE_NEXT);
}

int engine_send_msg(struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    if (!p || !p->lp || !p->up)
        return -ENOTCONN;
    size_t len = 0;
    int rc = wire_encoded_size(m, &len);
    struct msg_out *o = rc == 0 ? malloc(sizeof *o + len) : NULL;
    if (rc == 0 && !o)
        rc = -ENOMEM;
    if (rc == 0)
        rc = wire_encode_into(m, o->bytes, len, &len);
    if (rc < 0) {
        log_error("engine: encoding %s: %s", wire_type_to_string(m->type), strerror(-rc));
        free(o);
        return rc;
    }
    struct engine *e = p->e;
    *o = (struct msg_out){.next = e->msgs, .e = e, .key = share_key(p), .len = len};
    if (e->msgs)
        e->msgs->prev = o;
    e->msgs = o;
    uint8_t env[ENGINE_ENV_BYTES];
    uint64_t le = htole64(flow);
    memcpy(env, &le, sizeof env);
    rc = link_send_now(p->lp, (uint16_t)m->type, env, sizeof env, o->bytes, len, msg_sent, o);
    if (rc != 0) { /* sent at once (the bytes copied out), or never went out: nobody reads it */
        unlink_msg(o);
        free(o);
    }
    return rc < 0 ? rc : 0;
}

int engine_send_nack(struct epeer *p, uint64_t flow, uint64_t req_id, uint32_t writer,
                     kvf_error_t code, wire_nack_reason_t reason, const char *msg)
{
    struct wire_msg m = {.type = WIRE_NACK};
    m.u.nack.reason = reason;
    m.u.nack.req_id = req_id;
    m.u.nack.writer = writer;
    m.u.nack.code = code;
    snprintf(m.u.nack.message, sizeof m.u.nack.message, "%s", msg);
    if (p)
        p->e->c.nacks_sent++;
    return engine_send_msg(p, flow, &m);
}

bool engine_msgs_in_flight(const struct engine *e, uint64_t key)
{
    for (const struct msg_out *o = e->msgs; o; o = o->next)
        if (o->key == key)
            return true;
    return false;
}
