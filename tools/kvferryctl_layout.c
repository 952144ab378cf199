/* kvferryctl_layout.c: `kvferryctl layout` and `kvferryctl check-layout` (kvferryctl_layout.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvferryctl_layout.h"
#include "preset.h"

int ctl_layout_load(const char *path, struct layout *ret, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s", strerror(e));
        return -e;
    }
    char *buf = malloc(LAYOUT_JSON_MAX + 1);
    size_t n = buf ? fread(buf, 1, LAYOUT_JSON_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    int rc;
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
    } else if (bad) {
        snprintf(err, errlen, "read error");
        rc = -EIO;
    } else {
        rc = layout_from_json(buf, n, ret, err, errlen); /* refuses n > LAYOUT_JSON_MAX */
    }
    free(buf);
    return rc;
}

static void layout_usage(FILE *f)
{
    fprintf(f, "usage: kvferryctl layout SPEC [--rank N] [--role context|generation] "
               "[--instance ID]\n"
               "  prints the layout JSON of rank N (default 0) of the preset instance SPEC, e.g.\n"
               "  kvferryctl layout tiny:tp=2,pools=layer --rank 1 (docs/LAYOUT.md)\n");
}

int ctl_layout_main(int argc, char **argv)
{
    const char *spec = NULL, *inst = "inst";
    layout_role_t role = ROLE_CONTEXT;
    unsigned long rank = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            layout_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--rank") && v) {
            char *end;
            errno = 0;
            rank = strtoul(v, &end, 10);
            if (!*v || *end || errno || v[0] == '-') {
                fprintf(stderr, "kvferryctl layout: --rank: \"%s\" is not a number\n", v);
                return 1;
            }
            i++;
        } else if (!strcmp(a, "--role") && v) {
            if (strcmp(v, "context") && strcmp(v, "generation")) {
                fprintf(stderr, "kvferryctl layout: --role: \"%s\" is not context or generation\n",
                        v);
                return 1;
            }
            role = v[0] == 'c' ? ROLE_CONTEXT : ROLE_GENERATION;
            i++;
        } else if (!strcmp(a, "--instance") && v) {
            inst = v;
            i++;
        } else if (a[0] != '-' && !spec) {
            spec = a;
        } else {
            fprintf(stderr, "kvferryctl layout: unexpected \"%s\"\n", a);
            layout_usage(stderr);
            return 1;
        }
    }
    if (!spec) {
        layout_usage(stderr);
        return 1;
    }
    struct preset_spec s;
    char err[512];
    if (preset_parse(spec, &s, err, sizeof(err))) {
        fprintf(stderr, "kvferryctl layout: spec \"%s\": %s\n", spec, err);
        return 1;
    }
    uint32_t n = preset_n_ranks(&s);
    if (rank >= n) {
        fprintf(stderr, "kvferryctl layout: --rank %lu but the instance has %" PRIu32 " ranks\n",
                rank, n);
        return 1;
    }
    struct layout *ls = calloc(n, sizeof(*ls));
    int rc = 1;
    if (!ls)
        fprintf(stderr, "kvferryctl layout: out of memory\n");
    else if (preset_build(&s, inst, role, -1, ls, err, sizeof(err)))
        fprintf(stderr, "kvferryctl layout: spec \"%s\": %s\n", spec, err);
    else {
        char *t = layout_to_json(&ls[rank]);
        if (t) {
            printf("%s\n", t);
            rc = 0;
        }
        free(t);
    }
    free(ls);
    return rc;
}

int ctl_check_layout_main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: kvferryctl check-layout FILE...\n"
                "  decodes and validates each layout file (docs/LAYOUT.md); exit 1 if any is "
                "refused\n");
        return argc < 2 ? 1 : 0;
    }
    struct layout *l = malloc(sizeof(*l));
    if (!l) {
        fprintf(stderr, "kvferryctl check-layout: out of memory\n");
        return 1;
    }
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        char err[512];
        if (ctl_layout_load(argv[i], l, err, sizeof(err))) {
            fprintf(stderr, "%s: %s\n", argv[i], err);
            bad = 1;
            continue;
        }
        printf("%s: ok (instance %s, %s rank %" PRIu32 " of tp %" PRIu32 " x pp %" PRIu32
               ", %" PRIu32 " pools, %" PRIu32 " groups)\n",
               argv[i], l->instance, layout_role_to_string(l->role), layout_rank(l), l->tp_size,
               l->pp_size, l->n_pools, l->n_groups);
    }
    free(l);
    return bad;
}
