/* remoteutil.h: a harness for the two-daemon tests (bodies in tests/support/remoteutil.c).
 * It runs real kvferryd processes (build/kvferryd) from temp configs in a private temp dir,
 * listening for peers on 127.0.0.1 at a random port of the ephemeral range with a shared 0600
 * secret file, and real ranks through libkvferry (host pools in memfds) built from presets and
 * filled with the global test pattern. Same host: UCX may use shared memory between the daemons
 * (UCX_TLS=sm,tcp: RU_TLS_SAME_HOST), which is the put path; ru_daemon_start_tls pins another
 * UCX_TLS (e.g. "tcp") for the active-message path. A control-socket helper asks the daemons for
 * JSON. */
#ifndef KVF_REMOTEUTIL_H
#define KVF_REMOTEUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jlist.h"
#include "kvferry.h"
#include "pattern.h"
#include "plan.h"
#include "preset.h"
#include "ready.h"
#include "testutil.h"

#define RU_POISON 0xa5
/* Same host, same network namespace: shared memory for puts and rendezvous, tcp for the
 * connection by address (docs/UCX.md trap 5). Tests that want the active-message path pass
 * "tcp" (what two hosts on Ethernet get). */
#define RU_TLS_SAME_HOST "sm,tcp" /* KVF_TEST_UCX_TLS in the environment replaces it */

struct ru_daemon {
    pid_t pid;
    char dir[256]; /* its sockets and config */
    char cfg[300], log[300];
    char worker[TU_SUN_PATH_MAX + 1], control[TU_SUN_PATH_MAX + 1];
    uint16_t port;          /* 0: no listener */
    char addr[64];          /* "127.0.0.1:port" */
    struct tr_notify ready; /* its NOTIFY_SOCKET, open while it runs */
};

uint64_t ru_now_ms(void);

/* Address daemons started next listen on (default "127.0.0.1"; a namespace's own address for
 * a daemon started inside a network namespace). */
extern const char *ru_listen_host;
/* Network namespace (a name under /run/netns) daemons started next run in, through `ip netns
 * exec` (which also gives them that namespace's /sys); NULL (default): ours. */
extern const char *ru_netns;

/* kvf_options.held_events of the ranks registered next (default 0). */
extern int ru_held_events;

void ru_sleep_ms(unsigned ms);

/* A 0600 secret file under dir (content from seed). */
void ru_secret(const char *dir, const char *name, unsigned seed, char *path, size_t len);

/* Starts a daemon in top/<name> and waits for its READY=1. listen: 1 for a listener on a random
 * port. extra: more YAML (top-level sections, may be NULL). tls: UCX_TLS for the daemon or NULL.
 * Retries other ports when the port is taken (the daemon exits before READY). */
int ru_daemon_start_tls(struct ru_daemon *d, const char *top, const char *name, int listen,
                        const char *secret, const char *extra, const char *tls);

int ru_daemon_start(struct ru_daemon *d, const char *top, const char *name, int listen,
                    const char *secret, const char *extra);

/* Starts kvferryd again with d's config (its address, dir and log) after it stopped or was
 * killed: a new incarnation at the same address. 0, or -1 with no daemon running. */
int ru_daemon_restart(struct ru_daemon *d);
int ru_daemon_launch(struct ru_daemon *d, const char *tls); /* ru_daemon_start_tls's exec */

/* SIGTERM (drain) and wait; returns the exit status (0 when already stopped), or -1. */
int ru_daemon_stop(struct ru_daemon *d);

void ru_daemon_kill9(struct ru_daemon *d);

/* Starts argv[0] (kvferry-sim) with argv; its stdout goes to /dev/null unless
 * KVF_TEST_VERBOSE is set. Returns its pid. */
pid_t ru_run_sim(char *const argv[]);

/* Prints the daemon's log (for a failing test). */
void ru_dump_log(const struct ru_daemon *d, const char *what);

/* One control command; returns the "result" object (new reference) or NULL. */
json_t *ru_ctl(const struct ru_daemon *d, const char *cmd);

/* The integer at a dotted path ("staging.held.slots") inside a control result, or -1. */
long long ru_ctl_int(const struct ru_daemon *d, const char *cmd, const char *key);

