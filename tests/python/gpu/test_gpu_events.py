"""A streamed SEND with CUDA-event readiness from PyTorch (issue 28), on one GPU against a real
kvferryd (the same-node GPU path): a toy model whose decoder layers spin on the GPU
(torch.cuda._sleep) and then write their layer's KV cache; LayerHooks(events=ring) records the
ring's next torch.cuda.Event(interprocess=True) after each layer and names it in the READY, so
the prefill never synchronizes. Every READY is sent while the stream still runs (asserted); the
cache holds wrong bytes until each layer writes it, so a copy that did not wait on the GPU would
arrive wrong: the generation side's tensors are compared with torch.equal. Bad input: an event
not passed, an index past the ring (BAD_REQUEST naming it), events passed twice. CuPy events
too when CuPy is there. Skipped, with the reason, without CUDA."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [HERE, os.path.join(ROOT, "python"), os.path.join(ROOT, "examples", "python")]

import kvfharness  # noqa: E402
from test_gpu import cuda_reason, have_cupy  # noqa: E402

T, H, D, BLOCKS, LAYERS = 16, 2, 64, 16, 6
MODEL = {"model_type": "test", "num_hidden_layers": LAYERS, "hidden_size": 256}
SPIN0, SPIN = 60_000_000, 4_000_000  # GPU cycles: ~30-60 ms before layer 0, a few ms after


@unittest.skipIf(cuda_reason(), "GPU: %s" % cuda_reason())
class GpuEvents(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = kvfharness.Cluster().__enter__()  # before CUDA starts in this process

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def rank(self, instance, role):
        import torch
        import kvferry
        from kvferry import layout as kl
        caches = [torch.full((2, BLOCKS, T, H, D), 7, dtype=torch.bfloat16, device="cuda")
                  for _ in range(LAYERS)]
        lay = kl.Layout(instance, role, MODEL, T, LAYERS)
        kl.vllm_attention(lay, "attn", list(range(LAYERS)), caches)
        lay.check()
        return lay, caches, kvferry

    def model(self, caches, finals):
        import torch

        class Layer(torch.nn.Module):
            def __init__(self, i):
                super().__init__()
                self.i = i

            def forward(self, x):
                torch.cuda._sleep(SPIN0 if self.i == 0 else SPIN)  # the layer's compute
                caches[self.i].copy_(finals[self.i])  # its KV cache written on the stream
                return x + 1
        return torch.nn.Sequential(*[Layer(i) for i in range(LAYERS)])

    def stream(self, c, g, key, ring, caches, gcaches, seed):
        import torch
        import kvferry
        gen = torch.Generator(device="cuda").manual_seed(seed)
        finals = [torch.randn(t.shape, generator=gen, device="cuda").to(t.dtype) for t in caches]
        for t in caches:
            t.fill_(7)  # wrong until the layer writes it
        torch.cuda.synchronize()  # the set-up, not the prefill: it never synchronizes
        blocks = list(range(BLOCKS))
        c.send(key, {"attn": blocks}, stream=True)
        g.recv(key, "ctx-ev", {"attn": blocks})
        m = self.model(caches, finals)
        with kvferry.stream.LayerHooks(c, key, list(m), events=ring, upto_end=LAYERS):
            m(torch.zeros(1, device="cuda"))
        self.assertFalse(torch.cuda.current_stream().query(),
                         "the prefill ended before its READYs were sent: the case proves nothing")
        self.assertEqual(g.wait(key, 60).kind, "DONE")
        self.assertEqual(c.wait(key, 60).kind, "SENT")
        for i, (want, got) in enumerate(zip(finals, gcaches)):
            self.assertTrue(torch.equal(want, got), "layer %d differs" % i)

    def test_layer_hooks_with_torch_events_stream_bitwise_without_a_sync(self):
        import torch
        lc, cc, kvferry = self.rank("ctx-ev", "context")
        lg, gc, _ = self.rank("gen-ev", "generation")
        ring = [torch.cuda.Event(interprocess=True) for _ in range(LAYERS)]
        sock = self.cluster.a.sock
        with kvferry.Client(sock, name="ctx") as c, kvferry.Client(sock, name="gen") as g:
            c.register(lc)
            g.register(lg)
            c.register_events(ring)
            with self.assertRaises(OSError) as cm:
                c.register_events(ring)  # once per registration: EALREADY
            self.assertIn("passed already", str(cm.exception))
            with self.assertRaises(kvferry.KvferryError):
                c.ready("nobody", 1, event=torch.cuda.Event(interprocess=True))  # not passed
            c.send("bad", {"attn": [0]}, stream=True)
            c.ready("bad", 1, event=LAYERS)  # past the ring
            with self.assertRaises(kvferry.TransferError) as cm:
                c.wait("bad", 30)
            self.assertEqual(cm.exception.error, "BAD_REQUEST")
            self.assertIn("names CUDA event %d" % LAYERS, str(cm.exception))
            self.stream(c, g, "ev-1", ring, cc, gc, 281)
            self.stream(c, g, "ev-2", ring[:2], cc, gc, 282)  # a ring of 2, re-recorded

    @unittest.skipUnless(have_cupy(), "no CuPy")
    def test_cupy_events_are_taken(self):
        import cupy  # noqa: F401
        lc, cc, kvferry = self.rank("ctx-ev", "context")
        lg, gc, _ = self.rank("gen-ev", "generation")
        ring = [cupy.cuda.Event(block=False, disable_timing=True, interprocess=True)
                for _ in range(LAYERS)]
        sock = self.cluster.a.sock
        with kvferry.Client(sock, name="ctx") as c, kvferry.Client(sock, name="gen") as g:
            c.register(lc)
            g.register(lg)
            c.register_events(ring)
            self.stream(c, g, "cupy-1", ring, cc, gc, 283)


if __name__ == "__main__":
    unittest.main(verbosity=2)
