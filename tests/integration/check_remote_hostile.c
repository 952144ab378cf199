/* check_remote_hostile.c: a generation daemon against a misbehaving context daemon. The test
 * process plays the context home with the real link layer (UCX, the cluster secret, the engine's
 * envelope and wire codec): it serves a true table, then answers the RECV_REQ with chunks that
 * break the grant (a stale generation, a wrong length, an unknown slot). The real kvferryd must
 * fail the request with BOUND_VIOLATION and scatter nothing into the generation rank's pools. */
#include <check.h>
#include <endian.h>
#include <uv.h>

#include "link.h"
#include "remoteutil.h"
#include "wire.h"

enum { BAD_GENERATION, BAD_LENGTH, BAD_SLOT };

struct hostile {
    uv_loop_t loop;
    struct link *link;
    int mode;
    struct layout ctx; /* the one rank of the context instance */
    char addr[64];
    int tables, recv_reqs, nacks, chunks_sent;
    kvf_error_t nack_code;
    uint8_t *payload;
};

static void done_cb(void *arg, int status)
{
    (void)status;
    free(arg);
}

static void send_msg(struct link_peer *p, uint64_t flow, const struct wire_msg *m)
{
    void *buf;
    size_t len;
    ck_assert_int_eq(wire_encode(m, &buf, &len), 0);
    uint64_t le = htole64(flow);
    ck_assert_int_eq(link_send(p, (uint16_t)m->type, &le, sizeof le, buf, len, done_cb, buf), 0);
}

static void on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    struct hostile *h = arg;
    ck_assert_uint_ge(hdr_len, 8);
    uint64_t flow;
    memcpy(&flow, hdr, 8);
    flow = le64toh(flow);
    struct wire_msg m;
    if (wire_decode(data, len, &m) != 0)
        return;
    ck_assert_int_eq(m.type, type);
    if (m.type == WIRE_TABLE_REQ) {
        h->tables++;
        json_t *o = layout_to_jobj(&h->ctx);
        char *txt = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        struct wire_rank r = {.json = txt, .json_len = (uint32_t)strlen(txt)};
        snprintf(r.addr, sizeof r.addr, "%s", h->addr);
        struct wire_msg t = {.type = WIRE_TABLE};
        snprintf(t.u.table.instance, sizeof t.u.table.instance, "%s", h->ctx.instance);
        t.u.table.epoch = 1;
        t.u.table.n_ranks = 1;
        t.u.table.ranks = &r;
        send_msg(p, flow, &t);
        free(txt);
    } else if (m.type == WIRE_RECV_REQ) {
        h->recv_reqs++;
        ck_assert_uint_gt(m.u.recv_req.n_grants, 0);
        const struct wire_grant *g = &m.u.recv_req.grants[0];
        struct wire_msg c = {.type = WIRE_CHUNK};
        c.u.chunk = (struct wire_chunk){m.u.recv_req.req_id, m.u.recv_req.writer, g->slot,
                                        g->generation,       g->ext_off,          g->length};
        size_t plen = g->length;
        if (h->mode == BAD_GENERATION)
            c.u.chunk.generation++;
        else if (h->mode == BAD_LENGTH)
            plen = g->length / 2;
        else
            c.u.chunk.slot += 1000;
        uint8_t hb[128];
        uint64_t le = htole64(flow);
        memcpy(hb, &le, 8);
        size_t n;
        ck_assert_int_eq(wire_encode_into(&c, hb + 8, sizeof hb - 8, &n), 0);
        h->payload = malloc(plen);
        ck_assert_ptr_nonnull(h->payload);
        memset(h->payload, 0x77, plen);
        ck_assert_int_eq(link_send(p, WIRE_CHUNK, hb, 8 + n, h->payload, plen, NULL, NULL), 0);
        h->chunks_sent++;
    } else if (m.type == WIRE_NACK) {
        h->nacks++;
        h->nack_code = m.u.nack.code;
    }
    wire_msg_done(&m);
}

