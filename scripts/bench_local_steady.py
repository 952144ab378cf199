"""bench_local_steady.py: the steady multi-rank figures of scripts/bench-local, from the sims' own
per-request clocks (RECV and DONE on one host's CLOCK_MONOTONIC) and the daemon's copy-engine
counters sampled over the run.

Service model: a rank's requests are served in the order they complete (the copy engine's queue
is FIFO), so request j moves its bytes over [max(its RECV, the previous DONE), its DONE]; a
rank's moved bytes B(t) are the sum of those ramps. Between windows (the sim verifying, issuing)
the rank has nothing queued and B(t) stays flat, as it should.

Steady window: from the moment every rank is past its first window (the service start of its
first request issued after its first DONE: the first fills, the first faults and the check of
the first request are behind it) to the first rank's last DONE. Every rank is active in it.
aggregate = sum over ranks of (B(tb) - B(ta)) / (tb - ta); per rank = each term.

python3 scripts/bench_local_steady.py --self-test checks the arithmetic on made-up timelines."""
import sys


def service(issue, done, per_req):
    """[(start, end, bytes)] of one rank under the FIFO model, by DONE order."""
    out, prev = [], None
    for i, d in sorted(zip(issue, done), key=lambda x: x[1]):
        s = i if prev is None else max(i, prev)
        out.append((s, d, per_req))
        prev = d
    return out


def moved(ramps, t):
    """Bytes of ramps moved by time t."""
    b = 0.0
    for s, e, n in ramps:
        if t >= e:
            b += n
        elif t > s:
            b += n * (t - s) / (e - s)
    return b


def warm_start(issue, done):
    """Service start of the rank's first request issued after its first DONE (None: one window)."""
    first = min(done)
    later = sorted((i, d) for i, d in zip(issue, done) if i > first)
    if not later:
        return None
    prev = max((d for d in done if d <= later[0][0]), default=later[0][0])
    return max(later[0][0], prev)


def steady(ranks):
    """ranks: [(issue[], done[], bytes_per_request)] on one clock. A dict: steady_gbps,
    per_rank_gbps, steady_s, t_a, t_b, requests_in_window (per rank, whole DONEs), or
    why (no window)."""
    warm = [warm_start(i, d) for i, d, _ in ranks]
    if None in warm:
        return {"why": "a rank ran one window only (more requests per rank)"}
    ta, tb = max(warm), min(max(d) for _, d, _ in ranks)
    if tb <= ta:
        return {"why": "no moment when every rank is past its first window (ends staggered)"}
    share, inwin = [], []
    for i, d, b in ranks:
        r = service(i, d, b)
        share.append((moved(r, tb) - moved(r, ta)) / (tb - ta) / 1e9)
        inwin.append(sum(1 for x in d if ta < x <= tb))
    out = {"steady_gbps": sum(share), "per_rank_gbps": share, "steady_s": tb - ta,
           "t_a": ta, "t_b": tb, "requests_in_window": inwin}
    if min(inwin) < 2:
        out["why"] = "under 2 requests per rank in the window (more requests per rank)"
    return out


def counters(samples, ta, tb, threads):
    """samples: [(t, busy_s, queued_pieces, running_jobs)] of the daemon's copy engine, by time.
    The engine's busy fraction over [ta, tb] (busy thread-seconds / (threads x length), by
    linear interpolation) and the mean queued pieces / running jobs of the samples in it."""
    def at(t):
        for (t0, b0, *_), (t1, b1, *_) in zip(samples, samples[1:]):
            if t0 <= t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b0
        return None
    ba, bb = at(ta), at(tb)
    inside = [s for s in samples if ta <= s[0] <= tb]
    if ba is None or bb is None or not inside:
        return None
    return {"busy_fraction": (bb - ba) / (threads * (tb - ta)), "busy_s": bb - ba,
            "samples": len(inside),
            "queued_pieces_mean": sum(s[2] for s in inside) / len(inside),
            "running_jobs_mean": sum(s[3] for s in inside) / len(inside)}


def self_test():
    gb = 1e9
    # one rank, windows of 2 requests of 1 GB, served back to back at 1 GB/s after a 1 s gap
    r1 = ([0, 0, 3, 3, 5, 5], [1, 2, 4, 5, 6, 7], gb)
    s = steady([r1])
    assert abs(s["t_a"] - 3) < 1e-9 and abs(s["t_b"] - 7) < 1e-9, s
    assert abs(s["steady_gbps"] - 1.0) < 1e-9, s
    # a second rank at half the rate, started later: window from its warm start to r1's end
    r2 = ([1, 1, 5, 5], [3, 5, 7, 9], gb)
    s = steady([r1, r2])
    assert abs(s["t_a"] - 5) < 1e-9 and abs(s["t_b"] - 7) < 1e-9, s
    assert abs(s["per_rank_gbps"][0] - 1.0) < 1e-9 and abs(s["per_rank_gbps"][1] - 0.5) < 1e-9, s
    assert s["requests_in_window"] == [2, 1] and "why" in s, s
    # a rank that ends before the other's first window is done: no window
    assert "why" in steady([([0, 0, 1, 1], [0.5, 1, 1.5, 2], gb), ([3, 3, 4], [3.5, 4, 5], gb)])
    assert "why" in steady([([0, 0], [1, 2], gb)])  # one window only
    c = counters([(0, 0, 4, 1), (1, 2, 8, 2), (2, 3, 0, 0)], 0.5, 1.5, 2)
    assert abs(c["busy_fraction"] - 0.75) < 1e-9 and c["queued_pieces_mean"] == 8, c
    print("bench_local_steady: self-test ok")


if __name__ == "__main__" and sys.argv[1:] == ["--self-test"]:
    self_test()
