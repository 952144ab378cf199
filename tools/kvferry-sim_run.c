/* kvferry-sim_run.c: one simulated rank (see kvferry-sim.c). Requests run in windows that fit
 * the pools: each request of a window gets its own blocks (a seeded shuffle, different on the
 * two sides, so block ids never line up by accident) and its own state slot. The pattern seed
 * of request q is seed + q, so requests differ from one another. A window fills every request
 * first, then issues them, then verifies after every event came (with GPU pools the fill is
 * pushed to the device before and the device pulled back after: kvferry-sim_cuda.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kvferry-sim.h"
#include "kvferry.h"
#include "pattern.h"
#include "plan.h"
#include "preset.h"

struct sim {
    const struct sim_opts *o;
    struct layout l;
    struct copy_mem mem;
    int fds[LAYOUT_MAX_POOLS];
    struct kvf_client *c;
    struct sim_cuda *cu;     /* GPU pools (the memfds are their staging); NULL: host pools */
    bool gen;
    uint32_t n_blocks_req;   /* blocks this rank holds per request */
    uint32_t first_block;    /* generation: n_ctx - n_gen */
    uint32_t window;
    /* results */
    uint64_t ok, failed, bytes, parity_bad;
    uint32_t held; /* RECVs ended FAILED|HELD whose RELEASED has not come: their blocks wait */
    uint64_t fail_by[KVF_E__COUNT];
    char first_bad[512];
    struct sim_stats st; /* latencies (and, at the end, the counts) for --stats-json */
    struct sim_events ev; /* --events */
};

/* --hold-while-pid: stay registered until that process has exited (a context instance whose
 * readers still need it complete), at most timeout_ms. A pidfd turns readable at the exit, so
 * this waits on the event itself; a process already gone returns at once. */
static void hold_while(uint32_t pid, int timeout_ms)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd < 0)
        return;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
        ;
    close(fd);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int make_pools(struct sim *s)
{
    for (uint32_t i = 0; i < s->l.n_pools; i++) {
        uint64_t n = s->l.pools[i].bytes;
        int fd = memfd_create("kvferry-sim-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)n) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
            return -errno;
        /* populated here, like a real engine's resident KV pools: the daemon's own
         * MAP_POPULATE at REGISTER then only maps pages that exist (allocating GiBs of shmem
         * inside REGISTER can outlast the client's registration wait on a loaded host) */
        void *b = n ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)
                    : NULL;
        if (b == MAP_FAILED)
            return -errno;
        s->fds[i] = fd;
        s->mem.base[i] = b;
        s->mem.size[i] = n;
    }
    s->mem.n = s->l.n_pools;
    return 0;
}

/* Item ids of request slot j (0 <= j < window) of window w. */
static void ids_for(struct sim *s, uint32_t w, uint32_t j, uint32_t *ids, uint32_t *counts,
                    struct plan_ids *pids)
{
    uint32_t k = 0;
    for (uint32_t g = 0; g < s->l.n_groups; g++) {
        const struct layout_group *gr = &s->l.groups[g];
        pids->ids[g] = ids + k;
        if (gr->kind == GROUP_STATE) {
            /* distinct per j (window <= n_items): a seeded rotation */
            ids[k++] = (uint32_t)((j + mix(s->o->seed + w + s->gen) % gr->n_items) % gr->n_items);
            counts[g] = pids->n[g] = 1;
        } else {
            /* a seeded permutation of the blocks: j's blocks are [j*n, (j+1)*n) of it */
            uint32_t n = s->n_blocks_req;
            uint64_t salt = mix(s->o->seed * 1000003u + w * 7919u + (s->gen ? 1 : 2));
            for (uint32_t b = 0; b < n; b++) {
                uint32_t pos = j * n + b;
                /* affine permutation of [0, n_items): a*x + c mod n_items with gcd(a, n) = 1 */
                uint64_t a = 1 + 2 * (salt % 1000);
                while (1) {
                    uint64_t x = a, y = gr->n_items;
                    while (y) {
                        uint64_t t = x % y;
                        x = y;
                        y = t;
                    }
                    if (x == 1)
                        break;
                    a += 2;
                }
                ids[k + b] = (uint32_t)((a * pos + (salt >> 20)) % gr->n_items);
            }
            counts[g] = pids->n[g] = n;
            k += n;
        }
    }
}

