/* daemon_check.c: everything the start refuses about a config, in one place, so that
 * `kvferryd --check-config` (an ExecStartPre=) and the start itself agree: the file parsed
 * with its rules, access.* and sockets.group resolved, socket paths that fit, and what each
 * module would refuse when it starts: the secret file, metrics.listen, the link's listen
 * address and transports, the arena's placement and shape. A module that refuses a new thing
 * at its start adds the check here (and keeps its own). What only the running host can say
 * (an address in use, another daemon on the socket) stays the start's. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <ucp/api/ucp.h>

#include "arena.h"
#include "daemon_life.h"
#include "link.h"
#include "metrics_http.h"
#include "secret_file.h"
#include "sockpath.h"

/* Both socket paths fit a sockaddr_un, said as the listeners would (sockpath_addr). */
static int check_sockets(const struct kvf_config *c, char *err, size_t len)
{
    static const char *const what[] = {"control", "worker"};
    for (int i = 0; i < 2; i++) {
        char path[SOCKPATH_BUF];
        struct sockaddr_un sa;
        int r = i ? cfg_worker_path(c, path, sizeof path) : cfg_control_path(c, path, sizeof path);
        if (r < 0 && r != -ENAMETOOLONG) {
            snprintf(err, len, "%s socket path: %s", what[i], strerror(-r));
            return r;
        }
        if ((r = sockpath_addr(&sa, path, what[i], err, len)) < 0)
            return r;
    }
    return 0;
}

static int check_metrics(const struct kvf_config *c, char *err, size_t len)
{
    struct sockaddr_storage sa;
    if (!c->metrics_listen || !c->metrics_listen[0])
        return 0;
    return metrics_http_parse_listen(c->metrics_listen, &sa, err, len);
}

/* transport.ucx_tls names transports UCX can use on this host: what ucp_init refuses at the
 * link's start ("no usable transports/devices"), asked the same way (link_ucx_init). */
static int check_transports(const char *tls, char *err, size_t len)
{
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP};
    ucp_config_t *uc;
    ucp_context_h ctx;
    ucs_status_t s = ucp_config_read(NULL, NULL, &uc);
    if (s == UCS_OK) {
        if ((s = ucp_config_modify(uc, "TLS", tls)) == UCS_OK &&
            (s = ucp_init(&pp, uc, &ctx)) == UCS_OK)
            ucp_cleanup(ctx);
        ucp_config_release(uc);
    }
    if (s == UCS_OK)
        return 0;
    snprintf(err, len, "transport.ucx_tls \"%s\": UCX cannot use it here: %s", tls,
             ucs_status_string(s));
    return -EINVAL;
}

/* The engine's refusals (engine_new), which apply only with a cluster secret. */
static int check_link(const struct kvf_config *c, char *err, size_t len)
{
    uint8_t secret[LINK_SECRET_MAX];
    size_t n = 0;
    int r = secret_file_read(c->cluster_secret_file, secret, sizeof secret, &n, err, len);
    explicit_bzero(secret, sizeof secret);
    if (r < 0)
        return r;
    if (c->arena_placement == CFG_PLACEMENT_DEVICE) {
        snprintf(err, len, "arena.placement is device, but this build stages through host "
                 "memory only: set arena.placement to auto or host");
        return -ENOTSUP;
    }
    if (c->listen_port > 0) { /* resolved as link_listen does */
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *ai = NULL;
        char port[8];
        snprintf(port, sizeof port, "%u", (unsigned)c->listen_port);
        int g = getaddrinfo(c->listen_address, port, &hints, &ai);
        if (ai)
            freeaddrinfo(ai);
        if (g != 0) {
            snprintf(err, len, "listen.address \"%s\": %s", c->listen_address, gai_strerror(g));
            return -EINVAL;
        }
    }
    if (c->transport_ucx_tls && c->transport_ucx_tls[0] &&
        (r = check_transports(c->transport_ucx_tls, err, len)) < 0)
        return r;
    /* the engine's landing arena: the slots left after a quarter stage (engine_new) */
    uint64_t slot = (c->arena_chunk + ARENA_MIN_ALIGN - 1) / ARENA_MIN_ALIGN * ARENA_MIN_ALIGN;
    uint64_t slots = (uint64_t)c->arena_size / slot;
    uint64_t landing = slots - (slots >= 2 ? (slots / 4 ? slots / 4 : 1) : 0);
    if (landing > ARENA_MAX_SLOTS) {
        snprintf(err, len, "arena.size / arena.chunk: %llu landing slots, at most %u: raise "
                 "arena.chunk or lower arena.size", (unsigned long long)landing,
                 ARENA_MAX_SLOTS);
        return -EINVAL;
    }
    return 0;
}

int daemon_check_config(const char *path, struct kvf_config *ret, struct access *access_ret,
                        char *err, size_t errlen)
{
    struct kvf_config c;
    struct access a;
    char why[CFG_ERR_MAX] = "";
    err[0] = '\0';
    int r = path ? cfg_load_file(path, &c, err, errlen) : cfg_defaults(&c);
    if (r < 0) { /* the parser's lines name the file already */
        if (!err[0])
            snprintf(err, errlen, "%s: %s", path ? path : "built-in defaults", strerror(-r));
        return r;
    }
    if ((r = access_resolve(&c, &a, why, sizeof why)) < 0) {
        cfg_free(&c);
        goto err;
    }
    if ((r = check_sockets(&c, why, sizeof why)) < 0 ||
        (r = check_metrics(&c, why, sizeof why)) < 0 ||
        (c.cluster_secret_file && c.cluster_secret_file[0] &&
         (r = check_link(&c, why, sizeof why)) < 0)) {
        access_done(&a);
        cfg_free(&c);
        goto err;
    }
    *ret = c;
    *access_ret = a;
    return 0;
err:
    snprintf(err, errlen, "%s: %s", path ? path : "built-in defaults", why[0] ? why :
             strerror(-r));
    return r;
}
