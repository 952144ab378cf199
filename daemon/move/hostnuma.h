/* hostnuma.h: the machine's NUMA nodes as sysfs lists them (/sys/devices/system/node), and
 * the node holding a page (move_pages(2), no libnuma). For placing copy threads (copyeng.h).
 * Thread-safe: no shared state. Never logs. */
#ifndef KVF_HOSTNUMA_H
#define KVF_HOSTNUMA_H

#include <sched.h>
#include <stdint.h>

#define HOSTNUMA_MAX_NODES 64u

struct hostnuma_node {
    int id;           /* sysfs node number (what move_pages reports) */
    cpu_set_t cpus;   /* its online CPUs */
    uint32_t n_cpus;
};

/* Nodes that have CPUs, at most `max` into nodes[]. Returns how many (0: no sysfs NUMA
 * information, treat the machine as one node). */
uint32_t hostnuma_nodes(struct hostnuma_node *nodes, uint32_t max);
/* The node of the page holding p, or -1 (not faulted in yet, no NUMA, or an error). */
int hostnuma_node_of(const void *p);
/* Parses a sysfs CPU list ("0-3,8,10-11") into *ret. 0, or -EINVAL. */
int hostnuma_parse_cpulist(const char *s, cpu_set_t *ret);

#endif
