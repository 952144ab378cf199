/* check_metrics_types.c: every metric family's declared type, asserted on real scrapes: two real
 * daemons (cluster mode, so the peers and arena sections are there), one request moved between
 * them through real UCX by real libkvferry ranks, then each daemon's `metrics` text is checked
 * against the exposition grammar (promcheck.h) and every `# TYPE` line against the table below:
 * a family missing from the table, a type that differs, or a table row no scrape carries fails.
 * Also: no stats value is undeclared, the phase histograms counted the request, and
 * last_remote_wall_seconds (first chunk to DONE) is within the request's end to end time. */
#include <check.h>
#include <errno.h>
#include <math.h>

#include "promcheck.h"
#include "remoteutil.h"

struct fam {
    const char *name, *type;
};

#define CT "counter"
#define GA "gauge"
#define HI "histogram"

static const struct fam families[] = {
    {"kvferry_build_info", GA},
    {"kvferry_uptime_seconds", GA},
    {"kvferry_metrics_undeclared", GA},
    {"kvferry_metrics_series_dropped", GA},
    {"kvferry_arena_bound_violations_total", CT},
    {"kvferry_arena_capacity_bytes", GA},
    {"kvferry_arena_chunk_bytes", GA},
    {"kvferry_arena_enabled", GA},
    {"kvferry_arena_grants_total", CT},
    {"kvferry_arena_device_arena_bytes", GA},
    {"kvferry_arena_pinned_for_gpu", GA},
    {"kvferry_arena_quarantined_bytes", GA},
    {"kvferry_arena_quarantined_slots", GA},
    {"kvferry_arena_reclaimed_total", CT},
    {"kvferry_arena_refused_waiters_total", CT},
    {"kvferry_arena_slot_bytes", GA},
    {"kvferry_arena_slots", GA},
    {"kvferry_arena_slots_free", GA},
    {"kvferry_arena_slots_in_use", GA},
    {"kvferry_arena_staging_bound_violations_total", CT},
    {"kvferry_arena_staging_capacity_bytes", GA},
    {"kvferry_arena_staging_chunk_bytes", GA},
    {"kvferry_arena_staging_grants_total", CT},
    {"kvferry_arena_staging_quarantined_bytes", GA},
    {"kvferry_arena_staging_quarantined_slots", GA},
    {"kvferry_arena_staging_reclaimed_total", CT},
    {"kvferry_arena_staging_refused_waiters_total", CT},
    {"kvferry_arena_staging_slot_bytes", GA},
    {"kvferry_arena_staging_slots", GA},
    {"kvferry_arena_staging_slots_free", GA},
    {"kvferry_arena_staging_slots_in_use", GA},
    {"kvferry_arena_staging_stale_reports_total", CT},
    {"kvferry_arena_staging_timeouts_total", CT},
    {"kvferry_arena_staging_waiting_requests", GA},
    {"kvferry_arena_staging_held_peers", GA},
    {"kvferry_arena_staging_held_slots", GA},
    {"kvferry_arena_staging_held_buffers", GA},
    {"kvferry_arena_staging_held_bytes", GA},
    {"kvferry_arena_staging_held_peers_until_told", GA},
    {"kvferry_arena_staging_held_holds_total", CT},
    {"kvferry_arena_staging_held_reclaimed_total", CT},
    {"kvferry_arena_staging_held_reclaimed_bytes_total", CT},
    {"kvferry_arena_staging_held_longest_seconds", GA},
    {"kvferry_arena_stale_reports_total", CT},
    {"kvferry_arena_timeouts_total", CT},
    {"kvferry_arena_waiting_requests", GA},
    {"kvferry_control_access_revoked_total", CT},
    {"kvferry_control_commands_total", CT},
    {"kvferry_control_connections_accepted_total", CT},
    {"kvferry_control_connections_open", GA},
    {"kvferry_control_connections_refused_access_total", CT},
    {"kvferry_control_connections_refused_limit_total", CT},
    {"kvferry_control_connections_accept_failed_total", CT},
    {"kvferry_control_errors_total", CT},
    {"kvferry_control_http_connections_evicted_total", CT},
    {"kvferry_control_http_connections_refused_total", CT},
    {"kvferry_control_http_connections_timed_out_total", CT},
    {"kvferry_control_http_requests_refused_total", CT},
    {"kvferry_control_http_scrapes_total", CT},
    {"kvferry_control_idle_timeouts_total", CT},
    {"kvferry_control_lines_too_long_total", CT},
    {"kvferry_control_malformed_total", CT},
    {"kvferry_control_refused_not_admin_total", CT},
    {"kvferry_daemon_reloads_failed_total", CT},
    {"kvferry_daemon_reloads_ok_total", CT},
    {"kvferry_daemon_uptime_seconds", GA},
    {"kvferry_daemon_watchdog_sent_total", CT},
    {"kvferry_daemon_log_lines_dropped_total", CT},
    {"kvferry_peers_bound_violations_total", CT},
    {"kvferry_peers_bytes_am_total", CT},
    {"kvferry_peers_bytes_fragment_total", CT},
    {"kvferry_peers_bytes_gpu_gathered_total", CT},
    {"kvferry_peers_bytes_gpu_scattered_total", CT},
    {"kvferry_peers_bytes_host_gathered_total", CT},
    {"kvferry_peers_bytes_host_scattered_total", CT},
    {"kvferry_peers_bytes_landed_total", CT},
    {"kvferry_peers_bytes_local_writers_total", CT},
    {"kvferry_peers_bytes_put_total", CT},
    {"kvferry_peers_chunks_am_total", CT},
    {"kvferry_peers_chunks_device_total", CT},
    {"kvferry_peers_chunks_landed_device_total", CT},
    {"kvferry_peers_chunks_landed_total", CT},
    {"kvferry_peers_chunks_put_total", CT},
    {"kvferry_peers_direct_puts_total", CT},
    {"kvferry_peers_chunk_gpu_to_peer_total", CT},
    {"kvferry_peers_peer_arenas_pinned_total", CT},
    {"kvferry_peers_peer_arenas_unpinned_total", CT},
    {"kvferry_peers_peer_arena_pin_failures_total", CT},
    {"kvferry_peers_flows_done_total", CT},
    {"kvferry_peers_flows_failed_total", CT},
    {"kvferry_peers_flows_total", CT},
    {"kvferry_peers_forwards_refused_total", CT},
    {"kvferry_peers_fragment_puts_total", CT},
    {"kvferry_peers_fragment_cma_writes_total", CT},
    {"kvferry_peers_fragment_copy_jobs_total", CT},
    {"kvferry_peers_gpu_failures_total", CT},
    {"kvferry_peers_reader_nacks_sent_total", CT},
    {"kvferry_peers_reader_nacks_recv_total", CT},
    {"kvferry_peers_reader_nacks_queued_total", CT},
    {"kvferry_peers_reader_nacks_unsent_total", CT},
    {"kvferry_peers_reader_nacks_stale_total", CT},
    {"kvferry_peers_frag_holds_total", CT},
    {"kvferry_peers_link_waits_total", CT},
    {"kvferry_peers_frag_jobs_in_flight", GA},
    {"kvferry_peers_gpu_gathers_total", CT},
    {"kvferry_peers_gpu_scatters_total", CT},
    {"kvferry_peers_host_gathers_total", CT},
    {"kvferry_peers_host_scatters_total", CT},
    {"kvferry_peers_last_remote_bytes", GA},
    {"kvferry_peers_last_remote_wall_seconds", GA},
    {"kvferry_peers_link_conns_refused_address_total", CT},
    {"kvferry_peers_link_conns_refused_table_total", CT},
    {"kvferry_peers_link_conns_refused_unproven_total", CT},
    {"kvferry_peers_link_handshake_timeouts_total", CT},
    {"kvferry_peers_link_ucx_stale_events_dropped_total", CT},
    {"kvferry_peers_link_unproven_endpoints", GA},
    {"kvferry_peers_layouts_decoded_total", CT},
    {"kvferry_peers_layouts_forwarded_total", CT},
    {"kvferry_peers_layouts_missed_total", CT},
    {"kvferry_peers_layouts_referenced_total", CT},
    {"kvferry_peers_layouts_sent_total", CT},
    {"kvferry_peers_nacks_recv_total", CT},
    {"kvferry_peers_nacks_sent_total", CT},
    {"kvferry_peers_paths_total", CT},
    {"kvferry_peers_chunk_ways_total", CT},
    {"kvferry_peers_peers_exited_reclaimed_total", CT},
    {"kvferry_peers_peers_lost_total", CT},
    {"kvferry_peers_remote_done_total", CT},
    {"kvferry_peers_remote_failed_total", CT},
    {"kvferry_peers_remote_recvs_total", CT},
    {"kvferry_peers_replans_total", CT},
    {"kvferry_peers_slots_reclaimed_total", CT},
    {"kvferry_peers_staging_fallbacks_total", CT},
    {"kvferry_peers_staging_held_total", CT},
    {"kvferry_peers_msgs_held_total", CT},
    {"kvferry_peers_stale_epochs_total", CT},
    {"kvferry_peers_table_nacks_total", CT},
    {"kvferry_peers_table_retries_total", CT},
    {"kvferry_peers_tables_fetched_total", CT},
    {"kvferry_peers_tables_served_total", CT},
    {"kvferry_workers_accepted_total", CT},
    {"kvferry_workers_bad_frames_total", CT},
    {"kvferry_workers_lost_total", CT},
    {"kvferry_workers_evicted_total", CT},
    {"kvferry_workers_hello_timeouts_total", CT},
    {"kvferry_workers_frame_timeouts_total", CT},
    {"kvferry_workers_read_timeouts_total", CT},
    {"kvferry_workers_frame_memory_refused_total", CT},
    {"kvferry_workers_event_queue_full_total", CT},
    {"kvferry_workers_access_revoked_total", CT},
    {"kvferry_workers_frame_memory_bytes", GA},
    {"kvferry_workers_prefaults_total", CT},
    {"kvferry_workers_prefaults_done_total", CT},
    {"kvferry_workers_prefaults_cancelled_total", CT},
    {"kvferry_workers_prefaulting", GA},
    {"kvferry_workers_prefault_bytes_total", CT},
    {"kvferry_workers_prefault_seconds_total", CT},
    {"kvferry_workers_refused_access_total", CT},
    {"kvferry_workers_refused_limit_total", CT},
    {"kvferry_workers_accept_failed_total", CT},
    {"kvferry_workers_register_refused_total", CT},
    {"kvferry_workers_registered_total", CT},
    {"kvferry_workers_transfers_bytes_local_gpu_total", CT},
    {"kvferry_workers_transfers_bytes_local_total", CT},
    {"kvferry_workers_transfers_bytes_remote_total", CT},
    {"kvferry_workers_transfers_done_total", CT},
    {"kvferry_workers_transfers_end_to_end_seconds", HI},
    {"kvferry_workers_transfers_failed_total", CT},
    {"kvferry_workers_transfers_fails_dropped_total", CT},
    {"kvferry_workers_transfers_held_total", CT},
    {"kvferry_workers_transfers_released_total", CT},
    {"kvferry_workers_transfers_first_byte_seconds", HI},
    {"kvferry_workers_transfers_validate_seconds", HI},
    {"kvferry_workers_transfers_first_credit_seconds", HI},
    {"kvferry_workers_transfers_in_flight", GA},
    {"kvferry_workers_transfers_local_copy_gbps", GA},
    {"kvferry_workers_transfers_local_copy_seconds_total", CT},
    {"kvferry_workers_transfers_local_gpu_phase_seconds_total", CT},
    {"kvferry_workers_transfers_local_phase_seconds_total", CT},
    {"kvferry_workers_transfers_local_phase_requests_total", CT},
    {"kvferry_workers_transfers_local_gpu_total", CT},
    {"kvferry_workers_transfers_local_memcpy_gbps", GA},
    {"kvferry_workers_transfers_lookup_seconds", HI},
    {"kvferry_workers_transfers_recvs_total", CT},
    {"kvferry_workers_transfers_plan_template_hits_total", CT},
    {"kvferry_workers_transfers_plan_template_misses_total", CT},
    {"kvferry_workers_transfers_plan_template_evicted_total", CT},
    {"kvferry_workers_transfers_plan_template_not_kept_total", CT},
    {"kvferry_workers_transfers_plan_templates", GA},
    {"kvferry_workers_transfers_plan_template_bytes", GA},
    {"kvferry_workers_transfers_request_bytes", HI},
    {"kvferry_workers_transfers_phase_seconds", HI},
    {"kvferry_workers_transfers_send_seconds", HI},
    {"kvferry_workers_transfers_sends_total", CT},
    {"kvferry_workers_transfers_sent_total", CT},
    {"kvferry_workers_transfers_transfer_seconds", HI},
    {"kvferry_workers_transfers_per_instance_requests_total", CT},
    {"kvferry_workers_transfers_per_instance_bytes_total", CT},
    {"kvferry_workers_transfers_per_peer_requests_total", CT},
    {"kvferry_workers_transfers_per_peer_bytes_total", CT},
    {"kvferry_workers_transfers_served_per_peer_requests_total", CT},
    {"kvferry_workers_transfers_served_per_peer_bytes_total", CT},
    {"kvferry_arena_slots_split", GA},
    {"kvferry_arena_small_grants_total", CT},
    {"kvferry_arena_staging_slots_split", GA},
    {"kvferry_arena_staging_small_grants_total", CT},
    {"kvferry_arena_peer_share_bytes", GA},
    {"kvferry_arena_staging_peer_share_bytes", GA},
    {"kvferry_copy_busy_seconds_total", CT},
    {"kvferry_copy_bytes_total", CT},
    {"kvferry_copy_cancelled_total", CT},
    {"kvferry_copy_deferred_unmaps", GA},
    {"kvferry_copy_jobs_total", CT},
    {"kvferry_copy_nodes", GA},
    {"kvferry_copy_pieces_total", CT},
    {"kvferry_copy_pinned_mappings", GA},
    {"kvferry_copy_queued_pieces", GA},
    {"kvferry_copy_running_jobs", GA},
    {"kvferry_copy_stolen_total", CT},
    {"kvferry_copy_threads", GA},
    {"kvferry_copy_unmaps_pending", GA},
    {"kvferry_copy_unmaps_pending_bytes", GA},
    {"kvferry_copy_unmaps_total", CT},
    {"kvferry_copy_unmapped_bytes_total", CT},
    {"kvferry_copy_unmap_seconds_total", CT},
    {"kvferry_copy_unmap_max_seconds", GA},
    {"kvferry_copy_unmap_step_max_seconds", GA},
};

