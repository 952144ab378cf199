/* cfg_table.c: THE table of kvferryd's configuration: one row per field of struct kvf_config
 * (key, type, offset, default as YAML text, bounds, enum names, live flag, doc), the rules that
 * span keys, and key lookup with "did you mean" suggestions. Everything else (parsing, printing,
 * config/kvferry.yaml and its drift test) is driven from here.
 * Bounds: min/max are inclusive, in bytes for sizes and milliseconds for durations; for strings
 * and paths max is the longest value accepted (0: CFG_STRING_MAX); unused for enums and lists.
 * Live keys may change on SIGHUP; the others take effect at the next start. Static data only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cfg_priv.h"

#define KIB (1LL << 10)
#define MIB (1LL << 20)
#define GIB (1LL << 30)
#define TIB (1LL << 40)
#define SEC 1000LL
#define MINUTE (60 * SEC)
#define HOUR (60 * MINUTE)

/* sun_path is 108 bytes: an explicit socket path must leave room for the NUL. */
#define SOCKET_PATH_MAX 107

#define OFF(f) offsetof(struct kvf_config, f)
#define ROW(k, t, f, d, lo, hi, live_, doc_)                                                       \
    {                                                                                              \
        k, t, OFF(f), d, lo, hi, NULL, live_, doc_                                                 \
    }

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const placements[] = {"auto", "host", "device", NULL};
static const char *const prefaults[] = {"off", "thread", NULL};
static const char *const shm_writes[] = {"copy", "put", NULL};
static const char *const cma_writes[] = {"copy", "am", NULL};
static const char *const false_true[] = {"false", "true", NULL}; /* an enum: no padding (check_cfg) */
static const char *const pool_prefaults[] = {"off", "register", NULL};
static const char *const bounce_copies[] = {"engines", "kernels", NULL};

