/* check_fdpass.c: SCM_RIGHTS passing (fdpass) and frame reassembly with fds (frame) over real
 * unix socketpairs: fds arrive usable and close-on-exec, excess fds are closed, never leaked,
 * frames split at any byte reassemble, and a bad header is refused before its body is read;
 * fds the receiver has no room for (RLIMIT_NOFILE) are its own fault: bytes kept, fds marked lost. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "frame.h"
#include "testutil.h"

static int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void pair(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static int memfd_with(const char *text)
{
    int fd = memfd_create("kvf-test", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    return fd;
}

START_TEST(fdpass_memfds_arrive_usable_and_cloexec)
{
    int sv[2];
    pair(sv);
    int fds[3] = {memfd_with("zero"), memfd_with("one"), memfd_with("two")};
    ck_assert_int_eq(fdpass_send(sv[0], "hello", 5, fds, 3, 1000), 0);
    char buf[16];
    int got[FDPASS_MAX_FDS];
    unsigned n = 0;
    ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof buf, got, FDPASS_MAX_FDS, &n, 0, NULL), 5);
    ck_assert_mem_eq(buf, "hello", 5);
    ck_assert_uint_eq(n, 3);
    const char *want[] = {"zero", "one", "two"};
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_ne(got[i], fds[i]);
        ck_assert(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
        char r[8] = {0};
        ck_assert_int_eq(pread(got[i], r, sizeof r - 1, 0), (ssize_t)strlen(want[i]));
        ck_assert_str_eq(r, want[i]);
    }
    fdpass_close_all(got, n);
    fdpass_close_all(fds, 3);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(fdpass_excess_fds_are_closed_and_refused)
{
    int base = count_open_fds();
    int sv[2];
    pair(sv);
    int fds[4] = {memfd_with("a"), memfd_with("b"), memfd_with("c"), memfd_with("d")};
    ck_assert_int_eq(fdpass_send(sv[0], "x", 1, fds, 4, 1000), 0);
    fdpass_close_all(fds, 4);
    int open_before = count_open_fds();
    char buf[4];
    int got[2] = {-1, -1};
    unsigned n = 99;
    ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof buf, got, 2, &n, 0, NULL), -EBADMSG);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(count_open_fds(), open_before); /* nothing received stayed open */
    close(sv[0]);
    close(sv[1]);
    ck_assert_int_eq(count_open_fds(), base);
}
END_TEST

/* Lowers this process's RLIMIT_NOFILE to its lowest free descriptor: no new fd fits. */
static struct rlimit fds_full(void)
{
    struct rlimit old, now;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    int lowest = dup(0);
    ck_assert_int_ge(lowest, 0);
    close(lowest);
    now = (struct rlimit){.rlim_cur = (rlim_t)lowest, .rlim_max = old.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &now), 0);
    return old;
}

