/* engine_home.c: where an instance's table is assembled (see engine.h, docs/DESIGN.md §1, §7).
 * A rank registers with its own node's daemon and names its instance's home ("" = here). A
 * daemon that is not the home forwards each such registration (LAYOUT_FORWARD: the rank's
 * layout and this daemon's listen address) to the home as soon as the home is reachable. The
 * home keeps the forwarded layouts per instance; the full table is its own registry's ranks (at
 * its own address) plus the forwarded ones, and its epoch changes with every registration or
 * forward and does not repeat across re-registration or restarts (see home_table).
 * Known limit: a forwarded rank that goes away is not withdrawn from the home; its daemon NACKs
 * RECV_REQs for it (UNKNOWN_INSTANCE) until the rank registers again (a new forward). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_put.h"
#include "daemon.h"
#include "frag_gen.h"
#include "engine_gone.h"
#include "engine_linkwait.h"
#include "engine_peer.h"
#include "engine_tab.h"
#include "registry.h"

/* ---- the non-home side: forwarding ---- */

static void fwd_try(struct engine *e, struct fwd_out *f)
{
    struct epeer *p;
    if (!f->peer) {
        int rc = epeer_get(e, f->home, &p);
        if (rc < 0) {
            log_warn("engine: home %s of %s rank %u unreachable: %s (retrying)", f->home,
                     f->instance, f->rank, strerror(-rc));
            return;
        }
        f->peer = p;
        p->users++;
    }
    if (!f->peer->up)
        return;
    struct wire_msg m = {.type = WIRE_LAYOUT_FORWARD};
    snprintf(m.u.layout_forward.addr, sizeof m.u.layout_forward.addr, "%s", e->self_addr);
    m.u.layout_forward.json = f->json;
    m.u.layout_forward.json_len = (uint32_t)strlen(f->json);
    if (engine_send_msg(f->peer, 0, &m) == 0) {
        f->sent = true;
        e->c.layouts_forwarded++;
        log_info("engine: forwarded %s rank %u to its home %s", f->instance, f->rank, f->home);
    }
}

void engine_rank_removed(struct engine *e, struct reg_rank *rk)
{
    if (!e)
        return;
    bput_rank_removed(e, rk);
    gone_rank_removed(e, rk);
    frag_gen_rank_removed(e, rk);
}

void engine_rank_registered(struct engine *e, struct reg_rank *rk)
{
    if (e) {
        frag_gen_rank_registered(e, rk);
        bput_rank_registered(e, rk);
    }
    if (!e || !rk->home[0] || (e->self_addr[0] && strcmp(rk->home, e->self_addr) == 0))
        return;
    if (!e->link && linkwait_waiting(e, NULL))
        return; /* forwarded when the link starts (engine_linkwait.c) */
    if (!e->link || !e->self_addr[0]) {
        log_warn("engine: %s rank %u names home %s, but this daemon %s: its layout is not "
                 "forwarded and remote requests cannot reach it",
                 rk->layout.instance, layout_rank(&rk->layout), rk->home,
                 e->link ? "has no listener (listen.port 0)" : "has no cluster secret");
        return;
    }
    struct fwd_out *f = calloc(1, sizeof *f);
    json_t *o = layout_to_jobj(&rk->layout);
    if (f)
        f->json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!f || !f->json) {
        log_error("engine: forwarding %s rank %u: out of memory", rk->layout.instance,
                  layout_rank(&rk->layout));
        free(f);
        return;
    }
    snprintf(f->home, sizeof f->home, "%s", rk->home);
    snprintf(f->instance, sizeof f->instance, "%s", rk->layout.instance);
    f->rank = layout_rank(&rk->layout);
    f->next = e->fwds;
    e->fwds = f;
    fwd_try(e, f);
    home_sweep(e);
    engine_due(e, EPART_HOME, ENGINE_DUE_NEXT);
}

