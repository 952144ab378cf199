/* check_gpu_remote.c: the bounce path with GPU pools, end to end (issue 6): two real kvferryd
 * daemons on one host (127.0.0.1, shared secret, UCX shared memory between them), real
 * kvferry-sim processes whose pools are cudaMalloc allocations registered by CUDA IPC handle:
 * the context instance on GPU 0 under daemon A (its home), the generation instance on GPU 1
 * under daemon B. Each chunk goes GPU pools -> gather kernel -> B's page-locked landing slot,
 * through B's arena mapped in A over shared memory and page-locked there (arena.shm_write copy,
 * the default) -> scatter kernel -> GPU pools; with arena.shm_write put (the staged cases) the
 * gather writes A's page-locked staging slot and a UCX put moves it. The generation ranks read
 * every byte back from their GPU and check it against the global pattern ("parity OK").
 * Cases: tiny TP1->TP1, kimi-linear-48b TP2->TP2 and TP4->TP2 (fan-in with state), kimi-k3
 * TP1->TP1 one 8k-token request (wall time and GB/s printed), and a request larger than the
 * arena (chunked through few slots); the TP2, fan-in and larger-than-the-arena cases once more
 * staged. Each case also checks that both arenas are page-locked, that every byte went through
 * the kernels on both sides (gathered = scattered = landed), that every chunk took the path the
 * case asked for (into B's slots by kernels with B's arena pinned in A once, or staging + put),
 * that GPU pools took the bounce path by that reason, and that slots and GPU mappings come back.
 * KVF_GPU_REMOTE_BOUNCE_COPY=kernels|engines (device-check, bench-gpu-remote) sets both daemons'
 * gpu.bounce_copy (default engines: copy engines cross PCIe, daemon/engine/bounce_ce.h), and
 * both arenas must say which way the chunks go.
 * Without CUDA or without a GPU: "SKIP: why", exit 77; with one GPU both sides use GPU 0 (said
 * so). The test process never initialises CUDA (its probe runs in a child): Check forks. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pool.h"
#include "integration/remoteutil.h"

#ifdef KVF_HAVE_CUDA

static int n_gpus;
static const char *gen_dev = "1";

/* Long deadlines: CUDA start-up in each rank and pattern fills of large kimi-k3 pools. */
#define GR_DEADLINES "deadlines:\n  send_wait: 60s\n  transfer: 60s\n  lookup: 60s\n"

#define K48 "kimi-linear-48b"
#define K48S "blocks=16,slots=2"
#define K3 "kimi-k3"

struct gcase {
    const char *name, *ctx, *gen, *prompt, *requests;
    const char *arena; /* YAML arena section, or NULL for the defaults (512 MiB, 32 MiB) */
    int wait_sends;    /* start the generation side once every context SEND waits (timing) */
    int staged;        /* arena.shm_write put: staging slot + put (else into the peer's slot) */
};

#define STAGED_ARENA "arena:\n  shm_write: put\n"

/* The timing case's path, for scripts/bench-gpu-remote's A/B: KVF_GPU_REMOTE_SHM_WRITE=put
 * stages through A's arena, anything else writes B's landing slots from the kernels. */
static int timing_staged(void)
{
    const char *v = getenv("KVF_GPU_REMOTE_SHM_WRITE");
    return v && strcmp(v, "put") == 0;
}

/* The last n bytes of a file (malloc'd), for failure messages. */
static char *tail_file(const char *path, size_t n)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, n + 1);
    if (!f || !buf) {
        if (f)
            fclose(f);
        return buf;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, len > (long)n ? len - (long)n : 0, SEEK_SET);
    size_t got = fread(buf, 1, n, f);
    buf[got] = 0;
    fclose(f);
    return buf;
}

/* kvferry-sim with args (NULL-terminated) plus --socket sock; output into path. */
static pid_t sim(const char *sock, const char *path, ...)
{
    char bin[256];
    tu_bin("kvferry-sim", bin, sizeof bin);
    const char *av[48];
    int n = 0;
    av[n++] = bin;
    va_list ap;
    va_start(ap, path);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 44)
        av[n++] = a;
    va_end(ap);
    av[n++] = "--socket";
    av[n++] = sock;
    av[n] = NULL;
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(bin, (char *const *)av);
        _exit(127);
    }
    return p;
}

