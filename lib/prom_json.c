/* prom_json.c: a stats document (JSON) walked into a Prometheus metric set (prom.h,
 * prom_from_json). Pure: the document and the doc table are borrowed, read only. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "prom.h"

#define WALK_NAME_MAX 1024

struct walk {
    struct prom_set *set;
    const struct prom_doc *docs;
    size_t n_docs;
    struct prom_label labels[PROM_LABELS_MAX];
    size_t n_labels;
};

static const struct prom_doc *doc_find(const struct walk *w, const char *path)
{
    for (size_t i = 0; i < w->n_docs; i++)
        if (strcmp(w->docs[i].path, path) == 0)
            return &w->docs[i];
    return NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Time units in key names (house style: uptime_s, wait_ms) become Prometheus base units:
 * the name's unit suffix (before any _total) turns into _seconds, the value is divided. Returns
 * the divisor (1 when the name has no such unit) and writes the new name into out. */
static double unit_to_seconds(const char *name, char *out, size_t outlen)
{
    static const struct {
        const char *suffix;
        double per_second;
    } units[] = {{"_s", 1}, {"_ms", 1e3}, {"_us", 1e6}, {"_ns", 1e9}};
    size_t n = strlen(name);
    bool total = ends_with(name, "_total");
    size_t base = total ? n - 6 : n;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t m = strlen(units[i].suffix);
        if (base > m && strncmp(name + base - m, units[i].suffix, m) == 0) {
            int r = snprintf(out, outlen, "%.*s_seconds%s", (int)(base - m), name,
                             total ? "_total" : "");
            if (r > 0 && (size_t)r < outlen)
                return units[i].per_second;
        }
    }
    snprintf(out, outlen, "%s", name);
    return 1;
}

static int undeclared(struct walk *w, const char *path)
{
    if (!w->set->undeclared++)
        snprintf(w->set->undeclared_first, sizeof(w->set->undeclared_first), "%s", path);
    return 0;
}

/* The doc's HELP text with its unit (seconds when a time unit was converted). */
static void doc_help(const struct prom_doc *doc, bool to_seconds, char *out, size_t outlen)
{
    const char *unit = to_seconds ? "seconds" : doc->unit;
    const char *help = doc->help ? doc->help : doc->path;
    if (unit)
        snprintf(out, outlen, "%s Unit: %s.", help, unit);
    else
        snprintf(out, outlen, "%s", help);
}

/* A hist.h object declared PROM_HISTOGRAM; anything malformed is counted as dropped. */
static int emit_hist(struct walk *w, const char *raw_name, const struct prom_doc *doc,
                     const json_t *v)
{
    char name[WALK_NAME_MAX];
    double per_s = unit_to_seconds(raw_name, name, sizeof(name));
    const json_t *le = json_object_get(v, "le"), *counts = json_object_get(v, "counts");
    const json_t *sum = json_object_get(v, "sum");
    size_t n = json_array_size(le);
    if (!json_is_array(le) || !json_is_array(counts) || !json_is_number(sum) || n == 0 ||
        n > 64 || json_array_size(counts) != n + 1) {
        w->set->dropped++;
        return 0;
    }
    double b[64];
    uint64_t c[65];
    for (size_t i = 0; i <= n; i++) {
        const json_t *ci = json_array_get(counts, i);
        if ((i < n && !json_is_number(json_array_get(le, i))) || !json_is_integer(ci) ||
            json_integer_value(ci) < 0) {
            w->set->dropped++;
            return 0;
        }
        if (i < n)
            b[i] = json_number_value(json_array_get(le, i)) / per_s;
        c[i] = (uint64_t)json_integer_value(ci);
    }
    char help[PROM_HELP_MAX + 1];
    doc_help(doc, per_s != 1, help, sizeof(help));
    int r = prom_set_add_histogram(w->set, name, help, w->labels, w->n_labels, b, c, n,
                                   json_number_value(sum) / per_s);
    return r == -ENOMEM ? r : 0;
}

/* One sample. doc: what is known of it (may be NULL); key: its JSON key, for the _total rule. */
static int emit(struct walk *w, const char *raw_name, const char *path, const char *key,
                const struct prom_doc *doc, const json_t *v)
{
    char name[WALK_NAME_MAX];
    double per_s = unit_to_seconds(raw_name, name, sizeof(name));
    if (!doc && w->set->declared_only)
        return undeclared(w, path);
    if (doc && doc->type == PROM_HISTOGRAM)
        return undeclared(w, path); /* declared a histogram, found a number */
    prom_type_t type = doc ? doc->type : ends_with(key, "_total") ? PROM_COUNTER : PROM_GAUGE;
    char help[PROM_HELP_MAX + 1];
    if (doc && doc->help)
        doc_help(doc, per_s != 1, help, sizeof(help));
    else
        snprintf(help, sizeof(help), "kvferryd stats key %s%s%s", path, w->n_labels ? " by " : "",
                 w->n_labels ? w->labels[w->n_labels - 1].name : "");
    int r;
    if (json_is_number(v) && per_s != 1)
        r = prom_set_add_real(w->set, name, type, help, w->labels, w->n_labels,
                              json_number_value(v) / per_s);
    else if (json_is_integer(v))
        r = prom_set_add_int(w->set, name, type, help, w->labels, w->n_labels,
                             (int64_t)json_integer_value(v));
    else if (json_is_real(v))
        r = prom_set_add_real(w->set, name, type, help, w->labels, w->n_labels, json_real_value(v));
    else
        r = prom_set_add_int(w->set, name, type, help, w->labels, w->n_labels,
                             json_is_true(v) ? 1 : 0);
    return r == -ENOMEM ? r : 0; /* other refusals are counted in set->dropped */
}

