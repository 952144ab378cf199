/* accessutil.c: access.* for unit tests (declared in tests/accessutil.h). */
#include "accessutil.h"
#include "testutil.h"

void tu_access_load(const char *yaml, struct access *ret)
{
    struct kvf_config c;
    char err[CFG_ERR_MAX];
    ck_assert_msg(cfg_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_msg(access_resolve(&c, ret, err, sizeof(err)) == 0, "%s", err);
    cfg_free(&c);
}