START_TEST(fdpass_fds_the_receiver_has_no_room_for_are_its_fault_not_the_senders)
{
    int sv[2];
    pair(sv);
    int fds[3] = {memfd_with("a"), memfd_with("b"), memfd_with("c")};
    ck_assert_int_eq(fdpass_send(sv[0], "hello", 5, fds, 3, 1000), 0);
    ck_assert_int_eq(fdpass_send(sv[0], "again", 5, fds, 3, 1000), 0);
    int open_before = count_open_fds();
    struct rlimit old = fds_full();
    char buf[16];
    int got[FDPASS_MAX_FDS];
    unsigned n = 99;
    bool lost = false;
    /* the bytes are kept, the fds reported lost: the connection can go on */
    ck_assert_int_eq(fdpass_recv(sv[1], buf, 5, got, FDPASS_MAX_FDS, &n, 0, &lost), 5);
    ck_assert_mem_eq(buf, "hello", 5);
    ck_assert_uint_eq(n, 0);
    ck_assert(lost);
    /* a caller that cannot keep the bytes hears EMFILE, not a bad message */
    ck_assert_int_eq(fdpass_recv(sv[1], buf, 5, got, FDPASS_MAX_FDS, &n, 0, NULL), -EMFILE);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    ck_assert_int_eq(count_open_fds(), open_before);
    /* with room again, fds arrive as usual and lost is false */
    ck_assert_int_eq(fdpass_send(sv[0], "x", 1, fds, 2, 1000), 0);
    ck_assert_int_eq(fdpass_recv(sv[1], buf, 1, got, FDPASS_MAX_FDS, &n, 0, &lost), 1);
    ck_assert_uint_eq(n, 2);
    ck_assert(!lost);
    fdpass_close_all(got, n);
    fdpass_close_all(fds, 3);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(frame_fds_lost_to_the_receivers_limit_are_marked_on_their_frame)
{
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    int sv[2];
    pair(sv);
    struct proto_msg ping = {.type = PROTO_PING};
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(proto_encode(&ping, NULL, &b, &len), 0);
    int fds[2] = {memfd_with("a"), memfd_with("b")};
    ck_assert_int_eq(fdpass_send(sv[0], b, len, NULL, 0, 1000), 0); /* ahead: owns none */
    ck_assert_int_eq(fdpass_send(sv[0], b, len, fds, 2, 1000), 0);
    struct frame_reader r;
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    struct rlimit old = fds_full();
    ssize_t got = 0;
    while (got < (ssize_t)(2 * len)) {
        ssize_t n = frame_reader_fill(&r, sv[1], MSG_DONTWAIT);
        ck_assert_int_gt(n, 0);
        got += n;
    }
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    const uint8_t *f;
    size_t flen;
    char err[128];
    ck_assert_int_eq(frame_reader_next(&r, &f, &flen, err, sizeof err), 1);
    ck_assert(!frame_reader_frame_lost_fds(&r));
    ck_assert_int_eq(frame_reader_next(&r, &f, &flen, err, sizeof err), 1);
    ck_assert(frame_reader_frame_lost_fds(&r));
    ck_assert(!frame_reader_frame_has_fds(&r));
    frame_reader_done(&r);
    free(b);
    fdpass_close_all(fds, 2);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(fdpass_send_refuses_bad_arguments_and_reports_a_gone_peer)
{
    int sv[2];
    pair(sv);
    int fds[FDPASS_MAX_FDS + 1];
    ck_assert_int_eq(fdpass_send(sv[0], "x", 1, fds, FDPASS_MAX_FDS + 1, 0), -EINVAL);
    ck_assert_int_eq(fdpass_send(sv[0], "", 0, fds, 1, 0), -EINVAL);
    close(sv[1]);
    ck_assert_int_eq(fdpass_send(sv[0], "x", 1, NULL, 0, 0), -EPIPE); /* no SIGPIPE either */
    close(sv[0]);
}
END_TEST

START_TEST(fdpass_nonblocking_send_times_out_when_the_peer_reads_nothing)
{
    int sv[2];
    pair(sv);
    int fl = fcntl(sv[0], F_GETFL);
    fcntl(sv[0], F_SETFL, fl | O_NONBLOCK);
    size_t big = 8u << 20;
    char *b = calloc(1, big);
    ck_assert_int_eq(fdpass_send(sv[0], b, big, NULL, 0, 50), -ETIMEDOUT);
    free(b);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- frame reader ---- */

static uint8_t *enc(struct proto_msg *m, size_t *len)
{
    uint8_t *b;
    ck_assert_int_eq(proto_encode(m, NULL, &b, len), 0);
    return b;
}

START_TEST(frame_frames_split_at_every_byte_reassemble)
{
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    struct proto_msg a = {.type = PROTO_CANCEL, .seq = 1, .u.cancel.req_id = 42};
    struct proto_msg b = {.type = PROTO_PING, .seq = 2};
    size_t la, lb;
    uint8_t *fa = enc(&a, &la), *fb = enc(&b, &lb);
    uint8_t all[256];
    memcpy(all, fa, la);
    memcpy(all + la, fb, lb);
    size_t total = la + lb;
    for (size_t cut = 1; cut < total; cut++) {
        int sv[2];
        pair(sv);
        struct frame_reader r;
        ck_assert_int_eq(frame_reader_init(&r, &l), 0);
        const uint8_t *f;
        size_t flen;
        char err[128];
        int seen = 0;
        ck_assert_int_eq(write(sv[0], all, cut), (ssize_t)cut);
        ck_assert_int_gt(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0);
        while (frame_reader_next(&r, &f, &flen, err, sizeof err) == 1)
            seen++;
        ck_assert_int_eq(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), -EAGAIN);
        ck_assert_int_eq(write(sv[0], all + cut, total - cut), (ssize_t)(total - cut));
        while (seen < 2) {
            int rc = frame_reader_next(&r, &f, &flen, err, sizeof err);
            ck_assert_int_ge(rc, 0);
            if (rc == 0) {
                ck_assert_int_gt(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0);
                continue;
            }
            struct proto_msg d;
            ck_assert_int_eq(proto_decode(f, flen, &l, &d, err, sizeof err), 0);
            ck_assert_uint_eq(d.seq, (uint64_t)seen + 1);
            seen++;
        }
        close(sv[0]);
        ck_assert_int_eq(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0); /* EOF */
        frame_reader_done(&r);
        close(sv[1]);
    }
    free(fa);
    free(fb);
}
END_TEST

START_TEST(frame_oversized_header_is_refused_before_the_body)
{
    struct proto_limits l;
    proto_limits_init(&l, 4096, 0);
    int sv[2];
    pair(sv);
    struct frame_reader r;
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    uint8_t hdr[PROTO_HDR_SIZE] = {'K', 'V', 'F', 'W', 1, 0, PROTO_SEND};
    uint32_t pl = 1u << 30;
    memcpy(hdr + 12, &pl, 4);
    ck_assert_int_eq(write(sv[0], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    ck_assert_int_eq(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), PROTO_HDR_SIZE);
    const uint8_t *f;
    size_t flen;
    char err[128];
    ck_assert_int_eq(frame_reader_next(&r, &f, &flen, err, sizeof err), -EMSGSIZE);
    ck_assert_uint_le(r.cap, 4096); /* never grew toward the claimed size */
    frame_reader_done(&r);
    /* garbage: refused as soon as 24 bytes are in */
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    ck_assert_int_eq(write(sv[0], "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
    ck_assert_int_gt(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0);
    ck_assert_int_eq(frame_reader_next(&r, &f, &flen, err, sizeof err), -EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "magic"));
    frame_reader_done(&r);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(frame_fds_are_held_until_taken_and_closed_if_not)
{
    int base = count_open_fds();
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    int sv[2];
    pair(sv);
    struct proto_msg m = {.type = PROTO_PING, .seq = 9};
    size_t len;
    uint8_t *b = enc(&m, &len);
    int fds[2] = {memfd_with("p0"), memfd_with("p1")};
    ck_assert_int_eq(fdpass_send(sv[0], b, len, fds, 2, 1000), 0);
    ck_assert_int_eq(fdpass_send(sv[0], b, len, fds, 1, 1000), 0);
    fdpass_close_all(fds, 2);
    struct frame_reader r;
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    while (r.nfds < 3)
        ck_assert_int_gt(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0);
    int got[4];
    ck_assert_uint_eq(frame_reader_take_fds(&r, got, 2), 2);
    ck_assert_uint_eq(r.nfds, 1);
    char t[3] = {0};
    ck_assert_int_eq(pread(got[1], t, 2, 0), 2);
    ck_assert_str_eq(t, "p1");
    fdpass_close_all(got, 2);
    frame_reader_done(&r); /* closes the one not taken */
    close(sv[0]);
    close(sv[1]);
    free(b);
    ck_assert_int_eq(count_open_fds(), base);
}
END_TEST

START_TEST(frame_more_pending_fds_than_the_limit_is_refused)
{
    int base = count_open_fds();
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    int sv[2];
    pair(sv);
    int fds[FDPASS_MAX_FDS];
    for (int i = 0; i < FDPASS_MAX_FDS; i++)
        fds[i] = memfd_with("f");
    /* two sends of max fds each: the second fill would hold 2x the limit */
    ck_assert_int_eq(fdpass_send(sv[0], "a", 1, fds, FDPASS_MAX_FDS, 1000), 0);
    ck_assert_int_eq(fdpass_send(sv[0], "b", 1, fds, FDPASS_MAX_FDS, 1000), 0);
    fdpass_close_all(fds, FDPASS_MAX_FDS);
    struct frame_reader r;
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    ck_assert_int_eq(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 1);
    ck_assert_int_eq(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), -EMSGSIZE);
    frame_reader_done(&r);
    close(sv[0]);
    close(sv[1]);
    ck_assert_int_eq(count_open_fds(), base);
}
END_TEST

START_TEST(frame_fds_belong_to_the_frame_they_came_with_when_pipelined)
{
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    int sv[2];
    pair(sv);
    struct proto_msg a = {.type = PROTO_PING, .seq = 1}, b = {.type = PROTO_PONG, .seq = 2},
                     c = {.type = PROTO_PING, .seq = 3};
    size_t la, lb, lc;
    uint8_t *fa = enc(&a, &la), *fb = enc(&b, &lb), *fc = enc(&c, &lc);
    int fd = memfd_with("x");
    /* frame 1 plain, frame 2 with an fd, frame 3 plain: sent before anything is read */
    ck_assert_int_eq(fdpass_send(sv[0], fa, la, NULL, 0, 1000), 0);
    ck_assert_int_eq(fdpass_send(sv[0], fb, lb, &fd, 1, 1000), 0);
    ck_assert_int_eq(fdpass_send(sv[0], fc, lc, NULL, 0, 1000), 0);
    close(fd);
    struct frame_reader r;
    ck_assert_int_eq(frame_reader_init(&r, &l), 0);
    const uint8_t *f;
    size_t flen;
    char err[128];
    int owners[4] = {0}, seen = 0;
    while (seen < 3) {
        int rc = frame_reader_next(&r, &f, &flen, err, sizeof err);
        if (rc == 0) {
            ck_assert_int_gt(frame_reader_fill(&r, sv[1], MSG_DONTWAIT), 0);
            continue;
        }
        ck_assert_int_eq(rc, 1);
        owners[seen++] = frame_reader_frame_has_fds(&r);
        if (owners[seen - 1]) {
            int got;
            ck_assert_uint_eq(frame_reader_take_fds(&r, &got, 1), 1);
            close(got);
        }
    }
    ck_assert_int_eq(owners[0], 0);
    ck_assert_int_eq(owners[1], 1);
    ck_assert_int_eq(owners[2], 0);
    frame_reader_done(&r);
    close(sv[0]);
    close(sv[1]);
    free(fa);
    free(fb);
    free(fc);
}
END_TEST

static Suite *fdpass_suite(void)
{
    Suite *s = suite_create("fdpass");
    TCase *fp = tcase_create("scm_rights");
    tcase_add_test(fp, fdpass_memfds_arrive_usable_and_cloexec);
    tcase_add_test(fp, fdpass_excess_fds_are_closed_and_refused);
    tcase_add_test(fp, fdpass_fds_the_receiver_has_no_room_for_are_its_fault_not_the_senders);
    tcase_add_test(fp, fdpass_send_refuses_bad_arguments_and_reports_a_gone_peer);
    tcase_add_test(fp, fdpass_nonblocking_send_times_out_when_the_peer_reads_nothing);
    suite_add_tcase(s, fp);
    TCase *fr = tcase_create("frame_reader");
    tcase_add_test(fr, frame_frames_split_at_every_byte_reassemble);
    tcase_add_test(fr, frame_oversized_header_is_refused_before_the_body);
    tcase_add_test(fr, frame_fds_are_held_until_taken_and_closed_if_not);
    tcase_add_test(fr, frame_more_pending_fds_than_the_limit_is_refused);
    tcase_add_test(fr, frame_fds_lost_to_the_receivers_limit_are_marked_on_their_frame);
    tcase_add_test(fr, frame_fds_belong_to_the_frame_they_came_with_when_pipelined);
    suite_add_tcase(s, fr);
    return s;
}

int main(void) { return tu_run(fdpass_suite()); }
