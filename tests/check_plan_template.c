/* check_plan_template.c: plan templates (lib/plan_template.h, lib/plan_tcache.h). Over the random
 * geometries of check_plan_matrix (plangeo.h), with and without context ids, with and without
 * the token count where block sizes differ: the first request of a shape (a miss) and requests
 * of the same shape with new ids (consecutive, reversed, random: hits) give plans that move
 * exactly what plan_build's plans move for the same ids (same writers, byte counts and, per
 * writer, the same (source, extent, destination) bytes in extent order, compared run by run
 * after merging what continues on all three sides). Bad ids on a hit (duplicate, out of range,
 * on either side) are refused with plan_build's very code and message. The cache's bounds
 * (entries, bytes, who), forget, a wrong shape, and the memory-bounds check per template. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "plan_tcache.h"
#include "plangeo.h"
#include "testutil.h"

struct crun {
    uint32_t sp, dp;
    uint64_t so, ext, d, len;
};

/* Writer w's runs in extent order, merged where source (unless unresolved), extent and
 * destination all continue: the same list for any two programs that move the same bytes. */
static struct crun *canon(const struct plan_writer *w, size_t *n_ret)
{
    size_t n = 0, cap = 64;
    struct crun *r = malloc(cap * sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (uint32_t i = 0; i < w->n_ops; i++) {
        const struct copy_op *o = &w->ops[i];
        for (uint64_t k = 0; k < o->count; k++) {
            struct crun x = {o->src_pool, o->dst_pool, o->src_off + k * (uint64_t)o->src_stride,
                             o->ext_off + k * o->len, o->dst_off + k * (uint64_t)o->dst_stride,
                             o->len};
            struct crun *p = n ? &r[n - 1] : NULL;
            if (p && p->sp == x.sp && p->dp == x.dp && p->ext + p->len == x.ext &&
                p->d + p->len == x.d && (x.sp == PLAN_POOL_UNKNOWN || p->so + p->len == x.so)) {
                p->len += x.len;
                continue;
            }
            if (n == cap) {
                cap *= 2;
                r = realloc(r, cap * sizeof *r);
                ck_assert_ptr_nonnull(r);
            }
            r[n++] = x;
        }
    }
    *n_ret = n;
    return r;
}

static void assert_same_bytes(const struct plan *a, const struct plan *b, const char *what)
{
    ck_assert_msg(a->n_writers == b->n_writers, "%s: writers %u vs %u", what, a->n_writers,
                  b->n_writers);
    ck_assert_uint_eq(a->total_bytes, b->total_bytes);
    ck_assert_uint_eq(a->state_bytes, b->state_bytes);
    ck_assert_uint_eq(a->kv_bytes, b->kv_bytes);
    for (uint32_t w = 0; w < a->n_writers; w++) {
        ck_assert_uint_eq(a->writers[w].ctx_rank, b->writers[w].ctx_rank);
        ck_assert_uint_eq(a->writers[w].bytes, b->writers[w].bytes);
        size_t na, nb;
        struct crun *ra = canon(&a->writers[w], &na), *rb = canon(&b->writers[w], &nb);
        ck_assert_msg(na == nb, "%s: writer %u has %zu vs %zu runs", what, w, na, nb);
        for (size_t i = 0; i < na; i++)
            ck_assert_msg(memcmp(&ra[i], &rb[i], sizeof ra[i]) == 0,
                          "%s: writer %u run %zu differs (ext %lu vs %lu)", what, w, i,
                          (unsigned long)ra[i].ext, (unsigned long)rb[i].ext);
        free(ra);
        free(rb);
    }
}

/* New ids of like's counts into store: mode 0 consecutive, 1 reversed, 2 random distinct. */
static void fill_ids(const struct layout *l, const struct plan_ids *like, int mode, uint64_t *rng,
                     uint32_t *store, struct plan_ids *ret)
{
    *ret = *like;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        uint32_t n = like->n[g], items = l->groups[g].n_items;
        if (!like->ids[g])
            continue;
        ck_assert_uint_le(n, items);
        uint32_t start = (uint32_t)(par_rand(rng) % (items - n + 1));
        for (uint32_t k = 0; k < n; k++)
            store[k] = mode == 0 ? start + k : start + n - 1 - k;
        if (mode == 2) { /* distinct, random: partial Fisher-Yates over [0, items) */
            uint32_t *all = malloc((size_t)items * sizeof *all);
            ck_assert_ptr_nonnull(all);
            for (uint32_t i = 0; i < items; i++)
                all[i] = i;
            for (uint32_t k = 0; k < n; k++) {
                uint32_t j = k + (uint32_t)(par_rand(rng) % (items - k)), t = all[k];
                all[k] = all[j];
                all[j] = t;
                store[k] = all[k];
            }
            free(all);
        }
        ret->ids[g] = store;
        store += n;
    }
}

