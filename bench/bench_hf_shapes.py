#!/usr/bin/env python3
"""kvferry.hf without transformers: RECV-to-DONE of a 4096-token request whose cache has the
shapes of the small qwen3-next and llama models of examples/python/hf_models.py (gated delta
conv [256, 4] bf16 + recurrent [4, 32, 32] fp32, GQA 2 heads x 32 bf16), host pools, one daemon
and two (the bounce path), three repetitions each; the received bytes' digest checked.
    BUILD=build python3 bench/bench_hf_shapes.py [--out FILE]   (JSON lines)"""
import json
import os
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "python")]
import kvftest  # noqa: E402  (the import path of the package and the harness)
import torch  # noqa: E402

import kvferry  # noqa: E402
from kvferry import hf  # noqa: E402
from test_hf import config, layer_attn, layer_state  # noqa: E402

MODELS = {
    "qwen3-next-shapes": ({"model_type": "bench-gdn", "num_hidden_layers": 4,
                           "layer_types": ["linear_attention", "full_attention"] * 2}, True),
    "llama-shapes": ({"model_type": "bench-gqa", "num_hidden_layers": 4}, False),
}


def cache(hybrid, n, seed):
    g = torch.Generator().manual_seed(seed)
    if hybrid:
        return types.SimpleNamespace(layers=[layer_state(256, 4, (4, 32, 32), g) if i % 2 == 0
                                             else layer_attn(n, 2, 32, 32, g) for i in range(4)])
    return types.SimpleNamespace(layers=[layer_attn(n, 2, 32, 32, g) for _ in range(4)])


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    rows = []
    for two in (False, True):
        with kvftest.kvfharness.Cluster(two=two) as cl:
            for name, (cfg, hybrid) in MODELS.items():
                spec = hf.Spec.from_cache(config(cfg), cache(hybrid, 3, 0))
                for rep in range(3):
                    cp, gp = hf.Pools(spec, 300, 2, 16), hf.Pools(spec, 300, 2, 16)
                    key = "%s-%d-%d" % (name, two, rep)
                    with kvferry.Client(cl.a.sock) as c, kvferry.Client(cl.b.sock) as g:
                        c.register(cp.layout("c" + key, "context"))
                        g.register(gp.layout("g" + key, "generation"))
                        sent = cache(hybrid, 4096, rep)
                        r = cp.alloc(4096)
                        cp.export(sent, r)
                        c.send(key, r.items)
                        q = gp.alloc(4096)
                        t0 = time.perf_counter()
                        g.recv(key, "c" + key, q.items, tokens=4096,
                               ctx_home=cl.a.home if two else None)
                        g.wait(key, 30)
                        dt = time.perf_counter() - t0
                        c.wait(key, 30)
                        same = hf.digest(gp.gather(q)) == hf.digest(hf.sequence_tensors(sent, spec))
                    cp.close()
                    gp.close()
                    rows.append({"shapes": name, "daemons": 2 if two else 1, "tokens": 4096,
                                 "rep": rep, "attn_bytes_per_token": spec.attn_bytes_per_token(),
                                 "state_bytes": spec.state_bytes(),
                                 "recv_to_done_ms": round(dt * 1000, 3), "digest_equal": same})
                    print(json.dumps(rows[-1]))
    if out:
        with open(out, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    sys.exit(0 if all(r["digest_equal"] for r in rows) else 1)


if __name__ == "__main__":
    main()
