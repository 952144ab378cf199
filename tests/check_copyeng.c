/* check_copyeng.c: the copy engine with real threads and a real uv loop: bytes equal the
 * synchronous executor's, large programs split across threads, completions on the loop,
 * cancel, pins that defer an unmap until the copy ended, teardown with work queued, node
 * queues with stealing, the NUMA helpers, and COPYENG_PREFAULT on real memfd mappings (the
 * pages the owner held get mapped: touching them takes no fault, counted with getrusage; a
 * hole stays a hole; bytes untouched; a cancelled prefault calls nothing back and its pins
 * defer the owner's unmap until its running piece ended). */
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <uv.h>

#include "copyeng.h"
#include "hostnuma.h"
#include "mempin.h"
#include "testutil.h"

#define MIB (1024ull * 1024ull)
#define PAGE 4096ull

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* Two source and two destination pools of `pool` bytes (mmap, so the pin test can unmap
 * them); blocks of `blk` bytes permuted from source to destination, some ops strided. */
struct big {
    struct copy_mem src, dst;
    struct copy_op ops[512];
    uint32_t n;
    uint64_t bytes, pool;
};

static uint8_t *map(uint64_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    return p;
}

static void big_make(struct big *b, uint64_t pool, uint64_t blk, uint64_t seed)
{
    memset(b, 0, sizeof *b);
    b->pool = pool;
    b->src.n = b->dst.n = 2;
    uint64_t s = seed * 2654435761u + 7;
    for (int i = 0; i < 2; i++) {
        b->src.base[i] = map(pool);
        b->dst.base[i] = map(pool);
        b->src.size[i] = b->dst.size[i] = pool;
        for (uint64_t k = 0; k < pool / 8; k++) {
            uint64_t v = rnd(&s);
            memcpy(b->src.base[i] + k * 8, &v, 8);
        }
    }
    uint32_t per = (uint32_t)(pool / blk);
    for (uint32_t i = 0; i < 2 * per && b->n < 512; i += 2) {
        struct copy_op *o = &b->ops[b->n++];
        uint32_t from = (uint32_t)(rnd(&s) % (per - 1) + (rnd(&s) % 2) * per);
        o->src_pool = from / per;
        o->src_off = (from % per) * blk;
        o->dst_pool = i / per;
        o->dst_off = (i % per) * blk;
        o->len = blk / 2 + (rnd(&s) % 2) * 13; /* odd lengths cut pieces mid-run */
        o->count = 2;
        o->src_stride = (int64_t)(blk / 2); /* overlapping source runs: reads may overlap */
        o->dst_stride = (int64_t)blk;
        o->ext_off = b->bytes;
        b->bytes += o->len * o->count;
    }
    ck_assert_int_eq(copy_check(b->ops, b->n, &b->src, 's'), 0);
    ck_assert_int_eq(copy_check(b->ops, b->n, &b->dst, 'd'), 0);
}

static void big_free(struct big *b)
{
    for (int i = 0; i < 2; i++) {
        if (b->src.base[i])
            munmap(b->src.base[i], b->pool);
        if (b->dst.base[i])
            munmap(b->dst.base[i], b->pool);
    }
}

struct rec {
    int calls, status;
    uint64_t bytes, busy_ns;
    void *user;
};

static void on_done(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct rec *r = user;
    r->calls++;
    r->status = d->status;
    r->bytes = d->bytes;
    r->busy_ns = d->busy_ns;
    ck_assert_uint_le(d->busy_ns, d->wall_ns * 256); /* at most every thread all along */
}

static struct copyeng *mk(uv_loop_t *loop, uint32_t threads, uint32_t nodes)
{
    ck_assert_int_eq(uv_loop_init(loop), 0);
    struct copyeng_params p = {.loop = loop, .threads = threads, .nodes = nodes};
    struct copyeng *e = NULL;
    ck_assert_int_eq(copyeng_new(&p, &e), 0);
    return e;
}