static void assert_same_refusal(struct plan_tcache *tc, const uint64_t *who,
                                const struct plan_input *in, const char *what)
{
    struct plan pa, pb;
    struct plan_error ea = {0}, eb = {0};
    struct plan_tcache_entry *e;
    bool hit;
    int ra = plan_build(in, &pa, &ea), rb = plan_tcache_plan(tc, who, 1, in, &pb, &e, &hit, &eb);
    ck_assert_msg(ra != 0, "%s: plan_build accepted it", what);
    ck_assert_int_eq(ra, rb);
    ck_assert_int_eq(ea.code, eb.code);
    ck_assert_str_eq(ea.message, eb.message);
}

/* A new request of the same shape as in: ids of mode, compared with plan_build. */
static void same_shape(struct plan_tcache *tc, const uint64_t *who, const struct plan_input *in,
                       const struct par_side *c, int mode, uint64_t *rng, const char *what)
{
    uint32_t *gstore = calloc(LAYOUT_MAX_GROUPS * 16, sizeof *gstore);
    uint32_t *cstore = calloc((size_t)c->n * LAYOUT_MAX_GROUPS * 16, sizeof *cstore);
    struct plan_ids *cids = calloc(c->n, sizeof *cids);
    ck_assert(gstore && cstore && cids);
    struct plan_input b = *in;
    fill_ids(in->gen, &in->gen_ids, mode, rng, gstore, &b.gen_ids);
    for (uint32_t r = 0; in->ctx_ids && r < c->n; r++)
        fill_ids(&c->ranks[r], &in->ctx_ids[r], mode, rng, cstore + r * LAYOUT_MAX_GROUPS * 16,
                 &cids[r]);
    b.ctx_ids = in->ctx_ids ? cids : NULL;
    struct plan want, got;
    struct plan_error pe;
    struct plan_tcache_entry *e;
    bool hit = false;
    ck_assert_msg(plan_build(&b, &want, &pe) == 0, "%s: %s", what, pe.message);
    ck_assert_msg(plan_tcache_plan(tc, who, 1, &b, &got, &e, &hit, &pe) == 0, "%s: %s", what,
                  pe.message);
    ck_assert_msg(hit, "%s: a request of the same shape missed", what);
    assert_same_bytes(&want, &got, what);
    plan_done(&want);
    plan_done(&got);
    /* bad ids on a hit: refused as plan_build refuses them */
    for (uint32_t g = 0; g < in->gen->n_groups; g++) {
        uint32_t *ids = (uint32_t *)b.gen_ids.ids[g], n = b.gen_ids.n[g];
        if (!ids || n < 2)
            continue;
        uint32_t keep = ids[1];
        ids[1] = ids[0];
        assert_same_refusal(tc, who, &b, what);
        ids[1] = keep;
        keep = ids[0];
        ids[0] = in->gen->groups[g].n_items;
        assert_same_refusal(tc, who, &b, what);
        ids[0] = keep;
        break;
    }
    for (uint32_t r = 0; b.ctx_ids && r < c->n; r++)
        for (uint32_t g = 0; g < c->ranks[r].n_groups; g++)
            if (cids[r].ids[g] && cids[r].n[g] >= 2) {
                uint32_t *ids = (uint32_t *)cids[r].ids[g], keep = ids[0];
                ids[0] = ids[1];
                assert_same_refusal(tc, who, &b, what);
                ids[0] = keep;
                r = c->n;
                break;
            }
    free(gstore);
    free(cstore);
    free(cids);
}

