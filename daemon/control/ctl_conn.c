/* ctl_conn.c: JSON-lines framing of one control connection (see ctl_conn.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_conn.h"
#include "log.h"

#define CTL_READ_CHUNK (64 * 1024)

struct ctl_conn {
    uv_pipe_t pipe;
    uv_timer_t idle;
    int open_handles; /* close callbacks still to come */
    bool closing, close_after_writes;
    bool close_after_reply; /* the handler asked: close once this command is answered */
    size_t writes_pending;
    struct peer_cred peer;
    struct ctl_conn_limits limits;
    const struct ctl_conn_ops *ops;
    void *ctx;
    struct ctl_conn_counters *counters;
    struct ctl_conn_counters dummy;
    char *line; /* owned: partial line, up to limits.max_line bytes */
    size_t line_len, line_cap;
    char rbuf[CTL_READ_CHUNK];
    struct ctl_conn *next;
};

struct ctl_write {
    uv_write_t req;
    struct ctl_conn *conn;
    char *data; /* owned */
};

static const struct {
    int err;
    const char *name;
} errno_names[] = {
    {EINVAL, "EINVAL"},   {EPERM, "EPERM"},         {EACCES, "EACCES"},       {ENOENT, "ENOENT"},
    {ENOMEM, "ENOMEM"},   {E2BIG, "E2BIG"},         {EUSERS, "EUSERS"},       {EAGAIN, "EAGAIN"},
    {EBUSY, "EBUSY"},     {ENOSYS, "ENOSYS"},       {ETIMEDOUT, "ETIMEDOUT"}, {EEXIST, "EEXIST"},
    {ENOTSUP, "ENOTSUP"}, {ESHUTDOWN, "ESHUTDOWN"}, {EBADMSG, "EBADMSG"},     {EIO, "EIO"},
};

const char *ctl_errno_name(int err)
{
    if (err < 0)
        err = -err;
    for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
        if (errno_names[i].err == err)
            return errno_names[i].name;
    return "EIO";
}

static char *reply_line(json_t *reply)
{
    char *s = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

char *ctl_error_line(json_t *id, int err, const char *message)
{
    json_t *r = json_pack("{s:O?,s:b,s:s,s:s}", "id", id, "ok", 0, "error", ctl_errno_name(err),
                          "message", message);
    return r ? reply_line(r) : NULL;
}

static void handle_closed(uv_handle_t *h)
{
    struct ctl_conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    if (c->ops->closed)
        c->ops->closed(c->ctx, c);
    free(c->line);
    free(c);
}

static void close_now(struct ctl_conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->pipe))
        uv_close((uv_handle_t *)&c->pipe, handle_closed);
    if (!uv_is_closing((uv_handle_t *)&c->idle))
        uv_close((uv_handle_t *)&c->idle, handle_closed);
}

void ctl_conn_close(struct ctl_conn *c, bool graceful)
{
    if (!c)
        return;
    if (!c->closing) {
        c->closing = true;
        uv_read_stop((uv_stream_t *)&c->pipe);
        uv_timer_stop(&c->idle);
    }
    if (graceful && c->writes_pending > 0) {
        c->close_after_writes = true;
        return;
    }
    close_now(c);
}

static void write_done(uv_write_t *req, int status)
{
    struct ctl_write *w = (struct ctl_write *)req;
    struct ctl_conn *c = w->conn;
    free(w->data);
    free(w);
    c->writes_pending--;
    if (status < 0 && status != UV_ECANCELED) {
        log_debug("control: write to pid %d: %s", (int)c->peer.pid, uv_strerror(status));
        ctl_conn_close(c, false);
        return;
    }
    if (c->close_after_writes && c->writes_pending == 0)
        close_now(c);
}

/* Queues one line (takes ownership of `line`). */
static void send_line(struct ctl_conn *c, char *line)
{
    if (!line) {
        ctl_conn_close(c, false);
        return;
    }
    if (uv_is_closing((uv_handle_t *)&c->pipe)) {
        free(line);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > CTL_CONN_WRITE_MAX) {
        log_warn("control: pid %d does not read its replies: closing", (int)c->peer.pid);
        free(line);
        ctl_conn_close(c, false);
        return;
    }
    struct ctl_write *w = malloc(sizeof(*w));
    if (!w) {
        free(line);
        ctl_conn_close(c, false);
        return;
    }
    w->conn = c;
    w->data = line;
    uv_buf_t b = uv_buf_init(line, (unsigned)strlen(line));
    int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_done);
    if (r < 0) {
        free(line);
        free(w);
        ctl_conn_close(c, false);
        return;
    }
    c->writes_pending++;
}

static void send_error(struct ctl_conn *c, json_t *id, int err, const char *msg)
{
    c->counters->errors++;
    send_line(c, ctl_error_line(id, err, msg));
}

