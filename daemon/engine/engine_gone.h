/* engine_gone.h: context ranks that went away, remembered a while (engine_gone.c). Loop thread
 * only. */
#ifndef KVF_ENGINE_GONE_H
#define KVF_ENGINE_GONE_H

#include "engine_int.h"

#define GONE_MAX 256u /* departures remembered (the oldest is forgotten first) */

struct gone_rank {
    char instance[LAYOUT_NAME_MAX];
    uint32_t rank, pid;
    uint64_t at_ms;
};

struct gone_ranks {
    struct gone_rank r[GONE_MAX];
    uint32_t next, n;
};

/* A context rank registered here is leaving (its worker went away): flows waiting for its SEND
 * fail PEER_LOST now, and RECV_REQs for it within deadlines.send_wait + deadlines.transfer are
 * answered PEER_LOST, not UNKNOWN_INSTANCE. */
void gone_rank_removed(struct engine *e, const struct reg_rank *rk);
/* When rank `rank` of `instance` went away within that window: fills msg and returns true. */
bool gone_lookup(struct engine *e, const char *instance, uint32_t rank, char *msg, size_t len);
/* A RECV_REQ names a rank not registered here: PEER_LOST when it went away within the window,
 * else UNKNOWN_INSTANCE; msg says which. */
kvf_error_t gone_or_unknown(struct engine *e, const char *instance, uint32_t rank, char *msg,
                            size_t len);
void gone_free(struct engine *e);

#endif
