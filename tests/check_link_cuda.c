/* check_link_cuda.c: the link's memory types and the per-peer choice of device-to-device chunks
 * (link_cuda.c, issue 30), between two processes on loopback with real UCX. Debian's UCX handles
 * host memory only, so the handshake's side is also driven by cuda_claim_test (a side that offers
 * CUDA as if its UCX handled it); on a CUDA-aware UCX (scripts/build-ucx-cuda) the same cases
 * hold with the real answer. The device arena itself is measured on the GPU machine
 * (bench_link's cuda row, scripts/device-check step ucx-cuda-bench). */
#include "linkutil.h"

#include <jansson.h>
#include <ucp/api/ucp.h>

static char dir[64];
static char secret[128];

static void setup(void)
{
    tu_tmpdir(dir, sizeof(dir));
    lt_secret(dir, "a", "correct horse battery staple 0123456789", 0600, secret, sizeof(secret));
}

static void teardown(void)
{
    unlink(secret);
    rmdir(dir);
}

static struct link_config cfg_side(int server, int claim, int off)
{
    return (struct link_config){.listen_host = server ? "127.0.0.1" : NULL, .secret_path = secret,
                                .arena_bytes = 4 << 20, .handshake_timeout_ms = tu_ms(3000),
                                .cuda_claim_test = claim, .gpu_direct_off = off};
}

/* One handshake between a server and a client configured so; checks both ends' choice. */
static void one(int s_claim, int s_off, int c_claim, int c_off)
{
    struct link_config sc = cfg_side(1, s_claim, s_off), cc = cfg_side(0, c_claim, c_off);
    uint16_t port;
    int sfd;
    pid_t pid = lt_server_start(&sc, 20000, &port, &sfd);
    struct lt t;
    ck_assert_int_eq(lt_open(&t, &cc), 0);
    lt_connect(&t, port);
    ck_assert(lt_run_until(&t, &t.ups, 1, tu_ms(5000)));
    int real = link_cuda(t.link); /* both processes run the same UCX */
    int s_offers = (s_claim || real) && !s_off, c_offers = (c_claim || real) && !c_off;
    const char *why = NULL;
    int direct = link_peer_gpu_direct(t.peer, &why);
    printf("server claim %d off %d, client claim %d off %d (UCX handles CUDA: %d): "
           "gpu_direct %d: %s\n", s_claim, s_off, c_claim, c_off, real, direct, why);
    ck_assert_int_eq(direct, s_offers && c_offers);
    if (c_off)
        ck_assert_ptr_nonnull(strstr(why, "off here"));
    else if (!c_offers)
        ck_assert_ptr_nonnull(strstr(why, "this daemon's UCX handles host memory only"));
    else if (!s_offers)
        ck_assert_ptr_nonnull(strstr(why, "the peer's UCX"));
    else
        ck_assert_ptr_nonnull(strstr(why, "both"));

    json_t *st = json_object();
    ck_assert_int_eq(link_status(t.link, st), 0);
    json_t *ls = json_object_get(st, "link");
    ck_assert(json_is_boolean(json_object_get(ls, "cuda_memory")));
    ck_assert_int_eq(json_is_true(json_object_get(ls, "cuda_memory")), real);
    json_t *p0 = json_array_get(json_object_get(ls, "peers"), 0);
    ck_assert_int_eq(json_is_true(json_object_get(p0, "gpu_direct")), direct);
    ck_assert_str_eq(json_string_value(json_object_get(p0, "gpu_direct_why")), why);
    json_t *cnt = json_object_get(ls, "counters");
    ck_assert_int_eq(json_integer_value(json_object_get(cnt, "peers_gpu_direct")), direct);
    json_decref(st);
    struct link_stats cs;
    link_get_stats(t.link, &cs);
    ck_assert_uint_eq(cs.peers_gpu_direct + cs.peers_host_staged_local + cs.peers_host_staged_peer +
                          cs.peers_host_staged_off, 1);

    ck_assert_int_eq(link_send(t.peer, LT_QUIT, NULL, 0, NULL, 0, lt_send_done, &t), 0);
    lt_run_until(&t, &t.downs, 1, tu_ms(3000));
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    /* the server chose the same, for its own reason */
    ck_assert_uint_eq(ss.peers_gpu_direct, (uint64_t)(s_offers && c_offers));
    ck_assert_uint_eq(ss.peers_host_staged_off, (uint64_t)s_off);
    ck_assert_uint_eq(ss.peers_host_staged_peer, (uint64_t)(s_offers && !c_offers));
    ck_assert_int_eq(lt_close(&t), 0);
}

START_TEST(link_gpu_direct_needs_both_sides_and_is_counted_by_reason)
{
    one(0, 0, 0, 0); /* as the UCX is */
    one(1, 0, 1, 0); /* both offer */
    one(0, 0, 1, 0); /* only the client */
    one(1, 0, 0, 0); /* only the server */
    one(1, 0, 1, 1); /* the client offers nothing: off there */
    one(1, 1, 1, 0); /* the server's off */
}
END_TEST

/* Debian's UCX allocates no device memory: the device arena is refused with -ENOTSUP and the
 * link keeps working (host staging). On a CUDA-aware UCX without a current CUDA context UCX
 * refuses the allocation too (cuMemAlloc needs one): an error, never a crash. */
START_TEST(link_device_arena_is_refused_where_ucx_has_no_cuda)
{
    struct link_config c = cfg_side(0, 1, 0);
    struct lt t;
    ck_assert_int_eq(lt_open(&t, &c), 0);
    void *base = NULL;
    int rc = link_device_arena_map(t.link, 1 << 20, &base);
    size_t len = 1;
    if (!link_cuda(t.link)) {
        ck_assert_int_eq(rc, -ENOTSUP);
        ck_assert_ptr_null(link_device_arena(t.link, &len));
        ck_assert_uint_eq(len, 0);
    } else if (rc == 0) {
        ck_assert_ptr_eq(link_device_arena(t.link, &len), base);
        ck_assert_uint_eq(len, 1 << 20);
        ck_assert_int_eq(link_device_arena_map(t.link, 1 << 20, &base), -EALREADY);
    }
    ck_assert_int_eq(link_device_arena_map(t.link, 0, &base), -EINVAL);
    ck_assert_int_eq(lt_close(&t), 0);
}
END_TEST

static Suite *link_cuda_suite(void)
{
    Suite *s = suite_create("link_cuda");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, link_gpu_direct_needs_both_sides_and_is_counted_by_reason);
    tcase_add_test(tc, link_device_arena_is_refused_where_ucx_has_no_cuda);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(link_cuda_suite());
}
