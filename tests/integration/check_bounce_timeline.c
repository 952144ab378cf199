/* check_bounce_timeline.c: the chunk timeline of the bounce path between two real daemons
 * (daemon/engine/bounce_tl.h, arena.timeline; scripts/bench-gpu-remote's profile): with
 * it asked for, `arena` of each daemon lists its side's events of every chunk of a real request
 * (host pools, the copy threads writing the peer's slots): at A a credit, a gather launched and
 * done and a CHUNK sent, at B the CHUNK, a scatter launched and done and the slot landed, one of
 * each per chunk, in causal order across the two daemons (one host: one monotonic clock), as
 * many chunks as B landed; without it, no timeline. */
#include <check.h>

#include "remoteutil.h"
#include "wtest.h" /* wt_wait */

#define SPEC "kimi-linear-48b:blocks=64,slots=4"
#define ARENA "arena:\n  size: 64MiB\n  chunk: 4MiB\n  window: 4\ngates:\n  min_bytes: 0\n" \
              "deadlines:\n  send_wait: 30s\n  transfer: 60s\n"
#define TIMELINE "arena.timeline: 4096\n"

enum { K_GRANT, K_GLAUNCH, K_GDONE, K_SENT, K_RX, K_SLAUNCH, K_SDONE, K_LANDED, K_N };

/* One request through the pair, every byte checked by the generation sim; 0 when both exit 0. */
static int run_pair(const struct two *t)
{
    char bin[256];
    tu_bin("kvferry-sim", bin, sizeof bin);
    char *gen[] = {bin, "--role", "generation", "--instance", "tl-g", "--spec", SPEC, "--rank",
                   "0", "--socket", (char *)t->b.worker, "--ctx-instance", "tl-c", "--ctx-home",
                   (char *)t->a.addr, "--requests", "1", "--prompt-tokens", "1024", "--parity",
                   "all", "--quiet", NULL};
    char *ctx[] = {bin, "--role", "context", "--instance", "tl-c", "--spec", SPEC, "--rank", "0",
                   "--socket", (char *)t->a.worker, "--requests", "1", "--prompt-tokens", "1024",
                   "--readers", "1", "--quiet", NULL};
    pid_t g = ru_run_sim(gen), c = ru_run_sim(ctx);
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    if (rg || rc)
        fprintf(stderr, "generation exit %d, context exit %d\n", rg, rc);
    return rg || rc;
}

/* The first stamp of each kind per chunk (by extent offset) of one side's events; n chunks. */
struct chunk {
    json_int_t off, t[K_N];
    int count[K_N];
};

static int collect(json_t *tl, struct chunk *cs, int n, int max)
{
    json_t *evs = json_object_get(tl, "events");
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        json_int_t t = json_integer_value(json_array_get(e, 0));
        int k = (int)json_integer_value(json_array_get(e, 1));
        json_int_t off = json_integer_value(json_array_get(e, 4));
        ck_assert(k >= 0 && k < K_N);
        int c = 0;
        while (c < n && cs[c].off != off)
            c++;
        if (c == n) {
            ck_assert_int_lt(n, max);
            memset(&cs[n], 0, sizeof cs[n]);
            cs[n++].off = off;
        }
        if (!cs[c].count[k]++)
            cs[c].t[k] = t;
    }
    return n;
}

START_TEST(both_daemons_list_every_chunk_in_causal_order)
{
    struct two t;
    two_start(&t, ARENA TIMELINE, ARENA TIMELINE, NULL);
    int bad = run_pair(&t);
    json_t *aa = ru_ctl(&t.a, "arena"), *ab = ru_ctl(&t.b, "arena");
    long long landed = ru_ctl_int(&t.b, "stats", "peers.chunks_landed");
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
    json_t *ta = json_object_get(aa, "bounce_timeline");
    json_t *tb = json_object_get(ab, "bounce_timeline");
    ck_assert_ptr_nonnull(ta);
    ck_assert_ptr_nonnull(tb);
    ck_assert_int_eq(json_integer_value(json_object_get(ta, "dropped")), 0);
    static struct chunk cs[256];
    int n = collect(ta, cs, 0, 256);
    n = collect(tb, cs, n, 256);
    fprintf(stderr, "timeline: %d chunks (B landed %lld), A %zu events, B %zu events\n", n, landed,
            json_array_size(json_object_get(ta, "events")),
            json_array_size(json_object_get(tb, "events")));
    ck_assert_int_gt(n, 1);
    ck_assert_int_eq(n, landed);
    for (int c = 0; c < n; c++) {
        for (int k = 0; k < K_N; k++)
            ck_assert_msg(cs[c].count[k] == 1, "chunk at %lld: kind %d seen %d times",
                          (long long)cs[c].off, k, cs[c].count[k]);
        static const int order[] = {K_GRANT, K_GLAUNCH, K_GDONE, K_RX, K_SLAUNCH, K_SDONE,
                                    K_LANDED};
        for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
            ck_assert_msg(cs[c].t[order[i - 1]] <= cs[c].t[order[i]],
                          "chunk at %lld: kind %d at %lld ns before kind %d at %lld ns",
                          (long long)cs[c].off, order[i], (long long)cs[c].t[order[i]],
                          order[i - 1], (long long)cs[c].t[order[i - 1]]);
        ck_assert(cs[c].t[K_GDONE] <= cs[c].t[K_SENT]);
    }
    json_decref(aa);
    json_decref(ab);

    two_start(&t, ARENA, ARENA, NULL); /* not asked for: none */
    aa = ru_ctl(&t.a, "arena");
    two_stop(&t, 1);
    ck_assert_ptr_nonnull(aa);
    ck_assert_ptr_null(json_object_get(aa, "bounce_timeline"));
    json_decref(aa);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bounce_timeline");
    TCase *tc = tcase_create("timeline");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, both_daemons_list_every_chunk_in_causal_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
