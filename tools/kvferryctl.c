/* kvferryctl: the operator's client of kvferryd.
 *   kvferryctl [--socket PATH | --config FILE] [--json] [--timeout S] COMMAND [ARGS]
 * COMMAND goes to the daemon's control socket (status, stats, config, log-level [LEVEL], reload,
 * drain, help, and whatever later daemons add); ARGS are key=value pairs (value parsed as JSON
 * when it is JSON, else taken as a string), or the one positional argument a command names below.
 * Offline subcommands (no daemon) are dispatched from local_cmds. Exit: 0 ok, 1 the daemon
 * answered an error (its message on stderr), 2 usage, 3 could not reach the daemon. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "cfg.h"
#include "kvferryctl.h"
#include "kvferryctl_layout.h"
#include "kvferryctl_plan.h"

#define EXIT_DAEMON_ERROR 1
#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3
#define SYSTEM_CONTROL_SOCKET "/run/kvferry/control.sock"

static int local_version(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("kvferryctl %s\n", KVF_VERSION);
    return 0;
}

/* Offline subcommands: run here, without a daemon; argv[0] is the subcommand. */
static const struct {
    const char *name;
    int (*main)(int argc, char **argv);
} local_cmds[] = {
    {"version", local_version},
    {"plan", ctl_plan_main},
    {"layout", ctl_layout_main},
    {"check-layout", ctl_check_layout_main},
    {"help", ctl_help_main},
};

/* Daemon commands that take one positional argument, and its key in args. */
static const struct {
    const char *cmd, *key;
} positional[] = {
    {"log-level", "level"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvferryctl [--socket PATH | --config FILE] [--json] [-l] [--timeout S] COMMAND "
            "[ARGS]\n"
            "commands (daemon): status, stats, config, metrics, log-level [LEVEL], reload, drain,\n"
            "                  workers, transfers [--watch] [--interval S] [--count N], peers,\n"
            "                  arena, top [--interval S] [--window S] [--count N]\n"
            "commands (offline): help, version, plan --ctx SPEC --gen SPEC [...] (kvferryctl plan --help),\n"
            "                  layout SPEC [--rank N], check-layout FILE...\n"
            "ARGS: key=value ... (value is JSON when it parses, else a string)\n"
            "kvferryctl help: every command and option, without a daemon.\n");
}

static int build_args(const char *cmd, int argc, char **argv, json_t **ret)
{
    json_t *args = json_object();
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq) {
            const char *key = NULL;
            for (size_t p = 0; p < sizeof(positional) / sizeof(positional[0]); p++)
                if (strcmp(positional[p].cmd, cmd) == 0)
                    key = positional[p].key;
            if (!key || json_object_get(args, key)) {
                fprintf(stderr, "kvferryctl: %s: unexpected argument '%s' (use key=value)\n", cmd,
                        argv[i]);
                json_decref(args);
                return -EINVAL;
            }
            json_object_set_new(args, key, json_string(argv[i]));
            continue;
        }
        char key[128];
        size_t kl = (size_t)(eq - argv[i]);
        if (kl == 0 || kl >= sizeof(key)) {
            fprintf(stderr, "kvferryctl: bad argument '%s'\n", argv[i]);
            json_decref(args);
            return -EINVAL;
        }
        memcpy(key, argv[i], kl);
        key[kl] = '\0';
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
        json_object_set_new(args, key, v ? v : json_string(eq + 1));
    }
    if (json_object_size(args) == 0) {
        json_decref(args);
        args = NULL;
    }
    *ret = args;
    return 0;
}

/* Options of the live views: --watch, --interval S (0.05..3600), --window S (top: 0.05..3600),
 * --count N. Returns 1 when any was given, 0 when none, -EINVAL (after saying why) for a bad
 * one. */
static int live_opts(const char *cmd, int argc, char **argv, struct ctl_live *o)
{
    int any = 0;
    bool top = strcmp(cmd, "top") == 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--watch") == 0 || strcmp(a, "-w") == 0) {
            o->watch = true;
            any = 1;
            continue;
        }
        bool iv = strncmp(a, "--interval", 10) == 0, ct = strncmp(a, "--count", 7) == 0;
        bool wn = top && strncmp(a, "--window", 8) == 0;
        if (!iv && !ct && !wn) {
            if (any || top) {
                fprintf(stderr, "kvferryctl: %s: unknown option '%s' (%s)\n", cmd, a,
                        top ? "--interval S, --window S, --count N"
                            : "--watch, --interval S, --count N");
                return -EINVAL;
            }
            return 0; /* key=value ARGS for the daemon */
        }
        const char *eq = strchr(a, '=');
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        char *end = NULL;
        double x = v ? strtod(v, &end) : NAN;
        if (!v || *end || ((iv || wn) && !(x >= 0.05 && x <= 3600)) ||
            (ct && !(x >= 0 && x <= 1e9 && x == (long)x))) {
            fprintf(stderr, "kvferryctl: %s %s: %s\n", cmd, a,
                    ct ? "a whole number of frames (0: forever)" : "seconds in [0.05, 3600]");
            return -EINVAL;
        }
        if (iv)
            o->interval_s = x;
        else if (wn)
            o->window_s = x;
        else
            o->count = (long)x;
        any = 1;
    }
    return any;
}

