"""Layouts from engine-shaped tensors (vLLM v1, SGLang, TensorRT-LLM, recurrent state): each is
checked by the library's own decoder, then a request moves through a real kvferryd from one
rank's tensors to another's and torch.equal compares the bytes."""
import unittest

import kvftest  # noqa: F401  (import path)
import torch

import kvferry
from kvferry import layout as kl

MODEL = kvftest.MODEL
L = [0, 1, 2, 3]


def lay(instance, role, tpb=16, **kw):
    return kl.Layout(instance, role, MODEL, tpb, 4, **kw)


class EngineLayouts(kvftest.DaemonCase):
    n = 0

    def key(self):
        EngineLayouts.n += 1
        return "layout-test-%d" % EngineLayouts.n

    def roundtrip(self, build, blocks_ctx, blocks_gen, fill, read, items_ctx=None, items_gen=None):
        """build(instance, role) -> (layout, tensors); fill/read give the request's tensors."""
        lc, tc = build("ctx-" + self.key(), "context")
        lg, tg = build("gen-" + self.key(), "generation")
        lc.check()
        lg.check()
        g = torch.Generator().manual_seed(EngineLayouts.n)
        for r in lc.regions():  # every byte of the context rank's memory random
            whole = r.keep[2]
            whole.copy_(torch.randint(0, 256, whole.shape, generator=g, dtype=torch.uint8))
        group = lc.groups[0][0]
        kvftest.move(self, lc, lg, items_ctx or {group: blocks_ctx},
                     items_gen or {group: blocks_gen}, self.key())
        got, want = read(tg, blocks_gen), fill(tc, blocks_ctx)
        self.assertEqual(len(got), len(want))
        for a, b in zip(want, got):
            self.assertTrue(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
            self.assertTrue(bool(a.view(torch.uint8).any()))
        return lc

    def test_vllm_flash_attn_kv_apart_nhd(self):
        def build(inst, role):
            raw = kvferry.host_tensor((4, 2, 12, 16, 2, 64), torch.bfloat16)
            caches = [raw[i] for i in range(4)]
            lc = lay(inst, role)
            kl.vllm_attention(lc, "attn", L, caches)
            return lc, caches
        sel = lambda ts, b: [t[:, b] for t in ts]  # noqa: E731
        lc = self.roundtrip(build, [1, 5, 2], [7, 0, 11], sel, sel)
        views = lc.to_dict()["groups"][0]["views"]
        self.assertEqual([v["name"] for v in views], ["k", "v"])  # K and V are apart

    def test_vllm_flashinfer_nhd_kv_together(self):
        def build(inst, role):
            raw = kvferry.host_tensor((4, 10, 2, 16, 2, 64), torch.float16)
            caches = [raw[i] for i in range(4)]
            lc = lay(inst, role)
            kl.vllm_attention(lc, "attn", L, caches, backend="flashinfer")
            return lc, caches
        sel = lambda ts, b: [t[b] for t in ts]  # noqa: E731
        lc = self.roundtrip(build, [3, 4], [9, 1], sel, sel)
        v = lc.to_dict()["groups"][0]["views"]
        self.assertEqual(len(v), 1)
        self.assertEqual([t["name"] for t in v[0]["tensors"]], ["k", "v"])
        self.assertEqual(v[0]["tensors"][0]["outer"], 16)  # NHD: [token][head][dim]

    def test_vllm_flashinfer_hnd_through_strides(self):
        def build(inst, role):
            # HND physical order (blocks, 2, H, T, D), handed out as the logical NHD shape
            raw = kvferry.host_tensor((4, 10, 2, 2, 16, 64), torch.bfloat16)
            caches = [raw[i].permute(0, 1, 3, 2, 4) for i in range(4)]
            lc = lay(inst, role)
            kl.vllm_attention(lc, "attn", L, caches, backend="flashinfer")
            return lc, caches
        sel = lambda ts, b: [t[b] for t in ts]  # noqa: E731
        lc = self.roundtrip(build, [0, 9], [5, 6], sel, sel)
        t0 = lc.to_dict()["groups"][0]["views"][0]["tensors"][0]
        self.assertEqual((t0["outer"], t0["heads"], t0["inner"]), (1, 2, 16 * 64 * 2))

    def test_vllm_mla_replicated_latent(self):
        def build(inst, role):
            raw = kvferry.host_tensor((4, 8, 16, 576), torch.bfloat16)
            caches = [raw[i] for i in range(4)]
            lc = lay(inst, role, tp_size=1)
            kl.vllm_attention(lc, "mla", L, caches, backend="mla")
            return lc, caches
        sel = lambda ts, b: [t[b] for t in ts]  # noqa: E731
        lc = self.roundtrip(build, [2], [3], sel, sel)
        t0 = lc.to_dict()["groups"][0]["views"][0]["tensors"][0]
        self.assertEqual((t0["shard"], t0["heads"], t0["global_heads"]), ("replicated", 1, 1))

    def test_sglang_mha_k_and_v_buffers(self):
        def build(inst, role):
            page, tokens = 16, 16 * 9
            k = kvferry.host_tensor((4, tokens, 4, 32), torch.bfloat16)
            v = kvferry.host_tensor((4, tokens, 4, 32), torch.bfloat16)
            kb, vb = [k[i] for i in range(4)], [v[i] for i in range(4)]
            lc = lay(inst, role, tpb=page)
            kl.sglang_mha(lc, "mha", L, kb, vb)
            return lc, (kb, vb)

        def sel(ts, pages):
            kb, vb = ts
            idx = torch.cat([torch.arange(p * 16, p * 16 + 16) for p in pages])
            return [b[idx] for b in kb + vb]
        lc = self.roundtrip(build, [1, 2, 8], [4, 5, 6], sel, sel)
        self.assertEqual(len(lc.regions()), 2)  # k_buffer and v_buffer are separate pools

    def test_sglang_mla_kv_buffer(self):
        def build(inst, role):
            kv = kvferry.host_tensor((4, 16 * 5, 1, 576), torch.bfloat16)
            kvb = [kv[i] for i in range(4)]
            lc = lay(inst, role)
            kl.sglang_mla(lc, "mla", L, kvb)
            return lc, kvb

        def sel(ts, pages):
            idx = torch.cat([torch.arange(p * 16, p * 16 + 16) for p in pages])
            return [b[idx] for b in ts]
        self.roundtrip(build, [1, 3], [2, 4], sel, sel)

    def test_trtllm_layer_major_pool(self):
        def build(inst, role):
            pool = kvferry.host_tensor((4, 6, 2, 2, 16, 64), torch.float16)
            lc = lay(inst, role)
            kl.trtllm_pool(lc, "kv", L, pool, layer_major=True)
            return lc, pool
        sel = lambda p, b: [p[:, b]]  # noqa: E731
        lc = self.roundtrip(build, [0, 5], [2, 3], sel, sel)
        v = lc.to_dict()["groups"][0]["views"][0]
        self.assertEqual(v["layer_stride"], 6 * 2 * 2 * 16 * 64 * 2)

    def test_trtllm_block_major_pool(self):
        def build(inst, role):
            pool = kvferry.host_tensor((6, 4, 2, 2, 16, 64), torch.float16)
            lc = lay(inst, role)
            kl.trtllm_pool(lc, "kv", L, pool, layer_major=False)
            return lc, pool
        sel = lambda p, b: [p[b]]  # noqa: E731
        lc = self.roundtrip(build, [1, 4], [0, 5], sel, sel)
        v = lc.to_dict()["groups"][0]["views"][0]
        self.assertEqual(v["item_stride"], 4 * 2 * 2 * 16 * 64 * 2)

    def test_mamba2_state(self):
        def build(inst, role):
            conv = kvferry.host_tensor((4, 5, 3, 96), torch.bfloat16)
            ssm = kvferry.host_tensor((4, 5, 4, 16, 8), torch.float32)
            states = [(conv[i], ssm[i]) for i in range(4)]
            lc = lay(inst, role)
            kl.mamba2_state(lc, "mamba", L, states, nheads=4)
            return lc, states

        def sel(states, slot):
            return [t[slot[0]] for s in states for t in s]
        self.roundtrip(build, [2], [4], sel, sel)

    def test_vllm_hybrid_raw_tensors_shared_by_attention_and_mamba(self):
        # vLLM v1's hybrid allocator: one raw tensor per layer pair, its pages used as attention
        # blocks by one layer and as Mamba state by another; both views declare alias "raw"
        T, H, D, pages = 16, 2, 64, 8
        page = 2 * T * H * D * 2  # bytes of one attention block (FlashInfer (2, T, H, D) bf16)

        def build(inst, role):
            raws = [kvferry.host_tensor((pages * page,), torch.int8) for _ in range(2)]
            attn = [r.view(torch.bfloat16).view(pages, 2, T, H, D) for r in raws]
            conv_e, ssm_e = 3 * 64, 2 * 16 * 16  # bf16 conv, fp32 ssm; padded to a page
            states = []
            for r in raws:
                b16, f32 = r.view(torch.bfloat16), r.view(torch.float32)
                conv = torch.as_strided(b16, (pages, 3, 64), (page // 2, 64, 1))
                ssm = torch.as_strided(f32, (pages, 2, 16, 16), (page // 4, 256, 16, 1),
                                       conv_e * 2 // 4)
                states.append((conv, ssm))
            assert conv_e * 2 + ssm_e * 4 <= page
            lc = lay(inst, role)
            kl.vllm_attention(lc, "attn", [0, 2], attn, backend="flashinfer", alias="raw")
            kl.mamba2_state(lc, "mamba", [1, 3], states, nheads=2, alias="raw")
            return lc, (attn, states)

        def sel(ts, items):
            blocks, slot = items
            attn, states = ts
            return [a[blocks] for a in attn] + [t[slot] for s in states for t in s]
        lc, tc = build("ctx-hyb", "context")
        lg, tg = build("gen-hyb", "generation")
        self.assertEqual({v.get("alias") for g in lc.to_dict()["groups"] for v in g["views"]},
                         {"raw"})
        lc.check()
        g = torch.Generator().manual_seed(3)
        for r in lc.regions():
            r.keep[2].copy_(torch.randint(0, 256, r.keep[2].shape, generator=g, dtype=torch.uint8))
        kvftest.move(self, lc, lg, {"attn": [1, 2], "mamba": 5}, {"attn": [6, 3], "mamba": 0},
                     self.key())
        for a, b in zip(sel(tc, ([1, 2], 5)), sel(tg, ([6, 3], 0))):
            self.assertTrue(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))

    def test_kda_state_and_attention_hybrid(self):
        import hybrid
        lc = hybrid.HybridCache(16, 4).layout("kda-ctx", "context")
        groups = lc.to_dict()["groups"]
        self.assertEqual([g["kind"] for g in groups], ["paged", "state"])
        self.assertEqual([t["name"] for t in groups[1]["views"][0]["tensors"]],
                         ["q_conv", "k_conv", "v_conv", "ssm"])
        lc.check()

    def test_parallelism_fields_reach_the_layout(self):
        raw = kvferry.host_tensor((4, 2, 4, 16, 1, 64), torch.bfloat16)
        lc = kl.Layout("p", "context", MODEL, 16, 8, tp_size=2, tp_rank=1, pp_size=2, pp_rank=0,
                       attention_dp=False)
        kl.vllm_attention(lc, "attn", L, [raw[i] for i in range(4)], global_heads=2)
        d = lc.to_dict()
        self.assertEqual((d["tp_size"], d["tp_rank"], d["pp_size"], d["pp_rank"]), (2, 1, 2, 0))
        lc.check()

    def test_daemon_message_for_an_invalid_layout(self):
        raw = kvferry.host_tensor((4, 2, 4, 16, 2, 64), torch.bfloat16)
        lc = kl.Layout("bad", "context", MODEL, 16, 4, tp_size=2)
        kl.vllm_attention(lc, "attn", L, [raw[i] for i in range(4)], global_heads=3)
        with self.assertRaises(kvferry.RegistrationError) as cm:
            lc.check()
        self.assertEqual(cm.exception.error, "BAD_REQUEST")
        self.assertIn("groups[0].views[0].tensors[0]", cm.exception.message)

    def test_tensor_outside_kvferry_memory_is_refused_with_advice(self):
        lc = lay("x", "context")
        with self.assertRaises(kvferry.KvferryError) as cm:
            kl.vllm_attention(lc, "attn", L, [torch.zeros(2, 4, 16, 2, 64) for _ in L])
        self.assertIn("host_tensor", str(cm.exception))

    def test_per_layer_tensors_make_a_per_layer_view(self):
        def build(inst, role):
            # vLLM v1: one allocation per layer (KVCacheTensor), FlashAttention shape
            caches = [kvferry.host_tensor((2, 6, 16, 2, 64), torch.bfloat16) for _ in L]
            lc = lay(inst, role)
            kl.vllm_attention(lc, "attn", L, caches)
            return lc, caches
        sel = lambda ts, b: [t[:, b] for t in ts]  # noqa: E731
        lc = self.roundtrip(build, [1, 4], [0, 5], sel, sel)
        v = lc.to_dict()["groups"][0]["views"][0]
        self.assertEqual(len(v["per_layer"]), 4)
        self.assertEqual(len({e["pool"] for e in v["per_layer"]}), 4)
        self.assertNotIn("layer_stride", v)

    def test_fingerprint_is_the_documented_hash_of_the_config(self):
        import hashlib
        import json
        cfg = {"b": 2, "a": [1, "x"]}
        text = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
        want = "kvf1-" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
        self.assertEqual(kl.fingerprint(cfg), want)
        self.assertEqual(kl.fingerprint({"a": [1, "x"], "b": 2}), want)  # key order is free
        self.assertNotEqual(kl.fingerprint({"a": [1, "x"], "b": 3}), want)
        with self.assertRaises(kvferry.KvferryError):
            kl.fingerprint("my-model")

    def test_fingerprint_mismatch_is_peer_incompatible(self):
        raw = kvferry.host_tensor((2, 4, 2, 16, 2, 64), torch.bfloat16)
        a = kl.Layout("fa", "context", {"m": 1}, 16, 4)
        kl.vllm_attention(a, "attn", [0], [raw[0]], backend="flashinfer")
        b = kl.Layout("fb", "generation", {"m": 2}, 16, 4)
        kl.vllm_attention(b, "attn", [0], [raw[1]], backend="flashinfer")
        cl = self.cluster
        with kvferry.Client(cl.a.sock) as c, kvferry.Client(cl.a.sock) as g:
            c.register(a)
            g.register(b)
            c.send("fp-1", {"attn": [0]})
            g.recv("fp-1", "fa", {"attn": [1]})
            with self.assertRaises(kvferry.TransferError) as cm:
                g.wait("fp-1", 30)
            self.assertEqual(cm.exception.error, "PEER_INCOMPATIBLE")
            # the context side learns the end: its SEND fails with the reader's verdict at once
            with self.assertRaises(kvferry.TransferError) as cm:
                c.wait("fp-1", 5)
            self.assertEqual(cm.exception.error, "PEER_INCOMPATIBLE")
            self.assertIn("no reader can come", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
