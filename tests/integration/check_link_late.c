/* check_link_late.c: a daemon started while the interface of its listen address is down
 * accepts on it once it comes up (issue 26, chaos seeds 303 and 808;
 * tests/chaos/repro/start-while-link-down). UCX lists its devices once, at ucp_init, and
 * refuses every connection that later arrives on another ("not present during UCP
 * initialization"), so the link's start waits for the interface (engine_linkwait.c). Context
 * daemon A in one network namespace (scripts/netns-pair), its veth down when it starts,
 * generation daemon G in the other:
 *  - A comes up (READY, its workers served) and says in status peers.link.state "waiting", naming
 *    veth0; its rank registers meanwhile;
 *  - the veth comes up: A's link starts (peers.link.state "up", waited_ms), and a request
 *    moves from A's rank (registered before the link) to G's, every byte checked;
 *  - a daemon whose listen address is on no interface of the host waits the same way and says
 *    so, instead of refusing every peer or failing its start.
 * Skipped (exit 77, the reason printed) where network namespaces cannot be made. */
#include <check.h>

#include "remoteutil.h"

#define SPEC "tiny:blocks=64,slots=4"
#define BLOCKS 4
#define TLS "^sysv,posix" /* docs/UCX.md trap 2 */
#define CFG "deadlines:\n  lookup: %ums\n"
#define WAIT_MS 10000

struct late {
    struct ru_pair pair;
    char top[64], secret[128];
    struct ru_daemon a, g;
    struct ru_inst ctx, gen;
};

static void start_in(struct ru_daemon *d, struct late *t, const char *name, int listen,
                     const char *ns, const char *host)
{
    char cfg[64];
    tu_fmt(cfg, sizeof cfg, CFG, tu_keepalive_ms(2000));
    ck_assert_int_eq(ru_daemon_start_in(d, t->top, name, listen, t->secret, cfg, TLS, ns, host),
                     0);
}

/* A pair of namespaces (false: none can be made) and the daemons' directory and secret. */
static bool late_start(struct late *t, const char *prefix, unsigned seed)
{
    memset(t, 0, sizeof *t);
    if (!ru_pair_up(&t->pair, prefix))
        return false;
    tu_tmpdir(t->top, sizeof t->top);
    ru_secret(t->top, "secret", seed, t->secret, sizeof t->secret);
    return true;
}

/* status.peers.link.<key> of d as a string ("" when absent), into out. */
static void link_str(const struct ru_daemon *d, const char *key, char *out, size_t len)
{
    json_t *r = ru_ctl(d, "status");
    json_t *l = json_object_get(json_object_get(r, "peers"), "link");
    const char *v = json_string_value(json_object_get(l, key));
    snprintf(out, len, "%s", v ? v : "");
    json_decref(r);
}

static void wait_link_state(const struct ru_daemon *d, const char *want, unsigned ms)
{
    char got[32] = "";
    uint64_t until = ru_now_ms() + tu_ms(ms);
    while (ru_now_ms() < until) {
        link_str(d, "state", got, sizeof got);
        if (!strcmp(got, want))
            return;
        ru_sleep_ms(20);
    }
    ru_dump_log(d, "daemon");
    ck_abort_msg("status peers.link.state is \"%s\", not \"%s\", after %u ms", got, want, ms);
}

/* `kvferryctl status` (the table for people) of d has a line with words. */
static void ctl_status_says(const struct ru_daemon *d, const char *words)
{
    char bin[256], cmd[768], line[1024];
    tu_bin("kvferryctl", bin, sizeof bin);
    tu_fmt(cmd, sizeof cmd, "%s --socket %s status 2>&1", bin, d->control);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    bool found = false;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, words) != NULL;
    pclose(f);
    ck_assert_msg(found, "kvferryctl status has no \"%s\"", words);
}

START_TEST(a_daemon_started_with_its_interface_down_accepts_once_it_is_up)
{
    struct late t;
    if (!late_start(&t, "kvll", 303))
        return;
    ru_pair_link(&t.pair, 'a', false);
    start_in(&t.a, &t, "a", 1, t.pair.ns_a, t.pair.addr_a); /* READY with its link waiting */
    start_in(&t.g, &t, "g", 0, t.pair.ns_b, "127.0.0.1");
    char why[512], ifn[32];
    wait_link_state(&t.a, "waiting", 1000);
    link_str(&t.a, "interface", ifn, sizeof ifn);
    link_str(&t.a, "why", why, sizeof why);
    ck_assert_str_eq(ifn, "veth0");
    ck_assert_msg(strstr(why, "down or has no carrier"), "why: %s", why);
    ctl_status_says(&t.a, "LINK WAITING"); /* the operator's view says it too */
    uint64_t rng = 303;
    ru_inst_init(&t.ctx, SPEC, "ctx", ROLE_CONTEXT, BLOCKS, &rng, 0x5a);
    ru_inst_init(&t.gen, SPEC, "gen", ROLE_GENERATION, BLOCKS, &rng, RU_POISON);
    ru_inst_register(&t.ctx, &t.a); /* before its link: registered with UCX when it starts */
    ru_inst_register(&t.gen, &t.g);
    uint64_t up = ru_now_ms();
    ru_pair_link(&t.pair, 'a', true);
    wait_link_state(&t.a, "up", WAIT_MS);
    uint64_t started = ru_now_ms();
    ck_assert_int_ge(ru_ctl_int(&t.a, "status", "peers.link.waited_ms"), 1);
    ck_assert_msg(ru_log_wait(&t.a, "the link started after waiting", 5000), "no start logged");
    /* a request from A's rank to G's, A accepting G's connection on veth0 */
    ru_move_one(t.a.addr, &t.ctx, &t.gen, 1, 33, WAIT_MS);
    ck_assert_msg(!ru_log_has(&t.a, "not present during UCP initialization"),
                  "UCX refused a connection on the interface that came up");
    fprintf(stderr, "link started %llu ms after the interface came up; a request moved\n",
            (unsigned long long)(started - up));
    ru_inst_free(&t.ctx);
    ru_inst_free(&t.gen);
    int ra = ru_daemon_stop(&t.a), rg = ru_daemon_stop(&t.g);
    ru_pair_finish(&t.pair, t.top);
    ck_assert_int_eq(ra, 0);
    ck_assert_int_eq(rg, 0);
}
END_TEST

START_TEST(a_listen_address_on_no_interface_waits_and_says_so)
{
    struct late t;
    if (!late_start(&t, "kvln", 808))
        return;
    /* side b's address, inside side a: on no interface there */
    start_in(&t.a, &t, "a", 1, t.pair.ns_a, t.pair.addr_b);
    wait_link_state(&t.a, "waiting", 1000);
    char why[512];
    link_str(&t.a, "why", why, sizeof why);
    ck_assert_msg(strstr(why, "is on no interface of this host"), "why: %s", why);
    ck_assert_int_eq(ru_daemon_stop(&t.a), 0); /* it drains and exits 0 while it waits */
    ru_pair_finish(&t.pair, t.top);
}
END_TEST

int main(void)
{
    if (ru_netns_skip("check_link_late"))
        return 77;
    Suite *s = suite_create("link_late");
    TCase *tc = tcase_create("late");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, a_daemon_started_with_its_interface_down_accepts_once_it_is_up);
    tcase_add_test(tc, a_listen_address_on_no_interface_waits_and_says_so);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
