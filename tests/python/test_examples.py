"""examples/python/run.py as the README runs it: a prefill and a decode process through one
kvferryd and through two."""
import os
import subprocess
import sys
import unittest

import kvftest


class Examples(unittest.TestCase):
    def run_example(self, *args):
        out = subprocess.run([sys.executable, os.path.join(kvftest.ROOT, "examples", "python",
                                                           "run.py"), "--requests", "6"] + list(args),
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("6/6 requests DONE, every tensor torch.equal", out.stdout)
        self.assertIn("6 requests SENT", out.stdout)

    def test_one_daemon(self):
        self.run_example()

    def test_two_daemons(self):
        self.run_example("--two-daemons")


if __name__ == "__main__":
    unittest.main()
