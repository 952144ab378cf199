/* promcheck.c: the independent Prometheus text-format validator (declared, with what each does, in
 * tests/promcheck.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "promcheck.h"

#define PC_MAX_FAMILIES 4096
#define PC_LINE_MAX 8192

struct pc_family {
    char name[256];
    char type[16];
    bool help, typed, has_samples, closed;
};

struct pc_state {
    struct pc_family fam[PC_MAX_FAMILIES];
    size_t n;
    long current;  /* family of the previous sample line, -1 none */
    char **series; /* "name{sorted labels}" seen */
    size_t n_series, cap_series;
};

static int pc_fail(char *err, size_t errlen, int lineno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int pc_fail(char *err, size_t errlen, int lineno, const char *fmt, ...)
{
    int o = snprintf(err, errlen, "line %d: ", lineno);
    va_list ap;
    va_start(ap, fmt);
    if (o > 0 && (size_t)o < errlen)
        vsnprintf(err + o, errlen - (size_t)o, fmt, ap);
    va_end(ap);
    return lineno > 0 ? lineno : 1;
}

static bool pc_name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static bool pc_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

/* Reads a metric name at *p; returns its length (0: none). */
static size_t pc_name(const char *p)
{
    if (!pc_name_start(*p))
        return 0;
    size_t n = 1;
    while (pc_name_char(p[n]))
        n++;
    return n;
}

static size_t pc_label_name(const char *p)
{
    if (!(isalpha((unsigned char)*p) || *p == '_'))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)p[n]) || p[n] == '_')
        n++;
    return n;
}

static bool pc_float(const char *s)
{
    if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf") || !strcmp(s, "Inf"))
        return true;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) /* Go's ParseFloat: no hex floats, no spaces here */
        if (!(isdigit((unsigned char)*p) || strchr("+-.eE", *p)))
            return false;
    char *end;
    strtod(s, &end);
    return *end == '\0';
}

static bool pc_int(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static long pc_find(struct pc_state *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->fam[i].name, name))
            return (long)i;
    return -1;
}

static long pc_add(struct pc_state *st, const char *name)
{
    if (st->n == PC_MAX_FAMILIES || strlen(name) >= sizeof(st->fam[0].name))
        return -1;
    struct pc_family *f = &st->fam[st->n];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    return (long)st->n++;
}

/* The family a sample name belongs to: itself, or a histogram/summary base. */
static long pc_family_of(struct pc_state *st, const char *name)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(name), m = strlen(suffixes[i]);
        if (n > m && !strcmp(name + n - m, suffixes[i])) {
            char base[256];
            snprintf(base, sizeof(base), "%.*s", (int)(n - m), name);
            long f = pc_find(st, base);
            if (f >= 0 &&
                (!strcmp(st->fam[f].type, "histogram") || !strcmp(st->fam[f].type, "summary")))
                return f;
        }
    }
    return pc_find(st, name);
}

static int pc_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void pc_free(struct pc_state *st)
{
    for (size_t i = 0; i < st->n_series; i++)
        free(st->series[i]);
    free(st->series);
}

