/* link_alive.c: keepalive between READY peers (see link.h). Loop thread only.
 *
 * Each side PINGs every READY peer once per keepalive interval (one PING in flight at most, so a
 * peer that cannot take it never piles them up) and answers a PING with a PONG from inside the
 * AM callback, as the handshake answers. Either heard from the peer proves its loop runs. A peer
 * silent for two intervals is suspect; for keepalive_misses intervals it fails with -ETIMEDOUT,
 * which force-closes its endpoint and reports on_peer_down. Time is the loop's (uv_now); time our
 * own loop stood still (a long synchronous step, or this process was stopped) is taken off the
 * peers' silence. */
#include "link_int.h"

#include "log.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#define ALIVE_MAGIC 0x4c41564bu /* "KVAL" */

enum { ALIVE_PING = 1, ALIVE_PONG = 2 };

struct alive_msg {
    uint32_t magic;
    uint8_t kind;
    uint8_t pad[3];
    uint64_t seq;
} __attribute__((packed));

int link_peer_suspect(const struct link_peer *p)
{
    return p->state == LINK_PEER_READY && p->suspect;
}

uint64_t link_peer_silent_ms(const struct link_peer *p)
{
    uint64_t now = uv_now(p->link->loop);
    return p->alive_seen_ms && now > p->alive_seen_ms ? now - p->alive_seen_ms : 0;
}

static void ping_done(void *arg, int status)
{
    (void)status; /* an error here is the endpoint's: its error handler fails the peer */
    struct link_peer *p = arg;
    p->alive_pending = 0;
    link_peer_unref(p);
}

static void alive_send(struct link_peer *p, unsigned kind, uint64_t seq)
{
    struct alive_msg m = {.magic = htole32(ALIVE_MAGIC), .kind = (uint8_t)kind,
                          .seq = htole64(seq)};
    if (kind == ALIVE_PONG) {
        (void)link_am_send(p, LINK_AM_ALIVE, &m, sizeof m, NULL, 0, NULL, NULL);
        return;
    }
    p->refs++;
    p->alive_pending = 1;
    if (link_am_send(p, LINK_AM_ALIVE, &m, sizeof m, NULL, 0, ping_done, p) < 0) {
        p->alive_pending = 0;
        link_peer_unref(p);
    }
}

ucs_status_t link_alive_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    (void)data;
    struct link *l = arg;
    struct link_peer *p = NULL;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        p = link_peer_by_ep(l, param->reply_ep);
    struct alive_msg m;
    if (!p || p->state != LINK_PEER_READY || header_length != sizeof m || length != 0) {
        l->st.dropped++;
        return UCS_OK;
    }
    memcpy(&m, header, sizeof m);
    if (le32toh(m.magic) != ALIVE_MAGIC || (m.kind != ALIVE_PING && m.kind != ALIVE_PONG)) {
        l->st.dropped++;
        return UCS_OK;
    }
    p->alive_seen_ms = uv_now(l->loop);
    if (p->suspect) {
        p->suspect = 0;
        log_info("link peer %llu (%s %s): heard again, no longer suspect",
                 (unsigned long long)p->serial, p->addr, p->remote_id);
    }
    if (m.kind == ALIVE_PING)
        alive_send(p, ALIVE_PONG, le64toh(m.seq));
    return UCS_OK;
}

void link_alive_check(struct link *l, uint64_t now_ms)
{
    uint64_t iv = l->cfg.keepalive_interval_ms, lost = iv * l->cfg.keepalive_misses;
    /* Time our own loop did not run (beyond two tick periods) is not the peers' silence: their
     * PONGs may wait unread behind this very tick (libuv runs timers before I/O). */
    uint64_t gap = l->alive_checked_ms ? now_ms - l->alive_checked_ms : 0;
    uint64_t stall = gap > 2 * l->alive_tick_ms ? gap - l->alive_tick_ms : 0;
    if (stall > iv)
        log_warn("link: the loop did not run for %llu ms: not counted as the peers' silence",
                 (unsigned long long)gap);
    l->alive_checked_ms = now_ms;
    for (struct link_peer *p = l->peers; p; p = p->next) {
        if (p->state != LINK_PEER_READY)
            continue;
        if (!p->alive_seen_ms) /* just READY */
            p->alive_seen_ms = now_ms;
        p->alive_seen_ms = p->alive_seen_ms + stall < now_ms ? p->alive_seen_ms + stall : now_ms;
        uint64_t silent = now_ms - p->alive_seen_ms;
        if (silent >= lost) {
            l->st.peers_lost_keepalive++;
            log_req(LOG_LVL_WARN, 0, *p->addr ? p->addr : p->remote_id, NULL,
                    "link peer %llu (%s %s): not heard for %llu ms (keepalive every %llu ms, "
                    "lost after %u silent intervals): lost",
                    (unsigned long long)p->serial, p->addr, p->remote_id,
                    (unsigned long long)silent, (unsigned long long)iv, l->cfg.keepalive_misses);
            link_peer_fail(p, -ETIMEDOUT);
            continue;
        }
        if (silent >= 2 * iv && !p->suspect) {
            p->suspect = 1;
            log_warn("link peer %llu (%s %s): not heard for %llu ms: suspect",
                     (unsigned long long)p->serial, p->addr, p->remote_id,
                     (unsigned long long)silent);
        }
        if (!p->alive_pending && now_ms - p->alive_sent_ms >= iv) {
            p->alive_sent_ms = now_ms;
            alive_send(p, ALIVE_PING, ++p->alive_seq);
        }
    }
}
