/* check_kvk_subst.c: programs kept per plan template (kernels/kvk_subst.h, lib/plan_tslots.c) on
 * the CPU. Over the random geometries of check_plan_matrix (plangeo.h): each writer's template
 * program (ops at item 0, id slots) expanded for new ids of the same shape (consecutive,
 * reversed, random) by the GPU's own formulas (kvk_tmpl_ftask) and executed task by task moves
 * the very bytes plan_build's plan moves for those ids (pools compared bitwise after both copies
 * into poisoned generation pools). Ids past a slot's limit are refused; the pools' needs are
 * those of the largest ids; a kimi-k3 8k request's ids and tasks against its per-request
 * program are printed (what the GPU path uploads and expands). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "kvk_subst.h"
#include "parity.h"
#include "plan_tcache.h"
#include "plangeo.h"
#include "tmplids.h"
#include "testutil.h"

/* Writer w's template program; *ret owned (kvk_tmpl_done). */
static void tmpl_of(const struct plan_template *t, uint32_t w, const struct plan_input *in,
                    struct kvk_tmpl *ret)
{
    const struct plan_writer *pw = &t->plan.writers[w];
    uint32_t n_slots, *limit;
    struct plan_tslot *ts = calloc(pw->n_ops ? pw->n_ops : 1, sizeof *ts);
    struct kvk_subst *sub;
    ck_assert_ptr_nonnull(ts);
    ck_assert_int_eq(plan_template_slots(t, w, &in->gen_ids, &in->ctx_ids[pw->ctx_rank], ts,
                                         &n_slots), 0);
    ck_assert_int_eq(kvk_subst_tables(ts, pw->n_ops, n_slots, &sub, &limit), 0);
    ck_assert_msg(kvk_tmpl_build(pw->ops, sub, pw->n_ops, limit, n_slots, 0, 0, ret) == 0, "%s",
                  kvk_last_error());
    free(ts);
    free(sub);
    free(limit);
}

/* The template program of writer w for ids, run task by task as the fat kernel reads them. */
static void run_tmpl(const struct kvk_tmpl *t, const uint32_t *ids, const struct copy_mem *src,
                     const struct copy_mem *dst)
{
    for (uint32_t k = 0; k < t->t.n_tasks; k++) {
        struct kvk_ftask f;
        kvk_tmpl_ftask(t, ids, k, &f);
        ck_assert_uint_lt(f.src_pool, src->n);
        ck_assert_uint_lt(f.dst_pool, dst->n);
        uint8_t *s = src->base[f.src_pool], *d = dst->base[f.dst_pool];
        if (f.len == 0) {
            ck_assert_uint_le(f.src_pos + f.bytes, src->size[f.src_pool]);
            ck_assert_uint_le(f.dst_pos + f.bytes, dst->size[f.dst_pool]);
            memcpy(d + f.dst_pos, s + f.src_pos, f.bytes);
            continue;
        }
        for (uint32_t b = 0; b < f.bytes;) { /* run by run from the task's first byte */
            uint64_t r = f.j0 + b, kk = r / f.len, jj = r % f.len, n = f.len - jj;
            if (n > f.bytes - b)
                n = f.bytes - b;
            uint64_t so = f.src_pos - f.j0 + kk * (uint64_t)f.src_stride + jj;
            uint64_t dof = f.dst_pos - f.j0 + kk * (uint64_t)f.dst_stride + jj;
            ck_assert_uint_le(so + n, src->size[f.src_pool]);
            ck_assert_uint_le(dof + n, dst->size[f.dst_pool]);
            memcpy(d + dof, s + so, n);
            b += (uint32_t)n;
        }
    }
}

static uint64_t n_checked, n_tasks_tmpl, n_tasks_plan;

/* One request of in's shape with new ids: plan_build's plan and the template programs move
 * the same bytes into poisoned copies of the generation pools. */