static void run_until(uv_loop_t *loop, const int *calls, int want)
{
    while (*calls < want)
        uv_run(loop, UV_RUN_ONCE);
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

START_TEST(copyeng_direct_equals_the_synchronous_copy_and_splits_across_threads)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 4, 0);
    struct big a, b;
    big_make(&a, 8 * MIB, 64 * 1024, 1);
    big_make(&b, 8 * MIB, 64 * 1024, 1);
    copy_direct(a.ops, a.n, &a.src, &a.dst);
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = b.ops, .n_ops = b.n,
                                .src = &b.src, .dst = &b.dst};
    struct rec r = {0};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, NULL), 0);
    ck_assert_int_eq(r.calls, 0); /* never inline */
    run_until(&loop, &r.calls, 1);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.bytes, b.bytes);
    for (int i = 0; i < 2; i++)
        ck_assert(memcmp(a.dst.base[i], b.dst.base[i], a.pool) == 0);
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_eq(st.threads, 4);
    ck_assert_uint_eq(st.jobs, 1);
    ck_assert_uint_ge(st.pieces, 4); /* one piece per thread at least */
    ck_assert_uint_eq(st.running_jobs, 0);
    ck_assert_uint_eq(st.queued_pieces, 0);
    big_free(&a);
    big_free(&b);
    teardown(&loop, e);
}
END_TEST

START_TEST(copyeng_gather_then_scatter_of_subranges_round_trips)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 3, 0);
    struct big a;
    big_make(&a, 4 * MIB, 32 * 1024, 2);
    uint8_t *want = malloc(a.bytes), *got = calloc(1, a.bytes);
    copy_gather(a.ops, a.n, &a.src, 0, a.bytes, want);
    uint64_t cut = a.bytes / 3 + 11;
    struct copyeng_part parts[2] = {
        {.kind = COPYENG_GATHER, .ops = a.ops, .n_ops = a.n, .src = &a.src, .buf = got, .lo = 0,
         .hi = cut},
        {.kind = COPYENG_GATHER, .ops = a.ops, .n_ops = a.n, .src = &a.src, .buf = got + cut,
         .lo = cut, .hi = 0}, /* hi 0: to the end */
    };
    struct rec r = {0};
    ck_assert_int_eq(copyeng_submit(e, parts, 2, on_done, &r, NULL), 0);
    run_until(&loop, &r.calls, 1);
    ck_assert_uint_eq(r.bytes, a.bytes);
    ck_assert(memcmp(want, got, a.bytes) == 0);
    /* scatter the gathered extent into zeroed destination pools: equals copy_direct's */
    struct big ref;
    big_make(&ref, 4 * MIB, 32 * 1024, 2);
    copy_direct(ref.ops, ref.n, &ref.src, &ref.dst);
    struct copyeng_part sc = {.kind = COPYENG_SCATTER, .ops = a.ops, .n_ops = a.n,
                              .dst = &a.dst, .buf = got};
    ck_assert_int_eq(copyeng_submit(e, &sc, 1, on_done, &r, NULL), 0);
    run_until(&loop, &r.calls, 2);
    for (int i = 0; i < 2; i++)
        ck_assert(memcmp(ref.dst.base[i], a.dst.base[i], a.pool) == 0);
    free(want);
    free(got);
    big_free(&a);
    big_free(&ref);
    teardown(&loop, e);
}
END_TEST