const struct cfg_key cfg_table[] = {
    ROW("sockets.dir", CFG_PATH, sockets_dir, "\"\"", 0, SOCKET_PATH_MAX - 13, false,
        "Directory of the sockets. \"\": $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=), else "
        "/run/kvferry for root, else $XDG_RUNTIME_DIR/kvferry, else ./run."),
    ROW("sockets.control", CFG_PATH, sockets_control, "\"\"", 0, SOCKET_PATH_MAX, false,
        "Control socket (JSON lines, kvferryctl). \"\": <dir>/control.sock."),
    ROW("sockets.worker", CFG_PATH, sockets_worker, "\"\"", 0, SOCKET_PATH_MAX, false,
        "Worker socket (libkvferry). \"\": <dir>/worker.sock."),
    ROW("sockets.mode", CFG_INT, sockets_mode, "0660", 0, 0777, false,
        "Permission bits of both sockets, octal."),
    ROW("sockets.group", CFG_STRING, sockets_group, "\"\"", 0, 64, false,
        "Group (name or gid) owning both sockets, so that its members can connect (with mode "
        "0660). \"\": the daemon's own group. The members of either are allowed as if listed in "
        "access.allow_gids."),

    ROW("access.allow_uids", CFG_LIST, access_allow_uids, "[]", 0, 0, true,
        "Users (names or uids) allowed on the sockets besides root, the daemon's own user and the "
        "members of the sockets' group (sockets.group)."),
    ROW("access.allow_gids", CFG_LIST, access_allow_gids, "[]", 0, 0, true,
        "Groups (names or gids) whose members are allowed on the sockets."),
    ROW("access.admin_uids", CFG_LIST, access_admin_uids, "[]", 0, 0, true,
        "Users who may run mutating control commands (drain, log-level, reload)."),
    ROW("access.admin_gids", CFG_LIST, access_admin_gids, "[]", 0, 0, true,
        "Groups whose members may run mutating control commands."),

    ROW("control.max_line", CFG_SIZE, control_max_line, "1MiB", KIB, 64 * MIB, true,
        "Longest JSON line accepted on the control socket."),
    ROW("control.max_conns", CFG_INT, control_max_conns, "64", 1, 65536, true,
        "Control connections open at once."),
    ROW("control.max_conns_per_uid", CFG_INT, control_max_conns_per_uid, "16", 1, 65536, true,
        "Control connections open at once per user (root and the daemon's own user are exempt)."),
    ROW("control.idle_timeout", CFG_DURATION, control_idle_timeout_ms, "5m", SEC, 24 * HOUR, true,
        "An idle control connection is closed after this long."),

    {"log.level", CFG_ENUM, OFF(log_level), "info", 0, 0, log_levels, true,
     "Least severe messages logged: error, warn, info or debug."},

    ROW("daemon.drain_timeout", CFG_DURATION, daemon_drain_timeout_ms, "10s", 0, HOUR, false,
        "On SIGTERM or drain, in-flight transfers get this long to finish before they fail."),

    ROW("workers.max_conns", CFG_INT, workers_max_conns, "256", 1, 65536, false,
        "Worker connections open at once."),
    ROW("workers.max_frame", CFG_SIZE, workers_max_frame, "16MiB", 4 * KIB, GIB, false,
        "Largest frame accepted on the worker socket."),
    ROW("workers.max_blocks", CFG_INT, workers_max_blocks, "65536", 1, 16 * MIB, false,
        "Block ids per request."),
    ROW("workers.max_inflight", CFG_INT, workers_max_inflight, "4096", 1, MIB, false,
        "Requests in flight per worker connection."),
    ROW("workers.max_conns_per_uid", CFG_INT, workers_max_conns_per_uid, "128", 1, 65536, false,
        "Worker connections open at once per user (a connection still in its handshake is "
        "evicted first when a limit is reached)."),
    ROW("workers.event_queue", CFG_INT, workers_event_queue, "65536", 64, 16 * MIB, false,
        "Events queued per worker connection while its socket is full (at least "
        "workers.max_inflight); past it the worker is disconnected, told why."),
    ROW("workers.read_timeout", CFG_DURATION, workers_read_timeout_ms, "10s", 100, HOUR, true,
        "A worker with events queued that reads none of them for this long is disconnected, "
        "told why."),
    ROW("workers.hello_timeout", CFG_DURATION, workers_hello_timeout_ms, "5s", 100, HOUR, true,
        "A connection that has not said HELLO after this long is closed."),
    ROW("workers.frame_timeout", CFG_DURATION, workers_frame_timeout_ms, "10s", 100, HOUR, true,
        "A frame begun on the worker socket must be complete within this long."),
    ROW("workers.frame_memory", CFG_SIZE, workers_frame_memory, "256MiB", MIB, 64 * GIB, true,
        "Memory for partial frames, all worker connections together (beyond 16KiB each); a "
        "frame that would pass it closes its connection."),

    ROW("copy.threads", CFG_INT, copy_threads, "0", 0, 256, false,
        "Copy threads that run the same-daemon path's host copies off the loop; 0: one per "
        "online CPU."),
    {"copy.prefault", CFG_ENUM, OFF(copy_prefault), "register", 0, 0, pool_prefaults, false,
     "register: after REGISTER, map in the pages of the worker's host pools that it holds in "
     "memory, on the copy threads behind any copy, so copies take no page fault per 4KiB page "
     "(allocates none of the worker's memory); off: on first copy."},

    ROW("listen.address", CFG_STRING, listen_address, "\"127.0.0.1\"", 0, 255, false,
        "Address the inter-daemon (UCX) listener binds."),
    ROW("listen.port", CFG_INT, listen_port, "0", 0, 65535, false,
        "Port of the inter-daemon listener; 0: no listener (the daemon can still connect out)."),
    ROW("transport.ucx_tls", CFG_STRING, transport_ucx_tls, "\"\"", 0, 255, false,
        "UCX transports (like UCX_TLS), a troubleshooting override; \"\": let UCX choose."),
    {"transport.tcp_put", CFG_ENUM, OFF(transport_tcp_put), "false", 0, 0, false_true, false,
     "UCX's tcp put for rendezvous over tcp: faster (1.25-1.75x GB/s between namespaces), but "
     "UCX 1.13.1 may then abort the daemon when a peer drops it or dies (docs/UCX.md trap "
     "16); false: the data goes as active messages. UCX_TCP_PUT_ENABLE in the environment "
     "wins."},
    {"transport.gpu_direct", CFG_ENUM, OFF(transport_gpu_direct), "true", 0, 0, false_true, false,
     "Offer CUDA device memory to peers when UCX handles it (a CUDA-aware UCX, "
     "scripts/build-ucx-cuda; Debian's handles host memory only): a peer whose UCX does too "
     "is gpu_direct in `peers`; false: host staging with every peer."},
    ROW("cluster.secret_file", CFG_PATH, cluster_secret_file, "\"\"", 0, 0, false,
        "File (mode 0600, 16..4096 bytes) holding the cluster secret; \"\": inter-daemon "
        "traffic is refused."),
    ROW("peers.max_inflight", CFG_INT, peers_max_inflight, "4096", 1, MIB, true,
        "Requests in flight per peer daemon."),
    ROW("peers.keepalive_interval", CFG_DURATION, peers_keepalive_interval_ms, "1s", 100, MINUTE,
        false,
        "Every peer daemon is pinged this often; one not heard for two intervals is suspect."),
    ROW("peers.keepalive_misses", CFG_INT, peers_keepalive_misses, "5", 3, 1000, false,
        "A peer not heard for this many keepalive intervals is lost: its requests fail "
        "PEER_LOST and its landing slots are reclaimed; it connects again when it comes back."),
    ROW("peers.unproven_max", CFG_INT, peers_unproven_max, "32", 1, 256, false,
        "Connections from other daemons that have not yet proven the cluster secret, at once; "
        "they have slots of their own, apart from the 256 of proven peers, so strangers cannot "
        "crowd real peers out. Beyond it a connection is refused and counted."),
    ROW("peers.unproven_per_address", CFG_INT, peers_unproven_per_address, "4", 1, 256, false,
        "The same, from one address."),
    ROW("peers.unproven_timeout", CFG_DURATION, peers_unproven_timeout_ms, "2s", 100, MINUTE,
        false,
        "A daemon that connected here must prove the cluster secret within this time, or its "
        "connection is closed and its slot freed."),

    ROW("arena.size", CFG_SIZE, arena_size, "512MiB", 4 * MIB, 4 * TIB, false,
        "Staging and landing memory: one host arena, allocated when cluster.secret_file is set."),
    ROW("arena.chunk", CFG_SIZE, arena_chunk, "32MiB", 64 * KIB, GIB, false,
        "Transfer chunk and slot size: a multiple of 4KiB, at most arena.size. With a device "
        "arena (a CUDA-aware UCX), 128MiB chunks in a 4GiB arena move 4x the default's rate."),
    ROW("arena.reserve_timeout", CFG_DURATION, arena_reserve_timeout_ms, "5s", 0, HOUR, true,
        "Longest wait of a request for its first landing credit."),
    ROW("arena.window", CFG_INT, arena_window, "8", 1, 64, true,
        "Chunks in flight per writer flow between two daemons: landing credits a receiver asks "
        "at once and staging chunks a sender moves at once, so the next chunk's gather and put "
        "overlap the last one's scatter."),
    {"arena.cut_at_layers", CFG_ENUM, OFF(arena_cut_at_layers), "false", 0, 0, false_true, true,
     "Generation side: landing grants end at layer boundaries too (and at arena.chunk within "
     "a layer), so a streamed SEND's last layer moves alone: its tail between daemons is one "
     "layer, not one chunk. Plain requests then move in more, smaller chunks."},
    ROW("arena.direct_run", CFG_SIZE, arena_direct_run, "16KiB", 0, GIB, true,
        "Bounce path: a chunk whose copy runs average at least this many bytes is put straight "
        "from the context rank's pools into the landing slot (no gather); smaller runs are "
        "gathered into a staging slot first. 0: always gather."),
    {"arena.shm_write", CFG_ENUM, OFF(arena_shm_write), "copy", 0, 0, shm_writes, true,
     "Bounce path over shared memory (the peer's arena mapped here): copy: the copy threads "
     "write each chunk straight into its landing slot, off the loop; put: UCX puts on the loop "
     "(a memcpy in the loop thread), from the pools or a staging slot as arena.direct_run says."},
    {"arena.cma_write", CFG_ENUM, OFF(arena_cma_write), "copy", 0, 0, cma_writes, true,
     "Bounce path where the peer daemon's process is reachable over cma but its arena is not "
     "mapped here (another network namespace of this host): copy: the copy threads write each "
     "chunk straight into its landing slot with process_vm_writev, off both loops; am: the "
     "chunk is gathered into a staging slot and sent as an active-message rendezvous, which "
     "the receiver's loop reads."},
    ROW("arena.peer_share", CFG_INT, arena_peer_share, "75", 1, 100, false,
        "Percent of the landing slots' bytes that one peer daemon may hold at once (granted, "
        "filled or quarantined), so that a frozen or lost peer never holds them all."),
    {"arena.placement", CFG_ENUM, OFF(arena_placement), "auto", 0, 0, placements, false,
     "Where the arena lives: auto or host (host memory); device is refused at start in this "
     "build."},
    {"arena.prefault", CFG_ENUM, OFF(arena_prefault), "thread", 0, 0, prefaults, false,
     "thread: fault the arena's pages in after start on a thread of its own, so copies on the "
     "loop never take first-touch faults (commits arena.size of memory at once); off: on use."},
    ROW("arena.timeline", CFG_INT, arena_timeline, "0", 0, 1048576, false,
        "Profiling: the last this many events of the bounce path's chunks (credit, gather, "
        "CHUNK, scatter, landing; at least 64) are kept with their times and listed by "
        "`kvferryctl arena` (bounce_timeline). 0: off."),

    ROW("gpu.completion_spin_us", CFG_INT, gpu_completion_spin_us, "2000", 0, 100000, false,
        "GPU completions: for this long after a kernel is queued the loop polls its event "
        "instead of sleeping until CUDA's host function wakes it (about 0.1-0.2 ms later on an "
        "H200 host); the loop thread spins meanwhile. 0: host functions only."),
    {"gpu.template_programs", CFG_ENUM, OFF(gpu_template_programs), "true", 0, 0, false_true,
     false, "Same-node GPU copies keep one copy program per plan template and device, so a "
     "request uploads only its block ids; false: each request uploads a program of its own ops."},
    {"gpu.bounce_copy", CFG_ENUM, OFF(gpu_bounce_copy), "engines", 0, 0, bounce_copies, false,
     "Bounce path, GPU pools: engines: a kernel gathers into (scatters from) device scratch and "
     "the copy engines cross PCIe, so two daemons on one GPU overlap (their kernels, of two "
     "CUDA contexts, would not); scratch: one arena.chunk per stream, 4 streams per GPU; "
     "kernels: the kernels read and write the page-locked slots themselves, no scratch."},
    ROW("gates.min_bytes", CFG_SIZE, gates_min_bytes, "2MiB", 0, TIB, true,
        "Payloads with recurrent state bounce through the arena at or above this size."),
    ROW("gates.min_blocks", CFG_INT, gates_min_blocks, "64", 0, 16 * MIB, true,
        "Plain KV payloads bounce through the arena at or above this many blocks."),

    ROW("deadlines.lookup", CFG_DURATION, deadlines_lookup_ms, "2s", 1, HOUR, true,
        "Looking up a context instance at its home daemon."),
    ROW("deadlines.send_wait", CFG_DURATION, deadlines_send_wait_ms, "30s", 1, 24 * HOUR, true,
        "A RECV waiting for the context side's SEND."),
    ROW("deadlines.transfer", CFG_DURATION, deadlines_transfer_ms, "1m", 1, 24 * HOUR, true,
        "A whole transfer, first credit to last scatter."),
    ROW("deadlines.stream_idle", CFG_DURATION, deadlines_stream_idle_ms, "10s", 1, HOUR, true,
        "A streaming SEND with no layer made final this long ends TIMEOUT, its readers with it."),

    ROW("metrics.listen", CFG_STRING, metrics_listen, "\"\"", 0, 255, false,
        "Address (host:port, e.g. 127.0.0.1:9464) of an HTTP listener serving GET /metrics "
        "(Prometheus text); \"\": none (kvferryctl metrics still works)."),
    ROW("metrics.max_label_values", CFG_INT, metrics_max_label_values, "64", 1, 4096, true,
        "Per-peer and per-instance series kept, each; later peers or instances count under "
        "the label value \"other\"."),
    ROW("transfers.keep_finished", CFG_DURATION, transfers_keep_finished_ms, "10s", 0, HOUR,
        true, "How long a finished request stays listed by kvferryctl transfers, with its "
        "outcome."),
};