static void check_rank(const struct geo *g, const struct par_side *c, const struct par_side *gs,
                       uint32_t gr, bool known, uint64_t tokens, uint64_t *rng)
{
    char what[400];
    snprintf(what, sizeof what, "%s -> %s gen %u ids %s tokens %lu", g->ctx, g->gen, gr,
             known ? "known" : "unknown", (unsigned long)tokens);
    struct plan_input in = par_input(c, gs, gr, known ? c->ids : NULL, g->dp);
    in.tokens = tokens;
    struct plan_tcache tc;
    ck_assert_int_eq(plan_tcache_init(&tc, 8, 1u << 30), 0);
    uint64_t who = 1 + gr;
    struct plan want, got;
    struct plan_error pa = {0}, pb = {0};
    struct plan_tcache_entry *e;
    bool hit = true;
    int ra = plan_build(&in, &want, &pa);
    int rb = plan_tcache_plan(&tc, &who, 1, &in, &got, &e, &hit, &pb);
    ck_assert_int_eq(ra, rb);
    if (ra) { /* token counts the request cannot have: the same refusal, nothing kept */
        ck_assert_int_eq(pa.code, pb.code);
        ck_assert_str_eq(pa.message, pb.message);
        ck_assert_uint_eq(tc.n, 0);
        plan_tcache_done(&tc);
        return;
    }
    ck_assert(!hit);
    ck_assert_ptr_nonnull(e);
    assert_same_bytes(&want, &got, what);
    if (known) /* memory bounds hold for every id, and fail on pools too short */
        for (uint32_t w = 0; w < e->t.plan.n_writers; w++) {
            uint32_t cr = e->t.plan.writers[w].ctx_rank;
            ck_assert_int_eq(plan_template_fits(&e->t, w, &gs->mem[gr], 'd'), 0);
            ck_assert_int_eq(plan_template_fits(&e->t, w, &c->mem[cr], 's'), 0);
            struct copy_mem small = c->mem[cr];
            for (uint32_t p = 0; p < small.n; p++)
                small.size[p] = 0;
            ck_assert_int_eq(plan_template_fits(&e->t, w, &small, 's'), -ERANGE);
        }
    plan_done(&want);
    plan_done(&got);
    for (int mode = 0; mode < 3; mode++)
        same_shape(&tc, &who, &in, c, mode, rng, what);
    ck_assert_uint_eq(tc.misses, 1);
    plan_tcache_done(&tc);
}

START_TEST(template_plans_move_what_plan_build_moves)
{
    uint64_t rng = 0x7e3a0000ull + (uint64_t)_i;
    uint32_t hit_runs = 0, converted = 0, by_tokens = 0;
    for (int n = 0; n < 40; n++) {
        struct geo g;
        random_geo(&g, &rng);
        struct par_side c, gs;
        geo_sides(&g, &c, &gs, &rng);
        uint64_t tokens = 0;
        if (c.ranks[0].tokens_per_block != gs.ranks[0].tokens_per_block && g.n_ctx && n % 2) {
            uint64_t ct = c.ranks[0].tokens_per_block;
            tokens = g.n_ctx * ct - par_rand(&rng) % ct; /* the last context block partly full */
            by_tokens++;
        }
        for (uint32_t gr = 0; gr < gs.n; gr++) {
            check_rank(&g, &c, &gs, gr, true, tokens, &rng);
            check_rank(&g, &c, &gs, gr, false, tokens, &rng);
            hit_runs++;
        }
        converted += g.convert;
        par_side_free(&c);
        par_side_free(&gs);
    }
    ck_assert_uint_ge(hit_runs, 40);
    ck_assert_uint_ge(converted, 3);
    ck_assert_uint_ge(by_tokens, 1);
}
END_TEST

/* A tiny pair and a request of n blocks per paged group. */
static void tiny(struct par_side *c, struct par_side *gs, uint32_t n, uint64_t *rng)
{
    char err[256];
    ck_assert_int_eq(par_side_init(c, "tiny:tp=2,blocks=8", ROLE_CONTEXT, n, rng, err,
                                   sizeof err), 0);
    ck_assert_int_eq(par_side_init(gs, "tiny:tp=1,blocks=8", ROLE_GENERATION, n, rng, err,
                                   sizeof err), 0);
}

static int plan_n(struct plan_tcache *tc, uint64_t who, uint32_t n, bool *hit)
{
    uint64_t rng = 7 + n;
    struct par_side c, gs;
    tiny(&c, &gs, n, &rng);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1);
    struct plan p;
    struct plan_error pe;
    struct plan_tcache_entry *e;
    int rc = plan_tcache_plan(tc, &who, 1, &in, &p, &e, hit, &pe);
    if (rc == 0)
        plan_done(&p);
    par_side_free(&c);
    par_side_free(&gs);
    return rc;
}

