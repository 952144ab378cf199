/* check_engine_gate.c: the path decision of the engine (frag_gen.c, docs/DESIGN.md §5):
 * the gate is picked by payload kind (state -> gates.min_bytes, plain KV -> gates.min_blocks),
 * never by a byte count alone; below the gate the fragment path needs the generation rank's
 * pools registered with UCX, else bounce (counted as a fallback). Every decision is counted by
 * its reason. */
#include <check.h>
#include <string.h>

#include "daemon.h"
#include "frag_gen.h"
#include "registry.h"
#include "testutil.h"
#include "transfers.h"

struct fixture {
    struct daemon d;
    struct engine e;
    struct reg_rank rank;
    struct xfer x;
    struct plan pl;
    struct fragreg reg;
};

/* A generation rank with a paged group (blocks) and a state group (one slot). */
static void setup(struct fixture *f, uint64_t min_bytes, int64_t min_blocks, bool registered)
{
    memset(f, 0, sizeof *f);
    f->d.cfg.gates_min_bytes = min_bytes;
    f->d.cfg.gates_min_blocks = min_blocks;
    f->e.d = &f->d;
    f->rank.layout.n_groups = 2;
    f->rank.layout.n_pools = 2;
    f->rank.layout.groups[0].kind = GROUP_PAGED;
    f->rank.layout.groups[1].kind = GROUP_STATE;
    f->x.rank = &f->rank;
    f->x.items.n_groups = 2;
    f->reg.rk = &f->rank;
    f->reg.n = 2;
    if (registered)
        f->e.fragregs = &f->reg;
}

static wire_path_t decide(struct fixture *f, uint32_t blocks, uint64_t state_bytes,
                          uint64_t kv_bytes)
{
    f->x.items.counts[0] = blocks;
    f->x.items.counts[1] = 1;
    f->pl.state_bytes = state_bytes;
    f->pl.kv_bytes = kv_bytes;
    f->pl.total_bytes = state_bytes + kv_bytes;
    return frag_gen_choose(&f->e, &f->x, &f->pl, NULL);
}

START_TEST(gate_state_payload_is_gated_by_bytes_not_blocks)
{
    struct fixture f;
    setup(&f, 2u << 20, 64, true);
    /* 1000 blocks (far above min_blocks) but 1 MiB with state: fragment */
    ck_assert_int_eq(decide(&f, 1000, 512 << 10, 512 << 10), WIRE_PATH_FRAGMENT);
    /* 2 blocks (far below min_blocks) but 2 MiB with state: bounce */
    ck_assert_int_eq(decide(&f, 2, 2u << 20, 0), WIRE_PATH_BOUNCE);
    ck_assert_uint_eq(f.e.c.path_fragment_state, 1);
    ck_assert_uint_eq(f.e.c.path_bounce_gate_bytes, 1);
    ck_assert_uint_eq(f.e.c.path_fragment_kv + f.e.c.path_bounce_gate_blocks, 0);
}
END_TEST

START_TEST(gate_plain_kv_payload_is_gated_by_blocks_not_bytes)
{
    struct fixture f;
    setup(&f, 2u << 20, 64, true);
    /* 63 blocks of a big KV (1 GiB, far above min_bytes): fragment */
    ck_assert_int_eq(decide(&f, 63, 0, 1ull << 30), WIRE_PATH_FRAGMENT);
    /* 64 blocks of a tiny KV (64 KiB): bounce */
    ck_assert_int_eq(decide(&f, 64, 0, 64 << 10), WIRE_PATH_BOUNCE);
    ck_assert_uint_eq(f.e.c.path_fragment_kv, 1);
    ck_assert_uint_eq(f.e.c.path_bounce_gate_blocks, 1);
    ck_assert_uint_eq(f.e.c.path_fragment_state + f.e.c.path_bounce_gate_bytes, 0);
}
END_TEST

START_TEST(gate_below_without_registered_pools_falls_back_to_bounce_counted)
{
    struct fixture f;
    setup(&f, 2u << 20, 64, false);
    ck_assert_int_eq(decide(&f, 4, 4096, 4096), WIRE_PATH_BOUNCE);
    ck_assert_int_eq(decide(&f, 4, 0, 4096), WIRE_PATH_BOUNCE);
    ck_assert_uint_eq(f.e.c.path_bounce_no_rkeys, 2);
    ck_assert(f.e.warned_frag); /* warned once */
    ck_assert_uint_eq(f.e.c.path_fragment_state + f.e.c.path_fragment_kv, 0);
}
END_TEST

START_TEST(gate_zero_sends_everything_through_the_arena)
{
    struct fixture f;
    setup(&f, 0, 0, true);
    ck_assert_int_eq(decide(&f, 1, 1, 0), WIRE_PATH_BOUNCE);
    ck_assert_int_eq(decide(&f, 0, 0, 1), WIRE_PATH_BOUNCE);
    ck_assert_uint_eq(f.e.c.path_bounce_gate_bytes, 1);
    ck_assert_uint_eq(f.e.c.path_bounce_gate_blocks, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_gate");
    TCase *tc = tcase_create("gate");
    tcase_add_test(tc, gate_state_payload_is_gated_by_bytes_not_blocks);
    tcase_add_test(tc, gate_plain_kv_payload_is_gated_by_blocks_not_bytes);
    tcase_add_test(tc, gate_below_without_registered_pools_falls_back_to_bounce_counted);
    tcase_add_test(tc, gate_zero_sends_everything_through_the_arena);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
