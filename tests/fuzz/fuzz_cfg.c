/* fuzz_cfg.c: libFuzzer target for the config loader. Any bytes must either load (and then print
 * as YAML that loads back to an equal config, and as JSON) or fail with a positioned message;
 * never crash, leak or read out of bounds. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvf_config c, back;
    char err[CFG_ERR_MAX];
    int rc = cfg_load_string("fuzz", (const char *)data, size, &c, err, sizeof(err));
    if (rc < 0) {
        if (rc == -EINVAL && strncmp(err, "fuzz:", 5) != 0)
            abort(); /* every refusal says where */
        return 0;
    }
    char *y = cfg_to_yaml(&c);
    if (!y || cfg_load_string("again", y, strlen(y), &back, err, sizeof(err)) != 0)
        abort();
    for (size_t i = 0; i < cfg_table_len; i++)
        if (!cfg_value_equal(&cfg_table[i], &c, &back))
            abort();
    json_decref(cfg_to_json(&c));
    free(y);
    cfg_free(&back);
    cfg_free(&c);
    return 0;
}
