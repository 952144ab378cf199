/* request_metrics.c: the workers, peers and arena sections' stats keys, declared (type, HELP,
 * unit) beside the code that counts them (request_metrics.h). A key added to a stats hook needs
 * a row here, or it is left out of the scrape (check_metrics fails on that). */
#include "request_metrics.h"

#define C PROM_COUNTER
#define G PROM_GAUGE
#define H PROM_HISTOGRAM
#define N(a) (sizeof(a) / sizeof(a[0]))

const struct prom_doc workers_metrics[] = {
    {"accepted", C, NULL, "Worker connections accepted.", "connections"},
    {"refused_access", C, NULL, "Worker connections refused: peer not allowed.", "connections"},
    {"refused_limit", C, NULL, "Worker connections refused: connection limit reached.",
     "connections"},
    {"accept_failed", C, NULL,
     "Worker socket accept() failures (each pauses the listener; EMFILE: out of fds).",
     "failures"},
    {"registered", C, NULL, "Ranks registered.", "ranks"},
    {"register_refused", C, NULL, "REGISTER requests refused.", "requests"},
    {"bad_frames", C, NULL, "Worker connections closed for a bad frame.", "connections"},
    {"lost", C, NULL, "Worker connections that ended without being asked to.", "connections"},
    {"evicted", C, NULL, "Worker connections closed for not draining their events.",
     "connections"},
    {"hello_timeouts", C, NULL, "Worker connections closed: no HELLO in time.", "connections"},
    {"frame_timeouts", C, NULL, "Worker connections closed: a frame not finished in time.",
     "connections"},
    {"read_timeouts", C, NULL, "Worker connections closed: idle past the read deadline.",
     "connections"},
    {"frame_memory_refused", C, NULL, "Frames refused: the frame memory limit was reached.",
     "frames"},
    {"event_queue_full", C, NULL, "Times a connection's event queue was full.", "events"},
    {"access_revoked", C, NULL, "Worker connections closed: a reload took their uid's access "
     "away.", "connections"},
    {"frame_memory_bytes", G, NULL, "Memory held by partial frames now.", "bytes"},
    {"prefaults", C, NULL, "Ranks whose host pools began to be mapped in after REGISTER.",
     "ranks"},
    {"prefaults_done", C, NULL, "Pool prefaults that ended.", "ranks"},
    {"prefaults_cancelled", C, NULL, "Pool prefaults cancelled: the worker went first.", "ranks"},
    {"prefaulting", G, NULL, "Pool prefaults running now.", "ranks"},
    {"prefault_bytes", C, NULL, "Pool bytes of the prefaults that ended.", "bytes"},
    {"prefault_seconds", C, NULL, "REGISTER to the end of each prefault, summed.", "seconds"},
    {"transfers.sends", C, NULL, "SEND requests received from context ranks.", "requests"},
    {"transfers.recvs", C, NULL, "RECV requests received from generation ranks.", "requests"},
    {"transfers.done", C, NULL, "RECV requests completed (data landed).", "requests"},
    {"transfers.sent", C, NULL, "SEND requests completed (blocks reusable).", "requests"},
    {"transfers.failed", C, "error", "Transfer requests failed, by typed error.", "requests"},
    {"transfers.in_flight", G, NULL, "Transfer requests in flight now.", "requests"},
    {"transfers.fails_dropped", C, NULL,
     "Failed readers not counted against a SEND (an ended request's, or past the limits): such "
     "a SEND waits for its deadline.",
     "readers"},
    {"transfers.held", C, NULL,
     "RECVs that ended FAILED flagged HELD: a lost peer may still write their blocks.",
     "requests"},
    {"transfers.released", C, NULL,
     "Of the RECVs ended HELD, those released: no write of a peer can land any more.",
     "requests"},
    {"transfers.bytes_local", C, NULL, "Bytes moved by the local path.", "bytes"},
    {"transfers.bytes_remote", C, NULL, "Bytes moved to or from other daemons.", "bytes"},
    {"transfers.local_gpu", C, NULL, "Local RECVs copied by GPU kernels.", "requests"},
    {"transfers.bytes_local_gpu", C, NULL, "Bytes of local RECVs copied by GPU kernels.",
     "bytes"},
    {"transfers.local_gpu_phase_s", C, "phase",
     "Local GPU copies by phase: programs (bound: cached or uploaded), launch (kernels queued), "
     "run (until every completion is back on the loop), kernels (of run: the kernels' own GPU "
     "time).",
     "seconds"},
    {"transfers.local_phase_s", C, "phase",
     "Same-daemon RECVs' host timeline, summed by span: read, decode, admit, plan, check, start, "
     "run, done (the frame that completed the meeting read to the DONE frame written), total, "
     "and wait_send (the RECV waiting for its writers' SENDs).",
     "seconds"},
    {"transfers.local_phase_requests", C, NULL,
     "Same-daemon RECVs whose timeline local_phase_s sums.", "requests"},
    {"transfers.plan_template_hits", C, NULL,
     "Local RECVs planned from a plan template (their ids substituted).", "requests"},
    {"transfers.plan_template_misses", C, NULL,
     "Local RECVs planned from scratch, their template built (a new shape or registrations).",
     "requests"},
    {"transfers.plan_template_evicted", C, NULL,
     "Plan templates evicted to stay within the cache's entries and bytes.", "templates"},
    {"transfers.plan_template_not_kept", C, NULL,
     "Plan templates used once and not kept (over the cache's byte bound).", "templates"},
    {"transfers.plan_templates", G, NULL, "Plan templates kept now.", "templates"},
    {"transfers.plan_template_bytes", G, NULL, "Memory held by plan templates now.", "bytes"},
    {"transfers.local_copy_s", C, NULL, "Time spent planning, checking and copying local RECVs.",
     "seconds"},
    {"transfers.local_copy_gbps", G, NULL,
     "Local path throughput over its lifetime: bytes_local / local_copy (1e9 bytes/s).",
     "GB/s"},
    {"transfers.local_memcpy_gbps", G, NULL,
     "Local path copy throughput over its lifetime, copy time only (1e9 bytes/s).", "GB/s"},
    {"transfers.request_bytes", H, NULL, "Bytes of each completed RECV (local and remote).",
     "bytes"},
    {"transfers.lookup_s", H, NULL,
     "Per completed RECV: from the RECV to its context instance known.", "seconds"},
    {"transfers.validate_s", H, NULL,
     "Per completed RECV: from its context instance known to its plan accepted (compatibility, "
     "coverage, bounds).",
     "seconds"},
    {"transfers.first_credit_s", H, NULL,
     "Per completed remote RECV: from the plan accepted to landing credits reserved at every "
     "writer's daemon.",
     "seconds"},
    {"transfers.first_byte_s", H, NULL,
     "Per completed RECV: from the RECV to its first byte moving (includes waiting for the "
     "SEND).",
     "seconds"},
    {"transfers.transfer_s", H, NULL, "Per completed RECV: from its first byte moving to DONE.",
     "seconds"},
    {"transfers.end_to_end_s", H, NULL, "Per completed RECV: from the RECV to DONE.", "seconds"},
    {"transfers.phase_s", H, "path,peer,instance,phase",
     "Per completed RECV, the phases above (phase: lookup, validate, first_credit, first_byte, "
     "transfer, end_to_end) by path (local, bounce, fragment), peer (the context side's daemon, "
     "as per_peer names it) and receiving instance (metrics.max_label_values tuples of path, "
     "peer and instance, then all three \"other\").",
     "seconds"},
    {"transfers.send_s", H, NULL,
     "Per SEND that ended SENT (context side): from the SEND to SENT (every reader served).",
     "seconds"},
    {"transfers.per_instance", C, "instance", NULL, NULL}, /* a label map: rows below */
    {"transfers.per_instance.requests", C, NULL,
     "RECVs completed, by receiving instance (metrics.max_label_values, then \"other\").",
     "requests"},
    {"transfers.per_instance.bytes", C, NULL,
     "Bytes of completed RECVs, by receiving instance (metrics.max_label_values, then "
     "\"other\").",
     "bytes"},
    {"transfers.per_peer", C, "peer", NULL, NULL},
    {"transfers.per_peer.requests", C, NULL,
     "RECVs completed, by the context side's daemon (its link id; \"local\": this one; "
     "metrics.max_label_values, then \"other\").",
     "requests"},
    {"transfers.per_peer.bytes", C, NULL,
     "Bytes of completed RECVs, by the context side's daemon (its link id; \"local\": this one; "
     "metrics.max_label_values, then \"other\").",
     "bytes"},
    {"transfers.served_per_peer", C, "peer", NULL, NULL},
    {"transfers.served_per_peer.requests", C, NULL,
     "Writer flows this daemon's context ranks completed to another daemon, by the generation "
     "side's daemon (its link id; metrics.max_label_values, then \"other\").",
     "flows"},
    {"transfers.served_per_peer.bytes", C, NULL,
     "Bytes of writer flows completed to another daemon, by the generation side's daemon "
     "(metrics.max_label_values, then \"other\").",
     "bytes"},
};
const size_t workers_metrics_len = N(workers_metrics);

