/* cfg.c: whole-config operations of cfg.h: defaults, free, deep copy, the effective socket
 * paths, printing as YAML (re-parses to an equal config) and as JSON, and the reload diff.
 * Loading lives in cfg_yaml.c, one field's semantics in cfg_value.c, the keys in cfg_table.c.
 * JSON: {"<section>": {"<key>": value}}, sizes in bytes, durations in milliseconds, enums by
 * name, lists as arrays of strings. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg_priv.h"

#define SUN_PATH_MAX 107 /* sizeof(sockaddr_un.sun_path) - 1 */

int cfg_defaults(struct kvf_config *ret)
{
    struct kvf_config c;
    memset(&c, 0, sizeof(c));
    for (size_t i = 0; i < cfg_table_len; i++)
        if (cfg_value_default(&cfg_table[i], &c) < 0)
            goto err_nomem;
    if (!(c.source_path = strdup("")))
        goto err_nomem;
    *ret = c;
    return 0;

err_nomem:
    cfg_free(&c);
    return -ENOMEM;
}

void cfg_free(struct kvf_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < cfg_table_len; i++)
        cfg_value_free(&cfg_table[i], c);
    free(c->source_path);
    c->source_path = NULL;
}

int cfg_copy(const struct kvf_config *src, struct kvf_config *ret)
{
    struct kvf_config c;
    memset(&c, 0, sizeof(c));
    for (size_t i = 0; i < cfg_table_len; i++)
        if (cfg_value_copy(&cfg_table[i], src, &c) < 0)
            goto err_nomem;
    if (src->source_path && !(c.source_path = strdup(src->source_path)))
        goto err_nomem;
    *ret = c;
    return 0;

err_nomem:
    cfg_free(&c);
    return -ENOMEM;
}

static int put_path(char *buf, size_t len, const char *a, const char *b)
{
    int n = snprintf(buf, len, "%s%s", a, b);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int cfg_socket_dir(const struct kvf_config *c, char *buf, size_t len)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *rt = getenv("RUNTIME_DIRECTORY");
    if (c->sockets_dir && *c->sockets_dir)
        return put_path(buf, len, c->sockets_dir, "");
    if (rt && *rt && !strchr(rt, ':')) /* systemd's RuntimeDirectory= (one directory) */
        return put_path(buf, len, rt, "");
    if (geteuid() == 0)
        return put_path(buf, len, "/run/kvferry", "");
    if (xdg && *xdg)
        return put_path(buf, len, xdg, "/kvferry");
    return put_path(buf, len, "./run", "");
}

/* An explicit path, or <dir>/<leaf>; must also fit a sockaddr_un. */
static int socket_path(const struct kvf_config *c, const char *explicit_path, const char *leaf,
                       char *buf, size_t len)
{
    char dir[4096];
    int rc;
    if (explicit_path && *explicit_path)
        rc = put_path(buf, len, explicit_path, "");
    else if ((rc = cfg_socket_dir(c, dir, sizeof(dir))) == 0)
        rc = put_path(buf, len, dir, leaf);
    if (rc == 0 && strlen(buf) > SUN_PATH_MAX)
        rc = -ENAMETOOLONG;
    return rc;
}

int cfg_control_path(const struct kvf_config *c, char *buf, size_t len)
{
    return socket_path(c, c->sockets_control, "/control.sock", buf, len);
}

int cfg_worker_path(const struct kvf_config *c, char *buf, size_t len)
{
    return socket_path(c, c->sockets_worker, "/worker.sock", buf, len);
}

static size_t section_len(const char *key)
{
    return (size_t)(strchr(key, '.') - key);
}

