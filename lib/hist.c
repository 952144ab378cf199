/* hist.c: fixed-bucket histograms and their stats JSON (hist.h). */
#include <jansson.h>

#include "hist.h"

const struct hist_spec hist_latency_seconds = {
    16, {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
         0.5, 1, 5, 60}};

const struct hist_spec hist_request_bytes = {
    14, {4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0,
         268435456.0, 1073741824.0, 4294967296.0, 17179869184.0, 68719476736.0,
         274877906944.0}};

void hist_observe(struct hist *h, const struct hist_spec *spec, double v)
{
    size_t i = 0;
    while (i < spec->n && v > spec->le[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

json_t *hist_json(const struct hist *h, const struct hist_spec *spec)
{
    json_t *le = json_array(), *c = json_array();
    for (size_t i = 0; le && c && i <= spec->n; i++) {
        if (i < spec->n)
            json_array_append_new(le, json_real(spec->le[i]));
        json_array_append_new(c, json_integer((json_int_t)h->counts[i]));
    }
    if (!le || !c) {
        json_decref(le);
        json_decref(c);
        return NULL;
    }
    /* "o" hands le and c to the object (jansson releases them when packing fails) */
    return json_pack("{s:o,s:o,s:f,s:I}", "le", le, "counts", c, "sum", h->sum, "count",
                     (json_int_t)h->count);
}
