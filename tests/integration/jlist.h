/* jlist.h: does a JSON array (a control command's list: transfers, workers, instances) hold an
 * object with given field values? For tests that wait on what the daemon reports, not on
 * time. Bodies in tests/support/jlist.c. */
#ifndef KVF_JLIST_H
#define KVF_JLIST_H

#include <jansson.h>
#include <string.h>

#include "testutil.h"

/* 1 when the JSON value v (string, integer or boolean) reads as text want. */
int tj_is(json_t *v, const char *want);

/* 1 when array a holds an object whose field f1 reads v1 and, when f2 is not NULL, whose field
 * f2 reads v2. */
int tj_lists(json_t *a, const char *f1, const char *v1, const char *f2, const char *v2);

#endif