char *cfg_to_yaml(const struct kvf_config *c)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f)
        return NULL;
    /* A list value can be long: CFG_LIST_MAX quoted items of CFG_ITEM_MAX characters. */
    size_t vlen = CFG_LIST_MAX * (CFG_ITEM_MAX + 4) + 16;
    char *val = malloc(vlen);
    bool ok = val != NULL;
    for (size_t i = 0; ok && i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        size_t sl = section_len(k->key);
        if (i == 0 || section_len(cfg_table[i - 1].key) != sl ||
            strncmp(cfg_table[i - 1].key, k->key, sl) != 0)
            ok = fprintf(f, "%.*s:\n", (int)sl, k->key) > 0;
        ok = ok && cfg_value_format(k, c, val, vlen) == 0 &&
             fprintf(f, "  %s: %s\n", k->key + sl + 1, val) > 0;
    }
    free(val);
    if (fclose(f) != 0 || !ok) {
        free(out);
        return NULL;
    }
    return out;
}

static json_t *value_json(const struct cfg_key *k, const struct kvf_config *c)
{
    const void *p = (const char *)c + k->offset;
    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH:
        return json_string(*(char *const *)p ? *(char *const *)p : "");
    case CFG_BOOL:
        return json_boolean(*(const bool *)p);
    case CFG_INT:
    case CFG_SIZE:
    case CFG_DURATION:
        return json_integer((json_int_t) * (const int64_t *)p);
    case CFG_ENUM: {
        char name[64]; /* by name, through the same bounds-checked path as the YAML output */
        return cfg_value_format(k, c, name, sizeof(name)) == 0 ? json_string(name) : NULL;
    }
    case CFG_LIST: {
        const struct cfg_list *l = p;
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < l->n; i++)
            if (json_array_append_new(a, json_string(l->items[i])) < 0) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    }
    return NULL;
}

struct json_t *cfg_value_json(const struct kvf_config *c, const char *key)
{
    const struct cfg_key *k = cfg_key_find(key);
    return k ? value_json(k, c) : NULL;
}

int cfg_values_json(const struct kvf_config *c, const char *const *keys, struct json_t *ret)
{
    for (; *keys; keys++) {
        json_t *v = cfg_value_json(c, *keys);
        if (!v || json_object_set_new(ret, *keys, v) < 0)
            return -EINVAL;
    }
    return 0;
}

struct json_t *cfg_to_json(const struct kvf_config *c)
{
    json_t *root = json_object();
    for (size_t i = 0; root && i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        char section[64];
        size_t sl = section_len(k->key);
        snprintf(section, sizeof(section), "%.*s", (int)sl, k->key);
        json_t *s = json_object_get(root, section);
        if (!s && json_object_set_new(root, section, s = json_object()) < 0)
            goto err_free_root;
        if (json_object_set_new(s, k->key + sl + 1, value_json(k, c)) < 0)
            goto err_free_root;
    }
    return root;

err_free_root:
    json_decref(root);
    return NULL;
}

size_t cfg_diff_restart_needed(const struct kvf_config *a, const struct kvf_config *b,
                               const char **ret, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        if (k->live || cfg_value_equal(k, a, b))
            continue;
        if (count < n)
            ret[count] = k->key;
        count++;
    }
    return count;
}

/* Bytes of a key's storage in struct kvf_config. */
static size_t value_size(cfg_type_t t)
{
    switch (t) {
    case CFG_STRING:
    case CFG_PATH:
        return sizeof(char *);
    case CFG_BOOL:
        return sizeof(bool);
    case CFG_INT:
    case CFG_ENUM:
        return sizeof(int64_t);
    case CFG_SIZE:
    case CFG_DURATION:
        return sizeof(uint64_t);
    case CFG_LIST:
        return sizeof(struct cfg_list);
    }
    return 0;
}

size_t cfg_apply_live(struct kvf_config *c, struct kvf_config *fresh, const char **ret, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        if (!k->live || cfg_value_equal(k, c, fresh))
            continue;
        unsigned char tmp[sizeof(struct cfg_list) > 8 ? sizeof(struct cfg_list) : 8];
        char *a = (char *)c + k->offset, *b = (char *)fresh + k->offset;
        size_t len = value_size(k->type);
        memcpy(tmp, a, len);
        memcpy(a, b, len);
        memcpy(b, tmp, len);
        if (count < n)
            ret[count] = k->key;
        count++;
    }
    return count;
}