const struct prom_doc peers_metrics[] = {
    {"remote_recvs", C, NULL, "RECV_REQ messages received from other daemons.", "messages"},
    {"layouts_sent", C, NULL, "RECV_REQs that carried the generation layout to a peer.",
     "messages"},
    {"layouts_referenced", C, NULL,
     "RECV_REQs that named a generation layout the peer already held.", "messages"},
    {"layouts_decoded", C, NULL, "Generation layouts decoded from peers' RECV_REQs.", "layouts"},
    {"layouts_missed", C, NULL,
     "RECV_REQs naming a generation layout this daemon did not hold (refused).", "messages"},
    {"remote_done", C, NULL, "Remote requests completed.", "requests"},
    {"remote_failed", C, NULL, "Remote requests failed.", "requests"},
    {"flows", C, NULL, "Writer flows started.", "flows"},
    {"flows_done", C, NULL, "Writer flows completed.", "flows"},
    {"flows_failed", C, NULL, "Writer flows failed.", "flows"},
    {"chunks_put", C, NULL, "Chunks moved by UCX put.", "chunks"},
    {"chunks_am", C, NULL, "Chunks moved by active-message rendezvous.", "chunks"},
    {"chunks_device", C, NULL, "Chunks sent device to device from the device arena.", "chunks"},
    {"chunks_landed_device", C, NULL, "Chunks landed in the device arena.", "chunks"},
    {"bytes_put", C, NULL, "Bytes moved by UCX put.", "bytes"},
    {"bytes_am", C, NULL, "Bytes moved by active-message rendezvous.", "bytes"},
    {"chunks_landed", C, NULL, "Chunks landed and scattered.", "chunks"},
    {"bytes_landed", C, NULL, "Bytes landed and scattered.", "bytes"},
    {"staging_fallbacks", C, NULL, "Transfers that fell back to staging.", "requests"},
    {"staging_held", C, NULL, "Failed chunks whose staging memory was held for a peer that may still read it.", "chunks"},
    {"msgs_held", C, NULL, "Failed control messages whose bytes were held for a peer that may still read them.", "messages"},
    {"bound_violations", C, NULL, "Chunks refused by a bounds check.", "chunks"},
    {"stale_epochs", C, NULL, "Messages refused for a stale epoch.", "messages"},
    {"tables_served", C, NULL, "Instance tables served to other daemons.", "tables"},
    {"tables_fetched", C, NULL, "Instance tables fetched from home daemons.", "tables"},
    {"table_nacks", C, NULL, "Instance table requests refused.", "requests"},
    {"table_retries", C, NULL, "Instance table fetches retried.", "requests"},
    {"layouts_forwarded", C, NULL, "Layouts forwarded to a home daemon.", "layouts"},
    {"forwards_refused", C, NULL, "Layout forwards refused.", "layouts"},
    {"peers_lost", C, NULL, "Peer daemons lost.", "peers"},
    {"nacks_sent", C, NULL, "NACKs sent to other daemons.", "messages"},
    {"nacks_recv", C, NULL, "NACKs received from other daemons.", "messages"},
    {"slots_reclaimed", C, NULL, "Quarantined landing slots reclaimed.", "slots"},
    {"peers_exited_reclaimed", C, NULL, "Peers lost while frozen whose process exit ended the hold on their landing slots.", "peers"},
    {"replans", C, NULL, "Remote RECVs planned again after a stale instance table.", "requests"},
    {"bytes_local_writers", C, NULL, "Bytes of remote requests copied directly from writers on this host.", "bytes"},
    {"fragment_puts", C, NULL, "UCX puts issued by the fragment path.", "puts"},
    {"fragment_cma_writes", C, NULL,
     "process_vm_writev calls of the fragment path into the generation pools (cma).", "calls"},
    {"fragment_copy_jobs", C, NULL,
     "Fragment programs the copy threads wrote into the generation pools over cma.", "jobs"},
    {"bytes_fragment", C, NULL, "Bytes moved by the fragment path.", "bytes"},
    {"gpu_gathers", C, NULL, "GPU gather kernels run (context side).", "kernels"},
    {"gpu_scatters", C, NULL, "GPU scatter kernels run (generation side).", "kernels"},
    {"bytes_gpu_gathered", C, NULL, "Bytes gathered from GPU pools.", "bytes"},
    {"bytes_gpu_scattered", C, NULL, "Bytes scattered into GPU pools.", "bytes"},
    {"gpu_failures", C, NULL, "GPU gather/scatter failures.", "kernels"},
    {"host_gathers", C, NULL, "Bounce chunks gathered on the copy threads (context side).", "chunks"},
    {"host_scatters", C, NULL, "Bounce chunks scattered on the copy threads (generation side).", "chunks"},
    {"bytes_host_gathered", C, NULL, "Bytes gathered on the copy threads.", "bytes"},
    {"bytes_host_scattered", C, NULL, "Bytes scattered on the copy threads.", "bytes"},
    {"direct_puts", C, NULL, "UCX puts straight from context pools into landing slots.", "puts"},
    {"chunk_gpu_to_peer", C, NULL,
     "Bounce chunks a GPU kernel wrote straight into the peer's landing slot (its arena mapped "
     "and page-locked here).", "chunks"},
    {"peer_arenas_pinned", C, NULL, "Peers' arenas mapped here and page-locked for CUDA.",
     "mappings"},
    {"peer_arenas_unpinned", C, NULL, "Peers' arenas unpinned again (peer gone or stopping).",
     "mappings"},
    {"peer_arena_pin_failures", C, NULL,
     "Peers' arenas CUDA refused to page-lock: their GPU chunks are staged and put.", "mappings"},
    {"reader_nacks_sent", C, NULL, "READER_NACKs sent: a failed reader told to its writers' daemon.",
     "messages"},
    {"reader_nacks_recv", C, NULL, "READER_NACKs received: failed readers of SENDs here.",
     "messages"},
    {"reader_nacks_queued", C, NULL,
     "Failed readers' NACKs that waited: for the table (failed before it came) or for the "
     "writer's daemon to connect.",
     "messages"},
    {"reader_nacks_unsent", C, NULL,
     "Failed readers' NACKs never sent (their plan failed, past the bound or age): such SENDs "
     "end at their deadline.",
     "messages"},
    {"reader_nacks_stale", C, NULL,
     "Failed readers' NACKs dropped as an older incarnation's: the daemon they waited for "
     "restarted since the reader failed, or (received) they name another epoch of the "
     "instance than its home holds here.",
     "messages"},
    {"link_waits", C, NULL,
     "Link starts that waited for the listen address's interface to come up (UCX fixes its "
     "devices when the link starts).",
     "starts"},
    {"frag_holds", C, NULL,
     "Failed fragment flows whose report waited until their puts could no longer land.", "flows"},
    {"frag_jobs_in_flight", G, NULL, "Fragment jobs whose puts are in flight (context side).",
     "jobs"},
    {"last_remote_wall_us", G, NULL,
     "The last remote request done: from its first chunk landing to DONE (not the wait for the "
     "SEND).",
     NULL},
    {"last_remote_bytes", G, NULL, "The last remote request done: its bytes.", "bytes"},
    {"paths", C, "path", "Path decisions, by path.", "decisions"},
    {"chunk_ways", C, "way",
     "Bounce chunks by the way they left the context side (bounce_way.h): taken (way=NAME), "
     "and refused by reason (way=NAME:REASON).", "chunks"},
    {"link.conns_refused_unproven", C, NULL,
     "Connections from other daemons refused before the handshake: peers.unproven_max "
     "unproven ones were open.", "connections"},
    {"link.conns_refused_address", C, NULL,
     "Connections refused before the handshake: peers.unproven_per_address unproven ones "
     "from that address were open.", "connections"},
    {"link.conns_refused_table", C, NULL,
     "Peers refused after proving the cluster secret: the table of proven peers was full.",
     "connections"},
    {"link.handshake_timeouts", C, NULL,
     "Connections closed at their handshake deadline (peers.unproven_timeout for those that "
     "connected here).", "connections"},
    {"link.ucx_stale_events_dropped", C, NULL,
     "Stale UCX async events dropped before UCX's connection manager saw them (each could have "
     "aborted the daemon: docs/UCX.md trap 18).", "events"},
    {"link.unproven_endpoints", G, NULL,
     "Connections from other daemons open now that have not proven the cluster secret yet.",
     "connections"},
};
const size_t peers_metrics_len = N(peers_metrics);

