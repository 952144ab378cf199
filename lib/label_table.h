/* label_table.h: per-label-value counters with a bounded number of values (the cardinality
 * of a Prometheus label): the first `max` distinct values get a row each; every later value
 * counts in the row "other" (LABEL_TABLE_OTHER), so a scrape never grows past max + 1 series per
 * family. Values longer than LABEL_TABLE_KEY_MAX bytes are cut. Rows are never dropped (they are
 * counters). Not thread-safe: one owner. */
#ifndef KVF_LABEL_TABLE_H
#define KVF_LABEL_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct json_t;

#define LABEL_TABLE_KEY_MAX 127
#define LABEL_TABLE_OTHER "other"

struct label_row {
    char key[LABEL_TABLE_KEY_MAX + 1];
    uint64_t requests, bytes;
};

struct label_table {
    struct label_row *rows; /* owned */
    size_t n, cap;
    struct label_row other; /* used once a value found the table full */
};

/* Counts one request of `bytes` under `key` ("" counts as "local"). A value equal to "other" is
 * counted in the "other" row. Out of memory: counted in "other". */
void label_table_add(struct label_table *t, const char *key, size_t max, uint64_t bytes);
/* {"<key>": {"requests": N, "bytes": M}, ..., "other": {...} (when used)}; NULL on ENOMEM. */
struct json_t *label_table_json(const struct label_table *t);
void label_table_free(struct label_table *t);

#endif