static void process_line(struct ctl_conn *c, const char *buf, size_t len)
{
    if (len > 0 && buf[len - 1] == '\r')
        len--;
    if (len == 0)
        return; /* blank lines are keep-alives */
    json_error_t jerr;
    json_t *req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!req) {
        char msg[256];
        snprintf(msg, sizeof(msg), "malformed JSON at column %d: %s", jerr.column, jerr.text);
        c->counters->malformed++;
        send_error(c, NULL, EINVAL, msg);
        return;
    }
    if (!json_is_object(req)) {
        c->counters->malformed++;
        send_error(c, NULL, EINVAL, "a request is a JSON object: {\"id\":1,\"cmd\":\"status\"}");
        json_decref(req);
        return;
    }
    json_t *id = json_object_get(req, "id");
    json_t *cmd = json_object_get(req, "cmd");
    json_t *args = json_object_get(req, "args");
    if (!json_is_string(cmd)) {
        c->counters->malformed++;
        send_error(c, id, EINVAL, "\"cmd\" must be a string");
        json_decref(req);
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        c->counters->malformed++;
        send_error(c, id, EINVAL, "\"args\" must be an object");
        json_decref(req);
        return;
    }
    if (json_is_null(args))
        args = NULL;
    c->counters->commands++;
    json_t *result = NULL;
    char msg[512] = "";
    int r = c->ops->handle(c->ctx, c, json_string_value(cmd), args, &result, msg, sizeof(msg));
    if (r < 0) {
        send_error(c, id, r, msg[0] ? msg : strerror(-r));
    } else {
        json_t *reply = json_pack("{s:O?,s:b,s:o}", "id", id, "ok", 1, "result",
                                  result ? result : json_object());
        send_line(c, reply ? reply_line(reply) : NULL);
    }
    json_decref(req);
    if (c->close_after_reply)
        ctl_conn_close(c, true);
}

static void idle_fired(uv_timer_t *t)
{
    struct ctl_conn *c = t->data;
    char msg[128];
    snprintf(msg, sizeof(msg), "idle for %llu ms: closing",
             (unsigned long long)c->limits.idle_timeout_ms);
    c->counters->idle_timeouts++;
    send_error(c, NULL, ETIMEDOUT, msg);
    ctl_conn_close(c, true);
}

static void arm_idle(struct ctl_conn *c)
{
    if (c->limits.idle_timeout_ms && !c->closing)
        uv_timer_start(&c->idle, idle_fired, c->limits.idle_timeout_ms, 0);
    else
        uv_timer_stop(&c->idle);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct ctl_conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static int line_append(struct ctl_conn *c, const char *p, size_t n)
{
    if (c->line_len + n > c->line_cap) {
        size_t cap = c->line_cap ? c->line_cap : 4096;
        while (cap < c->line_len + n)
            cap *= 2;
        char *nl = realloc(c->line, cap);
        if (!nl)
            return -ENOMEM;
        c->line = nl;
        c->line_cap = cap;
    }
    memcpy(c->line + c->line_len, p, n);
    c->line_len += n;
    return 0;
}

static void too_long(struct ctl_conn *c)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "line longer than %zu bytes (control.max_line): closing",
             c->limits.max_line);
    c->counters->lines_too_long++;
    send_error(c, NULL, E2BIG, msg);
    ctl_conn_close(c, true);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ctl_conn *c = s->data;
    if (nread < 0) {
        ctl_conn_close(c, nread == UV_EOF);
        return;
    }
    arm_idle(c);
    const char *p = buf->base;
    size_t left = (size_t)nread;
    while (left > 0 && !c->closing) {
        const char *nl = memchr(p, '\n', left);
        size_t take = nl ? (size_t)(nl - p) : left;
        if (c->line_len + take > c->limits.max_line) {
            too_long(c);
            return;
        }
        if (c->line_len == 0 && nl) {
            process_line(c, p, take); /* whole line in the read buffer: no copy */
        } else {
            if (line_append(c, p, take) < 0) {
                ctl_conn_close(c, false);
                return;
            }
            if (nl) {
                process_line(c, c->line, c->line_len);
                c->line_len = 0;
            }
        }
        if (!nl)
            break;
        p += take + 1;
        left -= take + 1;
    }
}

static const struct ctl_conn_ops no_ops = {NULL, NULL};

int ctl_conn_new(uv_loop_t *loop, int fd, const struct peer_cred *peer,
                 const struct ctl_conn_limits *limits, const struct ctl_conn_ops *ops, void *ctx,
                 struct ctl_conn_counters *counters, struct ctl_conn **ret)
{
    bool fd_owned_by_pipe = false;
    struct ctl_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->peer = *peer;
    c->limits = *limits;
    c->ops = ops;
    c->ctx = ctx;
    c->counters = counters ? counters : &c->dummy;
    int r = uv_pipe_init(loop, &c->pipe, 0);
    if (r < 0) {
        free(c);
        close(fd);
        return r;
    }
    c->pipe.data = c;
    c->open_handles = 1;
    r = uv_timer_init(loop, &c->idle);
    if (r < 0)
        goto err_close;
    c->idle.data = c;
    c->open_handles = 2;
    r = uv_pipe_open(&c->pipe, fd);
    if (r < 0)
        goto err_close;
    fd_owned_by_pipe = true;
    r = uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
    if (r < 0)
        goto err_close;
    arm_idle(c);
    *ret = c;
    return 0;
err_close:
    if (!fd_owned_by_pipe)
        close(fd);
    c->ops = &no_ops;
    c->closing = true;
    if (c->open_handles == 2)
        close_now(c);
    else
        uv_close((uv_handle_t *)&c->pipe, handle_closed);
    return r;
}

struct peer_cred *ctl_conn_peer(struct ctl_conn *c)
{
    return &c->peer;
}

void ctl_conn_close_after_reply(struct ctl_conn *c)
{
    c->close_after_reply = true;
}

void ctl_conn_set_limits(struct ctl_conn *c, const struct ctl_conn_limits *limits)
{
    c->limits = *limits;
    arm_idle(c);
}

const struct ctl_conn_limits *ctl_conn_limits(const struct ctl_conn *c)
{
    return &c->limits;
}

struct ctl_conn **ctl_conn_next(struct ctl_conn *c)
{
    return &c->next;
}
