/* transfers_json.c: the requests in flight, the finished ones and the counters as JSON
 * (kvferryctl transfers, status and stats; see transfers.h). Loop thread only. */
#include <jansson.h>

#include "daemon.h"
#include "transfers.h"
#include "registry.h"
#include "xclient.h"

json_t *transfers_json(const struct transfers *t, uint64_t now)
{
    json_t *a = json_array();
    uint64_t now_ns = uv_hrtime();
    for (const struct xfer *x = t->list; x; x = x->next) {
        if (x->state == XFER_DONE || x->state == XFER_FAILED)
            continue;
        uint64_t done = x->side == XFER_SEND ? x->bytes : x->bytes_done;
        json_t *o = json_pack(
            "{s:I,s:I,s:s,s:s,s:s,s:i,s:s,s:I,s:I,s:I,s:i,s:i}", "id", (json_int_t)x->id,
            "req_id", (json_int_t)x->req_id, "side", x->side == XFER_SEND ? "send" : "recv", "instance",
            x->rank->layout.instance, "ctx_instance", x->ctx_instance, "rank",
            (int)layout_rank(&x->rank->layout), "state", xfer_state_to_string(x->state), "bytes",
            (json_int_t)x->bytes, "age_ms", (json_int_t)(now - x->created_ms), "deadline_in_ms",
            (json_int_t)(x->deadline_ms > now ? x->deadline_ms - now : 0), "readers",
            (int)x->n_readers, "served", (int)x->served);
        if (o) { /* progress: kvferryctl transfers (--watch) */
            json_object_set_new(o, "phase", json_string(xfer_phase_name(x)));
            json_object_set_new(o, "peer", json_string(transfers_peer_label(x)));
            json_object_set_new(o, "bytes_done", json_integer((json_int_t)done));
            json_object_set_new(o, "bytes_planned", json_integer((json_int_t)x->bytes_planned));
            json_object_set_new(o, "generation", json_integer((json_int_t)x->gen));
            json_object_set_new(o, "rate_bps", json_real(xfer_rate(done, x->moving_ns, now_ns)));
        }
        json_array_append_new(a, o);
    }
    return a;
}

json_t *transfers_finished_json(const struct transfers *t, uint64_t now)
{
    json_t *a = json_array();
    if (a)
        xfer_recent_json(&t->recent, a, now, t->d->cfg.transfers_keep_finished_ms);
    return a;
}

json_t *transfers_stats_json(const struct transfers *t)
{
    json_t *f = json_object();
    for (int e = 1; e < KVF_E__COUNT; e++)
        json_object_set_new(f, kvf_error_to_string((kvf_error_t)e), json_integer((json_int_t)t->counters.failed[e]));
    double s = t->counters.local_copy_ns / 1e9, sm = t->counters.local_memcpy_ns / 1e9;
    json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:o,s:i}", "sends",
                          (json_int_t)t->counters.sends, "recvs", (json_int_t)t->counters.recvs,
                          "done", (json_int_t)t->counters.done, "sent",
                          (json_int_t)t->counters.sent, "bytes_local",
                          (json_int_t)t->counters.bytes_local, "bytes_remote",
                          (json_int_t)t->counters.bytes_remote, "local_copy_s", s, "local_copy_gbps",
                     s > 0 ? t->counters.bytes_local / s / 1e9 : 0.0, "local_memcpy_gbps",
                     sm > 0 ? t->counters.bytes_local / sm / 1e9 : 0.0, "failed", f, "in_flight",
                     (int)t->n);
    if (o) {
        xfer_phases_json(&t->phases, o);
        json_object_set_new(o, "local_gpu", json_integer((json_int_t)t->counters.local_gpu));
        json_object_set_new(o, "fails_dropped", json_integer((json_int_t)t->fails_dropped));
        json_object_set_new(o, "held", json_integer((json_int_t)t->counters.held));
        json_object_set_new(o, "released", json_integer((json_int_t)t->counters.released));
        const struct plan_tcache *tc = &t->tcache; /* same-daemon plan templates */
        json_object_set_new(o, "plan_template_hits", json_integer((json_int_t)tc->hits));
        json_object_set_new(o, "plan_template_misses", json_integer((json_int_t)tc->misses));
        json_object_set_new(o, "plan_template_evicted", json_integer((json_int_t)tc->evicted));
        json_object_set_new(o, "plan_template_not_kept", json_integer((json_int_t)tc->not_kept));
        json_object_set_new(o, "plan_templates", json_integer((json_int_t)tc->n));
        json_object_set_new(o, "plan_template_bytes", json_integer((json_int_t)tc->bytes));
        json_object_set_new(o, "bytes_local_gpu",
                            json_integer((json_int_t)t->counters.bytes_local_gpu));
        json_object_set_new(o, "local_gpu_phase_s",
                            json_pack("{s:f,s:f,s:f,s:f}", "programs",
                                      t->counters.local_gpu_bind_ns / 1e9, "launch",
                                      t->counters.local_gpu_launch_ns / 1e9, "run",
                                      t->counters.local_gpu_run_ns / 1e9, "kernels",
                                      t->counters.local_gpu_kernel_ns / 1e9));
    }
    return o;
}