START_TEST(copyeng_many_jobs_in_flight_all_complete_once)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 2, 0);
    struct big a;
    big_make(&a, 1 * MIB, 16 * 1024, 3);
    enum { N = 200 };
    uint8_t *outs[N];
    struct rec r[N];
    memset(r, 0, sizeof r);
    int total = 0;
    for (int i = 0; i < N; i++) {
        outs[i] = malloc(a.bytes);
        uint64_t lo = (uint64_t)i * 97 % a.bytes;
        struct copyeng_part p = {.kind = COPYENG_GATHER, .ops = a.ops, .n_ops = a.n,
                                 .src = &a.src, .buf = outs[i], .lo = lo, .hi = a.bytes};
        ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r[i], NULL), 0);
    }
    struct rec sum = {0};
    (void)sum;
    for (;;) {
        total = 0;
        for (int i = 0; i < N; i++)
            total += r[i].calls;
        if (total == N)
            break;
        uv_run(&loop, UV_RUN_ONCE);
    }
    uint8_t *want = malloc(a.bytes);
    copy_gather(a.ops, a.n, &a.src, 0, a.bytes, want);
    for (int i = 0; i < N; i++) {
        uint64_t lo = (uint64_t)i * 97 % a.bytes;
        ck_assert_int_eq(r[i].calls, 1);
        ck_assert_uint_eq(r[i].bytes, a.bytes - lo);
        ck_assert(memcmp(outs[i], want + lo, a.bytes - lo) == 0);
        free(outs[i]);
    }
    free(want);
    big_free(&a);
    teardown(&loop, e);
}
END_TEST

/* The owner of a mapping lets it go while a copy on it is in flight (a worker disconnecting):
 * the unmap waits for the job's end, then happens. */
START_TEST(copyeng_pins_defer_an_unmap_until_the_copy_ended)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 2, 0);
    struct big a;
    big_make(&a, 8 * MIB, 64 * 1024, 4);
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = a.ops, .n_ops = a.n,
                                .src = &a.src, .dst = &a.dst};
    struct rec r = {0};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, NULL), 0);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 4);
    for (int i = 0; i < 2; i++) { /* as registry_unmap does */
        ck_assert_int_eq(mempin_unmap(a.src.base[i], a.pool, NULL), 1);
        ck_assert_int_eq(mempin_unmap(a.dst.base[i], a.pool, NULL), 1);
    }
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(deferred, 4);
    unsigned char vec[1];
    ck_assert_int_eq(mincore(a.src.base[0], 4096, vec), 0); /* still mapped */
    run_until(&loop, &r.calls, 1);
    ck_assert_int_eq(r.status, 0);
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    ck_assert_uint_eq(deferred, 0);
    errno = 0;
    ck_assert_int_eq(mincore(a.src.base[0], 4096, vec), -1); /* unmapped at the job's end */
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(mempin_unmap(map(4096), 4096, NULL), 0); /* unpinned: at once */
    teardown(&loop, e);
}
END_TEST

/* A cancelled job never calls back; it is freed (pins dropped) when its running pieces end. */
START_TEST(copyeng_cancel_skips_the_callback_and_releases_the_pins)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1, 0);
    struct big a;
    big_make(&a, 16 * MIB, 256 * 1024, 5);
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = a.ops, .n_ops = a.n,
                                .src = &a.src, .dst = &a.dst};
    struct rec r = {0}, r2 = {0};
    struct copyeng_job *j = NULL;
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, &j), 0);
    ck_assert_ptr_nonnull(j);
    copyeng_cancel(j);
    copyeng_cancel(j); /* idempotent */
    struct copyeng_part small = {.kind = COPYENG_DIRECT, .ops = a.ops, .n_ops = 1,
                                 .src = &a.src, .dst = &a.dst};
    ck_assert_int_eq(copyeng_submit(e, &small, 1, on_done, &r2, NULL), 0);
    run_until(&loop, &r2.calls, 1); /* FIFO: the cancelled job's pieces were passed first */
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_eq(st.running_jobs, 0);
    ck_assert_uint_eq(st.cancelled, 1);
    ck_assert_int_eq(r.calls, 0);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    big_free(&a);
    teardown(&loop, e);
}
END_TEST

/* Freeing the engine with work queued: every job not cancelled gets its callback once
 * (0 when it ran, -ECANCELED when a piece was skipped); the loop then closes clean. */
