/* kvferry-flood: a hostile UCX client for tests (issue 25): opens endpoints to a kvferryd link
 * listener and never sends the handshake, as a peer without the cluster secret would.
 *   kvferry-flood --connect HOST:PORT [--endpoints N] [--duration-ms MS] [--churn-ms MS]
 *                 [--bind ADDR] [--tls T]
 * Holds N endpoints open for --duration-ms (default 3000; 0: until SIGTERM or SIGINT): one the
 * daemon refused or closed is opened again at once, so the pressure stays at N. --churn-ms
 * closes every endpoint (forced) and opens N new ones this often. --bind: the local address to
 * connect from (an address an interface has: UCX looks its device up); a stranger apart from
 * the real peers of 127.0.0.1 on one host. Prints one JSON line at the end: endpoints opened,
 * errors seen (refused, reset, timed out), open at the end. Exits 0 unless UCX itself failed
 * here. One thread, UCS_THREAD_MODE_SINGLE; progress is polled (no wakeup). */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#define FLOOD_MAX 4096

struct slot {
    ucp_ep_h ep;
    int failed; /* the error handler ran: close it and open again */
};

static struct {
    ucp_context_h ctx;
    ucp_worker_h worker;
    struct addrinfo *ai, *bind_ai;
    struct slot slots[FLOOD_MAX];
    unsigned n;
    unsigned long opened, errors, open_fail, closing;
} F;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    (void)status;
    struct slot *s = arg;
    s->failed = 1;
    F.errors++;
}

static void closed_cb(void *req, ucs_status_t status, void *arg)
{
    (void)status;
    (void)arg;
    ucp_request_free(req);
    F.closing--;
}

static void flood_close(struct slot *s)
{
    if (!s->ep)
        return;
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
                              .cb.send = closed_cb,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(s->ep, &rp);
    if (UCS_PTR_IS_PTR(r))
        F.closing++;
    s->ep = NULL;
    s->failed = 0;
}

static void flood_open(struct slot *s)
{
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = F.ai->ai_addr, .addrlen = F.ai->ai_addrlen},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = err_cb, .arg = s},
    };
    if (F.bind_ai) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR;
        ep.local_sockaddr = (ucs_sock_addr_t){F.bind_ai->ai_addr, F.bind_ai->ai_addrlen};
    }
    if (ucp_ep_create(F.worker, &ep, &s->ep) == UCS_OK) {
        F.opened++;
    } else {
        s->ep = NULL;
        F.open_fail++;
    }
}

static int flood_resolve(const char *hostport)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof host)
        return -EINVAL;
    size_t hl = (size_t)(colon - hostport);
    memcpy(host, hostport, hl);
    host[hl] = 0;
    char *h = host;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h[hl - 1] = 0;
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    return getaddrinfo(h, colon + 1, &hints, &F.ai) == 0 ? 0 : -EHOSTUNREACH;
}

static int flood_init(const char *tls)
{
    ucp_config_t *uc;
    if (ucp_config_read(NULL, NULL, &uc) != UCS_OK)
        return -1;
    if (tls)
        ucp_config_modify(uc, "TLS", tls);
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucs_status_t s = ucp_init(&pp, uc, &F.ctx);
    ucp_config_release(uc);
    if (s != UCS_OK)
        return -1;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    return ucp_worker_create(F.ctx, &wp, &F.worker) == UCS_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"connect", required_argument, 0, 'c'},
                                         {"endpoints", required_argument, 0, 'n'},
                                         {"duration-ms", required_argument, 0, 'd'},
                                         {"churn-ms", required_argument, 0, 'r'},
                                         {"tls", required_argument, 0, 't'},
                                         {"bind", required_argument, 0, 'b'},
                                         {0, 0, 0, 0}};
    const char *addr = NULL, *tls = NULL, *bind = NULL;
    unsigned long dur = 3000, churn = 0;
    F.n = 64;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'c': addr = optarg; break;
        case 'n': F.n = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'd': dur = strtoul(optarg, NULL, 10); break;
        case 'r': churn = strtoul(optarg, NULL, 10); break;
        case 't': tls = optarg; break;
        case 'b': bind = optarg; break;
        default: goto usage;
        }
    }
    if (!addr || !F.n || F.n > FLOOD_MAX)
        goto usage;
    if (flood_resolve(addr) < 0) {
        fprintf(stderr, "kvferry-flood: cannot resolve %s\n", addr);
        return 2;
    }
    struct addrinfo hints = {.ai_family = F.ai->ai_family, .ai_flags = AI_NUMERICHOST};
    if (bind && getaddrinfo(bind, "0", &hints, &F.bind_ai) != 0) {
        fprintf(stderr, "kvferry-flood: bad --bind address %s\n", bind);
        return 2;
    }
    if (flood_init(tls) < 0) {
        fprintf(stderr, "kvferry-flood: UCX set-up failed\n");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    uint64_t t0 = now_ms(), next_churn = t0 + churn;
    for (unsigned i = 0; i < F.n; i++)
        flood_open(&F.slots[i]);
    while (!stop && (!dur || now_ms() - t0 < dur)) {
        unsigned k = 0, reopened = 0;
        while (k < 64 && ucp_worker_progress(F.worker))
            k++;
        int all = churn && now_ms() >= next_churn;
        if (all)
            next_churn += churn;
        for (unsigned i = 0; i < F.n; i++) {
            struct slot *s = &F.slots[i];
            if (all || s->failed || !s->ep) {
                flood_close(s);
                flood_open(s);
                reopened++;
            }
        }
        if (!k && !reopened) /* idle: leave the CPU to the daemons of a shared test machine */
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    unsigned open = 0;
    for (unsigned i = 0; i < F.n; i++)
        open += F.slots[i].ep && !F.slots[i].failed;
    printf("{\"endpoints\":%u,\"opened\":%lu,\"errors\":%lu,\"open_failed\":%lu,"
           "\"open_at_end\":%u}\n", F.n, F.opened, F.errors, F.open_fail, open);
    fflush(stdout);
    for (unsigned i = 0; i < F.n; i++)
        flood_close(&F.slots[i]);
    for (uint64_t t = now_ms(); F.closing && now_ms() - t < 2000;)
        ucp_worker_progress(F.worker);
    ucp_worker_destroy(F.worker);
    ucp_cleanup(F.ctx);
    freeaddrinfo(F.ai);
    if (F.bind_ai)
        freeaddrinfo(F.bind_ai);
    return 0;
usage:
    fprintf(stderr, "usage: kvferry-flood --connect HOST:PORT [--endpoints N (1..%d)] "
                    "[--duration-ms MS] [--churn-ms MS] [--bind ADDR] [--tls T]\n", FLOOD_MAX);
    return 2;
}
