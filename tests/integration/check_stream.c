/* check_stream.c: a SEND that streams layer by layer (issue 28) against real daemons. The
 * context ranks' pools hold wrong bytes until a layer is made final: each layer's right bytes
 * are written just before its READY, so a byte copied early arrives wrong and the bitwise check
 * fails. Geometries: matched TP, TP fan-in and head split, block-major pools, hybrid state
 * (tiny: KDA + MLA), on the same daemon, the bounce path between two daemons (chunks smaller
 * than a layer) and the fragment path. Mid-stream the first layers are seen landing before the
 * last one is final, and no DONE comes before it. Faults: READY refused (not streaming, out of
 * order, past the model) as BAD_REQUEST, the idle deadline (TIMEOUT both sides), cancel, the
 * context worker killed (PEER_LOST); after each, both arenas hold nothing. With
 * arena.cut_at_layers the bounce path's grants end at layer boundaries: every geometry's first
 * layer is seen landing mid-stream. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"
#define BOUNCE "gates:\n  min_bytes: 0\n  min_blocks: 0\narena:\n  size: 64MiB\n  chunk: 64KiB\n"
#define CUT BOUNCE "  cut_at_layers: true\n" /* landing grants end at layer boundaries */
#define IDLE "deadlines:\n  stream_idle: 400ms\n"

/* good[i]: context rank i's pools as they end (its shard of the pattern); its real pools get
 * another seed until each layer is made final. */
static void stage_wrong(struct ru_inst *ctx, uint64_t seed, struct copy_mem *good)
{
    for (uint32_t i = 0; i < ctx->n; i++) {
        struct ru_rank *r = &ctx->r[i];
        good[i].n = r->mem.n;
        for (uint32_t p = 0; p < r->mem.n; p++) {
            good[i].size[p] = r->mem.size[p];
            good[i].base[p] = malloc(r->mem.size[p] ? r->mem.size[p] : 1);
            ck_assert_ptr_nonnull(good[i].base[p]);
            memcpy(good[i].base[p], r->mem.base[p], r->mem.size[p]);
        }
        pattern_fill(&r->l, &good[i], &r->pids, 0, seed);
        pattern_fill(&r->l, &r->mem, &r->pids, 0, seed ^ 0x5eed);
    }
}

static void free_good(const struct ru_inst *ctx, struct copy_mem *good)
{
    for (uint32_t i = 0; i < ctx->n; i++)
        for (uint32_t p = 0; p < good[i].n; p++)
            free(good[i].base[p]);
}

/* The request's regions of rank r's layers [lo, hi): from src into dst. */
static void copy_layers(const struct ru_rank *r, const struct copy_mem *src,
                        const struct copy_mem *dst, uint32_t lo, uint32_t hi)
{
    for (uint32_t g = 0; g < r->l.n_groups; g++) {
        const struct layout_group *gg = &r->l.groups[g];
        for (uint32_t li = 0; li < gg->n_layers; li++) {
            if (gg->layers[li] < lo || gg->layers[li] >= hi)
                continue;
            for (uint32_t v = 0; v < gg->n_views; v++)
                for (uint32_t k = 0; k < r->pids.n[g]; k++) {
                    struct layout_loc at = layout_region_at(&r->l, &gg->views[v], li,
                                                            r->pids.ids[g][k]);
                    memcpy(dst->base[at.pool] + at.off, src->base[at.pool] + at.off,
                           gg->views[v].region_bytes);
                }
        }
    }
}

/* Whether generation rank r holds layer id's bytes of the request as want has them. */
static bool layer_landed(const struct ru_rank *r, const struct copy_mem *want, uint32_t id)
{
    for (uint32_t g = 0; g < r->l.n_groups; g++) {
        const struct layout_group *gg = &r->l.groups[g];
        for (uint32_t li = 0; li < gg->n_layers; li++) {
            if (gg->layers[li] != id)
                continue;
            for (uint32_t v = 0; v < gg->n_views; v++)
                for (uint32_t k = 0; k < r->pids.n[g]; k++) {
                    struct layout_loc at = layout_region_at(&r->l, &gg->views[v], li,
                                                            r->pids.ids[g][k]);
                    if (memcmp(r->mem.base[at.pool] + at.off, want->base[at.pool] + at.off,
                               gg->views[v].region_bytes) != 0)
                        return false;
                }
        }
    }
    return true;
}

