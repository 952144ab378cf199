/* prom.h: the Prometheus text exposition format, version 0.0.4, pure (no I/O, no daemon).
 *
 * prom.c: name sanitizing, label-value and HELP escaping, value formatting, and a metric set
 * (struct prom_set) that groups samples into families (one # HELP and one # TYPE per family, its
 * samples together, as the format requires), refuses duplicate series and renders the text.
 * prom_json.c: walks a stats document (the daemon's `stats` JSON) into a set: numbers become
 * samples named <prefix>_<section>_<key>, objects keyed by name become labels (see
 * prom_from_json).
 *
 * Ownership: a set owns copies of every string handed to it; callers keep their own. The text
 * from prom_set_render is malloc'd and owned by the caller. Any thread, one set per thread. */
#ifndef KVF_PROM_H
#define KVF_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;

#define PROM_NAME_MAX 200        /* bytes of a metric or label name, sanitized */
#define PROM_LABEL_VALUE_MAX 256 /* bytes of a label value; longer ones are cut (UTF-8 safe) */
#define PROM_HELP_MAX 512        /* bytes of a HELP text; longer ones are cut */
#define PROM_LABELS_MAX 8        /* labels on one sample */
#define PROM_SERIES_MAX 20000    /* samples in one set; more are dropped and counted */
#define PROM_DEPTH_MAX 8         /* nesting of a stats document that prom_from_json walks */

typedef enum { PROM_GAUGE = 0, PROM_COUNTER, PROM_HISTOGRAM } prom_type_t;

const char *prom_type_to_string(prom_type_t t);

struct prom_label {
    const char *name;  /* sanitized as a label name when added */
    const char *value; /* any UTF-8; escaped when rendered */
};

/* Metric name: every byte outside [a-zA-Z0-9_:] becomes '_', a leading digit gets a '_' in
 * front, an empty name becomes "_". Writes NUL-terminated into out. Returns the length, or
 * -ENAMETOOLONG when the result would not fit in outlen (or exceeds PROM_NAME_MAX). */
int prom_sanitize_name(const char *in, char *out, size_t outlen);
/* Label name: as above over [a-zA-Z0-9_] (no ':'); a name starting "__" (reserved) gets an
 * 'l' in front. Same returns. */
int prom_sanitize_label_name(const char *in, char *out, size_t outlen);
/* True when s matches [a-zA-Z_:][a-zA-Z0-9_:]* (metric) / [a-zA-Z_][a-zA-Z0-9_]* (label). */
bool prom_name_valid(const char *s);
bool prom_label_name_valid(const char *s);

/* Label value escaping: '\' -> "\\", '"' -> "\"", newline -> "\n". HELP escaping: '\' -> "\\",
 * newline -> "\n". Write NUL-terminated into out; return the length, or -ENOSPC when out is too
 * small (out then holds nothing useful). */
int prom_escape_label_value(const char *in, char *out, size_t outlen);
int prom_escape_help(const char *in, char *out, size_t outlen);

/* A sample's value as text: integers exactly, reals in the shortest of %.15g..%.17g that
 * reads back exactly, "NaN", "+Inf", "-Inf".
 * Returns the length (buffer of 32 bytes is always enough). */
int prom_format_int(int64_t v, char *out, size_t outlen);
int prom_format_real(double v, char *out, size_t outlen);

struct prom_sample;
struct prom_family;

struct prom_set {
    struct prom_family *fam; /* owned */
    size_t n_fam, cap_fam;
    size_t n_series;
    size_t max_series; /* PROM_SERIES_MAX after init; tests may lower it */
    uint64_t dropped;  /* samples refused: over max_series, duplicate series, type clash */
    bool declared_only; /* prom_from_json: a number no doc row types is left out (no type is
                         * guessed from its name) and counted in undeclared */
    uint64_t undeclared;
    char undeclared_first[128]; /* the first such path, for the log */
};

