/* check_netns.c: scripts/netns-pair, the two-host harness: a pair comes up with the promised
 * addresses, MTU and routes, carries a TCP echo between its sides (a C listener in side b, a bash
 * /dev/tcp client in side a), reaches nothing else, and goes down cleanly, also from half-made
 * state. Skipped (exit 77, reason printed) when `netns-pair check` says namespaces cannot be made
 * here (not root, no iproute2, no veth). This binary is also the echo listener:
 *   check_netns --echo-server ADDR   listen on ADDR:0, print "port N", echo one connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testutil.h"

static char base[32];   /* pair names: <base><suffix>, unique per run */
static char *self_path; /* this binary, for the echo listener (malloc'd by realpath) */

static const char *script(void)
{
    const char *s = getenv("KVF_NETNS_PAIR");
    return (s && *s) ? s : "scripts/netns-pair";
}

/* Runs argv; returns the exit code; stdout+stderr in *out (malloc'd) when out is not NULL. */
static int run(char *const argv[], char **out)
{
    int po[2];
    pid_t pid;
    if (pipe(po) < 0 || (pid = fork()) < 0) { /* also used outside tests (main): no ck_assert */
        perror("run");
        exit(1);
    }
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(po[1], 2);
        close(po[0]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(po[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(po[0]);
    int status;
    waitpid(pid, &status, 0);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int pair(const char *verb, const char *name, char **out)
{
    char *argv[] = {(char *)script(), (char *)verb, (char *)name, NULL};
    return run(argv, out);
}

static void pair_name(char *buf, size_t len, const char *suffix)
{
    int n = snprintf(buf, len, "%s%s", base, suffix); /* also used outside tests (main) */
    if (n < 0 || (size_t)n >= len) {
        fprintf(stderr, "pair name %s%s does not fit %zu bytes\n", base, suffix, len);
        exit(1);
    }
}

static void addr(const char *name, const char *side, char *buf, size_t len)
{
    char *out;
    char *argv[] = {(char *)script(), "addr", (char *)name, (char *)side, NULL};
    ck_assert_int_eq(run(argv, &out), 0);
    tu_fmt(buf, len, "%.*s", (int)strcspn(out, "\n"), out);
    free(out);
}

static bool ns_exists(const char *name, const char *side)
{
    char p[128];
    tu_fmt(p, sizeof(p), "/run/netns/%s-%s", name, side);
    return access(p, F_OK) == 0;
}

/* ---- the echo listener (runs inside a namespace, started through `netns-pair exec`) ---- */

static int echo_server(const char *ip)
{
    alarm(20); /* never outlive a broken test */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (s < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 ||
        bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 1) < 0) {
        perror("echo-server");
        return 1;
    }
    socklen_t al = sizeof(a);
    getsockname(s, (struct sockaddr *)&a, &al);
    printf("port %u\n", ntohs(a.sin_port));
    fflush(stdout);
    int c = accept(s, NULL, NULL);
    if (c < 0)
        return 1;
    char buf[4096];
    ssize_t r;
    while ((r = read(c, buf, sizeof(buf))) > 0)
        if (write(c, buf, (size_t)r) != r)
            return 1;
    close(c);
    close(s);
    return 0;
}

/* ---- tests ---- */

START_TEST(pair_comes_up_with_addresses_mtu_and_no_default_route)
{
    char n[64], a[32], b[32], *out;
    pair_name(n, sizeof(n), "u");
    ck_assert_int_eq(pair("up", n, &out), 0);
    free(out);
    addr(n, "a", a, sizeof(a));
    addr(n, "b", b, sizeof(b));
    ck_assert_str_eq(a + strlen(a) - 2, ".1");
    ck_assert_str_eq(b + strlen(b) - 2, ".2");
    ck_assert_int_eq(strncmp(a, "10.251.", 7), 0);
    ck_assert_int_eq(strncmp(a, b, strlen(a) - 1), 0); /* one /30 */
    const char *sides[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        char ns[80];
        tu_fmt(ns, sizeof(ns), "%s-%s", n, sides[i]);
        char *link[] = {"ip", "-n", ns, "-o", "link", "show", NULL};
        ck_assert_int_eq(run(link, &out), 0);
        ck_assert_msg(strstr(out, "veth0@") && strstr(out, "mtu 65000 "), "%s", out);
        ck_assert_msg(strstr(out, "lo: <LOOPBACK,UP"), "lo is not up: %s", out);
        /* lo and veth0, nothing else: count the "N: name:" lines (stderr is in out too: a
         * warning of an ip(8) racing another on /run/netns is not a link) */
        size_t links = 0;
        for (char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
            size_t d = strspn(l, "0123456789");
            links += d > 0 && l[d] == ':' && l[d + 1] == ' ';
        }
        ck_assert_msg(links == 2, "%zu links in %s:\n%s", links, ns, out);
        free(out);
        char *route[] = {"ip", "-n", ns, "route", "show", "default", NULL};
        ck_assert_int_eq(run(route, &out), 0);
        ck_assert_msg(out[0] == '\0', "default route in %s: %s", ns, out);
        free(out);
    }
    /* the host's namespace holds none of the pair's addresses */
    char *host[] = {"ip", "-o", "addr", "show", NULL};
    ck_assert_int_eq(run(host, &out), 0);
    ck_assert_ptr_null(strstr(out, a));
    ck_assert_ptr_null(strstr(out, b));
    free(out);
    ck_assert_int_eq(pair("up", n, &out), 0); /* again: already up, untouched */
    ck_assert_ptr_nonnull(strstr(out, "already up"));
    free(out);
    ck_assert_int_eq(pair("down", n, NULL), 0);
    ck_assert(!ns_exists(n, "a") && !ns_exists(n, "b"));
}
END_TEST

START_TEST(tcp_echo_crosses_the_pair_and_nothing_else_is_reachable)
{
    char n[64], a[32], b[32];
    pair_name(n, sizeof(n), "e");
    ck_assert_int_eq(pair("up", n, NULL), 0);
    addr(n, "a", a, sizeof(a));
    addr(n, "b", b, sizeof(b));

    /* listener in side b */
    int po[2];
    ck_assert_int_eq(pipe(po), 0);
    pid_t srv = fork();
    ck_assert_int_ge(srv, 0);
    if (srv == 0) {
        dup2(po[1], 1);
        close(po[0]);
        execl(script(), script(), "exec", n, "b", self_path, "--echo-server", b, (char *)NULL);
        _exit(127);
    }
    close(po[1]);
    char line[64] = "";
    FILE *f = fdopen(po[0], "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    unsigned port = 0;
    ck_assert_int_eq(sscanf(line, "port %u", &port), 1);
    ck_assert_uint_gt(port, 0);

    /* client in side a: bash's /dev/tcp */
    char cmd[256], *out;
    tu_fmt(cmd, sizeof(cmd),
           "exec 3<>/dev/tcp/%s/%u && printf 'hello kvferry %s\\n' >&3 && read -r l <&3 && "
           "printf '%%s' \"$l\"",
           b, port, n);
    char *cli[] = {(char *)script(), "exec", n, "a", "bash", "-c", cmd, NULL};
    ck_assert_int_eq(run(cli, &out), 0);
    char want[96];
    tu_fmt(want, sizeof(want), "hello kvferry %s", n);
    ck_assert_str_eq(out, want);
    free(out);
    int status;
    ck_assert_int_eq(waitpid(srv, &status, 0), srv);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fclose(f);

    /* no route out of the pair: an outside address is unreachable at once */
    char *out2[] = {
        (char *)script(), "exec", n, "a", "bash", "-c", "exec 3<>/dev/tcp/192.0.2.1/9", NULL};
    ck_assert_int_ne(run(out2, &out), 0);
    ck_assert_msg(strstr(out, "Network is unreachable"), "%s", out);
    free(out);
    /* and the host's namespace cannot reach side b (no route into the pair) */
    char *route[] = {"ip", "route", "get", b, NULL};
    run(route, &out);
    ck_assert_ptr_null(strstr(out, "veth0"));
    free(out);
    ck_assert_int_eq(pair("down", n, NULL), 0);
}
END_TEST

START_TEST(up_repairs_and_down_is_idempotent_cleans_half_made_state_and_ends_processes)
{
    char n[64], ns[80], *out;
    pair_name(n, sizeof(n), "d");
    ck_assert_int_eq(pair("down", n, NULL), 0); /* nothing there: fine */
    tu_fmt(ns, sizeof(ns), "%s-b", n);
    char *add[] = {"ip", "netns", "add", ns, NULL};
    ck_assert_int_eq(run(add, NULL), 0);      /* half-made: only side b */
    ck_assert_int_eq(pair("up", n, &out), 0); /* up repairs it */
    ck_assert_ptr_null(strstr(out, "already up"));
    free(out);
    ck_assert(ns_exists(n, "a") && ns_exists(n, "b"));
    char *vdown[] = {(char *)script(), "exec", n, "a", "ip", "link", "set", "veth0", "down", NULL};
    ck_assert_int_eq(run(vdown, NULL), 0);    /* broken: a veth end down */
    ck_assert_int_eq(pair("up", n, &out), 0); /* up rebuilds it */
    ck_assert_ptr_null(strstr(out, "already up"));
    free(out);
    ck_assert_int_eq(pair("up", n, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "already up"));
    free(out);

    /* a process left inside side a */
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        execl(script(), script(), "exec", n, "a", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    char *pids[] = {"ip", "netns", "pids", NULL, NULL};
    tu_fmt(ns, sizeof(ns), "%s-a", n);
    pids[3] = ns;
    for (int i = 0; i < 100; i++) { /* wait for it to be inside */
        run(pids, &out);
        bool in = out[0] != '\0';
        free(out);
        if (in)
            break;
        usleep(20000);
    }
    ck_assert_int_eq(pair("down", n, NULL), 0);
    int status;
    ck_assert_int_eq(waitpid(p, &status, 0), p);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ck_assert(!ns_exists(n, "a") && !ns_exists(n, "b"));
    ck_assert_int_eq(pair("down", n, NULL), 0); /* again */
}
END_TEST

START_TEST(bad_names_and_sides_are_usage_errors)
{
    char *out;
    ck_assert_int_eq(pair("up", "../etc", &out), 2);
    free(out);
    ck_assert_int_eq(pair("up", "-x", &out), 2);
    free(out);
    ck_assert_int_eq(pair("up", "a-name-that-is-much-too-long-for-us", &out), 2);
    free(out);
    char *side[] = {(char *)script(), "exec", "x", "c", "true", NULL};
    ck_assert_int_eq(run(side, &out), 2);
    free(out);
    char *none[] = {(char *)script(), "exec", "kvfnosuchpair", "a", "true", NULL};
    ck_assert_int_eq(run(none, &out), 1);
    ck_assert_ptr_nonnull(strstr(out, "no namespace"));
    free(out);
}
END_TEST

static Suite *netns_suite(void)
{
    Suite *s = suite_create("netns");
    TCase *tc = tcase_create("pair");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, pair_comes_up_with_addresses_mtu_and_no_default_route);
    tcase_add_test(tc, tcp_echo_crosses_the_pair_and_nothing_else_is_reachable);
    tcase_add_test(tc, up_repairs_and_down_is_idempotent_cleans_half_made_state_and_ends_processes);
    tcase_add_test(tc, bad_names_and_sides_are_usage_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--echo-server") == 0)
        return echo_server(argv[2]);
    /* realpath allocates: a fixed buffer must be PATH_MAX bytes, and a fortified libc aborts
     * ("buffer overflow detected") for a smaller one, whatever the path's length */
    if (!(self_path = realpath(argv[0], NULL))) {
        perror(argv[0]);
        return 1;
    }
    char *out;
    char *check[] = {(char *)script(), "check", NULL};
    int rc = run(check, &out);
    if (rc == 77) {
        printf("SKIP check_netns: %s", out);
        free(out);
        return 77;
    }
    if (rc != 0) {
        printf("%s check: exit %d: %s\n", script(), rc, out);
        free(out);
        return 1;
    }
    free(out);
    snprintf(base, sizeof(base), "kvft%d", (int)getpid());
    int r = tu_run(netns_suite());
    const char *suffixes[] = {"u", "e", "d"}; /* a failed test may leave its pair: remove it */
    for (size_t i = 0; i < 3; i++) {
        char n[64];
        pair_name(n, sizeof(n), suffixes[i]);
        pair("down", n, NULL);
    }
    free(self_path);
    return r;
}
