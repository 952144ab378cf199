/* engine_report.c: the engine's part of the module table (modules.c): the peers and arena
 * sections of `status` and `stats` (counters as rows, by offset), the live keys it uses with
 * the values it holds (status.live), and the reload hook that pushes arena.reserve_timeout into
 * both arenas. Loop thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "bounce_put.h"
#include "daemon.h"
#include "engine.h"
#include "frag_ctx.h"
#include "engine_gpu.h"
#include "engine_int.h"
#include "engine_linkwait.h"
#include "engine_lost.h"
#include "engine_peer.h"
#include "engine_share.h"

json_t *engine_peers_json(struct daemon *d)
{
    struct engine *e = d->engine;
    json_t *a = json_array();
    for (const struct epeer *p = e ? e->peers : NULL; p; p = p->next)
        json_array_append_new(a, epeer_json(p));
    json_t *o = json_pack("{s:b,s:s,s:s,s:o}", "enabled", e && e->link, "self",
                          e && e->link ? link_self_id(e->link) : "", "listen",
                          e ? e->self_addr : "", "peers", a);
    if (o && e)
        lost_json(e, o); /* "lost": peers lost a moment ago */
    return o;
}

json_t *engine_arena_json(struct daemon *d)
{
    struct engine *e = d->engine;
    if (e && !e->arena && linkwait_waiting(e, NULL))
        return json_pack("{s:b,s:s}", "enabled", 0, "why",
                         "no arena yet: the link waits for its interface (peers.link.why)");
    if (!e || !e->arena)
        return json_pack("{s:b,s:s}", "enabled", 0, "why",
                         "no arena: cluster.secret_file is unset (single-node use)");
    json_t *o = arena_stats_json(e->arena); /* the landing slots */
    share_json(e, o);
    json_t *so = e->stage_arena ? arena_stats_json(e->stage_arena) : NULL;
    if (so && e->shold) /* what failed peers may still read (arena_hold.h) */
        json_object_set_new(so, "held", hold_stats_json(e->shold));
    if (so)
        json_object_set_new(o, "staging", so);
    json_object_set_new(o, "enabled", json_true());
    egpu_arena_json(e, o); /* placement, pinned_for_gpu, why */
    return o;
}

int engine_peers_status(struct daemon *d, json_t *ret)
{
    json_t *o = engine_peers_json(d);
    if (!o)
        return -ENOMEM;
    json_object_update(ret, o);
    json_decref(o);
    if (d->engine && (d->engine->link || d->engine->lw)) {
        json_t *l = json_object();
        if (d->engine->link) { /* up: it accepts; or waiting for its interface (linkwait) */
            json_object_set_new(l, "state", json_string("up"));
            link_status(d->engine->link, l);
        }
        linkwait_json(d->engine, l);
        json_object_set_new(ret, "link", l);
    }
    return 0;
}

/* A uint64_t field of struct engine_counters by offset; a field of another size fails the build. */
#define COUNTER_OFF(field)                                                                         \
    (offsetof(struct engine_counters, field) +                                                     \
     0 * sizeof(char[sizeof(((struct engine_counters *)0)->field) == 8 ? 1 : -1]))

