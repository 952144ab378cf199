"""GPU cases on one device against a real kvferryd (same-node GPU path): the hybrid model's
request moved with every byte compared (torch.equal) from buffers of every allocator kvferry
registers (gpu_alloc.py), and a context rank killed while its VMM memory is mapped. Each case runs
gpu_pair.py in a process of its own, since allocator settings must precede CUDA's start.
Skipped, with the reason, without CUDA."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "examples", "python")]

import kvfharness  # noqa: E402

PAIR = os.path.join(HERE, "gpu_pair.py")


def cuda_reason():
    try:
        import torch
    except ImportError:
        return "no torch"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def have_cupy():
    try:
        import cupy  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipIf(cuda_reason(), "GPU: %s" % cuda_reason())
class Gpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = kvfharness.Cluster().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def run_pair(self, alloc, env=None, args=("move",), n=6):
        e = dict(os.environ)
        e.update(env or {})
        out = subprocess.run([sys.executable, PAIR, args[0], alloc, self.cluster.a.sock, str(n)],
                             capture_output=True, text=True, timeout=240, env=e)
        sys.stdout.write(out.stdout)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr + self.cluster.a.tail())
        self.assertIn("%d/%d requests, every byte equal" % (n, n), out.stdout)
        return out.stdout

    def gpu_status(self):
        out = subprocess.check_output([os.path.join(kvfharness.BUILD, "kvferryctl"), "--socket",
                                       os.path.join(self.cluster.a.dir, "control.sock"),
                                       "--json", "status"])
        return json.loads(out)["gpu"]

    def test_caching_allocator_at_nonzero_offsets(self):
        out = self.run_pair("caching", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"})
        pools = out.split("pools:")[1].split("\n")[0].split()
        self.assertTrue(all(p.startswith("cuda-ipc@") for p in pools), pools)
        self.assertTrue(any(not p.endswith("@0") for p in pools), "no pool at an offset: %s" % pools)

    def test_expandable_segments_by_vmm_fds(self):
        out = self.run_pair("expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        self.assertIn("cuda-vmm@", out)

    def test_raw_cudamalloc(self):
        out = self.run_pair("cudamalloc")
        self.assertIn("cuda-ipc@65536", out)

    @unittest.skipUnless(have_cupy(), "no CuPy")
    def test_cupy_memory(self):
        self.run_pair("cupy")

    def test_cumem_create_chunks(self):
        out = self.run_pair("cumem")
        self.assertIn("cuda-vmm@0", out)

    def test_rank_killed_while_its_vmm_memory_is_mapped(self):
        base = self.gpu_status()["mappings"]["count"]
        for alloc, env in (("cumem", {}),
                           ("expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})):
            e = dict(os.environ)
            e.update(env)
            p = subprocess.Popen([sys.executable, PAIR, "hold", alloc, self.cluster.a.sock,
                                  "held-" + alloc], stdout=subprocess.PIPE, text=True, env=e)
            line = p.stdout.readline()
            self.assertTrue(line.startswith("READY"), line)
            self.assertGreater(self.gpu_status()["mappings"]["count"], base)
            p.send_signal(signal.SIGKILL)
            p.wait(30)
            deadline = time.monotonic() + 30
            while self.gpu_status()["mappings"]["count"] != base and time.monotonic() < deadline:
                time.sleep(0.05)  # the daemon notices the hang-up on its loop; bounded above
            st = self.gpu_status()["mappings"]
            self.assertEqual(st["count"], base, st)
            self.assertEqual(st["close_errors"], 0, st)
        self.run_pair("cumem")  # and it still serves


if __name__ == "__main__":
    unittest.main(verbosity=2)
