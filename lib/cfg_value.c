/* cfg_value.c: one config field of any cfg_type_t: parse from YAML scalar text (with type, bounds
 * and enum checks), print back the way the config file spells it, compare, copy, free.
 * Storage by type: STRING/PATH char * (owned, never NULL once set), BOOL bool, INT and ENUM
 * int64_t (an enum stores the index of its name), SIZE uint64_t bytes, DURATION uint64_t ms,
 * LIST struct cfg_list (owned items).
 * Integers are decimal, or YAML 1.1 octal ("0660", "0o660") or hex ("0x1b6"); a key whose default
 * is written in octal prints in octal. Booleans: true/false, yes/no, on/off (any case).
 * Strings and list items may not hold control characters; their lengths are bounded. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cfg_priv.h"

#define FIELD(base, k, type) ((type *)(void *)((char *)(base) + (k)->offset))
#define CFIELD(base, k, type) ((const type *)(const void *)((const char *)(base) + (k)->offset))

/* Quotes `s` for a message: at most 40 characters, non-printables as '?'. */
static const char *shown(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] && i < 40 && i + 4 < len; i++)
        buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (s[i] && i + 4 < len)
        buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
    buf[i] = '\0';
    return buf;
}

/* Digits only (around whitespace allowed): a duration whose unit was left out. */
static bool bare_number(const char *s)
{
    size_t n = strspn(s, " \t"), d = strspn(s + n, "0123456789");
    return d > 0 && s[n + d + strspn(s + n + d, " \t")] == '\0';
}

static bool octal_default(const struct cfg_key *k)
{
    return k->def[0] == '0' && isdigit((unsigned char)k->def[1]);
}

static int parse_int(const char *s, int64_t *ret)
{
    while (isspace((unsigned char)*s))
        s++;
    bool neg = *s == '-';
    if (neg)
        s++;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        base = 16, s += 2;
    else if (s[0] == '0' && s[1] == 'o')
        base = 8, s += 2;
    else if (s[0] == '0' && s[1])
        base = 8, s += 1;
    if (!isxdigit((unsigned char)*s))
        return -EINVAL; /* also refuses a second sign */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno == ERANGE || v > (unsigned long long)INT64_MAX + neg)
        return -ERANGE;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -EINVAL;
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int format_num(const struct cfg_key *k, int64_t v, char *buf, size_t len)
{
    int n;
    switch (k->type) {
    case CFG_SIZE:
        return cfg_format_size((uint64_t)v, buf, len);
    case CFG_DURATION:
        return cfg_format_duration_ms((uint64_t)v, buf, len);
    default:
        if (octal_default(k) && v >= 0)
            n = snprintf(buf, len, "0%llo", (unsigned long long)v);
        else
            n = snprintf(buf, len, "%lld", (long long)v);
        return (n < 0 || (size_t)n >= len) ? -ENOSPC : 0;
    }
}

/* overflow: the value did not fit in 64 bits (above any bound). The value is shown as `text`
 * when given (as written), else formatted in the key's unit. */
static int check_range(const struct cfg_key *k, int64_t v, bool overflow, const char *text,
                       char *msg, size_t len)
{
    char a[48], b[32];
    if (!overflow && v >= k->min && v <= k->max)
        return 0;
    bool below = !overflow && v < k->min;
    if (text)
        shown(text, a, sizeof(a));
    else
        format_num(k, v, a, sizeof(a));
    format_num(k, below ? k->min : k->max, b, sizeof(b));
    snprintf(msg, len, "%s: %s is %s the %s %s", k->key, a, below ? "below" : "above",
             below ? "minimum" : "maximum", b);
    return -EINVAL;
}

