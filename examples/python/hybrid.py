"""A hybrid model's KV cache allocated the way vLLM v1 does it (gpu_model_runner's
_allocate_kv_cache_tensors / _reshape_kv_cache_tensors): one raw int8 buffer per layer, viewed
per layer: full-attention layers get (2, blocks, block_size, kv_heads, head_dim) FlashAttention
caches, KDA (Kimi Delta Attention) layers get (q_conv, k_conv, v_conv, recurrent) state tensors
per slot (as_strided into the layer's pages). Also the kvferry layout of it (per-layer views: one
pool per layer) and a deterministic fill."""
import torch

import kvferry
from kvferry import layout as kl

# A small Kimi-Linear-like model: every 4th layer full attention, the rest KDA.
MODEL = {"model_type": "kimi_linear", "num_hidden_layers": 8, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 64, "kda_heads": 8, "kda_head_dim": 32,
         "short_conv_kernel_size": 4, "torch_dtype": "bfloat16"}
BLOCK_SIZE = 16


def layers():
    n = MODEL["num_hidden_layers"]
    attn = [i for i in range(n) if (i + 1) % 4 == 0]
    kda = [i for i in range(n) if i not in attn]
    return attn, kda


class HybridCache:
    """Per-layer tensors exactly as a vLLM v1 worker of TP rank tp_rank holds them."""

    def __init__(self, num_blocks, num_slots, tp_size=1, tp_rank=0, device="cpu", alloc=None):
        """alloc(nbytes) -> an int8 tensor: where the raw buffers come from (default: a
        kvferry.host_tensor on CPU, PyTorch's caching allocator on CUDA)."""
        self.tp_size, self.tp_rank = tp_size, tp_rank
        attn, kda = layers()
        self.attn_layers, self.kda_layers = attn, kda
        h_kv = MODEL["num_key_value_heads"] // tp_size
        d = MODEL["head_dim"]
        H = MODEL["kda_heads"] // tp_size
        hd = MODEL["kda_head_dim"]
        W = MODEL["short_conv_kernel_size"]
        dt = torch.bfloat16
        self.h_kv, self.H = h_kv, H

        def raw(nbytes):
            if alloc is not None:
                return alloc(nbytes)
            if device == "cpu":
                return kvferry.host_tensor((nbytes,), torch.int8)
            return torch.zeros(nbytes, dtype=torch.int8, device=device)

        # attention layers: one raw buffer per layer (vLLM's KVCacheTensor), viewed as the
        # FlashAttention cache (2, blocks, block_size, h_kv, d)
        per_layer = 2 * num_blocks * BLOCK_SIZE * h_kv * d * 2
        self.kv_caches = {}
        for layer in attn:
            self.kv_caches[layer] = raw(per_layer).view(dt).view(2, num_blocks, BLOCK_SIZE, h_kv, d)
        # KDA layers: one raw buffer per layer, a page per slot holding the q/k/v conv states
        # (W-1, H*hd) then the fp32 recurrent state (H, hd, hd), as vLLM's MambaSpec pages
        # (as_strided views into the raw tensor)
        conv_elems = (W - 1) * H * hd
        page = 3 * conv_elems * 2 + H * hd * hd * 4
        self.states = {}
        for layer in kda:
            base = raw(page * num_slots)
            b16 = base.view(dt)
            convs = [torch.as_strided(b16, (num_slots, W - 1, H * hd), (page // 2, H * hd, 1),
                                      b16.storage_offset() + k * conv_elems) for k in range(3)]
            f32 = base.view(torch.float32)
            rec = torch.as_strided(f32, (num_slots, H, hd, hd), (page // 4, hd * hd, hd, 1),
                                   f32.storage_offset() + 3 * conv_elems * 2 // 4)
            self.states[layer] = tuple(convs) + (rec,)

    def layout(self, instance, role):
        lay = kl.Layout(instance, role, MODEL, BLOCK_SIZE, MODEL["num_hidden_layers"],
                        tp_size=self.tp_size, tp_rank=self.tp_rank)
        kl.vllm_attention(lay, "attn", self.attn_layers,
                          [self.kv_caches[i] for i in self.attn_layers],
                          global_heads=MODEL["num_key_value_heads"])
        kl.vllm_kda_state(lay, "kda", self.kda_layers, [self.states[i] for i in self.kda_layers],
                          heads=self.H, global_heads=MODEL["kda_heads"])
        return lay

    def fill(self, seed, blocks, slot):
        """Writes request `seed`'s bytes into these blocks and slot (the prefill's output)."""
        g = torch.Generator().manual_seed(seed)
        for layer in self.attn_layers:
            kv = self.kv_caches[layer]
            val = torch.randn((2, len(blocks)) + tuple(kv.shape[2:]), generator=g).to(kv.dtype)
            kv[:, blocks] = val.to(kv.device)
        for layer in self.kda_layers:
            for t in self.states[layer]:
                t[slot] = torch.randn(tuple(t.shape[1:]), generator=g).to(t.dtype).to(t.device)

    def request_tensors(self, blocks, slot):
        out = [self.kv_caches[layer][:, blocks] for layer in self.attn_layers]
        for layer in self.kda_layers:
            out += [t[slot] for t in self.states[layer]]
        return out

    def shard(self, blocks, slot, tp_size, r):
        """The part of this (TP 1) rank's request that TP rank r of tp_size holds."""
        out = []
        h = self.h_kv // tp_size
        for layer in self.attn_layers:
            out.append(self.kv_caches[layer][:, blocks, :, r * h:(r + 1) * h])
        H = self.H // tp_size
        hd = MODEL["kda_head_dim"]
        for layer in self.kda_layers:
            st = self.states[layer]
            out += [t[slot][:, r * H * hd:(r + 1) * H * hd] for t in st[:3]]
            out.append(st[3][slot][r * H:(r + 1) * H])
        return out

    def equal(self, other, blocks, other_blocks, slot, other_slot):
        """torch.equal of every tensor of one request on both sides (TP equal on both)."""
        a = self.request_tensors(blocks, slot)
        b = other.request_tensors(other_blocks, other_slot)
        return all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


def request_key(q):
    return "chatcmpl-%04d" % q


def blocks_of(q):
    """The prompt of request q needs this many blocks (prompts of 17 .. 97 tokens)."""
    return (17 + 10 * q) // BLOCK_SIZE + 1


def seed(q, tp_rank):
    return 1000 * q + tp_rank