const size_t cfg_table_len = sizeof(cfg_table) / sizeof(cfg_table[0]);

const struct cfg_key *cfg_key_find(const char *key)
{
    for (size_t i = 0; i < cfg_table_len; i++)
        if (strcmp(cfg_table[i].key, key) == 0)
            return &cfg_table[i];
    return NULL;
}

bool cfg_section_exists(const char *section, size_t len)
{
    for (size_t i = 0; i < cfg_table_len; i++)
        if (strncmp(cfg_table[i].key, section, len) == 0 && cfg_table[i].key[len] == '.')
            return true;
    return false;
}

/* Levenshtein distance, capped at 64 characters per side (longer names get no suggestion). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t row[65];
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Keys of older files that mean nothing any more: refused with the reason, never ignored (a key
 * that silently does nothing is a setting the operator believes in). */
static const struct {
    const char *key, *why;
} removed_keys[] = {
    {"deadlines.validate",
     "was removed: compatibility and planning run at once when a RECV meets the context "
     "instance's table, so nothing ever waited for it to bound (the table fetch is "
     "deadlines.lookup, the whole request deadlines.transfer); delete the line"},
};

const char *cfg_key_removed(const char *key)
{
    for (size_t i = 0; i < sizeof removed_keys / sizeof removed_keys[0]; i++)
        if (strcmp(removed_keys[i].key, key) == 0)
            return removed_keys[i].why;
    return NULL;
}

