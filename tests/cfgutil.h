/* cfgutil.h: loading configs from text for the cfg suites (bodies in tests/support/cfgutil.c). */
#ifndef KVF_CFGUTIL_H
#define KVF_CFGUTIL_H

#include "cfg_priv.h"

/* The message of the last cu_load (or of a cfg_load_* call a test passes it to). */
extern char cu_err[CFG_ERR_MAX];

/* Every key of the table equal in a and b. */
bool cu_equal(const struct kvf_config *a, const struct kvf_config *b);

/* Loads `text` as the file "t.yaml" into c; its message in cu_err. */
int cu_load(const char *text, struct kvf_config *c);

/* Loads `text` expecting failure; the config passed in must come back untouched. Returns cu_err. */
const char *cu_load_err(const char *text);

#endif
