/* kvferryctl_client.c: connect to the control socket, send one request, read its reply. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvferryctl.h"
#include "monotonic.h"

int ctl_client_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one line (without the newline) into a malloc'd buffer. */
static int read_line(int fd, int64_t deadline, char **ret)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        int left = (int)(deadline - mono_now_ms());
        if (left <= 0) {
            free(buf);
            return -ETIMEDOUT;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            continue;
        if (len + 4096 > cap) {
            if (cap >= CTL_REPLY_MAX) {
                free(buf);
                return -E2BIG;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        /* Peek, then consume up to the newline, so bytes of a later line stay in the socket. */
        ssize_t n = recv(fd, buf + len, cap - len - 1, MSG_PEEK);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return -e;
        }
        if (n == 0) {
            free(buf);
            return -ECONNRESET;
        }
        char *nl = memchr(buf + len, '\n', (size_t)n);
        size_t take = nl ? (size_t)(nl - (buf + len)) + 1 : (size_t)n;
        if (recv(fd, buf + len, take, 0) != (ssize_t)take) {
            free(buf);
            return -EIO;
        }
        len += take;
        if (nl) {
            buf[len - 1] = '\0';
            *ret = buf;
            return 0;
        }
    }
}

int ctl_client_call(int fd, const char *cmd, json_t *args, int timeout_ms, json_t **ret)
{
    json_t *req = json_pack("{s:i,s:s}", "id", 1, "cmd", cmd);
    if (!req)
        return -ENOMEM;
    if (args)
        json_object_set(req, "args", args);
    char *s = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return -ENOMEM;
    }
    line[n] = '\n';
    int r = send_all(fd, line, n + 1);
    free(line);
    if (r < 0 && r != -EPIPE && r != -ECONNRESET)
        return r; /* a daemon that refused us wrote why before it closed: read that below */
    int64_t deadline = mono_now_ms() + timeout_ms;
    for (;;) {
        char *text = NULL;
        if ((r = read_line(fd, deadline, &text)) < 0)
            return r;
        json_t *reply = json_loads(text, 0, NULL);
        free(text);
        if (!json_is_object(reply)) {
            json_decref(reply);
            return -EBADMSG;
        }
        json_t *id = json_object_get(reply, "id");
        /* id null: the daemon could not tie the error to a request (refused, idle): ours too. */
        if (json_is_null(id) || !id || json_integer_value(id) == 1) {
            *ret = reply;
            return 0;
        }
        json_decref(reply);
    }
}
