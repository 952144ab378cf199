/* check_arena_hold.c: per-peer holds of a failed peer's staging memory (arena_hold.h): a held
 * slot stays quarantined (not granted to a waiter) until its key's end time, then comes back;
 * "until told" holds wait for hold_set; a key told before its chunks failed makes them join its
 * time; heap buffers are freed when the hold ends (ASan would see a leak or a double free);
 * other keys are untouched, and the stats say what is held. */
#include <errno.h>
#include <jansson.h>

#include "arena.h"
#include "arena_hold.h"
#include "testutil.h"

#define MIB (1024ull * 1024ull)

static uint32_t n_grants[8]; /* per reservation id */

static void on_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    (void)g;
    (void)user;
    n_grants[r->id] += n;
}

static void on_timeout(struct arena_resv *r, void *user)
{
    (void)r;
    (void)user;
}

static struct arena *mk(void)
{
    memset(n_grants, 0, sizeof n_grants);
    struct arena_params p = {.size = 2 * MIB, .chunk = MIB, .reserve_timeout_ms = 100000,
                             .max_waiters = 64, .max_credits = 16, .on_grant = on_grant,
                             .on_timeout = on_timeout};
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    return a;
}

/* Reservation id takes one slot, then fails with its chunk in flight: quarantined under key. */
static void fail_one(struct arena *a, struct arena_resv *r, uint64_t id, uint64_t key)
{
    arena_resv_init(r, id, key, MIB);
    ck_assert_int_eq(arena_want(a, r, 1, 0), 1);
    ck_assert_uint_eq(n_grants[id], 1);
    arena_resv_close(a, r, true);
}

static uint32_t free_slots(const struct arena *a)
{
    struct arena_stats st;
    arena_get_stats(a, &st);
    return st.slots_free;
}

START_TEST(held_slot_is_not_granted_until_its_time_then_comes_back)
{
    struct arena *a = mk();
    struct arena_hold *h = NULL;
    ck_assert_int_eq(hold_new(a, &h), 0);
    struct arena_resv r1, r2, w;
    fail_one(a, &r1, 1, 7);
    fail_one(a, &r2, 2, 7);
    ck_assert_int_eq(hold_add(h, 7, NULL, MIB, 1000, 10), 0);
    ck_assert_int_eq(hold_add(h, 7, NULL, MIB, 5000, 20), 0); /* the key keeps its first time */
    ck_assert(hold_has(h, 7) && !hold_has(h, 8));
    ck_assert(hold_timed(h));
    ck_assert_uint_eq(free_slots(a), 0);
    arena_resv_init(&w, 3, 9, MIB); /* another peer's chunk waits for a slot */
    ck_assert_int_eq(arena_want(a, &w, 1, 0), 1);
    ck_assert_uint_eq(n_grants[3], 0);
    ck_assert_uint_eq(hold_tick(h, 999), 0);
    ck_assert_uint_eq(n_grants[3], 0);
    struct hold_stats s;
    hold_get_stats(h, &s);
    ck_assert_uint_eq(s.peers, 1);
    ck_assert_uint_eq(s.slots, 2);
    ck_assert_uint_eq(s.bytes, 2 * MIB);
    ck_assert_uint_eq(hold_tick(h, 1000), 2);
    ck_assert_uint_eq(n_grants[3], 1); /* the waiter got a reclaimed slot */
    hold_get_stats(h, &s);
    ck_assert_uint_eq(s.peers, 0);
    ck_assert_uint_eq(s.slots, 0);
    ck_assert_uint_eq(s.holds_total, 2);
    ck_assert_uint_eq(s.reclaimed_total, 2);
    ck_assert_uint_eq(s.reclaimed_bytes_total, 2 * MIB);
    ck_assert_uint_eq(s.longest_ms, 990);
    ck_assert(!hold_timed(h));
    arena_resv_close(a, &w, false);
    ck_assert_uint_eq(free_slots(a), 2);
    hold_free(h);
    arena_free(a);
}
END_TEST

