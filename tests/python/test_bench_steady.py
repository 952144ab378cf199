"""The steady-window arithmetic of scripts/bench-local (scripts/bench_local_steady.py) on made-up
timelines: the figures the issue-12 same-daemon goals are read from."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import bench_local_steady as steady  # noqa: E402

GB = 1e9


class SteadyTest(unittest.TestCase):
    def test_self_test(self):
        steady.self_test()

    def test_fifo_service_not_issue_spread(self):
        # a window of 4 issued together, served one after another at 2 GB/s: the window
        # [1.5, 3] holds 3 GB (the spread over RECV->DONE would give less for early ones)
        r = ([0, 0, 1, 1, 1, 1], [0.5, 1, 1.5, 2, 2.5, 3], GB)
        s = steady.steady([r])
        self.assertAlmostEqual(s["t_a"], 1.0)
        self.assertAlmostEqual(s["steady_gbps"], 2.0)

    def test_idle_gap_counts(self):
        # a gap between windows (the sim verifying) lowers the rate: 4 GB over [1, 4]
        r = ([0, 0, 1, 1, 3, 3], [0.5, 1, 1.5, 2, 3.5, 4], GB)
        s = steady.steady([r])
        self.assertAlmostEqual(s["steady_gbps"], 4 / 3)

    def test_unfair_ranks(self):
        fast = ([0, 0, 1, 1, 2, 2], [0.5, 1, 1.5, 2, 2.5, 3], GB)
        slow = ([0, 0, 2, 2], [1, 2, 3, 4], GB)
        s = steady.steady([fast, slow])
        self.assertAlmostEqual(s["t_a"], 2.0)
        self.assertAlmostEqual(s["t_b"], 3.0)
        self.assertAlmostEqual(s["per_rank_gbps"][0], 2.0)
        self.assertAlmostEqual(s["per_rank_gbps"][1], 1.0)

    def test_counters_out_of_range(self):
        self.assertIsNone(steady.counters([(0, 0, 0, 0), (1, 1, 0, 0)], 0.5, 2.0, 2))


if __name__ == "__main__":
    unittest.main()
