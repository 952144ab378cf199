/* accessutil.h: access.* for unit tests (daemon/base/access.h), from a YAML snippet. Built once
 * into libkvferry-testsupport.a. */
#ifndef KVF_TEST_ACCESSUTIL_H
#define KVF_TEST_ACCESSUTIL_H

#include "access.h"

/* Loads yaml as a config and resolves its access.* lists into *ret (free with access_done);
 * a config or name that does not resolve fails the test. */
void tu_access_load(const char *yaml, struct access *ret);

#endif
