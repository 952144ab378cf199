/* kvferryctl_units.h: numbers of the daemon's JSON as people read them, chosen by the key's
 * name (the daemon's convention): *_bytes, bytes, bytes_* -> "1.5GiB"; *_ms, *_usec, *_s ->
 * "250ms", "1.3s", "5m07s", "2h05m"; *_at_s, time_s -> ISO 8601 local time
 * "2026-12-01T10:34:12+01:00"; *_gbps -> "12.30GB/s". --json output never goes through here. */
#ifndef KVF_KVFERRYCTL_UNITS_H
#define KVF_KVFERRYCTL_UNITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* o[k] as an integer (0 when absent) or a string ("-" when absent). */
long long ctl_geti(json_t *o, const char *k);
const char *ctl_gets(json_t *o, const char *k);
void ctl_size_text(long long bytes, char *buf, size_t len);
void ctl_duration_text(double ms, char *buf, size_t len);
void ctl_time_text(long long epoch_s, char *buf, size_t len);
/* When `key` names a quantity with a unit and v is a number: writes it as text, returns true. */
bool ctl_human(const char *key, json_t *v, char *buf, size_t len);
/* The `config` result with sizes, durations and the socket mode spelled as kvferry.yaml spells
 * them (from the cfg table). New reference. */
json_t *ctl_config_human(json_t *config);

#endif