/* The engine's counters in `stats` (peers section), one row each: name = field. */
#define COUNTER(name) {#name, COUNTER_OFF(name)}
static const struct {
    const char *name;
    size_t off;
} counter_rows[] = {
    COUNTER(remote_recvs),
    COUNTER(layouts_sent),
    COUNTER(layouts_referenced),
    COUNTER(layouts_decoded),
    COUNTER(layouts_missed),
    COUNTER(remote_done),
    COUNTER(remote_failed),
    COUNTER(flows),
    COUNTER(flows_done),
    COUNTER(flows_failed),
    COUNTER(chunks_put),
    COUNTER(chunks_am),
    COUNTER(chunks_device),
    COUNTER(chunks_landed_device),
    COUNTER(bytes_put),
    COUNTER(bytes_am),
    COUNTER(chunks_landed),
    COUNTER(bytes_landed),
    COUNTER(staging_fallbacks),
    COUNTER(staging_held),
    COUNTER(msgs_held),
    COUNTER(bound_violations),
    COUNTER(stale_epochs),
    COUNTER(tables_served),
    COUNTER(tables_fetched),
    COUNTER(table_nacks),
    COUNTER(table_retries),
    COUNTER(layouts_forwarded),
    COUNTER(forwards_refused),
    COUNTER(peers_lost),
    COUNTER(nacks_sent),
    COUNTER(nacks_recv),
    COUNTER(slots_reclaimed),
    COUNTER(peers_exited_reclaimed),
    COUNTER(replans),
    COUNTER(bytes_local_writers),
    COUNTER(fragment_puts),
    COUNTER(fragment_cma_writes),
    COUNTER(fragment_copy_jobs),
    COUNTER(bytes_fragment),
    COUNTER(gpu_gathers),
    COUNTER(gpu_scatters),
    COUNTER(bytes_gpu_gathered),
    COUNTER(bytes_gpu_scattered),
    COUNTER(gpu_failures),
    COUNTER(host_gathers),
    COUNTER(host_scatters),
    COUNTER(bytes_host_gathered),
    COUNTER(bytes_host_scattered),
    COUNTER(direct_puts),
    {"chunk_gpu_to_peer", COUNTER_OFF(ways[BWAY_GPU_TO_PEER][0])},
    COUNTER(peer_arenas_pinned),
    COUNTER(peer_arenas_unpinned),
    COUNTER(peer_arena_pin_failures),
    COUNTER(reader_nacks_sent),
    COUNTER(reader_nacks_recv),
    COUNTER(reader_nacks_queued),
    COUNTER(reader_nacks_unsent),
    COUNTER(reader_nacks_stale),
    COUNTER(frag_holds),
    COUNTER(link_waits),
};
#undef COUNTER

/* A way's counter (bounce_way.h): r 0 taken, else refused for reason r. */
#define WAY_OFF(way, r) COUNTER_OFF(ways[way][r])

/* Path decisions by reason (stats.peers.paths): the generation side per request, the context
 * side per flow, and per chunk (copied into the peer's slot, put from the pools, or gathered:
 * the ways' counters under their older names; plus: a second counter added, 0 none). */
static const struct {
    const char *name;
    size_t off, plus;
} path_counter_rows[] = {
    {"fragment_state_below_min_bytes", COUNTER_OFF(path_fragment_state), 0},
    {"fragment_kv_below_min_blocks", COUNTER_OFF(path_fragment_kv), 0},
    {"bounce_state_at_min_bytes", COUNTER_OFF(path_bounce_gate_bytes), 0},
    {"bounce_kv_at_min_blocks", COUNTER_OFF(path_bounce_gate_blocks), 0},
    {"bounce_fallback_no_rkeys", COUNTER_OFF(path_bounce_no_rkeys), 0},
    {"flow_bounce_shm_put", COUNTER_OFF(path_bounce_shm_put), 0},
    {"flow_bounce_am", COUNTER_OFF(path_bounce_am), 0},
    {"flow_bounce_cma_write", COUNTER_OFF(path_bounce_cma), 0},
    {"bounce_gpu_pools", COUNTER_OFF(path_bounce_gpu_pools), 0},
    {"chunk_copied_to_peer", WAY_OFF(BWAY_COPY_TO_PEER, 0), WAY_OFF(BWAY_GPU_TO_PEER, 0)},
    {"chunk_cma_to_peer", WAY_OFF(BWAY_CMA_TO_PEER, 0), 0},
    {"chunk_put_from_pools", WAY_OFF(BWAY_PUT_FROM_POOLS, 0), 0},
    {"chunk_gather_small_runs", WAY_OFF(BWAY_PUT_FROM_POOLS, BPUT_SMALL_RUNS), 0},
    {"chunk_gather_am", WAY_OFF(BWAY_PUT_FROM_POOLS, BPUT_NO_PUT_LANES), 0},
    {"chunk_gather_direct_off", WAY_OFF(BWAY_PUT_FROM_POOLS, BPUT_DIRECT_OFF), 0},
    {"chunk_gather_no_registration", WAY_OFF(BWAY_PUT_FROM_POOLS, BPUT_NO_REGISTRATION), 0},
};

