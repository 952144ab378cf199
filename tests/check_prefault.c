/* check_prefault.c: COPYENG_PREFAULT on real memfd mappings (prefault.h, copyeng.h): after the
 * job the pages the owner held are mapped (touching them takes no page fault, counted with
 * getrusage), a hole stays a hole (the daemon allocates none of the owner's memory), bytes are
 * untouched; a cancelled prefault never calls back and its pins defer the owner's unmap until
 * its running piece ended. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <uv.h>

#include "copyeng.h"
#include "mempin.h"
#include "testutil.h"

#define MIB (1024ull * 1024ull)
#define PAGE 4096ull

/* A sealed-size memfd of `len` bytes whose first `filled` bytes hold a pattern (resident
 * shmem pages, as a worker's pools are); the rest is a hole. */
static int memfd_filled(uint64_t len, uint64_t filled)
{
    int fd = memfd_create("check-prefault", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    uint8_t *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(w, MAP_FAILED);
    for (uint64_t i = 0; i < filled; i += 8) {
        uint64_t v = i * 0x9e3779b97f4a7c15ull;
        memcpy(w + i, &v, 8);
    }
    munmap(w, len); /* the page cache keeps the pages; a fresh mapping has no PTEs */
    return fd;
}

static long minflt(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
    return ru.ru_minflt;
}

/* Page faults this thread takes writing (or reading) one byte per page of [p, p + n). */
static long touch_faults(uint8_t *p, uint64_t n, bool write)
{
    long f0 = minflt();
    for (uint64_t off = 0; off < n; off += PAGE) {
        if (write)
            __atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED); /* a write, bytes unchanged */
        else
            (void)*(volatile uint8_t *)(p + off);
    }
    return minflt() - f0;
}

static void done_cb(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    ck_assert_int_eq(d->status, 0);
    ++*(int *)user;
}

static struct copyeng *mk(uv_loop_t *loop, uint32_t threads)
{
    ck_assert_int_eq(uv_loop_init(loop), 0);
    struct copyeng_params p = {.loop = loop, .threads = threads};
    struct copyeng *e = NULL;
    ck_assert_int_eq(copyeng_new(&p, &e), 0);
    return e;
}

static void teardown(uv_loop_t *loop, struct copyeng *e)
{
    ck_assert_ptr_null(copyeng_free(e));
    uv_run(loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(loop), 0);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    ck_assert_uint_eq(deferred, 0);
}

/* One prefault job over the whole of mem's pool 0 (as worker_prefault.c submits). */
static int prefault(uv_loop_t *loop, struct copyeng *e, const struct copy_mem *m, bool write)
{
    struct copy_op op = {.dst_pool = 0, .len = m->size[0], .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1, .dst = m,
                                .write = write};
    int calls = 0;
    int rc = copyeng_submit(e, &part, 1, done_cb, &calls, NULL);
    while (rc == 0 && calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    return rc;
}

START_TEST(prefault_maps_the_pages_held_and_leaves_holes_and_bytes_alone)
{
    const uint64_t len = 64 * MIB, filled = 48 * MIB, pages = filled / PAGE;
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 2);
    int fd = memfd_filled(len, filled);
    /* the control: a fresh writable mapping takes a fault per page written */
    uint8_t *c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(c, MAP_FAILED);
    long ctl = touch_faults(c, filled, true);
    ck_assert_msg(ctl >= (long)pages / 2, "control: %ld faults for %llu pages", ctl,
                  (unsigned long long)pages);
    munmap(c, len);
    bool has_populate = madvise(NULL, 0, 23 /* MADV_POPULATE_WRITE */) == 0 || errno != EINVAL;
    for (int write = 0; write < 2; write++) {
        uint8_t *p = mmap(NULL, len, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
        ck_assert_ptr_ne(p, MAP_FAILED);
        struct copy_mem m = {.n = 1, .base = {p}, .size = {len}};
        ck_assert_int_eq(prefault(&loop, e, &m, write), 0);
        long f = touch_faults(p, filled, write && has_populate);
        ck_assert_msg(f <= (long)pages / 64, "%s prefault: %ld faults touching %llu pages after it",
                      write ? "write" : "read", f, (unsigned long long)pages);
        unsigned char vec[(64 - 48) * MIB / PAGE];
        ck_assert_int_eq(mincore(p + filled, len - filled, vec), 0);
        for (size_t i = 0; i < sizeof vec; i++)
            ck_assert_msg(!(vec[i] & 1), "hole page %zu was allocated by the prefault", i);
        for (uint64_t i = 0; i < filled; i += 8) {
            uint64_t v = i * 0x9e3779b97f4a7c15ull, got;
            memcpy(&got, p + i, 8);
            ck_assert_msg(got == v, "byte %llu changed", (unsigned long long)i);
        }
        munmap(p, len);
    }
    close(fd);
    teardown(&loop, e);
}
END_TEST

/* The owner lets its mapping go and cancels while the prefault runs: no callback, the unmap
 * waits for the running piece, nothing stays pinned. */
START_TEST(prefault_cancelled_while_it_runs_calls_nothing_and_unmaps_after_its_piece)
{
    const uint64_t len = 256 * MIB;
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1);
    int fd = memfd_filled(len, len);
    uint8_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    struct copy_mem m = {.n = 1, .base = {p}, .size = {len}};
    struct copy_op op = {.dst_pool = 0, .len = len, .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1, .dst = &m};
    int calls = 0;
    struct copyeng_job *j = NULL;
    ck_assert_int_eq(copyeng_submit(e, &part, 1, done_cb, &calls, &j), 0);
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_ge(st.pieces, 64); /* 4 MiB pieces: a cancel waits for one of them */
    ck_assert_int_eq(mempin_unmap(p, len), 1); /* deferred: the job pins it */
    copyeng_cancel(j);
    uint32_t pinned = 1, deferred = 1;
    for (int i = 0; i < 100000 && (pinned || deferred); i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        mempin_counts(&pinned, &deferred);
        if (pinned || deferred)
            usleep(100);
    }
    ck_assert_uint_eq(pinned, 0);
    ck_assert_uint_eq(deferred, 0);
    ck_assert_int_eq(calls, 0);
    copyeng_get_stats(e, &st);
    ck_assert_uint_eq(st.running_jobs, 0);
    ck_assert_uint_eq(st.cancelled, 1);
    close(fd);
    teardown(&loop, e);
}
END_TEST

/* Bad prefault parts are refused with nothing queued. */
START_TEST(prefault_refuses_a_part_without_pools)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1);
    struct copy_op op = {.dst_pool = 0, .len = PAGE, .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, done_cb, NULL, NULL), -EINVAL);
    part.kind = (copyeng_kind_t)(COPYENG_PREFAULT + 1);
    ck_assert_int_eq(copyeng_submit(e, &part, 1, done_cb, NULL, NULL), -EINVAL);
    teardown(&loop, e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("prefault");
    TCase *tc = tcase_create("prefault");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, prefault_maps_the_pages_held_and_leaves_holes_and_bytes_alone);
    tcase_add_test(tc, prefault_cancelled_while_it_runs_calls_nothing_and_unmaps_after_its_piece);
    tcase_add_test(tc, prefault_refuses_a_part_without_pools);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
