/* fuzz_prom_json.c: libFuzzer target over prom_from_json + prom_set_render: any stats document
 * must render without a crash, leak or UB, into text that the independent exposition validator
 * (tests/promcheck.h) accepts with every family carrying HELP and TYPE. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../promcheck.h"
#include "prom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct prom_doc docs[] = {
    {"workers.transfers.failed", PROM_COUNTER, "error", "Failed transfers by error.", NULL},
    {"a.b", PROM_COUNTER, NULL, "help with \\ and\nnewline", NULL},
    {"a.c", PROM_GAUGE, "le\"x", NULL, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (!j)
        return 0;
    struct prom_set s;
    prom_set_init(&s);
    s.max_series = 500;
    int r = prom_from_json(&s, "kvferry", j, docs, sizeof(docs) / sizeof(docs[0]));
    json_decref(j);
    if (r == -EINVAL) {
        prom_set_done(&s);
        return 0;
    }
    if (r != 0)
        abort();
    char *t = NULL;
    if (prom_set_render(&s, &t, NULL) != 0)
        abort();
    char err[256];
    if (pc_validate(t, true, err, sizeof(err)) != 0) {
        fprintf(stderr, "invalid exposition: %s\n%s", err, t);
        abort();
    }
    free(t);
    prom_set_done(&s);
    return 0;
}
