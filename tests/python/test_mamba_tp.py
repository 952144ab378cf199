"""Mamba2 state across tensor-parallel sizes: the conv state's channels are x | B | C and each
segment is split on its own under TP (x by heads, B and C by groups, as vLLM shards them), so
TP1 -> TP2 and TP2 -> TP1 move each rank's x_r | B_r | C_r through a real kvferryd; every byte
is compared with torch.equal against the segments cut from the other side's tensors."""
import json
import subprocess
import unittest

import kvftest  # noqa: F401  (import path)
import torch

import kvferry
from kvferry import layout as kl

H, HD, G, N, WIDTH, SLOTS = 4, 8, 2, 8, 3, 5  # heads, head dim, groups, d_state, W-1, slots
LAYERS = [0, 1]


def build(instance, role, tp, rank, dim_first, n_groups=G):
    """One rank's per-layer (conv, ssm) tensors as vLLM allocates them at this TP size."""
    h, g = H // tp, max(n_groups // tp, 1)
    conv_dim = h * HD + 2 * g * N
    lay = kl.Layout(instance, role, kvftest.MODEL, 16, 2, tp_size=tp, tp_rank=rank)
    states = []
    for _ in LAYERS:
        shape = (SLOTS, conv_dim, WIDTH) if dim_first else (SLOTS, WIDTH, conv_dim)
        states.append((kvferry.host_tensor(shape, torch.bfloat16),
                       kvferry.host_tensor((SLOTS, h, HD, N), torch.float32)))
    kl.mamba2_state(lay, "mamba", LAYERS, states, nheads=h, n_groups=n_groups)
    lay.check()
    return lay, states


def segments(conv, dim_first, h, g):
    """A slot's conv state as (x, B, C), channels on the first axis."""
    c = conv if dim_first else conv.t()
    return c[:h * HD], c[h * HD:h * HD + g * N], c[h * HD + g * N:]


def shard(conv, ssm, dim_first, tp, r, n_groups=G):
    """What TP rank r of tp holds of one slot held whole (TP1): x_r | B_r | C_r and its heads."""
    x, b, c = segments(conv, dim_first, H, n_groups)
    h, g = H // tp, max(n_groups // tp, 1)
    gi = r * n_groups // tp if tp > n_groups else r * g  # replicated groups: vLLM's extension
    cat = torch.cat([x[r * h * HD:(r + 1) * h * HD], b[gi * N:(gi + g) * N],
                     c[gi * N:(gi + g) * N]])
    return (cat if dim_first else cat.t().contiguous()), ssm[r * h:(r + 1) * h]


def fill(states, seed):
    gen = torch.Generator().manual_seed(seed)
    for conv, ssm in states:
        for t in (conv, ssm):
            t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))


