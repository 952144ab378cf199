/* link_hs.c: the cluster secret, the daemon id and the handshake every endpoint runs first.
 *
 *   client (connected)                          server (accepted)
 *   HELLO     ver, id_c, nonce_c        ->
 *                                       <-      CHALLENGE ver, id_s, nonce_s, mac_s
 *   PROOF     mac_c, arena addr/len + rkey ->
 *                                       <-      ACCEPT arena addr/len + rkey
 *   mac_x = HMAC-SHA256(secret, label | ver | x | nonce_c | nonce_s | id_c | id_s), x = 'S' or 'C'
 * HELLO and CHALLENGE set HS_CAP_PROC in `why` (which older daemons ignore there): when both did,
 * PROOF and ACCEPT carry the sender's process identity after the header, with its own MAC
 * (link_proc.c). An older peer gets, and sends, the old messages. HS_CAP_CUDA there says the
 * sender's UCX moves CUDA memory (link_cuda.c): both set it, chunks may go device to device.
 *
 * Each side checks the other's MAC in constant time (crypto_verify_32) before it sends anything
 * that depends on the secret; the arena rkeys travel only after the MAC checked out. A wrong
 * version or MAC is answered with REFUSE, counted and logged on both sides, and the endpoint is
 * closed once the REFUSE left. Loop thread; the AM callback runs inside progress. */
#include "link_int.h"
#include "secret_file.h"

#include "log.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HS_MAGIC 0x4c46564bu /* "KVFL" */
#define HS_LABEL "kvferry-link-handshake"

enum { HS_HELLO = 1, HS_CHALLENGE, HS_PROOF, HS_ACCEPT, HS_REFUSE, HS_DONE };
enum { WHY_VERSION = 1, WHY_MAC, WHY_PROTOCOL, WHY_FULL };
#define HS_CAP_PROC 0x80 /* in `why` of HELLO and CHALLENGE: "I send and take link_proc_id" */
#define HS_CAP_CUDA 0x40 /* the same: "my UCX moves CUDA memory" (link_cuda.c); older ignore it */

struct hs_msg {
    uint32_t magic;
    uint16_t version;
    uint8_t kind;
    uint8_t why;
    uint8_t rid[LINK_ID_BYTES];
    uint8_t nonce[LINK_NONCE_BYTES];
    char host[LINK_HOST_MAX];
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    uint64_t arena_addr, arena_len;
} __attribute__((packed));

struct hs_msg_proc {
    struct hs_msg m;
    struct link_proc_id id;
} __attribute__((packed));

static const char *why_str(unsigned why)
{
    return why == WHY_VERSION ? "protocol version mismatch"
           : why == WHY_MAC   ? "cluster secret mismatch (bad MAC)"
           : why == WHY_FULL  ? "the server's table of peers is full"
                              : "handshake protocol error";
}

int link_secret_load(struct link *l, const char *path)
{
    char err[512];
    int rc = secret_file_read(path, l->secret, sizeof l->secret, &l->secret_len, err, sizeof err);
    if (rc < 0)
        log_error("link: %s", err);
    return rc;
}

void link_id_init(struct link *l)
{
    randombytes_buf(l->rid, sizeof(l->rid));
    if (gethostname(l->host, sizeof(l->host) - 1) < 0)
        snprintf(l->host, sizeof(l->host), "unknown");
    l->host[sizeof(l->host) - 1] = 0;
    char hex[2 * LINK_ID_BYTES + 1];
    sodium_bin2hex(hex, sizeof(hex), l->rid, sizeof(l->rid));
    snprintf(l->self_id, sizeof(l->self_id), "%s/%s", l->host, hex);
}

static void hs_set_remote(struct link_peer *p, const struct hs_msg *m)
{
    memcpy(p->remote_rid, m->rid, sizeof(p->remote_rid));
    memcpy(p->remote_host, m->host, sizeof(p->remote_host));
    p->remote_host[sizeof(p->remote_host) - 1] = 0;
    char hex[2 * LINK_ID_BYTES + 1];
    sodium_bin2hex(hex, sizeof(hex), m->rid, sizeof(m->rid));
    snprintf(p->remote_id, sizeof(p->remote_id), "%s/%s", p->remote_host, hex);
}

/* mac for direction dir ('S' server proves, 'C' client proves). */
static void hs_mac(const struct link_peer *p, char dir, uint8_t *out)
{
    const struct link *l = p->link;
    const uint8_t *nc = p->outbound ? p->nonce_local : p->nonce_remote;
    const uint8_t *ns = p->outbound ? p->nonce_remote : p->nonce_local;
    char self_host[LINK_HOST_MAX] = {0}, peer_host[LINK_HOST_MAX] = {0};
    memcpy(self_host, l->host, sizeof(self_host));
    memcpy(peer_host, p->remote_host, sizeof(peer_host));
    const uint8_t *idc_r = p->outbound ? l->rid : p->remote_rid;
    const uint8_t *ids_r = p->outbound ? p->remote_rid : l->rid;
    const char *idc_h = p->outbound ? self_host : peer_host;
    const char *ids_h = p->outbound ? peer_host : self_host;
    uint16_t ver = htole16(l->cfg.proto_version);
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, l->secret, l->secret_len);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)HS_LABEL, sizeof(HS_LABEL));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)&ver, sizeof(ver));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)&dir, 1);
    crypto_auth_hmacsha256_update(&st, nc, LINK_NONCE_BYTES);
    crypto_auth_hmacsha256_update(&st, ns, LINK_NONCE_BYTES);
    crypto_auth_hmacsha256_update(&st, idc_r, LINK_ID_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)idc_h, LINK_HOST_MAX);
    crypto_auth_hmacsha256_update(&st, ids_r, LINK_ID_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)ids_h, LINK_HOST_MAX);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
}

