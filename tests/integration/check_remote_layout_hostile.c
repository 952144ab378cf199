/* check_remote_layout_hostile.c: a real context daemon against a generation peer that names
 * generation layouts it never sent (engine_laycache.h). The test process plays the generation
 * daemon with the real link layer and wire codec: a RECV_REQ naming a layout the context daemon
 * does not hold, or one whose layout does not decode, is NACKed BAD_REQUEST with the reason
 * (counted as layouts_missed), never planned against whatever the slot held; a sent layout is
 * kept and a later reference to it is taken; the daemon keeps serving. A RECV_REQ reusing the
 * flow id of one in flight fails that flow too (the generation side ends the flow it holds under
 * the id at the NACK, so the context side must not serve it on). */
#include <check.h>
#include <endian.h>
#include <uv.h>

#include "link.h"
#include "remoteutil.h"
#include "wire.h"

struct gpeer {
    uv_loop_t loop;
    struct link *link;
    struct link_peer *peer;
    int up, nacks;
    uint64_t nack_flow;
    kvf_error_t nack_code;
    char nack_msg[WIRE_TEXT_MAX];
};

static void done_cb(void *arg, int status)
{
    (void)status;
    free(arg);
}

static void on_up(void *arg, struct link_peer *p)
{
    struct gpeer *g = arg;
    (void)p;
    g->up = 1;
}

static void on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    struct gpeer *g = arg;
    (void)p, (void)type;
    struct wire_msg m;
    if (wire_decode(data, len, &m) != 0)
        return;
    if (m.type == WIRE_NACK) {
        g->nacks++;
        uint64_t le = 0;
        memcpy(&le, hdr, hdr_len < sizeof le ? hdr_len : sizeof le);
        g->nack_flow = le64toh(le);
        g->nack_code = m.u.nack.code;
        snprintf(g->nack_msg, sizeof g->nack_msg, "%s", m.u.nack.message);
    }
    wire_msg_done(&m);
}

/* Sends a RECV_REQ (flow) for context rank 0 naming layout (id, slot), with json or without. */
static void send_req(struct gpeer *g, const struct ru_rank *gen, uint64_t flow, uint64_t id,
                     const char *json)
{
    struct wire_msg m = {.type = WIRE_RECV_REQ};
    struct wire_recv_req *q = &m.u.recv_req;
    q->req_id = 100 + flow;
    snprintf(q->ctx_instance, sizeof q->ctx_instance, "ctx");
    q->table_epoch = 1;
    q->ctx_dp_rank = -1;
    q->gen_json = json;
    q->gen_json_len = json ? (uint32_t)strlen(json) : 0;
    q->layout_id = id;
    q->layout_slot = 1;
    q->n_groups = gen->l.n_groups;
    const uint32_t *p = gen->ids;
    for (uint32_t i = 0; i < q->n_groups; i++) {
        q->n_ids[i] = gen->counts[i];
        q->ids[i] = p;
        p += gen->counts[i];
    }
    q->path = WIRE_PATH_BOUNCE;
    q->extent_bytes = 4096;
    void *buf;
    size_t len;
    ck_assert_int_eq(wire_encode(&m, &buf, &len), 0);
    uint64_t le = htole64(flow);
    ck_assert_int_eq(link_send(g->peer, WIRE_RECV_REQ, &le, sizeof le, buf, len, done_cb, buf),
                     0);
}

/* Runs the loop until `nacks` NACKs came, or for ms when expecting none more. */
static void pump(struct gpeer *g, int nacks, unsigned ms)
{
    for (uint64_t until = ru_now_ms() + ms; g->nacks < nacks && ru_now_ms() < until;) {
        uv_run(&g->loop, UV_RUN_NOWAIT);
        ru_sleep_ms(2);
    }
}

