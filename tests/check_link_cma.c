/* check_link_cma.c: the fragment path's writes into a peer's memory over cma (link_peer_cma,
 * link_cma_write; docs/UCX.md "Fragment writes into the generation pools over cma"), between two
 * real processes: the bytes land bitwise at the addresses the peer named (runs gathered from
 * several local buffers), a range the peer has not mapped completes with -EFAULT and nothing
 * else changes, and a link without a cma lane (tcp only) is never written so. */
#include "linkutil.h"

#include <string.h>

static char dir[64], secret[128];

static void setup(void)
{
    tu_tmpdir(dir, sizeof dir);
    lt_secret(dir, "a", "correct horse battery staple 0123456789", 0600, secret, sizeof secret);
}

static void teardown(void)
{
    unlink(secret);
    rmdir(dir);
}

static void quit_server(struct lt *t)
{
    ck_assert_int_eq(link_send(t->peer, LT_QUIT, NULL, 0, NULL, 0, NULL, NULL), 0);
    lt_run_until(t, &t->downs, 1, 3000);
}

/* The server's registered buffer of len bytes: its address there. */
static uint64_t give_mreg(struct lt *t, size_t len)
{
    struct lt_check c = {.off = len};
    int want = t->msgs + 1;
    ck_assert_int_eq(link_send(t->peer, LT_GIVE_MREG, &c, sizeof c, NULL, 0, NULL, NULL), 0);
    ck_assert(lt_run_until(t, &t->msgs, want, 5000));
    ck_assert_int_eq(t->last_type, LT_MREG);
    uint64_t addr;
    memcpy(&addr, t->last_hdr, sizeof addr);
    return addr;
}

/* A server process over tls (NULL: UCX's choice) and our link connected to it, READY. */
static pid_t connected(struct lt *t, const char *tls, int *sfd)
{
    struct link_config sc = {.secret_path = secret, .listen_host = "127.0.0.1",
                             .arena_bytes = 1 << 20, .tls = tls};
    struct link_config cc = {.secret_path = secret, .arena_bytes = 1 << 20, .tls = tls};
    uint16_t port;
    pid_t pid = lt_server_start(&sc, 20000, &port, sfd);
    ck_assert_int_eq(lt_open(t, &cc), 0);
    lt_connect(t, port);
    ck_assert(lt_run_until(t, &t->ups, 1, 5000));
    return pid;
}

static int last_status;
static void write_done(void *arg, int status)
{
    struct lt *t = arg;
    last_status = status;
    t->sends_done++;
}

START_TEST(link_cma_write_lands_bitwise_where_the_peer_said)
{
    int sfd;
    struct lt t;
    pid_t pid = connected(&t, NULL, &sfd);
    size_t len = 3 << 20;
    uint64_t addr = give_mreg(&t, len);
    int rc = -ENOTSUP;
    for (int i = 0; i < 200 && rc == -ENOTSUP; i++) { /* the lanes settle after READY */
        int never = 0;
        if ((rc = link_peer_cma(t.peer, addr, NULL)) == -ENOTSUP)
            lt_run_until(&t, &never, 1, 10);
    }
    ck_assert_int_eq(rc, 0);
    /* the pattern of [0, len) from three local pieces, written as two remote runs per piece */
    uint8_t *src = malloc(len);
    lt_fill(src, len, 123);
    uint8_t *a = malloc(len / 3), *b = malloc(len / 3), *c = malloc(len / 3);
    memcpy(a, src, len / 3);
    memcpy(b, src + len / 3, len / 3);
    memcpy(c, src + 2 * len / 3, len / 3);
    size_t h = len / 6;
    struct iovec l[6] = {{a, h}, {a + h, h}, {b, h}, {b + h, h}, {c, h}, {c + h, h}};
    struct iovec r[6];
    for (int i = 0; i < 6; i++)
        r[i] = (struct iovec){(void *)(uintptr_t)(addr + (uint64_t)i * h), h};
    ck_assert_int_eq(link_cma_write(t.peer, l, r, 0, write_done, &t), -EINVAL);
    r[5].iov_len = h - 1; /* lengths must pair */
    ck_assert_int_eq(link_cma_write(t.peer, l, r, 6, write_done, &t), -EINVAL);
    r[5].iov_len = h;
    last_status = 1;
    ck_assert_int_eq(link_cma_write(t.peer, l, r, 6, write_done, &t), 0);
    ck_assert_int_eq(last_status, 1); /* reported from the loop, not inside the call */
    ck_assert(lt_run_until(&t, &t.sends_done, 1, 5000));
    ck_assert_int_eq(last_status, 0);
    /* a range the peer has not mapped: -EFAULT, and the buffer keeps what landed */
    uint8_t junk[64] = {0};
    struct iovec jl = {junk, sizeof junk}, bad = {(void *)(uintptr_t)4096, sizeof junk};
    ck_assert_int_eq(link_cma_write(t.peer, &jl, &bad, 1, write_done, &t), 0);
    ck_assert(lt_run_until(&t, &t.sends_done, 2, 5000));
    ck_assert_int_eq(last_status, -EFAULT);
    struct lt_check v = {.len = len, .seed = 123};
    int want = t.msgs + 1;
    ck_assert_int_eq(link_send(t.peer, LT_CHECK_MREG, &v, sizeof v, NULL, 0, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.msgs, want, 5000));
    ck_assert_int_eq(t.results_ok, 1);
    struct link_stats st;
    link_get_stats(t.link, &st);
    ck_assert_uint_eq(st.cma_writes, 2);
    free(src);
    free(a);
    free(b);
    free(c);
    quit_server(&t);
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    ck_assert_int_eq(lt_close(&t), 0);
}
END_TEST

START_TEST(link_without_a_cma_lane_is_not_written_over_cma)
{
    int sfd;
    struct lt t;
    pid_t pid = connected(&t, "tcp", &sfd);
    uint64_t addr = give_mreg(&t, 4096);
    int never = 0;
    lt_run_until(&t, &never, 1, 50); /* let the lanes settle */
    ck_assert_int_eq(link_peer_cma(t.peer, addr, NULL), -ENOTSUP);
    uint8_t x = 1;
    struct iovec l = {&x, 1}, r = {(void *)(uintptr_t)addr, 1};
    ck_assert_int_eq(link_cma_write(t.peer, &l, &r, 1, write_done, &t), -ENOTCONN);
    quit_server(&t);
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    ck_assert_int_eq(lt_close(&t), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("link_cma");
    TCase *tc = tcase_create("cma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, link_cma_write_lands_bitwise_where_the_peer_said);
    tcase_add_test(tc, link_without_a_cma_lane_is_not_written_over_cma);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
