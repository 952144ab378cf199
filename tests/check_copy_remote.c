/* check_copy_remote.c: a gather into another process (copy_remote.h, the bounce path across
 * network namespaces): a forked child's buffer, written with process_vm_writev from our pools,
 * holds exactly copy_gather's bytes, sub-ranges and more runs than one call takes included;
 * an address the child has not mapped is -EFAULT and a process that exited -ESRCH; through the
 * copy engine (COPYENG_GATHER with buf_pid) on real threads the same bytes land, and a job
 * whose remote writes fail reports the error to its callback. */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <uv.h>

#include "copy_remote.h"
#include "copyeng.h"
#include "mempin.h"
#include "testutil.h"

#define POOL (4u << 20)
#define EXT_MAX (2u << 20)

/* Two pools of random bytes; blocks of odd lengths taken in a permuted, strided order, with
 * more runs than one process_vm_writev call takes (1024). */
struct prog {
    struct copy_mem src;
    struct copy_op ops[1400];
    uint32_t n;
    uint64_t bytes;
};

static void prog_make(struct prog *p)
{
    memset(p, 0, sizeof *p);
    p->src.n = 2;
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 2; i++) {
        p->src.base[i] = mmap(NULL, POOL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);
        ck_assert_ptr_ne(p->src.base[i], MAP_FAILED);
        p->src.size[i] = POOL;
        for (uint64_t k = 0; k < POOL; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            p->src.base[i][k] = (uint8_t)s;
        }
    }
    for (uint32_t i = 0; i < 1400; i++) {
        struct copy_op *o = &p->ops[p->n++];
        o->src_pool = i % 2;
        o->src_off = (uint64_t)((i * 7919u) % 1300u) * 2048u;
        o->len = 701 + i % 5;
        o->count = 2;
        o->src_stride = 1024; /* two runs per op with a gap: 2800 iovecs, three calls */
        o->ext_off = p->bytes;
        p->bytes += o->len * o->count;
    }
    ck_assert_uint_le(p->bytes, EXT_MAX);
    ck_assert_int_eq(copy_check(p->ops, p->n, &p->src, 's'), 0);
}

static void prog_free(struct prog *p)
{
    for (int i = 0; i < 2; i++)
        munmap(p->src.base[i], POOL);
}

/* A child holding `buf` (the same address as ours: mapped before the fork), zeroed. It waits
 * for one byte on go, then writes buf's EXT_MAX bytes to back and exits. */
struct child {
    pid_t pid;
    int go, back;
};

static uint8_t *child_buf;

static struct child child_start(void)
{
    int a[2], b[2];
    ck_assert_int_eq(pipe(a), 0);
    ck_assert_int_eq(pipe(b), 0);
    memset(child_buf, 0, EXT_MAX);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char c;
        if (read(a[0], &c, 1) != 1)
            _exit(1);
        for (size_t off = 0; off < EXT_MAX;) {
            ssize_t n = write(b[1], child_buf + off, EXT_MAX - off);
            if (n <= 0)
                _exit(2);
            off += (size_t)n;
        }
        _exit(0);
    }
    close(a[0]);
    close(b[1]);
    return (struct child){pid, a[1], b[0]};
}

/* Lets the child go and reads back its buffer into out; reaps it. */
static void child_collect(struct child *c, uint8_t *out)
{
    ck_assert_int_eq(write(c->go, "g", 1), 1);
    for (size_t off = 0; off < EXT_MAX;) {
        ssize_t n = read(c->back, out + off, EXT_MAX - off);
        ck_assert_int_gt(n, 0);
        off += (size_t)n;
    }
    int st;
    ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(c->go);
    close(c->back);
}

