"""Hugging Face transformers models through kvferry: the pools a serving engine would allocate
for a model, its Layout, a prefill's cache exported into a request's blocks and slot, and a
DynamicCache rebuilt from them on the decode side. transformers itself is never imported here:
the model's config and one prefill's cache (transformers 5.x `DynamicCache(config=...)`) say
everything, so any model whose cache layers are these two kinds works unchanged:

  attention  (DynamicLayer)          keys [batch, heads, seq, dk], values [batch, heads, seq, dv]
             (MLA, Kimi-Linear: the latent [b, 1, s, kv_lora_rank] and the rope key
             [b, 1, s, rope_dim] in keys and values: one head, replicated under TP)
  state      (LinearAttentionLayer)  conv_states[i] [batch, channels, W] (transformers keeps the
             last W inputs; vLLM and SGLang W-1), recurrent_states[i] [batch, heads, a, b]

Pools, as an engine holds them: a paged group "attn" (one K and one V tensor holding every
attention layer: [layers, blocks, tokens_per_block, heads, d], NHD) and a state group "state"
(one tensor per state kind holding every state layer: [layers, slots, ...]); a request owns a
block list and one slot. Tensor parallelism as a TP engine shards these (Spec.segments): KV heads;
a conv state's channels per segment (gated delta / KDA: q | k by key heads, v by value heads;
Mamba2: x by heads, B | C by groups, fewer groups than ranks replicated) and the recurrent state
by heads. transformers has no TP: Pools(tp_size, tp_rank) hold one rank's share, export() cuts
it from the whole cache and merge() joins the ranks' shares back into one.

    spec = hf.Spec.from_cache(model.config, prefill_cache)         # or hf.Spec.probe(model)
    pools = hf.Pools(spec, num_blocks=..., num_slots=..., tokens_per_block=16, device="cuda")
    client.register(pools.layout("prefill0", "context"))
    req = pools.alloc(n_tokens)                        # context: prefill, then
    pools.export(cache, req)                           #   the cache into req's blocks and slot
    client.send(key, req.items)                        #   free req on SENT
    client.recv(key, "prefill0", req.items, tokens=n_tokens)   # generation, then on DONE:
    cache = pools.to_cache(DynamicCache(config=model.config), req)
"""
import hashlib

from . import layout as kl
from . import memory
from .errors import KvferryError

ATTN, STATE = "attn", "state"


def _torch():
    import torch
    return torch


def _tensor(x):
    return hasattr(x, "shape") and hasattr(x, "data_ptr")


def _flags(layer):
    """A state layer's boolean attributes (has_previous_state, is_..._initialized, one value or
    one per state index) as a prefill leaves them: independent of the prompt's length."""
    out = {}
    for k, v in vars(layer).items():
        if isinstance(v, bool) or (isinstance(v, (list, tuple)) and v and
                                   all(isinstance(x, bool) for x in v)):
            out[k] = list(v) if isinstance(v, (list, tuple)) else v
    return out


def _states(v):
    """A cache layer's conv_states / recurrent_states: one tensor or a list of them."""
    if v is None:
        return []
    if _tensor(v):
        return [v]
    if isinstance(v, dict):
        v = [v[k] for k in sorted(v)]
    return [x for x in v if _tensor(x) and x.numel() > 0]


def layer_kinds(config):
    """Per layer, the config's own word for it (transformers' layer_types, Granite's
    layers_block_type, Nemotron-H's hybrid_override_pattern), or None where it says none."""
    n = config.num_hidden_layers
    for attr in ("layer_types", "layers_block_type"):
        v = getattr(config, attr, None)
        if v is not None and len(v) >= n:
            return [str(x) for x in v[:n]]
    pat = getattr(config, "hybrid_override_pattern", None)
    if isinstance(pat, str) and len(pat) >= n:
        word = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        return [word.get(c, c) for c in pat[:n]]
    return [None] * n


class Segment:
    """Channels of a conv state (or the heads of a recurrent state) that TP splits together:
    `heads` units of `per_head` channels (rows of the state)."""

    def __init__(self, name, heads, per_head):
        self.name, self.heads, self.per_head = name, heads, per_head

    @property
    def channels(self):
        return self.heads * self.per_head

    def local_heads(self, tp):
        """A rank's units: heads / tp, or every one of them where there are fewer than tp
        (replicated, as vLLM does with Mamba2 groups)."""
        if self.heads < tp:
            return self.heads
        if self.heads % tp:
            raise KvferryError("segment %s: %d heads do not split over TP %d"
                               % (self.name, self.heads, tp))
        return self.heads // tp

    def first_head(self, tp, rank):
        if self.heads < tp:
            return 0 if self.heads == 1 else rank * self.heads // tp
        return rank * self.local_heads(tp)

    def __repr__(self):
        return "%s:%dx%d" % (self.name, self.heads, self.per_head)


