/* gen_yaml5.c: prints the KEYS part of kvferry.yaml(5) in roff, one entry per row of the cfg
 * table (lib/cfg_table.c): key, type, default, bounds, whether it is live, and its doc. The
 * Makefile splices it into man/kvferry.yaml.5.in, so the page says what the code does. */
#include <stdio.h>
#include <string.h>

#include "cfg.h"

/* roff-safe text: backslashes doubled, a leading dot or quote guarded. */
static void roff(const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else
            putchar(*s);
    }
}

static const char *type_name(const struct cfg_key *k)
{
    static const char *const names[] = {"string", "path",     "boolean", "integer",
                                        "size",   "duration", "one of",  "list"};
    return names[k->type];
}

static void bound(const struct cfg_key *k, int64_t v, char *buf, size_t len)
{
    if (k->type == CFG_SIZE)
        cfg_format_size((uint64_t)v, buf, len);
    else if (k->type == CFG_DURATION)
        cfg_format_duration_ms((uint64_t)v, buf, len);
    else if (strcmp(k->def, "0660") == 0) /* the octal mode */
        snprintf(buf, len, "%04llo", (long long)v);
    else
        snprintf(buf, len, "%lld", (long long)v);
}

int main(void)
{
    size_t prev_len = 0;
    const char *prev = "";
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        size_t sl = (size_t)(strchr(k->key, '.') - k->key);
        if (sl != prev_len || strncmp(prev, k->key, sl) != 0)
            printf(".SS %.*s\n", (int)sl, k->key);
        prev = k->key, prev_len = sl;
        printf(".TP\n.B %s\n", k->key);
        printf("%s", type_name(k));
        if (k->type == CFG_ENUM)
            for (size_t e = 0; k->enum_names[e]; e++)
                printf("%s%s", e ? ", " : " ", k->enum_names[e]);
        printf("; default ");
        roff(k->def);
        if ((k->type == CFG_INT || k->type == CFG_SIZE || k->type == CFG_DURATION) && k->max > 0) {
            char lo[32], hi[32];
            bound(k, k->min, lo, sizeof(lo));
            bound(k, k->max, hi, sizeof(hi));
            printf("; range %s..%s", lo, hi);
        }
        printf("%s.\n", k->live ? "; live (changes on reload)" : "; takes effect at restart");
        printf(".br\n");
        roff(k->doc);
        printf("\n");
    }
    return 0;
}