static char *scrape(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "metrics");
    ck_assert_ptr_nonnull(r);
    const char *t = json_string_value(json_object_get(r, "text"));
    ck_assert_ptr_nonnull(t);
    char *out = strdup(t);
    json_decref(r);
    char err[256] = "";
    int bad = pc_validate(out, true, err, sizeof err);
    ck_assert_msg(bad == 0, "scrape is not valid exposition: %s", err);
    return out;
}

#define sample pc_value

/* Every # TYPE line of text is a row of `families` with that type; marks the rows seen. Prints
 * each family that is not (as a table row) and returns how many. */
static int check_types(const char *text, bool *seen)
{
    int bad = 0;
    size_t nf = sizeof families / sizeof families[0];
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "# TYPE ", 7) != 0)
            continue;
        char name[256], type[32];
        ck_assert_int_eq(sscanf(p + 7, "%255s %31s", name, type), 2);
        size_t i = 0;
        while (i < nf && strcmp(families[i].name, name) != 0)
            i++;
        if (i == nf || strcmp(families[i].type, type) != 0) {
            fprintf(stderr, "family %s is a %s, expected %s%s; as a row:\n    {\"%s\", %s},\n",
                    name, type, i == nf ? "no such family" : "a ", i == nf ? "" : families[i].type,
                    name, !strcmp(type, "counter") ? "CT" : !strcmp(type, "gauge") ? "GA" : "HI");
            bad++;
            continue;
        }
        seen[i] = true;
    }
    return bad;
}