/* What generation rank r ends with: poison + its shard of the pattern. */
static void expected(const struct ru_rank *r, uint64_t seed, struct copy_mem *want)
{
    want->n = r->mem.n;
    for (uint32_t p = 0; p < r->mem.n; p++) {
        want->size[p] = r->mem.size[p];
        want->base[p] = malloc(r->mem.size[p] ? r->mem.size[p] : 1);
        ck_assert_ptr_nonnull(want->base[p]);
        memset(want->base[p], RU_POISON, r->mem.size[p]);
    }
    pattern_fill(&r->l, want, &r->pids, 0, seed);
}

static void begin(struct ru_inst *ctx, const struct ru_inst *gen, uint64_t req, uint32_t *readers)
{
    ru_readers(ctx, gen, -1, readers);
    for (uint32_t i = 0; i < ctx->n; i++)
        if (readers[i])
            ck_assert_int_eq(kvf_send_begin(ctx->r[i].c, req, ctx->r[i].l.n_groups,
                                            ctx->r[i].counts, ctx->r[i].ids, readers[i]),
                             0);
}

/* READY from every sending rank. A rank whose every byte was final already (a fan-in writer
 * with no bytes of the last layers) may be SENT before its last READY: sent[i] then. */
static void ready(struct ru_inst *ctx, const uint32_t *readers, uint64_t req, uint32_t upto,
                  bool *sent)
{
    for (uint32_t i = 0; i < ctx->n; i++) {
        if (!readers[i] || (sent && sent[i]))
            continue;
        int rc = kvf_send_ready(ctx->r[i].c, req, upto);
        struct kvf_event ev = {0};
        if (rc == -ENOENT && sent && kvf_poll(ctx->r[i].c, &ev, 0) == 1 &&
            ev.kind == KVF_EV_SENT && ev.req_id == req) {
            sent[i] = true;
            continue;
        }
        ck_assert_msg(rc == 0, "READY %u of request %llu, context rank %u: %d (its event: %d "
                      "%s: %s)", upto, (unsigned long long)req, i, rc, ev.kind,
                      kvf_error_to_string(ev.error), ev.message);
    }
}

static void recv_all(struct ru_inst *gen, uint64_t req, const char *home)
{
    for (uint32_t j = 0; j < gen->n; j++) {
        struct ru_rank *g = &gen->r[j];
        struct kvf_recv_args a = {.req_id = req, .ctx_instance = "ctx", .ctx_dp_rank = -1,
                                  .ctx_home = home, .n_groups = g->l.n_groups,
                                  .counts = g->counts, .ids = g->ids};
        ck_assert_int_eq(kvf_recv(g->c, &a), 0);
    }
}

static void no_event_yet(struct ru_inst *gen, uint64_t req, uint32_t upto)
{
    for (uint32_t j = 0; j < gen->n; j++) {
        struct kvf_event ev;
        int rc = kvf_poll(gen->r[j].c, &ev, 0);
        ck_assert_msg(rc == 0, "request %llu: generation rank %u had event %d (%s) with layers "
                      "below %u final", (unsigned long long)req, j, rc == 1 ? ev.kind : rc,
                      rc == 1 ? ev.message : "", upto);
    }
}

/* Streams request req from t->ctx to every rank of t->gen, layer by layer, and checks every
 * byte; with overlap, mid-stream, the first layer lands before the last is final (between
 * daemons a chunk waits for its whole range: a writer whose extent fits one chunk, as each of
 * tiny's TP2 writers does, moves at its last layer). */
