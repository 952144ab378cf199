#!/usr/bin/env python3
"""A transformers model split into a prefill process and a decode process through kvferry.
The prefill process runs each prompt, exports the cache into its pools (kvferry.hf), SENDs and
hands the request's metadata (tokens, first token, digest of the sent bytes) to the decode
process, as a router would; the decode process RECVs into its own pools, rebuilds a
DynamicCache, decodes greedily and compares with the unsplit run (prefill and decode in one
process): tokens equal, every step's logits bitwise equal, received bytes hash equal.
    hf_disagg.py [--model kimi-linear|qwen3-next|granite-hybrid|llama] [--two-daemons]
                 [--device cuda|cpu] [--pools host|device] [--requests N] [--steps N]
runs kvferryd from this checkout's build (one daemon, or two: the decode reads through the
prefill daemon's listen address) and both processes. Needs transformers 5.x."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")]


def lengths(n):
    """Prompt lengths: inside a block and on block boundaries."""
    return [37, 48, 100, 64, 129, 16][:n] + [20 + 7 * i for i in range(max(0, n - 6))]


def setup(a):
    import hf_models
    from kvferry import hf
    model, cfg = hf_models.build(a.model, a.device)
    cache, _, _ = hf_models.prefill(model, cfg, hf_models.prompt(1, 3))
    spec = hf.Spec.from_cache(cfg, cache)                       # layer kinds and shapes
    pools = hf.Pools(spec, num_blocks=256, num_slots=8, tokens_per_block=a.block,
                     device="cpu" if a.pools == "host" else a.device)
    return hf_models, hf, model, cfg, spec, pools


def prefill_main(a, meta):
    import kvferry
    hf_models, hf, model, cfg, spec, pools = setup(a)
    held = {}
    with kvferry.Client(a.socket, name="hf prefill") as c:
        c.register(pools.layout(a.instance, "context"))
        for q, n in enumerate(lengths(a.requests)):
            cache, first, _ = hf_models.prefill(model, cfg, hf_models.prompt(1000 + q, n))
            req = pools.alloc(n)
            pools.export(cache, req)                            # the cache into blocks + slot
            key = "hf-%s-%d" % (a.model, q)
            c.send(key, req.items)                              # untouched until SENT
            held[key] = req
            meta.write(json.dumps({"key": key, "tokens": n, "first": int(first),
                                   "digest": hf.digest(hf.sequence_tensors(cache, spec))}) + "\n")
            meta.flush()
        for key, ev in c.wait(list(held), 120).items():
            pools.free(held.pop(key))                           # SENT: reuse
    print("prefill: %d requests SENT (%s)" % (a.requests, spec.describe()))


def decode_main(a, meta):
    import torch
    import kvferry
    hf_models, hf, model, cfg, spec, pools = setup(a)
    ok = 0
    with kvferry.Client(a.socket, name="hf decode") as c:
        c.register(pools.layout("hf-decode", "generation"))
        for line in meta:
            m = json.loads(line)
            req = pools.alloc(m["tokens"])
            c.recv(m["key"], a.ctx_instance, req.items, ctx_home=a.ctx_home, tokens=m["tokens"])
            c.wait(m["key"], 60)                                # DONE, or TransferError
            got = pools.gather(req)
            cache = hf.fill_cache(hf_models.new_cache(cfg), got, a.device, spec)
            pools.free(req)
            first = torch.tensor([[m["first"]]])
            toks, logits = hf_models.greedy(model, cache, first, a.steps)
            # the unsplit run: prefill and decode here
            ref_cache, ref_first, _ = hf_models.prefill(
                model, cfg, hf_models.prompt(1000 + int(m["key"].rsplit("-", 1)[1]), m["tokens"]))
            want, want_logits = hf_models.greedy(model, ref_cache, ref_first, a.steps)
            same = (toks == want and int(ref_first) == m["first"] and
                    all(torch.equal(x, y) for x, y in zip(logits, want_logits)))
            if hf.digest(got) != m["digest"] or not same:
                sys.exit("decode: %s (%d tokens) differs from the unsplit run: tokens %s vs %s"
                         % (m["key"], m["tokens"], toks, want))
            print("%s: %d prompt tokens, %d decoded tokens equal, logits bitwise equal"
                  % (m["key"], m["tokens"], len(toks)))
            ok += 1
    print("decode: %d/%d requests equal the unsplit run" % (ok, a.requests))
    if ok != a.requests:
        sys.exit(1)


def run_all(a):
    import kvfharness
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, os.path.join(kvfharness.ROOT, "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("KVFERRY_LIB", os.path.join(kvfharness.BUILD, "libkvferry.so"))
    me = [sys.executable, os.path.abspath(__file__), "--model", a.model, "--device", a.device,
          "--pools", a.pools, "--requests", str(a.requests), "--steps", str(a.steps)]
    with kvfharness.Cluster(two=a.two_daemons) as cl:
        r, w = os.pipe()                                        # the router's metadata
        pre = subprocess.Popen(me + ["prefill", "--socket", cl.a.sock, "--meta-fd", str(w),
                                     "--block", "16"], env=env, pass_fds=(w,))
        os.close(w)
        dec_args = me + ["decode", "--socket", cl.b.sock, "--meta-fd", str(r), "--block", "32"]
        if a.two_daemons:
            dec_args += ["--ctx-home", cl.a.home]
        dec = subprocess.Popen(dec_args, env=env, pass_fds=(r,))
        os.close(r)
        rc_dec, rc_pre = dec.wait(600), pre.wait(600)
        if rc_dec or rc_pre:
            for d in cl.daemons:
                print("---- kvferryd log %s\n%s" % (d.dir, d.tail()), file=sys.stderr)
            sys.exit("hf_disagg failed: prefill exit %d, decode exit %d" % (rc_pre, rc_dec))
    print("hf_disagg ok (%s, %s)" % (a.model, "two daemons" if a.two_daemons else "one daemon"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", nargs="?", choices=("prefill", "decode"))
    ap.add_argument("--model", default="qwen3-next")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pools", default="host", choices=("host", "device"))
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--two-daemons", action="store_true")
    ap.add_argument("--socket")
    ap.add_argument("--instance", default="hf-prefill")
    ap.add_argument("--ctx-instance", default="hf-prefill")
    ap.add_argument("--ctx-home")
    ap.add_argument("--meta-fd", type=int)
    ap.add_argument("--block", type=int, default=16)
    a = ap.parse_args()
    if a.role == "prefill":
        with os.fdopen(a.meta_fd, "w") as meta:
            prefill_main(a, meta)
    elif a.role == "decode":
        with os.fdopen(a.meta_fd) as meta:
            decode_main(a, meta)
    else:
        run_all(a)


if __name__ == "__main__":
    main()