START_TEST(copyeng_free_with_work_queued_calls_back_every_job_once)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1, 0);
    struct big a;
    big_make(&a, 16 * MIB, 256 * 1024, 6);
    enum { N = 8 };
    struct rec r[N];
    memset(r, 0, sizeof r);
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = a.ops, .n_ops = a.n,
                                .src = &a.src, .dst = &a.dst};
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r[i], NULL), 0);
    ck_assert_ptr_null(copyeng_free(e));
    int cancelled = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(r[i].calls, 1);
        ck_assert(r[i].status == 0 || r[i].status == -ECANCELED);
        cancelled += r[i].status == -ECANCELED;
    }
    ck_assert_int_ge(cancelled, 1); /* one thread cannot have run 8 x 16 MiB before the stop */
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    big_free(&a);
}
END_TEST

/* Quiesce (engine teardown before the arena goes): every queued job runs to the end and its
 * callback runs inside the call, status 0; the engine stays usable. */
START_TEST(copyeng_quiesce_waits_for_every_job_and_runs_their_callbacks)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1, 0);
    struct big a;
    big_make(&a, 16 * MIB, 256 * 1024, 7);
    enum { N = 4 };
    struct rec r[N];
    memset(r, 0, sizeof r);
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = a.ops, .n_ops = a.n,
                                .src = &a.src, .dst = &a.dst};
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r[i], NULL), 0);
    copyeng_quiesce(e);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(r[i].calls, 1);
        ck_assert_int_eq(r[i].status, 0);
    }
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_eq(st.running_jobs, 0);
    ck_assert_uint_eq(st.queued_pieces, 0);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    struct rec again = {0};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &again, NULL), 0);
    while (again.calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(again.status, 0);
    big_free(&a);
    teardown(&loop, e);
}
END_TEST

START_TEST(copyeng_node_queues_share_work_by_stealing)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 1, 3); /* three queues, one thread: it must steal */
    struct big a, b;
    big_make(&a, 4 * MIB, 32 * 1024, 7);
    big_make(&b, 4 * MIB, 32 * 1024, 7);
    copy_direct(a.ops, a.n, &a.src, &a.dst);
    struct rec r = {0};
    for (uint32_t k = 0; k < 3; k++) {
        struct copyeng_part p = {.kind = COPYENG_DIRECT, .ops = b.ops, .n_ops = b.n,
                                 .src = &b.src, .dst = &b.dst};
        ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r, NULL), 0);
    }
    run_until(&loop, &r.calls, 3);
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_eq(st.nodes, 3);
    ck_assert_uint_ge(st.stolen, 1);
    for (int i = 0; i < 2; i++)
        ck_assert(memcmp(a.dst.base[i], b.dst.base[i], a.pool) == 0);
    big_free(&a);
    big_free(&b);
    teardown(&loop, e);
}
END_TEST

START_TEST(copyeng_refuses_bad_parts_and_completes_empty_jobs_later)
{
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 2, 0);
    struct big a;
    big_make(&a, 1 * MIB, 16 * 1024, 8);
    struct rec r = {0};
    struct copyeng_part p = {.kind = COPYENG_GATHER, .ops = a.ops, .n_ops = a.n, .src = &a.src};
    ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r, NULL), -EINVAL); /* no buffer */
    p.buf = malloc(a.bytes);
    p.hi = a.bytes + 1;
    ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r, NULL), -EINVAL); /* past the extent */
    p.hi = 0;
    p.kind = (copyeng_kind_t)9;
    ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r, NULL), -EINVAL);
    p.kind = COPYENG_DIRECT; /* no destination */
    ck_assert_int_eq(copyeng_submit(e, &p, 1, on_done, &r, NULL), -EINVAL);
    ck_assert_int_eq(copyeng_submit(e, &p, 0, on_done, &r, NULL), -EINVAL);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0); /* a refused submit pins nothing */
    struct copyeng_part empty = {.kind = COPYENG_DIRECT, .src = &a.src, .dst = &a.dst};
    ck_assert_int_eq(copyeng_submit(e, &empty, 1, on_done, &r, NULL), 0);
    ck_assert_int_eq(r.calls, 0);
    run_until(&loop, &r.calls, 1);
    ck_assert_uint_eq(r.bytes, 0);
    json_t *j = copyeng_stats_json(e);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "threads")), 2);
    json_decref(j);
    free(p.buf);
    big_free(&a);
    teardown(&loop, e);
    struct copyeng_params bad = {.loop = NULL};
    struct copyeng *x = NULL;
    ck_assert_int_eq(copyeng_new(&bad, &x), -EINVAL);
    ck_assert_uint_ge(copyeng_default_threads(), 1);
}
END_TEST

