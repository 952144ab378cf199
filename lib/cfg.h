/* cfg.h: kvferryd's configuration. One table (cfg_table.c) drives parsing, defaults, bounds,
 * printing and the documentation in config/kvferry.yaml: key, type, offset into struct kvf_config,
 * default, bounds, doc. YAML via libyaml. Errors are "file:line:column: message".
 * A struct kvf_config owns its strings and lists; cfg_free releases them.
 * Not thread-safe; the daemon loads on its loop thread. */
#ifndef KVF_CFG_H
#define KVF_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_ERR_MAX 4096   /* room for every error of a file: one line each */
#define CFG_ERRORS_MAX 16  /* errors reported per file; the walk stops after that many */
#define CFG_FILE_MAX (1024 * 1024) /* larger config files are refused */
#define CFG_LIST_MAX 256           /* entries per list */

typedef enum { CFG_STRING, CFG_PATH, CFG_BOOL, CFG_INT, CFG_SIZE, CFG_DURATION, CFG_ENUM, CFG_LIST } cfg_type_t;

struct cfg_list {
    uint32_t n;
    char **items; /* owned */
};

/* arena.placement's values, in the order of its names in cfg_table.c (check_cfg_out tests both). */
typedef enum {
    CFG_PLACEMENT_AUTO = 0,
    CFG_PLACEMENT_HOST = 1,
    CFG_PLACEMENT_DEVICE = 2,
} cfg_placement_t;

/* arena.shm_write's values, in the order of its names in cfg_table.c. */
typedef enum { CFG_SHM_WRITE_COPY = 0, CFG_SHM_WRITE_PUT = 1 } cfg_shm_write_t;
/* gpu.bounce_copy's values, likewise. */
typedef enum { CFG_BOUNCE_COPY_ENGINES = 0, CFG_BOUNCE_COPY_KERNELS = 1 } cfg_bounce_copy_t;
/* arena.cma_write's values, in the order of its names in cfg_table.c. */
typedef enum { CFG_CMA_WRITE_COPY = 0, CFG_CMA_WRITE_AM = 1 } cfg_cma_write_t;

struct kvf_config {
    /* sockets.*: "" means derived: <dir>/control.sock, <dir>/worker.sock, where dir is
     * $RUNTIME_DIRECTORY (set by systemd), else /run/kvferry for root, else
     * $XDG_RUNTIME_DIR/kvferry, else ./run */
    char *sockets_dir;
    char *sockets_control;
    char *sockets_worker;
    int64_t sockets_mode;          /* octal, default 0660 */
    char *sockets_group;           /* group owning both sockets; "": the daemon's own group */

    /* access.*: uids/gids (names or numbers) allowed on the sockets; the daemon's own uid and
     * root are always allowed. admin_*: may run mutating control commands. */
    struct cfg_list access_allow_uids, access_allow_gids;
    struct cfg_list access_admin_uids, access_admin_gids;

    /* control.* limits */
    uint64_t control_max_line;     /* size, bytes */
    int64_t control_max_conns;
    int64_t control_max_conns_per_uid;
    uint64_t control_idle_timeout_ms;

    /* log.* */
    int64_t log_level;             /* enum: error, warn, info, debug */

    /* daemon.* */
    uint64_t daemon_drain_timeout_ms;

    /* workers.* limits of the local worker socket */
    int64_t workers_max_conns;
    uint64_t workers_max_frame;    /* size */
    int64_t workers_max_blocks;    /* block ids per request */
    int64_t workers_max_inflight;  /* requests in flight per worker connection */
    int64_t workers_max_conns_per_uid;
    int64_t workers_event_queue;   /* events queued per connection while its socket is full */
    uint64_t workers_read_timeout_ms;  /* events queued, none read this long: disconnect */
    uint64_t workers_hello_timeout_ms;
    uint64_t workers_frame_timeout_ms; /* a begun frame must complete within this */
    uint64_t workers_frame_memory;     /* partial frame bytes, all connections (size) */

    /* copy.*: the host copy engine (daemon/copyeng.h) */
    int64_t copy_threads;          /* 0: one per online CPU */
    int64_t copy_prefault;         /* enum: off, register (map worker pools in at REGISTER) */

    /* gpu.*: the GPU module (daemon/gpu/gpu.h) */
    int64_t gpu_completion_spin_us; /* loop polls completion events this long; 0: off */
    int64_t gpu_template_programs;  /* enum false/true: programs per plan template (gpu_tprog.h) */
    int64_t gpu_bounce_copy;        /* enum: engines (scratch + cudaMemcpyAsync), kernels */

    /* listen.* and transport.*: inter-daemon UCX */
    char *listen_address;
    int64_t listen_port;           /* 0: no listener (single-node) */
    char *transport_ucx_tls;       /* "": let UCX choose; a troubleshooting override */
    int64_t transport_tcp_put;     /* enum false/true: UCX's tcp put zcopy (docs/UCX.md trap 16) */
    int64_t transport_gpu_direct;  /* enum false/true: offer CUDA memory to peers (link_cuda.c) */
    char *cluster_secret_file;     /* path to a 0600 file; "": inter-daemon traffic refused */
    int64_t peers_max_inflight;    /* requests in flight per peer daemon */
    uint64_t peers_keepalive_interval_ms; /* ping every peer this often */
    int64_t peers_keepalive_misses;       /* silent this many intervals: lost */
    int64_t peers_unproven_max;           /* inbound endpoints before the handshake, at once */
    int64_t peers_unproven_per_address;   /* the same from one address */
    uint64_t peers_unproven_timeout_ms;   /* to prove the cluster secret */

