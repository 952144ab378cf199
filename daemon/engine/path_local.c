/* path_local.c: the local row of path.h: a writer of a remote request registered at this daemon
 * moves pool to pool once its SEND is here (engine_local.c); nothing goes on the wire. */
#include "engine_gen.h"
#include "path.h"

const struct path_row path_local_row = {
    .name = "local",
    .kind = PATH_LOCAL,
    .wire = WIRE_PATH_BOUNCE, /* never sent */
    .start = local_start,
};
