#!/usr/bin/env python3
"""A decode (generation) process: the same hybrid cache layout, registered with its kvferryd;
for each request it allocates blocks and a slot, RECVs the request from the prefill instance
(on this daemon, or through --ctx-home on another), and checks every tensor with torch.equal
against what the prefill wrote (regenerated from the request's seed).
    decode.py --socket PATH --ctx-instance ID [--ctx-home HOST:PORT] [--requests N]"""
import argparse
import sys

import torch

import hybrid
import kvferry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--instance", default="decode0")
    ap.add_argument("--ctx-instance", default="prefill0")
    ap.add_argument("--ctx-home")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--slots", type=int, default=4)
    a = ap.parse_args()

    cache = hybrid.HybridCache(a.blocks, a.slots)
    expect = hybrid.HybridCache(a.blocks, 1)   # scratch: the prefill's bytes regenerated
    ok = 0
    with kvferry.Client(a.socket, name="decode %s" % a.instance) as c:
        c.register(cache.layout(a.instance, "generation"))
        for q in range(a.requests):
            n = hybrid.blocks_of(q)
            blocks = list(range(a.blocks - n, a.blocks))[::-1]    # not the prefill's ids
            slot = q % a.slots
            key = hybrid.request_key(q)
            c.recv(key, a.ctx_instance, {"attn": blocks, "kda": slot}, ctx_home=a.ctx_home)
            c.wait(key, 60)                                       # DONE, or TransferError
            expect.fill(hybrid.seed(q, 0), list(range(n)), 0)
            got = cache.request_tensors(blocks, slot)
            want = expect.request_tensors(list(range(n)), 0)
            if not all(torch.equal(x, y) for x, y in zip(got, want)):
                sys.exit("decode: request %s differs from what the prefill wrote" % key)
            ok += 1
    print("decode %s: %d/%d requests DONE, every tensor torch.equal" % (a.instance, ok,
                                                                        a.requests))


if __name__ == "__main__":
    main()