def _conv_segments(kind, conv_ch, rec_shape):
    """The TP segments of a conv state of conv_ch channels next to a recurrent state of
    rec_shape (heads, a, b): Mamba2 x | B | C (x: heads x a, B and C: groups x b), else the
    gated delta / KDA q | k | v (q, k: key heads x a, v: heads x b). None when neither fits."""
    if rec_shape is None or len(rec_shape) != 3:
        return None
    h, a, b = rec_shape
    if kind is not None and "mamba" in kind.lower():
        rest = conv_ch - h * a
        if rest <= 0 or rest % (2 * b):
            return None
        g = rest // (2 * b)
        return [Segment("x", h, a), Segment("B", g, b), Segment("C", g, b)]
    rest = conv_ch - h * b
    if rest <= 0 or rest % (2 * a):
        return None
    hk = rest // (2 * a)
    return [Segment("q", hk, a), Segment("k", hk, a), Segment("v", h, b)]


class Spec:
    """What one request's cache holds per layer, for a batch of one (shapes without the batch):
    attn[layer] = (heads, dk, dv, dtype); state[layer] = ([conv (channels, W, dtype)],
    [recurrent (shape, dtype)]), segments[layer] = [Segment] of its conv state (None: not
    splittable, TP 1 only)."""

    def __init__(self, config, n_layers, attn, state, kinds):
        self.config, self.n_layers = config, n_layers
        self.attn, self.state, self.kinds = attn, state, kinds
        self.flags = {}  # state layer -> its boolean attributes after a prefill
        self.attn_layers = sorted(attn)
        self.state_layers = sorted(state)
        self.segments = {}
        for layer, (convs, recs) in state.items():
            rec = recs[0][0] if recs else None
            self.segments[layer] = (_conv_segments(kinds[layer], convs[0][0], rec)
                                    if len(convs) == 1 and len(recs) == 1 else None)
        self._check_uniform()

    @classmethod
    def from_cache(cls, config, cache):
        """From a prefill's DynamicCache (any batch: shapes are read per sequence)."""
        layers = getattr(cache, "layers", None)
        if layers is None:
            raise KvferryError("the cache has no .layers: kvferry.hf reads transformers 5.x "
                               "caches (DynamicCache(config=...))")
        kinds = layer_kinds(config)
        if len(kinds) < len(layers):
            kinds += [None] * (len(layers) - len(kinds))
        attn, state, flags = {}, {}, {}
        for i, lyr in enumerate(layers):
            if getattr(lyr, "is_sliding", False):
                raise KvferryError("layer %d is a sliding-window layer (%s): kvferry.hf moves "
                                   "full attention and state layers" % (i, type(lyr).__name__))
            convs = _states(getattr(lyr, "conv_states", None))
            recs = _states(getattr(lyr, "recurrent_states", None))
            k, v = getattr(lyr, "keys", None), getattr(lyr, "values", None)
            has_kv = _tensor(k) and _tensor(v) and k.dim() == 4 and k.numel() > 0
            if has_kv:
                if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
                    raise KvferryError("layer %d: keys %s and values %s differ in heads or "
                                       "tokens" % (i, tuple(k.shape), tuple(v.shape)))
                attn[i] = (k.shape[1], k.shape[3], v.shape[3], k.dtype)
            if convs or recs:
                if has_kv:
                    raise KvferryError("layer %d holds attention and state (a parallel hybrid): "
                                       "a layout puts a layer in one group" % i)
                for c in convs:
                    if c.dim() != 3:
                        raise KvferryError("layer %d: conv state of shape %s is not [batch, "
                                           "channels, W]" % (i, tuple(c.shape)))
                state[i] = ([(c.shape[1], c.shape[2], c.dtype) for c in convs],
                            [(tuple(r.shape[1:]), r.dtype) for r in recs])
                flags[i] = _flags(lyr)
        if not attn and not state:
            raise KvferryError("the cache holds nothing: run a prefill with it first")
        spec = cls(config, len(layers), attn, state, kinds)
        spec.flags = flags
        return spec

    @classmethod
    def probe(cls, model, tokens=2, cache=None):
        """Runs a `tokens`-token prefill of the model (no gradients) into `cache` (default:
        transformers' DynamicCache(config=model.config)) and reads the spec from it."""
        torch = _torch()
        if cache is None:
            from transformers import DynamicCache
            cache = DynamicCache(config=model.config)
        dev = next(model.parameters()).device
        ids = torch.zeros((1, tokens), dtype=torch.long, device=dev)
        with torch.no_grad():
            model(input_ids=ids, past_key_values=cache, use_cache=True)
        return cls.from_cache(model.config, cache)

    def _check_uniform(self):
        """One pool per group holds every layer of it: the layers of a group agree on shapes."""
        shapes = {v for v in self.attn.values()}
        if len(shapes) > 1:
            raise KvferryError("attention layers differ in heads/dims/dtype %s: one paged group "
                               "needs them alike" % sorted(map(str, shapes)))
        st = {(tuple(c), tuple(r)) for c, r in self.state.values()}
        if len(st) > 1:
            raise KvferryError("state layers differ in their state shapes: %s"
                               % sorted(map(str, st)))

    # ---- sizes ----
    def attn_bytes_per_token(self):
        torch = _torch()
        return sum(h * (dk + dv) * torch.empty((), dtype=dt).element_size()
                   for h, dk, dv, dt in self.attn.values())

    def state_bytes(self):
        torch = _torch()
        n = 0
        for convs, recs in self.state.values():
            for ch, w, dt in convs:
                n += ch * w * torch.empty((), dtype=dt).element_size()
            for shape, dt in recs:
                m = torch.empty((), dtype=dt).element_size()
                for s in shape:
                    m *= s
                n += m
        return n

    def describe(self):
        out = []
        if self.attn:
            h, dk, dv, dt = self.attn[self.attn_layers[0]]
            out.append("attn layers %s: %d heads, dk %d, dv %d, %s"
                       % (self.attn_layers, h, dk, dv, str(dt).replace("torch.", "")))
        if self.state:
            convs, recs = self.state[self.state_layers[0]]
            out.append("state layers %s: conv %s, recurrent %s, segments %s"
                       % (self.state_layers, [(c, w) for c, w, _ in convs], [s for s, _ in recs],
                          self.segments[self.state_layers[0]]))
        return "; ".join(out)


