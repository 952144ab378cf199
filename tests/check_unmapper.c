/* check_unmapper.c: the unmapper thread (daemon/base/unmapper.h) on real mappings: ranges handed
 * over are unmapped whole (in steps, an unaligned length too) and counted; unmapper_free unmaps
 * what is still queued before it returns; a pinned mapping (mempin.h) is handed over only at its
 * last unpin, and stays mapped until then; without an unmapper the caller unmaps. The ranges are
 * memfd mappings, told apart in /proc/self/maps from whatever reuses their addresses. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <time.h>

#include "mempin.h"
#include "testutil.h"
#include "unmapper.h"

#define PAGE 4096ull
#define MEMFD_NAME "kvf-unmapper-test"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A memfd mapping, so that "still mapped" means this mapping: once it is gone the address may
 * be reused by anyone (a thread's malloc arena was seen there). */
static uint8_t *map_touched(uint64_t len)
{
    int fd = memfd_create(MEMFD_NAME, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    close(fd);
    for (uint64_t off = 0; off < len; off += PAGE)
        p[off] = 1;
    return p;
}

/* Whether the page holding p is still one of map_touched's mappings (/proc/self/maps). */
static bool mapped(const uint8_t *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    bool ours = false;
    uintptr_t a = (uintptr_t)p;
    while (!ours && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
            ours = strstr(line, "memfd:" MEMFD_NAME) != NULL;
    }
    fclose(f);
    return ours;
}

/* Every page of [p, p + len) at a step's start and end, and the last page: unmapped. */
static void assert_gone(const uint8_t *p, uint64_t len)
{
    for (uint64_t off = 0; off < len; off += UNMAPPER_STEP) {
        ck_assert_msg(!mapped(p + off), "offset %llu still mapped", (unsigned long long)off);
        uint64_t end = off + UNMAPPER_STEP < len ? off + UNMAPPER_STEP : len;
        ck_assert(!mapped(p + end - 1));
    }
}

/* Waits until nothing is pending (the thread has no event to wait on: its stats are asked). */
static struct unmapper_stats wait_idle(struct unmapper *u)
{
    struct unmapper_stats st;
    int64_t until = now_ms() + tu_ms(10000);
    for (unmapper_get_stats(u, &st); st.pending && now_ms() < until; unmapper_get_stats(u, &st))
        sched_yield();
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.pending_bytes, 0);
    return st;
}

START_TEST(unmapper_unmaps_ranges_handed_over_in_steps_and_counts_them)
{
    struct unmapper *u;
    ck_assert_int_eq(unmapper_new(&u), 0);
    const uint64_t lens[] = {PAGE, 2 * UNMAPPER_STEP + UNMAPPER_STEP / 2 + 123,
                             3 * UNMAPPER_STEP};
    uint8_t *p[3];
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) /* all mapped first: no address is reused under the checks */
        p[i] = map_touched(lens[i]);
    for (int i = 0; i < 3; i++) {
        unmapper_unmap(u, p[i], lens[i]);
        total += lens[i];
    }
    struct unmapper_stats st = wait_idle(u);
    for (int i = 0; i < 3; i++)
        assert_gone(p[i], lens[i]);
    ck_assert_uint_eq(st.unmaps, 3);
    ck_assert_uint_eq(st.bytes, total);
    ck_assert_uint_ge(st.busy_ns, st.max_ns);
    ck_assert_uint_ge(st.max_ns, st.max_step_ns);
    ck_assert_ptr_null(unmapper_free(u));
}
END_TEST

START_TEST(unmapper_free_unmaps_what_is_still_queued)
{
    struct unmapper *u;
    ck_assert_int_eq(unmapper_new(&u), 0);
    enum { N = 32 };
    uint8_t *p[N];
    for (int i = 0; i < N; i++)
        p[i] = map_touched(1u << 20);
    for (int i = 0; i < N; i++)
        unmapper_unmap(u, p[i], 1u << 20);
    ck_assert_ptr_null(unmapper_free(u)); /* at once: most are still queued */
    for (int i = 0; i < N; i++)
        assert_gone(p[i], 1u << 20);
    ck_assert_ptr_null(unmapper_free(NULL));
}
END_TEST

START_TEST(unmapper_takes_a_pinned_mapping_at_its_last_unpin)
{
    struct unmapper *u;
    ck_assert_int_eq(unmapper_new(&u), 0);
    uint64_t len = UNMAPPER_STEP + PAGE;
    uint8_t *p = map_touched(len);
    uint32_t pinned, deferred;
    ck_assert_int_eq(mempin_ref(p, len), 0); /* two copies on it */
    ck_assert_int_eq(mempin_ref(p, len), 0);
    ck_assert_int_eq(mempin_unmap(p, len, u), 1); /* the owner lets go: deferred */
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(deferred, 1);
    mempin_unref(p);
    struct unmapper_stats st;
    unmapper_get_stats(u, &st);
    ck_assert_uint_eq(st.pending + st.unmaps, 0); /* not handed over: one copy still runs */
    ck_assert(mapped(p) && mapped(p + len - 1));
    p[len - 1] = 2; /* and it may still write it */
    mempin_unref(p); /* the last copy ended: the unmapper's now */
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    ck_assert_uint_eq(deferred, 0);
    st = wait_idle(u);
    ck_assert_uint_eq(st.unmaps, 1);
    ck_assert_uint_eq(st.bytes, len);
    assert_gone(p, len);
    uint8_t *q = map_touched(PAGE); /* unpinned: handed over at once */
    ck_assert_int_eq(mempin_unmap(q, PAGE, u), 0);
    st = wait_idle(u);
    ck_assert_uint_eq(st.unmaps, 2);
    assert_gone(q, PAGE);
    ck_assert_ptr_null(unmapper_free(u));
}
END_TEST

START_TEST(unmapper_absent_the_caller_unmaps)
{
    uint8_t *p = map_touched(3 * PAGE);
    unmapper_unmap(NULL, p, 3 * PAGE);
    assert_gone(p, 3 * PAGE);
    struct unmapper_stats st;
    unmapper_get_stats(NULL, &st);
    ck_assert_uint_eq(st.unmaps, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("unmapper");
    TCase *tc = tcase_create("thread");
    tcase_add_test(tc, unmapper_unmaps_ranges_handed_over_in_steps_and_counts_them);
    tcase_add_test(tc, unmapper_free_unmaps_what_is_still_queued);
    tcase_add_test(tc, unmapper_takes_a_pinned_mapping_at_its_last_unpin);
    tcase_add_test(tc, unmapper_absent_the_caller_unmaps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
