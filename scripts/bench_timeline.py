"""bench_timeline: the daemons' chunk timeline (arena.timeline, daemon/engine/bounce_tl.h) of a
GPU bounce, read from check_gpu_remote's KVF_GPU_REMOTE_TIMELINE_OUT: where each chunk's time
went, per stage, on both daemons. Used by scripts/bench-gpu-remote and scripts/bench-gpu-direct."""
import statistics

KINDS = ["grant_rx", "gather_launch", "gather_done", "chunk_sent", "chunk_rx", "scatter_launch",
         "scatter_done", "landed"]


def union_ms(iv):
    """Total length of the union of [a, b) intervals (ns in, ms out)."""
    tot, end = 0, None
    for a, b in sorted(iv):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot / 1e6


def timeline_report(tl, window=8):
    """The last request's chunks, A's and B's events joined by (writer, extent offset)."""
    ev = {side: [(e[0], KINDS[e[1]], e[2], e[3], e[4])
                 for e in (tl.get(side) or {}).get("events", [])] for side in ("A", "B")}
    landed = [e for e in ev["B"] if e[1] == "landed"]
    if not landed or not ev["A"]:
        return None
    req = landed[-1][2]
    ch = {}
    for side in ("A", "B"):
        for t, k, r, w, off in ev[side]:
            if r == req:
                ch.setdefault((w, off), {}).setdefault(k, t)  # first event of each kind
    full = {key: c for key, c in ch.items() if all(k in c for k in KINDS if k != "chunk_sent")}
    if not full:
        return None
    cs = [full[k] for k in sorted(full)]
    t0 = min(c["gather_launch"] for c in cs)
    t1 = max(c["landed"] for c in cs)
    wall = (t1 - t0) / 1e6
    gaps = {"credit at A waits for the window (grant_rx -> launch)": ("grant_rx", "gather_launch"),
            "gather, loop view (launch -> done)": ("gather_launch", "gather_done"),
            "CHUNK (A gather done -> B chunk_rx)": ("gather_done", "chunk_rx"),
            "B chunk_rx -> scatter_launch": ("chunk_rx", "scatter_launch"),
            "scatter, loop view (launch -> done)": ("scatter_launch", "scatter_done"),
            "B scatter_done -> landed": ("scatter_done", "landed")}
    out = {"req": req, "chunks": len(cs), "wall_ms": wall, "gaps_ms": {}}
    for name, (a, b) in gaps.items():
        d = sorted((c[b] - c[a]) / 1e6 for c in cs)
        out["gaps_ms"][name] = {"median": statistics.median(d), "max": d[-1], "sum": sum(d)}
    # the credit's way back: the i-th credit after the first window follows the i-th landing
    grants = sorted(c["grant_rx"] for c in cs)[window:]
    lands = sorted(c["landed"] for c in cs)
    back = sorted((g - l) / 1e6 for g, l in zip(grants, lands))
    if back:
        out["gaps_ms"]["credit back (B landed -> A grant_rx)"] = {
            "median": statistics.median(back), "max": back[-1], "sum": sum(back)}
    g_iv = [(c["gather_launch"], c["gather_done"]) for c in cs]
    s_iv = [(c["scatter_launch"], c["scatter_done"]) for c in cs]
    busy_g, busy_s, busy_any = union_ms(g_iv), union_ms(s_iv), union_ms(g_iv + s_iv)
    g_end = max(c["gather_done"] for c in cs)
    s0, s1 = min(c["chunk_rx"] for c in cs), max(c["scatter_done"] for c in cs)
    out["gather_idle_ms"] = (g_end - t0) / 1e6 - busy_g  # A had chunks left but no kernel
    out["scatter_idle_ms"] = (s1 - s0) / 1e6 - busy_s    # B between its first CHUNK and last
    out.update({"gather_busy_ms": busy_g, "scatter_busy_ms": busy_s,
                "both_busy_ms": busy_g + busy_s - busy_any, "both_idle_ms": wall - busy_any})
    pts = sorted([(c["gather_launch"], 1) for c in cs] + [(c["landed"], -1) for c in cs])
    n = peak = 0
    area, last = 0.0, t0
    for t, d in pts:
        area += n * (t - last)
        last = t
        n += d
        peak = max(peak, n)
    out["in_flight_mean"] = area / (t1 - t0) if t1 > t0 else 0
    out["in_flight_max"] = peak
    for side in ("A", "B"):
        out["gpu_completions_" + side] = tl.get("gpu_" + side)
    return out


def print_timeline(tr):
    print("  chunk timeline of request %d (%d chunks, first gather launch -> last landed %.2f ms):"
          % (tr["req"], tr["chunks"], tr["wall_ms"]))
    for name, g in tr["gaps_ms"].items():
        print("    %-54s median %7.3f  max %7.3f  sum %8.2f ms" % (name, g["median"], g["max"],
                                                                    g["sum"]))
    print("    A without a gather while chunks were left %.2f ms; B without a scatter between "
          "its first CHUNK and its last scatter %.2f ms" % (tr["gather_idle_ms"],
                                                           tr["scatter_idle_ms"]))
    print("    gathers outstanding %.2f ms, scatters %.2f ms, both %.2f ms, neither %.2f ms "
          "(%.0f%% of the wall); chunks in flight mean %.1f, max %d"
          % (tr["gather_busy_ms"], tr["scatter_busy_ms"], tr["both_busy_ms"], tr["both_idle_ms"],
             100.0 * tr["both_idle_ms"] / tr["wall_ms"] if tr["wall_ms"] else 0,
             tr["in_flight_mean"], tr["in_flight_max"]))
    for side in ("A", "B"):
        c = tr.get("gpu_completions_" + side) or {}
        if c.get("ok"):
            print("    daemon %s GPU completions: %d, %d by the completion spin (%d us), loop "
                  "wake-up after the completion was seen mean %.3f ms, max %.3f ms"
                  % (side, c["ok"], c.get("spin_fired", 0), c.get("spin_us", 0),
                     c.get("wake_ns_total", 0) / 1e6 / c["ok"],
                     c.get("wake_ns_max", 0) / 1e6))