static void stream_move(struct two *t, const char *home, uint64_t req, uint64_t seed,
                        bool overlap)
{
    struct copy_mem good[8], want[8];
    uint32_t readers[64] = {0};
    bool sent[8] = {false};
    ck_assert_uint_le(t->ctx.n, 8);
    ck_assert_uint_le(t->gen.n, 8);
    stage_wrong(&t->ctx, seed, good);
    for (uint32_t j = 0; j < t->gen.n; j++)
        expected(&t->gen.r[j], seed, &want[j]);
    begin(&t->ctx, &t->gen, req, readers);
    recv_all(&t->gen, req, home);
    uint32_t n = t->ctx.r[0].l.n_layers_total, half = n / 2;
    for (uint32_t id = 0; id < n; id++) {
        for (uint32_t i = 0; i < t->ctx.n; i++)
            copy_layers(&t->ctx.r[i], &good[i], &t->ctx.r[i].mem, id, id + 1);
        ready(&t->ctx, readers, req, id + 1, sent);
        if (overlap && id + 1 == half) { /* layer 0 lands while the rest is still being computed */
            uint64_t until = ru_now_ms() + tu_ms(5000);
            while (!layer_landed(&t->gen.r[0], &want[0], 0) && ru_now_ms() < until)
                ru_sleep_ms(2);
            ck_assert_msg(layer_landed(&t->gen.r[0], &want[0], 0),
                          "request %llu: layer 0 not in place with %u of %u layers final",
                          (unsigned long long)req, half, n);
            ck_assert_msg(!layer_landed(&t->gen.r[0], &want[0], n - 1),
                          "request %llu: the last layer is in place before its READY",
                          (unsigned long long)req);
        }
        if (id + 1 < n)
            no_event_yet(&t->gen, req, id + 1);
    }
    for (uint32_t j = 0; j < t->gen.n; j++) {
        struct kvf_event ev;
        int k = ru_wait_event(&t->gen.r[j], req, &ev, 10000);
        ck_assert_msg(k == KVF_EV_DONE, "request %llu, generation rank %u: event %d: %s: %s",
                      (unsigned long long)req, j, k, kvf_error_to_string(ev.error), ev.message);
        ru_assert_parity(&t->gen.r[j], 0, seed, "streamed");
    }
    for (uint32_t i = 0; i < t->ctx.n; i++) {
        struct kvf_event ev;
        if (readers[i] && !sent[i])
            ck_assert_int_eq(ru_wait_event(&t->ctx.r[i], req, &ev, 10000), KVF_EV_SENT);
    }
    free_good(&t->ctx, good);
    for (uint32_t j = 0; j < t->gen.n; j++)
        for (uint32_t p = 0; p < want[j].n; p++)
            free(want[j].base[p]);
}

static const char *const geos[][2] = {
    {TINY, TINY},                                   /* matched, hybrid (KDA state + MLA) */
    {TINY ",tp=2", TINY},                           /* fan-in: two writers stream */
    {TINY, TINY ",tp=2"},                           /* head split: two readers */
    {TINY ",arr=block", TINY ",state=split,kv=split"}, /* other pool arrangements */
};
#define N_GEOS (sizeof geos / sizeof geos[0])

static void geometry(const char *extra, enum two_gen_at at, int i, uint64_t req, bool overlap)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = extra, .extra_b = extra,
                                            .spec = geos[i][0], .gen_spec = geos[i][1],
                                            .blocks = 8, .rng = 7 + (uint64_t)i, .gen_at = at});
    stream_move(&t, at == TWO_GEN_AT_A ? NULL : t.a.addr, req, 100 + (uint64_t)i, overlap);
    if (at != TWO_GEN_AT_A) {
        ru_wait_arenas_idle(&t.a, "context daemon after the stream", 5000);
        ru_wait_arenas_idle(&t.b, "generation daemon after the stream", 5000);
    }
    two_stop(&t, 1);
}

START_TEST(stream_same_daemon_moves_each_layer_once_final_bitwise)
{
    geometry(NULL, TWO_GEN_AT_A, _i, 10 + (uint64_t)_i, true);
}
END_TEST

START_TEST(stream_bounce_between_daemons_moves_each_layer_once_final_bitwise)
{
    geometry(BOUNCE, TWO_GEN_AT_B, _i, 20 + (uint64_t)_i, _i == 0);
}
END_TEST

/* arena.cut_at_layers: a chunk never spans two layers, so every geometry's first layer lands
 * while the rest is computed (each TP2 writer's whole extent fits one 64 KiB chunk otherwise) */
START_TEST(stream_bounce_cut_at_layers_moves_each_layer_as_it_is_final_bitwise)
{
    geometry(CUT, TWO_GEN_AT_B, _i, 50 + (uint64_t)_i, true);
}
END_TEST