static void hostile_case(int mode)
{
    char top[64], secret[128];
    tu_tmpdir(top, sizeof top);
    ru_secret(top, "secret", 5, secret, sizeof secret);
    struct ru_daemon b;
    ck_assert_int_eq(
        ru_daemon_start(
            &b, top, "b", 0, secret,
            "arena:\n  size: 8MiB\n  chunk: 1MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"),
        0);
    struct hostile h;
    memset(&h, 0, sizeof h);
    h.mode = mode;
    ck_assert_int_eq(uv_loop_init(&h.loop), 0);
    struct link_config lc = {
        .listen_host = "127.0.0.1", .listen_port = 0, .secret_path = secret, .arena_bytes = 0};
    struct link_ops ops = {.on_msg = on_msg, .arg = &h};
    ck_assert_int_eq(link_new(&h.loop, &lc, &ops, &h.link), 0);
    snprintf(h.addr, sizeof h.addr, "127.0.0.1:%u", link_listen_port(h.link));
    uint64_t rng = 3;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, "tiny:blocks=64,slots=4", "ctx", ROLE_CONTEXT, 6, &rng, 0x5a);
    ru_inst_init(&gen, "tiny:blocks=64,slots=4", "gen", ROLE_GENERATION, 6, &rng, RU_POISON);
    h.ctx = ctx.r[0].l;
    ru_inst_register(&gen, &b);
    struct ru_rank *r = &gen.r[0];
    struct kvf_recv_args a = {.req_id = 9,
                              .ctx_instance = "ctx",
                              .ctx_dp_rank = -1,
                              .ctx_home = h.addr,
                              .n_groups = r->l.n_groups,
                              .counts = r->counts,
                              .ids = r->ids};
    ck_assert_int_eq(kvf_recv(r->c, &a), 0);
    struct kvf_event ev;
    int kind = 0;
    uint64_t until = ru_now_ms() + tu_ms(20000);
    while (!kind && ru_now_ms() < until) {
        uv_run(&h.loop, UV_RUN_NOWAIT);
        if (kvf_poll(r->c, &ev, 2) == 1 && ev.req_id == 9)
            kind = ev.kind;
    }
    for (until = ru_now_ms() + tu_ms(5000); h.nacks == 0 && ru_now_ms() < until;) { /* the NACK */
        uv_run(&h.loop, UV_RUN_NOWAIT);
        ru_sleep_ms(2);
    }
    if (kind != KVF_EV_FAILED || ev.error != KVF_E_BOUND_VIOLATION)
        ru_dump_log(&b, "generation daemon");
    ck_assert_int_eq(h.tables, 1);
    ck_assert_int_eq(h.recv_reqs, 1);
    ck_assert_int_eq(h.chunks_sent, 1);
    ck_assert_int_eq(kind, KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_BOUND_VIOLATION, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    fprintf(stderr, "mode %d: %s\n", mode, ev.message);
    ck_assert_int_eq(h.nacks, 1);
    ck_assert_int_eq(h.nack_code, KVF_E_BOUND_VIOLATION);
    /* nothing scattered: every generation pool byte is still poison */
    for (uint32_t p = 0; p < r->mem.n; p++)
        for (uint64_t i = 0; i < r->mem.size[p]; i++)
            if (r->mem.base[p][i] != RU_POISON)
                ck_abort_msg("pool %u byte %llu was written", p, (unsigned long long)i);
    json_t *st = ru_ctl(&b, "stats");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(st, "peers"), "bound_violations")), 1);
    json_decref(st);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    ck_assert_int_eq(ru_daemon_stop(&b), 0);
    h.link = link_free(h.link);
    uv_run(&h.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&h.loop), 0);
    free(h.payload);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(remote_chunk_with_a_stale_generation_is_a_bound_violation)
{
    hostile_case(BAD_GENERATION);
}
END_TEST

START_TEST(remote_chunk_with_a_wrong_length_is_a_bound_violation)
{
    hostile_case(BAD_LENGTH);
}
END_TEST

START_TEST(remote_chunk_for_a_slot_never_granted_is_a_bound_violation)
{
    hostile_case(BAD_SLOT);
}
END_TEST

/* ---- a flood of forwarded instances against a home ---- */

struct flood {
    uv_loop_t loop;
    struct link *link;
    struct link_peer *peer;
    int up, tables, nacks;
    kvf_error_t nack_code;
    char table_of[LAYOUT_NAME_MAX];
};

static void flood_up(void *arg, struct link_peer *p)
{
    struct flood *f = arg;
    f->peer = p;
    f->up = 1;
}