START_TEST(template_cache_is_bounded_in_entries_and_bytes)
{
    struct plan_tcache tc;
    ck_assert_int_eq(plan_tcache_init(&tc, 0, 1), -EINVAL);
    ck_assert_int_eq(plan_tcache_init(&tc, PLAN_TCACHE_MAX_ENTRIES + 1, 1), -EINVAL);
    ck_assert_int_eq(plan_tcache_init(&tc, 1, 0), -EINVAL);
    ck_assert_int_eq(plan_tcache_init(&tc, 2, 1u << 30), 0);
    bool hit;
    for (uint32_t n = 1; n <= 3; n++) /* three shapes into two entries */
        ck_assert_int_eq(plan_n(&tc, 5, n, &hit), 0);
    ck_assert_uint_eq(tc.n, 2);
    ck_assert_uint_eq(tc.evicted, 1);
    ck_assert_int_eq(plan_n(&tc, 5, 3, &hit), 0);
    ck_assert(hit);
    ck_assert_int_eq(plan_n(&tc, 5, 1, &hit), 0); /* the least recently used went */
    ck_assert(!hit);
    ck_assert_int_eq(plan_n(&tc, 6, 3, &hit), 0); /* another registration: its own key */
    ck_assert(!hit);
    plan_tcache_forget(&tc, 6);
    ck_assert_uint_eq(tc.n, 1);
    size_t bytes = tc.bytes;
    ck_assert_uint_gt(bytes, 0);
    plan_tcache_forget(&tc, 5);
    ck_assert_uint_eq(tc.n, 0);
    ck_assert_uint_eq(tc.bytes, 0);
    plan_tcache_done(&tc);
    /* a byte bound below one template: planned, not kept */
    ck_assert_int_eq(plan_tcache_init(&tc, 4, bytes - 1), 0);
    ck_assert_int_eq(plan_n(&tc, 5, 1, &hit), 0);
    ck_assert_int_eq(plan_n(&tc, 5, 1, &hit), 0);
    ck_assert(!hit);
    ck_assert_uint_eq(tc.n, 0);
    ck_assert_uint_eq(tc.not_kept, 2);
    plan_tcache_done(&tc);
}
END_TEST

START_TEST(template_of_another_shape_or_who_is_refused)
{
    uint64_t rng = 3;
    struct par_side c, gs, c2, gs2;
    tiny(&c, &gs, 2, &rng);
    tiny(&c2, &gs2, 3, &rng);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1), in3 = par_input(&c2, &gs2, 0,
                                                                               c2.ids, -1);
    struct plan_template t;
    struct plan p;
    struct plan_error pe;
    ck_assert_int_eq(plan_template_build(&in, &t, &p, &pe), 0);
    plan_done(&p);
    ck_assert_int_eq(plan_template_instantiate(&t, &in3, &p, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(pe.message, "shape"));
    in3 = in;
    in3.ctx_ids = NULL; /* the same counts, context ids not known: another shape */
    ck_assert_int_eq(plan_template_instantiate(&t, &in3, &p, &pe), -EINVAL);
    plan_template_done(&t);
    struct plan_tcache tc;
    ck_assert_int_eq(plan_tcache_init(&tc, 2, 1u << 20), 0);
    uint64_t who[PLAN_TCACHE_MAX_WHO + 1] = {0};
    struct plan_tcache_entry *e;
    bool hit;
    ck_assert_int_eq(plan_tcache_plan(&tc, who, 0, &in, &p, &e, &hit, &pe), -EINVAL);
    ck_assert_int_eq(plan_tcache_plan(&tc, who, PLAN_TCACHE_MAX_WHO + 1, &in, &p, &e, &hit, &pe),
                     -EINVAL);
    ck_assert_int_eq(plan_tcache_plan(&tc, who, PLAN_TCACHE_MAX_WHO, &in, &p, &e, &hit, &pe), 0);
    plan_done(&p);
    plan_tcache_done(&tc);
    par_side_free(&c);
    par_side_free(&gs);
    par_side_free(&c2);
    par_side_free(&gs2);
}
END_TEST

static Suite *template_suite(void)
{
    Suite *s = suite_create("plan_template");
    TCase *tc = tcase_create("template");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, template_plans_move_what_plan_build_moves, 0, 3);
    tcase_add_test(tc, template_cache_is_bounded_in_entries_and_bytes);
    tcase_add_test(tc, template_of_another_shape_or_who_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(template_suite()); }
