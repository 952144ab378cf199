/* kvferry-topo: this node's GPUs and RDMA NICs and the rail each GPU takes (docs/SCALE.md).
 *   kvferry-topo [--sysfs ROOT] [--describe | --json] [FILE]
 * Reads the description (lib/topo.h) from FILE ("-": stdin), else from sysfs under ROOT (/sys).
 * --describe prints the description itself: save it from a real machine for tests/topo/.
 * Default: one line per GPU (its NIC, the distance class, NUMA node) and the NICs of each NUMA
 * node's host pools; --json: the same as `status` shows it (rails_json). Exit 0; 1 on a bad
 * description (the line and what is wrong); 2 on a usage error. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails.h"
#include "topo.h"

#define TOPO_FILE_MAX (TOPO_MAX_DEVICES * (TOPO_LINE_MAX + 1) + 1)

static char *read_all(FILE *f, char *err, size_t errlen)
{
    char *buf = malloc(TOPO_FILE_MAX);
    size_t n = buf ? fread(buf, 1, TOPO_FILE_MAX - 1, f) : 0;
    if (!buf || ferror(f) || n == TOPO_FILE_MAX - 1) {
        snprintf(err, errlen, "%s", !buf ? "out of memory" : ferror(f) ? strerror(errno)
                                                                        : "description too long");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static void print_table(const struct topo *t, const struct rails *r)
{
    printf("%-14s %-5s %-14s %-12s %s\n", "gpu", "numa", "nic", "name", "distance");
    for (uint32_t i = 0; i < r->n_gpus; i++) {
        const struct topo_dev *g = &t->dev[r->gpu[i].gpu], *n = &t->dev[r->gpu[i].nic];
        printf("%-14s %-5d %-14s %-12s %s\n", g->bdf, g->numa, n->bdf, n->name[0] ? n->name : "-",
               topo_dist_to_string(r->gpu[i].dist));
    }
    int seen[TOPO_MAX_DEVICES];
    uint32_t n_seen = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        int numa = t->dev[i].numa;
        uint32_t k = 0;
        while (k < n_seen && seen[k] != numa)
            k++;
        if (k < n_seen)
            continue;
        seen[n_seen++] = numa;
        uint32_t nics[TOPO_MAX_DEVICES];
        uint32_t c = rails_numa_nics(t, numa, nics, TOPO_MAX_DEVICES);
        printf("host pools on numa %d:", numa);
        for (uint32_t j = 0; j < c; j++)
            printf(" %s", t->dev[nics[j]].name[0] ? t->dev[nics[j]].name : t->dev[nics[j]].bdf);
        printf("%s\n", c ? "" : " none");
    }
}

int main(int argc, char **argv)
{
    const char *root = "/sys";
    int describe = 0, as_json = 0;
    static const struct option opts[] = {{"sysfs", required_argument, NULL, 's'},
                                         {"describe", no_argument, NULL, 'd'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    for (int c; (c = getopt_long(argc, argv, "s:djh", opts, NULL)) != -1;) {
        if (c == 's')
            root = optarg;
        else if (c == 'd')
            describe = 1;
        else if (c == 'j')
            as_json = 1;
        else {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: kvferry-topo [--sysfs ROOT] [--describe | --json] [FILE]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    char err[256], *text = NULL;
    if (optind < argc) {
        FILE *f = strcmp(argv[optind], "-") == 0 ? stdin : fopen(argv[optind], "r");
        if (!f) {
            fprintf(stderr, "kvferry-topo: %s: %s\n", argv[optind], strerror(errno));
            return 1;
        }
        text = read_all(f, err, sizeof err);
        if (f != stdin)
            fclose(f);
    } else if (topo_sysfs_describe(root, &text, err, sizeof err) < 0) {
        text = NULL;
    }
    if (!text) {
        fprintf(stderr, "kvferry-topo: %s\n", err);
        return 1;
    }
    static struct topo t;
    static struct rails r;
    int rc = topo_parse(text, &t, err, sizeof err);
    if (rc == 0 && describe)
        fputs(text, stdout);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "kvferry-topo: %s\n", err);
        return 1;
    }
    if (describe)
        return 0;
    if (rails_choose(&t, &r) == -ENODEV && !as_json)
        printf("no RDMA NIC: no rails (host TCP/shared memory only)\n");
    if (as_json) {
        json_t *o = rails_json(&t, &r);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s ? s : "{}");
        free(s);
        json_decref(o);
    } else {
        print_table(&t, &r);
    }
    return 0;
}
