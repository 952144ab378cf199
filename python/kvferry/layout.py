"""Layouts built from the tensors an engine already has (no hand-written JSON).

A layout (lib/layout.h, docs in the top README) says where every byte of a rank's KV cache and
recurrent state lives: groups (paged: a request owns blocks; state: a request owns one slot),
each with views (pool, base, layer_stride, item_stride, region_bytes) whose region per
(layer, item) holds head-structured tensors [outer][heads][inner bytes].

Here a group is described by the engine's own per-layer tensors and a string naming each of
their dimensions; strides and offsets are read from the tensors, so any view PyTorch can express
(permuted, as_strided, carved from one buffer) is described exactly:
    b   the block (paged item) index        s   the state slot (state item) index
    n   a token slot of a token-granular pool (SGLang): a block is tokens_per_block of them
    t   the token inside a block            kv  K/V selector (size 2)
    h   heads                               d   the head dimension (innermost, contiguous)
    L   the layer (one tensor holds every layer: TensorRT-LLM pools)
Engine shapes (helpers below):
    vLLM v1 FlashAttention  (2, blocks, T, H, D)   "kv b t h d"
    vLLM v1 FlashInfer      (blocks, 2, T, H, D)   "b kv t h d"  (HND: same, permuted strides)
    vLLM v1 MLA             (blocks, T, 576)       "b t d"
    SGLang MHA k/v_buffer   (tokens, H, D) each    "n h d"
    SGLang MLA kv_buffer    (tokens, 1, 576)       "n h d"
    TensorRT-LLM pool       (L, blocks, 2, H, T, D) "L b kv h t d" (or block-major "b L kv h t d")
Parts of a block that are adjacent in memory become tensors of one view; others get views of
their own. Layers evenly spaced in one allocation make a uniform view (pool, base,
layer_stride); the engine's own per-layer tensors (separate allocations, as vLLM and SGLang make
them) a per-layer view (one pool and base per layer, docs/LAYOUT.md). The layout is checked offline by the daemon's own decoder (Layout.check(): kvferryctl
check-layout), and again by the daemon at REGISTER.

Fingerprint: both sides must name the same model; it is derived from the model config the
engine passes, never a free string: "kvf1-" + the first 32 hex digits of BLAKE2b-128 of the
canonical JSON of the config (json.dumps(cfg, sort_keys=True, separators=(",", ":"),
default=str), a dict, or an object with to_dict() such as a Hugging Face PretrainedConfig);
pass the same config on both sides (the KV dtype and block size are checked separately)."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

from . import _lib, memory
from .errors import KvferryError, from_text, RegistrationError

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8",
          "float8_e5m2": "fp8", "uint8": "u8", "int8": "u8"}

# lib/layout.h limits (checked again by the library; here for early, local messages)
MAX_GROUPS, MAX_VIEWS, MAX_TENSORS, MAX_POOLS = 16, 8, 4, 1024


def _ctl():
    """kvferryctl: $KVFERRY_CTL, beside the loaded library (a build tree), PREFIX/bin, PATH."""
    env = os.environ.get("KVFERRY_CTL")
    if env:
        return env
    libdir = os.path.dirname(os.path.abspath(_lib.lib()._name))
    for cand in (os.path.join(libdir, "kvferryctl"),
                 os.path.join(os.path.dirname(libdir), "bin", "kvferryctl"),
                 os.path.join(os.path.dirname(os.path.dirname(libdir)), "bin", "kvferryctl"),
                 shutil.which("kvferryctl")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise KvferryError("kvferryctl not found (beside %s, in PREFIX/bin or on PATH): set "
                       "KVFERRY_CTL to check a layout offline" % libdir)


def fingerprint(model_config):
    """The documented hash of a model config (see the module doc)."""
    if hasattr(model_config, "to_dict"):
        model_config = model_config.to_dict()
    if isinstance(model_config, str):
        raise KvferryError("fingerprint: pass the model config (a dict), not a string")
    text = json.dumps(model_config, sort_keys=True, separators=(",", ":"), default=str)
    return "kvf1-" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _dtype(t):
    name = str(t.dtype).replace("torch.", "")
    if name not in DTYPES:
        raise KvferryError("dtype %s: kvferry moves bf16, fp16, fp32, fp8 and u8 tensors" % name)
    return DTYPES[name]


class _Part:
    """One head-structured tensor of an item, on every layer."""

    def __init__(self, name, regions, ptrs, item_stride, n_items, outer, heads, inner,
                 global_heads, shard, dtype):
        # per layer: the allocation (memory.Region) holding it and the address of its item 0
        self.name, self.regions, self.ptrs = name, regions, ptrs
        self.item_stride, self.n_items = item_stride, n_items
        self.outer, self.heads, self.inner = outer, heads, inner
        self.global_heads, self.shard, self.dtype = global_heads, shard, dtype

    @property
    def nbytes(self):
        return self.outer * self.heads * self.inner


def _layer_ptrs(tensors, dims, esize):
    """Per-layer tensors (a list) or one tensor with an L dimension -> (tensor of layer 0, the
    remaining dims, the address of each layer's element 0, each layer's Region)."""
    if "L" in dims:
        if not hasattr(tensors, "shape"):
            raise KvferryError("dims name L: pass one tensor holding every layer")
        i = dims.index("L")
        ptrs = [tensors.data_ptr() + k * tensors.stride(i) * esize for k in range(tensors.shape[i])]
        region = memory.region_of(tensors)
        return tensors.select(i, 0), [x for x in dims if x != "L"], ptrs, [region] * len(ptrs)
    if hasattr(tensors, "shape"):
        tensors = [tensors]
    tensors = list(tensors)
    if not tensors:
        raise KvferryError("no tensors for the group")
    t0 = tensors[0]
    for k, t in enumerate(tensors):
        if tuple(t.shape) != tuple(t0.shape) or t.stride() != t0.stride() or t.dtype != t0.dtype:
            raise KvferryError("layer %d tensor %s stride %s %s differs from layer 0's %s %s %s"
                               % (k, tuple(t.shape), t.stride(), t.dtype, tuple(t0.shape),
                                  t0.stride(), t0.dtype))
    return t0, list(dims), [t.data_ptr() for t in tensors], [memory.region_of(t) for t in tensors]


def _global_count(where, what, local, tp_eff, given, param, shard="sharded"):
    """The model-wide count of a dimension this rank holds `local` of (heads, groups): `given`
    when passed; a replicated tensor's own; else local x tp_eff, unless one per rank at
    tp_eff > 1, which is either tp_eff split ones or fewer replicated (vLLM keeps a head or a
    group on several ranks when there are fewer than ranks): then the caller must say."""
    if given is not None:
        return given
    if shard != "sharded" or tp_eff == 1:
        return local
    if local > 1:
        return local * tp_eff
    raise KvferryError("%s: 1 %s per rank at tp_eff %d is %d split ones or fewer replicated: "
                       "pass %s= (the model's count of %s)" % (where, what, tp_eff, tp_eff, param,
                                                               what))


def _parts(name, tensors, dims, tokens_per_block, global_heads, shard, kv_names, tp_eff=1):
    """Splits per-layer tensors of the given dims into parts (one per K/V, for paged caches)."""
    dims = dims.split() if isinstance(dims, str) else list(dims)
    first = tensors if hasattr(tensors, "shape") else list(tensors)[0]
    esize = first.element_size()
    t0, dims, ptrs, regions = _layer_ptrs(tensors, dims, esize)
    if len(dims) != t0.dim():
        raise KvferryError("%s: dims %r name %d dimensions, the tensor has %d (%s)"
                           % (name, " ".join(dims), len(dims), t0.dim(), tuple(t0.shape)))
    if len(set(dims)) != len(dims):
        raise KvferryError("%s: dims %r repeat a name" % (name, " ".join(dims)))
    size = dict(zip(dims, t0.shape))
    stride = dict(zip(dims, t0.stride()))
    if "n" in dims:  # token-granular: a block is tokens_per_block token slots
        if size["n"] % tokens_per_block:
            raise KvferryError("%s: %d token slots are not whole blocks of %d tokens"
                               % (name, size["n"], tokens_per_block))
        n_items, item_stride = size["n"] // tokens_per_block, stride["n"] * tokens_per_block
        size["t"], stride["t"] = tokens_per_block, stride["n"]
    elif "b" in dims:
        n_items, item_stride = size["b"], stride["b"]
    else:
        raise KvferryError("%s: dims %r name no block (b) or token slot (n)" % (name, " ".join(dims)))
    T, H, D = size.get("t", 1), size.get("h", 1), size.get("d", 1)
    st, sh, sd = stride.get("t", 0), stride.get("h", 0), stride.get("d", 1)
    if "d" in size and sd != 1:
        raise KvferryError("%s: the head dimension d must be contiguous (stride %d)" % (name, sd))
    if (T == 1 or st == H * D) and (H == 1 or sh == D):
        outer, inner = T, D * esize           # NHD: [token][head][dim]
    elif (H == 1 or sh == T * D) and (T == 1 or st == D):
        outer, inner = 1, T * D * esize       # HND: [head][token][dim]
    else:
        raise KvferryError("%s: a block of shape t=%d h=%d d=%d with strides t=%d h=%d is "
                           "neither NHD nor HND contiguous" % (name, T, H, D, st, sh))
    global_heads = _global_count(name, "heads", H, tp_eff, global_heads, "global_heads", shard)
    dt = _dtype(t0)
    kvs = [(kv_names[0] if "kv" in dims else name, 0)]
    if "kv" in dims:
        if size["kv"] != 2:
            raise KvferryError("%s: the kv dimension has size %d, not 2" % (name, size["kv"]))
        kvs.append((kv_names[1], stride["kv"] * esize))
    out = []
    for pname, off in kvs:
        out.append(_Part(pname, regions, [p + off for p in ptrs], item_stride * esize, n_items,
                         outer, H, inner, global_heads, shard, dt))
    for p in out:
        for r, ptr in zip(p.regions, p.ptrs):
            span = (p.n_items - 1) * p.item_stride + p.nbytes
            if not r.contains(ptr, span):
                raise KvferryError("%s: a layer's blocks leave the allocation holding it" % name)
    return out


def _state_parts(name, tensors, outer, heads, global_heads, shard, tp_eff=1):
    """A state tensor per layer of shape (slots, ...), the rest contiguous per slot."""
    first = tensors if hasattr(tensors, "shape") else list(tensors)[0]
    t0, _, ptrs, regions = _layer_ptrs(tensors,
                                       ["s"] + ["x%d" % i for i in range(first.dim() - 1)],
                                       first.element_size())
    esize = t0.element_size()
    expect = 1
    for d in range(t0.dim() - 1, 0, -1):
        if t0.shape[d] != 1 and t0.stride(d) != expect:
            raise KvferryError("%s: a slot of shape %s must be contiguous (strides %s)"
                               % (name, tuple(t0.shape[1:]), t0.stride()[1:]))
        expect *= t0.shape[d]
    slot_bytes = expect * esize
    if slot_bytes % (outer * heads):
        raise KvferryError("%s: %d bytes per slot do not split into outer %d x heads %d"
                           % (name, slot_bytes, outer, heads))
    return [_Part(name, regions, ptrs, t0.stride(0) * esize, t0.shape[0], outer,
                  heads, slot_bytes // (outer * heads),
                  _global_count(name, "heads", heads, tp_eff, global_heads, "global_heads", shard),
                  shard, _dtype(t0))]


class Layout:
    """One rank's layout. Add groups, then Client.register(layout)."""

    def __init__(self, instance, role, model_config, tokens_per_block, n_layers_total,
                 tp_size=1, tp_rank=0, pp_size=1, pp_rank=0, attention_dp=False):
        if role not in ("context", "generation"):
            raise KvferryError("role: 'context' or 'generation', not %r" % (role,))
        self.instance, self.role = instance, role
        self.fingerprint = fingerprint(model_config)
        self.tokens_per_block, self.n_layers_total = tokens_per_block, n_layers_total
        self.tp_size, self.tp_rank, self.pp_size, self.pp_rank = tp_size, tp_rank, pp_size, pp_rank
        self.attention_dp = bool(attention_dp)
        self.groups = []  # (name, kind, layers, [_Part])
        self.aliases = {}  # group name -> alias of its views

    # ---- groups ----
    def paged(self, name, layers, tensors, dims, global_heads=None, shard="sharded",
              kv_names=("k", "v"), alias=None):
        """A paged group: per-layer KV tensors (a list, or one tensor with an L dim) whose dims
        are named by `dims`; or a dict {"k": tensors, "v": tensors} with the same dims for
        K and V kept apart (SGLang's k_buffer / v_buffer). alias: the name under which this
        group's memory is shared by design with other groups' (vLLM's hybrid allocator: one raw
        tensor per layer pair holds attention pages and Mamba state pages). global_heads: the
        model's KV heads; default this rank's heads x the layout's effective TP (tp_size, or 1
        with attention_dp) for a sharded group, its own for a replicated one; required where a
        rank holds 1 head at TP > 1 (split, or replicated over several ranks)."""
        parts = []
        tpe = layout_tp_eff(self)
        if isinstance(tensors, dict):
            for pname, ts in tensors.items():
                parts += _parts(pname, ts, dims, self.tokens_per_block, global_heads, shard,
                                kv_names, tpe)
        else:
            parts = _parts(name, tensors, dims, self.tokens_per_block, global_heads, shard,
                           kv_names, tpe)
        return self._add(name, "paged", layers, parts, alias)

    def state(self, name, layers, tensors, alias=None):
        """A state group: tensors is a list of (tensor_name, per-layer tensors of shape
        (slots, ...), outer, heads[, global_heads[, shard]]): each slot's bytes are
        [outer][heads][inner]; heads are this rank's local heads, global_heads the model's
        (default as paged's: heads x the effective TP)."""
        parts = []
        for spec in tensors:
            tname, ts, outer, heads = spec[:4]
            gh = spec[4] if len(spec) > 4 else None
            shard = spec[5] if len(spec) > 5 else "sharded"
            parts += _state_parts(tname, ts, outer, heads, gh, shard, layout_tp_eff(self))
        return self._add(name, "state", layers, parts, alias)

    def _add(self, name, kind, layers, parts, alias=None):
        layers = list(layers)
        for p in parts:
            if len(p.ptrs) != len(layers):
                raise KvferryError("group %s: %d layers named, tensors for %d"
                                   % (name, len(layers), len(p.ptrs)))
        if len({p.n_items for p in parts}) > 1:
            raise KvferryError("group %s: its tensors disagree on the item count (%s)"
                               % (name, sorted({p.n_items for p in parts})))
        self.groups.append((name, kind, layers, parts))
        if alias:
            self.aliases[name] = alias
        return self

    # ---- encoding ----
    def regions(self):
        out = []
        seen = set()
        for _, _, _, parts in self.groups:
            for p in parts:
                for r in p.regions:
                    if id(r) not in seen:
                        seen.add(id(r))
                        out.append(r)
        return out

    def _views(self, gname, parts, index):
        """Parts adjacent in every layer (same allocation, same item stride) share a view;
        evenly spaced layers in one allocation make a uniform view, others a per-layer one."""
        views = []
        for p in parts:
            v = views[-1] if views else None
            if (v is not None and v["item_stride"] == p.item_stride
                    and len(v["tensors"]) < MAX_TENSORS
                    and all(a is b for a, b in zip(v["_regions"], p.regions))
                    and all(q == b + v["region_bytes"] for q, b in zip(p.ptrs, v["_ptrs"]))):
                off = v["region_bytes"]
            else:
                v = {"name": p.name, "_regions": p.regions, "_ptrs": p.ptrs,
                     "item_stride": p.item_stride, "region_bytes": 0, "tensors": []}
                views.append(v)
                off = 0
            v["tensors"].append({"name": p.name, "offset": off, "outer": p.outer,
                                 "heads": p.heads, "inner": p.inner,
                                 "global_heads": p.global_heads, "shard": p.shard,
                                 "dtype": p.dtype})
            v["region_bytes"] += p.nbytes
            if len(v["tensors"]) > 1:
                v["name"] = gname if len(views) == 1 else "%s%d" % (gname, len(views) - 1)
        out = []
        for v in views:
            regs, ptrs = v.pop("_regions"), v.pop("_ptrs")
            strides = {b - a for a, b in zip(ptrs, ptrs[1:])}
            addr = {}
            if all(r is regs[0] for r in regs) and (len(ptrs) == 1 or
                                                    (len(strides) == 1 and min(strides) > 0)):
                addr = {"pool": index[id(regs[0])], "base": ptrs[0] - regs[0].ptr,
                        "layer_stride": strides.pop() if strides else 0}
            else:  # the engine's own per-layer tensors (vLLM, SGLang): one address per layer
                addr = {"per_layer": [{"pool": index[id(r)], "base": q - r.ptr}
                                      for r, q in zip(regs, ptrs)]}
            out.append(dict(name=v["name"], **addr, item_stride=v["item_stride"],
                            region_bytes=v["region_bytes"], tensors=v["tensors"]))
        return out

    def to_dict(self):
        regions = self.regions()
        index = {id(r): i for i, r in enumerate(regions)}
        devs = {r.device for r in regions}
        if len(devs) > 1:
            raise KvferryError("a rank's pools are on one device (or all on the host), got %s"
                               % sorted(devs))
        groups = []
        for name, kind, layers, parts in self.groups:
            views = self._views(name, parts, index)
            for v in views:
                if name in self.aliases:
                    v["alias"] = self.aliases[name]
            groups.append({"name": name, "kind": kind, "layers": layers,
                           "n_items": parts[0].n_items, "views": views})
        return {"instance": self.instance, "role": self.role, "tp_size": self.tp_size,
                "tp_rank": self.tp_rank, "pp_size": self.pp_size, "pp_rank": self.pp_rank,
                "attention_dp": self.attention_dp,
                "device": devs.pop() if devs else -1,
                "fingerprint": self.fingerprint, "tokens_per_block": self.tokens_per_block,
                "n_layers_total": self.n_layers_total,
                "pools": [{"kind": "host" if r.device < 0 else "cuda", "device": r.device,
                           "bytes": r.nbytes} for r in regions],
                "groups": groups}

    def to_json(self):
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def check(self):
        """Runs the daemon's own decoder and checks on the JSON (`kvferryctl check-layout`, offline)
        and raises RegistrationError with its message (naming the field) when it would be
        refused. Returns the JSON."""
        text = self.to_json()
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="kvf-layout-") as f:
            f.write(text)
            f.flush()
            out = subprocess.run([_ctl(), "check-layout", f.name], capture_output=True, text=True,
                                 timeout=60)
        if out.returncode != 0:
            msg = out.stderr.strip().replace(f.name + ": ", "", 1) or out.stdout.strip()
            raise from_text("BAD_REQUEST: layout: " + msg, RegistrationError)
        return text

    def pools(self):
        regions = self.regions()
        arr = (_lib.Pool * max(len(regions), 1))()
        for i, r in enumerate(regions):
            arr[i] = r.pool
        return arr, len(regions)

    def group_index(self, name):
        for i, g in enumerate(self.groups):
            if g[0] == name:
                return i
        raise KvferryError("no group %r in the layout (groups: %s)"
                           % (name, ", ".join(g[0] for g in self.groups)))


