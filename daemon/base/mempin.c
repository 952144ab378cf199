/* mempin.c: pins on host pool mappings (mempin.h). A small open list: a daemon pins at most
 * (copies in flight) x (pools per copy) mappings at once, distinct bases far fewer. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "mempin.h"

struct pin {
    void *base;
    uint64_t len;
    uint32_t refs;
    bool unmap; /* the owner let go: munmap at the last unref */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pin *pins;  /* owned */
static uint32_t n_pins, cap_pins;

static struct pin *find(void *base)
{
    for (uint32_t i = 0; i < n_pins; i++)
        if (pins[i].base == base)
            return &pins[i];
    return NULL;
}

int mempin_ref(void *base, uint64_t len)
{
    pthread_mutex_lock(&lock);
    struct pin *p = find(base);
    if (!p) {
        if (n_pins == cap_pins) {
            uint32_t cap = cap_pins ? cap_pins * 2 : 64;
            struct pin *np = realloc(pins, cap * sizeof *np);
            if (!np) {
                pthread_mutex_unlock(&lock);
                return -ENOMEM;
            }
            pins = np;
            cap_pins = cap;
        }
        p = &pins[n_pins++];
        *p = (struct pin){.base = base, .len = len};
    }
    p->refs++;
    pthread_mutex_unlock(&lock);
    return 0;
}

void mempin_unref(void *base)
{
    pthread_mutex_lock(&lock);
    struct pin *p = find(base);
    if (p && --p->refs == 0) {
        if (p->unmap)
            munmap(p->base, p->len);
        *p = pins[--n_pins];
    }
    pthread_mutex_unlock(&lock);
}

int mempin_unmap(void *base, uint64_t len)
{
    pthread_mutex_lock(&lock);
    struct pin *p = find(base);
    if (p) {
        p->unmap = true;
        p->len = len;
    } else {
        munmap(base, len);
    }
    pthread_mutex_unlock(&lock);
    return p ? 1 : 0;
}

void mempin_counts(uint32_t *pinned, uint32_t *deferred)
{
    pthread_mutex_lock(&lock);
    uint32_t d = 0;
    for (uint32_t i = 0; i < n_pins; i++)
        d += pins[i].unmap;
    *pinned = n_pins;
    *deferred = d;
    pthread_mutex_unlock(&lock);
}
