/* check_stream_events.c: CUDA interprocess events of a streamed SEND (issue 28), what a daemon
 * without a GPU rank can prove: every refusal names what is wrong and costs nothing else. A
 * real kvferryd, real libkvferry ranks and a raw client: events from a host-pool rank are
 * refused BAD_REQUEST (the rank stays registered), a READY naming an event on a host-pool rank
 * fails that SEND BAD_REQUEST, the library refuses 0 or more than KVF_EVENTS_MAX events and an
 * index past them, an EVENTS frame past the limit is a protocol violation named in the ERROR,
 * EVENTS before REGISTER is refused; meanwhile a streamed request of the same rank moves and
 * ends DONE. The GPU side (the wait on the GPU, unknown index, a handle that does not open) is
 * tests/gpu/check_gpu_events.c. */
#include "wtest.h"
#include "wraw.h"

struct side {
    struct rank r;
    struct kvf_client *c;
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[LAYOUT_MAX_GROUPS];
};

static void side_start(struct wenv *e, struct side *s, const char *inst, layout_role_t role)
{
    memset(s, 0, sizeof *s);
    rank_make(&s->r, "tiny", inst, role, F_SEAL_SHRINK);
    struct kvf_options o = {.no_reconnect = 1, .name = inst};
    ck_assert_int_eq(kvf_connect(e->wsock, &o, &s->c), 0);
    char err[512];
    ck_assert_msg(kvf_register(s->c, s->r.json, s->r.pools, s->r.l.n_pools, err, sizeof err) == 0,
                  "%s", err);
    for (uint32_t i = 0; i < s->r.l.n_groups; i++)
        s->counts[i] = 1;
}

static void side_stop(struct side *s)
{
    s->c = kvf_close(s->c);
    rank_free(&s->r);
}

static void expect_failed(struct side *s, uint64_t id, kvf_error_t err, const char *has)
{
    struct kvf_event ev = wait_event(s->c, id, KVF_EV_FAILED, 10000);
    ck_assert_msg(ev.error == (int32_t)err && strstr(ev.message, has), "request %llu: %s: %s "
                  "(want %s naming \"%s\")", (unsigned long long)id,
                  kvf_error_to_string(ev.error), ev.message, kvf_error_to_string(err), has);
}

START_TEST(stream_events_refused_on_host_pools_naming_why_and_the_rank_serves_on)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct side ctx, gen;
    side_start(&e, &ctx, "ctx", ROLE_CONTEXT);
    side_start(&e, &gen, "gen", ROLE_GENERATION);
    uint8_t h[(KVF_EVENTS_MAX + 1) * 64];
    memset(h, 0x5a, sizeof h);
    char err[600] = "";
    /* the library's limits: 1..KVF_EVENTS_MAX events, an index below it */
    ck_assert_int_eq(kvf_register_events(ctx.c, h, 0, err, sizeof err), -EINVAL);
    ck_assert_int_eq(kvf_register_events(ctx.c, h, KVF_EVENTS_MAX + 1, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "257 CUDA events: a rank passes 1 to 256"), "%s", err);
    /* the daemon's: a host-pool rank has no GPU work for an event to order */
    ck_assert_int_eq(kvf_register_events(ctx.c, h, 4, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "BAD_REQUEST") && strstr(err, "host memory"), "%s", err);
    ck_assert_int_eq(wr_workers_int(&e, "status", "connections"), 2); /* nobody was dropped */
    /* a READY naming an event fails its SEND, named; the rank's other requests go on */
    ck_assert_int_eq(kvf_send_begin(ctx.c, 1, ctx.r.l.n_groups, ctx.counts, ctx.ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready_event(ctx.c, 1, 1, 0), 0);
    expect_failed(&ctx, 1, KVF_E_BAD_REQUEST, "names CUDA event 0, but context rank 0's pools "
                  "are host memory");
    ck_assert_int_eq(kvf_send_begin(ctx.c, 2, ctx.r.l.n_groups, ctx.counts, ctx.ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready_event(ctx.c, 2, 1, KVF_EVENTS_MAX), -EINVAL);
    struct kvf_recv_args a = {.req_id = 2, .ctx_instance = "ctx", .ctx_dp_rank = -1,
                              .n_groups = gen.r.l.n_groups, .counts = gen.counts, .ids = gen.ids};
    ck_assert_int_eq(kvf_recv(gen.c, &a), 0);
    ck_assert_int_eq(kvf_send_ready(ctx.c, 2, ctx.r.l.n_layers_total), 0);
    wait_event(gen.c, 2, KVF_EV_DONE, 10000);
    wait_event(ctx.c, 2, KVF_EV_SENT, 10000);
    side_stop(&gen);
    side_stop(&ctx);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 0);
    wt_stop(&e);
}
END_TEST

START_TEST(stream_events_frame_past_the_limit_or_before_register_is_refused_naming_it)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct side ctx;
    side_start(&e, &ctx, "ctx", ROLE_CONTEXT);
    /* EVENTS before REGISTER: answered, the connection kept */
    int fd = raw_hello(&e);
    uint8_t h[KVF_EVENTS_MAX * 64];
    memset(h, 0x11, sizeof h);
    struct proto_msg m = {.type = PROTO_EVENTS};
    m.u.events = (struct proto_events){.n = 2, .handles = h};
    raw_send_msg(fd, &m, NULL, 0);
    char msg[600] = "";
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_REGISTERED);
    ck_assert_msg(strstr(msg, "BAD_REQUEST: EVENTS before REGISTER"), "%s", msg);
    /* past the limit: the encoder refuses, so the frame is made by hand (n = 257) */
    m.u.events.n = KVF_EVENTS_MAX;
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(proto_encode(&m, NULL, &b, &len), 0);
    b[PROTO_HDR_SIZE] = 1; /* u32 n, little-endian: 257 */
    b[PROTO_HDR_SIZE + 1] = 1;
    ck_assert_int_eq(fdpass_send(fd, b, len, NULL, 0, 2000), 0);
    free(b);
    expect_error_close(fd, "EVENTS: 257 events, the limit is 256 per rank");
    /* the other worker was not touched */
    ck_assert_int_eq(kvf_send_begin(ctx.c, 7, ctx.r.l.n_groups, ctx.counts, ctx.ids, 1), 0);
    ck_assert_int_eq(kvf_cancel(ctx.c, 7), 0);
    expect_failed(&ctx, 7, KVF_E_CANCELLED, "");
    side_stop(&ctx);
    wt_stop(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stream_events");
    TCase *tc = tcase_create("refusals");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stream_events_refused_on_host_pools_naming_why_and_the_rank_serves_on);
    tcase_add_test(tc,
                   stream_events_frame_past_the_limit_or_before_register_is_refused_naming_it);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
