/* hist_table.c: histograms per bounded tuple of label values (hist_table.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "hist_table.h"

static void set_key(char *dst, const char *v)
{
    size_t n = strlen(v && *v ? v : "-");
    if (n > LABEL_TABLE_KEY_MAX)
        n = LABEL_TABLE_KEY_MAX;
    memcpy(dst, v && *v ? v : "-", n);
    dst[n] = '\0';
}

static struct hist_row *other(struct hist_table *t)
{
    if (!t->other_used) {
        for (int l = 0; l < HIST_TABLE_LABELS; l++)
            set_key(t->other.key[l], LABEL_TABLE_OTHER);
        t->other_used = true;
    }
    return &t->other;
}

struct hist_row *hist_table_row(struct hist_table *t, const char *const key[HIST_TABLE_LABELS],
                                size_t max)
{
    char k[HIST_TABLE_LABELS][LABEL_TABLE_KEY_MAX + 1];
    memset(k, 0, sizeof k); /* rows compare whole keys */
    for (int l = 0; l < HIST_TABLE_LABELS; l++) {
        set_key(k[l], key[l]);
        if (strcmp(k[l], LABEL_TABLE_OTHER) == 0)
            return other(t);
    }
    for (size_t i = 0; i < t->n; i++)
        if (memcmp(t->rows[i].key, k, sizeof k) == 0)
            return &t->rows[i];
    if (t->n >= max)
        return other(t);
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 4;
        struct hist_row *nr = realloc(t->rows, nc * sizeof(*nr));
        if (!nr)
            return other(t);
        t->rows = nr;
        t->cap = nc;
    }
    struct hist_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    memcpy(r->key, k, sizeof k);
    return r;
}

/* o[key], made an empty object when absent. */
static json_t *child(json_t *o, const char *key)
{
    json_t *c = json_object_get(o, key);
    if (!c && (c = json_object()) && json_object_set_new(o, key, c) < 0)
        return NULL;
    return c;
}

static int row_json(json_t *o, const struct hist_row *r, const char *const names[],
                    const struct hist_spec *const specs[])
{
    for (int l = 0; o && l < HIST_TABLE_LABELS; l++)
        o = child(o, r->key[l]);
    for (int i = 0; o && i < HIST_TABLE_HISTS; i++)
        if (r->h[i].count && json_object_set_new(o, names[i], hist_json(&r->h[i], specs[i])) < 0)
            return -1;
    return o ? 0 : -1;
}

json_t *hist_table_json(const struct hist_table *t, const char *const names[HIST_TABLE_HISTS],
                        const struct hist_spec *const specs[HIST_TABLE_HISTS])
{
    json_t *o = json_object();
    int r = o ? 0 : -1;
    for (size_t i = 0; r == 0 && i < t->n; i++)
        r = row_json(o, &t->rows[i], names, specs);
    if (r == 0 && t->other_used)
        r = row_json(o, &t->other, names, specs);
    if (r < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void hist_table_free(struct hist_table *t)
{
    free(t->rows);
    memset(t, 0, sizeof(*t));
}
