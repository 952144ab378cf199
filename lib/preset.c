/* preset.c: preset_parse, the spec-string parser of preset.h. Every key is optional, at most
 * once; numbers are plain decimal; zero, out-of-range and unknown values are errors naming the
 * key. Limits (beyond preset.h): tp*pp <= LAYOUT_MAX_TP, tpb <= 65536, blocks <= 2^20,
 * slots <= 2^16, hd <= 1024, fp printable ASCII without ',' up to LAYOUT_FP_MAX-1 bytes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "preset.h"
#include "preset_models.h"

#define PRESET_TPB_MAX 65536u
#define PRESET_BLOCKS_MAX (1u << 20)
#define PRESET_SLOTS_MAX (1u << 16)
#define PRESET_HD_MAX 1024u

/* Decimal in 1..max. */
static int parse_num(const char *key, const char *v, uint32_t max, uint32_t *ret, char *err,
                     size_t errlen)
{
    uint64_t x = 0;
    if (!*v)
        return err_inval(err, errlen, "%s: empty value", key);
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return err_inval(err, errlen, "%s: \"%s\" is not a decimal number", key, v);
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > max)
            return err_inval(err, errlen, "%s: %s is over the limit %u", key, v, max);
    }
    if (x == 0)
        return err_inval(err, errlen, "%s: 0 is not allowed", key);
    *ret = (uint32_t)x;
    return 0;
}

/* One of two words: writes 0 for `w0`, 1 for `w1`. */
static int parse_pick(const char *key, const char *v, const char *w0, const char *w1, bool *ret,
                      char *err, size_t errlen)
{
    if (strcmp(v, w0) == 0)
        *ret = false;
    else if (strcmp(v, w1) == 0)
        *ret = true;
    else
        return err_inval(err, errlen, "%s: \"%s\" is not %s or %s", key, v, w0, w1);
    return 0;
}

static int parse_pp_layers(const char *v, struct preset_spec *s, char *err, size_t errlen)
{
    char buf[PRESET_SPEC_MAX];
    snprintf(buf, sizeof(buf), "%s", v);
    s->n_pp_layers = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
        if (s->n_pp_layers == LAYOUT_MAX_PP)
            return err_inval(err, errlen, "pp_layers: more than %d stages", LAYOUT_MAX_PP);
        int rc = parse_num("pp_layers", tok, LAYOUT_MAX_LAYERS, &s->pp_layers[s->n_pp_layers],
                           err, errlen);
        if (rc)
            return rc;
        s->n_pp_layers++;
    }
    size_t n = strlen(v);
    if (s->n_pp_layers == 0 || v[0] == '+' || v[n - 1] == '+' || strstr(v, "++"))
        return err_inval(err, errlen, "pp_layers: \"%s\" is not A+B+...", v);
    return 0;
}

static const char *const keys[] = {"tp",    "pp",     "adp",    "tpb",         "pp_layers",
                                   "arr",   "state",  "kv",     "blocks",      "slots",
                                   "state_shard", "hd", "dtype", "fp",          "pools",
                                   "conv",  "order",  "omit",   NULL};

static int parse_kv(const char *key, const char *v, struct preset_spec *s, char *err, size_t errlen)
{
    if (!strcmp(key, "tp"))
        return parse_num(key, v, LAYOUT_MAX_TP, &s->tp, err, errlen);
    if (!strcmp(key, "pp"))
        return parse_num(key, v, LAYOUT_MAX_PP, &s->pp, err, errlen);
    if (!strcmp(key, "tpb"))
        return parse_num(key, v, PRESET_TPB_MAX, &s->tpb, err, errlen);
    if (!strcmp(key, "blocks"))
        return parse_num(key, v, PRESET_BLOCKS_MAX, &s->n_blocks, err, errlen);
    if (!strcmp(key, "slots"))
        return parse_num(key, v, PRESET_SLOTS_MAX, &s->n_slots, err, errlen);
    if (!strcmp(key, "hd"))
        return parse_num(key, v, PRESET_HD_MAX, &s->head_dim, err, errlen);
    if (!strcmp(key, "adp"))
        return parse_pick(key, v, "0", "1", &s->adp, err, errlen);
    if (!strcmp(key, "arr"))
        return parse_pick(key, v, "layer", "block", &s->block_major, err, errlen);
    if (!strcmp(key, "pools")) {
        static const char *const names[] = {"view", "layer", "layer_joint"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, names[i])) {
                s->pools = (preset_pools_t)i;
                return 0;
            }
        return err_inval(err, errlen, "pools: \"%s\" is not view, layer or layer_joint", v);
    }
    if (!strcmp(key, "state"))
        return parse_pick(key, v, "joint", "split", &s->state_split, err, errlen);
    if (!strcmp(key, "kv"))
        return parse_pick(key, v, "joint", "split", &s->kv_split, err, errlen);
    if (!strcmp(key, "state_shard"))
        return parse_pick(key, v, "sharded", "replicated", &s->state_replicated, err, errlen);
    if (!strcmp(key, "pp_layers"))
        return parse_pp_layers(v, s, err, errlen);
    if (!strcmp(key, "conv"))
        return parse_pick(key, v, "w", "w-1", &s->conv_wm1, err, errlen);
    if (!strcmp(key, "order"))
        return parse_pick(key, v, "nhd", "hnd", &s->hnd, err, errlen);
    if (!strcmp(key, "omit")) {
        size_t n = strlen(v);
        if (n == 0 || n >= LAYOUT_SHORT_MAX)
            return err_inval(err, errlen, "omit: length %zu is outside 1..%d", n,
                             LAYOUT_SHORT_MAX - 1);
        memcpy(s->omit, v, n + 1);
        return 0;
    }
    if (!strcmp(key, "dtype")) {
        dtype_t t;
        if (dtype_from_string(v, &t))
            return err_inval(err, errlen, "dtype: \"%s\" is not bf16, fp16, fp32, fp8 or u8", v);
        s->ssm_dtype = (int32_t)t;
        return 0;
    }
    /* fp */
    size_t n = strlen(v);
    if (n == 0 || n >= LAYOUT_FP_MAX)
        return err_inval(err, errlen, "fp: length %zu is outside 1..%d", n, LAYOUT_FP_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return err_inval(err, errlen, "fp: has a byte outside printable ASCII");
    memcpy(s->fingerprint, v, n + 1);
    return 0;
}

