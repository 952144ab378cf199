/* prom.c: Prometheus text format 0.0.4: names, escaping, values, and the metric set (prom.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"

struct prom_sample {
    char *labels;       /* owned: rendered "{a=\"x\",b=\"y\"}", or "" */
    const char *suffix; /* static: "" or a histogram's "_bucket", "_sum", "_count" */
    char value[32];
};

struct prom_family {
    char *name; /* owned, valid metric name */
    char *help; /* owned, escaped */
    prom_type_t type;
    struct prom_sample *s; /* owned */
    size_t n, cap;
};

const char *prom_type_to_string(prom_type_t t)
{
    return t == PROM_COUNTER ? "counter" : t == PROM_HISTOGRAM ? "histogram" : "gauge";
}

static bool is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int sanitize(const char *in, char *out, size_t outlen, bool colon, bool label)
{
    size_t cap = outlen < PROM_NAME_MAX + 1 ? outlen : PROM_NAME_MAX + 1;
    /* the prefix is decided on the mapped bytes: "''x" maps to "__x", a reserved label name */
    char c0 = in[0], c1 = in[0] ? in[1] : '\0';
    bool ok0 = is_alpha_(c0) || is_digit(c0) || (colon && c0 == ':');
    bool ok1 = is_alpha_(c1) || is_digit(c1) || (colon && c1 == ':');
    const char *pre = "";
    if (!c0 || is_digit(c0))
        pre = "_";
    else if (label && (!ok0 || c0 == '_') && c1 && (!ok1 || c1 == '_'))
        pre = "l";
    size_t o = 0;
    for (const char *p = pre; *p; p++) {
        if (o + 1 >= cap)
            return -ENAMETOOLONG;
        out[o++] = *p;
    }
    for (const char *p = in; *p; p++) {
        if (o + 1 >= cap)
            return -ENAMETOOLONG;
        char c = *p;
        out[o++] = (is_alpha_(c) || is_digit(c) || (colon && c == ':')) ? c : '_';
    }
    out[o] = '\0';
    return (int)o;
}

int prom_sanitize_name(const char *in, char *out, size_t outlen)
{
    return sanitize(in, out, outlen, true, false);
}

int prom_sanitize_label_name(const char *in, char *out, size_t outlen)
{
    return sanitize(in, out, outlen, false, true);
}

bool prom_name_valid(const char *s)
{
    if (!(is_alpha_(s[0]) || s[0] == ':'))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!(is_alpha_(*p) || is_digit(*p) || *p == ':'))
            return false;
    return true;
}

bool prom_label_name_valid(const char *s)
{
    if (!is_alpha_(s[0]))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!(is_alpha_(*p) || is_digit(*p)))
            return false;
    return true;
}

static int escape(const char *in, char *out, size_t outlen, bool quote)
{
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        const char *rep = NULL;
        if (*p == '\\')
            rep = "\\\\";
        else if (*p == '\n')
            rep = "\\n";
        else if (quote && *p == '"')
            rep = "\\\"";
        size_t n = rep ? 2 : 1;
        if (o + n >= outlen)
            return -ENOSPC;
        if (rep)
            memcpy(out + o, rep, 2);
        else
            out[o] = *p;
        o += n;
    }
    if (o >= outlen)
        return -ENOSPC;
    out[o] = '\0';
    return (int)o;
}

int prom_escape_label_value(const char *in, char *out, size_t outlen)
{
    return escape(in, out, outlen, true);
}

int prom_escape_help(const char *in, char *out, size_t outlen)
{
    return escape(in, out, outlen, false);
}

int prom_format_int(int64_t v, char *out, size_t outlen)
{
    return snprintf(out, outlen, "%" PRId64, v);
}

int prom_format_real(double v, char *out, size_t outlen)
{
    if (isnan(v))
        return snprintf(out, outlen, "NaN");
    if (isinf(v))
        return snprintf(out, outlen, v > 0 ? "+Inf" : "-Inf");
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) { /* the shortest text that reads back exactly */
        n = snprintf(out, outlen, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return n;
}

/* Copies at most max bytes of s, not cutting a UTF-8 sequence. */
static void cut_utf8(const char *s, size_t max, char *out)
{
    size_t n = strlen(s);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(out, s, n);
    out[n] = '\0';
}

void prom_set_init(struct prom_set *s)
{
    memset(s, 0, sizeof(*s));
    s->max_series = PROM_SERIES_MAX;
}

void prom_set_done(struct prom_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_fam; i++) {
        struct prom_family *f = &s->fam[i];
        for (size_t j = 0; j < f->n; j++)
            free(f->s[j].labels);
        free(f->s);
        free(f->name);
        free(f->help);
    }
    free(s->fam);
    memset(s, 0, sizeof(*s));
    s->max_series = PROM_SERIES_MAX;
}