static uint8_t *map_buf(void)
{
    uint8_t *b = mmap(NULL, EXT_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(b, MAP_FAILED);
    return b;
}

/* The program, the child's buffer, the bytes a local gather gives (want) and a read-back. */
struct fix {
    struct prog p;
    uint8_t *want, *got;
};

static void fix_make(struct fix *f)
{
    prog_make(&f->p);
    child_buf = map_buf();
    f->want = calloc(1, EXT_MAX);
    f->got = malloc(EXT_MAX);
    copy_gather(f->p.ops, f->p.n, &f->p.src, 0, f->p.bytes, f->want);
}

static void fix_free(struct fix *f)
{
    free(f->want);
    free(f->got);
    munmap(child_buf, EXT_MAX);
    prog_free(&f->p);
}

START_TEST(a_remote_gather_writes_exactly_the_gathered_bytes_into_the_other_process)
{
    static struct fix f;
    fix_make(&f);
    struct prog p = f.p;
    uint8_t *want = f.want, *got = f.got;
    struct child c = child_start();
    uint64_t cut = p.bytes / 3 + 5; /* two sub-ranges, cut inside a run */
    uint64_t rb = (uint64_t)(uintptr_t)child_buf;
    ck_assert_int_eq(copy_gather_remote(p.ops, p.n, &p.src, 0, cut, (uint32_t)c.pid, rb), 0);
    ck_assert_int_eq(copy_gather_remote(p.ops, p.n, &p.src, cut, p.bytes, (uint32_t)c.pid, rb + cut),
                     0);
    child_collect(&c, got);
    ck_assert(memcmp(want, got, EXT_MAX) == 0);
    for (uint64_t i = 0; i < EXT_MAX; i++) /* nothing of ours changed either */
        ck_assert_uint_eq(child_buf[i], 0);
    /* the child is gone: its pid names no process */
    ck_assert_int_eq(copy_gather_remote(p.ops, p.n, &p.src, 0, p.bytes, (uint32_t)c.pid, rb),
                     -ESRCH);
    /* an address it never mapped */
    struct child d = child_start();
    ck_assert_int_eq(copy_gather_remote(p.ops, p.n, &p.src, 0, p.bytes, (uint32_t)d.pid, 4096),
                     -EFAULT);
    child_collect(&d, got);
    fix_free(&f);
}
END_TEST

struct rec {
    int calls, status;
};

static void on_done(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct rec *r = user;
    r->calls++;
    r->status = d->status;
}

START_TEST(the_copy_engine_runs_remote_gathers_on_its_threads_and_reports_their_errors)
{
    static struct fix f;
    fix_make(&f);
    struct prog p = f.p;
    uint8_t *want = f.want, *got = f.got;
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct copyeng_params cp = {.loop = &loop, .threads = 3};
    struct copyeng *e = NULL;
    ck_assert_int_eq(copyeng_new(&cp, &e), 0);
    struct child c = child_start();
    struct copyeng_part part = {.kind = COPYENG_GATHER, .ops = p.ops, .n_ops = p.n, .src = &p.src,
                                .buf = child_buf, .buf_pid = (uint32_t)c.pid};
    struct rec r = {0};
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, NULL), 0);
    while (r.calls < 1)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(r.status, 0);
    struct copyeng_stats st;
    copyeng_get_stats(e, &st);
    ck_assert_uint_ge(st.pieces, 3); /* spread over the threads */
    child_collect(&c, got);
    ck_assert(memcmp(want, got, EXT_MAX) == 0);
    part.buf = (uint8_t *)(uintptr_t)4096; /* not mapped in the child */
    struct child d = child_start();
    part.buf_pid = (uint32_t)d.pid;
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, NULL), 0);
    while (r.calls < 2)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(r.status, -EFAULT);
    child_collect(&d, got);
    part.buf = child_buf; /* a process that exited: every piece fails, the callback runs once */
    ck_assert_int_eq(copyeng_submit(e, &part, 1, on_done, &r, NULL), 0);
    while (r.calls < 3)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(r.status, -ESRCH);
    ck_assert_ptr_null(copyeng_free(e));
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_int_eq(r.calls, 3);
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    ck_assert_uint_eq(pinned, 0);
    fix_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("copy_remote");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_remote_gather_writes_exactly_the_gathered_bytes_into_the_other_process);
    tcase_add_test(tc, the_copy_engine_runs_remote_gathers_on_its_threads_and_reports_their_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