const char *cfg_key_suggest(const char *name)
{
    /* Candidates: every full key and every section name (a key's prefix up to its dot). */
    static char section[64];
    const char *best = NULL;
    size_t best_d = SIZE_MAX, n = strlen(name);
    bool best_is_section = false;
    for (size_t i = 0; i < cfg_table_len; i++) {
        const char *k = cfg_table[i].key;
        size_t d = edit_distance(name, n, k, strlen(k));
        if (d < best_d) {
            best_d = d, best = k, best_is_section = false;
        }
        size_t sl = (size_t)(strchr(k, '.') - k);
        d = edit_distance(name, n, k, sl);
        if (d < best_d) {
            best_d = d, best = k, best_is_section = true;
        }
        /* The same leaf under another section: "arena.max_inflight" -> "peers.max_inflight". */
        const char *dot = strchr(name, '.');
        if (dot && strcmp(dot, k + sl) == 0 && best_d > 2) {
            best_d = 2, best = k, best_is_section = false;
        }
    }
    /* Close means at most a third of the name changed (and at least one edit allowed). */
    if (!best || best_d > (n / 3 > 2 ? n / 3 : 2))
        return NULL;
    if (best_is_section) {
        size_t sl = (size_t)(strchr(best, '.') - best);
        snprintf(section, sizeof(section), "%.*s", (int)sl, best);
        return section;
    }
    return best;
}

