/* kvf_rank.c: the libkvferry example of README.md ("Workers and libkvferry"). One rank with
 * host (memfd) pools: connect to the node's kvferryd, register the layout and pools, SEND
 * (context rank) or RECV (generation rank) one request, and wait for its event.
 * tests/integration/check_example.c compiles this file and runs a context and a generation rank
 * through a real kvferryd, so the example stays true. Build your own with -lkvferry. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvferry.h"

/* A host pool the daemon can map: a memfd of `bytes`, sealed so it cannot shrink. Map it
 * yourself (mmap MAP_SHARED) to fill or read the KV cache; close the fd when the rank ends. */
static int example_pool(uint64_t bytes, struct kvf_pool *p)
{
    int fd = memfd_create("kv-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, (off_t)bytes) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    memset(p, 0, sizeof *p);
    p->kind = KVF_POOL_HOST;
    p->device = -1;
    p->bytes = bytes;
    p->fd = fd; /* borrowed: the library keeps a dup */
    return 0;
}

struct example_req {
    uint64_t id;              /* the same id on the SEND and on every RECV of the request */
    uint32_t n_groups;        /* the layout's groups; counts[g] item ids each, ids concatenated */
    const uint32_t *counts, *ids;
    uint32_t n_readers;       /* context rank: the RECVs that read it (README: n_readers) */
    const char *ctx_instance; /* NULL: this is a context rank (SEND); else RECV from it */
};

/* Returns 0 when the request ended with SENT (context) or DONE (generation), else -1. */
static int example_rank(const char *socket_path, const char *layout_json,
                        const struct kvf_pool *pools, uint32_t n_pools,
                        const struct example_req *q, uint64_t *bytes)
{
    struct kvf_options opt = {.name = q->ctx_instance ? "example gen" : "example ctx"};
    struct kvf_client *c;
    char err[KVF_MESSAGE_MAX] = "";
    int rc = kvf_connect(socket_path, &opt, &c); /* NULL path: $KVFERRY_WORKER_SOCKET, default */
    if (rc) {
        fprintf(stderr, "kvf_connect: %s\n", strerror(-rc));
        return -1;
    }
    rc = kvf_register(c, layout_json, pools, n_pools, err, sizeof err);
    if (rc) {
        fprintf(stderr, "kvf_register: %s\n", rc == -EINVAL ? err : strerror(-rc));
    } else if (!q->ctx_instance) {
        rc = kvf_send(c, q->id, q->n_groups, q->counts, q->ids, q->n_readers);
    } else {
        struct kvf_recv_args a = {.req_id = q->id, .ctx_instance = q->ctx_instance,
                                  .ctx_dp_rank = -1, .n_groups = q->n_groups,
                                  .counts = q->counts, .ids = q->ids};
        rc = kvf_recv(c, &a);
    }
    int ok = -1;
    struct kvf_event ev;
    while (rc == 0 && kvf_poll(c, &ev, 30000) == 1) { /* or: poll(kvf_fd(c)) in your loop */
        if (ev.req_id != q->id)
            continue; /* KVF_EV_DISCONNECTED / RECONNECTED (req_id 0) */
        if (ev.kind == KVF_EV_SENT || ev.kind == KVF_EV_DONE) {
            *bytes = ev.bytes;
            ok = 0;
        } else {
            fprintf(stderr, "request %llu: %s: %s\n", (unsigned long long)ev.req_id,
                    kvf_error_to_string((kvf_error_t)ev.error), ev.message);
        }
        break;
    }
    kvf_close(c);
    return ok;
}