/* One sample line. */
static int pc_sample(struct pc_state *st, const char *line, int ln, char *err, size_t errlen)
{
    const char *p = line;
    size_t nl = pc_name(p);
    if (!nl)
        return pc_fail(err, errlen, ln, "bad metric name in '%.80s'", line);
    char name[256];
    if (nl >= sizeof(name))
        return pc_fail(err, errlen, ln, "metric name too long");
    memcpy(name, p, nl);
    name[nl] = '\0';
    p += nl;
    char *labels[64];
    size_t n_labels = 0;
    int rc = 0;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            size_t ll = pc_label_name(p);
            if (!ll) {
                rc = pc_fail(err, errlen, ln, "bad label name at '%.40s'", p);
                goto out;
            }
            if (ll >= 2 && p[0] == '_' && p[1] == '_') {
                rc = pc_fail(err, errlen, ln, "reserved label name at '%.40s'", p);
                goto out;
            }
            const char *lname = p;
            p += ll;
            if (p[0] != '=' || p[1] != '"') {
                rc = pc_fail(err, errlen, ln, "expected =\" after label name at '%.40s'", p);
                goto out;
            }
            p += 2;
            const char *vstart = p;
            while (*p && *p != '"') {
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
                        rc = pc_fail(err, errlen, ln, "bad escape in label value at '%.40s'", p);
                        goto out;
                    }
                    p++;
                }
                p++;
            }
            if (*p != '"') {
                rc = pc_fail(err, errlen, ln, "unterminated label value");
                goto out;
            }
            if (n_labels == 64) {
                rc = pc_fail(err, errlen, ln, "too many labels");
                goto out;
            }
            size_t sz = ll + 2 + (size_t)(p - vstart);
            labels[n_labels] = malloc(sz + 1);
            snprintf(labels[n_labels], sz + 1, "%.*s=%.*s", (int)ll, lname, (int)(p - vstart),
                     vstart);
            for (size_t i = 0; i < n_labels; i++) {
                size_t a = strcspn(labels[i], "=");
                if (a == ll && !strncmp(labels[i], lname, ll)) {
                    n_labels++;
                    rc = pc_fail(err, errlen, ln, "label %.*s twice", (int)ll, lname);
                    goto out;
                }
            }
            n_labels++;
            p++;
            if (*p == ',')
                p++;
            else if (*p != '}') {
                rc = pc_fail(err, errlen, ln, "expected , or } at '%.40s'", p);
                goto out;
            }
        }
        p++;
    }
    if (*p != ' ' && *p != '\t') {
        rc = pc_fail(err, errlen, ln, "expected blank before the value in '%.80s'", line);
        goto out;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    char val[64], ts[64];
    size_t vl = strcspn(p, " \t");
    if (!vl || vl >= sizeof(val)) {
        rc = pc_fail(err, errlen, ln, "missing or long value");
        goto out;
    }
    snprintf(val, sizeof(val), "%.*s", (int)vl, p);
    if (!pc_float(val)) {
        rc = pc_fail(err, errlen, ln, "value '%s' is not a float", val);
        goto out;
    }
    p += vl;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p) {
        size_t tl = strcspn(p, " \t");
        snprintf(ts, sizeof(ts), "%.*s", (int)(tl < 63 ? tl : 63), p);
        if (tl >= sizeof(ts) || !pc_int(ts)) {
            rc = pc_fail(err, errlen, ln, "timestamp '%.40s' is not an integer", p);
            goto out;
        }
        p += tl;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p) {
            rc = pc_fail(err, errlen, ln, "trailing text '%.40s'", p);
            goto out;
        }
    }
    long f = pc_family_of(st, name);
    if (f < 0) {
        f = pc_add(st, name);
        if (f < 0) {
            rc = pc_fail(err, errlen, ln, "too many families");
            goto out;
        }
    }
    if (st->fam[f].closed || (st->fam[f].has_samples && st->current != f)) {
        rc = pc_fail(err, errlen, ln, "samples of %s are not together", st->fam[f].name);
        goto out;
    }
    if (st->current >= 0 && st->current != f)
        st->fam[st->current].closed = true;
    st->current = f;
    st->fam[f].has_samples = true;
    /* the series key: name + sorted labels */
    qsort(labels, n_labels, sizeof(labels[0]), pc_cmp_str);
    size_t kl = strlen(name) + 3;
    for (size_t i = 0; i < n_labels; i++)
        kl += strlen(labels[i]) + 1;
    char *key = malloc(kl);
    size_t o = (size_t)snprintf(key, kl, "%s{", name);
    for (size_t i = 0; i < n_labels; i++)
        o += (size_t)snprintf(key + o, kl - o, "%s,", labels[i]);
    snprintf(key + o, kl - o, "}");
    for (size_t i = 0; i < st->n_series; i++) {
        if (!strcmp(st->series[i], key)) {
            free(key);
            rc = pc_fail(err, errlen, ln, "series %s twice", st->series[i]);
            goto out;
        }
    }
    if (st->n_series == st->cap_series) {
        st->cap_series = st->cap_series ? 2 * st->cap_series : 64;
        st->series = realloc(st->series, st->cap_series * sizeof(char *));
    }
    st->series[st->n_series++] = key;
