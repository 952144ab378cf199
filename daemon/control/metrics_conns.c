/* metrics_conns.c: the /metrics listener's connection table (metrics_conns.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_conns.h"

static void addr_of(const struct sockaddr *sa, struct metrics_conn *c)
{
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) { /* a v4 client of a dual-stack socket is a v4 address */
            memcpy(c->addr, a->s6_addr + 12, 4);
            c->addr_len = 4;
        } else {
            memcpy(c->addr, a->s6_addr, 16);
            c->addr_len = 16;
        }
    } else {
        memcpy(c->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        c->addr_len = 4;
    }
}

static bool same_addr(const struct metrics_conn *a, const struct metrics_conn *b)
{
    return a->addr_len == b->addr_len && !memcmp(a->addr, b->addr, a->addr_len);
}

static void go(struct metrics_conns *t, struct metrics_conn *c)
{
    c->going = true;
    t->n_going++;
}

int metrics_conns_admit(struct metrics_conns *t, int fd, const struct sockaddr *sa,
                        uint64_t now_ms, struct metrics_conn **ret, struct metrics_conn **victim)
{
    struct metrics_conn probe = {.fd = fd};
    addr_of(sa, &probe);
    uint32_t of_addr = 0;
    struct metrics_conn *oldest = NULL; /* of the address, not answering, not going */
    for (struct metrics_conn *c = t->head; c; c = c->next) {
        if (c->going || !same_addr(c, &probe))
            continue;
        of_addr++;
        if (!c->busy)
            oldest = c; /* newest first: the last one seen is the oldest */
    }
    *victim = NULL;
    /* those going still hold libmicrohttpd's slots until it closes them: bounded too */
    if (t->n - t->n_going >= METRICS_HTTP_CONNS || t->n >= 2 * METRICS_HTTP_CONNS ||
        (of_addr >= METRICS_HTTP_CONNS_PER_IP && !oldest)) {
        t->counters.refused++;
        return -EUSERS;
    }
    struct metrics_conn *c = malloc(sizeof *c);
    if (!c)
        return -ENOMEM;
    *c = probe;
    c->since_ms = now_ms;
    if (of_addr >= METRICS_HTTP_CONNS_PER_IP) {
        go(t, oldest);
        t->counters.evicted++;
        *victim = oldest;
    }
    c->next = t->head;
    t->head = c;
    t->n++;
    t->counters.accepted++;
    *ret = c;
    return 0;
}

void metrics_conns_remove(struct metrics_conns *t, struct metrics_conn *c)
{
    for (struct metrics_conn **pp = &t->head; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            t->n--;
            t->n_going -= c->going;
            free(c);
            return;
        }
}

void metrics_conns_busy(struct metrics_conn *c, bool busy, uint64_t now_ms)
{
    c->busy = busy;
    if (!busy) {
        c->since_ms = now_ms;
        c->replied = true;
    }
}

struct metrics_conn *metrics_conns_expired(struct metrics_conns *t, uint64_t now_ms)
{
    for (struct metrics_conn *c = t->head; c; c = c->next)
        if (!c->going && now_ms - c->since_ms >= METRICS_HTTP_IDLE_S * 1000ull) {
            go(t, c);
            if (c->replied)
                t->counters.idle_closed++;
            else
                t->counters.timed_out++;
            return c;
        }
    return NULL;
}

void metrics_conns_done(struct metrics_conns *t)
{
    while (t->head) {
        struct metrics_conn *c = t->head;
        t->head = c->next;
        free(c);
    }
    t->n = t->n_going = 0;
}
