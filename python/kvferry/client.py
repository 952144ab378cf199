"""kvferry.Client: one rank's connection to its node's kvferryd (lib/kvferry.h, kvf_*)."""
import collections
import ctypes as C
import os
import select

from . import _lib
from . import stream as stream_mod
from .errors import KvferryError, TransferError, RegistrationError, from_text, ERROR_NAMES
from .ids import request_id

KINDS = {_lib.EV_SENT: "SENT", _lib.EV_DONE: "DONE", _lib.EV_FAILED: "FAILED",
         _lib.EV_DISCONNECTED: "DISCONNECTED", _lib.EV_RECONNECTED: "RECONNECTED",
         _lib.EV_RELEASED: "RELEASED"}


class Event:
    """kind: "SENT" | "DONE" | "FAILED" | "DISCONNECTED" | "RECONNECTED" | "RELEASED"; error: a
    kvf_error_t name ("OK" unless FAILED/DISCONNECTED); key: the id as the caller gave it (str
    or int). held: a FAILED RECV whose blocks a lost peer daemon may still write: reuse them
    only after the RELEASED event of the same key (kvferry.h KVF_EVF_HELD)."""

    __slots__ = ("req_id", "key", "kind", "error", "bytes", "message", "held")

    def __init__(self, ev, key):
        self.req_id, self.key = ev.req_id, key
        self.kind = KINDS.get(ev.kind, str(ev.kind))
        self.error = ERROR_NAMES[ev.error] if 0 <= ev.error < len(ERROR_NAMES) else "UNKNOWN"
        self.bytes = ev.bytes
        self.message = ev.message.decode(errors="replace")
        self.held = bool(ev.flags & _lib.EVF_HELD)

    @property
    def ok(self):
        return self.kind in ("SENT", "DONE")

    def raise_for_error(self):
        if self.kind == "FAILED":
            raise TransferError(self.error, self.message, self.req_id, self.key)
        return self

    def __repr__(self):
        return "Event(%s%s %r %s%s)" % (self.kind, " HELD" if self.held else "", self.key,
                                        self.error, ": " + self.message if self.message else "")


def _oserror(rc, what):
    return OSError(-rc, "%s: %s" % (what, os.strerror(-rc)))


def _items(layout, items):
    """{group name: ids} or [ids per group] -> (n_groups, counts array, ids array)."""
    n = len(layout.groups)
    if isinstance(items, dict):
        per = [[] for _ in range(n)]
        for name, ids in items.items():
            per[layout.group_index(name)] = ids
    else:
        per = list(items)
        if len(per) != n:
            raise KvferryError("items for %d groups, the layout has %d" % (len(per), n))
    for g, ids in enumerate(per):
        if isinstance(ids, int):
            per[g] = [ids]
    flat = [int(i) for ids in per for i in ids]
    counts = (C.c_uint32 * max(n, 1))(*[len(ids) for ids in per])
    arr = (C.c_uint32 * max(len(flat), 1))(*flat)
    return n, counts, arr