static void record_fail(struct sim *s, const struct kvf_event *ev)
{
    s->failed++;
    if (ev->error > 0 && ev->error < KVF_E__COUNT)
        s->fail_by[ev->error]++;
    if (!s->o->quiet && s->failed <= 3)
        fprintf(stderr, "kvferry-sim %s rank %d: request %" PRIu64 " failed: %s: %s\n",
                s->o->instance, s->o->rank, ev->req_id, kvf_error_to_string(ev->error), ev->message);
}

/* An event that is not a request's end: a RELEASED counts down the held blocks. */
static bool side_event(struct sim *s, const struct kvf_event *ev)
{
    if (ev->kind != KVF_EV_RELEASED)
        return false;
    if (s->held > 0)
        s->held--;
    return true;
}

/* Before a window reuses the pools: the blocks of RECVs that ended held must be released (an
 * engine never reuses them sooner). -ETIMEDOUT after --event-wait-ms with none. */
static int wait_released(struct sim *s)
{
    while (s->held > 0) {
        struct kvf_event ev;
        int wait = s->o->event_wait_ms ? (int)s->o->event_wait_ms : 30000;
        if (kvf_poll(s->c, &ev, wait) <= 0) {
            fprintf(stderr, "kvferry-sim: no RELEASED within %d ms (%u held)\n", wait, s->held);
            sim_events_count(&s->ev, "stuck", "pending", s->held);
            return -ETIMEDOUT;
        }
        sim_events_event(&s->ev, &ev);
        side_event(s, &ev);
    }
    return 0;
}