START_TEST(stream_fragment_path_moves_once_every_layer_is_final_bitwise)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.spec = TINY, .blocks = 8, .rng = 5});
    struct copy_mem good[1], want;
    uint32_t readers[64] = {0};
    stage_wrong(&t.ctx, 31, good);
    expected(&t.gen.r[0], 31, &want);
    begin(&t.ctx, &t.gen, 30, readers);
    recv_all(&t.gen, 30, t.a.addr);
    uint32_t n = t.ctx.r[0].l.n_layers_total;
    for (uint32_t id = 0; id < n; id++) {
        copy_layers(&t.ctx.r[0], &good[0], &t.ctx.r[0].mem, id, id + 1);
        ready(&t.ctx, readers, 30, id + 1, NULL);
    }
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&t.gen.r[0], 30, &ev, 10000), KVF_EV_DONE);
    ru_assert_parity(&t.gen.r[0], 0, 31, "fragment, streamed");
    ck_assert_int_eq(ru_wait_event(&t.ctx.r[0], 30, &ev, 10000), KVF_EV_SENT);
    ck_assert_int_ge(ru_ctl_int(&t.b, "stats", "peers.paths.fragment_state_below_min_bytes"), 1);
    free_good(&t.ctx, good);
    for (uint32_t p = 0; p < want.n; p++)
        free(want.base[p]);
    two_stop(&t, 1);
}
END_TEST

/* ---- faults ---- */

static void expect_failed(struct ru_rank *r, uint64_t req, kvf_error_t err, const char *has,
                          const char *what)
{
    struct kvf_event ev;
    int k = ru_wait_event(r, req, &ev, 10000);
    ck_assert_msg(k == KVF_EV_FAILED && ev.error == (int32_t)err,
                  "%s: event %d %s: %s (want FAILED %s)", what, k, kvf_error_to_string(ev.error),
                  ev.message, kvf_error_to_string(err));
    ck_assert_msg(!has || strstr(ev.message, has), "%s: %s (want \"%s\")", what, ev.message, has);
}