static int default_socket(const char *config, char *buf, size_t len)
{
    struct kvf_config c;
    char err[CFG_ERR_MAX] = "";
    int r = config ? cfg_load_file(config, &c, err, sizeof(err)) : cfg_defaults(&c);
    if (r < 0) {
        fprintf(stderr, "kvferryctl: %s\n", err[0] ? err : strerror(-r));
        return r;
    }
    r = cfg_control_path(&c, buf, len);
    /* a user's own daemon first; without one, the system daemon's (the unit's /run/kvferry) */
    if (r == 0 && !config && geteuid() != 0 && access(buf, F_OK) != 0 &&
        access(SYSTEM_CONTROL_SOCKET, F_OK) == 0)
        snprintf(buf, len, "%s", SYSTEM_CONTROL_SOCKET);
    cfg_free(&c);
    if (r == -ENAMETOOLONG && strlen(buf) + 1 < len)
        return 0; /* whole, but over sun_path: ctl_client_connect says so */
    if (r < 0)
        fprintf(stderr, "kvferryctl: control socket path: %s\n", strerror(-r));
    return r;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"config", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},         {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {"long", no_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = NULL, *config = NULL;
    bool as_json = false, all = false;
    double timeout_s = 5.0;
    int o;
    while ((o = getopt_long(argc, argv, "+s:c:jlt:h", opts, NULL)) != -1) {
        switch (o) {
        case 'l':
            all = true;
            break;
        case 's':
            sock = optarg;
            break;
        case 'c':
            config = optarg;
            break;
        case 'j':
            as_json = true;
            break;
        case 't': {
            char *end;
            timeout_s = strtod(optarg, &end);
            if (*end || !(timeout_s > 0 && timeout_s <= 3600)) {
                fprintf(stderr, "kvferryctl: --timeout %s: seconds in (0, 3600]\n", optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    for (size_t i = 0; i < sizeof(local_cmds) / sizeof(local_cmds[0]); i++)
        if (strcmp(local_cmds[i].name, cmd) == 0)
            return local_cmds[i].main(argc - optind, argv + optind);

    bool live = false; /* transfers --watch, top (kvferryctl_watch.c) */
    struct ctl_live lo = {.interval_s = 1.0, .window_s = 10.0};
    if (strcmp(cmd, "transfers") == 0 || strcmp(cmd, "top") == 0) {
        int r = live_opts(cmd, argc - optind - 1, argv + optind + 1, &lo);
        if (r < 0)
            return EXIT_USAGE;
        live = r > 0 || strcmp(cmd, "top") == 0;
        if (live)
            optind = argc - 1; /* the view's options are not daemon ARGS */
    }
    json_t *args;
    if (build_args(cmd, argc - optind - 1, argv + optind + 1, &args) < 0)
        return EXIT_USAGE;
    char path[4096]; /* whole: ctl_client_connect refuses one over sun_path, never truncated */
    if (!sock) {
        if (default_socket(config, path, sizeof(path)) < 0) {
            json_decref(args);
            return EXIT_USAGE;
        }
        sock = path;
    }
    if (live) {
        json_decref(args);
        return ctl_watch_main(sock, cmd, &lo, timeout_s, as_json);
    }
    int fd = ctl_client_connect(sock);
    if (fd == -ENAMETOOLONG) {
        fprintf(stderr,
                "kvferryctl: control socket path %s is %zu bytes: a unix socket path holds at most "
                "%zu\n",
                sock, strlen(sock), sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        json_decref(args);
        return EXIT_UNREACHABLE;
    }
    if (fd < 0) {
        ctl_explain_connect(stderr, sock, -fd);
        json_decref(args);
        return EXIT_UNREACHABLE;
    }
    json_t *reply = NULL;
    int r = ctl_client_call(fd, cmd, args, (int)(timeout_s * 1000), &reply);
    close(fd);
    json_decref(args);
    if (r < 0) {
        fprintf(stderr, "kvferryctl: %s on %s: %s\n", cmd, sock,
                r == -ETIMEDOUT ? "no reply before --timeout" : strerror(-r));
        return EXIT_UNREACHABLE;
    }
    int rc = 0;
    if (json_is_true(json_object_get(reply, "ok"))) {
        json_t *result = json_object_get(reply, "result");
        if (as_json) {
            char *s = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY);
            if (s)
                puts(s);
            free(s);
        } else {
            ctl_print_human(stdout, cmd, result, all);
        }
    } else {
        const char *e = json_string_value(json_object_get(reply, "error"));
        const char *m = json_string_value(json_object_get(reply, "message"));
        if (as_json) {
            char *s = json_dumps(reply, JSON_INDENT(2));
            if (s)
                puts(s);
            free(s);
        }
        fprintf(stderr, "kvferryctl: %s: %s: %s\n", cmd, e ? e : "error", m ? m : "");
        rc = EXIT_DAEMON_ERROR;
    }
    json_decref(reply);
    return rc;
}