/* promtool (the binary of Debian's `prometheus`, from scripts/install-deps) checks it too; CI
 * requires it (KVF_REQUIRE_PROMTOOL=1). */
static void promtool(const char *text)
{
    int have = pc_promtool();
    ck_assert_msg(have >= 0, "KVF_REQUIRE_PROMTOOL=1 but promtool is not on PATH "
                             "(scripts/install-deps installs it)");
    if (!have) {
        printf("SKIP promtool check: promtool not installed (scripts/install-deps)\n");
        return;
    }
    char dir[64], path[128], cmd[256];
    tu_tmpdir(dir, sizeof dir);
    FILE *f = fopen(tu_fmt(path, sizeof path, "%s/scrape.prom", dir), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    int rc = system(tu_fmt(cmd, sizeof cmd, "promtool check metrics < %s 1>&2", path));
    unlink(path);
    rmdir(dir);
    ck_assert_msg(rc == 0, "promtool check metrics failed (exit %d): see above", rc);
}

/* 1 when `name` is a family (its # TYPE line) of text a or b. */
static bool family_of(const char *a, const char *b, const char *name)
{
    char line[300];
    tu_fmt(line, sizeof line, "# TYPE %s ", name);
    return strstr(a, line) || strstr(b, line);
}

/* Every kvferry_* metric the shipped dashboard and alert rules name is a family of the scrapes
 * a and b (a histogram's _bucket, _sum and _count series by its family). Returns how many
 * names were checked. */
static size_t contrib_names_exported(const char *a, const char *b)
{
    static const char *const files[] = {"contrib/grafana/kvferry.json",
                                        "contrib/prometheus/kvferry.rules.yml"};
    size_t checked = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        FILE *fp = fopen(files[f], "r");
        ck_assert_msg(fp, "%s: %s", files[f], strerror(errno));
        static char text[1 << 17];
        size_t n = fread(text, 1, sizeof text - 1, fp);
        fclose(fp);
        ck_assert_uint_lt(n, sizeof text - 1);
        text[n] = '\0';
        for (const char *p = text; (p = strstr(p, "kvferry_")); ) {
            char name[200];
            size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
            tu_fmt(name, sizeof name, "%.*s", (int)len, p);
            p += len;
            bool ok = family_of(a, b, name);
            static const char *const parts[] = {"_bucket", "_sum", "_count"};
            for (size_t i = 0; !ok && i < 3; i++) {
                size_t m = strlen(parts[i]);
                if (len > m && !strcmp(name + len - m, parts[i])) {
                    name[len - m] = '\0';
                    ok = family_of(a, b, name);
                }
            }
            ck_assert_msg(ok, "%s names %s, which neither daemon exports", files[f], name);
            checked++;
        }
    }
    return checked;
}