START_TEST(remote_context_refuses_a_layout_it_does_not_hold)
{
    char top[64], secret[128];
    tu_tmpdir(top, sizeof top);
    ru_secret(top, "secret", 6, secret, sizeof secret);
    struct ru_daemon a;
    ck_assert_int_eq(ru_daemon_start(&a, top, "a", 1, secret, NULL), 0);
    uint64_t rng = 4;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, "tiny:blocks=64,slots=4", "ctx", ROLE_CONTEXT, 2, &rng, 0x5a);
    ru_inst_init(&gen, "tiny:blocks=64,slots=4", "gen", ROLE_GENERATION, 2, &rng, RU_POISON);
    ru_inst_register(&ctx, &a);
    struct gpeer g;
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(uv_loop_init(&g.loop), 0);
    struct link_config lc = {.secret_path = secret};
    struct link_ops ops = {.on_peer_up = on_up, .on_msg = on_msg, .arg = &g};
    ck_assert_int_eq(link_new(&g.loop, &lc, &ops, &g.link), 0);
    ck_assert_int_eq(link_connect(g.link, a.addr, &g.peer), 0);
    for (uint64_t until = ru_now_ms() + 10000; !g.up && ru_now_ms() < until;)
        uv_run(&g.loop, UV_RUN_NOWAIT), ru_sleep_ms(2);
    ck_assert(g.up);
    /* a reference to a layout never sent */
    send_req(&g, &gen.r[0], 1, 5, NULL);
    pump(&g, 1, 10000);
    ck_assert_int_eq(g.nacks, 1);
    ck_assert_int_eq(g.nack_code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(g.nack_msg, "generation layout: layout 5 is not held in slot 1 (it "
                                     "holds 0)"), "%s", g.nack_msg);
    /* a sent layout that does not decode: refused, and the slot keeps nothing */
    send_req(&g, &gen.r[0], 2, 6, "{\"instance\":\"gen\"}");
    pump(&g, 2, 10000);
    ck_assert_int_eq(g.nacks, 2);
    ck_assert_int_eq(g.nack_code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(g.nack_msg, "generation layout: "), "%s", g.nack_msg);
    send_req(&g, &gen.r[0], 3, 6, NULL);
    pump(&g, 3, 10000);
    ck_assert_int_eq(g.nacks, 3);
    ck_assert_msg(strstr(g.nack_msg, "layout 6 is not held in slot 1"), "%s", g.nack_msg);
    /* a true layout is kept, and a reference to it is taken (its flow waits for the SEND) */
    json_t *o = layout_to_jobj(&gen.r[0].l);
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    send_req(&g, &gen.r[0], 4, 7, txt);
    send_req(&g, &gen.r[0], 5, 7, NULL);
    free(txt);
    ru_wait_peers_stat(&a, "flows", 2, 10000);
    pump(&g, 4, 200); /* nothing more refused */
    ck_assert_int_eq(g.nacks, 3);
    ck_assert_int_eq(ru_peers_stat(&a, "layouts_decoded"), 1);
    ck_assert_int_eq(ru_peers_stat(&a, "layouts_missed"), 2);
    /* flow 4 again while it waits: both refused, once, flow 5 untouched */
    long long failed0 = ru_peers_stat(&a, "flows_failed");
    send_req(&g, &gen.r[0], 4, 7, NULL);
    pump(&g, 4, 10000);
    ck_assert_int_eq(g.nacks, 4);
    ck_assert_uint_eq(g.nack_flow, 4);
    ck_assert_int_eq(g.nack_code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(g.nack_msg, "flow 4 came again while it was in flight"), "%s", g.nack_msg);
    ck_assert_int_eq(ru_peers_stat(&a, "flows_failed"), failed0 + 1);
    pump(&g, 5, 200);
    ck_assert_int_eq(g.nacks, 4);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    g.link = link_free(g.link);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&g.loop), 0);
    ck_assert_int_eq(ru_daemon_stop(&a), 0);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *layout_hostile_suite(void)
{
    Suite *s = suite_create("remote_layout_hostile");
    TCase *t = tcase_create("hostile_generation");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, remote_context_refuses_a_layout_it_does_not_hold);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(layout_hostile_suite()); }