static void hs_fill(const struct link_peer *p, struct hs_msg *m, unsigned kind)
{
    const struct link *l = p->link;
    memset(m, 0, sizeof(*m));
    m->magic = htole32(HS_MAGIC);
    m->version = htole16(l->cfg.proto_version);
    m->kind = (uint8_t)kind;
    memcpy(m->rid, l->rid, sizeof(m->rid));
    memcpy(m->host, l->host, sizeof(m->host));
    memcpy(m->nonce, p->nonce_local, sizeof(m->nonce));
    m->arena_addr = htole64((uint64_t)(uintptr_t)l->arena);
    m->arena_len = htole64(l->arena_len);
}

static int hs_send(struct link_peer *p, const struct hs_msg *m, int with_rkey, link_done_cb cb)
{
    const struct link *l = p->link;
    struct hs_msg_proc x = {.m = *m};
    int proc = p->proc_cap && (m->kind == HS_PROOF || m->kind == HS_ACCEPT);
    if (proc)
        link_proc_fill(p, &x.id);
    return link_am_send(p, LINK_AM_HS, &x, proc ? sizeof(x) : sizeof(*m),
                        with_rkey ? l->arena_rkey : NULL, with_rkey ? l->arena_rkey_len : 0, cb, p);
}

static void hello_sent(void *arg, int status)
{
    struct link_peer *p = arg;
    if (status == 0 && p->state == LINK_PEER_CONNECTING)
        link_peer_set_state(p, LINK_PEER_HANDSHAKING);
}

int link_hs_start(struct link_peer *p)
{
    struct hs_msg m;
    randombytes_buf(p->nonce_local, sizeof(p->nonce_local));
    hs_fill(p, &m, HS_HELLO);
    m.why = p->link->cfg.proc_test == LINK_PROC_TEST_OLD ? 0 : HS_CAP_PROC;
    if (link_cuda_offer(p->link))
        m.why |= HS_CAP_CUDA;
    p->hs_step = HS_CHALLENGE;
    return hs_send(p, &m, 0, hello_sent);
}

static void refuse_sent(void *arg, int status)
{
    if (status < 0)
        link_peer_fail(arg, -EPERM);
}

/* We refuse the peer: tell it why and count. The refused side closes the endpoint when the REFUSE
 * arrives (closing here first could overtake the REFUSE); the handshake deadline bounds a peer
 * that does not. */
static void hs_refuse(struct link_peer *p, unsigned why)
{
    struct link *l = p->link;
    l->st.refused++;
    log_warn("link peer %llu (%s %s): refused: %s", (unsigned long long)p->serial, p->addr,
             p->remote_id, why_str(why));
    p->hs_step = HS_DONE;
    p->refused = 1;
    struct hs_msg m;
    hs_fill(p, &m, HS_REFUSE);
    m.why = (uint8_t)why;
    m.arena_addr = m.arena_len = 0;
    if (hs_send(p, &m, 0, refuse_sent) < 0)
        link_peer_fail(p, -EPERM);
}

static void hs_ready(struct link_peer *p, const struct hs_msg *m, const void *rkey, size_t rlen)
{
    struct link *l = p->link;
    if (rlen && link_peer_set_rkey(p, rkey, rlen, le64toh(m->arena_addr),
                                   le64toh(m->arena_len)) < 0) {
        hs_refuse(p, WHY_PROTOCOL);
        return;
    }
    p->hs_step = HS_DONE;
    link_proc_ready(p);
    link_cuda_peer_decide(p);
    link_peer_set_state(p, LINK_PEER_READY);
    link_peer_detect_lanes(p);
    p->announced = 1;
    log_info("link peer %llu (%s): %s ready, put lanes [%s], put %s, gpu_direct %s (%s)",
             (unsigned long long)p->serial, p->addr, p->remote_id, p->lanes,
             p->put_fast ? "fast" : "slow: use messages", p->gpu_direct ? "yes" : "no", p->gpu_why);
    if (l->ops.on_peer_up)
        l->ops.on_peer_up(l->ops.arg, p);
    link_msg_replay_early(p);
}