START_TEST(every_family_has_its_declared_type_on_two_daemons)
{
    struct two t;
    const char *extra =
        "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n";
    two_start_insts(
        &t, &(struct two_insts){
                .extra_a = extra, .extra_b = extra, .spec = "tiny", .blocks = 1, .rng = 0x77});
    pattern_fill(&t.ctx.r[0].l, &t.ctx.r[0].mem, &t.ctx.r[0].pids, 0, 0x42);
    ck_assert_int_eq(
        kvf_send(t.ctx.r[0].c, 7, t.ctx.r[0].l.n_groups, t.ctx.r[0].counts, t.ctx.r[0].ids, 1), 0);
    struct kvf_recv_args a = {.req_id = 7,
                              .ctx_instance = t.ctx.r[0].l.instance,
                              .ctx_dp_rank = -1,
                              .ctx_home = t.a.addr,
                              .n_groups = t.gen.r[0].l.n_groups,
                              .counts = t.gen.r[0].counts,
                              .ids = t.gen.r[0].ids};
    ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &a), 0);
    struct kvf_event ev;
    int ok = ru_wait_event(&t.gen.r[0], 7, &ev, 40000) == KVF_EV_DONE;
    ok = ok && ru_wait_event(&t.ctx.r[0], 7, &ev, 20000) == KVF_EV_SENT;
    ck_assert_msg(ok, "request 7 did not complete: %s", ev.message);

    size_t nf = sizeof families / sizeof families[0];
    bool seen[sizeof families / sizeof families[0]] = {false};
    char *ta = scrape(&t.a), *tb = scrape(&t.b);
    int bad = check_types(ta, seen) + check_types(tb, seen);
    ck_assert_msg(bad == 0, "%d families differ from the table (listed above)", bad);
    for (size_t i = 0; i < nf; i++)
        ck_assert_msg(seen[i], "family %s is in the table but in neither scrape",
                      families[i].name);
    ck_assert_double_eq(sample(ta, "kvferry_metrics_undeclared"), 0);
    ck_assert_double_eq(sample(tb, "kvferry_metrics_undeclared"), 0);
    ck_assert_double_eq(sample(ta, "kvferry_metrics_series_dropped"), 0);
    ck_assert_double_eq(sample(tb, "kvferry_metrics_series_dropped"), 0);

    /* the generation daemon timed the request's phases */
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_end_to_end_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_transfer_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_first_credit_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_lookup_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_validate_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_request_bytes_count"), 1);
    double bytes = sample(tb, "kvferry_peers_last_remote_bytes");
    ck_assert(bytes > 0);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_request_bytes_sum"), bytes);
    /* one peer label space: each side names the other by its link id, as `peers` lists it */
    json_t *pa = ru_ctl(&t.a, "peers"), *pb = ru_ctl(&t.b, "peers");
    const char *gen_id =
        json_string_value(json_object_get(json_array_get(json_object_get(pa, "peers"), 0), "peer"));
    const char *ctx_id =
        json_string_value(json_object_get(json_array_get(json_object_get(pb, "peers"), 0), "peer"));
    ck_assert_msg(gen_id && *gen_id && ctx_id && *ctx_id, "a daemon lists no peer");
    /* per peer (the context side's daemon) and per receiving instance */
    char series[256];
    tu_fmt(series, sizeof series, "kvferry_workers_transfers_per_peer_requests_total{peer=\"%s\"}",
           ctx_id);
    ck_assert_msg(sample(tb, series) == 1, "no %s 1 in:\n%s", series, tb);
    tu_fmt(series, sizeof series, "kvferry_workers_transfers_per_peer_bytes_total{peer=\"%s\"}",
           ctx_id);
    ck_assert_double_eq(sample(tb, series), bytes);
    tu_fmt(series, sizeof series,
           "kvferry_workers_transfers_per_instance_requests_total{instance=\"%s\"}",
           t.gen.r[0].l.instance);
    ck_assert_msg(sample(tb, series) == 1, "no %s 1", series);
    /* the context side's share, by the generation daemon */
    tu_fmt(series, sizeof series,
           "kvferry_workers_transfers_served_per_peer_requests_total{peer=\"%s\"}", gen_id);
    ck_assert_msg(sample(ta, series) == 1, "no %s 1 in:\n%s", series, ta);
    tu_fmt(series, sizeof series,
           "kvferry_workers_transfers_served_per_peer_bytes_total{peer=\"%s\"}", gen_id);
    ck_assert_double_eq(sample(ta, series), bytes);
    /* the phases again by path, peer and instance; the context side's SEND to SENT */
    const char *phases[] = {"lookup", "validate", "first_credit", "first_byte", "transfer",
                            "end_to_end"};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        tu_fmt(series, sizeof series,
               "kvferry_workers_transfers_phase_seconds_count{instance=\"%s\",path=\"bounce\","
               "peer=\"%s\",phase=\"%s\"}",
               t.gen.r[0].l.instance, ctx_id, phases[i]);
        ck_assert_msg(sample(tb, series) == 1, "no %s 1 in:\n%s", series, tb);
    }
    ck_assert_double_eq(sample(ta, "kvferry_workers_transfers_send_seconds_count"), 1);
    ck_assert_double_eq(sample(tb, "kvferry_workers_transfers_send_seconds_count"), 0);
    /* request_bytes in 2x steps: the request's bucket is at most twice its size */
    double le = 4096, below = 0;
    for (; le < bytes; le *= 2) {
        tu_fmt(series, sizeof series, "kvferry_workers_transfers_request_bytes_bucket{le=\"%.0f\"}",
               le);
        below = sample(tb, series);
        ck_assert_msg(below == 0, "%s is %g", series, below);
    }
    tu_fmt(series, sizeof series, "kvferry_workers_transfers_request_bytes_bucket{le=\"%.0f\"}",
           le);
    ck_assert_msg(sample(tb, series) == 1 && le < 2 * bytes, "%s (%g bytes): %g", series, bytes,
                  sample(tb, series));
    json_decref(pa);
    json_decref(pb);
    double wall = sample(tb, "kvferry_peers_last_remote_wall_seconds");
    double e2e = sample(tb, "kvferry_workers_transfers_end_to_end_seconds_sum");
    ck_assert_msg(wall > 0 && wall <= e2e, "last_remote_wall %g s, end to end %g s", wall, e2e);
    /* the dashboard and the alerts query what the daemons export */
    size_t named = contrib_names_exported(ta, tb);
    ck_assert_msg(named >= 20, "contrib/ names only %zu metrics", named);
    promtool(ta);
    promtool(tb);
    free(ta);
    free(tb);
    two_stop(&t, ok);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_types");
    TCase *tc = tcase_create("types");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_family_has_its_declared_type_on_two_daemons);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