static void one_request(const struct plan_template *t, const struct plan_input *in,
                        const struct par_side *c, const struct copy_mem *gmem, int mode,
                        uint64_t *rng, const char *what)
{
    uint32_t *gstore = calloc(LAYOUT_MAX_GROUPS * TI_MAX_IDS, sizeof *gstore);
    uint32_t *cstore = calloc((size_t)c->n * LAYOUT_MAX_GROUPS * TI_MAX_IDS, sizeof *cstore);
    struct plan_ids *cids = calloc(c->n, sizeof *cids);
    ck_assert(gstore && cstore && cids);
    struct plan_input b = *in;
    ti_new_ids(in->gen, &in->gen_ids, mode, rng, gstore, &b.gen_ids);
    for (uint32_t r = 0; r < c->n; r++)
        ti_new_ids(&c->ranks[r], &in->ctx_ids[r], mode, rng, cstore + r * LAYOUT_MAX_GROUPS * TI_MAX_IDS,
                &cids[r]);
    b.ctx_ids = cids;
    struct plan want;
    struct plan_error pe;
    ck_assert_msg(plan_build(&b, &want, &pe) == 0, "%s: %s", what, pe.message);
    struct copy_mem a, m;
    ti_mem_copy(gmem, &a, 1);
    ti_mem_copy(gmem, &m, 1);
    for (uint32_t w = 0; w < want.n_writers; w++) {
        const struct plan_writer *pw = &want.writers[w];
        copy_direct(pw->ops, pw->n_ops, &c->mem[pw->ctx_rank], &a);
        struct kvk_tmpl kt;
        tmpl_of(t, w, &b, &kt);
        uint32_t n = plan_tslot_ids(&b.gen_ids, &cids[pw->ctx_rank], NULL, 0);
        uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        ck_assert_ptr_nonnull(ids);
        ck_assert_uint_eq(plan_tslot_ids(&b.gen_ids, &cids[pw->ctx_rank], ids, n), n);
        ck_assert_int_eq(kvk_tmpl_check_ids(&kt, ids, n), 0);
        ck_assert_uint_eq(kt.t.bytes, pw->bytes);
        run_tmpl(&kt, ids, &c->mem[pw->ctx_rank], &m);
        struct kvk_tasks folded;
        ck_assert_int_eq(kvk_tasks_index(pw->ops, pw->n_ops, 0, 0, &folded), 0);
        n_tasks_tmpl += kt.t.n_tasks;
        n_tasks_plan += folded.n_tasks;
        kvk_tasks_done(&folded);
        free(ids);
        kvk_tmpl_done(&kt);
    }
    for (uint32_t p = 0; p < gmem->n; p++)
        ck_assert_msg(memcmp(a.base[p], m.base[p], gmem->size[p]) == 0,
                      "%s: ids mode %d: pool %u differs from plan_build's copy", what, mode, p);
    n_checked++;
    par_mem_free(&a);
    par_mem_free(&m);
    plan_done(&want);
    free(gstore);
    free(cstore);
    free(cids);
}

START_TEST(template_programs_move_what_plan_build_moves)
{
    uint64_t rng = 0x5b570000ull + (uint64_t)_i;
    for (int n = 0; n < 12; n++) {
        struct geo g;
        random_geo(&g, &rng);
        struct par_side c, gs;
        geo_sides(&g, &c, &gs, &rng);
        for (uint32_t r = 0; r < c.n; r++)
            ti_fill_random(&c.mem[r], &rng);
        for (uint32_t gr = 0; gr < gs.n; gr++) {
            char what[400];
            snprintf(what, sizeof what, "%s -> %s gen %u", g.ctx, g.gen, gr);
            struct plan_input in = par_input(&c, &gs, gr, c.ids, g.dp);
            struct plan_template t;
            struct plan first;
            struct plan_error pe;
            ck_assert_msg(plan_template_build(&in, &t, &first, &pe) == 0, "%s: %s", what,
                          pe.message);
            plan_done(&first);
            for (int mode = 0; mode < 3; mode++)
                one_request(&t, &in, &c, &gs.mem[gr], mode, &rng, what);
            plan_template_done(&t);
        }
        par_side_free(&c);
        par_side_free(&gs);
    }
    printf("template programs: %llu requests bitwise equal to plan_build's; tasks %llu "
           "(per-request programs: %llu)\n", (unsigned long long)n_checked,
           (unsigned long long)n_tasks_tmpl, (unsigned long long)n_tasks_plan);
    ck_assert_uint_ge(n_checked, 36);
}
END_TEST

/* Ids past their slot's limit are refused before anything runs; the pools' needs are what the
 * largest ids reach, so a launch's pool check holds for every request. */