START_TEST(until_told_waits_for_hold_set_and_a_told_key_keeps_its_time)
{
    struct arena *a = mk();
    struct arena_hold *h = NULL;
    ck_assert_int_eq(hold_new(a, &h), 0);
    /* the peer is lost frozen while a chunk to it is in flight: told before the chunk fails */
    ck_assert_int_eq(hold_set(h, 7, HOLD_UNTIL_TOLD, true), 0);
    ck_assert_int_eq(hold_set(h, 8, 50, false), 0); /* not created: holds nothing */
    struct arena_resv r;
    fail_one(a, &r, 1, 7);
    ck_assert_int_eq(hold_add(h, 7, NULL, MIB, 100, 10), 0); /* the backstop does not apply */
    ck_assert(!hold_timed(h));
    ck_assert_uint_eq(hold_tick(h, 1000000), 0);
    struct hold_stats s;
    hold_get_stats(h, &s);
    ck_assert_uint_eq(s.peers_until_told, 1);
    ck_assert_uint_eq(s.slots, 1);
    ck_assert_uint_eq(free_slots(a), 1);
    ck_assert_int_eq(hold_set(h, 7, 1000001, false), 0); /* its process exited */
    ck_assert(hold_timed(h));
    ck_assert_uint_eq(hold_tick(h, 1000001), 1);
    ck_assert_uint_eq(free_slots(a), 2);
    /* a chunk failing just after the hold ended joins it: reclaimed at the next tick */
    fail_one(a, &r, 2, 7);
    ck_assert_int_eq(hold_add(h, 7, NULL, MIB, 9999999, 1000002), 0);
    ck_assert_uint_eq(hold_tick(h, 1000003), 1);
    ck_assert_uint_eq(free_slots(a), 2);
    /* and the ended key lingers only HOLD_LINGER_MS */
    hold_tick(h, 1000001 + HOLD_LINGER_MS);
    fail_one(a, &r, 3, 7);
    ck_assert_int_eq(hold_add(h, 7, NULL, MIB, 2000000 + HOLD_LINGER_MS, 1000002 + HOLD_LINGER_MS), 0);
    ck_assert_uint_eq(hold_tick(h, 1000003 + HOLD_LINGER_MS), 0); /* a fresh backstop */
    ck_assert_uint_eq(hold_tick(h, 2000000 + HOLD_LINGER_MS), 1);
    hold_free(h);
    arena_free(a);
}
END_TEST

START_TEST(heap_buffers_are_freed_when_the_hold_ends_or_with_the_hold)
{
    struct arena_hold *h = NULL;
    ck_assert_int_eq(hold_new(NULL, &h), 0);
    ck_assert_int_eq(hold_add(h, 0, NULL, 1, 1, 0), -EINVAL);
    for (int i = 0; i < 9; i++) /* past the first array growth */
        ck_assert_int_eq(hold_add(h, 5, malloc(64), 64, 100, 0), 0);
    ck_assert_int_eq(hold_add(h, 6, malloc(32), 32, 200, 0), 0);
    struct hold_stats s;
    hold_get_stats(h, &s);
    ck_assert_uint_eq(s.buffers, 10);
    ck_assert_uint_eq(s.bytes, 9 * 64 + 32);
    ck_assert_uint_eq(hold_tick(h, 100), 9); /* key 6 is untouched */
    hold_get_stats(h, &s);
    ck_assert_uint_eq(s.buffers, 1);
    ck_assert_uint_eq(s.peers, 1);
    json_t *j = hold_stats_json(h);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "buffers")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "reclaimed_total")), 9);
    json_decref(j);
    hold_free(h); /* frees key 6's buffer */
    ck_assert_ptr_null(hold_free(NULL));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena_hold");
    TCase *tc = tcase_create("hold");
    tcase_add_test(tc, held_slot_is_not_granted_until_its_time_then_comes_back);
    tcase_add_test(tc, until_told_waits_for_hold_set_and_a_told_key_keeps_its_time);
    tcase_add_test(tc, heap_buffers_are_freed_when_the_hold_ends_or_with_the_hold);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
