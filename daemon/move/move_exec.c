/* move_exec.c: the table of executors (move_exec.h): one row per kind. */
#include "move_exec.h"

extern const struct move_exec move_exec_host;
extern const struct move_exec move_exec_gpu;

const struct move_exec *const move_execs[MOVE_EXEC__COUNT] = {
    [MOVE_EXEC_HOST] = &move_exec_host,
    [MOVE_EXEC_GPU] = &move_exec_gpu,
};

const struct move_exec *move_exec_of(move_exec_kind_t k)
{
    return (unsigned)k < MOVE_EXEC__COUNT ? move_execs[k] : move_execs[MOVE_EXEC_HOST];
}

const char *move_exec_kind_to_string(move_exec_kind_t k)
{
    return (unsigned)k < MOVE_EXEC__COUNT ? move_execs[k]->name : "unknown";
}
