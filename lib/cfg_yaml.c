/* cfg_yaml.c: loads a YAML config file onto the defaults (cfg_load_file, cfg_load_string).
 * Walks libyaml's parser events, so every error carries the position of the node at fault:
 * "file:line:column: message", 1-based. The file is one mapping of sections, each a mapping of
 * keys ("arena:\n  size: 1GiB"); a dotted key at the top level ("arena.size: 1GiB") also works.
 * Lists are YAML sequences of scalars. An empty file (or an empty section) means defaults.
 * Refused: unknown keys (with the closest known key suggested), duplicate keys, wrong shapes,
 * aliases, more than one document, files over CFG_FILE_MAX, and whatever cfg_value_parse or the
 * cross-key rules refuse. Every mistake is reported, one line each in file order (up to
 * CFG_ERRORS_MAX), so that one edit fixes them all; only a YAML syntax error (after which the
 * file cannot be read on) stops the walk early. On any error the caller's config is untouched. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "cfg_priv.h"

#define SECTIONS_MAX 32

struct yctx {
    yaml_parser_t parser;
    const char *name; /* borrowed: the file name for messages */
    char *err;        /* borrowed: caller's buffer; one line per error */
    size_t errlen;
    size_t err_used; /* bytes of err written */
    unsigned n_errors;
    const char *text; /* borrowed: the file's bytes, for positions of reader errors */
    size_t len;
    struct kvf_config *cfg; /* borrowed: being filled */
    yaml_mark_t *key_mark;  /* owned: where each table key was set, line 0 = not set */
    bool *key_bad;          /* owned: per table key, its value was refused */
    struct {
        char name[128]; /* as long as any key read_key accepts */
        yaml_mark_t mark;
    } sections[SECTIONS_MAX];
    size_t n_sections;
};

/* Appends "file:line:column: message" as one more line of y->err. Returns 0 while more errors
 * may be collected, -EINVAL once CFG_ERRORS_MAX are (the walk stops there). */
__attribute__((format(printf, 3, 0))) static int vreport(struct yctx *y, yaml_mark_t m,
                                                         const char *fmt, va_list ap)
{
    if (y->n_errors++ && y->err_used + 1 < y->errlen)
        y->err[y->err_used++] = '\n', y->err[y->err_used] = '\0';
    if (y->err_used < y->errlen) {
        char *at = y->err + y->err_used;
        size_t room = y->errlen - y->err_used;
        int off = snprintf(at, room, "%s:%zu:%zu: ", y->name, m.line + 1, m.column + 1);
        if (off >= 0 && (size_t)off < room)
            vsnprintf(at + off, room - (size_t)off, fmt, ap);
        y->err_used += strlen(at);
    }
    if (y->n_errors < CFG_ERRORS_MAX)
        return 0;
    if (y->err_used + 1 < y->errlen)
        snprintf(y->err + y->err_used, y->errlen - y->err_used, "\n%s: stopped after %d errors",
                 y->name, CFG_ERRORS_MAX);
    return -EINVAL;
}

/* A mistake the walk can step over (a bad key or value): reported, and the walk goes on. */
__attribute__((format(printf, 3, 4))) static int report(struct yctx *y, yaml_mark_t m,
                                                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vreport(y, m, fmt, ap);
    va_end(ap);
    return rc;
}

/* A mistake after which the file cannot be read on (YAML syntax): reported, the walk stops. */
__attribute__((format(printf, 3, 4))) static int fail(struct yctx *y, yaml_mark_t m,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vreport(y, m, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int next(struct yctx *y, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&y->parser, ev)) {
        yaml_parser_t *p = &y->parser;
        if (p->error == YAML_MEMORY_ERROR)
            return -ENOMEM;
        yaml_mark_t m = p->problem_mark;
        if (p->error == YAML_READER_ERROR) { /* bad encoding: only the byte offset is known */
            m.line = m.column = 0;
            for (size_t i = 0; i < p->problem_offset && i < y->len; i++, m.column++)
                if (y->text[i] == '\n')
                    m.line++, m.column = (size_t)-1;
        }
        if (p->context)
            return fail(y, m, "YAML syntax error: %s (%s)", p->problem ? p->problem : "error",
                        p->context);
        return fail(y, m, "YAML syntax error: %s", p->problem ? p->problem : "error");
    }
    if (ev->type == YAML_ALIAS_EVENT) {
        yaml_mark_t m = ev->start_mark;
        yaml_event_delete(ev);
        return fail(y, m, "aliases (*name) are not supported in the config");
    }
    return 0;
}

static bool opens(yaml_event_type_t t)
{
    return t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT;
}