class Request:
    """One request's items on one rank: its blocks (attention) and slot (state)."""

    def __init__(self, n_tokens, blocks, slot):
        self.n_tokens, self.blocks, self.slot = n_tokens, blocks, slot

    @property
    def items(self):
        out = {}
        if self.blocks is not None:
            out[ATTN] = self.blocks
        if self.slot is not None:
            out[STATE] = self.slot
        return out

    def __repr__(self):
        return "Request(%d tokens, blocks %s, slot %s)" % (self.n_tokens, self.blocks, self.slot)


class Pools:
    """One rank's pools for a Spec: allocated on `device` ("cpu": kvferry.host_tensor memfds
    the daemon maps; "cuda[:N]": PyTorch's caching allocator), its share under tp_size/tp_rank."""

    def __init__(self, spec, num_blocks, num_slots, tokens_per_block=16, device="cpu",
                 tp_size=1, tp_rank=0):
        torch = _torch()
        if num_blocks < 1 or num_slots < 1 or tokens_per_block < 1:
            raise KvferryError("Pools: num_blocks, num_slots and tokens_per_block must be >= 1")
        if not 0 <= tp_rank < tp_size:
            raise KvferryError("Pools: tp_rank %d outside TP %d" % (tp_rank, tp_size))
        self.spec, self.T, self.device = spec, tokens_per_block, torch.device(device)
        self.tp_size, self.tp_rank = tp_size, tp_rank
        self.num_blocks, self.num_slots = num_blocks, num_slots
        self._tensors = []
        self.k = self.v = None
        self.conv, self.rec = [], []
        if spec.attn:
            h, dk, dv, dt = spec.attn[spec.attn_layers[0]]
            hl = self.attn_local_heads()
            n = len(spec.attn_layers)
            self.k = self._alloc((n, num_blocks, tokens_per_block, hl, dk), dt)
            self.v = self._alloc((n, num_blocks, tokens_per_block, hl, dv), dt)
        if spec.state:
            convs, recs = spec.state[spec.state_layers[0]]
            n = len(spec.state_layers)
            segs = spec.segments[spec.state_layers[0]]
            if tp_size > 1 and segs is None:
                raise KvferryError("state layers %s: their conv state does not split into TP "
                                   "segments (%s); TP %d needs them"
                                   % (spec.state_layers, spec.describe(), tp_size))
            for ch, w, dt in convs:
                local = ch if segs is None else sum(s.local_heads(tp_size) * s.per_head
                                                    for s in segs)
                self.conv.append(self._alloc((n, num_slots, local, w), dt))
            for shape, dt in recs:
                local = (shape[0] // tp_size if tp_size > 1 else shape[0],) + tuple(shape[1:])
                if tp_size > 1 and shape[0] % tp_size:
                    raise KvferryError("recurrent state of %d heads does not split over TP %d"
                                       % (shape[0], tp_size))
                self.rec.append(self._alloc((n, num_slots) + local, dt))
        self._free_blocks = list(range(num_blocks))
        self._free_slots = list(range(num_slots))

    def _alloc(self, shape, dtype):
        torch = _torch()
        if self.device.type == "cpu":
            t = memory.host_tensor(shape, dtype, name="kvferry-hf")
        else:
            t = torch.zeros(shape, dtype=dtype, device=self.device)
        self._tensors.append(t)
        return t

    def close(self):
        """Forgets the pools' registrations (memfds, CUDA handles) once no client uses them;
        the tensors stay valid for Python."""
        for t in self._tensors:
            r = memory.find_region(t.data_ptr(), 1)
            if r is not None:
                memory.release(r)
        self._tensors = []

    def attn_local_heads(self):
        h = self.spec.attn[self.spec.attn_layers[0]][0]
        if self.tp_size == 1 or h == 1:
            return h  # MLA's latent (one head) is replicated
        if h % self.tp_size:
            raise KvferryError("%d KV heads do not split over TP %d" % (h, self.tp_size))
        return h // self.tp_size

    # ---- layout ----
    def layout(self, instance, role, model_config=None):
        """The rank's kvferry Layout over these pools (groups "attn" and "state")."""
        spec = self.spec
        lay = kl.Layout(instance, role, model_config if model_config is not None else spec.config,
                        self.T, spec.n_layers, tp_size=self.tp_size, tp_rank=self.tp_rank)
        if self.k is not None:
            h = spec.attn[spec.attn_layers[0]][0]
            lay.paged(ATTN, spec.attn_layers, {"k": self.k, "v": self.v}, "L b t h d",
                      global_heads=h, shard="replicated" if h == 1 else "sharded")
        if self.conv or self.rec:
            parts = []
            segs = spec.segments[spec.state_layers[0]]
            for j, conv in enumerate(self.conv):
                parts += self._conv_parts("conv%d" % j if j else "conv", conv, segs)
            for j, rec in enumerate(self.rec):
                g = spec.state[spec.state_layers[0]][1][j][0][0]
                parts += kl._state_parts("rec%d" % j if j else "rec", list(rec), 1, rec.shape[2], g,
                                         "sharded")
            lay._add(STATE, "state", spec.state_layers, parts)
        return lay

    def _conv_parts(self, name, conv, segs):
        whole = kl._state_parts(name, list(conv), 1, 1, 1, "sharded")[0]
        if segs is None:
            return [whole]
        es, w = conv.element_size(), conv.shape[3]
        out, off = [], 0
        for s in segs:
            hl = s.local_heads(self.tp_size)
            out.append(kl._Part("%s_%s" % (name, s.name), whole.regions,
                                [p + off for p in whole.ptrs], whole.item_stride, whole.n_items,
                                1, hl, s.per_head * w * es, s.heads, "sharded", whole.dtype))
            off += hl * s.per_head * w * es
        return out

    # ---- requests ----
    def blocks_for(self, n_tokens):
        return -(-n_tokens // self.T)

    def alloc(self, n_tokens):
        """Blocks for n_tokens and a slot, as an engine's block manager hands them out."""
        nb = self.blocks_for(n_tokens) if self.k is not None else 0
        if nb > len(self._free_blocks) or (self.conv or self.rec) and not self._free_slots:
            raise KvferryError("Pools: no room for %d tokens (%d blocks, %d slots free)"
                               % (n_tokens, len(self._free_blocks), len(self._free_slots)))
        blocks = [self._free_blocks.pop(0) for _ in range(nb)] if self.k is not None else None
        slot = self._free_slots.pop(0) if (self.conv or self.rec) else None
        return Request(n_tokens, blocks, slot)

    def free(self, req):
        if req.blocks:
            self._free_blocks += req.blocks
        if req.slot is not None:
            self._free_slots.append(req.slot)

    # ---- the rank's share of one sequence's tensors ----
    def _kv_share(self, t):
        hl = self.attn_local_heads()
        if hl == t.shape[0]:
            return t
        return t[self.tp_rank * hl:(self.tp_rank + 1) * hl]

    def _conv_share(self, conv, layer):
        segs = self.spec.segments[layer]
        if segs is None or self.tp_size == 1:
            return conv
        torch = _torch()
        out, off = [], 0
        for s in segs:
            hl, h0 = s.local_heads(self.tp_size), s.first_head(self.tp_size, self.tp_rank)
            out.append(conv[off + h0 * s.per_head:off + (h0 + hl) * s.per_head])
            off += s.channels
        return torch.cat(out)

    def _rec_share(self, rec):
        if self.tp_size == 1:
            return rec
        h = rec.shape[0] // self.tp_size
        return rec[self.tp_rank * h:(self.tp_rank + 1) * h]

    # ---- export (context) ----
    def export(self, cache, req, batch_index=0):
        """Writes sequence batch_index of a prefill's cache (this rank's share) into req's
        blocks and slot. The tokens past req.n_tokens in its last block are zeroed."""
        torch = _torch()
        layers = cache.layers
        if self.k is not None:
            idx = torch.tensor(req.blocks, dtype=torch.long, device=self.device)
            pad = len(req.blocks) * self.T
            for li, layer in enumerate(self.spec.attn_layers):
                lyr = layers[layer]
                n = lyr.keys.shape[2]
                if n != req.n_tokens:
                    raise KvferryError("layer %d holds %d tokens, the request %d"
                                       % (layer, n, req.n_tokens))
                for pool, t in ((self.k, lyr.keys), (self.v, lyr.values)):
                    seq = self._kv_share(t[batch_index]).transpose(0, 1)  # [s, h, d]
                    buf = torch.zeros((pad,) + tuple(seq.shape[1:]), dtype=pool.dtype,
                                      device=self.device)
                    buf[:n] = seq
                    pool[li].index_copy_(0, idx, buf.view(len(req.blocks), self.T,
                                                          *seq.shape[1:]))
        for li, layer in enumerate(self.spec.state_layers):
            lyr = layers[layer]
            for pool, t in zip(self.conv, _states(getattr(lyr, "conv_states", None))):
                pool[li, req.slot].copy_(self._conv_share(t[batch_index], layer))
            for pool, t in zip(self.rec, _states(getattr(lyr, "recurrent_states", None))):
                pool[li, req.slot].copy_(self._rec_share(t[batch_index]))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # ---- import (generation) ----
    def gather(self, req):
        """This rank's tensors of the request, batch dim 1, contiguous, as transformers holds
        them: {layer: ("attn", keys, values) | ("state", [conv], [recurrent])}."""
        torch = _torch()
        out = {}
        if self.k is not None:
            idx = torch.tensor(req.blocks, dtype=torch.long, device=self.device)
            n = req.n_tokens
            for li, layer in enumerate(self.spec.attn_layers):
                kv = []
                for pool in (self.k, self.v):
                    blk = pool[li].index_select(0, idx)
                    seq = blk.reshape(-1, *blk.shape[2:])[:n]  # [s, h, d]
                    kv.append(seq.transpose(0, 1).unsqueeze(0).contiguous())
                out[layer] = (ATTN, kv[0], kv[1])
        for li, layer in enumerate(self.spec.state_layers):
            out[layer] = (STATE, [p[li, req.slot].unsqueeze(0).clone() for p in self.conv],
                          [p[li, req.slot].unsqueeze(0).clone() for p in self.rec])
        return out

    def to_cache(self, cache, req, device=None):
        """Fills an empty DynamicCache(config=...) with the request (see fill_cache)."""
        return fill_cache(cache, self.gather(req), device, self.spec)


def merge(spec, shares):
    """Joins the gathered tensors of TP ranks 0..n-1 (Pools.gather of each) into the whole
    model's: KV heads and recurrent heads concatenated, conv segments joined per segment;
    replicated parts taken from rank 0."""
    torch = _torch()
    tp = len(shares)
    out = {}
    for layer, first in shares[0].items():
        if first[0] == ATTN:
            h = spec.attn[layer][0]
            if h == 1:
                out[layer] = first
            else:
                out[layer] = (ATTN, torch.cat([s[layer][1] for s in shares], 1),
                              torch.cat([s[layer][2] for s in shares], 1))
            continue
        segs = spec.segments[layer]
        convs = []
        for j in range(len(first[1])):
            parts, off = [], 0
            for s in segs:
                hl = s.local_heads(tp)
                if s.heads < tp:
                    parts.append(first[1][j][:, off:off + hl * s.per_head])
                else:
                    parts += [sh[layer][1][j][:, off:off + hl * s.per_head] for sh in shares]
                off += hl * s.per_head
            convs.append(torch.cat(parts, 1).contiguous())
        recs = [torch.cat([sh[layer][2][j] for sh in shares], 1).contiguous()
                for j in range(len(first[2]))]
        out[layer] = (STATE, convs, recs)
    return out


def fill_cache(cache, tensors, device=None, spec=None):
    """Puts gathered tensors into an empty transformers DynamicCache(config=...) through its
    own update methods (update; update_conv_state and update_recurrent_state), so its layers
    carry the flags a prefill leaves (has_previous_state, ...; with spec, any boolean one the
    methods left otherwise is set as spec's prefill left it). Checks that every layer then
    holds exactly these bytes."""
    torch = _torch()
    for layer in sorted(tensors):
        kind, a, b = tensors[layer]
        if device is not None:
            a = a.to(device) if kind == ATTN else [x.to(device) for x in a]
            b = b.to(device) if kind == ATTN else [x.to(device) for x in b]
        if kind == ATTN:
            cache.update(a, b, layer)
            lyr = cache.layers[layer]
            ok = torch.equal(lyr.keys, a) and torch.equal(lyr.values, b)
        else:
            _fill_state(cache, layer, a, b)
            lyr = cache.layers[layer]
            for k, v in (spec.flags.get(layer, {}) if spec is not None else {}).items():
                if hasattr(lyr, k):
                    cur = getattr(lyr, k)
                    setattr(lyr, k, type(cur)(v) if isinstance(cur, (list, tuple)) else v)
            ok = (all(torch.equal(x, y) for x, y in zip(_states(lyr.conv_states), a)) and
                  all(torch.equal(x, y) for x, y in zip(_states(lyr.recurrent_states), b)))
        if not ok:
            raise KvferryError("layer %d: the rebuilt cache does not hold the received bytes "
                               "(this transformers' %s stores them differently)"
                               % (layer, type(cache.layers[layer]).__name__))
    return cache


def _fill_state(cache, layer, convs, recs):
    """A fresh layer given exactly W columns keeps them (transformers keeps the last W)."""
    for j, conv in enumerate(convs):
        kw = {"state_idx": j} if len(convs) > 1 else {}
        try:
            cache.update_conv_state(conv, layer, conv_kernel_size=conv.shape[-1], **kw)
        except TypeError:  # a version without the conv_kernel_size keyword
            cache.update_conv_state(conv, layer, **kw)
    for j, rec in enumerate(recs):
        kw = {"state_idx": j} if len(recs) > 1 else {}
        cache.update_recurrent_state(rec, layer, **kw)


def sequence_tensors(cache, spec, batch_index=0):
    """A prefill cache's tensors for one sequence, in gather()'s form (what the decode side
    should receive, for comparison and hashing)."""
    out = {}
    for layer in spec.attn_layers:
        lyr = cache.layers[layer]
        out[layer] = (ATTN, lyr.keys[batch_index:batch_index + 1].contiguous(),
                      lyr.values[batch_index:batch_index + 1].contiguous())
    for layer in spec.state_layers:
        lyr = cache.layers[layer]
        out[layer] = (STATE, [c[batch_index:batch_index + 1].contiguous()
                              for c in _states(lyr.conv_states)],
                      [r[batch_index:batch_index + 1].contiguous()
                       for r in _states(lyr.recurrent_states)])
    return out


def digest(tensors):
    """BLAKE2b-128 over every byte of gathered tensors, layer by layer in order."""
    h = hashlib.blake2b(digest_size=16)
    for layer in sorted(tensors):
        kind, a, b = tensors[layer]
        for t in ([a, b] if kind == ATTN else list(a) + list(b)):
            h.update(str((layer, tuple(t.shape), str(t.dtype))).encode())
            h.update(t.detach().contiguous().view(-1).view(_torch().uint8).cpu().numpy().tobytes())
    return h.hexdigest()
