/* gpu_tprog.c: see gpu_tprog.h. A set is a short list of devices, each with one slot per writer:
 * a program (one reference held by the set), refused, or not made yet. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_priv.h"
#include "gpu_tprog.h"
#include "log.h"

enum { SLOT_EMPTY = 0, SLOT_MADE, SLOT_REFUSED };

struct tdev {
    int device;
    struct gpu_prog **prog; /* n_writers; one reference each where made */
    uint8_t *state;         /* n_writers */
};

struct gpu_tprogs {
    struct gpu *g;                  /* NULL once detached (gpu_free) */
    struct gpu_tprogs *prev, *next; /* g->tprog_sets */
    uint32_t n_writers, n_dev;
    struct tdev *dev;               /* n_dev */
};

static void unlink_set(struct gpu_tprogs *s)
{
    struct gpu *g = s->g;
    if (s->prev)
        s->prev->next = s->next;
    else
        g->tprog_sets = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

/* Drops the set's references (programs still bound are freed after their last binding). */
static void release(struct gpu_tprogs *s)
{
    for (uint32_t d = 0; d < s->n_dev; d++)
        for (uint32_t w = 0; w < s->n_writers; w++)
            if (s->dev[d].state[w] == SLOT_MADE) {
                s->dev[d].prog[w] = gpu_prog_put(s->g, s->dev[d].prog[w]);
                s->dev[d].state[w] = SLOT_EMPTY;
                s->g->n_tprogs--;
            }
}

static void set_free(void *user)
{
    struct gpu_tprogs *s = user;
    if (s->g) {
        release(s);
        unlink_set(s);
    }
    for (uint32_t d = 0; d < s->n_dev; d++) {
        free(s->dev[d].prog);
        free(s->dev[d].state);
    }
    free(s->dev);
    free(s);
}

static struct gpu_tprogs *set_of(struct gpu *g, struct plan_template *t)
{
    if (t->user)
        return t->user;
    struct gpu_tprogs *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->g = g;
    s->n_writers = t->plan.n_writers;
    s->next = g->tprog_sets;
    if (s->next)
        s->next->prev = s;
    g->tprog_sets = s;
    t->user = s;
    t->user_free = set_free;
    return s;
}

static struct tdev *dev_of(struct gpu_tprogs *s, int device)
{
    for (uint32_t d = 0; d < s->n_dev; d++)
        if (s->dev[d].device == device)
            return &s->dev[d];
    struct tdev *nd = realloc(s->dev, (s->n_dev + 1) * sizeof *nd);
    if (!nd)
        return NULL;
    s->dev = nd;
    struct tdev *x = &nd[s->n_dev];
    x->device = device;
    x->prog = calloc(s->n_writers ? s->n_writers : 1, sizeof *x->prog);
    x->state = calloc(s->n_writers ? s->n_writers : 1, 1);
    if (!x->prog || !x->state) {
        free(x->prog);
        free(x->state);
        return NULL;
    }
    s->n_dev++;
    return x;
}

int gpu_tprog_get(struct gpu *g, struct plan_template *t, uint32_t w, int device,
                  gpu_tprog_make_fn make, void *arg, gpu_prog_free_fn free_fn,
                  struct gpu_prog **ret, char *msg, size_t len)
{
    if (g->tprog_off)
        return 1;
    if (t->user && t->user_free != set_free)
        return 1; /* attached by someone else: not ours to extend */
    struct gpu_tprogs *s = set_of(g, t);
    if (s && w >= s->n_writers)
        return 1;
    struct tdev *d = s ? dev_of(s, device) : NULL;
    if (!d)
        return -ENOMEM;
    if (d->state[w] == SLOT_REFUSED)
        return 1;
    if (d->state[w] == SLOT_MADE) {
        *ret = d->prog[w];
        return 0;
    }
    void *obj = NULL;
    int rc = make(arg, &obj, msg, len);
    if (rc < 0) {
        d->state[w] = SLOT_REFUSED;
        g->tprog_refused++;
        log_info("gpu: no template program for writer %u on GPU %d (its requests upload "
                 "programs of their own): %s", w, device, msg);
        return 1;
    }
    struct gpu_prog *p = gpu_prog_wrap(g, obj, device, free_fn);
    if (!p) {
        free_fn(obj);
        return -ENOMEM;
    }
    d->prog[w] = p;
    d->state[w] = SLOT_MADE;
    g->n_tprogs++;
    g->tprog_made++;
    *ret = p;
    return 0;
}

void gpu_tprog_enable(struct gpu *g, bool on)
{
    g->tprog_off = !on;
}

void gpu_tprog_count(struct gpu *g, bool from_templates)
{
    if (from_templates)
        g->req_template++;
    else
        g->req_ops++;
}

void gpu_tprog_detach_all(struct gpu *g)
{
    while (g->tprog_sets) {
        struct gpu_tprogs *s = g->tprog_sets;
        release(s);
        unlink_set(s);
        s->g = NULL;
    }
}