/* Steps over the rest of a node whose first event (of type `first`) was read. */
static int skip_rest(struct yctx *y, yaml_event_type_t first)
{
    for (int depth = opens(first); depth > 0;) {
        yaml_event_t ev;
        int rc = next(y, &ev);
        if (rc < 0)
            return rc;
        depth += opens(ev.type)                                                            ? 1
                 : ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT ? -1
                                                                                           : 0;
        yaml_event_delete(&ev);
    }
    return 0;
}

/* Steps over a whole node (the value of a refused key). */
static int skip_node(struct yctx *y)
{
    yaml_event_t ev;
    int rc = next(y, &ev);
    if (rc < 0)
        return rc;
    yaml_event_type_t t = ev.type;
    yaml_event_delete(&ev);
    return skip_rest(y, t);
}

static const char *shape(const yaml_event_t *ev)
{
    return ev->type == YAML_MAPPING_START_EVENT    ? "a mapping"
           : ev->type == YAML_SEQUENCE_START_EVENT ? "a list"
                                                   : "a scalar";
}

static bool plain_null(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
            !strcmp(v, "NULL"));
}

/* The value of a list key: a sequence of scalars (or null: empty). Each bad entry is reported. */
static int parse_list(struct yctx *y, const struct cfg_key *k, yaml_event_t *start, bool *bad)
{
    char msg[CFG_ERR_MAX];
    struct cfg_list *l = (struct cfg_list *)(void *)((char *)y->cfg + k->offset);
    cfg_list_clear(l);
    if (plain_null(start))
        return 0;
    if (start->type != YAML_SEQUENCE_START_EVENT) {
        *bad = true;
        int rc = report(y, start->start_mark, "%s: expected a list like [1000, alice], got %s",
                        k->key, shape(start));
        return rc < 0 ? rc : skip_rest(y, start->type);
    }
    for (;;) {
        yaml_event_t ev;
        int rc = next(y, &ev);
        if (rc < 0)
            return rc;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            *bad = true;
            if ((rc = report(y, ev.start_mark, "%s: list entries must be scalars, got %s", k->key,
                             shape(&ev))) == 0)
                rc = skip_rest(y, ev.type);
        } else if (strlen((const char *)ev.data.scalar.value) != ev.data.scalar.length) {
            *bad = true;
            rc = report(y, ev.start_mark, "%s: a NUL character is not allowed", k->key);
        } else if ((rc = cfg_list_append(k, (const char *)ev.data.scalar.value, y->cfg, msg,
                                         sizeof(msg))) == -EINVAL) {
            *bad = true;
            rc = report(y, ev.start_mark, "%s", msg);
        }
        yaml_event_delete(&ev);
        if (rc < 0)
            return rc;
    }
}

/* A key the table lacks, at `m`: reported with the closest known name; its value is skipped. */
static int unknown_key(struct yctx *y, const char *key, yaml_mark_t m)
{
    const char *gone = cfg_key_removed(key);
    const char *s = gone ? NULL : cfg_key_suggest(key);
    int rc = gone ? report(y, m, "'%s' %s", key, gone)
           : s  ? report(y, m, "unknown key '%s' (did you mean '%s'?)", key, s)
               : report(y, m, "unknown key '%s'", key);
    return rc < 0 ? rc : skip_node(y);
}

/* One key (full dotted name, at key_mark) and its value, whose first event is read here. */
static int parse_key(struct yctx *y, const char *key, yaml_mark_t key_mark)
{
    const struct cfg_key *k = cfg_key_find(key);
    if (!k)
        return unknown_key(y, key, key_mark);
    size_t idx = (size_t)(k - cfg_table);
    int rc;
    if (y->key_mark[idx].line || y->key_mark[idx].column) {
        rc = report(y, key_mark, "duplicate key '%s' (first set at line %zu)", key,
                    y->key_mark[idx].line);
        return rc < 0 ? rc : skip_node(y);
    }
    y->key_mark[idx] = key_mark;
    y->key_mark[idx].line++; /* stored 1-based so that 0 means unset */

    yaml_event_t ev;
    char msg[CFG_ERR_MAX];
    bool *bad = &y->key_bad[idx];
    if ((rc = next(y, &ev)) < 0)
        return rc;
    yaml_event_type_t t = ev.type;
    if (ev.type == YAML_SCALAR_EVENT &&
        strlen((const char *)ev.data.scalar.value) != ev.data.scalar.length)
        *bad = true, rc = report(y, ev.start_mark, "%s: a NUL character is not allowed", key);
    else if (k->type == CFG_LIST)
        rc = parse_list(y, k, &ev, bad);
    else if (ev.type != YAML_SCALAR_EVENT) {
        *bad = true;
        if ((rc = report(y, ev.start_mark, "%s: expected a single value, got %s", key,
                         shape(&ev))) == 0)
            rc = skip_rest(y, t);
    } else if ((rc = cfg_value_parse(k, plain_null(&ev) ? NULL : (const char *)ev.data.scalar.value,
                                     y->cfg, msg, sizeof(msg))) == -EINVAL)
        *bad = true, rc = report(y, ev.start_mark, "%s", msg);
    yaml_event_delete(&ev);
    return rc;
}