/* stats.peers.<key> of daemon d, or -1. */
long long ru_peers_stat(const struct ru_daemon *d, const char *key);

/* Waits (asking every 20 ms, at most ms scaled by tu_ms) until d's arenas hold nothing: no
 * landing or staging slot in use or quarantined, no staging held; else dumps d's log and fails
 * the test naming what (a fault that healed must leave nothing behind). */
void ru_wait_arenas_idle(const struct ru_daemon *d, const char *what, unsigned ms);

/* Waits (asking every 10 ms) until stats.peers.<key> of d reaches at least want; fails the
 * test after ms. */
void ru_wait_peers_stat(const struct ru_daemon *d, const char *key, long long want, unsigned ms);

/* Waits (asking every 10 ms) until result[key] of cmd at d lists an object with f1 = v1 and
 * f2 = v2 (tj_lists); fails the test after ms. */
void ru_wait_listed(const struct ru_daemon *d, const char *cmd, const char *key, const char *f1,
                    const char *v1, const char *f2, const char *v2, unsigned ms);

/* ---- ranks ---- */

struct ru_rank {
    struct layout l;
    struct kvf_client *c;
    struct copy_mem mem; /* mmaps of the memfds */
    int fds[LAYOUT_MAX_POOLS];
    uint32_t counts[LAYOUT_MAX_GROUPS];
    uint32_t *ids; /* concatenated, owned */
    uint32_t n_ids;
    struct plan_ids pids; /* into ids */
};

struct ru_inst {
    struct preset_spec spec;
    uint32_t n;
    struct ru_rank *r;
};

uint64_t ru_rand(uint64_t *s);

/* Builds ranks of the given layouts (n, copied) with memfd pools (filled with `fill`) and a
 * request of n_blocks distinct random blocks per paged group and one random slot per state
 * group. */
void ru_inst_init_layouts(struct ru_inst *in, const struct layout *ls, uint32_t n_ranks,
                          uint32_t n_blocks, uint64_t *rng, int fill);

/* ru_inst_init_layouts of a preset spec's ranks. */
void ru_inst_init(struct ru_inst *in, const char *spec, const char *id, layout_role_t role,
                  uint32_t n_blocks, uint64_t *rng, int fill);

/* Connects and registers rank i with daemon d, naming home (NULL: d itself). */
void ru_rank_register(struct ru_inst *in, uint32_t i, const struct ru_daemon *d, const char *home);

/* Rank i in a process of its own (forked: a worker that can be SIGKILLed): it connects and
 * registers with d, runs then(rank, arg) when given (nonzero return: the child exits 3), and
 * waits to be killed. Returns the child's pid once that is done. */
pid_t ru_rank_fork(struct ru_inst *in, uint32_t i, const struct ru_daemon *d,
                   int (*then)(struct ru_rank *r, void *arg), void *arg);

/* Connects and registers every rank with the daemon. */
void ru_inst_register(struct ru_inst *in, const struct ru_daemon *d);

void ru_inst_free(struct ru_inst *in);

/* Context ranks that write to generation rank g (planned here from the two layouts), per ctx
 * rank, added into readers[]. */
void ru_readers(const struct ru_inst *ctx, const struct ru_inst *gen, int32_t dp,
                uint32_t *readers);

/* RECV arguments for every block of generation rank r, from context instance inst homed at home
 * (any DP rank). */
void ru_recv_args(struct ru_rank *r, uint64_t req, const char *inst, const char *home,
                  struct kvf_recv_args *a);

/* r's ids (n_ids, into dup: its caller's) with the second block of r's first paged group listing
 * the first block again: a request the daemon admits (every id in range) and its plan refuses
 * (BAD_REQUEST, "twice"). r's first paged group has two blocks or more. */
void ru_ids_with_a_duplicate(const struct ru_rank *r, uint32_t *dup);

/* Waits for one terminal event of req on rank r (skipping others); returns its kind and fills ev.
 */
int ru_wait_event(struct ru_rank *r, uint64_t req, struct kvf_event *ev, unsigned ms);

/* Fills every context rank with its shard of the pattern (seed) and SENDs req from each rank
 * that gen reads (readers[i]: how many generation ranks read rank i; 64 entries). */
void ru_fill_and_send(struct ru_inst *ctx, const struct ru_inst *gen, uint64_t req, int32_t dp,
                      uint64_t seed, uint32_t *readers);