class Client:
    """connect (HELLO), register, send/recv/cancel, events. socket None: $KVFERRY_WORKER_SOCKET,
    else the daemon's default. home: the instance's home daemon "host:port" (None: this one).
    Use as a context manager, or close(). fileno() is readable when an event may be waiting:
    selectors / asyncio loop.add_reader(c.fileno(), ...) then drain c.events(). held_events:
    this caller reads Event.held and "RELEASED" (kvferry.h KVF_EVF_HELD): a RECV whose blocks a
    lost peer daemon may still write then fails at once, held, instead of when nothing can."""

    def __init__(self, socket=None, name=None, home=None, connect_timeout_ms=0, reconnect=True,
                 held_events=False):
        self._lib = _lib.lib()
        self._c = C.c_void_p()
        self._err = C.create_string_buffer(_lib.MESSAGE_MAX)
        self._name = (name or "python pid %d" % os.getpid()).encode()
        self._home = home.encode() if home else None
        opt = _lib.Options(connect_timeout_ms=connect_timeout_ms,
                           no_reconnect=0 if reconnect else 1, name=self._name, home=self._home,
                           err=C.cast(self._err, C.c_char_p), errlen=_lib.MESSAGE_MAX,
                           held_events=1 if held_events else 0)
        self._opt = opt
        path = socket.encode() if isinstance(socket, str) else socket
        rc = self._lib.kvf_connect(path, C.byref(opt), C.byref(self._c))
        if rc != 0:
            why = self._err.value.decode(errors="replace")
            where = socket or os.environ.get("KVFERRY_WORKER_SOCKET") or "the default socket"
            raise ConnectionError(-rc, "kvf_connect %s: %s%s" % (where, os.strerror(-rc),
                                                                 ": " + why if why else ""))
        self._keys = {}   # req_id -> the caller's key
        self._held = collections.deque()  # events wait(key) met for other requests: poll's next
        self._layout = None
        self._keep = None  # the pool array and region objects the library borrows at register

    # ---- lifecycle ----
    def close(self):
        if self._c:
            self._lib.kvf_close(self._c)
            self._c = C.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _live(self):
        if not self._c:
            raise KvferryError("client closed")
        return self._c

    def fileno(self):
        return self._lib.kvf_fd(self._live())

    @property
    def inflight(self):
        return self._lib.kvf_inflight(self._live())

    # ---- registration ----
    def register(self, layout):
        """Registers the rank's layout (kvferry.layout.Layout) and its pools. Raises
        RegistrationError with the daemon's typed refusal."""
        text = layout.to_json().encode()
        pools, n = layout.pools()
        err = C.create_string_buffer(_lib.MESSAGE_MAX)
        rc = self._lib.kvf_register(self._live(), text, pools, n, err, _lib.MESSAGE_MAX)
        if rc == -22:
            raise from_text(err.value.decode(errors="replace"), RegistrationError)
        if rc != 0:
            raise _oserror(rc, "kvf_register")
        self._layout = layout
        self._keep = (pools, layout.regions())

    # ---- requests ----
    def _id(self, key):
        return request_id(key)

    def send(self, key, items, n_readers=0, stream=False):
        """Context rank: the request's items ({group: block ids | slot} or a list per group)
        stay untouched until its SENT (or FAILED) event. n_readers 0: the daemon works out who
        reads this rank (README: n_readers); else the count to wait for. stream=True: the items
        are not final yet; the daemon plans at once and moves each layer once ready() said it
        is final (kvf_send_begin)."""
        n, counts, ids = _items(self._need_layout(), items)
        rid = self._id(key)
        f = self._lib.kvf_send_begin if stream else self._lib.kvf_send
        rc = f(self._live(), rid, n, counts, ids, n_readers)
        if rc != 0:
            raise _oserror(rc, "%s %r" % ("kvf_send_begin" if stream else "kvf_send", key))
        self._keys[rid] = key
        return rid

    def register_events(self, events):
        """Passes this GPU rank's CUDA interprocess events once (kvf_register_events, after
        register): a ring the prefill records after each layer's writes and names in ready(...,
        event=ev), so the daemon's copies wait for it on the GPU and the stream is never
        synchronized. events: torch.cuda.Event(interprocess=True) (enable_timing False), CuPy
        Event(interprocess=True, disable_timing=True), or 64-byte handles, made on the device of
        the rank's pools; at most EVENTS_MAX. Refused (RegistrationError BAD_REQUEST) for host
        pools, a handle the daemon cannot open, or events passed already."""
        if not hasattr(self._lib, "kvf_register_events"):
            raise KvferryError("this libkvferry has no kvf_register_events: CUDA events need a "
                               "library that has it (install libkvferry with this package)")
        events = list(events)
        handles = b"".join(stream_mod.event_handle(ev) for ev in events)
        err = C.create_string_buffer(_lib.MESSAGE_MAX)
        rc = self._lib.kvf_register_events(self._live(), handles, len(events), err,
                                           _lib.MESSAGE_MAX)
        if rc == -22:
            raise from_text(err.value.decode(errors="replace"), RegistrationError)
        if rc != 0:
            raise _oserror(rc, "kvf_register_events: %s" % err.value.decode(errors="replace"))
        self._events = {id(ev): i for i, ev in enumerate(events)}
        self._event_objs = events  # kept alive: the daemon holds their handles open

    def _event_index(self, event):
        if isinstance(event, int):
            return event
        i = getattr(self, "_events", {}).get(id(event))
        if i is None:
            raise KvferryError("ready(event=...): this event was not passed with "
                               "register_events (the daemon knows events by their index)")
        return i

    def ready(self, key, upto, event=None):
        """Streaming SEND key: every global layer id below upto is final (kvf_send_ready); in
        order, upto never decreasing; the model's layer count says all is. For GPU pools: the
        writes completed (the stream synchronized), or event: one of register_events' events
        (or its index), recorded after those writes (ev.record() before this call): the daemon's
        copies wait for it on the GPU (kvf_send_ready_event)."""
        if event is None:
            rc = self._lib.kvf_send_ready(self._live(), request_id(key), int(upto))
        else:
            rc = self._lib.kvf_send_ready_event(self._live(), request_id(key), int(upto),
                                                self._event_index(event))
        if rc != 0:
            raise _oserror(rc, "kvf_send_ready %r" % (key,))

    def recv(self, key, ctx_instance, items, ctx_dp_rank=-1, deadline_ms=0, ctx_home=None,
             tokens=0):
        """Generation rank: fetch the request of context instance ctx_instance into these items;
        DONE when every byte is there. tokens: the prompt's token count (0: unknown), needed
        where the two sides' block sizes differ and the prompt ends inside a block."""
        n, counts, ids = _items(self._need_layout(), items)
        rid = self._id(key)
        a = _lib.RecvArgs(req_id=rid, ctx_instance=ctx_instance.encode(), ctx_dp_rank=ctx_dp_rank,
                          deadline_ms=deadline_ms,
                          ctx_home=ctx_home.encode() if ctx_home else None, n_groups=n,
                          counts=C.cast(counts, C.POINTER(C.c_uint32)),
                          ids=C.cast(ids, C.POINTER(C.c_uint32)), tokens=tokens)
        rc = self._lib.kvf_recv(self._live(), C.byref(a))
        if rc != 0:
            raise _oserror(rc, "kvf_recv %r" % (key,))
        self._keys[rid] = key
        return rid

    def cancel(self, key):
        rc = self._lib.kvf_cancel(self._live(), request_id(key))
        if rc != 0:
            raise _oserror(rc, "kvf_cancel %r" % (key,))

    def _need_layout(self):
        if self._layout is None:
            raise KvferryError("register the rank before sending or receiving")
        return self._layout

    # ---- events ----
    def poll(self, timeout=None):
        """The next event, or None when none came within timeout seconds (0: do not wait,
        None: forever)."""
        if self._held:
            return self._held.popleft()
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        ev = _lib.Event()
        rc = self._lib.kvf_poll(self._live(), C.byref(ev), ms)
        if rc < 0:
            raise _oserror(rc, "kvf_poll")
        if rc == 0:
            return None
        key = self._keys.get(ev.req_id, ev.req_id)
        held = ev.kind == _lib.EV_FAILED and ev.flags & _lib.EVF_HELD
        if ev.kind in (_lib.EV_SENT, _lib.EV_DONE, _lib.EV_FAILED, _lib.EV_RELEASED) and not held:
            self._keys.pop(ev.req_id, None)  # a held id keeps its key for its RELEASED
        return Event(ev, key)

    def events(self):
        """Every event waiting now (never blocks): for a selector / asyncio reader callback."""
        while True:
            ev = self.poll(0)
            if ev is None:
                return
            yield ev

    def wait(self, keys, timeout=30.0):
        """Waits for the terminal events of these requests. One key: returns its Event (the
        other events met meanwhile stay for poll() and events()); several (a list, tuple or
        set): returns {key: Event}, with other events met meanwhile under their keys too.
        Raises TransferError for the first that FAILED, TimeoutError when they do not all end
        in time."""
        import time
        single = not isinstance(keys, (list, tuple, set))
        want = {request_id(k) for k in ([keys] if single else keys)}
        mine = set(want)
        got = {}
        end = time.monotonic() + timeout
        while True:
            for ev in self.events():
                got[ev.key] = ev
                want.discard(ev.req_id)
            if not want:
                break
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no end for %d request(s) within %.1f s" % (len(want), timeout))
            waiter = select.poll()  # not select(): an engine's fds pass 1024
            waiter.register(self.fileno(), select.POLLIN)
            waiter.poll(left * 1000)
        if single:
            self._held.extend(ev for ev in got.values() if ev.req_id not in mine)
            got = {k: ev for k, ev in got.items() if ev.req_id in mine}
        for ev in got.values():
            if ev.req_id and ev.kind == "FAILED":
                ev.raise_for_error()
        return got[keys] if single else got