/* Reads a mapping key: a scalar (into buf, returns 0) or the end of the mapping (returns 1). A
 * key that is not a short scalar is reported and its value skipped (returns 2). */
static int read_key(struct yctx *y, char *buf, size_t len, yaml_mark_t *mark)
{
    yaml_event_t ev;
    int rc = next(y, &ev);
    if (rc < 0)
        return rc;
    *mark = ev.start_mark;
    yaml_event_type_t t = ev.type;
    bool refused = true;
    if (t == YAML_MAPPING_END_EVENT)
        rc = 1, refused = false;
    else if (t != YAML_SCALAR_EVENT)
        rc = report(y, ev.start_mark, "expected a key name, got %s", shape(&ev));
    else if (ev.data.scalar.length >= len ||
             strlen((const char *)ev.data.scalar.value) != ev.data.scalar.length)
        rc = report(y, ev.start_mark, "unknown key '%.40s...'", (const char *)ev.data.scalar.value);
    else {
        memcpy(buf, ev.data.scalar.value, ev.data.scalar.length + 1);
        refused = false;
    }
    yaml_event_delete(&ev);
    if (rc == 0 && refused && (rc = skip_rest(y, t)) == 0 && (rc = skip_node(y)) == 0)
        rc = 2;
    return rc;
}

static int parse_section(struct yctx *y, const char *section, yaml_mark_t mark);

/* The keys of one mapping (a section's, or the top level's when section is NULL). */
static int parse_keys(struct yctx *y, const char *section)
{
    for (;;) {
        char key[128], full[2 * 128 + 2];
        yaml_mark_t km;
        int rc = read_key(y, key, sizeof(key), &km);
        if (rc == 2)
            continue;
        if (rc != 0)
            return rc < 0 ? rc : 0;
        if (section) {
            snprintf(full, sizeof(full), "%s.%s", section, key);
            rc = parse_key(y, full, km);
        } else if (strchr(key, '.'))
            rc = parse_key(y, key, km);
        else if (cfg_section_exists(key, strlen(key)))
            rc = parse_section(y, key, km);
        else
            rc = unknown_key(y, key, km);
        if (rc < 0)
            return rc;
    }
}

static int parse_section(struct yctx *y, const char *section, yaml_mark_t mark)
{
    int rc;
    for (size_t i = 0; i < y->n_sections; i++)
        if (strcmp(y->sections[i].name, section) == 0) {
            rc = report(y, mark, "duplicate key '%s' (first set at line %zu)", section,
                        y->sections[i].mark.line + 1);
            return rc < 0 ? rc : skip_node(y);
        }
    if (y->n_sections < SECTIONS_MAX) { /* sections are few: the table has fewer */
        snprintf(y->sections[y->n_sections].name, sizeof(y->sections[0].name), "%s", section);
        y->sections[y->n_sections++].mark = mark;
    }

    yaml_event_t ev;
    if ((rc = next(y, &ev)) < 0)
        return rc;
    yaml_event_type_t t = ev.type;
    bool empty = plain_null(&ev), mapping = t == YAML_MAPPING_START_EVENT;
    if (!empty && !mapping &&
        (rc = report(y, ev.start_mark, "%s: expected a mapping of %s.* keys, got %s", section,
                     section, shape(&ev))) == 0)
        rc = skip_rest(y, t);
    yaml_event_delete(&ev);
    if (rc < 0 || !mapping)
        return rc;
    return parse_keys(y, section);
}

static int parse_document(struct yctx *y)
{
    yaml_event_t ev;
    int rc = next(y, &ev);
    if (rc < 0)
        return rc;
    bool empty = plain_null(&ev), mapping = ev.type == YAML_MAPPING_START_EVENT;
    if (!empty && !mapping)
        rc = fail(y, ev.start_mark, "expected a mapping of sections (like 'arena:'), got %s",
                  shape(&ev));
    yaml_event_delete(&ev);
    if (rc < 0 || empty)
        return rc;
    return parse_keys(y, NULL);
}

