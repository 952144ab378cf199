/* check_config_io.c: config I/O that cannot block (issue 13, item 6). A FIFO at the config
 * path is refused at once by --check-config and by a SIGHUP reload (the loop keeps answering);
 * --check-config refuses every secret file start would refuse (mode, size, type, missing). */
#include <sys/stat.h>

#include "wtest.h"

/* kvferryd --check-config path: exit status, stderr (malloc'd) and how long it took. */
static char *check_config(struct wenv *e, const char *path, int *rc, int64_t *took_ms)
{
    char bin[256], out[200];
    tu_bin("kvferryd", bin, sizeof bin);
    tu_fmt(out, sizeof out, "%s/check.err", e->dir);
    int64_t t0 = wt_now_ms();
    pid_t p = fork();
    if (p == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "--check-config", path, (char *)NULL);
        _exit(127);
    }
    *rc = wt_wait(p, 5000); /* -1: it hung and was killed */
    *took_ms = wt_now_ms() - t0;
    return wt_log(e, "check.err");
}

START_TEST(check_config_refuses_a_fifo_at_once)
{
    struct wenv e;
    tu_tmpdir(e.dir, sizeof e.dir);
    char fifo[128];
    tu_fmt(fifo, sizeof fifo, "%s/kvferry.yaml", e.dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rc;
    int64_t took;
    char *t = check_config(&e, fifo, &rc, &took);
    ck_assert_msg(rc == 1 && strstr(t, "not a regular file (a FIFO)"), "rc %d: %s", rc, t);
    ck_assert_int_lt(took, 2000);
    free(t);
    e.daemon = 0;
    wt_stop(&e);
}
END_TEST

START_TEST(reload_of_a_fifo_config_keeps_the_loop_answering)
{
    struct wenv e;
    wt_start(&e, NULL);
    char bak[160];
    snprintf(bak, sizeof bak, "%s.bak", e.cfg);
    ck_assert_int_eq(rename(e.cfg, bak), 0);
    ck_assert_int_eq(mkfifo(e.cfg, 0600), 0);
    int64_t t0 = wt_now_ms();
    ck_assert_int_eq(kill(e.daemon, SIGHUP), 0);
    json_t *st = NULL;
    const char *why = NULL;
    for (int i = 0; i < 200; i++) { /* the control socket answers all along */
        json_decref(st);
        st = wt_ctl(&e, "status");
        json_t *lr = json_object_get(st, "last_reload");
        if (json_is_true(json_object_get(lr, "attempted"))) {
            why = json_string_value(json_object_get(lr, "error"));
            break;
        }
        usleep(10000);
    }
    printf("reload of a FIFO config path: refused after %lld ms\n", (long long)(wt_now_ms() - t0));
    ck_assert_msg(why && strstr(why, "not a regular file"), "last_reload: %s", why ? why : "none");
    json_decref(st);
    /* the old config stays; a regular file reloads again */
    ck_assert_int_eq(unlink(e.cfg), 0);
    ck_assert_int_eq(rename(bak, e.cfg), 0);
    wt_stop(&e);
}
END_TEST

static void secret(const char *path, size_t bytes, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    char b[8192];
    memset(b, 'k', sizeof b);
    ck_assert_int_eq(write(fd, b, bytes), (ssize_t)bytes);
    close(fd);
    ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(check_config_refuses_the_secret_files_start_refuses)
{
    struct wenv e;
    tu_tmpdir(e.dir, sizeof e.dir);
    char cfg[128], sec[128];
    tu_fmt(cfg, sizeof cfg, "%s/kvferry.yaml", e.dir);
    tu_fmt(sec, sizeof sec, "%s/secret", e.dir);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "cluster:\n  secret_file: %s\n", sec);
    fclose(f);
    struct {
        size_t bytes;
        mode_t mode;
        int fifo, rc;
        const char *says;
    } cases[] = {
        {32, 0600, 0, 0, "ok"},
        {32, 0400, 0, 0, "ok"},
        {32, 0644, 0, 1, "chmod 600"},
        {32, 0640, 0, 1, "mode 0640"},
        {5, 0600, 0, 1, "5 bytes, must hold 16..4096"},
        {5000, 0600, 0, 1, "5000 bytes"},
        {0, 0600, 1, 1, "not a regular file"},
        {0, 0, 0, 1, "No such file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unlink(sec);
        if (cases[i].fifo)
            ck_assert_int_eq(mkfifo(sec, 0600), 0);
        else if (cases[i].mode)
            secret(sec, cases[i].bytes, cases[i].mode);
        int rc;
        int64_t took;
        char *t = check_config(&e, cfg, &rc, &took);
        ck_assert_msg(rc == cases[i].rc && strstr(t, cases[i].says), "case %zu: rc %d: %s", i, rc,
                      t);
        ck_assert_int_lt(took, 2000);
        free(t);
    }
    e.daemon = 0;
    wt_stop(&e);
}
END_TEST

static Suite *config_io_suite(void)
{
    Suite *s = suite_create("config_io");
    TCase *t = tcase_create("nonblocking");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, check_config_refuses_a_fifo_at_once);
    tcase_add_test(t, reload_of_a_fifo_config_keeps_the_loop_answering);
    tcase_add_test(t, check_config_refuses_the_secret_files_start_refuses);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(config_io_suite()); }
