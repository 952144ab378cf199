"""The helpers' model-wide counts at any TP: global_heads (paged, state, SGLang, TRT-LLM) and
mamba2_state's global_heads and n_groups default to this rank's count x the layout's effective
TP, which a real kvferryd registers at TP 2 (a default of the local count was refused:
"2 local heads x tp_eff 2 != global_heads 2"); where a rank holds one head or group at TP > 1
(split ones, or fewer replicated) the helper asks for the count, naming its parameter."""
import unittest

import kvftest  # noqa: F401  (import path)
import torch

import kvferry
from kvferry import layout as kl

MODEL = kvftest.MODEL
L = [0, 1, 2, 3]


def lay(instance, tp_size=2, tp_rank=0, **kw):
    return kl.Layout(instance, "generation", MODEL, 16, 4, tp_size=tp_size, tp_rank=tp_rank, **kw)


def heads_of(layout):
    """(heads, global_heads) of each view's tensors, by tensor name."""
    return {t["name"]: (t["heads"], t["global_heads"])
            for g in layout.to_dict()["groups"] for v in g["views"] for t in v["tensors"]}


def flash_caches(local_heads, stacked=False):
    raw = kvferry.host_tensor((4, 2, 6, 16, local_heads, 64), torch.bfloat16)
    return raw if stacked else [raw[i] for i in range(4)]


def mamba_states(nheads, groups, d_state=8, hd=16, width=3):
    conv = kvferry.host_tensor((4, 5, width, nheads * hd + 2 * groups * d_state), torch.bfloat16)
    ssm = kvferry.host_tensor((4, 5, nheads, hd, d_state), torch.float32)
    return [(conv[i], ssm[i]) for i in range(4)]


class GlobalCounts(kvftest.DaemonCase):
    def test_tp2_paged_defaults_to_local_heads_times_tp_and_registers(self):
        lc = lay("tp2-heads")
        kl.vllm_attention(lc, "attn", L, flash_caches(2))
        self.assertEqual(heads_of(lc)["k"], (2, 4))
        lc.check()
        with kvferry.Client(self.cluster.a.sock, name="tp2") as c:
            c.register(lc)  # refused before: 2 local heads x tp_eff 2 != global_heads 2

    def test_attention_dp_is_tp_eff_1(self):
        lc = lay("dp-heads", attention_dp=True)
        kl.vllm_attention(lc, "attn", L, flash_caches(2))
        self.assertEqual(heads_of(lc)["k"], (2, 2))
        lc.check()

    def test_one_head_per_rank_asks_for_global_heads(self):
        lc = lay("one-head")
        with self.assertRaises(kvferry.KvferryError) as cm:
            kl.vllm_attention(lc, "attn", L, flash_caches(1))
        self.assertIn("global_heads=", str(cm.exception))
        self.assertIn("tp_eff 2", str(cm.exception))
        for given in (1, 2):  # replicated (GQA with one KV head at TP 2), or split
            lc = lay("one-head-%d" % given)
            kl.vllm_attention(lc, "attn", L, flash_caches(1), global_heads=given)
            self.assertEqual(heads_of(lc)["k"], (1, given))
            lc.check()

    def test_replicated_group_keeps_its_own_count(self):
        lc = lay("replicated")
        lc.paged("attn", L, flash_caches(2, stacked=True), "L kv b t h d", shard="replicated")
        self.assertEqual(heads_of(lc)["k"], (2, 2))
        lc.check()

    def test_state_groups_default_to_local_times_tp(self):
        states = [kvferry.host_tensor((5, 2, 16, 16), torch.float32) for _ in L]
        lc = lay("state")
        lc.state("ssm", L, [("rec", states, 1, 2)])
        self.assertEqual(heads_of(lc)["rec"], (2, 4))
        lc.check()

    def test_mamba2_tp2_defaults_heads_and_groups_times_tp_and_registers(self):
        lc = lay("mamba-tp2")
        kl.mamba2_state(lc, "mamba", L, mamba_states(nheads=4, groups=2), nheads=4)
        h = heads_of(lc)
        self.assertEqual(h["conv_x0"], (4, 8))
        self.assertEqual(h["conv_bc0"], (2, 4))
        self.assertEqual(h["ssm"], (4, 8))
        lc.check()
        with kvferry.Client(self.cluster.a.sock, name="mamba-tp2") as c:
            c.register(lc)

    def test_mamba2_one_group_per_rank_asks_for_n_groups(self):
        lc = lay("mamba-one-group")
        with self.assertRaises(kvferry.KvferryError) as cm:
            kl.mamba2_state(lc, "mamba", L, mamba_states(nheads=4, groups=1), nheads=4)
        self.assertIn("n_groups=", str(cm.exception))
        lc = lay("mamba-one-group-1")
        kl.mamba2_state(lc, "mamba", L, mamba_states(nheads=4, groups=1), nheads=4, n_groups=1)
        self.assertEqual(heads_of(lc)["conv_bc0"], (1, 1))
        lc.check()


if __name__ == "__main__":
    unittest.main()
