#!/usr/bin/env python3
"""Runs the example end to end: kvferryd from this checkout's build (one daemon, or two with
--two-daemons: the prefill registers at daemon A, the decode at daemon B and reads through A's
listen address), a prefill process and a decode process (prefill.py, decode.py).
    python3 examples/python/run.py [--two-daemons] [--requests N]"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")]
import kvfharness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--two-daemons", action="store_true")
    ap.add_argument("--requests", type=int, default=8)
    a = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, os.path.join(kvfharness.ROOT, "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("KVFERRY_LIB", os.path.join(kvfharness.BUILD, "libkvferry.so"))
    with kvfharness.Cluster(two=a.two_daemons) as cl:
        n = str(a.requests)
        pre = subprocess.Popen([sys.executable, os.path.join(HERE, "prefill.py"), "--socket",
                                cl.a.sock, "--requests", n], env=env)
        dec_args = [sys.executable, os.path.join(HERE, "decode.py"), "--socket", cl.b.sock,
                    "--requests", n]
        if a.two_daemons:
            dec_args += ["--ctx-home", cl.a.home]
        rc_dec = subprocess.call(dec_args, env=env)
        rc_pre = pre.wait(120)
        if rc_dec or rc_pre:
            for d in cl.daemons:
                print("---- kvferryd log %s\n%s" % (d.dir, d.tail()), file=sys.stderr)
            sys.exit("example failed: prefill exit %d, decode exit %d" % (rc_pre, rc_dec))
    print("example ok (%s)" % ("two daemons" if a.two_daemons else "one daemon"))


if __name__ == "__main__":
    main()
