/* topo_sysfs.c: this machine's description (topo.h) from sysfs: every PCI function under
 * <root>/bus/pci/devices that is an NVIDIA display/3D controller (a GPU) or carries an RDMA
 * device (<bdf>/infiniband/<name>: a NIC a rail can use), its chain of bridges from the link's
 * target under <root>/devices, and its numa_node. The daemon and `kvferry-topo` call it; the
 * tests point root at a tree they build. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

#define NVIDIA_VENDOR 0x10de

static long read_hex(const char *dir, const char *file)
{
    char p[PATH_MAX], buf[32];
    if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
        return -1;
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    long v = fgets(buf, sizeof buf, f) ? strtol(buf, NULL, 0) : -1;
    fclose(f);
    return v;
}

/* The RDMA device's name under dir/infiniband, or "" when it has none. */
static void rdma_name(const char *dir, char *name, size_t len)
{
    char p[PATH_MAX];
    name[0] = '\0';
    if (snprintf(p, sizeof p, "%s/infiniband", dir) >= (int)sizeof p)
        return;
    DIR *d = opendir(p);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && strlen(e->d_name) < len) {
            memcpy(name, e->d_name, strlen(e->d_name) + 1);
            break;
        }
    closedir(d);
}

/* Appends one device line; -ENOMEM or -E2BIG (past TOPO_MAX_DEVICES). */
static int append(char **text, size_t *len, unsigned *n, const char *line)
{
    if (*n == TOPO_MAX_DEVICES)
        return -E2BIG;
    size_t add = strlen(line);
    char *t = realloc(*text, *len + add + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t + *len, line, add + 1);
    *text = t;
    *len += add;
    (*n)++;
    return 0;
}

/* The line of one PCI function, or "" when it is neither a GPU nor an RDMA NIC. */
static void describe(const char *root, const char *bdf, char *line, size_t len)
{
    char dir[PATH_MAX], real[PATH_MAX], devices[PATH_MAX], name[TOPO_NAME_MAX];
    line[0] = '\0';
    char droot[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/bus/pci/devices/%s", root, bdf) >= (int)sizeof dir ||
        snprintf(devices, sizeof devices, "%s/devices/", root) >= (int)sizeof devices ||
        !realpath(dir, real) || !realpath(devices, droot))
        return;
    size_t dl = strlen(droot);
    if (strncmp(real, droot, dl) != 0 || real[dl] != '/')
        return;
    long vendor = read_hex(dir, "vendor"), cls = read_hex(dir, "class");
    long numa = read_hex(dir, "numa_node");
    rdma_name(dir, name, sizeof name);
    bool gpu = vendor == NVIDIA_VENDOR && cls >= 0 && (cls >> 16) == 0x03;
    if (!gpu && !name[0])
        return;
    snprintf(line, len, "%s %s numa=%ld path=%s%s%s\n", gpu ? "gpu" : "nic", bdf,
             numa < -1 ? -1 : numa, real + dl + 1, name[0] ? " name=" : "", name);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int topo_sysfs_describe(const char *root, char **ret, char *err, size_t errlen)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/bus/pci/devices", root);
    DIR *d = opendir(p);
    if (!d) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", p, strerror(e));
        return -e;
    }
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn || !(nn[n] = strdup(e->d_name)))
            rc = -ENOMEM;
        if (nn)
            names = nn;
        if (rc == 0)
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name); /* the description in bus order, as lspci */
    char *text = strdup("");
    size_t len = 0;
    unsigned count = 0;
    if (!text)
        rc = -ENOMEM;
    char line[TOPO_LINE_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) {
            describe(root, names[i], line, sizeof line);
            if (line[0])
                rc = append(&text, &len, &count, line);
        }
        free(names[i]);
    }
    free(names);
    if (rc) {
        free(text);
        snprintf(err, errlen, "%s: %s", p, rc == -E2BIG ? "more than TOPO_MAX_DEVICES GPUs and NICs"
                                                          : strerror(-rc));
        return rc;
    }
    *ret = text;
    return 0;
}
