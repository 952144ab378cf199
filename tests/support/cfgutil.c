/* cfgutil.c: loading configs from text for the cfg suites (tests/cfgutil.h). */
#include <errno.h>

#include "cfgutil.h"
#include "testutil.h"

char cu_err[CFG_ERR_MAX];

bool cu_equal(const struct kvf_config *a, const struct kvf_config *b)
{
    for (size_t i = 0; i < cfg_table_len; i++)
        if (!cfg_value_equal(&cfg_table[i], a, b))
            return false;
    return true;
}

int cu_load(const char *text, struct kvf_config *c)
{
    cu_err[0] = '\0';
    return cfg_load_string("t.yaml", text, strlen(text), c, cu_err, sizeof(cu_err));
}

const char *cu_load_err(const char *text)
{
    struct kvf_config c, before;
    memset(&c, 0xab, sizeof(c));
    before = c;
    ck_assert_msg(cu_load(text, &c) == -EINVAL, "should fail: %s", text);
    ck_assert(memcmp(&c, &before, sizeof(c)) == 0);
    return cu_err;
}