static int wait_exit(pid_t p, unsigned ms)
{
    uint64_t end = ru_now_ms() + ms;
    int st;
    for (;;) {
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (ru_now_ms() > end) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            return -1;
        }
        ru_sleep_ms(5);
    }
}

/* How many generation ranks read each context rank (the remote path serves a SEND once per
 * reading flow), planned here from the presets' layouts. */
static void readers_of(const char *cs, const char *gs, uint32_t *readers, uint32_t *n_ctx)
{
    struct preset_spec cps, gps;
    char err[256];
    ck_assert_msg(preset_parse(cs, &cps, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_parse(gs, &gps, err, sizeof err) == 0, "%s", err);
    uint32_t nc = preset_n_ranks(&cps), ng = preset_n_ranks(&gps);
    struct layout *cl = calloc(nc, sizeof *cl), *gl = calloc(ng, sizeof *gl);
    ck_assert_ptr_nonnull(cl);
    ck_assert_ptr_nonnull(gl);
    ck_assert_msg(preset_build(&cps, "ctx", ROLE_CONTEXT, -1, cl, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_build(&gps, "gen", ROLE_GENERATION, -1, gl, err, sizeof err) == 0, "%s",
                  err);
    static const uint32_t zero[1] = {0};
    for (uint32_t g = 0; g < ng; g++) {
        struct plan_input pin = {.gen = &gl[g], .ctx = cl, .n_ctx = nc, .ctx_dp_rank = -1};
        for (uint32_t k = 0; k < gl[g].n_groups; k++) {
            pin.gen_ids.n[k] = 1;
            pin.gen_ids.ids[k] = zero;
        }
        struct plan p;
        struct plan_error pe;
        ck_assert_msg(plan_build(&pin, &p, &pe) == 0, "%s -> %s: %s", cs, gs, pe.message);
        for (uint32_t w = 0; w < p.n_writers; w++)
            readers[p.writers[w].ctx_rank]++;
        plan_done(&p);
    }
    *n_ctx = nc;
    free(cl);
    free(gl);
}

static long long jint(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(b ? json_object_get(o, a) : o, b ? b : a);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Sends waiting at daemon d (transfers rows of side "send"). */
static int sends_waiting(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "transfers");
    json_t *a = json_object_get(r, "transfers"), *row;
    size_t i;
    int n = 0;
    json_array_foreach(a, i, row)
        n += json_string_value(json_object_get(row, "side")) &&
             strcmp(json_string_value(json_object_get(row, "side")), "send") == 0;
    json_decref(r);
    return n;
}

/* Whether daemon d is the complete home of instance "ctx" (every rank registered). */
static bool ctx_complete(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "workers");
    json_t *a = json_object_get(r, "instances"), *row;
    size_t i;
    bool done = false;
    json_array_foreach(a, i, row)
        done |= json_string_value(json_object_get(row, "id")) &&
                strcmp(json_string_value(json_object_get(row, "id")), "ctx") == 0 &&
                json_is_true(json_object_get(row, "home"));
    json_decref(r);
    return done;
}

/* Waits up to ms for daemon d's open GPU mappings to reach 0; returns the count. */
static long long mappings_drain(const struct ru_daemon *d, unsigned ms)
{
    uint64_t end = ru_now_ms() + ms;
    long long n;
    for (;;) {
        json_t *s = ru_ctl(d, "status");
        n = jint(json_object_get(s, "gpu"), "mappings", "count");
        json_decref(s);
        if (n == 0 || ru_now_ms() > end)
            return n;
        ru_sleep_ms(20);
    }
}

/* A failed expectation is recorded, not asserted at once: the daemons are stopped first (they
 * are not children that die with a failed test). */
#define EXPECT(cond, ...)                                                                         \
    do {                                                                                          \
        if (!(cond) && !fail[0])                                                                  \
            snprintf(fail, sizeof fail, __VA_ARGS__);                                             \
    } while (0)

/* gpu.bounce_copy of both daemons: KVF_GPU_REMOTE_BOUNCE_COPY, else the default. */
static const char *bounce_copy(void)
{
    const char *s = getenv("KVF_GPU_REMOTE_BOUNCE_COPY");
    return s && strcmp(s, "kernels") == 0 ? "kernels" : "engines";
}

/* scripts/bench-gpu-remote's profile: with KVF_GPU_REMOTE_TIMELINE=N (the daemons' arena.timeline,
 * bounce_tl.h) and KVF_GPU_REMOTE_TIMELINE_OUT=PATH, the timing case writes both daemons' events
 * and GPU completion counters (status gpu.completions: the completion spin's share) to PATH as
 * {"A": ..., "B": ..., "gpu_A": ..., "gpu_B": ...}. */
static void dump_timeline(const struct gcase *c, const struct two *t, json_t *aa, json_t *ab)
{
    const char *out = getenv("KVF_GPU_REMOTE_TIMELINE_OUT");
    if (!c->wait_sends || !out || !*out)
        return;
    json_t *sa = ru_ctl(&t->a, "status"), *sb = ru_ctl(&t->b, "status");
    json_t *o = json_pack("{s:O?,s:O?,s:O?,s:O?}", "A", json_object_get(aa, "bounce_timeline"),
                          "B", json_object_get(ab, "bounce_timeline"), "gpu_A",
                          json_object_get(json_object_get(sa, "gpu"), "completions"), "gpu_B",
                          json_object_get(json_object_get(sb, "gpu"), "completions"));
    if (!o || json_dump_file(o, out, JSON_COMPACT) < 0)
        fprintf(stderr, "%s: could not write the timeline to %s\n", c->name, out);
    json_decref(o);
    json_decref(sa);
    json_decref(sb);
}

static void run_case(const struct gcase *c)
{
    char extra[1024], fail[1024] = "";
    uint32_t readers[64] = {0}, n_ctx = 0;
    readers_of(c->ctx, c->gen, readers, &n_ctx);
    for (uint32_t r = 0; r < n_ctx; r++)
        ck_assert_uint_gt(readers[r], 0);
    const char *tl = getenv("KVF_GPU_REMOTE_TIMELINE");
    char tl_line[64] = "";
    if (c->wait_sends && tl && *tl)
        snprintf(tl_line, sizeof tl_line, "arena.timeline: %d\n", atoi(tl));
    /* KVF_GPU_REMOTE_CONFIG: more config lines for the timing case (a benchmark's variants:
     * "arena.size: 2GiB\narena.chunk: 64MiB") */
    const char *more = c->wait_sends ? getenv("KVF_GPU_REMOTE_CONFIG") : NULL;
    snprintf(extra, sizeof extra, "%s%sgpu.bounce_copy: %s\n%s%s%s", GR_DEADLINES,
             c->arena ? c->arena : c->staged ? STAGED_ARENA : "", bounce_copy(), tl_line,
             more ? more : "", more && *more ? "\n" : "");
    struct two t;
    two_start(&t, extra, extra, NULL);
    int dev_arenas = 0; /* a CUDA-aware UCX gives both a device arena (bounce_dev.h) */
    for (int side = 0; side < 2; side++) { /* both arenas page-locked, and status says why */
        json_t *a = ru_ctl(side ? &t.b : &t.a, "arena");
        dev_arenas += json_integer_value(json_object_get(a, "device_arena_bytes")) > 0;
        fprintf(stderr, "%s: daemon %c device arena: %s\n", c->name, side ? 'B' : 'A',
                json_string_value(json_object_get(a, "device_arena_why")));
        const char *why = json_string_value(json_object_get(a, "why"));
        const char *place = json_string_value(json_object_get(a, "placement"));
        EXPECT(json_is_true(json_object_get(a, "pinned_for_gpu")) && why &&
                   strstr(why, "page-locked for CUDA") && place && strcmp(place, "host") == 0,
               "daemon %c arena: placement %s, why: %s", side ? 'B' : 'A', place ? place : "-",
               why ? why : "(none)");
        const char *way = strcmp(bounce_copy(), "kernels") ? "by copy engines" : "by the kernels";
        EXPECT(why && strstr(why, way), "daemon %c: gpu.bounce_copy %s, but the arena says: %s",
               side ? 'B' : 'A', bounce_copy(), why ? why : "(none)");
        json_decref(a);
    }
    pid_t cp[64];
    char logs[64][320], rb[16], rk[16], glog[320];
    for (uint32_t r = 0; r < n_ctx && !fail[0]; r++) { /* one process per rank: its readers */
        snprintf(rb, sizeof rb, "%u", readers[r]);
        snprintf(rk, sizeof rk, "%u", r);
        tu_fmt(logs[r], sizeof logs[r], "%s/ctx%u.log", t.top, r);
        cp[r] = sim(t.a.worker, logs[r], "--role", "context", "--instance", "ctx", "--spec",
                    c->ctx, "--rank", rk, "--requests", c->requests, "--prompt-tokens", c->prompt,
                    "--readers", rb, "--devices", "0", (char *)NULL);
    }
    /* the generation side starts once every context rank registered (its home refuses a
     * request for an instance not yet complete: UNKNOWN_INSTANCE), and for the timing case once
     * every context SEND waits, so the wall time is the move's */
    if (!fail[0]) {
        uint64_t end = ru_now_ms() + 90000;
        while (!(c->wait_sends ? sends_waiting(&t.a) == (int)n_ctx : ctx_complete(&t.a)) &&
               ru_now_ms() < end)
            ru_sleep_ms(20);
        EXPECT(c->wait_sends ? sends_waiting(&t.a) == (int)n_ctx : ctx_complete(&t.a),
               "the context ranks did not %s within 90 s", c->wait_sends ? "SEND" : "register");
    }
    pid_t gp = 0;
    tu_fmt(glog, sizeof glog, "%s/gen.log", t.top);
    if (!fail[0])
        gp = sim(t.b.worker, glog, "--role", "generation", "--instance", "gen", "--spec", c->gen,
                 "--all-ranks", "--requests", c->requests, "--prompt-tokens", c->prompt,
                 "--ctx-instance", "ctx", "--ctx-home", t.a.addr, "--devices", gen_dev,
                 (char *)NULL);
    int gq = gp > 0 ? wait_exit(gp, 180000) : -1;
    char *gl = tail_file(glog, 3000);
    EXPECT(gq == 0 && strstr(gl, "parity OK") && !strstr(gl, "FAILED"),
           "generation exit %d, no parity OK (log above)", gq);
    if (gq != 0 || !strstr(gl, "parity OK"))
        fprintf(stderr, "%s: generation exit %d:\n%s\n", c->name, gq, gl);
    for (uint32_t r = 0; r < n_ctx && gp > 0; r++) {
        int rc = wait_exit(cp[r], 60000);
        if (rc != 0) {
            char *cl = tail_file(logs[r], 1500);
            fprintf(stderr, "%s: context rank %u exit %d:\n%s\n", c->name, r, rc, cl);
            free(cl);
        }
        EXPECT(rc == 0, "context rank %u exit %d (log above)", r, rc);
    }
    free(gl);
    json_t *sa = ru_ctl(&t.a, "stats"), *sb = ru_ctl(&t.b, "stats");
    json_t *pa = json_object_get(sa, "peers"), *pb = json_object_get(sb, "peers");
    long long gathered = jint(pa, "bytes_gpu_gathered", NULL);
    long long scattered = jint(pb, "bytes_gpu_scattered", NULL);
    long long landed = jint(pb, "bytes_landed", NULL), chunks = jint(pb, "chunks_landed", NULL);
    long long wall_us = jint(pb, "last_remote_wall_us", NULL);
    long long bytes = jint(pb, "last_remote_bytes", NULL);
    fprintf(stderr,
            "%s: gathered %lld B in %lld kernels (A), scattered %lld B in %lld kernels (B), "
            "%lld chunks landed, written into B's slots by kernels %lld, puts %lld, active "
            "messages %lld (from its device arena %lld, landed in B's %lld); B's arena "
            "page-locked in A %lld time(s)\n",
            c->name, gathered, jint(pa, "gpu_gathers", NULL), scattered,
            jint(pb, "gpu_scatters", NULL), chunks, jint(pa, "chunk_gpu_to_peer", NULL),
            jint(pa, "chunks_put", NULL), jint(pa, "chunks_am", NULL),
            jint(pa, "chunks_device", NULL), jint(pb, "chunks_landed_device", NULL),
            jint(pa, "peer_arenas_pinned", NULL));
    /* the path the case asked for took every chunk; device to device wherever both daemons
     * have a device arena (a CUDA-aware UCX: the chunks never touch host memory) */
    if (dev_arenas == 2)
        EXPECT(jint(pa, "chunks_device", NULL) == chunks &&
                   jint(pb, "chunks_landed_device", NULL) == chunks &&
                   jint(pa, "chunks_put", NULL) == 0,
               "device arenas on both sides: %lld of %lld chunks sent from A's, %lld landed in "
               "B's, %lld puts", jint(pa, "chunks_device", NULL), chunks,
               jint(pb, "chunks_landed_device", NULL), jint(pa, "chunks_put", NULL));
    else if (c->staged)
        EXPECT(jint(pa, "chunk_gpu_to_peer", NULL) == 0 && jint(pa, "chunks_put", NULL) == chunks,
               "staged (arena.shm_write put): %lld chunks into B's slots by kernels, %lld puts, "
               "%lld landed", jint(pa, "chunk_gpu_to_peer", NULL), jint(pa, "chunks_put", NULL),
               chunks);
    else
        EXPECT(jint(pa, "chunk_gpu_to_peer", NULL) == chunks &&
                   jint(pa, "peer_arenas_pinned", NULL) == 1 &&
                   jint(pa, "peer_arena_pin_failures", NULL) == 0,
               "into B's slots: %lld of %lld chunks by kernels, %lld puts, B's arena pinned %lld "
               "time(s), %lld pin failures", jint(pa, "chunk_gpu_to_peer", NULL), chunks,
               jint(pa, "chunks_put", NULL), jint(pa, "peer_arenas_pinned", NULL),
               jint(pa, "peer_arena_pin_failures", NULL));
    /* every byte through the kernels on both sides, nothing failed, GPU pools forced bounce */
    EXPECT(gathered > 0 && gathered == scattered && scattered == landed,
           "bytes gathered %lld, scattered %lld, landed %lld", gathered, scattered, landed);
    EXPECT(jint(pa, "gpu_failures", NULL) == 0 && jint(pb, "gpu_failures", NULL) == 0,
           "GPU failures: A %lld, B %lld", jint(pa, "gpu_failures", NULL),
           jint(pb, "gpu_failures", NULL));
    EXPECT(jint(pa, "flows_failed", NULL) == 0 && jint(pb, "remote_failed", NULL) == 0,
           "flows failed %lld, requests failed %lld", jint(pa, "flows_failed", NULL),
           jint(pb, "remote_failed", NULL));
    json_t *paths = json_object_get(pb, "paths");
    EXPECT(jint(paths, "bounce_gpu_pools", NULL) > 0 &&
               jint(paths, "fragment_state_below_min_bytes", NULL) == 0,
           "paths: bounce_gpu_pools %lld, fragment %lld", jint(paths, "bounce_gpu_pools", NULL),
           jint(paths, "fragment_state_below_min_bytes", NULL));
    if (c->arena) /* larger than the arena: slots were reused (12 landing slots there) */
        EXPECT(chunks > 12, "%lld chunks through 12 landing slots", chunks);
    if (!fail[0] && c->wait_sends && wall_us > 0)
        printf("%s through two kvferryd (GPU 0 -> %s -> GPU %s): "
               "%lld bytes (%.1f MiB), wall %.3f ms (RECV to DONE), %.2f GB/s\n",
               c->name,
               c->staged ? "A's pinned staging -> UCX put -> B's pinned arena"
                         : "B's pinned landing slot (mapped in A)",
               gen_dev, bytes, bytes / 1048576.0, wall_us / 1e3, bytes / (wall_us * 1e3));
    json_decref(sa);
    json_decref(sb);
    if (!fail[0]) { /* slots and mappings come back */
        long long ma = mappings_drain(&t.a, 10000), mb = mappings_drain(&t.b, 10000);
        EXPECT(ma == 0 && mb == 0, "GPU mappings left open: A %lld, B %lld", ma, mb);
        json_t *ab = ru_ctl(&t.b, "arena"), *aa = ru_ctl(&t.a, "arena");
        EXPECT(jint(ab, "slots_in_use", NULL) == 0 && jint(ab, "quarantined_slots", NULL) == 0 &&
                   jint(json_object_get(aa, "staging"), "slots_in_use", NULL) == 0,
               "slots left: landing %lld in use, %lld quarantined; staging %lld in use",
               jint(ab, "slots_in_use", NULL), jint(ab, "quarantined_slots", NULL),
               jint(json_object_get(aa, "staging"), "slots_in_use", NULL));
        dump_timeline(c, &t, aa, ab);
        json_decref(ab);
        json_decref(aa);
    }
    two_stop(&t, !fail[0]);
    ck_assert_msg(!fail[0], "%s: %s -> %s: %s", c->name, c->ctx, c->gen, fail);
}

static const struct gcase cases[] = {
    {"tiny_tp1_to_tp1", "tiny", "tiny", "300", "2", NULL, 0, 0},
    {"k48_tp2_to_tp2", K48 ":tp=2," K48S, K48 ":tp=2," K48S, "300", "2", NULL, 0, 0},
    {"k48_tp4_to_tp2_fanin", K48 ":tp=4," K48S, K48 ":tp=2," K48S, "300", "2", NULL, 0, 0},
    {"k48_tp2_to_tp2_staged", K48 ":tp=2," K48S, K48 ":tp=2," K48S, "300", "2", NULL, 0, 1},
    {"k48_tp4_to_tp2_fanin_staged", K48 ":tp=4," K48S, K48 ":tp=2," K48S, "300", "2", NULL, 0, 1},
};

START_TEST(gpu_remote_parity_through_two_daemons)
{
    run_case(&cases[_i]);
}
END_TEST

START_TEST(gpu_remote_kimi_k3_8k_request_tp1_wall_time)
{
    struct gcase k8 = {"kimi-k3 8k tokens TP1", K3 ":blocks=128,slots=1",
                       K3 ":blocks=128,slots=1", "8192", "1", NULL, 1, timing_staged()};
    run_case(&k8); /* about 649 MiB through 512 MiB arenas of 32 MiB chunks */
}
END_TEST

START_TEST(gpu_remote_request_larger_than_the_arena_is_chunked)
{
    /* kimi-linear-48b TP1, about 42 MiB + KV, through 16 MiB arenas of 1 MiB chunks (12 landing
     * slots, 4 staging): every slot is reused many times */
    static const struct gcase big = {"k48_tp1_larger_than_arena", K48 ":" K48S, K48 ":" K48S,
                                     "300", "2", "arena:\n  size: 16MiB\n  chunk: 1MiB\n", 0, 0};
    static const struct gcase big_staged = {
        "k48_tp1_larger_than_arena_staged", K48 ":" K48S, K48 ":" K48S, "300", "2",
        "arena:\n  size: 16MiB\n  chunk: 1MiB\n  shm_write: put\n", 0, 1};
    run_case(_i ? &big_staged : &big);
}
END_TEST

/* GPU count in a child process (CUDA must not be initialised before Check forks). */
static int probe(char *why, size_t len)
{
    int p[2];
    if (pipe(p) < 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char err[256] = "";
        int n = cuda_pool_device_count(err, sizeof err);
        if (n == 0)
            snprintf(err, sizeof err, "no CUDA device");
        (void)!write(p[1], &n, sizeof n);
        (void)!write(p[1], err, sizeof err);
        _exit(0);
    }
    close(p[1]);
    int n = -1;
    char err[256] = "probe child died";
    if (read(p[0], &n, sizeof n) != sizeof n || read(p[0], err, sizeof err) != sizeof err)
        n = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    snprintf(why, len, "%s", err);
    return n;
}

int main(void)
{
    char why[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    n_gpus = probe(why, sizeof why);
    if (n_gpus <= 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    if (n_gpus < 2) {
        gen_dev = "0";
        printf("SKIP (part): one GPU: the generation side runs on GPU 0 too\n");
    }
    Suite *s = suite_create("gpu_remote");
    TCase *tc = tcase_create("bounce");
    tcase_set_timeout(tc, 280);
    tcase_add_loop_test(tc, gpu_remote_parity_through_two_daemons, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_loop_test(tc, gpu_remote_request_larger_than_the_arena_is_chunked, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("timing"); /* scripts/bench-gpu-remote runs it alone (CK_RUN_CASE) */
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, gpu_remote_kimi_k3_8k_request_tp1_wall_time);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

#else /* !KVF_HAVE_CUDA */

int main(void)
{
    printf("SKIP: this build has no CUDA (CUDA=0): GPU pools cannot be registered\n");
    return 77;
}

#endif
