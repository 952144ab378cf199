"""Shared pieces of the Python suites: the import path, a daemon per test class, moving one
request between two layouts and comparing tensors."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (os.path.join(ROOT, "python"), os.path.join(ROOT, "examples", "python"), HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import kvfharness  # noqa: E402

MODEL = {"model_type": "test", "num_hidden_layers": 4, "hidden_size": 256}


class DaemonCase(unittest.TestCase):
    """One real kvferryd (or two: TWO = True) for the whole class."""
    TWO = False

    @classmethod
    def setUpClass(cls):
        cls.cluster = kvfharness.Cluster(two=cls.TWO).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def home(self):
        return self.cluster.a.home if self.TWO else None


def move(case, ctx_layout, gen_layout, ctx_items, gen_items, key, two=False):
    """Registers both layouts on fresh clients, SENDs (n_readers 0) and RECVs one request,
    asserts DONE and SENT."""
    import kvferry
    cl = case.cluster
    with kvferry.Client(cl.a.sock, name="ctx") as c, kvferry.Client(cl.b.sock, name="gen") as g:
        c.register(ctx_layout)
        g.register(gen_layout)
        c.send(key, ctx_items)
        g.recv(key, ctx_layout.instance, gen_items, ctx_home=cl.a.home if two else None)
        done = g.wait(key, 30)
        sent = c.wait(key, 30)
        case.assertEqual(done.kind, "DONE")
        case.assertEqual(sent.kind, "SENT")
        return done
