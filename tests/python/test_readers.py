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


if __name__ == "__main__":
    unittest.main()
