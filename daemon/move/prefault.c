/* prefault.c: populate the resident pages of pool ranges (prefault.h). */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefault.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define VEC_PAGES 1024u /* mincore in 4 MiB steps (at 4 KiB pages): a small stack vector */

/* One resident run [p, p + n), page-aligned. */
static void populate(uint8_t *p, uint64_t n, bool write, uint64_t page)
{
    if (madvise(p, n, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0 || errno != EINVAL)
        return; /* done, or a page went away (the worker's to lose): faults on demand */
    for (uint64_t off = 0; off < n; off += page) /* no MADV_POPULATE_*: read-fault them in */
        (void)*(volatile const uint8_t *)(p + off);
}

/* [a, b) of a mapping: its resident pages, in runs. */
static uint64_t populate_resident(uint8_t *a, uint8_t *b, bool write, uint64_t page)
{
    uint8_t *p = (uint8_t *)((uintptr_t)a & ~(uintptr_t)(page - 1));
    uint64_t done = 0;
    unsigned char vec[VEC_PAGES];
    while (p < b) {
        uint64_t pages = (uint64_t)(b - p + page - 1) / page;
        if (pages > VEC_PAGES)
            pages = VEC_PAGES;
        if (mincore(p, pages * page, vec) < 0) /* ENOMEM: past the mapping's end; stop */
            return done;
        for (uint64_t i = 0; i < pages;) {
            if (!(vec[i] & 1)) {
                i++;
                continue;
            }
            uint64_t j = i;
            while (j < pages && (vec[j] & 1))
                j++;
            populate(p + i * page, (j - i) * page, write, page);
            done += (j - i) * page;
            i = j;
        }
        p += pages * page;
    }
    return done;
}

struct walk {
    bool write;
    uint64_t page, done;
};

static int on_run(void *arg, uint32_t pool, const uint8_t *src, uint64_t ext_pos, uint64_t len)
{
    (void)pool, (void)ext_pos;
    struct walk *w = arg;
    w->done += populate_resident((uint8_t *)src, (uint8_t *)src + len, w->write, w->page);
    return 0;
}

uint64_t prefault_range(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *mem,
                        uint64_t lo, uint64_t hi, bool write)
{
    long ps = sysconf(_SC_PAGESIZE);
    struct walk w = {.write = write, .page = ps > 0 ? (uint64_t)ps : 4096};
    copy_src_runs(ops, n_ops, mem, lo, hi, on_run, &w);
    return w.done;
}
