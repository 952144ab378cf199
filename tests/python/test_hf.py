"""kvferry.hf without transformers: caches of the shapes transformers 5.x holds (DynamicLayer
keys/values, LinearAttentionLayer conv_states/recurrent_states), built from plain tensors, go
through Spec, Pools, the Layout (the daemon's own checks), export, a real kvferryd, gather and
merge; every received byte is compared with the sent tensors. The real models (transformers on
the GPU machine) are tests/python/test_hf_models.py."""
import types
import unittest

import kvftest
import torch

import kvferry
from kvferry import hf

CONFIG = {"model_type": "hf-shapes", "num_hidden_layers": 4,
          "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                          "full_attention"]}
MAMBA = dict(CONFIG, layer_types=["mamba", "attention", "mamba", "mamba"])


def config(d):
    return types.SimpleNamespace(to_dict=lambda: dict(d), **d)


def layer_attn(n, heads=2, dk=16, dv=16, gen=None):
    return types.SimpleNamespace(keys=torch.randn(1, heads, n, dk, generator=gen).bfloat16(),
                                 values=torch.randn(1, heads, n, dv, generator=gen).bfloat16(),
                                 is_sliding=False)


def layer_state(conv_ch, w, rec, gen=None):
    return types.SimpleNamespace(
        conv_states=[torch.randn(1, conv_ch, w, generator=gen).bfloat16()],
        recurrent_states=[torch.randn((1,) + rec, generator=gen)])


def cache_gdn(n, seed, mla=False):
    """Qwen3-Next-like: q|k 2 key heads of 8, v 4 heads of 8 (conv 64 channels), recurrent
    [4, 8, 8]; layer 3 attention (GQA 2 heads, or MLA: one head, dk 32 latent, dv 8 rope)."""
    g = torch.Generator().manual_seed(seed)
    layers = [layer_state(2 * 2 * 8 + 4 * 8, 4, (4, 8, 8), g) for _ in range(3)]
    layers.append(layer_attn(n, 1, 32, 8, g) if mla else layer_attn(n, gen=g))
    return types.SimpleNamespace(layers=layers)


def cache_mamba(n, seed):
    """Mamba2-hybrid-like: x 4 heads of 8, B|C 2 groups of d_state 4 (conv 48), ssm [4, 8, 4]."""
    g = torch.Generator().manual_seed(seed)
    layers = [layer_state(4 * 8 + 2 * 2 * 4, 4, (4, 8, 4), g) for _ in range(4)]
    layers[1] = layer_attn(n, gen=g)
    return types.SimpleNamespace(layers=layers)


def same(case, got, want):
    for layer in want:
        a, b = got[layer], want[layer]
        case.assertEqual(a[0], b[0])
        for x, y in zip(a[1:], b[1:]):
            for xs, ys in zip(x if isinstance(x, list) else [x], y if isinstance(y, list) else [y]):
                case.assertTrue(torch.equal(xs, ys), "layer %d differs" % layer)


class Shapes(unittest.TestCase):
    def test_spec_reads_segments_from_shapes_and_layer_types(self):
        s = hf.Spec.from_cache(config(CONFIG), cache_gdn(5, 1))
        self.assertEqual(s.attn_layers, [3])
        self.assertEqual(s.state_layers, [0, 1, 2])
        self.assertEqual(repr(s.segments[0]), "[q:2x8, k:2x8, v:4x8]")
        m = hf.Spec.from_cache(config(MAMBA), cache_mamba(5, 1))
        self.assertEqual(repr(m.segments[0]), "[x:4x8, B:2x4, C:2x4]")
        self.assertEqual(m.attn_bytes_per_token(), 2 * 2 * 16 * 2)

    def test_layouts_pass_the_daemons_checks_at_tp1_and_tp2(self):
        s = hf.Spec.from_cache(config(CONFIG), cache_gdn(5, 1, mla=True))
        for tp in (1, 2):
            for r in range(tp):
                p = hf.Pools(s, 4, 2, 16, tp_size=tp, tp_rank=r)
                p.layout("shapes", "context").check()
                p.close()
        p = hf.Pools(s, 4, 2, 16, tp_size=2, tp_rank=1)
        d = p.layout("x", "context").to_dict()
        p.close()
        conv = [t for t in d["groups"][1]["views"][0]["tensors"]]
        self.assertEqual([(t["name"], t["heads"], t["global_heads"]) for t in conv],
                         [("conv_q", 1, 2), ("conv_k", 1, 2), ("conv_v", 2, 4)])

    def test_refusals_name_what_is_wrong(self):
        c = cache_gdn(5, 1)
        c.layers[0].keys = torch.zeros(1, 2, 5, 16)
        c.layers[0].values = torch.zeros(1, 2, 5, 16)
        with self.assertRaisesRegex(kvferry.KvferryError, "layer 0 holds attention and state"):
            hf.Spec.from_cache(config(CONFIG), c)
        with self.assertRaisesRegex(kvferry.KvferryError, "nothing"):
            hf.Spec.from_cache(config(CONFIG), types.SimpleNamespace(layers=[]))
        s = hf.Spec.from_cache(config(CONFIG), cache_gdn(5, 1))
        with self.assertRaisesRegex(kvferry.KvferryError, "do not split over TP 3"):
            hf.Pools(s, 4, 2, 16, tp_size=3, tp_rank=0)
        p = hf.Pools(s, 2, 1, 16)
        with self.assertRaisesRegex(kvferry.KvferryError, "no room for 40 tokens"):
            p.alloc(40)
        p.close()


class Moves(kvftest.DaemonCase):
    n = 0

    def key(self):
        Moves.n += 1
        return "hf-%d" % Moves.n

    def run_move(self, cfg, make, ctx_tp, gen_tp, ctx_T, gen_T, lengths):
        """Prefill caches of these lengths exported at ctx_tp, moved (all in flight at once),
        gathered at gen_tp and merged: equal to the sent tensors, hashes equal."""
        spec = hf.Spec.from_cache(config(cfg), make(3, 0))
        k = self.key()
        ctx = [hf.Pools(spec, 32, 4, ctx_T, tp_size=ctx_tp, tp_rank=r) for r in range(ctx_tp)]
        gen = [hf.Pools(spec, 32, 4, gen_T, tp_size=gen_tp, tp_rank=r) for r in range(gen_tp)]
        sock = self.cluster.a.sock
        cs = [kvferry.Client(sock, name="ctx%d" % r) for r in range(ctx_tp)]
        gs = [kvferry.Client(sock, name="gen%d" % r) for r in range(gen_tp)]
        try:
            for c, p in zip(cs, ctx):
                c.register(p.layout("ctx-" + k, "context"))
            for g, p in zip(gs, gen):
                g.register(p.layout("gen-" + k, "generation"))
            caches, greq, keys = {}, {}, []
            for q, n in enumerate(lengths):
                key = "%s-%d" % (k, q)
                caches[key] = make(n, 100 + q)
                for c, p in zip(cs, ctx):
                    req = p.alloc(n)
                    p.export(caches[key], req)
                    c.send(key, req.items)
                greq[key] = [p.alloc(n) for p in gen]
                for g, r in zip(gs, greq[key]):
                    g.recv(key, "ctx-" + k, r.items, tokens=n)
                keys.append(key)
            for g in gs:
                g.wait(keys, 30)
            for c in cs:
                c.wait(keys, 30)
            for key in keys:
                shares = [p.gather(r) for p, r in zip(gen, greq[key])]
                got = shares[0] if gen_tp == 1 else hf.merge(spec, shares)
                want = hf.sequence_tensors(caches[key], spec)
                same(self, got, want)
                self.assertEqual(hf.digest(got), hf.digest(want))
        finally:
            for x in cs + gs:
                x.close()
            for p in ctx + gen:
                p.close()

    def test_gdn_hybrid_block_end_and_inside_several_in_flight(self):
        self.run_move(CONFIG, cache_gdn, 1, 1, 16, 16, [32, 37, 16, 5])

    def test_different_block_sizes(self):
        self.run_move(CONFIG, cache_gdn, 1, 1, 16, 64, [37, 64, 100])

    def test_mla_replicated_tp2_to_tp1_and_back(self):
        mla = lambda n, s: cache_gdn(n, s, mla=True)  # noqa: E731
        self.run_move(CONFIG, mla, 2, 1, 16, 16, [20, 48])
        self.run_move(CONFIG, mla, 1, 2, 16, 16, [20, 48])

    def test_mamba_hybrid_tp2_to_tp1_and_back(self):
        self.run_move(MAMBA, cache_mamba, 2, 1, 16, 32, [33, 64])
        self.run_move(MAMBA, cache_mamba, 1, 2, 16, 16, [33, 64])


if __name__ == "__main__":
    unittest.main()
