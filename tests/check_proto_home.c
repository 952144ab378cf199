/* check_proto_home.c: REGISTER's optional trailing `home` (the instance's home daemon, issue 5):
 * round trip, absent = "" (the frame is byte for byte the old one), the length limit on both
 * sides, a NUL inside refused, bytes after it refused. */
#include <check.h>
#include <string.h>

#include "proto.h"
#include "testutil.h"

static void make(struct proto_msg *m, const char *home)
{
    memset(m, 0, sizeof *m);
    m->type = PROTO_REGISTER;
    m->seq = 7;
    static struct proto_pool pool; /* borrowed by m (encode side: never proto_msg_done) */
    m->u.reg.n_pools = 1;
    m->u.reg.pools = &pool;
    m->u.reg.pools[0] = (struct proto_pool){.kind = POOL_HOST, .device = -1, .bytes = 1 << 20};
    m->u.reg.json = "{\"instance\":\"ctx\"}";
    m->u.reg.json_len = (uint32_t)strlen(m->u.reg.json);
    snprintf(m->u.reg.home, sizeof m->u.reg.home, "%s", home);
}

static int decode(const uint8_t *f, size_t len, struct proto_msg *ret)
{
    char err[256];
    return proto_decode(f, len, NULL, ret, err, sizeof err);
}

static size_t frame_len(const uint8_t *f)
{
    return PROTO_HDR_SIZE +
           ((size_t)f[12] | (size_t)f[13] << 8 | (size_t)f[14] << 16 | (size_t)f[15] << 24);
}

START_TEST(register_home_round_trips)
{
    struct proto_msg m, d;
    make(&m, "10.1.2.3:7070");
    uint8_t *f;
    size_t flen;
    ck_assert_int_eq(proto_encode(&m, NULL, &f, &flen), 0);
    ck_assert_int_eq(decode(f, frame_len(f), &d), 0);
    ck_assert_str_eq(d.u.reg.home, "10.1.2.3:7070");
    ck_assert_str_eq(d.u.reg.json, m.u.reg.json);
    proto_msg_done(&d);
    free(f);
}
END_TEST

START_TEST(register_without_home_is_the_old_frame_and_decodes_empty)
{
    struct proto_msg m, d;
    make(&m, "");
    uint8_t *f, *g;
    size_t flen, glen;
    ck_assert_int_eq(proto_encode(&m, NULL, &f, &flen), 0);
    make(&m, "h:1");
    ck_assert_int_eq(proto_encode(&m, NULL, &g, &glen), 0);
    ck_assert_uint_eq(frame_len(g), frame_len(f) + 2 + 3); /* u16 length + "h:1" */
    ck_assert_uint_eq(flen, frame_len(f));
    ck_assert_uint_eq(glen, frame_len(g));
    ck_assert_int_eq(memcmp(f + PROTO_HDR_SIZE, g + PROTO_HDR_SIZE, frame_len(f) - PROTO_HDR_SIZE),
                     0);
    ck_assert_int_eq(decode(f, frame_len(f), &d), 0);
    ck_assert_str_eq(d.u.reg.home, "");
    proto_msg_done(&d);
    free(f);
    free(g);
}
END_TEST

START_TEST(register_home_over_the_limit_is_refused)
{
    struct proto_msg m;
    make(&m, "");
    memset(m.u.reg.home, 'a', PROTO_HOME_MAX);
    m.u.reg.home[PROTO_HOME_MAX] = 0; /* exactly the limit: fine */
    uint8_t *f;
    size_t flen;
    ck_assert_int_eq(proto_encode(&m, NULL, &f, &flen), 0);
    /* grow the string on the wire by one byte: the decoder refuses it */
    size_t len = frame_len(f);
    uint8_t *g = malloc(len + 1);
    memcpy(g, f, len);
    g[len] = 'a';
    size_t hl = len - PROTO_HDR_SIZE + 1;
    g[12] = (uint8_t)hl, g[13] = (uint8_t)(hl >> 8), g[14] = (uint8_t)(hl >> 16), g[15] = 0;
    size_t at = len - PROTO_HOME_MAX - 2; /* the u16 length of home */
    g[at] = (uint8_t)(PROTO_HOME_MAX + 1), g[at + 1] = (uint8_t)((PROTO_HOME_MAX + 1) >> 8);
    struct proto_msg d;
    ck_assert_int_lt(decode(g, len + 1, &d), 0);
    free(f);
    free(g);
}
END_TEST

START_TEST(register_home_present_but_empty_is_refused)
{
    struct proto_msg m, d;
    make(&m, "");
    uint8_t *f;
    size_t flen;
    ck_assert_int_eq(proto_encode(&m, NULL, &f, &flen), 0);
    uint8_t *g = calloc(1, flen + 2); /* + u16 0: an empty home on the wire */
    memcpy(g, f, flen);
    size_t hl = flen - PROTO_HDR_SIZE + 2;
    g[12] = (uint8_t)hl, g[13] = (uint8_t)(hl >> 8), g[14] = (uint8_t)(hl >> 16), g[15] = 0;
    ck_assert_int_lt(decode(g, flen + 2, &d), 0); /* else it would re-encode differently */
    free(f);
    free(g);
}
END_TEST

START_TEST(register_home_with_a_nul_or_trailing_bytes_is_refused)
{
    struct proto_msg m, d;
    make(&m, "h:12");
    uint8_t *f;
    size_t flen;
    ck_assert_int_eq(proto_encode(&m, NULL, &f, &flen), 0);
    size_t len = frame_len(f);
    f[len - 2] = 0; /* "h:\0" + "2" */
    ck_assert_int_lt(decode(f, len, &d), 0);
    f[len - 2] = '1';
    uint8_t *g = malloc(len + 1);
    memcpy(g, f, len);
    g[len] = 'x';
    size_t hl = len - PROTO_HDR_SIZE + 1;
    g[12] = (uint8_t)hl, g[13] = (uint8_t)(hl >> 8), g[14] = (uint8_t)(hl >> 16), g[15] = 0;
    ck_assert_int_lt(decode(g, len + 1, &d), 0);
    ck_assert_int_eq(decode(f, len, &d), 0);
    ck_assert_str_eq(d.u.reg.home, "h:12");
    proto_msg_done(&d);
    free(f);
    free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proto_home");
    TCase *tc = tcase_create("register_home");
    tcase_add_test(tc, register_home_round_trips);
    tcase_add_test(tc, register_without_home_is_the_old_frame_and_decodes_empty);
    tcase_add_test(tc, register_home_over_the_limit_is_refused);
    tcase_add_test(tc, register_home_present_but_empty_is_refused);
    tcase_add_test(tc, register_home_with_a_nul_or_trailing_bytes_is_refused);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
