"""Reader counts the daemon derives (n_readers 0) for a generation instance with PP 2 on another
daemon: each stage's RECV_REQs tell the context daemon that stage's layers, and the SEND is SENT
when the last reader has read it ("2 of 2 readers served"), never after the first stage alone
and not at its deadline ("released at its deadline")."""
import unittest

import kvftest  # noqa: F401  (import path)
import torch

import kvferry
from kvferry import layout as kl

T, H, D, BLOCKS = 16, 2, 32, 8


def rank(instance, role, layers, pp_size=1, pp_rank=0):
    """vLLM FlashAttention caches (2, blocks, T, H, D) for the given global layers."""
    caches = [kvferry.host_tensor((2, BLOCKS, T, H, D), torch.bfloat16) for _ in layers]
    lay = kl.Layout(instance, role, kvftest.MODEL, T, 4, pp_size=pp_size, pp_rank=pp_rank)
    kl.vllm_attention(lay, "attn", layers, caches)
    lay.check()
    return lay, caches


class PipelinedGenerationOnAnotherDaemon(kvftest.DaemonCase):
    TWO = True

    def test_sent_after_the_last_stage_read_counted_by_the_daemon(self):
        cl = self.cluster
        lc, cc = rank("ctx-pp", "context", [0, 1, 2, 3])
        stages = [rank("gen-pp", "generation", [0, 1], 2, 0),
                  rank("gen-pp", "generation", [2, 3], 2, 1)]
        gen = torch.Generator().manual_seed(5)
        for t in cc:
            t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))
        with kvferry.Client(cl.a.sock, name="ctx") as c, \
                kvferry.Client(cl.b.sock, name="gen pp0") as g0, \
                kvferry.Client(cl.b.sock, name="gen pp1") as g1:
            c.register(lc)
            g0.register(stages[0][0])
            g1.register(stages[1][0])
            key = "pp2-request"
            c.send(key, {"attn": [1, 4]})  # n_readers 0: the daemon counts
            g0.recv(key, "ctx-pp", {"attn": [6, 2]}, ctx_home=cl.a.home)
            self.assertEqual(g0.wait(key, 30).kind, "DONE")
            early = list(c.events())  # stage 1 has not read yet: no SENT may have come
            self.assertEqual([e.kind for e in early], [], early)
            g1.recv(key, "ctx-pp", {"attn": [6, 2]}, ctx_home=cl.a.home)
            self.assertEqual(g1.wait(key, 30).kind, "DONE")
            sent = c.wait(key, 30)
            self.assertEqual(sent.kind, "SENT")
            self.assertIn("2 of 2 readers served (counted by the daemon)", sent.message)
        for (_, caches), layers in zip(stages, ([0, 1], [2, 3])):
            for t, layer in zip(caches, layers):
                self.assertTrue(torch.equal(t[:, [6, 2]], cc[layer][:, [1, 4]]))

    def test_each_context_stage_is_sent_when_its_own_generation_stage_read_it(self):
        # context PP 2 -> generation PP 2: context rank 0 holds layers 0-1, which generation
        # stage 0 alone holds; its count is complete (1) without stage 1 ever asking it
        cl = self.cluster
        ctx = [rank("ctx-pp2", "context", [0, 1], 2, 0), rank("ctx-pp2", "context", [2, 3], 2, 1)]
        gens = [rank("gen-pp2", "generation", [0, 1], 2, 0),
                rank("gen-pp2", "generation", [2, 3], 2, 1)]
        gen = torch.Generator().manual_seed(6)
        for t in ctx[0][1] + ctx[1][1]:
            t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))
        cs = [kvferry.Client(cl.a.sock, name="ctx pp%d" % i) for i in range(2)]
        gs = [kvferry.Client(cl.b.sock, name="gen pp%d" % i) for i in range(2)]
        try:
            for c, (lay, _) in zip(cs, ctx):
                c.register(lay)
            for g, (lay, _) in zip(gs, gens):
                g.register(lay)
            key = "pp2-pp2-request"
            for c in cs:
                c.send(key, {"attn": [3]})
            for i in range(2):  # stage by stage: each context rank SENT after its reader
                gs[i].recv(key, "ctx-pp2", {"attn": [5]}, ctx_home=cl.a.home)
                self.assertEqual(gs[i].wait(key, 30).kind, "DONE")
                sent = cs[i].wait(key, 30)
                self.assertEqual(sent.kind, "SENT")
                self.assertIn("1 of 1 readers served (counted by the daemon)", sent.message)
        finally:
            for x in cs + gs:
                x.close()
        for (_, cc), (_, gc) in zip(ctx, gens):
            for a, b in zip(cc, gc):
                self.assertTrue(torch.equal(a[:, [3]], b[:, [5]]) and bool(b.any()))


if __name__ == "__main__":
    unittest.main()