int preset_parse(const char *spec, struct preset_spec *ret, char *err, size_t errlen)
{
    char buf[PRESET_SPEC_MAX];
    if (!spec)
        return err_inval(err, errlen, "spec: NULL");
    size_t len = strnlen(spec, PRESET_SPEC_MAX);
    if (len >= PRESET_SPEC_MAX)
        return err_inval(err, errlen, "spec: longer than %d bytes", PRESET_SPEC_MAX - 1);
    memcpy(buf, spec, len + 1);

    struct preset_spec s = {.tp = 1, .pp = 1, .tpb = 64, .n_blocks = 512, .n_slots = 8,
                            .ssm_dtype = -1};
    char *opts = strchr(buf, ':');
    if (opts)
        *opts++ = '\0';
    const struct preset_model *m = preset_model_find(buf);
    if (!m) {
        char known[256] = "";
        for (int i = 0; preset_models[i]; i++)
            snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "",
                     preset_models[i]);
        return err_inval(err, errlen, "model: \"%s\" is not a known preset (%s)", buf, known);
    }
    snprintf(s.model, sizeof(s.model), "%s", m->name);

    bool seen[sizeof(keys) / sizeof(keys[0])] = {false};
    bool pp_given = false;
    if (opts) {
        /* strtok_r would skip empty items; walk by hand so "a=1,,b=2" is refused. */
        char *item = opts;
        for (;;) {
            char *comma = strchr(item, ',');
            if (comma)
                *comma = '\0';
            char *eq = strchr(item, '=');
            if (!eq)
                return err_inval(err, errlen, "spec: \"%s\" is not key=value", item);
            *eq = '\0';
            int k = 0;
            while (keys[k] && strcmp(keys[k], item))
                k++;
            if (!keys[k])
                return err_inval(err, errlen, "%s: unknown key", item);
            if (seen[k])
                return err_inval(err, errlen, "%s: given twice", item);
            seen[k] = true;
            if (!strcmp(item, "pp"))
                pp_given = true;
            int rc = parse_kv(item, eq + 1, &s, err, errlen);
            if (rc)
                return rc;
            if (!comma)
                break;
            item = comma + 1;
        }
    }
    if (s.n_pp_layers) {
        if (pp_given && s.pp != s.n_pp_layers)
            return err_inval(err, errlen, "pp_layers: %u stages but pp=%u", s.n_pp_layers, s.pp);
        s.pp = s.n_pp_layers;
        uint32_t sum = 0;
        for (uint32_t i = 0; i < s.n_pp_layers; i++)
            sum += s.pp_layers[i];
        if (sum != m->n_layers)
            return err_inval(err, errlen, "pp_layers: stages sum to %u layers, %s has %u", sum,
                             m->name, m->n_layers);
    } else if (s.pp > m->n_layers) {
        return err_inval(err, errlen, "pp: %u stages for %u layers of %s", s.pp, m->n_layers,
                         m->name);
    }
    if (s.tp * s.pp > LAYOUT_MAX_TP)
        return err_inval(err, errlen, "tp: tp*pp = %u ranks is over %d", s.tp * s.pp,
                         LAYOUT_MAX_TP);
    *ret = s;
    return 0;
}