static int check_text(const struct cfg_key *k, const char *s, char *msg, size_t len)
{
    size_t max = k->max > 0 ? (size_t)k->max : CFG_STRING_MAX, n = strlen(s);
    if (n > max) {
        snprintf(msg, len, "%s: %zu characters is above the maximum %zu", k->key, n, max);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (iscntrl((unsigned char)s[i])) {
            snprintf(msg, len, "%s: control character at position %zu", k->key, i + 1);
            return -EINVAL;
        }
    return 0;
}

static int parse_enum(const struct cfg_key *k, const char *text, int64_t *ret, char *msg,
                      size_t len)
{
    for (int64_t i = 0; k->enum_names[i]; i++)
        if (strcasecmp(k->enum_names[i], text) == 0) {
            *ret = i;
            return 0;
        }
    char got[48];
    int off = snprintf(msg, len, "%s: '%s' is not one of ", k->key, shown(text, got, sizeof(got)));
    for (size_t i = 0; k->enum_names[i] && off >= 0 && (size_t)off < len; i++)
        off += snprintf(msg + off, len - (size_t)off, "%s%s", i ? ", " : "", k->enum_names[i]);
    return -EINVAL;
}

int cfg_value_parse(const struct cfg_key *k, const char *text, void *base, char *msg, size_t len)
{
    char got[48];
    const char *want = NULL;
    int64_t iv = 0;
    uint64_t uv = 0;
    int rc = 0;

    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH: {
        if (!text)
            text = "";
        if ((rc = check_text(k, text, msg, len)) < 0)
            return rc;
        char *dup = strdup(text);
        if (!dup)
            return -ENOMEM;
        free(*FIELD(base, k, char *));
        *FIELD(base, k, char *) = dup;
        return 0;
    }
    case CFG_BOOL:
        want = "true or false";
        if (!text)
            break;
        if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on"))
            *FIELD(base, k, bool) = true;
        else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcasecmp(text, "off"))
            *FIELD(base, k, bool) = false;
        else
            break;
        return 0;
    case CFG_INT:
        want = octal_default(k) ? "an octal number like 0660" : "an integer";
        if (!text || (rc = parse_int(text, &iv)) == -EINVAL)
            break;
        if ((rc = check_range(k, iv, rc == -ERANGE, text, msg, len)) < 0)
            return rc;
        *FIELD(base, k, int64_t) = iv;
        return 0;
    case CFG_SIZE:
    case CFG_DURATION:
        want = k->type == CFG_SIZE ? "a size like 512MiB" : "a duration like 30s or 200ms";
        if (!text)
            break;
        rc = k->type == CFG_SIZE ? cfg_parse_size(text, &uv) : cfg_parse_duration_ms(text, &uv);
        if (rc == -EINVAL && k->type == CFG_DURATION && bare_number(text)) {
            const char *d = text + strspn(text, " \t");
            int nd = (int)strspn(d, "0123456789");
            snprintf(msg, len, "%s: '%.*s' has no unit: write %.*sms or %.*ss", k->key, nd, d, nd,
                     d, nd, d);
            return -EINVAL;
        }
        if (rc == -EINVAL)
            break;
        bool overflow = rc == -ERANGE || uv > INT64_MAX;
        if ((rc = check_range(k, (int64_t)uv, overflow, overflow ? text : NULL, msg, len)) < 0)
            return rc;
        *FIELD(base, k, uint64_t) = uv;
        return 0;
    case CFG_ENUM:
        if (!text)
            text = "";
        if ((rc = parse_enum(k, text, &iv, msg, len)) < 0)
            return rc;
        *FIELD(base, k, int64_t) = iv;
        return 0;
    case CFG_LIST:
        snprintf(msg, len, "%s: expected a list like [1000, alice]", k->key);
        return -EINVAL;
    }
    if (!text)
        snprintf(msg, len, "%s: expected %s, got nothing", k->key, want);
    else
        snprintf(msg, len, "%s: expected %s, got '%s'", k->key, want,
                 shown(text, got, sizeof(got)));
    return -EINVAL;
}

void cfg_list_clear(struct cfg_list *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int cfg_list_append(const struct cfg_key *k, const char *item, void *base, char *msg, size_t len)
{
    struct cfg_list *l = FIELD(base, k, struct cfg_list);
    char got[48];
    if (l->n >= CFG_LIST_MAX) {
        snprintf(msg, len, "%s: more than %d entries", k->key, CFG_LIST_MAX);
        return -EINVAL;
    }
    size_t n = item ? strlen(item) : 0;
    bool ok = n > 0 && n <= CFG_ITEM_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)item[i]) || strchr("._-", item[i]) ||
             (item[i] == '$' && i == n - 1);
    if (!ok) {
        snprintf(msg, len, "%s: expected a user or group name or number, got '%s'", k->key,
                 shown(item ? item : "", got, sizeof(got)));
        return -EINVAL;
    }
    char *dup = strdup(item);
    char **items = dup ? realloc(l->items, (l->n + 1) * sizeof(*items)) : NULL;
    if (!items) {
        free(dup);
        return -ENOMEM;
    }
    items[l->n++] = dup;
    l->items = items;
    return 0;
}

int cfg_value_default(const struct cfg_key *k, void *base)
{
    char msg[CFG_ERR_MAX];
    int rc;
    if (k->type == CFG_LIST) {
        assert(strcmp(k->def, "[]") == 0); /* only empty lists by default */
        cfg_list_clear(FIELD(base, k, struct cfg_list));
        return 0;
    }
    if ((k->type == CFG_STRING || k->type == CFG_PATH) && k->def[0] == '"') {
        char buf[CFG_STRING_MAX + 1];
        size_t n = strlen(k->def);
        assert(n >= 2 && k->def[n - 1] == '"' && n - 2 <= CFG_STRING_MAX);
        memcpy(buf, k->def + 1, n - 2);
        buf[n - 2] = '\0';
        rc = cfg_value_parse(k, buf, base, msg, sizeof(msg));
    } else {
        rc = cfg_value_parse(k, k->def, base, msg, sizeof(msg));
    }
    assert(rc != -EINVAL); /* a default that does not parse is a bug in the table */
    return rc;
}

