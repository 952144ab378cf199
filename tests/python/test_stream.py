"""A SEND streamed layer by layer from Python (issue 28): Client.send(..., stream=True) and
Client.ready, and kvferry.stream.LayerHooks on a toy model whose four decoder layers each write
their layer's cache in forward, so each layer is announced just after it is written. Against
real daemons, the same daemon and two; the bytes checked bitwise, no DONE before the last layer,
and a READY out of order refused as BAD_REQUEST."""
import unittest

import kvftest  # noqa: F401  (import path)
import torch

import kvferry
from kvferry import layout as kl

T, H, D, BLOCKS, LAYERS = 16, 2, 32, 8, 4


def rank(instance, role):
    """vLLM FlashAttention caches (2, blocks, T, H, D), one per layer."""
    caches = [kvferry.host_tensor((2, BLOCKS, T, H, D), torch.bfloat16) for _ in range(LAYERS)]
    lay = kl.Layout(instance, role, kvftest.MODEL, T, LAYERS)
    kl.vllm_attention(lay, "attn", list(range(LAYERS)), caches)
    lay.check()
    return lay, caches


class Writer(torch.nn.Module):
    """A decoder layer whose forward writes its KV cache (the prefill's side effect)."""

    def __init__(self, cache, value):
        super().__init__()
        self.cache, self.value = cache, value

    def forward(self, x):
        self.cache.copy_(self.value)
        return x + 1


class Streamed:
    TWO = False

    def test_layer_hooks_stream_a_prefill_bitwise(self):
        cl = self.cluster
        lc, cc = rank("ctx-s", "context")
        lg, gc = rank("gen-s", "generation")
        gen = torch.Generator().manual_seed(28)
        final = [torch.randn(t.shape, generator=gen).to(t.dtype) for t in cc]
        for t in cc:
            t.fill_(7)  # not final: a byte moved before its layer's READY arrives wrong
        model = torch.nn.Sequential(*[Writer(c, v) for c, v in zip(cc, final)])
        blocks = list(range(BLOCKS))
        with kvferry.Client(cl.a.sock, name="ctx") as c, \
                kvferry.Client(cl.b.sock, name="gen") as g:
            c.register(lc)
            g.register(lg)
            c.send("s1", {"attn": blocks}, stream=True)
            g.recv("s1", "ctx-s", {"attn": blocks}, ctx_home=self.home())
            seen = []
            hooks = kvferry.stream.LayerHooks(c, "s1", list(model), upto_end=LAYERS)
            orig = c.ready

            def ready(key, upto, event=None):
                seen.append(upto)
                self.assertIsNone(g.poll(0), "an event before layer %d was final" % upto)
                orig(key, upto, event)
            c.ready = ready
            with hooks:
                model(torch.zeros(1))
            self.assertEqual(seen, [1, 2, 3, 4])
            self.assertEqual(g.wait("s1", 30).kind, "DONE")
            self.assertEqual(c.wait("s1", 30).kind, "SENT")
            for want, got in zip(final, gc):
                self.assertTrue(torch.equal(want, got))

    def test_ready_out_of_order_is_bad_request(self):
        cl = self.cluster
        lc, _ = rank("ctx-o", "context")
        with kvferry.Client(cl.a.sock, name="ctx") as c:
            c.register(lc)
            c.send("o1", {"attn": [0, 1]}, stream=True)
            c.ready("o1", 3)
            c.ready("o1", 2)
            with self.assertRaises(kvferry.TransferError) as cm:
                c.wait("o1", 30)
            self.assertEqual(cm.exception.error, "BAD_REQUEST")
            self.assertIn("after 3", str(cm.exception))
            with self.assertRaises(kvferry.KvferryError):
                c.ready("o1", 1, event=object())


class SameDaemon(Streamed, kvftest.DaemonCase):
    TWO = False


class TwoDaemons(Streamed, kvftest.DaemonCase):
    TWO = True


if __name__ == "__main__":
    unittest.main()