static bool is_sample(const json_t *v)
{
    return json_is_number(v) || json_is_boolean(v);
}

static int walk(struct walk *w, const char *name, const char *path, const char *key,
                const json_t *v, int depth);

/* Children of an object (or of a label-map entry): name and path extended by each key. */
static int walk_children(struct walk *w, const char *name, const char *path, const json_t *obj,
                         int depth)
{
    const char *k;
    json_t *c;
    json_object_foreach((json_t *)obj, k, c)
    {
        char cn[WALK_NAME_MAX], cp[WALK_NAME_MAX];
        int a = snprintf(cn, sizeof(cn), "%s%s%s", name, *name ? "_" : "", k);
        int b = snprintf(cp, sizeof(cp), "%s%s%s", path, *path ? "." : "", k);
        if (a < 0 || b < 0 || (size_t)a >= sizeof(cn) || (size_t)b >= sizeof(cp)) {
            w->set->dropped++;
            continue;
        }
        int r = walk(w, cn, cp, k, c, depth + 1);
        if (r < 0)
            return r;
    }
    return 0;
}

/* An object keyed by name: each entry adds {label="key"}; the map's own name carries on.
 * `label` may name several labels, comma-separated: the entries are maps again, one level per
 * label (outermost first), and the leaves are samples or, declared PROM_HISTOGRAM, histograms. */
static int walk_label_map(struct walk *w, const char *name, const char *path, const char *key,
                          const struct prom_doc *doc, const char *label, const json_t *obj,
                          int depth)
{
    if (w->n_labels >= PROM_LABELS_MAX) {
        w->set->dropped++;
        return 0;
    }
    const char *comma = strchr(label, ',');
    char this[PROM_NAME_MAX + 1];
    snprintf(this, sizeof(this), "%.*s", (int)(comma ? (size_t)(comma - label) : strlen(label)),
             label);
    const char *k;
    json_t *c;
    json_object_foreach((json_t *)obj, k, c)
    {
        w->labels[w->n_labels] = (struct prom_label){this, k};
        w->n_labels++;
        int r = 0;
        bool deeper = json_is_object(c) && depth + 1 < PROM_DEPTH_MAX;
        if (comma && deeper)
            r = walk_label_map(w, name, path, key, doc, comma + 1, c, depth + 1);
        else if (comma)
            w->set->dropped++; /* a leaf where the declaration wants another level */
        else if (is_sample(c))
            r = emit(w, name, path, key, doc, c);
        else if (deeper && doc && doc->type == PROM_HISTOGRAM)
            r = emit_hist(w, name, doc, c);
        else if (deeper)
            r = walk_children(w, name, path, c, depth + 1);
        else if (json_is_object(c))
            w->set->dropped++;
        w->n_labels--;
        if (r < 0)
            return r;
    }
    return 0;
}

static int walk(struct walk *w, const char *name, const char *path, const char *key,
                const json_t *v, int depth)
{
    if (is_sample(v))
        return emit(w, name, path, key, doc_find(w, path), v);
    if (!json_is_object(v))
        return 0; /* strings, arrays, null: not samples */
    if (depth >= PROM_DEPTH_MAX) {
        w->set->dropped++;
        return 0;
    }
    const struct prom_doc *doc = doc_find(w, path);
    if (doc && doc->label)
        return walk_label_map(w, name, path, key, doc, doc->label, v, depth);
    if (doc && doc->type == PROM_HISTOGRAM)
        return emit_hist(w, name, doc, v);
    const char *by = strstr(key, "_by_");
    if (by) {
        const char *label = by + 4;
        while (strstr(label, "_by_"))
            label = strstr(label, "_by_") + 4;
        by = label - 4;
        size_t cut = strlen(by);
        char bn[WALK_NAME_MAX], bk[WALK_NAME_MAX];
        snprintf(bn, sizeof(bn), "%.*s", (int)(strlen(name) - cut), name);
        snprintf(bk, sizeof(bk), "%.*s", (int)(strlen(key) - cut), key);
        if (*label && *bk)
            return walk_label_map(w, bn, path, bk, NULL, label, v, depth);
    }
    return walk_children(w, name, path, v, depth);
}

int prom_from_json(struct prom_set *set, const char *prefix, const json_t *stats,
                   const struct prom_doc *docs, size_t n_docs)
{
    if (!json_is_object(stats))
        return -EINVAL;
    struct walk w = {.set = set, .docs = docs, .n_docs = n_docs};
    return walk_children(&w, prefix ? prefix : "", "", stats, 0);
}