static void hs_handle(struct link_peer *p, const struct hs_msg *m, const struct link_proc_id *id,
                      const void *data, size_t len)
{
    struct link *l = p->link;
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    struct hs_msg out;
    if (m->kind == HS_REFUSE) {
        l->st.refused++;
        log_warn("link peer %llu (%s): the peer refused us: %s", (unsigned long long)p->serial,
                 p->addr, why_str(m->why));
        p->hs_step = HS_DONE;
        link_peer_fail(p, -EPERM);
        return;
    }
    if (m->kind != p->hs_step && !(p->hs_step == 0 && !p->outbound && m->kind == HS_HELLO)) {
        hs_refuse(p, WHY_PROTOCOL);
        return;
    }
    if (le16toh(m->version) != l->cfg.proto_version) {
        hs_set_remote(p, m);
        log_warn("link peer %llu: version %u, ours %u", (unsigned long long)p->serial,
                 le16toh(m->version), l->cfg.proto_version);
        hs_refuse(p, WHY_VERSION);
        return;
    }
    switch (m->kind) {
    case HS_HELLO: /* server */
        hs_set_remote(p, m);
        memcpy(p->nonce_remote, m->nonce, sizeof(p->nonce_remote));
        randombytes_buf(p->nonce_local, sizeof(p->nonce_local));
        p->proc_cap = (m->why & HS_CAP_PROC) && l->cfg.proc_test != LINK_PROC_TEST_OLD;
        p->remote_cuda = (m->why & HS_CAP_CUDA) != 0;
        hs_fill(p, &out, HS_CHALLENGE);
        out.why = (p->proc_cap ? HS_CAP_PROC : 0) | (link_cuda_offer(l) ? HS_CAP_CUDA : 0);
        out.arena_addr = out.arena_len = 0;
        hs_mac(p, 'S', out.mac);
        p->hs_step = HS_PROOF;
        if (hs_send(p, &out, 0, NULL) < 0)
            link_peer_fail(p, -EIO);
        break;
    case HS_CHALLENGE: /* client */
        hs_set_remote(p, m);
        memcpy(p->nonce_remote, m->nonce, sizeof(p->nonce_remote));
        hs_mac(p, 'S', mac);
        if (crypto_verify_32(mac, m->mac) != 0) {
            hs_refuse(p, WHY_MAC);
            return;
        }
        p->proc_cap = (m->why & HS_CAP_PROC) != 0; /* we offered it in HELLO */
        p->remote_cuda = (m->why & HS_CAP_CUDA) != 0;
        hs_fill(p, &out, HS_PROOF);
        hs_mac(p, 'C', out.mac);
        p->hs_step = HS_ACCEPT;
        p->server_proven = 1;
        if (hs_send(p, &out, 1, NULL) < 0)
            link_peer_fail(p, -EIO);
        break;
    case HS_PROOF: /* server */
        hs_mac(p, 'C', mac);
        if (crypto_verify_32(mac, m->mac) != 0) {
            hs_refuse(p, WHY_MAC);
            return;
        }
        if (id && link_proc_check(p, id) < 0) {
            hs_refuse(p, WHY_PROTOCOL);
            return;
        }
        if (link_admit_proven(p) < 0) { /* from the unproven slots to the proven table */
            hs_refuse(p, WHY_FULL);
            return;
        }
        hs_fill(p, &out, HS_ACCEPT);
        if (hs_send(p, &out, 1, NULL) < 0) {
            link_peer_fail(p, -EIO);
            return;
        }
        hs_ready(p, m, data, len);
        break;
    case HS_ACCEPT: /* client */
        if (id && link_proc_check(p, id) < 0) {
            hs_refuse(p, WHY_PROTOCOL);
            return;
        }
        hs_ready(p, m, data, len);
        break;
    default:
        hs_refuse(p, WHY_PROTOCOL);
    }
}

ucs_status_t link_hs_am_cb(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param)
{
    struct link *l = arg;
    struct link_peer *p = NULL;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        p = link_peer_by_ep(l, param->reply_ep);
    const struct hs_msg *m = header;
    struct hs_msg_proc copy;
    size_t want = sizeof(copy.m);
    if (header_length >= sizeof(copy.m)) {
        memcpy(&copy.m, m, sizeof(copy.m)); /* header may be unaligned */
        if (p && p->proc_cap && (copy.m.kind == HS_PROOF || copy.m.kind == HS_ACCEPT))
            want = sizeof(copy);
    }
    if (!p || p->state >= LINK_PEER_READY || p->hs_step == HS_DONE ||
        header_length != want || le32toh(copy.m.magic) != HS_MAGIC ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length > LINK_RKEY_MAX) {
        l->st.dropped++;
        if (p && p->state < LINK_PEER_READY && p->hs_step != HS_DONE)
            hs_refuse(p, WHY_PROTOCOL);
        return UCS_OK; /* a rendezvous descriptor is released by returning UCS_OK */
    }
    if (want == sizeof(copy))
        memcpy(&copy.id, (const uint8_t *)header + sizeof(copy.m), sizeof(copy.id));
    hs_handle(p, &copy.m, want == sizeof(copy) ? &copy.id : NULL, data, length);
    return UCS_OK;
}