static int run_window(struct sim *s, uint32_t w, uint64_t q0, uint32_t nq)
{
    uint32_t total_ids = 0;
    for (uint32_t g = 0; g < s->l.n_groups; g++)
        total_ids += s->l.groups[g].kind == GROUP_STATE ? 1 : s->n_blocks_req;
    uint32_t *ids = calloc((size_t)nq * (total_ids ? total_ids : 1), sizeof *ids);
    struct plan_ids *pids = calloc(nq, sizeof *pids);
    double *t_issue = calloc(2 * (size_t)nq, sizeof *t_issue); /* issued, then sent */
    uint8_t *ok = calloc(nq, 1);
    uint8_t *ended = calloc(nq, 1); /* a second end of a request is logged, not counted */
    uint32_t counts[LAYOUT_MAX_GROUPS];
    uint32_t pending = 0;
    char err[512];
    int ret = 0;
    if (!ids || !pids || !t_issue || !ok || !ended) {
        ret = -ENOMEM;
        goto out;
    }
    for (uint32_t j = 0; j < nq; j++) {
        uint64_t q = q0 + j;
        ids_for(s, w, j, ids + (size_t)j * total_ids, counts, &pids[j]);
        /* --parity first: later requests move whatever the pools hold, unchecked */
        if (s->o->parity_first && q != s->o->first_req)
            continue;
        if (!s->gen)
            pattern_fill(&s->l, &s->mem, &pids[j], 0, s->o->seed + q);
        else /* wrong bytes first, so a transfer that does not happen cannot pass */
            pattern_fill(&s->l, &s->mem, &pids[j], s->first_block, ~(s->o->seed + q));
    }
    if (s->cu && sim_cuda_push(s->cu, &s->mem, err, sizeof err)) {
        fprintf(stderr, "kvferry-sim: GPU pools: %s\n", err);
        ret = -EIO;
        goto out;
    }
    for (uint32_t j = 0; j < nq; j++) {
        uint64_t q = q0 + j;
        const uint32_t *jids = ids + (size_t)j * total_ids;
        for (uint32_t g = 0; g < s->l.n_groups; g++)
            counts[g] = pids[j].n[g];
        int rc;
        t_issue[j] = now_s();
        if (!s->gen) {
            rc = kvf_send(s->c, q, s->l.n_groups, counts, jids, s->o->readers);
        } else {
            struct kvf_recv_args a = {.req_id = q, .ctx_instance = s->o->ctx_instance,
                                      .ctx_home = s->o->ctx_home,
                                      .ctx_dp_rank = s->o->ctx_dp_rank,
                                      .deadline_ms = s->o->deadline_ms, .n_groups = s->l.n_groups,
                                      .counts = counts, .ids = jids,
                                      .tokens = s->o->send_tokens ? s->o->prompt_tokens : 0};
            rc = kvf_recv(s->c, &a);
        }
        t_issue[nq + j] = now_s();
        sim_events_call(&s->ev, "issue", q, rc);
        if (rc) {
            ended[j] = 1;
            fprintf(stderr, "kvferry-sim: request %" PRIu64 ": %s\n", q, strerror(-rc));
            s->failed++;
            continue;
        }
        pending++;
    }
    /* --cancel-pct: a seeded share of the requests cancelled at once (the harness's cancels) */
    for (uint32_t j = 0; s->o->cancel_pct && j < nq; j++)
        if (!ended[j] && mix(s->o->seed * 31u + q0 + j) % 100 < s->o->cancel_pct)
            sim_events_call(&s->ev, "cancel", q0 + j, kvf_cancel(s->c, q0 + j));
    while (pending > 0) {
        struct kvf_event ev;
        int wait = s->o->event_wait_ms ? (int)s->o->event_wait_ms : 30000;
        int rc = kvf_poll(s->c, &ev, wait);
        if (rc <= 0) {
            fprintf(stderr, "kvferry-sim: no event within %d ms (%u pending)\n", wait, pending);
            sim_events_count(&s->ev, "stuck", "pending", pending);
            ret = -ETIMEDOUT;
            goto out;
        }
        sim_events_event(&s->ev, &ev);
        if (side_event(s, &ev) || ev.req_id < q0 || ev.req_id >= q0 + nq || ended[ev.req_id - q0])
            continue; /* connection events, and an end already seen (logged above) */
        ended[ev.req_id - q0] = 1;
        pending--;
        if (ev.kind == KVF_EV_FAILED) {
            s->held += (ev.flags & KVF_EVF_HELD) != 0;
            record_fail(s, &ev);
            continue;
        }
        s->ok++;
        s->bytes += ev.bytes;
        uint32_t j = (uint32_t)(ev.req_id - q0);
        ok[j] = 1;
        if (s->o->stats_json && sim_stats_add(&s->st, ev.req_id, t_issue[j], t_issue[nq + j],
                                                 now_s()))
            fprintf(stderr, "kvferry-sim: latency record: out of memory\n");
    }
    if (s->gen && s->cu && sim_cuda_pull(s->cu, &s->mem, err, sizeof err)) {
        fprintf(stderr, "kvferry-sim: GPU pools: %s\n", err);
        ret = -EIO;
        goto out;
    }
    for (uint32_t j = 0; s->gen && j < nq; j++) {
        uint64_t q = q0 + j, off;
        uint32_t bp;
        char where[400];
        if (!ok[j] || (s->o->parity_first && q != s->o->first_req))
            continue;
        uint64_t tok = s->o->send_tokens ? s->o->prompt_tokens : 0;
        bool bad = pattern_verify_tokens(&s->l, &s->mem, &pids[j], s->first_block,
                                         s->o->seed + q, tok, &bp, &off, where, sizeof where) ||
                   (tok && pattern_verify_past(&s->l, &s->mem, &pids[j], s->first_block,
                                               ~(s->o->seed + q), tok, &bp, &off, where,
                                               sizeof where));
        sim_events_verify(&s->ev, q, !bad, where);
        if (bad) {
            if (s->parity_bad++ == 0)
                snprintf(s->first_bad, sizeof s->first_bad,
                         "request %" PRIu64 " pool %u offset %" PRIu64 ": %s", q, bp, off, where);
        }
        s->st.verified++;
    }
out:
    free(ended);
    free(ok);
    free(ids);
    free(pids);
    free(t_issue);
    return ret;
}

