/* check_arena_random.c: random sequences of want, report, release, close, reclaim and tick
 * against a model of the arena's queue (FIFO: only its head is served), with the arena's
 * invariants checked after every step. */
#include <errno.h>

#include "arenautil.h"
#include "testutil.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

/* Check records every ck_assert (one write each); the hot loop checks quietly, fails loudly. */
#define CHECK(c) do { if (!(c)) ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #c); } while (0)

#define NR 24
static struct arena_resv *model_q[NR * 2];
static uint32_t model_n;

static void model_remove(struct arena_resv *r)
{
    for (uint32_t i = 0; i < model_n; i++)
        if (model_q[i] == r) {
            memmove(&model_q[i], &model_q[i + 1], (--model_n - i) * sizeof(model_q[0]));
            return;
        }
}

static void fifo_hook(struct arena_resv *r, const struct arena_grant *g, uint32_t n)
{
    (void)g, (void)n;
    CHECK(model_n > 0 && model_q[0] == r); /* only the head is ever served */
    if (r->state != RESV_WAITING)
        model_remove(r);
}

START_TEST(arena_randomized_sequences_keep_invariants)
{
    struct arena *a = au_mk(16 * MIB, 1 * MIB);
    au_rec.hook = fifo_hook;
    model_n = 0;
    struct arena_resv rs[NR];
    srand(12345);
    for (int i = 0; i < NR; i++)
        arena_resv_init(&rs[i], (uint64_t)i, (uint64_t)(i % 4), (uint64_t)(1 + rand() % 40) * 300 * KIB);
    uint64_t now = 0;
    uint32_t log_pos = 0;
    /* live grants per slot, from the log: (holder, generation, filled) */
    struct { struct arena_resv *r; uint32_t gen; uint64_t ext_off, length; bool filled, live; } sl[16];
    memset(sl, 0, sizeof(sl));
    uint32_t quar[4] = {0}; /* quarantined slots per peer, by the model */
    for (int step = 0; step < 20000; step++) {
        if (au_rec.n_grants > AU_LOG_MAX - 64)
            au_rec.n_grants = log_pos = 0;
        now += (uint64_t)(rand() % 40);
        struct arena_resv *r = &rs[rand() % NR];
        int op = rand() % 100;
        if (op < 35) {
            uint32_t c = 1 + (uint32_t)(rand() % 6);
            if (r->state == RESV_IDLE && r->held + c <= 16 && r->granted < r->bytes) {
                model_q[model_n++] = r; /* enqueue in the model before the call grants */
                CHECK(arena_want(a, r, c, now) >= 1);
            }
        } else if (op < 75) {
            /* report or release a random live slot of this reservation */
            int s = rand() % 16;
            if (sl[s].live && sl[s].r == r) {
                if (!sl[s].filled) {
                    int bad = rand() % 10;
                    uint32_t gen = sl[s].gen - (bad == 0);
                    int rc = arena_report(a, r, (uint32_t)s, gen, UINT64_MAX, 0, NULL);
                    CHECK((rc) == (bad == 0 ? -ESTALE : -ERANGE));
                    /* an unreported credit cannot be released */
                    CHECK((arena_release(a, r, (uint32_t)s, sl[s].gen)) == (-EBUSY));
                } else {
                    CHECK((arena_release(a, r, (uint32_t)s, sl[s].gen)) == (0));
                    sl[s].live = false;
                }
            }
        } else if (op < 85) {
            if (r->state == RESV_IDLE || r->state == RESV_WAITING) {
                bool in_flight = rand() % 2;
                if (r->state == RESV_WAITING)
                    model_remove(r);
                arena_resv_close(a, r, in_flight);
                for (int s = 0; s < 16; s++)
                    if (sl[s].live && sl[s].r == r) {
                        quar[r->peer] += in_flight && !sl[s].filled; /* unreported: quarantined */
                        sl[s].live = false;
                    }
            } else {
                arena_resv_init(r, r->id, r->peer, (uint64_t)(1 + rand() % 40) * 300 * KIB);
            }
        } else if (op < 92) {
            uint64_t peer = (uint64_t)(rand() % 4);
            CHECK(arena_reclaim_peer(a, peer) == quar[peer]);
            quar[peer] = 0;
        } else {
            uint32_t before = au_rec.n_timeouts;
            arena_tick(a, now);
            for (uint32_t i = before; i < au_rec.n_timeouts; i++)
                model_remove(au_rec.timeouts[i]);
        }
        /* Fold new grants into the slot picture; fill half of the fresh ones right away. */
        for (; log_pos < au_rec.n_grants; log_pos++) {
            const struct arena_grant *g = &au_rec.grants[log_pos].g;
            struct arena_resv *h = au_rec.grants[log_pos].r;
            CHECK((g->slot) < (16));
            CHECK((g->offset) == ((uint64_t)g->slot * MIB));
            CHECK((g->ext_off + g->length) <= (h->bytes));
            CHECK(!sl[g->slot].live);
            CHECK((g->generation) > (sl[g->slot].gen));
            sl[g->slot].r = h, sl[g->slot].gen = g->generation, sl[g->slot].ext_off = g->ext_off;
            sl[g->slot].length = g->length, sl[g->slot].filled = false, sl[g->slot].live = true;
        }
        for (int s = 0; s < 16; s++) {
            if (sl[s].live && !sl[s].filled && rand() % 2) {
                CHECK(arena_report(a, sl[s].r, (uint32_t)s, sl[s].gen, sl[s].ext_off, sl[s].length,
                                   NULL) == 0);
                sl[s].filled = true;
            }
        }
        /* Invariants. */
        struct arena_stats st = au_stats(a);
        uint32_t held = 0, live = 0, waiting = 0;
        for (int i = 0; i < NR; i++) {
            if (rs[i].state == RESV_IDLE || rs[i].state == RESV_WAITING)
                held += rs[i].held;
            waiting += rs[i].state == RESV_WAITING;
            CHECK((rs[i].granted) <= (rs[i].bytes));
            CHECK((rs[i].landed) <= (rs[i].granted));
        }
        for (int s = 0; s < 16; s++)
            live += sl[s].live;
        CHECK((held) == (st.slots_in_use));
        CHECK((live) == (st.slots_in_use));
        CHECK((waiting) == (st.waiting_requests));
        CHECK((model_n) == (st.waiting_requests));
        CHECK(st.slots_quarantined == quar[0] + quar[1] + quar[2] + quar[3]);
        CHECK(st.waiting_requests == 0 || st.slots_free == 0); /* no idle slot while anyone waits */
    }
    CHECK((au_stats(a).grants_total) > (1000));
    CHECK((au_stats(a).timeouts_total) > (0));
    for (int i = 0; i < NR; i++)
        arena_resv_close(a, &rs[i], false);
    for (uint64_t p = 0; p < 4; p++)
        arena_reclaim_peer(a, p);
    CHECK((au_stats(a).slots_free) == (16));
    arena_free(a);
}
END_TEST

/* ---- size classes ---- */

static Suite *arena_random_suite(void)
{
    Suite *s = suite_create("arena_random");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, arena_randomized_sequences_keep_invariants);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(arena_random_suite()); }
