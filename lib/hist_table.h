/* hist_table.h: histograms per tuple of label values with a bounded number of tuples (the
 * cardinality of a Prometheus label set, as label_table.h bounds one label): the first `max`
 * distinct tuples get a row each; every later tuple counts in the row whose values are all
 * "other" (LABEL_TABLE_OTHER), so a scrape never grows past max + 1 tuples per family. A row
 * holds HIST_TABLE_HISTS histograms (hist.h), e.g. one per phase of a request. Values longer
 * than LABEL_TABLE_KEY_MAX bytes are cut; "" reads "-". Rows are never dropped (counters).
 * Not thread-safe: one owner. */
#ifndef KVF_HIST_TABLE_H
#define KVF_HIST_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "hist.h"
#include "label_table.h"

struct json_t;

#define HIST_TABLE_LABELS 3 /* label values per tuple */
#define HIST_TABLE_HISTS 6  /* histograms per row */

struct hist_row {
    char key[HIST_TABLE_LABELS][LABEL_TABLE_KEY_MAX + 1];
    struct hist h[HIST_TABLE_HISTS];
};

struct hist_table {
    struct hist_row *rows; /* owned */
    size_t n, cap;
    struct hist_row other; /* used once a tuple found the table full (other_used) */
    bool other_used;
};

/* The row of the tuple `key` (a new one while fewer than max rows exist; else, or a tuple with
 * a value "other", or out of memory: the "other" row). Never NULL. */
struct hist_row *hist_table_row(struct hist_table *t, const char *const key[HIST_TABLE_LABELS],
                                size_t max);
/* {"<key0>": {"<key1>": {"<key2>": {"<names[i]>": <hist.h JSON>, ...}}}} over every row, the
 * i-th histogram against specs[i], those with no observation left out (a local request has
 * no credit phase: no empty series); NULL on ENOMEM. */
struct json_t *hist_table_json(const struct hist_table *t,
                               const char *const names[HIST_TABLE_HISTS],
                               const struct hist_spec *const specs[HIST_TABLE_HISTS]);
void hist_table_free(struct hist_table *t);

#endif
