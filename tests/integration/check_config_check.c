/* check_config_check.c: `kvferryd --check-config` refuses what the start refuses, with the same
 * message (daemon/daemon_check.c): for each config the start would refuse, --check-config exits
 * 1 naming the key, and a real start exits non-zero, before READY, saying the same; a config
 * both accept passes both. */
#include <check.h>

#include "daemon_harness.h"
#include "remoteutil.h"

struct env {
    struct dh h; /* dir, cfg and log paths; no daemon running */
    char secret[160], bin[256];
};

static void env_init(struct env *e)
{
    memset(e, 0, sizeof *e);
    tu_tmpdir(e->h.dir, sizeof e->h.dir);
    tu_fmt(e->h.cfg, sizeof e->h.cfg, "%s/kvferry.yaml", e->h.dir);
    ru_secret(e->h.dir, "secret", 3, e->secret, sizeof e->secret);
    tu_bin("kvferryd", e->bin, sizeof e->bin);
}

/* Writes the config (sockets in the temp dir, `yaml` after; "@S" stands for the secret file's
 * path), runs --check-config, then the daemon itself (30 s at most). */
static void run_both(struct env *e, const char *yaml, int *check_rc, char *check_out,
                     int *start_rc, char *start_out, size_t len)
{
    char text[1024], cmd[768];
    const char *at = strstr(yaml, "@S");
    if (at)
        tu_fmt(text, sizeof text, "%.*s%s%s", (int)(at - yaml), yaml, e->secret, at + 2);
    else
        tu_fmt(text, sizeof text, "%s", yaml);
    dh_config(&e->h, text);
    *check_rc = dh_sh(tu_fmt(cmd, sizeof cmd, "%s --check-config %s 2>&1", e->bin, e->h.cfg),
                      check_out, len);
    *start_rc = dh_sh(tu_fmt(cmd, sizeof cmd, "env -u NOTIFY_SOCKET timeout 30 %s --config %s "
                             "2>&1", e->bin, e->h.cfg), start_out, len);
}

START_TEST(check_config_refuses_what_the_start_refuses_with_the_same_words)
{
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"metrics.listen: \":9464\"\n", "metrics.listen \":9464\": expected host:port"},
        {"metrics.listen: \"localhost:9464\"\n", "host must be a numeric address"},
        {"metrics.listen: \"127.0.0.1:70000\"\n", "port must be 0..65535"},
        /* an empty label: refused by the resolver itself, no DNS query (CI may be offline) */
        {"cluster.secret_file: \"@S\"\nlisten.port: 1\nlisten.address: \"bad..address\"\n",
         "listen.address \"bad..address\":"},
        {"cluster.secret_file: \"@S\"\narena.placement: device\n", "arena.placement is device"},
        {"cluster.secret_file: \"/nonexistent/kvf-secret\"\n", "secret file /nonexistent"},
        {"cluster.secret_file: \"@S\"\ntransport.ucx_tls: \"no-such-transport\"\n",
         "transport.ucx_tls \"no-such-transport\": UCX cannot use it here"},
    };
    struct env e;
    env_init(&e);
    char cout[4096], sout[8192];
    int crc, src;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_both(&e, bad[i].yaml, &crc, cout, &src, sout, sizeof cout);
        ck_assert_msg(crc == 1 && strstr(cout, bad[i].want), "--check-config on %s: exit %d: %s",
                      bad[i].yaml, crc, cout);
        ck_assert_msg(strstr(cout, e.h.cfg), "the message does not name the file: %s", cout);
        ck_assert_msg(src != 0 && src != 124 && strstr(sout, bad[i].want),
                      "the start on %s: exit %d: %s", bad[i].yaml, src, sout);
        ck_assert_msg(!strstr(sout, " ready (pid"), "the start got to READY: %s", sout);
    }
    /* accepted by both: the start goes on to READY */
    char good[512], cmd[512];
    tu_fmt(good, sizeof good, "metrics.listen: \"127.0.0.1:0\"\ncluster.secret_file: \"%s\"\n",
           e.secret);
    dh_config(&e.h, good);
    crc = dh_sh(tu_fmt(cmd, sizeof cmd, "%s --check-config %s 2>&1", e.bin, e.h.cfg), cout,
                sizeof cout);
    ck_assert_msg(crc == 0, "%s", cout);
    struct dh h;
    dh_start(&h, good);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
    (void)!system(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", e.h.dir));
}
END_TEST

/* An arena of more slots than the arena can index is refused before anything is allocated
 * (the start would have mapped the whole arena first): --check-config only, so that no
 * regression here can make a test map 128 GiB. */
START_TEST(check_config_refuses_an_arena_of_too_many_slots)
{
    struct env e;
    env_init(&e);
    char out[4096], cmd[512], text[512];
    tu_fmt(text, sizeof text, "cluster.secret_file: \"%s\"\narena.size: 128GiB\n"
           "arena.chunk: 64KiB\n", e.secret);
    dh_config(&e.h, text);
    int rc = dh_sh(tu_fmt(cmd, sizeof cmd, "%s --check-config %s 2>&1", e.bin, e.h.cfg), out,
                   sizeof out);
    ck_assert_msg(rc == 1 && strstr(out, "arena.size / arena.chunk"), "exit %d: %s", rc, out);
    tu_fmt(text, sizeof text, "cluster.secret_file: \"%s\"\narena.size: 128GiB\n"
           "arena.chunk: 1MiB\n", e.secret);
    dh_config(&e.h, text);
    rc = dh_sh(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    (void)!system(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", e.h.dir));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_check");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, check_config_refuses_what_the_start_refuses_with_the_same_words);
    tcase_add_test(tc, check_config_refuses_an_arena_of_too_many_slots);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