static void flood_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr,
                      size_t hdr_len, const void *data, size_t len)
{
    (void)p, (void)type, (void)hdr, (void)hdr_len;
    struct flood *f = arg;
    struct wire_msg m;
    if (wire_decode(data, len, &m) != 0)
        return;
    if (m.type == WIRE_TABLE) {
        f->tables++;
        snprintf(f->table_of, sizeof f->table_of, "%s", m.u.table.instance);
    } else if (m.type == WIRE_TABLE_NACK) {
        f->nacks++;
        f->nack_code = m.u.table_nack.code;
    }
    wire_msg_done(&m);
}

START_TEST(remote_home_keeps_a_bounded_number_of_forwarded_instances)
{
    enum { LIMIT = 1024 };
    char top[64], secret[128];
    tu_tmpdir(top, sizeof top);
    ru_secret(top, "secret", 5, secret, sizeof secret);
    struct ru_daemon a;
    ck_assert_int_eq(ru_daemon_start(&a, top, "a", 1, secret, NULL), 0);
    struct flood f;
    memset(&f, 0, sizeof f);
    ck_assert_int_eq(uv_loop_init(&f.loop), 0);
    /* the daemon decodes 1025 layouts under TSan slowly: its PONGs may wait (scaled keepalive) */
    struct link_config lc = {.secret_path = secret, .keepalive_interval_ms = tu_ms(1000)};
    struct link_ops ops = {.on_peer_up = flood_up, .on_msg = flood_msg, .arg = &f};
    ck_assert_int_eq(link_new(&f.loop, &lc, &ops, &f.link), 0);
    struct link_peer *lp;
    ck_assert_int_eq(link_connect(f.link, a.addr, &lp), 0);
    uint64_t until = ru_now_ms() + tu_ms(10000);
    while (!f.up && ru_now_ms() < until)
        uv_run(&f.loop, UV_RUN_ONCE);
    ck_assert(f.up);
    struct preset_spec ps;
    char err[256];
    ck_assert_int_eq(preset_parse("tiny:blocks=16,slots=1", &ps, err, sizeof err), 0);
    struct layout l;
    for (int i = 0; i <= LIMIT; i++) {
        char inst[32];
        snprintf(inst, sizeof inst, "flood%d", i);
        ck_assert_int_eq(preset_build(&ps, inst, ROLE_CONTEXT, -1, &l, err, sizeof err), 0);
        json_t *o = layout_to_jobj(&l);
        char *txt = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        struct wire_msg m = {.type = WIRE_LAYOUT_FORWARD};
        snprintf(m.u.layout_forward.addr, sizeof m.u.layout_forward.addr, "127.0.0.1:9");
        m.u.layout_forward.json = txt;
        m.u.layout_forward.json_len = (uint32_t)strlen(txt);
        send_msg(f.peer, 0, &m);
        free(txt);
        if (i % 64 == 0)
            uv_run(&f.loop, UV_RUN_NOWAIT);
    }
    const char *ask[2] = {"flood0", "flood1024"};
    for (int i = 0; i < 2; i++) {
        struct wire_msg m = {.type = WIRE_TABLE_REQ};
        snprintf(m.u.table_req.instance, sizeof m.u.table_req.instance, "%s", ask[i]);
        send_msg(f.peer, 0, &m);
    }
    until = ru_now_ms() + tu_ms(10000);
    while (f.tables + f.nacks < 2 && ru_now_ms() < until)
        uv_run(&f.loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(f.tables, 1);
    ck_assert_str_eq(f.table_of, "flood0");
    ck_assert_int_eq(f.nacks, 1);
    ck_assert_int_eq(f.nack_code, KVF_E_UNKNOWN_INSTANCE);
    json_t *st = ru_ctl(&a, "stats");
    json_t *pe = json_object_get(st, "peers");
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "forwards_refused")), 1);
    json_decref(st);
    ck_assert_int_eq(ru_daemon_stop(&a), 0);
    f.link = link_free(f.link);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&f.loop), 0);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("remote_hostile");
    TCase *tc = tcase_create("bounds");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, remote_chunk_with_a_stale_generation_is_a_bound_violation);
    tcase_add_test(tc, remote_chunk_with_a_wrong_length_is_a_bound_violation);
    tcase_add_test(tc, remote_chunk_for_a_slot_never_granted_is_a_bound_violation);
    tcase_add_test(tc, remote_home_keeps_a_bounded_number_of_forwarded_instances);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