/* The rules across keys, each broken one reported at the blamed key if the file set it, else at
 * the other key of the rule. A rule on a key whose value was refused is not judged. */
static int check_rules(struct yctx *y)
{
    const char *blame[2];
    char msg[CFG_ERR_MAX];
    int rc;
    for (size_t i = 0; (rc = cfg_check_rule(y->cfg, i, blame, msg, sizeof(msg))) != 1; i++) {
        if (rc == 0)
            continue;
        size_t a = (size_t)(cfg_key_find(blame[0]) - cfg_table);
        size_t b = blame[1] ? (size_t)(cfg_key_find(blame[1]) - cfg_table) : a;
        if (y->key_bad[a] || y->key_bad[b])
            continue;
        yaml_mark_t m = y->key_mark[a].line ? y->key_mark[a] : y->key_mark[b];
        if (m.line)
            m.line--;
        if (report(y, m, "%s", msg) < 0)
            return -EINVAL;
    }
    return 0;
}

/* STREAM_START, at most one document, STREAM_END. */
static int parse_stream(struct yctx *y)
{
    yaml_event_t ev;
    int rc, docs = 0;
    for (;;) {
        if ((rc = next(y, &ev)) < 0)
            return rc;
        yaml_event_type_t t = ev.type;
        yaml_mark_t m = ev.start_mark;
        yaml_event_delete(&ev);
        if (t == YAML_STREAM_END_EVENT)
            return 0;
        if (t != YAML_DOCUMENT_START_EVENT)
            continue; /* STREAM_START, DOCUMENT_END */
        if (docs++)
            return fail(y, m, "more than one YAML document in the config");
        if ((rc = parse_document(y)) < 0)
            return rc;
    }
}

int cfg_load_string(const char *name, const char *text, size_t len, struct kvf_config *ret,
                    char *err, size_t errlen)
{
    struct kvf_config c;
    struct yctx y = {.name = name,
                     .err = err,
                     .errlen = errlen,
                     .cfg = &c,
                     .text = text ? text : "",
                     .len = text ? len : 0};
    int rc;

    if (errlen)
        err[0] = '\0';
    if (len > CFG_FILE_MAX)
        return fail(&y, (yaml_mark_t){0}, "file is larger than %d bytes", CFG_FILE_MAX);
    if ((rc = cfg_defaults(&c)) < 0)
        return rc;
    free(c.source_path);
    if (!(c.source_path = strdup(name)))
        goto err_free_cfg_nomem;
    if (!(y.key_mark = calloc(cfg_table_len, sizeof(*y.key_mark))) ||
        !(y.key_bad = calloc(cfg_table_len, sizeof(*y.key_bad))))
        goto err_free_marks_nomem;
    if (!yaml_parser_initialize(&y.parser))
        goto err_free_marks_nomem;
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)y.text, y.len);
    rc = parse_stream(&y);
    yaml_parser_delete(&y.parser);
    if (rc == 0)
        rc = check_rules(&y);
    if (rc == 0 && y.n_errors)
        rc = -EINVAL;
    free(y.key_mark);
    free(y.key_bad);
    if (rc < 0) {
        cfg_free(&c);
        if (rc == -ENOMEM && errlen)
            snprintf(err, errlen, "%s: out of memory", name);
        return rc;
    }
    *ret = c;
    return 0;

err_free_marks_nomem:
    free(y.key_mark);
    free(y.key_bad);
err_free_cfg_nomem:
    cfg_free(&c);
    if (errlen)
        snprintf(err, errlen, "%s: out of memory", name);
    return -ENOMEM;
}

int cfg_load_file(const char *path, struct kvf_config *ret, char *err, size_t errlen)
{
    struct stat st;
    /* O_NONBLOCK: a FIFO (or a device) at the path must not block the loop before the
     * regular-file check below refuses it */
    int rc, fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto err_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: not a regular file (%s)", path,
                 S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" : "special");
        goto err_close;
    }
    /* Read at most one byte past the limit: enough to refuse a file that grew meanwhile. */
    char *buf = malloc(CFG_FILE_MAX + 1);
    size_t len = 0;
    if (!buf) {
        rc = -ENOMEM;
        snprintf(err, errlen, "%s: out of memory", path);
        goto err_close;
    }
    while (len < CFG_FILE_MAX + 1) {
        ssize_t n = read(fd, buf + len, CFG_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            goto err_free_buf;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    rc = cfg_load_string(path, buf, len, ret, err, errlen);
    free(buf);
    return rc;

err_free_buf:
    free(buf);
err_close:
    if (fd >= 0)
        close(fd);
    return rc;
}