    /* arena.* */
    uint64_t arena_size;
    uint64_t arena_chunk;
    uint64_t arena_reserve_timeout_ms;
    int64_t arena_window;          /* chunks in flight per writer flow (both sides) */
    uint64_t arena_direct_run;     /* bounce: mean run bytes at which a chunk skips the gather */
    int64_t arena_cut_at_layers;   /* enum false/true: landing grants end at layer boundaries */
    int64_t arena_shm_write;       /* enum: copy (copy threads write the peer's slot), put */
    int64_t arena_cma_write;       /* enum: copy (copy threads write the peer's slot over cma), am */
    int64_t arena_peer_share;      /* percent of landing bytes one peer may hold */
    int64_t arena_placement;       /* enum: auto, host, device */
    int64_t arena_prefault;        /* enum: off, thread (fault the arena in after start) */
    int64_t arena_timeline;        /* bounce chunk events kept for profiling; 0: off */

    /* gates.* */
    uint64_t gates_min_bytes;      /* payloads with recurrent state: bounce at or above */
    int64_t gates_min_blocks;      /* plain KV payloads: bounce at or above */

    /* deadlines.* (per phase) */
    uint64_t deadlines_lookup_ms;
    uint64_t deadlines_send_wait_ms; /* RECV waiting for the context side's SEND */
    uint64_t deadlines_transfer_ms;
    uint64_t deadlines_stream_idle_ms; /* a streaming SEND's longest wait for its next layer */

    /* metrics.* and transfers.* (operators' views) */
    char *metrics_listen;            /* "host:port" of the /metrics HTTP listener; "": none */
    int64_t metrics_max_label_values; /* per-peer / per-instance series; beyond: "other" */
    uint64_t transfers_keep_finished_ms; /* a finished request stays in `transfers` this long */

    /* Where it came from ("" for built-in defaults). Owned. */
    char *source_path;
};

/* One row of the table. */
struct cfg_key {
    const char *key;       /* "arena.size" */
    cfg_type_t type;
    size_t offset;         /* into struct kvf_config */
    const char *def;       /* default, as YAML text */
    int64_t min, max;      /* bounds for int/size/duration (ms) */
    const char *const *enum_names; /* NULL-terminated, for CFG_ENUM */
    bool live;             /* may change on SIGHUP without a restart */
    const char *doc;
};

extern const struct cfg_key cfg_table[];
extern const size_t cfg_table_len;

/* Defaults only. Returns 0 or -ENOMEM. */
int cfg_defaults(struct kvf_config *ret);
/* Loads a YAML file over the defaults. On error returns -EINVAL (or -errno for I/O) and writes
 * "file:line:column: message" into err, one line per error (all of the file's, up to
 * CFG_ERRORS_MAX); *ret untouched. */
int cfg_load_file(const char *path, struct kvf_config *ret, char *err, size_t errlen);
/* The same from memory; `name` stands for the file in messages. */
int cfg_load_string(const char *name, const char *text, size_t len, struct kvf_config *ret,
                    char *err, size_t errlen);
void cfg_free(struct kvf_config *c);
/* Deep copy. Returns 0 or -ENOMEM. */
int cfg_copy(const struct kvf_config *src, struct kvf_config *ret);

/* Effective socket paths after derivation (see sockets.*). Return static-lifetime-free strings
 * written into buf; 0 or -ENAMETOOLONG. */
int cfg_socket_dir(const struct kvf_config *c, char *buf, size_t len);
int cfg_control_path(const struct kvf_config *c, char *buf, size_t len);
int cfg_worker_path(const struct kvf_config *c, char *buf, size_t len);

/* Text helpers, also used by kvferryctl: "4GiB", "512MiB", "1024", "64k"; "200ms", "30s", "5m".
 * A duration needs its unit ("0" excepted): a bare "2" is -EINVAL. */
int cfg_parse_size(const char *s, uint64_t *ret);
int cfg_parse_duration_ms(const char *s, uint64_t *ret);
int cfg_format_size(uint64_t v, char *buf, size_t len);
int cfg_format_duration_ms(uint64_t v, char *buf, size_t len);

/* The effective config as YAML text (every key, one per line; malloc'd) and as a JSON object
 * (jansson, new reference). */
char *cfg_to_yaml(const struct kvf_config *c);
struct json_t;
struct json_t *cfg_to_json(const struct kvf_config *c);
/* One key's value as cfg_to_json renders it (a new reference), or NULL for an unknown key. Modules
 * report the live keys they use this way (status.live), so a test can compare them with `config`. */
struct json_t *cfg_value_json(const struct kvf_config *c, const char *key);
/* Sets ret[key] = cfg_value_json(c, key) for each key of the NULL-terminated list: the live keys a
 * module reads from the config at each use. Returns 0, or -EINVAL naming no key it could render. */
int cfg_values_json(const struct kvf_config *c, const char *const *keys, struct json_t *ret);

/* Reload: moves into c the values of fresh for every live key where they differ, leaving c's old
 * values in fresh (free fresh with cfg_free). Writes up to n of those keys' names into ret and
 * returns how many changed. Keys that are not live are left as they are (see below). */
size_t cfg_apply_live(struct kvf_config *c, struct kvf_config *fresh, const char **ret, size_t n);
/* Keys whose values differ and that are not live: for the reload report. Writes up to n keys
 * into ret and returns the total count. */
size_t cfg_diff_restart_needed(const struct kvf_config *a, const struct kvf_config *b,
                               const char **ret, size_t n);

#endif