/* A double-quoted YAML string. */
static int quote(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    if (len < 3)
        return -ENOSPC;
    buf[o++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof(esc), "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", c);
        else
            esc[0] = (char)c, esc[1] = '\0';
        size_t el = strlen(esc);
        if (o + el + 2 > len)
            return -ENOSPC;
        memcpy(buf + o, esc, el);
        o += el;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return 0;
}

int cfg_value_format(const struct cfg_key *k, const void *base, char *buf, size_t len)
{
    int n;
    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH:
        return quote(*CFIELD(base, k, char *) ? *CFIELD(base, k, char *) : "", buf, len);
    case CFG_BOOL:
        n = snprintf(buf, len, "%s", *CFIELD(base, k, bool) ? "true" : "false");
        return (n < 0 || (size_t)n >= len) ? -ENOSPC : 0;
    case CFG_INT:
    case CFG_SIZE:
    case CFG_DURATION:
        return format_num(k, *CFIELD(base, k, int64_t), buf, len);
    case CFG_ENUM: {
        int64_t v = *CFIELD(base, k, int64_t), i = 0;
        while (k->enum_names[i] && i < v)
            i++;
        n = snprintf(buf, len, "%s", k->enum_names[i] ? k->enum_names[i] : "?");
        return (n < 0 || (size_t)n >= len) ? -ENOSPC : 0;
    }
    case CFG_LIST: {
        const struct cfg_list *l = CFIELD(base, k, struct cfg_list);
        size_t o = 0;
        if (len < 3)
            return -ENOSPC;
        buf[o++] = '[';
        for (uint32_t i = 0; i < l->n; i++) {
            if (i) {
                if (o + 2 >= len)
                    return -ENOSPC;
                buf[o++] = ',', buf[o++] = ' ';
            }
            if (quote(l->items[i], buf + o, len - o) < 0)
                return -ENOSPC;
            o += strlen(buf + o);
        }
        if (o + 2 > len)
            return -ENOSPC;
        buf[o++] = ']';
        buf[o] = '\0';
        return 0;
    }
    }
    return -EINVAL;
}

bool cfg_value_equal(const struct cfg_key *k, const void *a, const void *b)
{
    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH: {
        const char *x = *CFIELD(a, k, char *), *y = *CFIELD(b, k, char *);
        return strcmp(x ? x : "", y ? y : "") == 0;
    }
    case CFG_BOOL:
        return *CFIELD(a, k, bool) == *CFIELD(b, k, bool);
    case CFG_INT:
    case CFG_ENUM:
    case CFG_SIZE:
    case CFG_DURATION:
        return *CFIELD(a, k, int64_t) == *CFIELD(b, k, int64_t);
    case CFG_LIST: {
        const struct cfg_list *x = CFIELD(a, k, struct cfg_list),
                              *y = CFIELD(b, k, struct cfg_list);
        if (x->n != y->n)
            return false;
        for (uint32_t i = 0; i < x->n; i++)
            if (strcmp(x->items[i], y->items[i]) != 0)
                return false;
        return true;
    }
    }
    return false;
}

int cfg_value_copy(const struct cfg_key *k, const void *src, void *dst)
{
    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH: {
        const char *s = *CFIELD(src, k, char *);
        char *dup = s ? strdup(s) : NULL;
        if (s && !dup)
            return -ENOMEM;
        *FIELD(dst, k, char *) = dup;
        return 0;
    }
    case CFG_BOOL:
        *FIELD(dst, k, bool) = *CFIELD(src, k, bool);
        return 0;
    case CFG_INT:
    case CFG_ENUM:
    case CFG_SIZE:
    case CFG_DURATION:
        *FIELD(dst, k, int64_t) = *CFIELD(src, k, int64_t);
        return 0;
    case CFG_LIST: {
        const struct cfg_list *s = CFIELD(src, k, struct cfg_list);
        struct cfg_list *d = FIELD(dst, k, struct cfg_list);
        d->n = 0;
        d->items = s->n ? calloc(s->n, sizeof(char *)) : NULL;
        if (s->n && !d->items)
            return -ENOMEM;
        for (uint32_t i = 0; i < s->n; i++, d->n++)
            if (!(d->items[i] = strdup(s->items[i])))
                return -ENOMEM; /* d holds what was copied; the caller frees it */
        return 0;
    }
    }
    return -EINVAL;
}

void cfg_value_free(const struct cfg_key *k, void *base)
{
    if (k->type == CFG_STRING || k->type == CFG_PATH) {
        free(*FIELD(base, k, char *));
        *FIELD(base, k, char *) = NULL;
    } else if (k->type == CFG_LIST) {
        cfg_list_clear(FIELD(base, k, struct cfg_list));
    }
}
