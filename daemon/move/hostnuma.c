/* hostnuma.c: NUMA nodes from sysfs and a page's node from move_pages (hostnuma.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostnuma.h"

int hostnuma_parse_cpulist(const char *s, cpu_set_t *ret)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    while (*s && *s != '\n') {
        char *end;
        errno = 0;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || errno || a < 0)
            return -EINVAL;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                return -EINVAL;
            s = end;
        }
        if (b >= CPU_SETSIZE)
            return -EINVAL;
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, &set);
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return -EINVAL;
    }
    *ret = set;
    return 0;
}

uint32_t hostnuma_nodes(struct hostnuma_node *nodes, uint32_t max)
{
    uint32_t n = 0;
    for (int id = 0; id < 1024 && n < max; id++) {
        char path[80], line[4096];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", id);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        bool ok = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        cpu_set_t set;
        if (!ok || hostnuma_parse_cpulist(line, &set) < 0 || CPU_COUNT(&set) == 0)
            continue; /* a memory-only node takes no copy thread */
        nodes[n].id = id;
        nodes[n].cpus = set;
        nodes[n].n_cpus = (uint32_t)CPU_COUNT(&set);
        n++;
    }
    return n;
}

int hostnuma_node_of(const void *p)
{
#ifdef SYS_move_pages
    long page = sysconf(_SC_PAGESIZE);
    void *pg = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    int status = -1;
    /* nodes == NULL: report where each page is, move nothing */
    if (syscall(SYS_move_pages, 0, 1UL, &pg, NULL, &status, 0) != 0 || status < 0)
        return -1;
    return status;
#else
    (void)p;
    return -1;
#endif
}
