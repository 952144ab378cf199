#!/usr/bin/env python3
"""A prefill (context) process: its hybrid KV cache allocated as vLLM v1 does (hybrid.py),
registered with kvferryd in a few lines; for each request it "prefills" (writes the request's
KV blocks and KDA state slot), SENDs, and frees the blocks and slot when SENT comes (the engine's
release-on-SENT). n_readers is left to the daemon.
    prefill.py --socket PATH --instance ID [--requests N] [--tp-size T --tp-rank R]"""
import argparse
import sys

import hybrid
import kvferry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--instance", default="prefill0")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tp-size", type=int, default=1)
    ap.add_argument("--tp-rank", type=int, default=0)
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--slots", type=int, default=4)
    a = ap.parse_args()

    cache = hybrid.HybridCache(a.blocks, a.slots, a.tp_size, a.tp_rank)
    free_blocks, free_slots = list(range(a.blocks)), list(range(a.slots))
    held = {}
    sent = 0
    with kvferry.Client(a.socket, name="prefill %s rank %d" % (a.instance, a.tp_rank)) as c:
        c.register(cache.layout(a.instance, "context"))          # the engine's own tensors
        for q in range(a.requests):
            while not free_slots or len(free_blocks) < hybrid.blocks_of(q):
                ev = c.poll(30)                                  # wait for a SENT to free some
                if ev is None:
                    sys.exit("prefill: no SENT within 30 s")
                sent += release(ev, held, free_blocks, free_slots)
            blocks = [free_blocks.pop(0) for _ in range(hybrid.blocks_of(q))]
            slot = free_slots.pop(0)
            cache.fill(hybrid.seed(q, a.tp_rank), blocks, slot)   # "prefill" writes the cache
            key = hybrid.request_key(q)
            c.send(key, {"attn": blocks, "kda": slot})           # n_readers: the daemon counts
            held[key] = (blocks, slot)
        while held:
            ev = c.poll(60)
            if ev is None:
                sys.exit("prefill: %d request(s) never SENT" % len(held))
            sent += release(ev, held, free_blocks, free_slots)
    print("prefill %s rank %d: %d requests SENT" % (a.instance, a.tp_rank, sent))


def release(ev, held, free_blocks, free_slots):
    if ev.key not in held:
        return 0
    ev.raise_for_error()                                         # FAILED: TransferError
    blocks, slot = held.pop(ev.key)
    free_blocks += blocks                                        # SENT: reuse them
    free_slots.append(slot)
    return 1


if __name__ == "__main__":
    main()