START_TEST(stream_ready_refusals_name_what_is_wrong)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.spec = TINY, .blocks = 4, .rng = 3,
                                            .gen_at = TWO_GEN_AT_A});
    struct ru_rank *c = &t.ctx.r[0];
    uint32_t n = c->l.n_layers_total;
    ck_assert_int_eq(kvf_send(c->c, 1, c->l.n_groups, c->counts, c->ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready(c->c, 1, 2), 0);
    expect_failed(c, 1, KVF_E_BAD_REQUEST, "without streaming", "READY on a plain SEND");
    ck_assert_int_eq(kvf_send_begin(c->c, 2, c->l.n_groups, c->counts, c->ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready(c->c, 2, 3), 0);
    ck_assert_int_eq(kvf_send_ready(c->c, 2, 2), 0);
    expect_failed(c, 2, KVF_E_BAD_REQUEST, "layers_upto 2 after 3", "READY out of order");
    ck_assert_int_eq(kvf_send_begin(c->c, 3, c->l.n_groups, c->counts, c->ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready(c->c, 3, n + 1), 0);
    expect_failed(c, 3, KVF_E_BAD_REQUEST, "past the model's", "READY past the layout");
    ck_assert_int_eq(kvf_send_ready(c->c, 4, 1), -ENOENT); /* no such SEND in flight */
    ck_assert_int_eq(kvf_send_begin(c->c, 4, c->l.n_groups, c->counts, c->ids, 1), 0);
    ck_assert_int_eq(kvf_send_ready(c->c, 4, LAYOUT_MAX_LAYERS + 1), -EINVAL);
    /* the daemon serves on: request 4 streams to its reader */
    stream_move(&t, NULL, 5, 55, true);
    ck_assert_int_eq(kvf_cancel(c->c, 4), 0);
    expect_failed(c, 4, KVF_E_CANCELLED, NULL, "the stream cancelled");
    two_stop(&t, 1);
}
END_TEST

/* Two layers final, then nothing (idle), a cancel of the SEND, or the worker killed. */
enum fault { IDLE_DEADLINE, CANCEL_SEND, KILL_WORKER };

static int begin_two_layers(struct ru_rank *r, void *arg)
{
    uint64_t req = *(uint64_t *)arg;
    pattern_fill(&r->l, &r->mem, &r->pids, 0, 77);
    if (kvf_send_begin(r->c, req, r->l.n_groups, r->counts, r->ids, 1) != 0)
        return 1;
    return kvf_send_ready(r->c, req, 2);
}

static void fault(enum fault f, enum two_gen_at at, kvf_error_t want, const char *has)
{
    struct two t;
    uint64_t req = 40 + (uint64_t)f;
    two_start_insts(&t, &(struct two_insts){.extra_a = IDLE, .extra_b = BOUNCE, .spec = TINY,
                                            .blocks = 8, .rng = 9, .gen_at = at});
    const char *home = at == TWO_GEN_AT_A ? NULL : t.a.addr;
    pid_t pid = 0;
    if (f == KILL_WORKER) { /* the context rank in a process of its own */
        t.ctx.r[0].c = kvf_close(t.ctx.r[0].c);
        uint64_t until = ru_now_ms() + tu_ms(5000);
        json_t *w;
        while ((w = ru_ctl(&t.a, "workers")) && tj_lists(json_object_get(w, "workers"), "instance", "ctx", NULL,
                                                          NULL) && ru_now_ms() < until) {
            json_decref(w);
            ru_sleep_ms(5);
        }
        json_decref(w);
        pid = ru_rank_fork(&t.ctx, 0, &t.a, begin_two_layers, &req);
    } else {
        ck_assert_int_eq(begin_two_layers(&t.ctx.r[0], &req), 0);
    }
    recv_all(&t.gen, req, home);
    if (at == TWO_GEN_AT_A) /* the reader met the stream: its layers moving */
        ru_wait_listed(&t.a, "transfers", "transfers", "state", "copying", NULL, NULL, 5000);
    else
        ru_wait_peers_stat(&t.a, "flows", 1, 5000);
    uint64_t t0 = ru_now_ms();
    if (f == CANCEL_SEND)
        ck_assert_int_eq(kvf_cancel(t.ctx.r[0].c, req), 0);
    if (f == KILL_WORKER) {
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    }
    expect_failed(&t.gen.r[0], req, want, has, "the reader");
    uint64_t took = ru_now_ms() - t0;
    fprintf(stderr, "stream fault %d (%s): reader FAILED %s after %llu ms\n", (int)f,
            at == TWO_GEN_AT_A ? "same daemon" : "two daemons", kvf_error_to_string(want),
            (unsigned long long)took);
    ck_assert_msg(took < tu_ms(3000), "the reader failed after %llu ms", (unsigned long long)took);
    if (f != KILL_WORKER)
        expect_failed(&t.ctx.r[0], req, want, f == IDLE_DEADLINE ? "stream_idle" : NULL,
                      "the streaming SEND");
    if (at != TWO_GEN_AT_A) {
        ru_wait_arenas_idle(&t.a, "context daemon after the fault", 5000);
        ru_wait_arenas_idle(&t.b, "generation daemon after the fault", 5000);
    }
    /* nothing left behind that stops the next request */
    if (f == KILL_WORKER)
        ru_rank_register(&t.ctx, 0, &t.a, NULL);
    stream_move(&t, home, req + 100, 91, false);
    two_stop(&t, 1);
}

START_TEST(stream_idle_deadline_ends_both_sides_timeout)
{
    fault(IDLE_DEADLINE, _i ? TWO_GEN_AT_B : TWO_GEN_AT_A, KVF_E_TIMEOUT, NULL);
}
END_TEST

START_TEST(stream_cancelled_mid_stream_fails_its_readers)
{
    fault(CANCEL_SEND, _i ? TWO_GEN_AT_B : TWO_GEN_AT_A, KVF_E_CANCELLED, NULL);
}
END_TEST

START_TEST(stream_context_worker_killed_mid_stream_gives_peer_lost)
{
    fault(KILL_WORKER, _i ? TWO_GEN_AT_B : TWO_GEN_AT_A, KVF_E_PEER_LOST, NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, stream_same_daemon_moves_each_layer_once_final_bitwise, 0, N_GEOS);
    tcase_add_loop_test(tc, stream_bounce_between_daemons_moves_each_layer_once_final_bitwise, 0,
                        N_GEOS);
    tcase_add_loop_test(tc, stream_bounce_cut_at_layers_moves_each_layer_as_it_is_final_bitwise,
                        0, N_GEOS);
    tcase_add_test(tc, stream_fragment_path_moves_once_every_layer_is_final_bitwise);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("faults");
    tcase_set_timeout(tf, 120);
    tcase_add_test(tf, stream_ready_refusals_name_what_is_wrong);
    tcase_add_loop_test(tf, stream_idle_deadline_ends_both_sides_timeout, 0, 2);
    tcase_add_loop_test(tf, stream_cancelled_mid_stream_fails_its_readers, 0, 2);
    tcase_add_loop_test(tf, stream_context_worker_killed_mid_stream_gives_peer_lost, 0, 2);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
