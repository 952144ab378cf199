/* kvferryctl_layout.h: the offline layout commands (no daemon):
 *   kvferryctl layout SPEC [--rank N] [--role context|generation] [--instance ID]
 *       prints the canonical JSON of one preset rank's layout (lib/layout_json.c);
 *   kvferryctl check-layout FILE...
 *       decodes and validates each file; prints "FILE: ok (...)" or "FILE: <field>: <why>".
 * Exit 0 ok, 1 a file or spec was refused or a usage error. Also the loader `plan` uses for
 * --ctx-layout / --gen-layout. */
#ifndef KVF_CTL_LAYOUT_H
#define KVF_CTL_LAYOUT_H

#include <stddef.h>

#include "layout.h"

/* argv[0] == "layout" / "check-layout". */
int ctl_layout_main(int argc, char **argv);
int ctl_check_layout_main(int argc, char **argv);

/* Reads and decodes one layout file (at most LAYOUT_JSON_MAX bytes). 0, or -errno with err. */
int ctl_layout_load(const char *path, struct layout *ret, char *err, size_t errlen);

#endif