/* Moves request req from ctx (homed at home) to gen's rank 0, whose every block it RECVs: fills
 * and SENDs with seed, waits DONE and SENT (ms each), checks every byte. One rank each side. */
void ru_move_one(const char *home, struct ru_inst *ctx, struct ru_inst *gen, uint64_t req,
                 uint64_t seed, unsigned ms);
/* Every byte of every pool of a generation rank: poison + its shard of the pattern. */
void ru_assert_parity(const struct ru_rank *r, uint32_t first_block, uint64_t seed,
                      const char *what);
/* The same for a prompt of `tokens` tokens (0: whole blocks): paged rows past the prompt's last
 * token must still hold the poison. */
void ru_assert_parity_tokens(const struct ru_rank *r, uint32_t first_block, uint64_t seed,
                             uint64_t tokens, const char *what);

/* ---- network namespaces (scripts/netns-pair) ---- */

struct ru_pair {
    char name[32], ns_a[48], ns_b[48], addr_a[32], addr_b[32];
};

/* system(cmd)'s exit code (128: killed). */
int ru_sh(const char *cmd);
/* Whether namespaces cannot be made here: then "SKIP test: why" is printed (main returns 77). */
bool ru_netns_skip(const char *test);
/* ru_daemon_start_tls inside namespace ns (NULL: ours), listening on host. */
int ru_daemon_start_in(struct ru_daemon *d, const char *top, const char *name, int listen,
                       const char *secret, const char *extra, const char *tls, const char *ns,
                       const char *host);
/* rm -rf top, then the pair down. */
void ru_pair_finish(struct ru_pair *p, const char *top);
/* Makes a pair named prefix<pid> (taken down at exit too); false, with SKIP printed, where
 * network namespaces cannot be made here. */
bool ru_pair_up(struct ru_pair *p, const char *prefix);
void ru_pair_down(struct ru_pair *p);
/* ip -n NS-<side> link set veth0 up|down. */
void ru_pair_link(const struct ru_pair *p, char side, bool up);
/* Whether d's log has a line with needle. */
bool ru_log_has(const struct ru_daemon *d, const char *needle);
/* The same, waiting up to ms (scaled by tu_ms) for the line: the daemon's log is written off
 * its loop (logsink), so a line can come after what the test saw of its effect. */
bool ru_log_wait(const struct ru_daemon *d, const char *needle, unsigned ms);

/* ---- two daemons ---- */

struct two {
    char top[64], secret[128];
    struct ru_daemon a, b; /* a: context (home), b: generation */
    /* two_start_insts: its instances (freed by two_stop) and the ids' rng after them */
    struct ru_inst ctx, gen;
    bool insts;
    uint64_t rng;
};

/* Two daemons: a (context home, listening) and b (generation, outbound only). secret_b: NULL
 * for the shared secret, "" for none, "wrong" for a different one. */
void two_start2(struct two *t, const char *extra_a, const char *extra_b, const char *tls,
                const char *secret_b);

/* Frees two_start_insts' instances, stops both daemons (their logs printed unless ok) and
 * removes the directory. */
void two_stop(struct two *t, int ok);

void two_start(struct two *t, const char *extra_a, const char *extra_b, const char *tls);

/* The setup most two-daemon cases share: two daemons (two_start2 of the extras, tls and
 * secret_b), t->ctx, an instance "ctx" of spec registered at a, and t->gen, an instance gen_id
 * (NULL: "gen") of gen_spec (NULL: spec) registered at b (or as gen_at says), with blocks
 * (gen_blocks) per request (ru_inst_init, ids from rng: ctx first; t->rng goes on from there).
 * two_stop frees them first. */
enum two_gen_at { TWO_GEN_AT_B, TWO_GEN_AT_A, TWO_GEN_UNREGISTERED /* the case registers it */ };

struct two_insts {
    const char *extra_a, *extra_b, *tls, *secret_b;
    const char *spec, *gen_spec, *gen_id;
    uint32_t blocks, gen_blocks; /* gen_blocks 0: blocks */
    uint64_t rng;
    enum two_gen_at gen_at;
};

void two_start_insts(struct two *t, const struct two_insts *w);

#endif
