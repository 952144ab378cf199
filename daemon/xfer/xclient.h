/* xclient.h: what the request side knows of the worker connection a request came on. The
 * worker socket (daemon/worker) embeds one in each connection and keeps it current; the request
 * table, the engine and the registry hold it borrowed and never see the connection itself, so
 * they call nothing above them: events go back up through the ops the request table was given
 * (transfers_ops, transfers.h). Loop thread only. */
#ifndef KVF_XCLIENT_H
#define KVF_XCLIENT_H

#include <stdbool.h>
#include <stdint.h>

struct reg_rank;

struct xclient {
    uint64_t id;           /* the connection's, daemon-wide (never reused) */
    struct reg_rank *rank; /* borrowed from the registry; NULL until registered */
    uint32_t pid;          /* as the worker says in HELLO (SO_PEERCRED's is the connection's) */
    uint32_t inflight;     /* its requests in flight */
    uint32_t conv;         /* the conversation agreed in HELLO (proto.h PROTO_CONV_*) */
    bool closing;          /* close requested: no more frames in or out, no events */
};

#endif
