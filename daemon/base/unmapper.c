/* unmapper.c: the thread that unmaps what the loop let go of (unmapper.h). One mutex guards the
 * queue, `stopping` and the stats; a range is the thread's from the moment it leaves the queue. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "unmapper.h"

struct range {
    uint8_t *base;
    uint64_t len;
    struct range *next;
};

struct unmapper {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct range *head, *tail; /* under mu: owned */
    bool stopping;             /* under mu */
    struct unmapper_stats st;  /* under mu */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Unmaps r in steps; returns the longest step but the last. */
static uint64_t unmap_steps(const struct range *r)
{
    uint64_t worst = 0;
    for (uint64_t off = 0; off < r->len; off += UNMAPPER_STEP) {
        uint64_t n = r->len - off < UNMAPPER_STEP ? r->len - off : UNMAPPER_STEP, t0 = now_ns();
        munmap(r->base + off, n);
        uint64_t dt = now_ns() - t0;
        if (off + n < r->len && dt > worst)
            worst = dt;
    }
    return worst;
}

static void *thread_main(void *arg)
{
    struct unmapper *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        struct range *r = u->head;
        if (!r) {
            if (u->stopping)
                break;
            pthread_cond_wait(&u->cv, &u->mu);
            continue;
        }
        u->head = r->next;
        if (!u->head)
            u->tail = NULL;
        pthread_mutex_unlock(&u->mu);
        uint64_t t0 = now_ns(), step = unmap_steps(r), dt = now_ns() - t0;
        pthread_mutex_lock(&u->mu);
        u->st.pending--;
        u->st.pending_bytes -= r->len;
        u->st.unmaps++;
        u->st.bytes += r->len;
        u->st.busy_ns += dt;
        u->st.max_ns = dt > u->st.max_ns ? dt : u->st.max_ns;
        u->st.max_step_ns = step > u->st.max_step_ns ? step : u->st.max_step_ns;
        free(r);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

int unmapper_new(struct unmapper **ret)
{
    struct unmapper *u = calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    sigset_t all, old; /* the thread takes no signals: the loop handles them */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&u->tid, NULL, thread_main, u);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&u->cv);
        pthread_mutex_destroy(&u->mu);
        free(u);
        return -rc;
    }
    *ret = u;
    return 0;
}

struct unmapper *unmapper_free(struct unmapper *u)
{
    if (!u)
        return NULL;
    pthread_mutex_lock(&u->mu);
    u->stopping = true; /* the thread empties the queue first */
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->tid, NULL);
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
    free(u);
    return NULL;
}

void unmapper_unmap(struct unmapper *u, void *base, uint64_t len)
{
    struct range *r = u ? malloc(sizeof *r) : NULL;
    if (!r) {
        munmap(base, len);
        return;
    }
    *r = (struct range){.base = base, .len = len};
    pthread_mutex_lock(&u->mu);
    if (u->tail)
        u->tail->next = r;
    else
        u->head = r;
    u->tail = r;
    u->st.pending++;
    u->st.pending_bytes += len;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

void unmapper_get_stats(struct unmapper *u, struct unmapper_stats *ret)
{
    memset(ret, 0, sizeof *ret);
    if (!u)
        return;
    pthread_mutex_lock(&u->mu);
    *ret = u->st;
    pthread_mutex_unlock(&u->mu);
}