struct label_r {
    char name[PROM_NAME_MAX + 1];
    const char *value;
};

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const struct label_r *)a)->name, ((const struct label_r *)b)->name);
}

/* Renders the label set, sorted by name, into a malloc'd string. */
static int render_labels(const struct prom_label *labels, size_t n, char **ret)
{
    struct label_r l[PROM_LABELS_MAX];
    for (size_t i = 0; i < n; i++) {
        int r = prom_sanitize_label_name(labels[i].name, l[i].name, sizeof(l[i].name));
        if (r < 0)
            return r;
        l[i].value = labels[i].value ? labels[i].value : "";
    }
    qsort(l, n, sizeof(l[0]), cmp_label);
    for (size_t i = 1; i < n; i++)
        if (strcmp(l[i - 1].name, l[i].name) == 0)
            return -EEXIST;
    /* each label: name + ="..." + comma; values at most doubled by escaping */
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += strlen(l[i].name) + 4 + 2 * PROM_LABEL_VALUE_MAX + 1;
    char *out = malloc(cap);
    if (!out)
        return -ENOMEM;
    size_t o = 0;
    if (n)
        out[o++] = '{';
    for (size_t i = 0; i < n; i++) {
        char cut[PROM_LABEL_VALUE_MAX + 1];
        cut_utf8(l[i].value, PROM_LABEL_VALUE_MAX, cut);
        o += (size_t)snprintf(out + o, cap - o, "%s%s=\"", i ? "," : "", l[i].name);
        int e = prom_escape_label_value(cut, out + o, cap - o);
        if (e < 0) {
            free(out);
            return e;
        }
        o += (size_t)e;
        out[o++] = '"';
    }
    if (n)
        out[o++] = '}';
    out[o] = '\0';
    *ret = out;
    return 0;
}

static int family_get(struct prom_set *s, const char *name, prom_type_t type, const char *help,
                      struct prom_family **ret)
{
    for (size_t i = 0; i < s->n_fam; i++) {
        if (strcmp(s->fam[i].name, name) == 0) {
            if (s->fam[i].type != type)
                return -EEXIST;
            *ret = &s->fam[i];
            return 0;
        }
    }
    if (s->n_fam == s->cap_fam) {
        size_t nc = s->cap_fam ? 2 * s->cap_fam : 16;
        struct prom_family *nf = realloc(s->fam, nc * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        s->fam = nf;
        s->cap_fam = nc;
    }
    char cut[PROM_HELP_MAX + 1], esc[2 * PROM_HELP_MAX + 1];
    char gen[PROM_NAME_MAX + 32];
    if (!help || !*help) {
        snprintf(gen, sizeof(gen), "kvferry metric %s", name);
        help = gen;
    }
    cut_utf8(help, PROM_HELP_MAX, cut);
    if (prom_escape_help(cut, esc, sizeof(esc)) < 0)
        return -ENOSPC;
    struct prom_family *f = &s->fam[s->n_fam];
    memset(f, 0, sizeof(*f));
    f->name = strdup(name);
    f->help = strdup(esc);
    f->type = type;
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        return -ENOMEM;
    }
    s->n_fam++;
    *ret = f;
    return 0;
}

static int add(struct prom_set *s, const char *name, prom_type_t type, const char *help,
               const struct prom_label *labels, size_t n_labels, const char *suffix,
               const char *value)
{
    char nm[PROM_NAME_MAX + 1];
    int r;
    if (s->n_series >= s->max_series || n_labels > PROM_LABELS_MAX) {
        r = -E2BIG;
        goto err_drop;
    }
    r = prom_sanitize_name(name, nm, sizeof(nm));
    if (r < 0)
        goto err_drop;
    size_t nl = (size_t)r;
    bool total = nl > 6 && strcmp(nm + nl - 6, "_total") == 0;
    if (type == PROM_GAUGE && total) /* "_total" promises a counter: a gauge drops it */
        nm[nl - 6] = '\0';
    if (type == PROM_COUNTER && !total && strcmp(nm, "_total") != 0) {
        if (nl + 6 > PROM_NAME_MAX) {
            r = -ENAMETOOLONG;
            goto err_drop;
        }
        memcpy(nm + nl, "_total", 7);
    }
    char *lab = NULL;
    r = render_labels(labels, n_labels, &lab);
    if (r < 0)
        goto err_drop;
    struct prom_family *f;
    r = family_get(s, nm, type, help, &f);
    if (r < 0)
        goto err_free_labels;
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->s[i].labels, lab) == 0 && strcmp(f->s[i].suffix, suffix) == 0) {
            r = -EEXIST;
            goto err_free_labels;
        }
    }
    if (f->n == f->cap) {
        size_t nc = f->cap ? 2 * f->cap : 4;
        struct prom_sample *ns = realloc(f->s, nc * sizeof(*ns));
        if (!ns) {
            r = -ENOMEM;
            goto err_free_labels;
        }
        f->s = ns;
        f->cap = nc;
    }
    f->s[f->n].labels = lab;
    f->s[f->n].suffix = suffix;
    snprintf(f->s[f->n].value, sizeof(f->s[f->n].value), "%s", value);
    f->n++;
    s->n_series++;
    return 0;