static int setup(struct sim *s, char *err, size_t errlen)
{
    const struct sim_opts *o = s->o;
    struct preset_spec ps;
    if (preset_parse(o->spec, &ps, err, errlen))
        return -EINVAL;
    uint32_t n = preset_n_ranks(&ps);
    if ((uint32_t)o->rank >= n) {
        snprintf(err, errlen, "--rank %d: the spec has %u ranks", o->rank, n);
        return -EINVAL;
    }
    int32_t dev;
    if (sim_cuda_device(o, &dev, err, errlen))
        return -EINVAL;
    struct layout *all = calloc(n, sizeof *all);
    if (!all || preset_build(&ps, o->instance, s->gen ? ROLE_GENERATION : ROLE_CONTEXT, dev, all,
                             err, errlen)) {
        free(all);
        return -EINVAL;
    }
    s->l = all[o->rank];
    free(all);
    uint64_t tpb = s->l.tokens_per_block;
    uint64_t n_ctx = (o->prompt_tokens + tpb - 1) / tpb;
    uint64_t cached = s->gen ? o->gen_cached_tokens / tpb : 0;
    if (cached > n_ctx) {
        snprintf(err, errlen, "--gen-cached-tokens covers more than the prompt");
        return -EINVAL;
    }
    s->n_blocks_req = (uint32_t)(n_ctx - cached);
    s->first_block = (uint32_t)cached;
    s->window = UINT32_MAX;
    for (uint32_t g = 0; g < s->l.n_groups; g++) {
        const struct layout_group *gr = &s->l.groups[g];
        uint32_t fit = gr->kind == GROUP_STATE ? gr->n_items
                       : s->n_blocks_req ? gr->n_items / s->n_blocks_req : UINT32_MAX;
        if (fit < s->window)
            s->window = fit;
    }
    if (s->window == 0) {
        snprintf(err, errlen, "a request of %" PRIu64 " blocks does not fit the pools", n_ctx);
        return -EINVAL;
    }
    int rc = make_pools(s);
    if (rc) {
        snprintf(err, errlen, "memfd pools: %s", strerror(-rc));
        return rc;
    }
    if (dev >= 0 && (rc = sim_cuda_new(&s->l, dev, &s->cu, err, errlen)))
        return rc; /* sim_cuda_new frees what it made */
    char name[64];
    snprintf(name, sizeof name, "sim %s r%d", o->instance, o->rank);
    /* held ends: the windows wait for their RELEASED before reusing blocks (wait_released) */
    struct kvf_options ko = {.name = name, .home = o->home, .held_events = 1};
    if ((rc = kvf_connect(o->socket, &ko, &s->c))) {
        snprintf(err, errlen, "connect: %s", strerror(-rc));
        return rc;
    }
    char *json = layout_to_json(&s->l);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    memset(pools, 0, sizeof pools);
    for (uint32_t i = 0; i < s->l.n_pools; i++)
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = s->l.pools[i].bytes, .fd = s->fds[i]};
    if (s->cu)
        sim_cuda_pools(s->cu, &s->l, pools);
    rc = json ? kvf_register(s->c, json, pools, s->l.n_pools, err, errlen) : -ENOMEM;
    free(json);
    return rc;
}

/* SIGUSR1 is blocked since main (--start-on-signal, --step-on-signal): one sent early waits. */
static void wait_usr1(void)
{
    sigset_t usr1;
    int sig;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigwait(&usr1, &sig);
}