uint64_t home_tick(struct engine *e, uint64_t now)
{
    (void)now;
    for (struct fwd_out *f = e->fwds; f; f = f->next)
        if (!f->sent)
            fwd_try(e, f);
    home_sweep(e);
    return e->fwds ? ENGINE_DUE_NEXT : 0; /* what is left was not sent: tried again */
}

void home_peer_down(struct engine *e, struct epeer *p)
{
    for (struct fwd_out *f = e->fwds; f; f = f->next)
        if (f->peer == p) {
            f->peer = NULL;
            p->users--;
        }
}

void home_sweep(struct engine *e)
{
    for (struct fwd_out **pp = &e->fwds; *pp;) {
        struct fwd_out *f = *pp;
        if (!f->sent) {
            pp = &f->next;
            continue;
        }
        *pp = f->next;
        if (f->peer)
            f->peer->users--;
        free(f->json);
        free(f);
    }
}

/* ---- the home side ---- */

static struct fwd_inst *fwd_find(struct engine *e, const char *instance)
{
    for (struct fwd_inst *fi = e->fwd_insts; fi; fi = fi->next)
        if (strcmp(fi->instance, instance) == 0)
            return fi;
    return NULL;
}

static void fwd_inst_free(struct fwd_inst *fi)
{
    free(fi->ranks);
    free(fi->addrs);
    free(fi->have);
    free(fi);
}

void home_on_forward(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    const struct wire_layout_forward *w = &m->u.layout_forward;
    struct layout l;
    char err[256];
    if (layout_from_json(w->json, w->json_len, &l, err, sizeof err) < 0) {
        log_warn("engine: LAYOUT_FORWARD from %s (%s): bad layout: %s", link_peer_id(p->lp),
                 w->addr, err);
        return;
    }
    uint32_t n = l.tp_size * l.pp_size, r = layout_rank(&l);
    struct fwd_inst *fi = fwd_find(e, l.instance);
    if (fi && fi->n != n) { /* re-registered with another shape: start over */
        for (struct fwd_inst **pp = &e->fwd_insts; *pp; pp = &(*pp)->next)
            if (*pp == fi) {
                *pp = fi->next;
                break;
            }
        fwd_inst_free(fi);
        e->n_fwd_insts--;
        fi = NULL;
    }
    if (!fi && e->n_fwd_insts >= ENGINE_MAX_FWD_INSTANCES) {
        e->c.forwards_refused++;
        log_warn("engine: LAYOUT_FORWARD of %s from %s refused: this home already keeps %u "
                 "forwarded instances (ENGINE_MAX_FWD_INSTANCES)",
                 l.instance, w->addr, e->n_fwd_insts);
        return;
    }
    if (!fi) {
        fi = calloc(1, sizeof *fi);
        if (fi) {
            fi->ranks = calloc(n, sizeof *fi->ranks);
            fi->addrs = calloc(n, sizeof *fi->addrs);
            fi->have = calloc(n, sizeof *fi->have);
        }
        if (!fi || !fi->ranks || !fi->addrs || !fi->have) {
            if (fi)
                fwd_inst_free(fi);
            log_error("engine: LAYOUT_FORWARD of %s: out of memory", l.instance);
            return;
        }
        snprintf(fi->instance, sizeof fi->instance, "%s", l.instance);
        fi->n = n;
        fi->next = e->fwd_insts;
        e->fwd_insts = fi;
        e->n_fwd_insts++;
    }
    fi->ranks[r] = l;
    snprintf(fi->addrs[r], sizeof fi->addrs[r], "%s", w->addr);
    fi->have[r] = true;
    fi->epoch = ++e->forwards_seen; /* daemon-wide: never repeats within this run */
    log_info("engine: home of %s: rank %u is at %s (epoch %llu)", l.instance, r, w->addr,
             (unsigned long long)fi->epoch);
}