START_TEST(ids_past_their_regions_are_refused)
{
    uint64_t rng = 11;
    struct par_side c, gs;
    char err[256];
    ck_assert_int_eq(par_side_init(&c, "tiny:tp=1,blocks=8", ROLE_CONTEXT, 3, &rng, err,
                                   sizeof err), 0);
    ck_assert_int_eq(par_side_init(&gs, "tiny:tp=1,blocks=8", ROLE_GENERATION, 3, &rng, err,
                                   sizeof err), 0);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1);
    struct plan_template t;
    struct plan first;
    struct plan_error pe;
    ck_assert_int_eq(plan_template_build(&in, &t, &first, &pe), 0);
    plan_done(&first);
    struct kvk_tmpl kt;
    tmpl_of(&t, 0, &in, &kt);
    uint32_t n = plan_tslot_ids(&in.gen_ids, &in.ctx_ids[0], NULL, 0), ids[64];
    ck_assert_uint_le(n, 64);
    plan_tslot_ids(&in.gen_ids, &in.ctx_ids[0], ids, n);
    ck_assert_int_eq(kvk_tmpl_check_ids(&kt, ids, n), 0);
    ck_assert_int_eq(kvk_tmpl_check_ids(&kt, ids, n - 1), -ERANGE);
    ids[0] = kt.limit[0];
    ck_assert_int_eq(kvk_tmpl_check_ids(&kt, ids, n), -ERANGE);
    ck_assert_ptr_nonnull(strstr(kvk_last_error(), "slot 0"));
    /* the needs are the pools' sizes at most, and some pool is needed to its last item */
    struct kvk_mem m = {.n = gs.mem[0].n};
    for (uint32_t p = 0; p < m.n; p++) {
        m.base[p] = 4096;
        m.size[p] = gs.mem[0].size[p];
    }
    ck_assert_int_eq(kvk_tasks_check_mem(&kt.t, &m, 'd'), 0);
    uint32_t last = 0;
    for (uint32_t p = 0; p < m.n; p++)
        last += kt.t.need_dst[p] == m.size[p];
    ck_assert_uint_ge(last, 1);
    /* a slot out of range, an unresolved source: refused when built */
    struct kvk_tmpl bad;
    struct kvk_subst s = kt.subst[0];
    s.dst_slot = kt.n_slots;
    struct copy_op o = t.plan.writers[0].ops[0];
    o.ext_off = 0;
    ck_assert_int_eq(kvk_tmpl_build(&o, &s, 1, kt.limit, kt.n_slots, 0, 0, &bad), -EINVAL);
    o.src_pool = PLAN_POOL_UNKNOWN;
    ck_assert_int_eq(kvk_tmpl_build(&o, &kt.subst[0], 1, kt.limit, kt.n_slots, 0, 0, &bad),
                     -EINVAL);
    struct plan_tslot ts[64];
    struct plan_ids none = {0};
    ck_assert_int_eq(plan_template_slots(&t, 0, &in.gen_ids, &none, ts, &n), -EINVAL);
    kvk_tmpl_done(&kt);
    plan_template_done(&t);
    par_side_free(&c);
    par_side_free(&gs);
}
END_TEST

/* What a kimi-k3 8k request (the bench's) uploads and expands on each path: printed. */
START_TEST(kimi_k3_8k_uploads_its_ids_only)
{
    uint64_t rng = 5;
    struct par_side c, gs;
    char err[256];
    const char *spec = "kimi-k3:blocks=128,slots=1";
    ck_assert_int_eq(par_side_init(&c, spec, ROLE_CONTEXT, 1, &rng, err, sizeof err), 0);
    uint32_t blocks = 8192 / c.ranks[0].tokens_per_block;
    par_side_free(&c);
    ck_assert_int_eq(par_side_init(&c, spec, ROLE_CONTEXT, blocks, &rng, err, sizeof err), 0);
    ck_assert_int_eq(par_side_init(&gs, spec, ROLE_GENERATION, blocks, &rng, err, sizeof err), 0);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1);
    struct plan_template t;
    struct plan first;
    struct plan_error pe;
    ck_assert_int_eq(plan_template_build(&in, &t, &first, &pe), 0);
    uint64_t t_ops = 0, t_tasks = 0, ids = 0, p_ops = 0, p_tasks = 0;
    for (uint32_t w = 0; w < first.n_writers; w++) {
        struct kvk_tmpl kt;
        struct kvk_tasks pt;
        tmpl_of(&t, w, &in, &kt);
        ck_assert_int_eq(kvk_tasks_index(first.writers[w].ops, first.writers[w].n_ops, 0, 0,
                                         &pt), 0);
        t_ops += kt.t.n_ops;
        t_tasks += kt.t.n_tasks;
        ids += kt.n_slots;
        p_ops += pt.n_ops;
        p_tasks += pt.n_tasks;
        kvk_tmpl_done(&kt);
        kvk_tasks_done(&pt);
    }
    printf("kimi-k3 8k (%u blocks): template program %llu ops, %llu tasks, uploads %llu B of "
           "ids a request; per-request program %llu ops, %llu tasks, uploads %llu B\n", blocks,
           (unsigned long long)t_ops, (unsigned long long)t_tasks,
           (unsigned long long)(ids * 4), (unsigned long long)p_ops,
           (unsigned long long)p_tasks,
           (unsigned long long)(p_ops * sizeof(struct kvk_op) + (p_ops + 1) * 4));
    ck_assert_uint_lt(ids * 4, 64 * 1024);
    plan_done(&first);
    plan_template_done(&t);
    par_side_free(&c);
    par_side_free(&gs);
}
END_TEST

static Suite *subst_suite(void)
{
    Suite *s = suite_create("kvk_subst");
    TCase *tc = tcase_create("subst");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, template_programs_move_what_plan_build_moves, 0, 2);
    tcase_add_test(tc, ids_past_their_regions_are_refused);
    tcase_add_test(tc, kimi_k3_8k_uploads_its_ids_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(subst_suite()); }