err_free_labels:
    free(lab);
err_drop:
    s->dropped++;
    return r;
}

int prom_set_add_int(struct prom_set *s, const char *name, prom_type_t type, const char *help,
                     const struct prom_label *labels, size_t n_labels, int64_t value)
{
    char v[32];
    prom_format_int(value, v, sizeof(v));
    return add(s, name, type, help, labels, n_labels, "", v);
}

int prom_set_add_real(struct prom_set *s, const char *name, prom_type_t type, const char *help,
                      const struct prom_label *labels, size_t n_labels, double value)
{
    char v[32];
    prom_format_real(value, v, sizeof(v));
    return add(s, name, type, help, labels, n_labels, "", v);
}

int prom_set_add_histogram(struct prom_set *s, const char *name, const char *help,
                           const struct prom_label *labels, size_t n_labels, const double *le,
                           const uint64_t *counts, size_t n_le, double sum)
{
    if (n_labels >= PROM_LABELS_MAX || s->n_series + n_le + 3 > s->max_series) {
        s->dropped++;
        return -E2BIG;
    }
    for (size_t i = 1; i < n_le; i++) {
        if (!(le[i] > le[i - 1])) { /* the format needs strictly ascending bounds */
            s->dropped++;
            return -EINVAL;
        }
    }
    struct prom_label l[PROM_LABELS_MAX];
    memcpy(l, labels, n_labels * sizeof(l[0]));
    char bound[32], v[32];
    uint64_t cum = 0;
    int r = 0;
    for (size_t i = 0; i <= n_le && r == 0; i++) {
        cum += counts[i];
        if (i < n_le)
            prom_format_real(le[i], bound, sizeof(bound));
        else
            snprintf(bound, sizeof(bound), "+Inf");
        l[n_labels] = (struct prom_label){"le", bound};
        prom_format_int((int64_t)cum, v, sizeof(v));
        r = add(s, name, PROM_HISTOGRAM, help, l, n_labels + 1, "_bucket", v);
    }
    if (r == 0) {
        prom_format_real(sum, v, sizeof(v));
        r = add(s, name, PROM_HISTOGRAM, help, labels, n_labels, "_sum", v);
    }
    if (r == 0) {
        prom_format_int((int64_t)cum, v, sizeof(v));
        r = add(s, name, PROM_HISTOGRAM, help, labels, n_labels, "_count", v);
    }
    return r;
}

int prom_set_render(const struct prom_set *s, char **ret, size_t *len)
{
    size_t cap = 1;
    for (size_t i = 0; i < s->n_fam; i++) {
        const struct prom_family *f = &s->fam[i];
        cap += 2 * strlen(f->name) + strlen(f->help) + 32;
        for (size_t j = 0; j < f->n; j++)
            cap += strlen(f->name) + strlen(f->s[j].suffix) + strlen(f->s[j].labels) +
                   strlen(f->s[j].value) + 2;
    }
    char *out = malloc(cap);
    if (!out)
        return -ENOMEM;
    size_t o = 0;
    for (size_t i = 0; i < s->n_fam; i++) {
        const struct prom_family *f = &s->fam[i];
        o += (size_t)snprintf(out + o, cap - o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help,
                              f->name, prom_type_to_string(f->type));
        for (size_t j = 0; j < f->n; j++)
            o += (size_t)snprintf(out + o, cap - o, "%s%s%s %s\n", f->name, f->s[j].suffix,
                                  f->s[j].labels, f->s[j].value);
    }
    out[o] = '\0';
    *ret = out;
    if (len)
        *len = o;
    return 0;
}
