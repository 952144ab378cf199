/* kvferry-sim_stats.c: a rank's results as JSON for benchmarks (--stats-json PREFIX): counts,
 * bytes, wall time of the workload, and the latency of every completed request in seconds:
 * RECV -> DONE on the generation side, SEND -> SENT on the context side, measured by the rank
 * itself (CLOCK_MONOTONIC around its own libkvferry calls), and for each such request its id and
 * its issue, frame written (the call returned) and completion times from the workload's start
 * ("req", "issue_s", "sent_s", "done_s"), so a
 * benchmark can leave out a warm-up window ("t0_s": the workload's start on CLOCK_MONOTONIC, so
 * ranks of one host line up). The file is PREFIX.r<rank>.json, so the processes
 * of --all-ranks write one file each. With --cpu-pids it also samples the user+sys CPU ticks of
 * those processes (the daemons) at the start and after each window ("cpu_ticks"), so CPU per
 * request can leave out the warm-up window too. The sim owns the arrays. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvferry-sim.h"

int sim_stats_add(struct sim_stats *st, uint64_t req_id, double t_issue, double t_sent,
                  double t_done)
{
    if (st->n == st->cap) {
        uint32_t cap = st->cap ? st->cap * 2 : 64;
        double *t = realloc(st->t, 3 * (size_t)cap * sizeof *t);
        if (!t)
            return -ENOMEM;
        st->t = t;
        uint64_t *r = realloc(st->req, cap * sizeof *r);
        if (!r)
            return -ENOMEM;
        st->req = r;
        st->cap = cap;
    }
    st->req[st->n] = req_id;
    st->t[3 * st->n] = t_issue;
    st->t[3 * st->n + 1] = t_sent;
    st->t[3 * st->n + 2] = t_done;
    st->n++;
    return 0;
}

static uint64_t cpu_ticks(int32_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* fields after "(comm)": state is field 3, utime 14, stime 15 */
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, stt = 0;
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) != 2)
        return 0;
    return ut + stt;
}

int sim_stats_cpu_sample(struct sim_stats *st, uint64_t done)
{
    if (st->n_cpu == st->cap_cpu) {
        uint32_t cap = st->cap_cpu ? st->cap_cpu * 2 : 16;
        void *c = realloc(st->cpu, cap * sizeof *st->cpu);
        if (!c)
            return -ENOMEM;
        st->cpu = c;
        uint64_t *r = realloc(st->cpu_req, cap * sizeof *r);
        if (!r)
            return -ENOMEM;
        st->cpu_req = r;
        st->cap_cpu = cap;
    }
    for (uint32_t i = 0; i < st->o->n_cpu_pids; i++)
        st->cpu[st->n_cpu][i] = cpu_ticks(st->o->cpu_pids[i]);
    st->cpu_req[st->n_cpu++] = done;
    return 0;
}

int sim_stats_write(const struct sim_stats *st)
{
    const struct sim_opts *o = st->o;
    char path[4096];
    if (snprintf(path, sizeof path, "%s.r%d.json", o->stats_json, o->rank) >= (int)sizeof path)
        return -ENAMETOOLONG;
    json_t *lat = json_array(), *req = json_array(), *iss = json_array(), *done = json_array();
    json_t *sent = json_array();
    for (uint32_t i = 0; lat && req && iss && done && sent && i < st->n; i++) {
        const double *t = &st->t[3 * i];
        json_array_append_new(lat, json_real(t[2] - t[0]));
        json_array_append_new(req, json_integer((json_int_t)st->req[i]));
        json_array_append_new(iss, json_real(t[0] - st->t0));
        json_array_append_new(sent, json_real(t[1] - st->t0));
        json_array_append_new(done, json_real(t[2] - st->t0));
    }
    json_t *doc = json_pack("{s:s,s:s,s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:s,s:o*,s:o*,s:o*,s:o*}",
                            "role", o->role, "instance", o->instance, "spec", o->spec, "rank",
                            o->rank, "requests", (json_int_t)o->requests, "ok", (json_int_t)st->ok,
                            "failed", (json_int_t)st->failed, "bytes", (json_int_t)st->bytes,
                            "parity_bad", (json_int_t)st->parity_bad, "verified",
                            (json_int_t)st->verified, "time_s", st->time_s, "latency_unit", "s",
                            st->gen ? "latency_recv_done" : "latency_send_sent", lat, "req", req,
                            "issue_s", iss, "done_s", done);
    if (!doc) {
        json_decref(sent);
        return -ENOMEM;
    }
    json_object_set_new(doc, "t0_s", json_real(st->t0));
    json_object_set_new(doc, "sent_s", sent);
    if (st->o->n_cpu_pids) {
        json_t *pids = json_array(), *rows = json_array(), *after = json_array();
        for (uint32_t i = 0; i < st->o->n_cpu_pids; i++)
            json_array_append_new(pids, json_integer(st->o->cpu_pids[i]));
        for (uint32_t k = 0; k < st->n_cpu; k++) {
            json_t *row = json_array();
            for (uint32_t i = 0; i < st->o->n_cpu_pids; i++)
                json_array_append_new(row, json_integer((json_int_t)st->cpu[k][i]));
            json_array_append_new(rows, row);
            json_array_append_new(after, json_integer((json_int_t)st->cpu_req[k]));
        }
        json_object_set_new(doc, "cpu_pids", pids);
        json_object_set_new(doc, "cpu_ticks", rows);
        json_object_set_new(doc, "cpu_ticks_after_requests", after);
        json_object_set_new(doc, "clk_tck", json_integer(sysconf(_SC_CLK_TCK)));
    }
    int rc = json_dump_file(doc, path, JSON_COMPACT) ? -EIO : 0;
    json_decref(doc);
    return rc;
}
