/* topo.h: a node's PCIe devices as the rail choice needs them (docs/SCALE.md "Each GPU's nearest
 * NIC"): GPUs, RDMA NICs, where each sits in the PCIe tree and its NUMA node. A description is
 * text, one device per line, so that one read of a real machine can be saved and fed to the
 * tests (tests/topo/), and the daemon reads its own machine through the same parser
 * (topo_sysfs.c writes the text from /sys):
 *
 *   # comment
 *   <kind> <bdf> numa=<n> path=<sysfs path under /sys/devices> [name=<rdma or driver name>]
 *
 *   gpu 0000:1b:00.0 numa=0 path=pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:1b:00.0
 *   nic 0000:18:00.0 numa=0 path=pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0 name=mlx5_0
 *
 * kind: gpu (an NVIDIA display or 3D controller) or nic (a PCI function with an RDMA device).
 * path: the chain from the root complex (pciDDDD:BB) through each bridge to the device itself.
 * Limits: TOPO_MAX_DEVICES lines of at most TOPO_LINE_MAX bytes; anything else is refused with
 * the line number and what is wrong. */
#ifndef KVF_TOPO_H
#define KVF_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define TOPO_MAX_DEVICES 256
#define TOPO_LINE_MAX 1024
#define TOPO_PATH_MAX 512
#define TOPO_NAME_MAX 64
#define TOPO_DEPTH_MAX 16

typedef enum { TOPO_GPU = 0, TOPO_NIC } topo_kind_t;

/* How far apart two devices are, nearest first; the names nvidia-smi topo -m uses. */
typedef enum {
    TOPO_PIX = 0, /* below one PCIe switch: at most one bridge on each side of their meeting */
    TOPO_PXB,     /* below one root port, through several switches: no host bridge */
    TOPO_PHB,     /* meet at the root complex (host bridge) */
    TOPO_NODE,    /* different root complexes of one NUMA node */
    TOPO_SYS,     /* different NUMA nodes (or one unknown): across the socket interconnect */
    TOPO__COUNT
} topo_dist_t;

struct topo_dev {
    topo_kind_t kind;
    char bdf[16];
    int numa;                     /* -1: unknown */
    char path[TOPO_PATH_MAX];
    char name[TOPO_NAME_MAX];     /* "" when none was given */
    uint32_t depth;               /* components of path */
    uint32_t part[TOPO_DEPTH_MAX]; /* offset of each component in path */
};

struct topo {
    struct topo_dev dev[TOPO_MAX_DEVICES];
    uint32_t n;
};

const char *topo_dist_to_string(topo_dist_t d);
const char *topo_kind_to_string(topo_kind_t k);

/* Parses a description (NUL-terminated). 0, or -EINVAL with "line N: what" in err. */
int topo_parse(const char *text, struct topo *ret, char *err, size_t errlen);
/* The distance class of a and b. */
topo_dist_t topo_distance(const struct topo_dev *a, const struct topo_dev *b);

/* The description of this machine from sysfs under root ("/sys" normally), as topo_parse
 * reads it: malloc'd text in *ret (caller frees). 0 or -errno with err. */
int topo_sysfs_describe(const char *root, char **ret, char *err, size_t errlen);

#endif
