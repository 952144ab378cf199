/* check_registry.c: the daemon's table of ranks and instances: slots, consistency of an
 * instance's ranks, completeness (home-daemon table), removal, and the JSON documents. */
#include <errno.h>
#include <sys/mman.h>

#include "preset.h"
#include "registry.h"
#include "testutil.h"

static void build(const char *spec, const char *inst, layout_role_t role, struct layout *ret, uint32_t n)
{
    struct preset_spec ps;
    char err[256];
    ck_assert_int_eq(preset_parse(spec, &ps, err, sizeof err), 0);
    ck_assert_uint_eq(preset_n_ranks(&ps), n);
    ck_assert_int_eq(preset_build(&ps, inst, role, -1, ret, err, sizeof err), 0);
}

/* A real one-page mapping, so removal's munmap is exercised. */
static struct copy_mem page(void)
{
    struct copy_mem m = {.n = 1};
    m.base[0] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m.base[0], MAP_FAILED);
    m.size[0] = 4096;
    return m;
}

START_TEST(registry_instance_is_complete_when_every_rank_registered)
{
    struct registry r;
    registry_init(&r, NULL);
    struct layout l[4];
    build("tiny:tp=2,pp=2", "ctx", ROLE_CONTEXT, l, 4);
    struct reg_rank *rk[4];
    char err[256];
    for (int i = 0; i < 4; i++) {
        struct copy_mem m = page();
        ck_assert_int_eq(registry_add(&r, &l[i], &m, NULL, 0, &rk[i], err, sizeof err), 0);
        struct reg_instance *in = registry_find(&r, "ctx");
        ck_assert_ptr_nonnull(in);
        ck_assert_uint_eq(in->n_registered, (uint32_t)i + 1);
        ck_assert(registry_complete(in) == (i == 3));
    }
    struct reg_instance *in = registry_find(&r, "ctx");
    /* the table is indexed by rank: pp_rank * tp + tp_rank */
    for (uint32_t i = 0; i < 4; i++)
        ck_assert_uint_eq(layout_rank(&in->table[i]), i);
    ck_assert_uint_ne(rk[0]->worker_id, rk[1]->worker_id);
    uint64_t epoch = in->epoch;
    registry_remove(&r, rk[2]);
    ck_assert(!registry_complete(in));
    ck_assert_uint_gt(in->epoch, epoch);
    ck_assert_uint_eq(r.n_ranks, 3);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            registry_remove(&r, rk[i]);
    ck_assert_ptr_null(registry_find(&r, "ctx")); /* last rank gone: instance gone */
    ck_assert_uint_eq(r.n_ranks, 0);
    registry_done(&r);
}
END_TEST

START_TEST(registry_refuses_a_taken_slot_and_inconsistent_ranks)
{
    struct registry r;
    registry_init(&r, NULL);
    struct layout a[2], b[4], g[2];
    build("tiny:tp=2", "x", ROLE_CONTEXT, a, 2);
    build("tiny:tp=4", "x", ROLE_CONTEXT, b, 4);
    build("tiny:tp=2", "x", ROLE_GENERATION, g, 2);
    struct reg_rank *rk;
    char err[256];
    struct copy_mem m = page();
    ck_assert_int_eq(registry_add(&r, &a[0], &m, NULL, 0, &rk, err, sizeof err), 0);
    struct copy_mem m2 = page();
    ck_assert_int_eq(registry_add(&r, &a[0], &m2, NULL, 0, &rk, err, sizeof err), -EEXIST);
    ck_assert_ptr_nonnull(strstr(err, "already registered"));
    ck_assert_int_eq(registry_add(&r, &b[1], &m2, NULL, 0, &rk, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "tp_size"));
    ck_assert_int_eq(registry_add(&r, &g[1], &m2, NULL, 0, &rk, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "role"));
    struct layout fp = a[1];
    strcpy(fp.fingerprint, "another-model");
    ck_assert_int_eq(registry_add(&r, &fp, &m2, NULL, 0, &rk, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "fingerprint"));
    registry_unmap(NULL, &m2); /* refused: the caller kept it */
    ck_assert_ptr_null(m2.base[0]);
    ck_assert_uint_eq(r.n_ranks, 1);
    json_t *j = registry_instances_json(&r);
    ck_assert_uint_eq(json_array_size(j), 1);
    json_t *o = json_array_get(j, 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "id")), "x");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "registered")), 1);
    ck_assert(json_is_false(json_object_get(o, "home")));
    json_decref(j);
    registry_done(&r); /* frees the remaining rank and its mapping */
}
END_TEST

static Suite *registry_suite(void)
{
    Suite *s = suite_create("registry");
    TCase *t = tcase_create("ranks");
    tcase_add_test(t, registry_instance_is_complete_when_every_rank_registered);
    tcase_add_test(t, registry_refuses_a_taken_slot_and_inconsistent_ranks);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(registry_suite()); }