static json_int_t counter_at(const struct engine_counters *c, size_t off)
{
    return (json_int_t) * (const uint64_t *)((const char *)c + off);
}

int engine_peers_stats(struct daemon *d, json_t *ret)
{
    struct engine *e = d->engine;
    if (!e)
        return 0;
    const struct engine_counters *c = &e->c;
    for (size_t i = 0; i < sizeof counter_rows / sizeof counter_rows[0]; i++)
        json_object_set_new(ret, counter_rows[i].name,
                            json_integer(counter_at(c, counter_rows[i].off)));
    json_object_set_new(ret, "frag_jobs_in_flight", json_integer((json_int_t)frag_ctx_jobs_count(e)));
    if (e->link) { /* who the link refused before any handshake (link_admit.c) */
        struct link_stats ls;
        link_get_stats(e->link, &ls);
        json_object_set_new(ret, "link",
                            json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "conns_refused_unproven",
                                      (json_int_t)ls.conns_refused_unauth, "conns_refused_address",
                                      (json_int_t)ls.conns_refused_addr, "conns_refused_table",
                                      (json_int_t)ls.conns_refused_table, "handshake_timeouts",
                                      (json_int_t)ls.handshake_timeouts, "unproven_endpoints",
                                      (json_int_t)ls.unproven_endpoints,
                                      "ucx_stale_events_dropped",
                                      (json_int_t)ls.ucx_stale_events_dropped));
    }
    json_object_set_new(ret, "last_remote_wall_us", json_integer((json_int_t)(c->last_wall_ns / 1000)));
    json_object_set_new(ret, "last_remote_bytes", json_integer((json_int_t)c->last_bytes));
    json_t *paths = json_object();
    for (size_t i = 0; i < sizeof path_counter_rows / sizeof path_counter_rows[0]; i++)
        json_object_set_new(paths, path_counter_rows[i].name,
                            json_integer(counter_at(c, path_counter_rows[i].off) +
                                         (path_counter_rows[i].plus
                                              ? counter_at(c, path_counter_rows[i].plus)
                                              : 0)));
    json_object_set_new(ret, "paths", paths);
    json_t *ways = json_object();
    bstage_ways_json(e, ways); /* every way's taken and refused counts (bounce_way.h) */
    json_object_set_new(ret, "chunk_ways", ways);
    return 0;
}

void engine_reloaded(struct daemon *d)
{
    struct engine *e = d->engine;
    if (!e)
        return;
    arena_set_reserve_timeout(e->arena, d->cfg.arena_reserve_timeout_ms);
    arena_set_reserve_timeout(e->stage_arena, d->cfg.arena_reserve_timeout_ms);
}

int engine_live(struct daemon *d, json_t *ret)
{
    struct engine *e = d->engine;
    if (!e)
        return 0;
    static const char *const at_use[] = {
        "peers.max_inflight", "arena.window",    "arena.direct_run", "arena.shm_write",
        "arena.cma_write",    "gates.min_bytes", "gates.min_blocks", "deadlines.lookup",
        "deadlines.send_wait", "deadlines.transfer", "deadlines.stream_idle",
        "arena.cut_at_layers", NULL};
    int r = cfg_values_json(&d->cfg, at_use, ret);
    if (!e->arena) {
        json_object_set_new(ret, "arena.reserve_timeout", json_string("unused: no arena (no link)"));
        return r;
    }
    /* held by the arenas themselves: what they use, landing and staging alike */
    uint64_t land = arena_reserve_timeout(e->arena);
    uint64_t stage = e->stage_arena ? arena_reserve_timeout(e->stage_arena) : land;
    json_object_set_new(ret, "arena.reserve_timeout",
                        land == stage ? json_integer((json_int_t)land)
                                      : json_string("landing and staging arenas differ"));
    return r;
}

int engine_arena_status(struct daemon *d, json_t *ret)
{
    json_t *o = engine_arena_json(d);
    if (!o)
        return -ENOMEM;
    json_object_update(ret, o);
    json_decref(o);
    return 0;
}

int engine_arena_stats(struct daemon *d, json_t *ret)
{
    return engine_arena_status(d, ret);
}