# ---- engine-shaped helpers ----

def vllm_attention(layout, name, layers, kv_caches, backend="flash_attn", global_heads=None,
                   alias=None):
    """vLLM v1 per-layer attention caches (each layer's kv_cache tensor, as the model runner
    binds them): backend "flash_attn" (2, blocks, T, H, D), "flashinfer" (blocks, 2, T, H, D;
    NHD or HND through the tensor's strides), "mla" (blocks, T, latent) replicated."""
    if backend == "flash_attn":
        return layout.paged(name, layers, kv_caches, "kv b t h d", global_heads, alias=alias)
    if backend == "flashinfer":
        return layout.paged(name, layers, kv_caches, "b kv t h d", global_heads, alias=alias)
    if backend == "mla":
        return layout.paged(name, layers, kv_caches, "b t d", 1, "replicated", ("kv", "kv"),
                            alias=alias)
    raise KvferryError("vllm_attention backend %r: flash_attn, flashinfer or mla" % backend)


def vllm_kda_state(layout, name, layers, states, heads, global_heads=None, shard="sharded",
                   alias=None):
    """vLLM v1 Kimi Delta Attention state per layer: (q_conv, k_conv, v_conv, recurrent), each
    (slots, ...): convs (W-1, H_local*hd) -> [W-1][H_local][hd], recurrent (H_local, hd, hd)."""
    specs = []
    for tname, k in (("q_conv", 0), ("k_conv", 1), ("v_conv", 2), ("ssm", 3)):
        ts = [s[k] for s in states]
        outer = 1 if tname == "ssm" else ts[0].shape[1]
        specs.append((tname, ts, outer, heads, global_heads, shard))
    return layout.state(name, layers, specs, alias)


