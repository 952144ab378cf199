/* check_plan_matrix.c: randomised geometries (seeded). Random presets (Kimi, Qwen3-Next and
 * Llama with replicated KV heads), TP, PP (even and uneven), attention-DP, arrangements, view
 * splits, NHD/HND, block sizes (equal or one twice the other), block lists and prefix caching
 * on each side; every
 * generation rank is planned, its writer set from plan_writers compared with the plan's
 * (writersutil.h), and the plan checked independently of the planner's own coverage check:
 * the sum of extents equals plan_bytes, each writer's ops tile [0, bytes) in order, and a byte
 * map of the generation pools shows every destination byte of the request written exactly once
 * and nothing else written. Tiny geometries also run the full bitwise parity (parity.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "plangeo.h"
#include "testutil.h"
#include "writersutil.h"

#define N_CASES 240

/* Whether p[0, n) are all v: p[0] == v and each byte equals the next (memcmp of p against
 * p + 1, one call: a byte loop here was most of the suite's time under ASan). */
static bool all_bytes(const uint8_t *p, uint8_t v, uint64_t n)
{
    return n == 0 || (p[0] == v && memcmp(p, p + 1, n - 1) == 0);
}

/* The first byte of p that is not v (one is: all_bytes said so). */
static uint64_t first_not(const uint8_t *p, uint8_t v)
{
    uint64_t b = 0;
    while (p[b] == v)
        b++;
    return b;
}

/* The independent structural check of one generation rank's plan. */
static void check_structure(const struct geo *g, const struct par_side *c, const struct par_side *gs,
                            uint32_t gr)
{
    struct plan_input in = par_input(c, gs, gr, c->ids, g->dp);
    struct plan p;
    struct plan_error pe;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s -> %s gen %u: %s (%s)", g->ctx, g->gen, gr,
                  pe.message, compat_reason_to_string(pe.reason));
    char what[400];
    snprintf(what, sizeof what, "%s -> %s gen %u", g->ctx, g->gen, gr);
    wu_assert_writers(&in, &p, what);
    const struct layout *l = &gs->ranks[gr];
    struct request_bytes rb;
    plan_bytes(l, gs->ids[gr].n, &rb);
    ck_assert_uint_eq(p.total_bytes, rb.total);
    uint8_t *map[LAYOUT_MAX_POOLS];
    for (uint32_t i = 0; i < l->n_pools; i++) {
        map[i] = calloc(1, l->pools[i].bytes + 1);
        ck_assert_ptr_nonnull(map[i]);
    }
    uint64_t sum = 0;
    for (uint32_t w = 0; w < p.n_writers; w++) {
        const struct plan_writer *wr = &p.writers[w];
        ck_assert(w == 0 || wr->ctx_rank > p.writers[w - 1].ctx_rank);
        ck_assert_uint_lt(wr->ctx_rank, c->n);
        uint64_t ext = 0;
        for (uint32_t i = 0; i < wr->n_ops; i++) {
            const struct copy_op *o = &wr->ops[i];
            ck_assert_uint_eq(o->ext_off, ext);
            ck_assert_uint_lt(o->dst_pool, l->n_pools);
            for (uint64_t k = 0; k < o->count; k++) {
                uint64_t d = o->dst_off + k * (uint64_t)o->dst_stride;
                ck_assert_uint_le(d + o->len, l->pools[o->dst_pool].bytes);
                uint8_t *m = map[o->dst_pool] + d;
                if (!all_bytes(m, 0, o->len)) /* no ck_assert per byte: too slow */
                    ck_abort_msg("%s -> %s gen %u: pool %u byte %lu written twice", g->ctx,
                                 g->gen, gr, o->dst_pool, (unsigned long)(d + first_not(m, 0)));
                memset(m, 1, o->len);
            }
            ext += o->len * o->count;
        }
        ck_assert_uint_eq(ext, wr->bytes);
        sum += ext;
    }
    ck_assert_uint_eq(sum, rb.total);
    /* every byte of every declared region of the request once; then nothing else */
    for (uint32_t gi = 0; gi < l->n_groups; gi++)
        for (uint32_t li = 0; li < l->groups[gi].n_layers; li++)
            for (uint32_t v = 0; v < l->groups[gi].n_views; v++) {
                const struct layout_view *vw = &l->groups[gi].views[v];
                for (uint32_t k = 0; k < gs->ids[gr].n[gi]; k++) {
                    struct layout_loc at = layout_region_at(l, vw, li, gs->ids[gr].ids[gi][k]);
                    uint8_t *r = map[at.pool] + at.off;
                    if (!all_bytes(r, 1, vw->region_bytes))
                        ck_abort_msg("%s -> %s gen %u: group %u view %u byte %lu not covered",
                                     g->ctx, g->gen, gr, gi, v, (unsigned long)first_not(r, 1));
                    memset(r, 0, vw->region_bytes);
                }
            }
    for (uint32_t i = 0; i < l->n_pools; i++) {
        if (!all_bytes(map[i], 0, l->pools[i].bytes))
            ck_abort_msg("pool %u byte %lu written outside the request", i,
                         (unsigned long)first_not(map[i], 0));
        free(map[i]);
    }
    plan_done(&p);
}

START_TEST(plan_random_geometries_cover_every_byte_once)
{
    uint64_t rng = 0x5eed0000ull + (uint64_t)_i;
    uint32_t parity_runs = 0, big_runs = 0, converted = 0, gqa = 0;
    for (int n = 0; n < N_CASES / 3; n++) {
        struct geo g;
        random_geo(&g, &rng);
        struct par_side c, gs;
        geo_sides(&g, &c, &gs, &rng);
        for (uint32_t gr = 0; gr < gs.n; gr++)
            check_structure(&g, &c, &gs, gr);
        par_side_free(&c);
        par_side_free(&gs);
        big_runs += !g.tiny;
        converted += g.convert;
        gqa += g.gqa;
        if (g.tiny) {
            struct par_opts o = {.ctx_dp_rank = g.dp, .seed = rng, .chunked = n % 4 == 0};
            par_run(g.ctx, g.gen, g.n_ctx, g.n_gen, &o, NULL);
            parity_runs++;
        }
    }
    ck_assert_uint_gt(parity_runs, N_CASES / 6);
    ck_assert_uint_ge(big_runs, 1); /* the seeds do reach kimi-linear-48b or llama geometries */
    ck_assert_uint_ge(converted, 10);
    ck_assert_uint_ge(gqa, 5);
}
END_TEST

static Suite *matrix_suite(void)
{
    Suite *s = suite_create("plan_matrix");
    TCase *tc = tcase_create("random");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, plan_random_geometries_cover_every_byte_once, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(matrix_suite()); }