void prom_set_init(struct prom_set *s);
void prom_set_done(struct prom_set *s); /* accepts a zeroed or half-filled set */

/* Adds one sample. The name is sanitized; a counter's name gets "_total" appended when it does
 * not end in it, a gauge's name loses a trailing "_total" (slots_total -> slots). help may be
 * NULL (a generic text is used). Labels are sanitized, sorted by name; a sample with two labels
 * of one name is refused. Returns 0; -EEXIST when this series already
 * exists or the family exists with another type; -E2BIG over max_series or PROM_LABELS_MAX;
 * -ENAMETOOLONG for a name that does not fit; -ENOMEM. Every refusal counts in s->dropped. */
int prom_set_add_int(struct prom_set *s, const char *name, prom_type_t type, const char *help,
                     const struct prom_label *labels, size_t n_labels, int64_t value);
int prom_set_add_real(struct prom_set *s, const char *name, prom_type_t type, const char *help,
                      const struct prom_label *labels, size_t n_labels, double value);

/* Adds one histogram series: n_le ascending finite bounds, counts[0..n_le] per bucket (the last
 * above every bound), their sum. Rendered as name_bucket{le=...} (cumulative, ending in +Inf),
 * name_sum, name_count. The name is sanitized as above (no suffix added). Same returns. */
int prom_set_add_histogram(struct prom_set *s, const char *name, const char *help,
                           const struct prom_label *labels, size_t n_labels, const double *le,
                           const uint64_t *counts, size_t n_le, double sum);

/* Renders the whole set, families in the order first added. Stores a malloc'd NUL-terminated
 * text in *ret (length in *len when len is not NULL). Returns 0 or -ENOMEM. */
int prom_set_render(const struct prom_set *s, char **ret, size_t *len);

/* What prom_from_json knows of a stats key beyond its value. */
struct prom_doc {
    const char *path; /* dotted JSON keys from the document root, label-map keys left out:
                       * "workers.transfers.failed" */
    prom_type_t type; /* PROM_HISTOGRAM: the key holds a hist.h JSON object */
    const char *label; /* non-NULL: this object is keyed by name; its keys are this label;
                        * "a,b,c": nested maps, one level per label, outermost first (the
                        * leaves histograms when the type is PROM_HISTOGRAM) */
    const char *help;  /* NULL: a generic text naming the path */
    const char *unit;  /* "bytes", "seconds", ...: appended to the HELP text; NULL: a count */
};

/* Walks `stats` (an object of sections) into `set`:
 *  - a number at path a.b.c is a sample <prefix>_a_b_c; true/false are 1/0;
 *  - its type is the doc's for that path, else (set->declared_only) it is left out and counted,
 *    else counter when the key ends in "_total", else gauge;
 *  - an object documented PROM_HISTOGRAM is a hist.h histogram (name kept, time units too);
 *  - a time unit at the end of the name (before any _total): _s, _ms, _us, _ns becomes _seconds
 *    and the value is converted to seconds (Prometheus base units);
 *  - an object documented with a label, or whose key ends in "_by_<label>", is a label map: each
 *    entry adds {label="key"} and continues the walk at the map's own name (the "_by_<label>"
 *    suffix removed), so {"failed":{"TIMEOUT":3}} documented with label "error" gives
 *    <prefix>_..._failed_total{error="TIMEOUT"} 3; a doc label "a,b" reads nested maps
 *    {"x": {"y": v}} as {a="x",b="y"};
 *  - any other object extends the name by its key; strings, arrays and null are skipped.
 * Nesting deeper than PROM_DEPTH_MAX or more than PROM_LABELS_MAX labels is skipped and counted
 * in set->dropped. Returns 0 or -ENOMEM / -EINVAL (stats not an object). */
int prom_from_json(struct prom_set *set, const char *prefix, const struct json_t *stats,
                   const struct prom_doc *docs, size_t n_docs);

#endif
