/* bench_register_stall.c: how long one REGISTER of a large host pool stalls kvferryd's loop.
 * Starts the real kvferryd ($KVFERRYD, else $BUILD/kvferryd), makes a worker rank whose sealed
 * memfd pools hold --gib GiB in all (touched first, as a worker's KV cache is), registers it
 * through libkvferry in a thread while the main thread sends `help` on the control socket back to back; prints the
 * registration time and the longest control round trip during it (the loop's stall), against
 * the median round trip measured before (the ceiling: what an idle loop answers in).
 * Usage: bench_register_stall [GiB, default 2.7]   (needs that much free memory) */
#include <pthread.h>

#include "bench_stall.h"

struct reg {
    const char *wsock, *json;
    struct kvf_pool *pools;
    uint32_t n;
    double ms;
    int rc;
    volatile int done;
    char err[512];
};

static void *reg_thread(void *arg)
{
    struct reg *r = arg;
    struct kvf_client *c;
    struct kvf_options o = {.connect_timeout_ms = 120000, .no_reconnect = 1};
    r->rc = kvf_connect(r->wsock, &o, &c);
    double t0 = stall_now_ms();
    if (r->rc == 0)
        r->rc = kvf_register(c, r->json, r->pools, r->n, r->err, sizeof r->err);
    r->ms = stall_now_ms() - t0;
    r->done = 1;
    if (r->rc == 0)
        kvf_close(c);
    return NULL;
}

int main(int argc, char **argv)
{
    double gib = argc > 1 ? atof(argv[1]) : 2.7;
    struct stall_env e;
    struct layout l;
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    uint64_t total;
    if (stall_layout(gib, &l) < 0 || !(total = stall_fill_pools(&l, "pool", pools)))
        return 1;
    char *json = layout_to_json(&l);
    if (stall_start(&e) < 0)
        return fprintf(stderr, "kvferryd %s did not start\n", e.bin), 1;
    double idle = stall_idle_median(e.csock);

    struct reg r = {.wsock = e.wsock, .json = json, .pools = pools, .n = l.n_pools};
    pthread_t t;
    pthread_create(&t, NULL, reg_thread, &r);
    double worst = 0, ms;
    int n = 0;
    while (!r.done) {
        if ((ms = stall_ctl_rtt(e.csock)) >= 0) {
            worst = ms > worst ? ms : worst;
            n++;
        }
    }
    pthread_join(t, NULL);
    stall_stop(&e);
    if (r.rc) {
        fprintf(stderr, "register: %d %s\n", r.rc, r.err);
        return 1;
    }
    printf("{\"bench\":\"register_stall\",\"daemon\":\"%s\",\"pool_bytes\":%llu,\"pools\":%u,"
           "\"register_ms\":%.1f,\"control_rtt_idle_median_ms\":%.3f,\"control_rtt_worst_ms\":%.1f,"
           "\"probes\":%d,\"stall_over_idle\":%.0f}\n",
           e.bin, (unsigned long long)total, l.n_pools, r.ms, idle, worst, n,
           worst / (idle > 0 ? idle : 1e-3));
    free(json);
    return 0;
}