/* The table's epoch. It must change whenever any rank (re-)registers, here or forwarded, and
 * must not repeat after the instance left and came back or this daemon restarted: mix this
 * run's random workers epoch, the newest local registration (worker ids only grow) and the
 * newest forward. */
static uint64_t home_epoch(const struct engine *e, const struct reg_instance *in,
                           const struct fwd_inst *fi, uint32_t n)
{
    uint64_t newest = 0;
    for (uint32_t i = 0; in && i < n; i++)
        if (in->ranks[i] && in->ranks[i]->worker_id > newest)
            newest = in->ranks[i]->worker_id;
    uint64_t z = e->req.epoch ^ (newest << 32) ^ (fi ? fi->epoch : 0);
    z += 0x9e3779b97f4a7c15ull; /* splitmix64 finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) | 1;
}

int home_table(struct engine *e, const char *instance, struct itable **ret, char *msg, size_t len)
{
    struct reg_instance *in = e->req.t ? registry_find(e->req.reg, instance) : NULL;
    struct fwd_inst *fi = fwd_find(e, instance);
    uint32_t n = in ? in->n_ranks : fi ? fi->n : 0;
    if (!n || (in && fi && fi->n != in->n_ranks)) {
        snprintf(msg, len, "%s %s is not registered at its home %s",
                 in && in->role != ROLE_CONTEXT ? "instance" : "context instance", instance,
                 e->self_addr[0] ? e->self_addr : "(no listener)");
        return -ENOENT;
    }
    if (in && in->role != ROLE_CONTEXT) {
        snprintf(msg, len, "instance %s is a generation instance, not a context one", instance);
        return -ENOENT;
    }
    int missing = 0;
    size_t off = (size_t)snprintf(
        msg, len, "context instance %s is incomplete at its home: rank(s)", instance);
    for (uint32_t i = 0; i < n; i++)
        if (!(in && in->ranks[i]) && !(fi && fi->have[i])) {
            missing++;
            if (off < len)
                off += (size_t)snprintf(msg + off, len - off, " %u", i);
        }
    if (missing) {
        if (off < len)
            snprintf(msg + off, len - off, " of %u not registered", n);
        return -ENOENT;
    }
    uint64_t epoch = home_epoch(e, in, fi, n);
    struct itable *c = e->home_tab; /* the last one built: the same epoch, the same layouts */
    if (c && c->epoch == epoch && c->n == n && strcmp(c->instance, instance) == 0) {
        *ret = c;
        return 0;
    }
    struct itable *t = calloc(1, sizeof *t);
    if (t) {
        t->ranks = calloc(n, sizeof *t->ranks);
        t->addrs = calloc(n, sizeof *t->addrs);
    }
    if (!t || !t->ranks || !t->addrs) {
        tab_free_one(t);
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (in && in->ranks[i]) {
            t->ranks[i] = in->ranks[i]->layout;
            snprintf(t->addrs[i], sizeof t->addrs[i], "%s", e->self_addr);
        } else {
            t->ranks[i] = fi->ranks[i];
            snprintf(t->addrs[i], sizeof t->addrs[i], "%s", fi->addrs[i]);
        }
    }
    snprintf(t->instance, sizeof t->instance, "%s", instance);
    snprintf(t->home, sizeof t->home, "%s", e->self_addr);
    t->n = n;
    t->epoch = epoch;
    t->state = TAB_READY;
    tab_free_one(e->home_tab);
    e->home_tab = t;
    *ret = t;
    return 0;
}

void home_free_all(struct engine *e)
{
    e->home_tab = tab_free_one(e->home_tab);
    while (e->fwd_insts) {
        struct fwd_inst *fi = e->fwd_insts;
        e->fwd_insts = fi->next;
        fwd_inst_free(fi);
    }
    while (e->fwds) {
        struct fwd_out *f = e->fwds;
        e->fwds = f->next;
        free(f->json);
        free(f);
    }
}