out:
    for (size_t i = 0; i < n_labels; i++)
        free(labels[i]);
    return rc;
}

/* A "# HELP" or "# TYPE" line (other comments are ignored). */
static int pc_meta(struct pc_state *st, const char *line, int ln, bool *is_help, char *err,
                   size_t errlen)
{
    bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
    *is_help = help;
    if (!help && !type)
        return 0;
    const char *p = line + 7;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t nl = pc_name(p);
    if (!nl || nl >= 256 || (p[nl] && p[nl] != ' ' && p[nl] != '\t'))
        return pc_fail(err, errlen, ln, "bad metric name in '%.80s'", line);
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)nl, p);
    p += nl;
    long f = pc_find(st, name);
    if (f < 0 && (f = pc_add(st, name)) < 0)
        return pc_fail(err, errlen, ln, "too many families");
    struct pc_family *fam = &st->fam[f];
    if (fam->closed || (fam->has_samples && st->current != f))
        return pc_fail(err, errlen, ln, "%s of %s after its samples ended", help ? "HELP" : "TYPE",
                       name);
    if (help) {
        if (fam->help)
            return pc_fail(err, errlen, ln, "second HELP for %s", name);
        fam->help = true;
        if (*p == ' ' || *p == '\t')
            p++;
        for (; *p; p++) {
            if (*p == '\\') {
                if (p[1] != '\\' && p[1] != 'n')
                    return pc_fail(err, errlen, ln, "bad escape in HELP of %s", name);
                p++;
            }
        }
        return 0;
    }
    if (fam->typed)
        return pc_fail(err, errlen, ln, "second TYPE for %s", name);
    if (fam->has_samples)
        return pc_fail(err, errlen, ln, "TYPE for %s after its first sample", name);
    while (*p == ' ' || *p == '\t')
        p++;
    static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    for (size_t i = 0; i < 5; i++) {
        if (!strcmp(p, types[i])) {
            fam->typed = true;
            snprintf(fam->type, sizeof(fam->type), "%s", types[i]);
            return 0;
        }
    }
    return pc_fail(err, errlen, ln, "bad TYPE '%.40s' for %s", p, name);
}

int pc_validate(const char *text, bool strict, char *err, size_t errlen)
{
    struct pc_state *st = calloc(1, sizeof(*st));
    st->current = -1;
    int rc = 0, ln = 0;
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] != '\n') {
        free(st);
        return pc_fail(err, errlen, 0, "text does not end in a newline");
    }
    const char *p = text;
    while (*p && !rc) {
        ln++;
        size_t l = strcspn(p, "\n");
        if (l >= PC_LINE_MAX) {
            rc = pc_fail(err, errlen, ln, "line too long");
            break;
        }
        char line[PC_LINE_MAX];
        memcpy(line, p, l);
        line[l] = '\0';
        p += l + (p[l] == '\n');
        const char *q = line;
        while (*q == ' ' || *q == '\t')
            q++;
        if (!*q)
            continue;
        if (*q == '#') {
            bool is_help;
            rc = pc_meta(st, q, ln, &is_help, err, errlen);
            continue;
        }
        rc = pc_sample(st, q, ln, err, errlen);
    }
    for (size_t i = 0; !rc && strict && i < st->n; i++)
        if (!st->fam[i].help || !st->fam[i].typed)
            rc = pc_fail(err, errlen, ln, "family %s lacks %s", st->fam[i].name,
                         st->fam[i].help ? "TYPE" : "HELP");
    pc_free(st);
    free(st);
    return rc;
}
