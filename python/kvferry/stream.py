"""Streaming a prefill's KV cache layer by layer (issue 28): a PyTorch model's decoder layers
announce their layer final as the forward leaves them, so kvferryd moves layer L while the
prefill computes layer L + 1.

    c.send(key, items, stream=True)
    with kvferry.stream.LayerHooks(c, key, model.model.layers, layer_ids=range(N)):
        model(input_ids)                    # each layer's forward ends with c.ready(key, id + 1)
    # the hooks say upto = n_layers_total when the forward ends: nothing left unannounced

PyTorch is not imported here: the hooks are the modules' own register_forward_hook."""


class LayerHooks:
    """Forward hooks on `layers` (decoder modules in forward order): after layer i's forward,
    sync() (when given: e.g. torch.cuda.current_stream().synchronize for GPU pools, which the
    daemon reads from the host's word alone) then client.ready(key, layer_ids[i] + 1). On
    leaving the `with` block (or finish()), ready(key, upto_end) says everything is final.
    layer_ids: the global layer id of each module (default 0, 1, ...); upto_end: the model's
    layer count (default last id + 1)."""

    def __init__(self, client, key, layers, layer_ids=None, sync=None, upto_end=None):
        self.client, self.key, self.sync = client, key, sync
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
