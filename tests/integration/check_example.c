/* check_example.c: the README's libkvferry example (examples/kvf_rank.c) compiled here and run
 * against a real kvferryd: a context rank (child process) SENDs one request of tiny TP1, a
 * generation rank RECVs it; the generation pools then hold exactly the DONE bytes of the
 * context's fill and nothing else. */
#include <sys/mman.h>

#include "layout.h"
#include "preset.h"
#include "wtest.h"

#include "../../examples/kvf_rank.c"

#define FILL 0x5a

/* The pools of a layout as sealed memfds (example_pool), mapped here; fill: every byte. */
static void pools_for(const struct layout *l, struct kvf_pool *p, uint8_t **mem, int fill)
{
    for (uint32_t i = 0; i < l->n_pools; i++) {
        ck_assert_int_eq(example_pool(l->pools[i].bytes, &p[i]), 0);
        mem[i] = mmap(NULL, l->pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p[i].fd, 0);
        ck_assert_ptr_ne(mem[i], MAP_FAILED);
        memset(mem[i], fill, l->pools[i].bytes);
    }
}

/* Item ids of the request: 4 blocks per paged group, slot 1 per state group. */
static uint32_t ids_for(const struct layout *l, uint32_t *counts, uint32_t *ids)
{
    uint32_t k = 0;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        uint32_t n = l->groups[g].kind == GROUP_STATE ? 1 : 4;
        for (uint32_t j = 0; j < n; j++)
            ids[k++] = j + 1;
        counts[g] = n;
    }
    return k;
}

START_TEST(example_rank_moves_one_request_from_context_to_generation)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct preset_spec ps;
    char err[256];
    ck_assert_int_eq(preset_parse("tiny", &ps, err, sizeof err), 0);
    static struct layout ctx, gen;
    ck_assert_int_eq(preset_build(&ps, "ctx0", ROLE_CONTEXT, -1, &ctx, err, sizeof err), 0);
    ck_assert_int_eq(preset_build(&ps, "gen0", ROLE_GENERATION, -1, &gen, err, sizeof err), 0);
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[64];
    ids_for(&ctx, counts, ids);
    struct example_req q = {.id = 7, .n_groups = ctx.n_groups, .counts = counts, .ids = ids,
                            .n_readers = 1};
    struct kvf_pool p[LAYOUT_MAX_POOLS];
    uint8_t *mem[LAYOUT_MAX_POOLS];
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* the context rank */
        char *json = layout_to_json(&ctx);
        uint64_t sent = 0;
        pools_for(&ctx, p, mem, FILL);
        int rc = json ? example_rank(e.wsock, json, p, ctx.n_pools, &q, &sent) : -1;
        _exit(rc == 0 && sent > 0 ? 0 : 1);
    }
    char *json = layout_to_json(&gen);
    ck_assert_ptr_nonnull(json);
    pools_for(&gen, p, mem, 0);
    q.ctx_instance = "ctx0";
    q.n_readers = 0;
    uint64_t done = 0;
    ck_assert_int_eq(example_rank(e.wsock, json, p, gen.n_pools, &q, &done), 0);
    ck_assert_int_eq(wt_wait(child, 30000), 0);
    uint64_t filled = 0;
    for (uint32_t i = 0; i < gen.n_pools; i++) {
        for (uint64_t b = 0; b < gen.pools[i].bytes; b++)
            filled += mem[i][b] == FILL;
        munmap(mem[i], gen.pools[i].bytes);
        close(p[i].fd);
    }
    ck_assert_uint_gt(done, 0);
    ck_assert_uint_eq(filled, done);
    free(json);
    wt_stop(&e);
}
END_TEST

static Suite *example_suite(void)
{
    Suite *s = suite_create("example");
    TCase *t = tcase_create("example");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, example_rank_moves_one_request_from_context_to_generation);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(example_suite()); }
