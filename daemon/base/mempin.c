/* mempin.c: pins on host pool mappings (mempin.h). A chained hash by base address: a rank may
 * bring up to LAYOUT_MAX_POOLS pools and a copy job pins every pool it names, so thousands of
 * pins are normal and each one is found in O(1). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "mempin.h"
#include "unmapper.h"

#define BUCKETS 4096u

struct pin {
    void *base;
    uint64_t len;
    uint32_t refs;
    bool unmap; /* the owner let go: handed to `um` at the last unref */
    struct unmapper *um; /* borrowed: the owner's unmapper */
    struct pin *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pin *table[BUCKETS]; /* owned nodes */
static uint32_t n_pins, n_deferred;

static struct pin **slot_of(void *base)
{
    uintptr_t h = (uintptr_t)base >> 12; /* mappings are page aligned */
    h ^= h >> 17;
    struct pin **pp = &table[h % BUCKETS];
    while (*pp && (*pp)->base != base)
        pp = &(*pp)->next;
    return pp;
}

int mempin_ref(void *base, uint64_t len)
{
    pthread_mutex_lock(&lock);
    struct pin **pp = slot_of(base);
    if (!*pp) {
        struct pin *p = calloc(1, sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&lock);
            return -ENOMEM;
        }
        p->base = base;
        p->len = len;
        *pp = p;
        n_pins++;
    }
    (*pp)->refs++;
    pthread_mutex_unlock(&lock);
    return 0;
}

void mempin_unref(void *base)
{
    pthread_mutex_lock(&lock);
    struct pin **pp = slot_of(base), *p = *pp;
    if (!p || --p->refs > 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    *pp = p->next;
    n_pins--;
    n_deferred -= p->unmap;
    pthread_mutex_unlock(&lock);
    if (p->unmap) /* unpinned and unowned: the unmapper's now */
        unmapper_unmap(p->um, p->base, p->len);
    free(p);
}

int mempin_unmap(void *base, uint64_t len, struct unmapper *um)
{
    pthread_mutex_lock(&lock);
    struct pin *p = *slot_of(base);
    if (p) {
        n_deferred += !p->unmap;
        p->unmap = true;
        p->len = len;
        p->um = um;
    }
    pthread_mutex_unlock(&lock);
    if (!p)
        unmapper_unmap(um, base, len);
    return p ? 1 : 0;
}

void mempin_counts(uint32_t *pinned, uint32_t *deferred)
{
    pthread_mutex_lock(&lock);
    *pinned = n_pins;
    *deferred = n_deferred;
    pthread_mutex_unlock(&lock);
}
