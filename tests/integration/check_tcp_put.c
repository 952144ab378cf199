/* check_tcp_put.c: the link turns UCX's tcp put zcopy off (docs/UCX.md trap 16: UCX 1.13.1's tcp
 * aborts the process, tcp_ep.c:939, when a put's ACK is parsed after a failed send in the same
 * receive batch, which a peer that drops us or dies can cause). Two real daemons on loopback with
 * UCX_TLS=tcp (what two hosts on Ethernet get), one request on the bounce path, its 4 MiB chunks
 * past UCX's rendezvous threshold:
 *  - by default: status says tcp_put false, the endpoint's rendezvous lanes (ucp_ep_print_info's
 *    rma_bw) hold no tcp lane, the chunks go as active messages, every byte lands right;
 *  - with transport.tcp_put: true, or UCX_TCP_PUT_ENABLE=y in the daemons' environment (the A/B
 *    setting of bench-remote), tcp is a rendezvous lane again (which shows the first check can
 *    tell the two apart), and status says so.
 * The crash itself is a race (0 in 48 frozen rounds of scripts/ucx-stop-loop here before the
 * fix): `make ucx-stop-loop` runs that loop. */
#include <check.h>

#include "remoteutil.h"

#define SPEC "tiny:blocks=128,slots=8"
#define BLOCKS 64 /* about 2.4 MB of KV and state: one chunk above the rendezvous threshold */
#define CFG "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"
#define CFG_PUT CFG "transport:\n  tcp_put: true\n"

/* The context daemon's view of its one ready peer: its lanes and rendezvous lanes. */
static void peer_lanes(const struct ru_daemon *d, char *lanes, char *rndv, size_t len, int *put)
{
    json_t *st = ru_ctl(d, "status");
    ck_assert_ptr_nonnull(st);
    /* status: peers.link is the engine's part, peers.link.link the link's (link_status) */
    json_t *link =
        json_object_get(json_object_get(json_object_get(st, "peers"), "link"), "link");
    ck_assert_ptr_nonnull(link);
    *put = json_is_true(json_object_get(link, "tcp_put"));
    json_t *peers = json_object_get(link, "peers"), *p;
    size_t i;
    lanes[0] = rndv[0] = '\0';
    json_array_foreach(peers, i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "state")) ?: "", "ready"))
            continue;
        snprintf(lanes, len, "%s", json_string_value(json_object_get(p, "lanes")) ?: "?");
        snprintf(rndv, len, "%s", json_string_value(json_object_get(p, "rndv_lanes")) ?: "?");
    }
    json_decref(st);
}

/* Moves one request over tcp and returns the context daemon's chunks sent as active messages;
 * fills its view of the peer. */
static long long move_over_tcp(const char *cfg, char *lanes, char *rndv, size_t len, int *put)
{
    struct two t;
    two_start(&t, cfg, cfg, "tcp");
    uint64_t rng = 77;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, SPEC, "ctx", ROLE_CONTEXT, BLOCKS, &rng, 0x5a);
    ru_inst_init(&gen, SPEC, "gen", ROLE_GENERATION, BLOCKS, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    uint32_t readers[64] = {0};
    ru_fill_and_send(&ctx, &gen, 7, -1, 0x77, readers);
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 7, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&gen.r[0], 7, &ev, 40000);
    if (k != KVF_EV_DONE)
        two_stop(&t, 0);
    ck_assert_msg(k == KVF_EV_DONE, "event %d: %s: %s", k,
                  kvf_error_to_string((kvf_error_t)ev.error), ev.message);
    ru_assert_parity(&gen.r[0], 0, 0x77, "over tcp");
    peer_lanes(&t.a, lanes, rndv, len, put);
    long long am = ru_peers_stat(&t.a, "chunks_am");
    fprintf(stderr, "%s, UCX_TCP_PUT_ENABLE=%s: tcp_put %d, lanes \"%s\", rendezvous lanes "
            "\"%s\", %lld chunks as active messages\n",
            strstr(cfg, "tcp_put") ? "tcp_put: true" : "default",
            getenv("UCX_TCP_PUT_ENABLE") ?: "(unset)", *put, lanes, rndv, am);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
    return am;
}

START_TEST(tcp_put_is_off_and_tcp_is_no_rendezvous_lane)
{
    char lanes[160], rndv[160];
    int put = -1;
    unsetenv("UCX_TCP_PUT_ENABLE");
    long long am = move_over_tcp(CFG, lanes, rndv, sizeof lanes, &put);
    ck_assert_int_eq(put, 0);
    ck_assert_str_eq(lanes, "tcp");
    ck_assert_msg(!strstr(rndv, "tcp"), "tcp is a rendezvous lane: \"%s\"", rndv);
    ck_assert_int_gt(am, 0);
}
END_TEST

static void tcp_put_on(const char *cfg, const char *env)
{
    char lanes[160], rndv[160];
    int put = -1;
    if (env)
        setenv("UCX_TCP_PUT_ENABLE", env, 1); /* the daemons inherit it */
    else
        unsetenv("UCX_TCP_PUT_ENABLE");
    move_over_tcp(cfg, lanes, rndv, sizeof lanes, &put);
    unsetenv("UCX_TCP_PUT_ENABLE");
    ck_assert_int_eq(put, 1);
    ck_assert_str_eq(lanes, "tcp");
    ck_assert_msg(strstr(rndv, "tcp"), "tcp is no rendezvous lane: \"%s\"", rndv); /* a lane per device */
}

START_TEST(tcp_put_true_in_the_config_makes_tcp_a_rendezvous_lane)
{
    tcp_put_on(CFG_PUT, NULL);
}
END_TEST

START_TEST(tcp_put_enabled_from_the_environment_makes_tcp_a_rendezvous_lane)
{
    tcp_put_on(CFG, "y");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tcp_put");
    TCase *tc = tcase_create("trap16");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tcp_put_is_off_and_tcp_is_no_rendezvous_lane);
    tcase_add_test(tc, tcp_put_true_in_the_config_makes_tcp_a_rendezvous_lane);
    tcase_add_test(tc, tcp_put_enabled_from_the_environment_makes_tcp_a_rendezvous_lane);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
