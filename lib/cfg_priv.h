/* cfg_priv.h: internals shared by the cfg_*.c files (and their unit test); not part of the
 * contract in cfg.h. The table (cfg_table.c) says what each key is; cfg_value.c parses, prints,
 * compares, copies and frees one field of any type; cfg_yaml.c walks a YAML file onto a config;
 * cfg.c holds the public whole-config operations. A field lives at `base + key->offset`, where
 * base is a struct kvf_config (or, in tests, any struct laid out to match a row). */
#ifndef KVF_CFG_PRIV_H
#define KVF_CFG_PRIV_H

#include "cfg.h"

#define CFG_STRING_MAX 4095 /* default length limit of string/path values (row max = 0) */
#define CFG_ITEM_MAX 64     /* length limit of one list item (a user or group name or id) */

/* Row by full key ("arena.size"), or NULL. */
const struct cfg_key *cfg_key_find(const char *key);
/* True when some key lives under "<section>.". */
bool cfg_section_exists(const char *section, size_t len);
/* Why a key that older files may still name was removed, and what to do; NULL for any other. */
const char *cfg_key_removed(const char *key);
/* The known key or section name closest to `name` (edit distance), or NULL if none is close. */
const char *cfg_key_suggest(const char *name);
/* Rules across keys, numbered from 0. 0 if `c` obeys rule number `rule`, else -EINVAL with a
 * message (without position) in msg, the key to blame in keys[0] and the other key of the rule
 * (or NULL) in keys[1]; 1 past the last rule. */
int cfg_check_rule(const struct kvf_config *c, size_t rule, const char *keys[2], char *msg,
                   size_t len);

/* Parses text (NULL: a YAML null, which strings take as "") into the field of `k` in base,
 * replacing (and freeing) the old value. Not for CFG_LIST (see cfg_list_append). On error returns
 * -EINVAL or -ENOMEM, writes
 * "<key>: <what is wrong>" into msg and leaves the field as it was. */
int cfg_value_parse(const struct cfg_key *k, const char *text, void *base, char *msg, size_t len);
/* Appends one item to the list field of `k`; -EINVAL (with msg) past CFG_LIST_MAX entries or for
 * an item that is not a name or number of at most CFG_ITEM_MAX characters; -ENOMEM. */
int cfg_list_append(const struct cfg_key *k, const char *item, void *base, char *msg, size_t len);
/* Empties a list field. */
void cfg_list_clear(struct cfg_list *l);
/* Sets the field to the row's default. 0 or -ENOMEM (a bad default is a bug: asserted). */
int cfg_value_default(const struct cfg_key *k, void *base);
/* Prints a scalar field the way the config file spells it ("512MiB", "0660", "auto", a quoted
 * string, a [flow list]). 0 or -ENOSPC. */
int cfg_value_format(const struct cfg_key *k, const void *base, char *buf, size_t len);
bool cfg_value_equal(const struct cfg_key *k, const void *a, const void *b);
/* Deep-copies the field of src into dst (whose field is assumed empty). 0 or -ENOMEM. */
int cfg_value_copy(const struct cfg_key *k, const void *src, void *dst);
void cfg_value_free(const struct cfg_key *k, void *base);

#endif