int cfg_check_rule(const struct kvf_config *c, size_t rule, const char *keys[2], char *msg,
                   size_t len)
{
    char a[32], b[32];
    keys[1] = NULL;
    switch (rule) {
    case 0:
        if (c->arena_chunk % (4 * KIB) == 0)
            return 0;
        cfg_format_size(c->arena_chunk, a, sizeof(a));
        snprintf(msg, len, "arena.chunk: %s is not a multiple of 4KiB", a);
        keys[0] = "arena.chunk";
        return -EINVAL;
    case 1:
        if (c->arena_chunk <= c->arena_size)
            return 0;
        cfg_format_size(c->arena_chunk, a, sizeof(a));
        cfg_format_size(c->arena_size, b, sizeof(b));
        snprintf(msg, len, "arena.chunk: %s is larger than arena.size %s", a, b);
        keys[0] = "arena.chunk", keys[1] = "arena.size";
        return -EINVAL;
    case 2:
        if (c->workers_event_queue >= c->workers_max_inflight)
            return 0;
        snprintf(msg, len, "workers.event_queue: %lld is smaller than workers.max_inflight %lld",
                 (long long)c->workers_event_queue, (long long)c->workers_max_inflight);
        keys[0] = "workers.event_queue", keys[1] = "workers.max_inflight";
        return -EINVAL;
    case 3:
        if (c->control_max_conns_per_uid <= c->control_max_conns)
            return 0;
        snprintf(msg, len, "control.max_conns_per_uid: %lld is larger than control.max_conns %lld",
                 (long long)c->control_max_conns_per_uid, (long long)c->control_max_conns);
        keys[0] = "control.max_conns_per_uid", keys[1] = "control.max_conns";
        return -EINVAL;
    }
    return 1;
}