START_TEST(hostnuma_parses_cpu_lists_and_reads_this_machine)
{
    cpu_set_t s;
    ck_assert_int_eq(hostnuma_parse_cpulist("0-3,8,10-11\n", &s), 0);
    ck_assert_int_eq(CPU_COUNT(&s), 7);
    ck_assert(CPU_ISSET(8, &s) && CPU_ISSET(11, &s) && !CPU_ISSET(9, &s));
    ck_assert_int_eq(hostnuma_parse_cpulist("", &s), 0);
    ck_assert_int_eq(CPU_COUNT(&s), 0);
    ck_assert_int_eq(hostnuma_parse_cpulist("3-1", &s), -EINVAL);
    ck_assert_int_eq(hostnuma_parse_cpulist("a", &s), -EINVAL);
    ck_assert_int_eq(hostnuma_parse_cpulist("1;2", &s), -EINVAL);
    ck_assert_int_eq(hostnuma_parse_cpulist("99999999", &s), -EINVAL);
    struct hostnuma_node n[HOSTNUMA_MAX_NODES];
    uint32_t k = hostnuma_nodes(n, HOSTNUMA_MAX_NODES);
    for (uint32_t i = 0; i < k; i++)
        ck_assert_uint_ge(n[i].n_cpus, 1);
    uint8_t *p = map(4096);
    p[0] = 1; /* faulted in: a node where sysfs knows one */
    int node = hostnuma_node_of(p);
    ck_assert(node >= -1);
    if (k > 0 && node >= 0) {
        bool found = false;
        for (uint32_t i = 0; i < k; i++)
            found |= n[i].id == node;
        ck_assert(found);
    }
    munmap(p, 4096);
}
END_TEST

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

/* The faults touching [0, filled) costs on a mapping the kernel populated itself (MAP_POPULATE):
 * none in a plain build; under a sanitizer, the faults of its shadow memory, which the prefault
 * cannot and need not remove (TSan: about two per page touched). */
static long shadow_faults(int fd, uint64_t filled, bool writable, bool write)
{
    /* only the filled part: populating the holes would allocate them */
    uint8_t *q = mmap(NULL, filled, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                      MAP_SHARED | MAP_POPULATE, fd, 0);
    ck_assert_ptr_ne(q, MAP_FAILED);
    long f = touch_faults(q, filled, write);
    munmap(q, filled);
    return f;
}

static void prefault_done(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    ck_assert_int_eq(d->status, 0);
    ++*(int *)user;
}