int sim_run(const struct sim_opts *o)
{
    struct sim s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.gen = strcmp(o->role, "generation") == 0;
    for (int i = 0; i < LAYOUT_MAX_POOLS; i++)
        s.fds[i] = -1;
    char err[512] = "";
    int code = 0;
    int rc = sim_events_open(&s.ev, o->events, o->rank);
    if (rc) {
        fprintf(stderr, "kvferry-sim: --events %s: %s\n", o->events, strerror(-rc));
        return 4;
    }
    sim_events_start(&s.ev, o);
    if (setup(&s, err, sizeof err)) {
        fprintf(stderr, "kvferry-sim %s rank %d: %s\n", o->instance, o->rank, err);
        sim_events_note(&s.ev, "setup_failed", err);
        code = 4;
        goto out;
    }
    sim_events_note(&s.ev, "registered", NULL);
    if (o->start_on_signal)
        wait_usr1();
    if (o->start_delay_ms)
        usleep(o->start_delay_ms * 1000u);
    double t0 = now_s();
    s.st.t0 = t0;
    s.st.o = o;
    if (o->n_cpu_pids)
        sim_stats_cpu_sample(&s.st, 0);
    for (uint32_t w = 0, done = 0; done < o->requests; w++) {
        uint32_t nq = o->requests - done < s.window ? o->requests - done : s.window;
        if (o->step_on_signal) {
            nq = 1;
            if (w > 0)
                wait_usr1();
        }
        if (wait_released(&s) || run_window(&s, w, o->first_req + done, nq)) {
            code = 3;
            break;
        }
        done += nq;
        if (o->n_cpu_pids && sim_stats_cpu_sample(&s.st, done))
            fprintf(stderr, "kvferry-sim: cpu sample: out of memory\n");
    }
    double dt = now_s() - t0;
    if (o->hold_pid)
        hold_while(o->hold_pid, o->hold_ms ? (int)o->hold_ms : 120000);
    else if (o->hold_ms)
        usleep(o->hold_ms * 1000u);
    printf("kvferry-sim %s %s rank %d: requests %u ok %" PRIu64 " failed %" PRIu64 " bytes %" PRIu64
           " time %.3f s throughput %.2f GB/s parity %s%s%s\n",
           o->role, o->instance, o->rank, o->requests, s.ok, s.failed, s.bytes, dt,
           dt > 0 ? s.bytes / dt / 1e9 : 0.0,
           !s.gen ? "n/a" : s.parity_bad ? "FAILED" : s.ok ? "OK" : "none",
           s.parity_bad ? ": first difference: " : "", s.parity_bad ? s.first_bad : "");
    if (o->stats_json) {
        s.st.o = o;
        s.st.gen = s.gen;
        s.st.ok = s.ok;
        s.st.failed = s.failed;
        s.st.bytes = s.bytes;
        s.st.parity_bad = s.parity_bad;
        s.st.time_s = dt;
        rc = sim_stats_write(&s.st);
        if (rc) {
            fprintf(stderr, "kvferry-sim: --stats-json %s: %s\n", o->stats_json, strerror(-rc));
            if (code == 0)
                code = 4;
        }
    }
    for (int e = 1; e < KVF_E__COUNT; e++)
        if (s.fail_by[e])
            printf("  failures %s: %" PRIu64 "\n", kvf_error_to_string(e), s.fail_by[e]);
    fflush(stdout);
    if (s.parity_bad)
        code = 1;
    else if (code == 0 && o->expect_error) {
        int want = kvf_error_from_string(o->expect_error);
        if (s.ok != 0 || s.fail_by[want] != o->requests)
            code = 3;
    } else if (code == 0 && s.failed)
        code = 3;
out:
    sim_events_exit(&s.ev, code, s.ok, s.failed, s.parity_bad);
    sim_events_close(&s.ev);
    s.c = kvf_close(s.c);
    /* GPU pools (s.cu) are left to process exit: the daemon closes its mapping of them only
     * after it sees our connection end, and cudaFree before the importer's
     * cudaIpcCloseMemHandle is undefined (CUDA runtime API); exiting is the path of a crashed
     * worker, which the daemon is built for. */
    free(s.st.t);
    free(s.st.cpu);
    free(s.st.cpu_req);
    free(s.st.req);
    for (uint32_t i = 0; i < s.mem.n; i++)
        if (s.mem.base[i])
            munmap(s.mem.base[i], s.mem.size[i]);
    for (int i = 0; i < LAYOUT_MAX_POOLS; i++)
        if (s.fds[i] >= 0)
            close(s.fds[i]);
    return code;
}