class Mamba2AcrossTP(kvftest.DaemonCase):
    n = 0

    def key(self):
        Mamba2AcrossTP.n += 1
        return "mamba-tp-%d" % Mamba2AcrossTP.n

    def move(self, ctx, gen, ctx_slot, gen_slot):
        """ctx, gen: lists of layouts (one per rank); every context rank SENDs with n_readers 0,
        every generation rank RECVs; all DONE and SENT."""
        key = self.key()
        sock = self.cluster.a.sock
        cs = [kvferry.Client(sock, name="ctx%d" % i) for i in range(len(ctx))]
        gs = [kvferry.Client(sock, name="gen%d" % i) for i in range(len(gen))]
        try:
            for c, lay in zip(cs, ctx):
                c.register(lay)
            for g, lay in zip(gs, gen):
                g.register(lay)
            for c in cs:
                c.send(key, {"mamba": ctx_slot})
            for g in gs:
                g.recv(key, ctx[0].instance, {"mamba": gen_slot})
            for g in gs:
                self.assertEqual(g.wait(key, 30).kind, "DONE")
            for c in cs:
                self.assertEqual(c.wait(key, 30).kind, "SENT")
        finally:
            for x in cs + gs:
                x.close()

    def one_to_two(self, dim_first, n_groups=G):
        k = self.key()
        lc, sc = build("ctx-" + k, "context", 1, 0, dim_first, n_groups)
        gen = [build("gen-" + k, "generation", 2, r, dim_first, n_groups) for r in range(2)]
        fill(sc, Mamba2AcrossTP.n)
        self.move([lc], [g[0] for g in gen], 3, 1)
        for r, (_, sg) in enumerate(gen):
            for (conv, ssm), (gconv, gssm) in zip(sc, sg):
                want_c, want_s = shard(conv[3], ssm[3], dim_first, 2, r, n_groups)
                self.assertTrue(torch.equal(gconv[1], want_c), "rank %d conv" % r)
                self.assertTrue(torch.equal(gssm[1], want_s), "rank %d ssm" % r)

    def two_to_one(self, dim_first):
        k = self.key()
        ctx = [build("ctx-" + k, "context", 2, r, dim_first) for r in range(2)]
        lg, sg = build("gen-" + k, "generation", 1, 0, dim_first)
        for r, (_, sc) in enumerate(ctx):
            fill(sc, 100 + r)
        self.move([c[0] for c in ctx], [lg], 4, 0)
        for layer, (gconv, gssm) in enumerate(sg):
            for r in range(2):  # the whole slot, cut as rank r holds it, is rank r's bytes
                want_c, want_s = ctx[r][1][layer][0][4], ctx[r][1][layer][1][4]
                got_c, got_s = shard(gconv[0], gssm[0], dim_first, 2, r)
                self.assertTrue(torch.equal(got_c, want_c), "from rank %d conv" % r)
                self.assertTrue(torch.equal(got_s, want_s), "from rank %d ssm" % r)

    def test_tp1_to_tp2_vllm_token_major_conv(self):
        self.one_to_two(dim_first=False)

    def test_tp2_to_tp1_vllm_token_major_conv(self):
        self.two_to_one(dim_first=False)

    def test_tp1_to_tp2_dim_first_conv(self):
        self.one_to_two(dim_first=True)

    def test_tp2_to_tp1_dim_first_conv(self):
        self.two_to_one(dim_first=True)

    def test_one_group_replicated_over_tp2(self):
        self.one_to_two(dim_first=False, n_groups=1)

    def test_tensors_are_segments_sharded_by_their_own_counts(self):
        lay, _ = build("shape", "context", 2, 1, False)
        view_tensors = [t for v in lay.to_dict()["groups"][0]["views"] for t in v["tensors"]]
        by = {t["name"]: t for t in view_tensors}
        self.assertEqual(sorted(by), ["conv_bc0", "conv_bc1", "conv_bc2", "conv_x0", "conv_x1",
                                      "conv_x2", "ssm"])
        self.assertEqual((by["conv_x1"]["heads"], by["conv_x1"]["global_heads"]), (2, 4))
        self.assertEqual((by["conv_bc1"]["outer"], by["conv_bc1"]["heads"],
                          by["conv_bc1"]["global_heads"]), (2, 1, 2))
        d, _ = build("shape-ds", "context", 2, 1, True)
        names = [t["name"] for v in d.to_dict()["groups"][0]["views"] for t in v["tensors"]]
        self.assertEqual(names, ["conv_x", "conv_bc", "ssm"])  # as the C preset nemotron-h

    def test_dim_first_conv_is_the_c_preset_nemotron_h(self):
        # kvferryctl's preset nemotron-h (128 heads of 64, 8 groups, d_state 128, W 4) at TP2
        # rank 1 and the same shapes from PyTorch describe every byte of a slot the same way
        out = subprocess.run([kl._ctl(), "layout", "nemotron-h:tp=2,blocks=2,slots=1", "--rank",
                              "1"], capture_output=True, text=True, timeout=60, check=True)
        group = [g for g in json.loads(out.stdout)["groups"] if g["name"] == "mamba"][0]
        want = group["views"][0]["tensors"]
        h, g, hd, n, w = 64, 4, 64, 128, 4
        lay = kl.Layout("nem", "context", kvftest.MODEL, 64, 52, tp_size=2, tp_rank=1)
        cb, sb = (h * hd + 2 * g * n) * w * 2, h * hd * n * 4  # one slot: conv, then ssm
        raw = kvferry.host_tensor((cb + sb,), torch.uint8)
        states = [(torch.as_strided(raw.view(torch.bfloat16), (1, cb // 2 // w, w),
                                    ((cb + sb) // 2, w, 1)),
                   torch.as_strided(raw.view(torch.float32), (1, h, hd, n),
                                    ((cb + sb) // 4, hd * n, n, 1), cb // 4))]
        kl.mamba2_state(lay, "mamba", [0], states, nheads=h, n_groups=8)
        got = lay.to_dict()["groups"][0]["views"][0]["tensors"]
        self.assertEqual([{k: t[k] for k in got[0]} for t in want], got)

    def test_conv_channels_that_do_not_split_are_refused(self):
        lay = kl.Layout("bad", "context", kvftest.MODEL, 16, 2)
        states = [(kvferry.host_tensor((SLOTS, WIDTH, H * HD + 5), torch.bfloat16),
                   kvferry.host_tensor((SLOTS, H, HD, N), torch.float32))]
        with self.assertRaisesRegex(kvferry.KvferryError, "conv channels are not x"):
            kl.mamba2_state(lay, "mamba", [0], states, nheads=H)


if __name__ == "__main__":
    unittest.main()