def mamba2_state(layout, name, layers, states, nheads, global_heads=None, alias=None,
                 n_groups=None, dim_first=None):
    """vLLM v1 Mamba2 state per layer: (conv, ssm (slots, nheads, hd, d_state)), nheads this
    rank's heads. The conv state's channels are x (nheads * hd) | B | C (groups * d_state
    each); under TP each segment is split on its own (x by heads, B and C by groups: vLLM's
    conv1d weight loader and MambaStateShapeCalculator.mamba2_state_shape), so the channels a
    rank holds are x_r | B_r | C_r. conv is (slots, width, conv_dim) ("SD": vLLM v1's default,
    contiguous along the channels) or (slots, conv_dim, width) ("DS": dim-first, vLLM's
    is_conv_state_dim_first, V0; as the C presets describe it); width is W-1 (vLLM) or W, the
    same on both sides. dim_first None: read from the shape (conv_dim > width).
      DS: conv_x [nheads][hd*width] then conv_bc [2 (B, C)][groups][d_state*width]
      SD: per row w of the width, conv_x<w> [nheads][hd] then conv_bc<w> [2][groups][d_state]
    n_groups: the model's n_groups (config n_groups, not this rank's): default this rank's
    groups x the effective TP; required where a rank holds 1 group at TP > 1 (fewer groups than
    ranks are replicated as vLLM does, extra_groups_for_head_shards). global_heads: the model's
    heads, default nheads x the effective TP."""
    conv = [s[0] for s in states]
    ssm = [s[1] for s in states]
    c0, s0 = conv[0], ssm[0]
    if s0.dim() != 4 or s0.shape[1] != nheads:
        raise KvferryError("mamba2_state: ssm of shape %s is not (slots, nheads=%d, hd, d_state)"
                           % (tuple(s0.shape), nheads))
    if c0.dim() != 3:
        raise KvferryError("mamba2_state: conv of shape %s is not (slots, width, conv_dim) or "
                           "(slots, conv_dim, width)" % (tuple(c0.shape),))
    hd, n = s0.shape[2], s0.shape[3]
    if dim_first is None:
        dim_first = c0.shape[1] > c0.shape[2]
    conv_dim, width = (c0.shape[1], c0.shape[2]) if dim_first else (c0.shape[2], c0.shape[1])
    bc = conv_dim - nheads * hd
    if bc <= 0 or bc % (2 * n):
        raise KvferryError("mamba2_state: %d conv channels are not x (nheads %d x hd %d) + "
                           "B|C (2 x groups x d_state %d)" % (conv_dim, nheads, hd, n))
    groups, tpe = bc // (2 * n), layout_tp_eff(layout)
    gh = _global_count("mamba2_state", "heads", nheads, tpe, global_heads, "global_heads")
    gg = _global_count("mamba2_state", "groups", groups, tpe, n_groups, "n_groups")
    whole = _state_parts("conv", conv, 1, 1, 1, "sharded")[0]  # checks each slot is contiguous
    es = c0.element_size()

    def part(pname, off, outer, heads, inner, glob):
        return _Part(pname, whole.regions, [p + off for p in whole.ptrs], whole.item_stride,
                     whole.n_items, outer, heads, inner, glob, "sharded", whole.dtype)
    if dim_first:
        parts = [part("conv_x", 0, 1, nheads, hd * width * es, gh),
                 part("conv_bc", nheads * hd * width * es, 2, groups, n * width * es, gg)]
    else:
        parts = []
        for w in range(width):
            row = w * conv_dim * es
            parts += [part("conv_x%d" % w, row, 1, nheads, hd * es, gh),
                      part("conv_bc%d" % w, row + nheads * hd * es, 2, groups, n * es, gg)]
    parts += _state_parts("ssm", ssm, 1, nheads, gh, "sharded", tpe)
    return layout._add(name, "state", layers, parts, alias)


def layout_tp_eff(layout):
    """Shards a sharded tensor is split into (lib/layout.h layout_tp_eff)."""
    return 1 if layout.attention_dp else layout.tp_size


def sglang_mha(layout, name, layers, k_buffer, v_buffer, global_heads=None):
    """SGLang MHATokenToKVPool: k_buffer[l], v_buffer[l] of (tokens, H, D); pages of
    tokens_per_block (page_size) token slots are the blocks."""
    return layout.paged(name, layers, {"k": k_buffer, "v": v_buffer}, "n h d", global_heads)


def sglang_mla(layout, name, layers, kv_buffer):
    """SGLang MLATokenToKVPool: kv_buffer[l] of (tokens, 1, kv_lora_rank + qk_rope_head_dim),
    replicated across TP."""
    return layout.paged(name, layers, kv_buffer, "n h d", 1, "replicated", ("kv", "kv"))


def trtllm_pool(layout, name, layers, pool, layer_major=True, global_heads=None):
    """TensorRT-LLM KV pool: (L, blocks, 2, H, T, D) layer-major, or (blocks, L, 2, H, T, D)."""
    return layout.paged(name, layers, pool,
                        "L b kv h t d" if layer_major else "b L kv h t d", global_heads)