/* One prefault job over the whole of mem's pool 0 (as wprefault.c submits). */
static int prefault(uv_loop_t *loop, struct copyeng *e, const struct copy_mem *m, bool write)
{
    struct copy_op op = {.src_pool = 0, .len = m->size[0], .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1, .src = m,
                                .write = write};
    int calls = 0;
    int rc = copyeng_submit(e, &part, 1, prefault_done, &calls, NULL);
    while (rc == 0 && calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    return rc;
}

START_TEST(prefault_maps_the_pages_held_and_leaves_holes_and_bytes_alone)
{
    const uint64_t len = 64 * MIB, filled = 48 * MIB, pages = filled / PAGE;
    uv_loop_t loop;
    struct copyeng *e = mk(&loop, 2, 0);
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
        long base = shadow_faults(fd, filled, write, write && has_populate);
        ck_assert_msg(f - base <= (long)pages / 64,
                      "%s prefault: %ld faults touching %llu pages after it (%ld on a mapping "
                      "the kernel populated)", write ? "write" : "read", f,
                      (unsigned long long)pages, base);
        unsigned char vec[(64 - 48) * MIB / PAGE];
        ck_assert_int_eq(mincore(p + filled, len - filled, vec), 0);
        for (size_t i = 0; i < sizeof vec; i++)
            ck_assert_msg(!(vec[i] & 1), "hole page %zu was allocated by the prefault", i);
        /* one assertion after the scan: Check records every passing one (a write each) */
        uint64_t changed = filled;
        for (uint64_t i = 0; i < filled && changed == filled; i += 8) {
            uint64_t v = i * 0x9e3779b97f4a7c15ull, got;
            memcpy(&got, p + i, 8);
            if (got != v)
                changed = i;
        }
        ck_assert_msg(changed == filled, "byte %llu changed", (unsigned long long)changed);
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
    struct copyeng *e = mk(&loop, 1, 0);
    int fd = memfd_filled(len, len);
    uint8_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    struct copy_mem m = {.n = 1, .base = {p}, .size = {len}};
    struct copy_op op = {.src_pool = 0, .len = len, .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1, .src = &m};
    int calls = 0;
    struct copyeng_job *j = NULL;
    ck_assert_int_eq(copyeng_submit(e, &part, 1, prefault_done, &calls, &j), 0);
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_ge(st.pieces, 64); /* 4 MiB pieces: a cancel waits for one of them */
    ck_assert_int_eq(mempin_unmap(p, len, NULL), 1); /* deferred: the job pins it */
    copyeng_cancel(j);
    /* the job's last piece wakes the loop (the engine's async), which frees the job and so
     * unpins and unmaps; Check's timeout bounds a job that never ends */
    uint32_t pinned, deferred;
    for (mempin_counts(&pinned, &deferred); pinned || deferred; mempin_counts(&pinned, &deferred))
        uv_run(&loop, UV_RUN_ONCE);
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
    struct copyeng *e = mk(&loop, 1, 0);
    struct copy_op op = {.src_pool = 0, .len = PAGE, .count = 1};
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = &op, .n_ops = 1};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, prefault_done, NULL, NULL), -EINVAL);
    part.kind = (copyeng_kind_t)(COPYENG_PREFAULT + 1);
    ck_assert_int_eq(copyeng_submit(e, &part, 1, prefault_done, NULL, NULL), -EINVAL);
    teardown(&loop, e);
}
END_TEST

static Suite *copyeng_suite(void)
{
    Suite *s = suite_create("copyeng");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, copyeng_direct_equals_the_synchronous_copy_and_splits_across_threads);
    tcase_add_test(tc, copyeng_gather_then_scatter_of_subranges_round_trips);
    tcase_add_test(tc, copyeng_many_jobs_in_flight_all_complete_once);
    tcase_add_test(tc, copyeng_refuses_bad_parts_and_completes_empty_jobs_later);
    suite_add_tcase(s, tc);
    tc = tcase_create("ownership");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, copyeng_pins_defer_an_unmap_until_the_copy_ended);
    tcase_add_test(tc, copyeng_cancel_skips_the_callback_and_releases_the_pins);
    tcase_add_test(tc, copyeng_free_with_work_queued_calls_back_every_job_once);
    tcase_add_test(tc, copyeng_quiesce_waits_for_every_job_and_runs_their_callbacks);
    suite_add_tcase(s, tc);
    tc = tcase_create("numa");
    tcase_add_test(tc, copyeng_node_queues_share_work_by_stealing);
    tcase_add_test(tc, hostnuma_parses_cpu_lists_and_reads_this_machine);
    suite_add_tcase(s, tc);
    tc = tcase_create("prefault");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, prefault_maps_the_pages_held_and_leaves_holes_and_bytes_alone);
    tcase_add_test(tc, prefault_cancelled_while_it_runs_calls_nothing_and_unmaps_after_its_piece);
    tcase_add_test(tc, prefault_refuses_a_part_without_pools);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(copyeng_suite()); }