#define ARENA_ROWS(p, what)                                                                      \
    {p "capacity_bytes", G, NULL, what " arena size.", "bytes"},                                 \
        {p "chunk_bytes", G, NULL, what " arena chunk size.", "bytes"},                          \
        {p "slot_bytes", G, NULL, what " arena slot size.", "bytes"},                            \
        {p "slots_total", G, NULL, what " arena: slots it is cut into (a size).", "slots"},       \
        {p "slots_free", G, NULL, what " arena: slots free now.", "slots"},                      \
        {p "slots_in_use", G, NULL, what " arena: slots in use now.", "slots"},                  \
        {p "waiting_requests", G, NULL, what " arena: requests waiting for a slot now.",         \
         "requests"},                                                                            \
        {p "quarantined_slots", G, NULL, what " arena: slots quarantined now.", "slots"},        \
        {p "quarantined_bytes", G, NULL, what " arena: bytes quarantined now.", "bytes"},        \
        {p "grants_total", C, NULL, what " arena: slot grants.", "grants"},                      \
        {p "timeouts_total", C, NULL, what " arena: slot waits that timed out.", "requests"},     \
        {p "stale_reports_total", C, NULL, what " arena: reports for a stale generation.",       \
         "reports"},                                                                             \
        {p "bound_violations_total", C, NULL, what " arena: reports out of a slot's bounds.",    \
         "reports"},                                                                             \
        {p "reclaimed_total", C, NULL, what " arena: slots reclaimed.", "slots"},                \
        {p "refused_waiters_total", C, NULL, what " arena: waiters refused (queue full).",       \
         "requests"},                                                                            \
        {p "slots_split", G, NULL, what " arena: whole slots cut into small ones now.", "slots"}, \
        {p "small_grants_total", C, NULL, what " arena: grants of a small (size-class) slot.",   \
         "grants"},                                                                                \
        {p "peer_share_bytes", G, NULL, what " arena: bytes one peer may hold (arena.peer_share).", \
         "bytes"}

