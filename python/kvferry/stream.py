"""Streaming a prefill's KV cache layer by layer (issue 28): a PyTorch model's decoder layers
announce their layer final as the forward leaves them, so kvferryd moves layer L while the
prefill computes layer L + 1.

    c.send(key, items, stream=True)
    with kvferry.stream.LayerHooks(c, key, model.model.layers, layer_ids=range(N)):
        model(input_ids)                    # each layer's forward ends with c.ready(key, id + 1)
    # the hooks say upto = n_layers_total when the forward ends: nothing left unannounced

GPU pools without synchronizing the stream (CUDA interprocess events): pass a ring once and
let the hooks record one per layer; the daemon's copies wait for it on the GPU.

    ring = [torch.cuda.Event(interprocess=True) for _ in range(8)]   # timing off: required
    c.register_events(ring)
    with kvferry.stream.LayerHooks(c, key, model.model.layers, events=ring):
        model(input_ids)                    # each layer: ring[i % 8].record(); ready(..., event)

PyTorch is not imported here: the hooks are the modules' own register_forward_hook, the events
the caller's (their record() and ipc_handle(); CuPy's through cupy.cuda.runtime)."""


def event_handle(ev):
    """The 64 bytes of cudaIpcGetEventHandle for ev: a torch.cuda.Event(interprocess=True), a
    CuPy cupy.cuda.Event(interprocess=True, disable_timing=True), or bytes already."""
    if isinstance(ev, (bytes, bytearray)):
        h = bytes(ev)
    elif hasattr(ev, "ipc_handle"):  # torch.cuda.Event
        h = bytes(ev.ipc_handle())
    elif hasattr(ev, "ptr"):  # cupy.cuda.Event
        import cupy  # the caller's: only reached with a CuPy event
        h = bytes(cupy.cuda.runtime.ipcGetEventHandle(ev.ptr))
    else:
        raise TypeError("a CUDA interprocess event (torch.cuda.Event(interprocess=True), "
                        "cupy.cuda.Event(interprocess=True, disable_timing=True)) or its "
                        "64-byte handle, not %r" % type(ev).__name__)
    if len(h) != 64:
        raise ValueError("an IPC event handle is 64 bytes, got %d" % len(h))
    return h


class LayerHooks:
    """Forward hooks on `layers` (decoder modules in forward order): after layer i's forward,
    sync() (when given: e.g. torch.cuda.current_stream().synchronize for GPU pools, which the
    daemon then reads from the host's word alone) then client.ready(key, layer_ids[i] + 1).
    With events (the ring passed to client.register_events), no sync: the next event of the ring
    is recorded on the current stream and named in the READY, so the daemon's copies wait for
    it on the GPU and the prefill never waits. On leaving the `with` block (or finish()),
    ready(key, upto_end) says everything is final (after a last event with events).
    layer_ids: the global layer id of each module (default 0, 1, ...); upto_end: the model's
    layer count (default last id + 1)."""

    def __init__(self, client, key, layers, layer_ids=None, sync=None, upto_end=None,
                 events=None):
        if sync is not None and events is not None:
            raise ValueError("sync or events: events replace the stream's synchronization")
        self.client, self.key, self.sync = client, key, sync
        self.events, self.n_recorded = list(events) if events is not None else None, 0
        layers = list(layers)
        self.ids = list(layer_ids) if layer_ids is not None else list(range(len(layers)))
        if len(self.ids) != len(layers):
            raise ValueError("%d layer ids for %d layers" % (len(self.ids), len(layers)))
        if any(b <= a for a, b in zip(self.ids, self.ids[1:])):
            raise ValueError("layer ids must ascend: READY goes in order")
        self.upto_end = upto_end if upto_end is not None else (self.ids[-1] + 1 if self.ids else 0)
        self.upto = 0
        self._handles = [m.register_forward_hook(self._hook(i)) for i, m in enumerate(layers)]

    def _hook(self, i):
        def hook(_module, _inputs, _output):
            self.announce(self.ids[i] + 1)
        return hook

    def announce(self, upto):
        """ready(key, upto) once upto moved on (a second forward of the same layers, as in a
        chunked prefill, says nothing new until it passes the last announced layer)."""
        if upto <= self.upto:
            return
        if self.events:
            ev = self.events[self.n_recorded % len(self.events)]
            self.n_recorded += 1
            ev.record()  # on the current stream, after this layer's writes
            self.client.ready(self.key, upto, event=ev)
            self.upto = upto
            return
        if self.sync is not None:
            self.sync()
        self.client.ready(self.key, upto)
        self.upto = upto

    def finish(self):
        """Every layer final (the prefill ended: state layers included), hooks removed."""
        self.remove()
        self.announce(self.upto_end)

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.finish()
        else:
            self.remove()
