#!/usr/bin/env python3
"""One GPU case, in its own process (allocator settings must precede CUDA's start):
  gpu_pair.py move ALLOC SOCKET [REQUESTS]: a context and a generation rank of the hybrid model
      (examples/python/hybrid.py) with buffers from allocator ALLOC (gpu_alloc.py) register with
      the kvferryd at SOCKET, move REQUESTS requests through the same-node GPU path, and compare
      every tensor with torch.equal; prints the pool kinds it registered; exit 0 when all match.
  gpu_pair.py hold ALLOC SOCKET INSTANCE: registers a context rank and one SEND, prints READY,
      then waits to be killed (the rank killed while its memory is mapped)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [HERE, os.path.join(ROOT, "python"), os.path.join(ROOT, "examples", "python")]

import torch  # noqa: E402

import gpu_alloc  # noqa: E402
import hybrid  # noqa: E402
import kvferry  # noqa: E402

KINDS = {0: "host", 1: "cuda-ipc", 2: "cuda-vmm"}


def caches(alloc_name, n_blocks=48, n_slots=4):
    torch.zeros(1, device="cuda")  # the primary context, current for the driver calls below
    alloc = gpu_alloc.ALLOCATORS[alloc_name]()
    ctx = hybrid.HybridCache(n_blocks, n_slots, device="cuda", alloc=alloc)
    gen = hybrid.HybridCache(n_blocks, n_slots, device="cuda", alloc=alloc)
    return ctx, gen


def kinds(layout):
    out = []
    for r in layout.regions():
        out.append("%s@%d" % (KINDS[r.pool.kind], r.pool.offset))
    return out


def move(alloc_name, sock, n):
    ctx, gen = caches(alloc_name)
    lc, lg = ctx.layout("gpu-ctx", "context"), gen.layout("gpu-gen", "generation")
    print("pools:", " ".join(kinds(lc)), flush=True)
    with kvferry.Client(sock, name="gpu ctx") as c, kvferry.Client(sock, name="gpu gen") as g:
        t0 = time.perf_counter()
        c.register(lc)
        print("register %.1f ms" % ((time.perf_counter() - t0) * 1e3), flush=True)
        g.register(lg)
        bad = 0
        for q in range(n):
            nb = hybrid.blocks_of(q)
            cb, gb = list(range(nb)), list(range(47, 47 - nb, -1))
            cs, gs = q % 4, (q + 2) % 4
            ctx.fill(q, cb, cs)
            torch.cuda.synchronize()
            key = "gpu-%s-%d" % (alloc_name, q)
            c.send(key, {"attn": cb, "kda": cs})
            g.recv(key, "gpu-ctx", {"attn": gb, "kda": gs})
            g.wait(key, 60)
            c.wait(key, 60)
            if not ctx.equal(gen, cb, gb, cs, gs):
                bad += 1
        print("%s: %d/%d requests, every byte %s" % (alloc_name, n - bad, n,
                                                     "equal" if not bad else "NOT equal"))
        return 1 if bad else 0


def hold(alloc_name, sock, instance):
    ctx, _ = caches(alloc_name)
    lc = ctx.layout(instance, "context")
    c = kvferry.Client(sock, name="gpu hold")
    c.register(lc)
    ctx.fill(7, [0, 1], 0)
    torch.cuda.synchronize()
    c.send("held-1", {"attn": [0, 1], "kda": 0})
    print("READY", " ".join(kinds(lc)), flush=True)
    time.sleep(3600)  # killed by the test


if __name__ == "__main__":
    what, alloc_name, sock = sys.argv[1:4]
    if what == "move":
        sys.exit(move(alloc_name, sock, int(sys.argv[4]) if len(sys.argv) > 4 else 6))
    hold(alloc_name, sock, sys.argv[4])
