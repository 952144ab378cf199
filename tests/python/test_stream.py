"""A SEND streamed layer by layer from Python (issue 28): Client.send(..., stream=True) and
Client.ready, and kvferry.stream.LayerHooks on a toy model whose four decoder layers each write
their layer's cache in forward, so each layer is announced just after it is written. Against
real daemons, the same daemon and two; the bytes checked bitwise, no DONE before the last layer,
and a READY out of order refused as BAD_REQUEST. CUDA events: refused on host pools (BAD_REQUEST
naming why), and LayerHooks(events=...) recording the ring before each READY."""
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


class Events(kvftest.DaemonCase):
    """CUDA interprocess events from Python (kvf_register_events, kvf_send_ready_event): what a
    host-pool rank proves (tests/python/gpu/test_gpu.py has the GPU side)."""
    TWO = False

    def test_events_refused_on_host_pools_and_a_ready_naming_one_fails_its_send(self):
        lc, _ = rank("ctx-e", "context")
        with kvferry.Client(self.cluster.a.sock, name="ctx") as c:
            c.register(lc)
            with self.assertRaises(kvferry.KvferryError) as cm:
                c.register_events([bytes(64)] * 2)
            self.assertIn("host memory", str(cm.exception))
            with self.assertRaises(TypeError):
                c.register_events([object()])
            with self.assertRaises(ValueError):
                c.register_events([bytes(63)])
            c.send("e1", {"attn": [0, 1]}, stream=True)
            c.ready("e1", 1, event=0)  # by index: the daemon knows no events of this rank
            with self.assertRaises(kvferry.TransferError) as cm:
                c.wait("e1", 30)
            self.assertEqual(cm.exception.error, "BAD_REQUEST")
            self.assertIn("names CUDA event 0", str(cm.exception))


class FakeEvent:
    """record() logs into a shared list, as torch.cuda.Event.record would enqueue."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def record(self):
        self.log.append(("record", self.name))


class HookEvents(unittest.TestCase):
    def test_layer_hooks_record_the_ring_before_each_ready_and_never_sync(self):
        log = []

        class Client:
            def ready(self, key, upto, event=None):
                log.append(("ready", upto, event.name if event is not None else None))
        ring = [FakeEvent(log, i) for i in range(2)]
        model = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(LAYERS)])
        with kvferry.stream.LayerHooks(Client(), "k", list(model), events=ring,
                                       upto_end=LAYERS + 1):
            model(torch.zeros(1))
        self.assertEqual(log, [("record", 0), ("ready", 1, 0), ("record", 1), ("ready", 2, 1),
                               ("record", 0), ("ready", 3, 0), ("record", 1), ("ready", 4, 1),
                               ("record", 0), ("ready", 5, 0)])
        with self.assertRaises(ValueError):
            kvferry.stream.LayerHooks(Client(), "k", [], sync=lambda: None, events=ring)


class SameDaemon(Streamed, kvftest.DaemonCase):
    TWO = False


class TwoDaemons(Streamed, kvftest.DaemonCase):
    TWO = True


if __name__ == "__main__":
    unittest.main()
