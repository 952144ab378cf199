/* label_table.c: bounded per-label-value counters (label_table.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "label_table.h"

static void count(struct label_row *r, uint64_t bytes)
{
    r->requests++;
    r->bytes += bytes;
}

void label_table_add(struct label_table *t, const char *key, size_t max, uint64_t bytes)
{
    char k[LABEL_TABLE_KEY_MAX + 1];
    size_t n = strlen(key && *key ? key : "local");
    if (n > LABEL_TABLE_KEY_MAX)
        n = LABEL_TABLE_KEY_MAX;
    memcpy(k, key && *key ? key : "local", n);
    k[n] = '\0';
    if (strcmp(k, LABEL_TABLE_OTHER) == 0) {
        count(&t->other, bytes);
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->rows[i].key, k) == 0) {
            count(&t->rows[i], bytes);
            return;
        }
    }
    if (t->n >= max) {
        count(&t->other, bytes);
        return;
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 8;
        struct label_row *nr = realloc(t->rows, nc * sizeof(*nr));
        if (!nr) {
            count(&t->other, bytes);
            return;
        }
        t->rows = nr;
        t->cap = nc;
    }
    struct label_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    memcpy(r->key, k, n + 1);
    count(r, bytes);
}

static json_t *row_json(const struct label_row *r)
{
    return json_pack("{s:I,s:I}", "requests", (json_int_t)r->requests, "bytes",
                     (json_int_t)r->bytes);
}

json_t *label_table_json(const struct label_table *t)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < t->n; i++)
        json_object_set_new(o, t->rows[i].key, row_json(&t->rows[i]));
    if (o && t->other.requests)
        json_object_set_new(o, LABEL_TABLE_OTHER, row_json(&t->other));
    return o;
}

void label_table_free(struct label_table *t)
{
    free(t->rows);
    memset(t, 0, sizeof(*t));
}
