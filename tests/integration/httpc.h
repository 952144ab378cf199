/* httpc.h: a tiny blocking HTTP/1.x client over real TCP for the /metrics listener's tests
 * (daemon/control/metrics_http.c): the listener's port from status, connects from a chosen
 * loopback address (127.0.0.0/8 is all this host's), one request and the whole reply. Bodies
 * in tests/support/httpc.c. */
#ifndef KVF_HTTPC_H
#define KVF_HTTPC_H

#include <stddef.h>

#include "daemon_harness.h"

#define HTTPC_GET "GET /metrics HTTP/1.1\r\nHost: kvf\r\nConnection: close\r\n\r\n"

/* control.metrics_http of the daemon's status (a new reference; fails the test when absent). */
json_t *httpc_status(const struct dh *h);
/* The port of control.metrics_http.listen. */
int httpc_port(const struct dh *h);
/* A connected socket to 127.0.0.1:port from the address `from` ("127.0.0.2"; NULL: any). */
int httpc_connect(const char *from, int port);
/* Sends req on fd, reads until the server closes or timeout_ms pass, closes fd. Returns the
 * malloc'd reply ("" when nothing came). */
char *httpc_roundtrip_fd(int fd, const char *req, size_t req_len, int timeout_ms);
/* httpc_roundtrip_fd on a new connection from `from`, 10 s. */
char *httpc_roundtrip(const char *from, int port, const char *req);
/* The body of a reply (after the blank line); fails the test when there is none. */
const char *httpc_body(const char *reply);
/* Waits up to timeout_ms for the server to close fd (EOF or reset): true when it did. */
bool httpc_wait_closed(int fd, int timeout_ms);

#endif