const struct prom_doc arena_metrics[] = {
    ARENA_ROWS("", "Landing"),
    ARENA_ROWS("staging.", "Staging"),
    /* staging memory failed peers may still read (arena_hold.h) */
    {"staging.held.peers", G, NULL, "Staging arena: peers whose failed chunks are held now.", "peers"},
    {"staging.held.slots", G, NULL, "Staging arena: slots held for failed peers now.", "slots"},
    {"staging.held.buffers", G, NULL, "Staging arena: heap buffers held for failed peers now.",
     "buffers"},
    {"staging.held.bytes", G, NULL, "Staging arena: bytes held for failed peers now.", "bytes"},
    {"staging.held.peers_until_told", G, NULL,
     "Staging arena: frozen peers whose holds wait until heard again or their exit.", "peers"},
    {"staging.held.holds_total", C, NULL, "Staging arena: slots and buffers held.", "holds"},
    {"staging.held.reclaimed_total", C, NULL, "Staging arena: held slots and buffers given back.",
     "holds"},
    {"staging.held.reclaimed_bytes_total", C, NULL, "Staging arena: held bytes given back.",
     "bytes"},
    {"staging.held.longest_ms", G, NULL, "Staging arena: the longest hold that ended.", "ms"},
    {"enabled", G, NULL, "1 when the daemon has an arena (cluster mode).", NULL},
    {"pinned_for_gpu", G, NULL, "1 when the arena is page-locked for CUDA.", NULL},
    {"device_arena_bytes", G, NULL,
     "The device arena's size (a CUDA-aware UCX: bounce_dev.h); 0: none.", "bytes"},
    /* arena.timeline > 0 only (bounce_tl.h) */
    {"bounce_timeline.capacity", G, NULL, "Chunk timeline: events kept.", "events"},
    {"bounce_timeline.dropped", G, NULL, "Chunk timeline: older events overwritten.", "events"},
};
const size_t arena_metrics_len = N(arena_metrics);
