/* topo.c: the description's parser and the distance of two devices (topo.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

static const char *const dist_names[TOPO__COUNT] = {"PIX", "PXB", "PHB", "NODE", "SYS"};

const char *topo_dist_to_string(topo_dist_t d)
{
    return (unsigned)d < TOPO__COUNT ? dist_names[d] : "unknown";
}

const char *topo_kind_to_string(topo_kind_t k)
{
    return k == TOPO_GPU ? "gpu" : k == TOPO_NIC ? "nic" : "unknown";
}

/* Splits d->path at '/' into d->part: the root complex first, the device last. */
static int split_path(struct topo_dev *d, char *why, size_t len)
{
    d->depth = 0;
    const char *p = d->path;
    if (strncmp(p, "pci", 3) != 0) {
        snprintf(why, len, "path must start at a root complex (pciDDDD:BB), not '%.40s'", p);
        return -EINVAL;
    }
    for (const char *s = p; *s;) {
        if (d->depth == TOPO_DEPTH_MAX) {
            snprintf(why, len, "path deeper than %d components", TOPO_DEPTH_MAX);
            return -EINVAL;
        }
        d->part[d->depth++] = (uint32_t)(s - p);
        const char *slash = strchr(s, '/');
        if (!slash)
            break;
        if (slash == s || !slash[1]) {
            snprintf(why, len, "path has an empty component");
            return -EINVAL;
        }
        s = slash + 1;
    }
    const char *last = p + d->part[d->depth - 1];
    if (d->depth < 2 || strcmp(last, d->bdf) != 0) {
        snprintf(why, len, "path must end with the device's own address %s", d->bdf);
        return -EINVAL;
    }
    return 0;
}

/* One "key=value" field into d. */
static int field(struct topo_dev *d, const char *f, char *why, size_t len)
{
    const char *eq = strchr(f, '=');
    size_t klen = eq ? (size_t)(eq - f) : 0;
    const char *v = eq ? eq + 1 : "";
    if (klen == 4 && strncmp(f, "numa", 4) == 0) {
        char *end;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < -1 || n > 1023) {
            snprintf(why, len, "numa must be -1..1023, not '%.20s'", v);
            return -EINVAL;
        }
        d->numa = (int)n;
    } else if (klen == 4 && strncmp(f, "path", 4) == 0) {
        if (strlen(v) >= sizeof d->path) {
            snprintf(why, len, "path longer than %zu bytes", sizeof d->path - 1);
            return -EINVAL;
        }
        snprintf(d->path, sizeof d->path, "%s", v);
    } else if (klen == 4 && strncmp(f, "name", 4) == 0) {
        if (!*v || strlen(v) >= sizeof d->name) {
            snprintf(why, len, "name must be 1..%zu bytes", sizeof d->name - 1);
            return -EINVAL;
        }
        snprintf(d->name, sizeof d->name, "%s", v);
    } else {
        snprintf(why, len, "unknown field '%.30s' (numa=, path=, name=)", f);
        return -EINVAL;
    }
    return 0;
}

static bool bdf_ok(const char *s)
{
    unsigned dom, bus, dev, fn;
    char tail;
    return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

/* One device line (already without its newline) into d. */
static int parse_line(char *line, struct topo_dev *d, char *why, size_t len)
{
    memset(d, 0, sizeof *d);
    d->numa = -1;
    char *save = NULL;
    char *kind = strtok_r(line, " \t", &save);
    char *bdf = strtok_r(NULL, " \t", &save);
    if (!kind || !bdf) {
        snprintf(why, len, "expected '<gpu|nic> <bdf> numa=N path=...'");
        return -EINVAL;
    }
    if (strcmp(kind, "gpu") == 0)
        d->kind = TOPO_GPU;
    else if (strcmp(kind, "nic") == 0)
        d->kind = TOPO_NIC;
    else {
        snprintf(why, len, "kind must be gpu or nic, not '%.20s'", kind);
        return -EINVAL;
    }
    if (!bdf_ok(bdf)) {
        snprintf(why, len, "'%.20s' is not a PCI address (DDDD:BB:DD.F)", bdf);
        return -EINVAL;
    }
    snprintf(d->bdf, sizeof d->bdf, "%s", bdf);
    int rc;
    for (char *f; (f = strtok_r(NULL, " \t", &save));)
        if ((rc = field(d, f, why, len)) < 0)
            return rc;
    if (!d->path[0]) {
        snprintf(why, len, "path= is missing");
        return -EINVAL;
    }
    return split_path(d, why, len);
}

int topo_parse(const char *text, struct topo *ret, char *err, size_t errlen)
{
    ret->n = 0;
    char line[TOPO_LINE_MAX + 1];
    unsigned lineno = 0;
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        lineno++;
        if (n > TOPO_LINE_MAX) {
            snprintf(err, errlen, "line %u: longer than %d bytes", lineno, TOPO_LINE_MAX);
            return -EINVAL;
        }
        memcpy(line, s, n);
        line[n] = '\0';
        s += n + (nl ? 1 : 0);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (strspn(line, " \t\r") == strlen(line))
            continue;
        if (ret->n == TOPO_MAX_DEVICES) {
            snprintf(err, errlen, "line %u: more than %d devices", lineno, TOPO_MAX_DEVICES);
            return -EINVAL;
        }
        char why[160];
        if (parse_line(line, &ret->dev[ret->n], why, sizeof why) < 0) {
            snprintf(err, errlen, "line %u: %s", lineno, why);
            return -EINVAL;
        }
        for (uint32_t i = 0; i < ret->n; i++)
            if (strcmp(ret->dev[i].bdf, ret->dev[ret->n].bdf) == 0) {
                snprintf(err, errlen, "line %u: %s is listed twice", lineno, ret->dev[i].bdf);
                return -EINVAL;
            }
        ret->n++;
    }
    return 0;
}

static bool same_part(const struct topo_dev *a, const struct topo_dev *b, uint32_t i)
{
    const char *x = a->path + a->part[i], *y = b->path + b->part[i];
    size_t lx = strcspn(x, "/"), ly = strcspn(y, "/");
    return lx == ly && memcmp(x, y, lx) == 0;
}

/* Two chains meet at the deepest component they share: the root complex alone is the host
 * bridge (PHB); a root port or a switch port below it keeps them off the host bridge. Below
 * the meeting each side's bridges are its chain less the device: one bridge on each side (a
 * switch's downstream ports) is one switch (PIX); more is several (PXB). */
topo_dist_t topo_distance(const struct topo_dev *a, const struct topo_dev *b)
{
    if (!same_part(a, b, 0)) {
        if (a->numa < 0 || b->numa < 0 || a->numa != b->numa)
            return TOPO_SYS;
        return TOPO_NODE;
    }
    uint32_t common = 1;
    uint32_t max = a->depth < b->depth ? a->depth : b->depth;
    while (common < max - 1 && same_part(a, b, common))
        common++;
    if (common == 1)
        return TOPO_PHB;
    uint32_t below_a = a->depth - common - 1, below_b = b->depth - common - 1;
    return below_a <= 1 && below_b <= 1 ? TOPO_PIX : TOPO_PXB;
}
